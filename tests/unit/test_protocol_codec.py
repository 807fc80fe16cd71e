"""Property tests of the XDR codec: round trips of every packet type, and
fuzzing (random and mutated bytes, truncations) where only ProtocolError may
come out of the decoder."""

from __future__ import annotations

import math
import struct
from dataclasses import fields, is_dataclass

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from elvin.errors import ProtocolError
from elvin.keys import Keys, KeyScheme
from elvin.protocol import (
    PACKET_CLASSES,
    ConfConn,
    ConnRply,
    ConnRqst,
    Disconn,
    DisconnRply,
    DisconnRqst,
    DropWarn,
    FrameDecoder,
    Nack,
    NotifyDeliver,
    NotifyEmit,
    QnchAddRqst,
    QnchDelRqst,
    QnchModRqst,
    QnchRply,
    QosRply,
    QosRqst,
    SecRply,
    SecRqst,
    SubAddNotify,
    SubAddRqst,
    SubDelNotify,
    SubDelRqst,
    SubModNotify,
    SubModRqst,
    SubRply,
    TestConn,
    UNotify,
    decode_ast,
    decode_packet,
    encode_ast,
    encode_attributes,
    encode_packet,
    frame,
    frame_notify_deliver,
)
from elvin.subscription.ast import LEAF_KINDS, Kind, Node
from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------
# strategies

texts = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                max_size=24)
names = texts
id32 = st.integers(0, 2**32 - 1)
id64 = st.integers(0, 2**64 - 1)
uint8 = st.integers(0, 255)

values = st.one_of(
    st.integers(INT32_MIN, INT32_MAX),
    st.integers(INT64_MIN, INT64_MAX),                       # big ones travel as int64
    st.integers(-1000, 1000).map(Int64),                     # small int64 stay int64
    st.integers(INT64_MIN, INT64_MAX).map(Int64),
    st.floats(),                                             # NaN and inf included
    texts,
    st.binary(max_size=40),
)
attributes = st.dictionaries(names, values, max_size=8)


@st.composite
def keys(draw):
    sets = {}
    for scheme in draw(st.lists(st.sampled_from([1, 2, 3, 7, 2**32 - 1]), unique=True,
                                max_size=3)):
        count = KeyScheme(scheme).set_count if scheme in (1, 2, 3) else draw(
            st.integers(1, 3))
        sets[scheme] = tuple(draw(st.frozensets(st.binary(max_size=24), max_size=3))
                             for _ in range(count))
    return Keys(sets)


def leaf_nodes():
    return st.one_of(
        names.map(lambda v: Node(Kind.NAME, value=v)),
        texts.map(lambda v: Node(Kind.STRING, value=v)),
        st.integers(INT32_MIN, INT32_MAX).map(lambda v: Node(Kind.INT32, value=v)),
        st.integers(INT64_MIN, INT64_MAX).map(lambda v: Node(Kind.INT64, value=Int64(v))),
        st.floats(allow_nan=False).map(lambda v: Node(Kind.REAL64, value=v)),
    )


INTERIOR_KINDS = [k for k in Kind if k not in LEAF_KINDS]
asts = st.recursive(
    leaf_nodes(),
    lambda children: st.builds(Node, st.sampled_from(INTERIOR_KINDS),
                               st.lists(children, max_size=3).map(tuple)),
    max_leaves=12,
)
id64s = st.lists(id64, max_size=4).map(tuple)
name_tuples = st.lists(names, max_size=4).map(tuple)

PACKETS = {
    UNotify: st.builds(UNotify, uint8, uint8, attributes, st.booleans(), keys()),
    Nack: st.builds(Nack, id32, st.integers(0, 65535), texts,
                    st.lists(values, max_size=4).map(tuple)),
    ConnRqst: st.builds(ConnRqst, id32, uint8, uint8, attributes, keys(), keys()),
    ConnRply: st.builds(ConnRply, id32, attributes),
    DisconnRqst: st.builds(DisconnRqst, id32),
    DisconnRply: st.builds(DisconnRply, id32),
    Disconn: st.builds(Disconn, st.integers(INT32_MIN, INT32_MAX), texts),
    SecRqst: st.builds(SecRqst, id32, keys(), keys(), keys(), keys()),
    SecRply: st.builds(SecRply, id32),
    QosRqst: st.builds(QosRqst, id32, attributes),
    QosRply: st.builds(QosRply, id32, attributes),
    DropWarn: st.just(DropWarn()),
    TestConn: st.just(TestConn()),
    ConfConn: st.just(ConfConn()),
    NotifyEmit: st.builds(NotifyEmit, attributes, st.booleans(), keys()),
    NotifyDeliver: st.builds(NotifyDeliver, attributes, id64s, id64s),
    SubAddRqst: st.builds(SubAddRqst, id32, texts, st.booleans(), keys()),
    SubModRqst: st.builds(SubModRqst, id32, id64, texts, st.booleans(), keys(), keys()),
    SubDelRqst: st.builds(SubDelRqst, id32, id64),
    SubRply: st.builds(SubRply, id32, id64),
    QnchAddRqst: st.builds(QnchAddRqst, id32, name_tuples, st.booleans(), keys()),
    QnchModRqst: st.builds(QnchModRqst, id32, id64, name_tuples, name_tuples, st.booleans(),
                           keys(), keys()),
    QnchDelRqst: st.builds(QnchDelRqst, id32, id64),
    QnchRply: st.builds(QnchRply, id32, id64),
    SubAddNotify: st.builds(SubAddNotify, id64s, id64s, id64, asts),
    SubModNotify: st.builds(SubModNotify, id64s, id64s, id64, asts),
    SubDelNotify: st.builds(SubDelNotify, id64s, id64),
}
any_packet = st.one_of(*PACKETS.values())


def test_every_packet_class_has_a_strategy():
    assert set(PACKETS) == set(PACKET_CLASSES.values())


# ---------------------------------------------------------------------------
# comparing packets exactly: value types matter (int vs Int64), floats by bits


def canon(value):
    if type(value) is float:
        return ("float", struct.pack(">d", value))
    if isinstance(value, dict):
        return ("dict", tuple((k, canon(v)) for k, v in value.items()))
    if isinstance(value, tuple):
        return ("tuple", tuple(canon(v) for v in value))
    if isinstance(value, Keys):
        return ("keys", tuple(sorted((s, tuple(tuple(sorted(ks)) for ks in sets))
                                     for s, sets in value.sets.items())))
    if isinstance(value, Node):
        return ("node", value.kind, canon(value.value), canon(value.children))
    if is_dataclass(value):
        return (type(value).__name__,
                tuple((f.name, canon(getattr(value, f.name))) for f in fields(value)))
    return (type(value).__name__, value)


def expected_value(value):
    """What a value decodes as: ints beyond int32 come back as Int64."""
    if type(value) is int and not INT32_MIN <= value <= INT32_MAX:
        return Int64(value)
    return value


def expected_keys(keys: Keys) -> Keys:
    """Trailing empty key sets are not kept (a missing set reads as empty)."""
    out = {}
    for scheme, sets in keys.sets.items():
        sets = list(sets)
        while sets and not sets[-1]:
            sets.pop()
        out[scheme] = tuple(sets)
    return Keys(out)


def expected(packet):
    changes = {}
    for f in fields(packet):
        value = getattr(packet, f.name)
        if isinstance(value, dict):
            changes[f.name] = {k: expected_value(v) for k, v in value.items()}
        elif isinstance(value, Keys):
            changes[f.name] = expected_keys(value)
        elif f.name == "args" and isinstance(value, tuple):
            changes[f.name] = tuple(expected_value(v) for v in value)
    return type(packet)(**{f.name: changes.get(f.name, getattr(packet, f.name))
                           for f in fields(packet)})


# ---------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("cls", sorted(PACKETS, key=lambda c: c.ID), ids=lambda c: c.__name__)
def test_round_trip(cls):
    @SETTINGS
    @given(PACKETS[cls])
    def check(packet):
        body = encode_packet(packet)
        assert len(body) % 4 == 0
        assert struct.unpack(">i", body[:4])[0] == cls.ID
        decoded = decode_packet(body)
        assert type(decoded) is cls
        assert canon(decoded) == canon(expected(packet))
        # and the decoded packet encodes back to the very same bytes
        assert encode_packet(decoded) == encode_packet(expected(packet))

    check()


@SETTINGS
@given(attributes)
def test_decoded_value_types(attrs):
    decoded = decode_packet(encode_packet(NotifyEmit(attrs))).attributes
    for name, value in attrs.items():
        got = decoded[name]
        if type(value) is int:
            assert type(got) is (int if INT32_MIN <= value <= INT32_MAX else Int64)
        else:
            assert type(got) is type(value)
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(got)
        else:
            assert got == value


@SETTINGS
@given(asts)
def test_ast_round_trip(node):
    data = encode_ast(node)
    decoded, end = decode_ast(data)
    assert end == len(data)
    assert decoded == node


@SETTINGS
@given(attributes, id64s, id64s)
@example({"Seq": 5, "Text": "p-1"}, (), (7,))          # the one-subscription fast path
@example({"Seq": 5}, (), [2**64 - 1])                  # ... with a list and the largest id64
@example({"Seq": 5}, (3,), (7,))
def test_frame_notify_deliver_matches_the_packet_encoder(attrs, secure, insecure):
    fast = frame_notify_deliver(encode_attributes(attrs), secure, insecure)
    assert fast == frame(NotifyDeliver(attrs, secure, insecure))


@SETTINGS
@given(attributes, id64s, id64s, st.data())
def test_split_notify_deliver_finds_the_parts_and_never_raises(attrs, secure, insecure, data):
    """The mobility proxy keeps the router's NotifyDeliver frames with their
    attributes still encoded: the split finds them exactly, says None for
    a truncated frame or another packet, and never raises on garbage."""
    from elvin.protocol import split_notify_deliver

    body = frame(NotifyDeliver(attrs, secure, insecure))[4:]
    a_start, a_end, got_secure, got_insecure = split_notify_deliver(body, 0, len(body))
    assert body[a_start:a_end] == encode_attributes(attrs)
    assert (tuple(got_secure), tuple(got_insecure)) == (tuple(secure), tuple(insecure))
    cut = data.draw(st.integers(0, len(body) - 1))
    assert split_notify_deliver(body[:cut], 0, cut) is None
    mutated = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    parts = split_notify_deliver(bytes(mutated), 0, len(mutated))
    if parts is not None:
        assert 4 <= parts[0] <= parts[1] <= len(mutated)
    assert split_notify_deliver(frame(TestConn())[4:], 0, 4) is None


@pytest.mark.parametrize("secure, insecure", [((), (-1,)), ((), (2**64,)), ((-1,), (7,)),
                                               ((), ("7",))])
def test_frame_notify_deliver_refuses_ids_that_are_not_id64(secure, insecure):
    with pytest.raises(ValueError, match="subscription ids"):
        frame_notify_deliver(encode_attributes({"Seq": 5}), secure, insecure)


def test_framed_stream_of_every_packet_type():
    @SETTINGS
    @given(st.lists(any_packet, min_size=1, max_size=6), st.integers(1, 64))
    def check(packets, chunk):
        stream = b"".join(frame(p) for p in packets)
        decoder = FrameDecoder()
        out = []
        for i in range(0, len(stream), chunk):
            out += decoder.feed(stream[i:i + chunk])
        assert [canon(p) for p in out] == [canon(expected(p)) for p in packets]
        assert decoder.at_boundary

    check()


# ---------------------------------------------------------------------------
# fuzzing: only ProtocolError may escape, and whatever decodes re-encodes


def decode_or_protocol_error(data: bytes):
    try:
        packet = decode_packet(data)
    except ProtocolError as exc:
        assert str(exc)
        return None
    # anything the decoder accepts must be encodable, and stable
    again = encode_packet(packet)
    assert canon(decode_packet(again)) == canon(packet)
    return packet


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(data):
    decode_or_protocol_error(data)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(PACKET_CLASSES)), st.binary(max_size=120))
def test_random_bodies_behind_a_valid_packet_id(pid, rest):
    decode_or_protocol_error(struct.pack(">i", pid) + rest)


INTERESTING_WORDS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                     0xFFFFFFFE, 0x10000, 0xFFFF, 256, 255, 64, 65]


@st.composite
def mutated(draw):
    body = bytearray(encode_packet(draw(any_packet)))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["word", "byte", "insert", "delete", "truncate"]))
        if action == "word" and len(body) >= 4:
            at = draw(st.integers(0, len(body) // 4 - 1)) * 4
            body[at:at + 4] = struct.pack(">I", draw(st.sampled_from(INTERESTING_WORDS)))
        elif action == "byte" and body:
            at = draw(st.integers(0, len(body) - 1))
            body[at] = draw(st.integers(0, 255))
        elif action == "insert":
            at = draw(st.integers(0, len(body)))
            body[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete" and body:
            at = draw(st.integers(0, len(body) - 1))
            del body[at:at + draw(st.integers(1, 8))]
        elif action == "truncate" and body:
            del body[draw(st.integers(0, len(body) - 1)):]
    return bytes(body)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_packets(data):
    decode_or_protocol_error(data)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated(), min_size=1, max_size=4), st.integers(1, 50))
def test_mutated_frames_through_the_frame_decoder(bodies, chunk):
    # real frame headers around mutated bodies, plus a raw garbage run
    stream = b"".join(struct.pack(">I", len(b)) + b for b in bodies)
    decoder = FrameDecoder()
    for i in range(0, len(stream), chunk):
        try:
            decoder.feed(stream[i:i + chunk])
        except ProtocolError:
            if decoder.broken:
                return


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=8))
def test_random_chunks_through_the_frame_decoder(chunks):
    decoder = FrameDecoder()
    for chunk in chunks:
        try:
            decoder.feed(chunk)
        except ProtocolError:
            pass


SAMPLES = [
    NotifyEmit({"a": "b", "n": 1, "big": Int64(2**40), "f": 1.5, "o": b"\x01\x02\x03"},
               False, Keys.of(KeyScheme.SHA1_PRODUCER, [b"secret"])),
    NotifyDeliver({"Message": "hello", "x": 3}, (1, 2**64 - 1), (7,)),
    ConnRqst(1, 4, 0, {"Packet.Max-Length": 8192, "Vendor": "us"},
             Keys.of(KeyScheme.SHA1_DUAL, [b"p"], [b"c"]), Keys.of(3, [b"k"])),
    Nack(5, 2101, "parse error at %1: %2", (3, "&&", Int64(9), 2.5, b"z")),
    SubModRqst(3, 99, "a == 1", False, Keys.of(2, [b"x"]), Keys.of(3, [b"y"])),
    QnchModRqst(4, 8, ("a", "b"), ("c",), True, Keys.of(2, [b"k"]), Keys()),
    SubAddNotify((1, 2), (3,), 77, Node(Kind.AND, (
        Node(Kind.EQUALS, (Node(Kind.NAME, value="x"), Node(Kind.INT32, value=1))),
        Node(Kind.FUNC_BEGINS_WITH, (Node(Kind.NAME, value="s"),
                                     Node(Kind.STRING, value="pre"))),
        Node(Kind.LESS_THAN, (Node(Kind.NAME, value="r"), Node(Kind.REAL64, value=2.0))),
        Node(Kind.NOT, (Node(Kind.FUNC_REQUIRE, (Node(Kind.NAME, value="q"),)),)),
        Node(Kind.GREATER_THAN, (Node(Kind.NAME, value="i"),
                                 Node(Kind.INT64, value=Int64(5)))),
        Node(Kind.EMPTY),
    ))),
    SubDelNotify((1, 2, 3), 4),
    UNotify(4, 0, {"a": 1}, True, Keys()),
    Disconn(2, "elvin://elsewhere"),
    SecRqst(9, Keys.of(1, [b"a"], [b"b"]), Keys(), Keys.of(2, [b"c"]), Keys.of(3, [b"d"])),
    QnchAddRqst(3, ("a", "bc"), False, Keys()),
]


@pytest.mark.parametrize("packet", SAMPLES, ids=lambda p: type(p).__name__)
def test_truncation_at_every_offset_is_a_protocol_error(packet):
    body = encode_packet(packet)
    assert canon(decode_packet(body)) == canon(expected(packet))
    for cut in range(len(body)):
        with pytest.raises(ProtocolError):
            decode_packet(body[:cut])


@pytest.mark.parametrize("packet", SAMPLES, ids=lambda p: type(p).__name__)
def test_trailing_bytes_are_a_protocol_error(packet):
    body = encode_packet(packet)
    for extra in (b"\0\0\0\0", b"\0\0\0\0" * 3, b"\x01"):
        with pytest.raises(ProtocolError, match="trailing|truncated"):
            decode_packet(body + extra)


@pytest.mark.parametrize("packet", SAMPLES, ids=lambda p: type(p).__name__)
def test_every_single_byte_corruption_is_harmless(packet):
    body = encode_packet(packet)
    for at in range(len(body)):
        for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            data = body[:at] + bytes([byte]) + body[at + 1:]
            decode_or_protocol_error(data)


@pytest.mark.parametrize("depth", [1, 100, 255, 256, 257, 3000, 100_000])
def test_deep_ast_input_cannot_blow_the_stack(depth):
    # SubAddNotify whose AST is NOT(NOT(NOT(...))) nested `depth` times and never
    # closed: either truncated or too deep, never a RecursionError
    data = (b"\0\0\0\x54" + b"\0\0\0\0" * 2 + b"\0" * 8
            + b"\0\0\0\x13\0\0\0\x01" * depth)
    with pytest.raises(ProtocolError):
        decode_packet(data)
