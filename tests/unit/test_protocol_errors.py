"""What the decoder rejects, what it says, and where; Limits; encoder errors."""

from __future__ import annotations

import struct
from dataclasses import fields

import pytest

from elvin.errors import ProtocolError
from elvin.keys import Keys
from elvin.protocol import (
    DEFAULT_LIMITS,
    LimitError,
    Limits,
    Nack,
    NotifyEmit,
    QnchAddRqst,
    SubAddNotify,
    SubAddRqst,
    SubRply,
    UNotify,
    decode_ast,
    decode_attributes,
    decode_packet,
    encode_ast,
    encode_attributes,
    encode_packet,
)
from elvin.protocol.limits import FIELD_OPTIONS, LEGACY_OPTION_NAMES, OPTION_FIELDS
from elvin.subscription.ast import Kind, Node
from elvin.values import Int64


def h(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


def w(*words: int) -> bytes:
    return b"".join(struct.pack(">I", x & 0xFFFFFFFF) for x in words)


def s(text: bytes) -> bytes:
    """An XDR string/opaque."""
    return w(len(text)) + text + b"\0" * (-len(text) & 3)


def rejects(data: bytes, match: str, offset: int | None = None,
            limits: Limits = DEFAULT_LIMITS, cls=ProtocolError) -> ProtocolError:
    with pytest.raises(cls, match=match) as info:
        decode_packet(data, limits)
    if offset is not None:
        assert info.value.offset == offset, str(info.value)
    return info.value


EMIT = w(56)   # NotifyEmit packet id


def emit_with(attrs_bytes: bytes, count: int = 1) -> bytes:
    return EMIT + w(count) + attrs_bytes + w(1, 0)


# -- structure -----------------------------------------------------------------

def test_too_short_for_a_packet_id():
    for data in (b"", b"\0", b"\0\0\0"):
        rejects(data, "too short", 0)


def test_unknown_packet_id():
    err = rejects(w(99), "unknown packet type 99", 0)
    assert err.packet_id == 99
    rejects(w(-1), "unknown packet type -1", 0)
    rejects(w(0), "unknown packet type 0", 0)


def test_trailing_garbage_names_the_offset():
    rejects(w(63) + b"\0\0\0\0", "4 bytes of trailing data after a complete TestConn", 4)
    rejects(encode_packet(SubRply(1, 2)) + b"x", "trailing", 16)


def test_truncation_is_reported_at_the_end_of_the_data():
    data = encode_packet(SubRply(1, 2))[:-1]
    rejects(data, "truncated SubRply packet", len(data))
    # a string whose padding is missing
    data = encode_packet(SubAddRqst(1, "abc", True))
    rejects(data[:16], "exceeds|truncated")


def test_unknown_value_typecode():
    err = rejects(emit_with(s(b"a") + w(6, 0)), "unknown value typecode 6", 16)
    assert "'a'" in str(err)
    rejects(emit_with(s(b"a") + w(0, 0)), "unknown value typecode 0", 16)
    rejects(emit_with(s(b"a") + w(-5, 0)), "unknown value typecode -5", 16)


def test_booleans_must_be_zero_or_one():
    rejects(EMIT + w(0, 2, 0), "deliver_insecure: boolean must be 0 or 1, not 2", 8)
    data = encode_packet(SubAddRqst(1, "a", True))
    rejects(data[:16] + w(0xFFFFFFFF) + data[20:], "accept_insecure: boolean", 16)


def test_uint8_and_uint16_ranges():
    rejects(w(32, 256, 0, 0, 1, 0), "client_major_version: 256 is out of range", 4)
    rejects(w(32, 4, 0x100000000 - 1, 0, 1, 0), "client_minor_version", 8)
    rejects(w(48, 1, 65536) + s(b"") + w(0), "Nack error: 65536 is out of range", 8)
    assert decode_packet(w(48, 1, 65535) + s(b"") + w(0)) == Nack(1, 65535, "")


def test_ids_are_unsigned_whatever_the_bit_pattern():
    assert decode_packet(w(61, 0xFFFFFFFF, 0x80000000, 0)) == SubRply(2**32 - 1, 2**63)


def test_negative_counts():
    rejects(EMIT + w(-1), "negative attribute count -1", 4)
    rejects(w(48, 1, 1) + s(b"") + w(-3), "negative array count -3", 16)


def test_counts_are_checked_against_the_remaining_bytes_before_allocating():
    # 2**31-1 attributes announced in a 16-byte packet: refused at once
    rejects(EMIT + w(0x7FFFFFFF, 1, 0), "attribute count 2147483647 cannot fit in the 8 "
            "bytes remaining", 4)
    rejects(w(57, 0, 0x10000000), "cannot fit", 8)
    # keys: a million schemes in a few bytes
    rejects(EMIT + w(0, 1, 1_000_000, 0), "cannot fit", 12)


def test_string_lengths_beyond_the_data():
    rejects(EMIT + w(1, 0xFFFFFFFF, 0, 0, 0), "name length 4294967295 exceeds the 12 bytes",
            8)
    rejects(emit_with(s(b"a") + w(4, 0x7FFFFFFF)), "string length 2147483647", 20)
    rejects(emit_with(s(b"a") + w(4, 0xFFFFFFFF)), "string length 4294967295", 20)
    rejects(emit_with(s(b"a") + w(5, 0x80000000)), "opaque length 2147483648", 20)


def test_invalid_utf8_says_where():
    # name "a\xff": the bad byte is at offset 12 + 1
    rejects(emit_with(s(b"a\xff") + w(1, 0)), "invalid UTF-8 in NotifyEmit attributes: "
            "attribute name", 13)
    rejects(emit_with(s(b"a") + w(4) + s(b"ok\xc3")), "invalid UTF-8.*value of 'a'", 26)
    # surrogates encoded in UTF-8 (CESU) are not UTF-8
    rejects(emit_with(s(b"a") + w(4) + s(b"\xed\xa0\x80")), "invalid UTF-8", 24)
    # overlong encoding of "/"
    rejects(emit_with(s(b"a") + w(4) + s(b"\xc0\xaf")), "invalid UTF-8", 24)


def test_nul_in_strings_says_where():
    rejects(emit_with(s(b"ab\0") + w(1, 0)), "NUL character in .*attribute name", 14)
    rejects(emit_with(s(b"a") + w(4) + s(b"x\0")), "NUL character in .*value of 'a'", 25)
    rejects(w(58, 1) + s(b"\0") + w(1, 0), "NUL character in SubAddRqst expression", 12)


def test_errors_carry_packet_id_and_xid_for_nacks():
    err = rejects(w(58, 77) + s(b"\xff") + w(1, 0), "invalid UTF-8")
    assert err.packet_id == 58
    assert err.xid == 77
    err = rejects(EMIT + w(-1), "negative")
    assert err.packet_id == 56 and err.xid is None


def test_duplicate_attribute_names_keep_the_last_value():
    data = emit_with(s(b"a") + w(1, 1) + s(b"a") + w(1, 2), count=2)
    assert decode_packet(data).attributes == {"a": 2}


def test_keys_with_unknown_schemes_and_odd_set_counts_are_kept_for_the_router():
    data = EMIT + w(0, 1) + w(1, 9, 3) + w(1) + s(b"a") + w(0) + w(1) + s(b"b")
    keys = decode_packet(data).keys
    assert keys.sets == {9: (frozenset({b"a"}), frozenset(), frozenset({b"b"}))}


def test_keys_repeated_scheme_is_merged():
    data = EMIT + w(0, 1) + w(2, 2, 1, 1) + s(b"a") + w(2, 1, 1) + s(b"b")
    assert decode_packet(data).keys == Keys.of(2, [b"a", b"b"])


# -- SubAST ---------------------------------------------------------------------

def test_unknown_subast_typecodes():
    prefix = w(84, 0, 0, 0, 1)
    for tc in (6, 7, 14, 99, -1, 67):
        rejects(prefix + w(tc, 0), f"unknown SubAST typecode {tc}", 20)


def test_subast_depth_is_limited_without_recursion():
    node = Node(Kind.NAME, value="x")
    for _ in range(300):
        node = Node(Kind.NOT, (node,))
    data = encode_packet(SubAddNotify((), (), 1, node))
    err = rejects(data, "nesting deeper than 256", cls=LimitError)
    assert err.limit == "max_ast_depth"
    # a generous limit decodes it: the decoder is iterative
    deep = decode_packet(data, Limits(max_ast_depth=10_000))
    assert sum(1 for _ in deep.sub_expr.walk()) == 301


def test_very_deep_ast_encodes_and_decodes_iteratively():
    node = Node(Kind.NAME, value="x")
    for _ in range(5000):
        node = Node(Kind.UNARY_MINUS, (node,))
    data = encode_ast(node)
    decoded, end = decode_ast(data, 0, Limits(max_ast_depth=6000))
    assert end == len(data)
    assert sum(1 for _ in decoded.walk()) == 5001


def test_decode_ast_errors():
    with pytest.raises(ProtocolError, match="truncated SubAST"):
        decode_ast(w(8, 1, 3, 0))   # an int64 child with 4 of its 8 bytes
    with pytest.raises(ProtocolError, match="array count 1000"):
        decode_ast(w(8, 1000, 1))


# -- limits ---------------------------------------------------------------------

def test_limit_max_attributes():
    data = encode_packet(NotifyEmit({"a": 1, "b": 2, "c": 3}))
    err = rejects(data, "3 attributes exceed the limit of 2", 4, Limits(max_attributes=2),
                  LimitError)
    assert err.limit == "max_attributes"
    assert decode_packet(data, Limits(max_attributes=3))


def test_limit_name_string_opaque_lengths():
    data = encode_packet(NotifyEmit({"abcde": "x" * 10, "o": b"y" * 10}))
    err = rejects(data, "name of 5 bytes exceeds the limit of 4", 8,
                  Limits(max_name_length=4), LimitError)
    assert err.limit == "max_name_length"
    err = rejects(data, "string 'abcde' of 10 bytes exceeds the limit of 9", None,
                  Limits(max_string_length=9), LimitError)
    assert err.limit == "max_string_length"
    err = rejects(data, "opaque 'o' of 10 bytes exceeds the limit of 9", None,
                  Limits(max_opaque_length=9), LimitError)
    assert err.limit == "max_opaque_length"
    assert decode_packet(data, Limits(max_name_length=5, max_string_length=10,
                                      max_opaque_length=10))


def test_limit_packet_length():
    data = encode_packet(NotifyEmit({"a": "x" * 100}))
    err = rejects(data, "exceeds the limit", 0, Limits(max_packet_length=64), LimitError)
    assert err.limit == "max_packet_length"


def test_limit_arrays_and_keys():
    data = encode_packet(QnchAddRqst(1, ("a", "b", "c")))
    err = rejects(data, "3 items exceed the limit of 2", None, Limits(max_array_length=2),
                  LimitError)
    assert err.limit == "max_array_length"
    data = encode_packet(NotifyEmit({"a": 1}, True, Keys.of(2, [b"1", b"2", b"3"])))
    err = rejects(data, "key set 0: 3 items exceed the limit of 2", 40, Limits(max_keys=2),
                  LimitError)
    assert err.limit == "max_keys"
    data = encode_packet(NotifyEmit({"a": 1}, True, Keys({2: ({b"1", b"2"},),
                                                           3: ({b"3"},)})))
    err = rejects(data, "more than 2 keys", None, Limits(max_keys=2), LimitError)
    assert err.limit == "max_keys"
    data = encode_packet(Nack(1, 2, "m", (1, 2, 3)))
    rejects(data, "Nack args: 3 items", None, Limits(max_array_length=1), LimitError)


def test_limits_apply_to_the_values_of_nack_args():
    data = encode_packet(Nack(1, 2101, "%1", ("x" * 20,)))
    rejects(data, "string of 20 bytes", None, Limits(max_string_length=10), LimitError)


def test_long_subscription_expressions_are_not_codec_errors():
    # Subscription.Max-Length is the router's to enforce, with a Nack
    data = encode_packet(SubAddRqst(1, "a == " + "1" * 5000, True))
    assert decode_packet(data, Limits(max_string_length=1024)).expression.startswith("a")


def test_limits_from_options():
    limits = Limits.from_options({"Packet.Max-Length": 4096, "Attribute.Max-Count": 16,
                                  "router.attribute.string.max-length": 2048,
                                  "Vendor-Identification": "x",
                                  "Attribute.Name.Max-Length": "64"})
    assert limits.max_packet_length == 4096
    assert limits.max_attributes == 16
    assert limits.max_string_length == 2048
    assert limits.max_name_length == DEFAULT_LIMITS.max_name_length   # not an int
    assert Limits.from_options({}) is DEFAULT_LIMITS
    assert DEFAULT_LIMITS.options()["Packet.Max-Length"] == 2 * 1024 * 1024


def test_limits_from_options_ignores_what_no_packet_could_meet():
    """A peer's options can't make the limits raise: a Packet.Max-Length under
    4 (less than the type field) or not positive is ignored, as garbage."""
    for bad in (-1, 0, 1, 3):
        assert Limits.from_options({"Packet.Max-Length": bad}) is DEFAULT_LIMITS
    assert Limits.from_options({"Packet.Max-Length": 4}).max_packet_length == 4


def test_option_and_field_names_map_both_ways():
    assert {FIELD_OPTIONS[attr]: attr for attr in FIELD_OPTIONS} == OPTION_FIELDS
    assert set(FIELD_OPTIONS) < {f.name for f in fields(Limits)}
    assert "max_keys" not in FIELD_OPTIONS      # no connection option for it
    assert set(LEGACY_OPTION_NAMES.values()) == set(OPTION_FIELDS)


def test_limits_validate_their_fields():
    with pytest.raises(ValueError, match="max_attributes"):
        Limits(max_attributes=-1)
    with pytest.raises(ValueError, match="max_packet_length"):
        Limits(max_packet_length=2)


def test_defaults_are_generous():
    assert DEFAULT_LIMITS.max_packet_length == 2 * 1024 * 1024
    assert DEFAULT_LIMITS.max_attributes >= 1024
    big = {f"attr{i}": "v" * 100 for i in range(1000)}
    assert decode_packet(encode_packet(NotifyEmit(big))).attributes == big


def test_decode_attributes_helper():
    block = encode_attributes({"a": 1, "b": "c"})
    assert decode_attributes(block) == ({"a": 1, "b": "c"}, len(block))
    with pytest.raises(ProtocolError, match="truncated"):
        decode_attributes(block[:-1])


def test_accepts_bytearray_and_memoryview():
    body = encode_packet(SubRply(1, 2))
    assert decode_packet(bytearray(body)) == SubRply(1, 2)
    assert decode_packet(memoryview(b"xx" + body)[2:]) == SubRply(1, 2)


# -- encoder errors --------------------------------------------------------------

@pytest.mark.parametrize(("attrs", "exc", "match"), [
    ({"a": True}, TypeError, "boolean"),
    ({"a": None}, TypeError, "not an Elvin value"),
    ({"a": 2**63}, ValueError, "does not fit"),
    ({"a": "x\0y"}, ValueError, "NUL"),
    ({"a\0": 1}, ValueError, "NUL"),
    ({1: 1}, TypeError, "names are str"),
    ({"a": [1]}, TypeError, "not an Elvin value"),
])
def test_encoder_refuses_bad_values(attrs, exc, match):
    with pytest.raises(exc, match=match):
        encode_packet(NotifyEmit(attrs))


def test_encoder_accepts_value_subclasses_and_buffers():
    class MyStr(str):
        pass

    body = encode_packet(NotifyEmit({"a": MyStr("x"), "b": bytearray(b"yz"),
                                     "c": memoryview(b"w"), MyStr("d"): 1}))
    assert decode_packet(body).attributes == {"a": "x", "b": b"yz", "c": b"w", "d": 1}


@pytest.mark.parametrize(("packet", "match"), [
    (SubRply(-1, 1), "xid -1 is out of range"),
    (SubRply(1, 2**64), "subscription_id .* out of range"),
    (Nack(1, 70000, "m"), "Nack error 70000 is out of range"),
    (UNotify(256, 0, {}), "client_major_version 256"),
    (SubAddRqst(1, "a\0b"), "NUL"),
    (QnchAddRqst(1, "abc"), "not a str"),
])
def test_encoder_refuses_bad_fields(packet, match):
    with pytest.raises((TypeError, ValueError), match=match):
        encode_packet(packet)


def test_encoder_refuses_bad_ast_values():
    with pytest.raises(ValueError, match="int32 value"):
        encode_ast(Node(Kind.INT32, value=2**31))
    with pytest.raises(TypeError, match="real64"):
        encode_ast(Node(Kind.REAL64, value="1.0"))
    with pytest.raises(TypeError, match="str"):
        encode_ast(Node(Kind.NAME, value=1))


def test_encoder_refuses_non_packets():
    with pytest.raises(TypeError, match="not an Elvin packet"):
        encode_packet(object())  # type: ignore[arg-type]


def test_big_int_encodes_as_int64_and_int64_forces_it():
    data = encode_packet(NotifyEmit({"a": 2**40, "b": Int64(1)}))
    attrs = decode_packet(data).attributes
    assert type(attrs["a"]) is Int64 and attrs["a"] == 2**40
    assert type(attrs["b"]) is Int64 and attrs["b"] == 1
