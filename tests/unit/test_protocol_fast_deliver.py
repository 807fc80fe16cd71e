"""The NotifyDeliver fast path (``decode_notify_deliver``), its use by
``FrameDecoder.feed``, and the attribute-name cache of the shared attribute
loop: whatever the fast path returns must be what ``decode_packet`` returns,
and whatever it declines must still give ``decode_packet``'s exact error."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elvin.errors import ProtocolError
from elvin.protocol import (
    DEFAULT_LIMITS,
    FrameDecoder,
    Limits,
    NotifyDeliver,
    NotifyEmit,
    SubRply,
    decode_packet,
    encode_packet,
    frame,
)
from elvin.protocol.limits import LimitError
from elvin.protocol.xdr import (
    decode_notify_deliver,
    encode_attributes,
    frame_notify_deliver,
    notify_deliver_head,
    one_insecure_id,
)
from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

texts = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                max_size=20)
values = st.one_of(
    st.integers(INT32_MIN, INT32_MAX),
    st.integers(INT64_MIN, INT64_MAX).map(Int64),
    st.floats(),
    texts,
    st.binary(max_size=30),
)
attributes = st.dictionaries(texts, values, max_size=8)
ids = st.lists(st.integers(0, 2**64 - 1), max_size=3).map(tuple)

NOTIFICATION = {"Bench": "throughput", "Seq": 7, "Price": 101.25,
                "Volume": Int64(1_000_000), "Symbol": "ELVN", "Payload": b"\0\1\2\3"}


def same(a, b) -> bool:
    """Equal packets, NaN included (compared through their encoding), with
    values of the same Python types (int vs Int64, str vs bytes)."""
    return (type(a) is type(b) and encode_packet(a) == encode_packet(b)
            and [type(v) for v in a.attributes.values()]
            == [type(v) for v in b.attributes.values()])


def general_error(body: bytes, limits: Limits = DEFAULT_LIMITS) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode_packet(body, limits)
    return info.value


@SETTINGS
@given(attributes, ids, ids, st.binary(max_size=12), st.binary(max_size=12))
def test_fast_path_equals_the_general_decoder(attrs, secure, insecure, before, after):
    body = encode_packet(NotifyDeliver(attrs, secure, insecure))
    # the body in the middle of a bigger buffer, as in a received chunk
    data = before + body + after
    fast = decode_notify_deliver(data, len(before), len(before) + len(body))
    general = decode_packet(body)
    if fast is None:
        # declined only for more than one id in a list
        assert len(secure) > 1 or len(insecure) > 1
    else:
        assert same(fast, general)


def test_the_common_shapes_take_the_fast_path():
    for secure, insecure in [((), (1,)), ((5,), ()), ((2**64 - 1,), (3,)), ((), ())]:
        body = encode_packet(NotifyDeliver(NOTIFICATION, secure, insecure))
        packet = decode_notify_deliver(body, 0, len(body))
        assert packet is not None and same(packet, decode_packet(body))
        assert packet == decode_packet(body) and hash(packet.secure_matches) is not None
        assert packet.secure_matches == secure and packet.insecure_matches == insecure
        with pytest.raises(dataclasses.FrozenInstanceError):
            packet.attributes = {}        # built without __init__, still frozen


def test_other_packets_are_declined():
    for packet in (NotifyEmit(NOTIFICATION), SubRply(1, 2)):
        body = encode_packet(packet)
        assert decode_notify_deliver(body, 0, len(body)) is None


@pytest.mark.parametrize("cut", range(1, 40))
def test_truncated_bodies_are_declined_and_the_general_error_stands(cut):
    body = encode_packet(NotifyDeliver(NOTIFICATION, (), (1,)))
    short = body[:-cut]
    follower = encode_packet(NotifyDeliver(NOTIFICATION, (), (2,)))
    # the next frame's bytes follow: reading past `end` must not be accepted
    assert decode_notify_deliver(short + follower, 0, len(short)) is None
    assert decode_notify_deliver(short, 0, len(short)) is None
    error = general_error(short)
    assert "truncated" in str(error) or "exceeds" in str(error) or "cannot fit" in str(error)


def test_trailing_bytes_are_declined():
    body = encode_packet(NotifyDeliver(NOTIFICATION, (), (1,))) + b"\0\0\0\0"
    assert decode_notify_deliver(body, 0, len(body)) is None
    assert "trailing" in str(general_error(body))


@SETTINGS
@given(st.binary(max_size=120))
def test_garbage_behind_the_notify_deliver_id_never_raises(rest):
    body = struct.pack(">i", 57) + rest
    packet = decode_notify_deliver(body, 0, len(body))
    try:
        general = decode_packet(body)
    except ProtocolError:
        assert packet is None
    else:
        assert packet is None or same(packet, general)


def test_limits_are_enforced_by_the_general_path():
    body = encode_packet(NotifyDeliver(NOTIFICATION, (), (1,)))
    for limits, name in [(Limits(max_attributes=2), "max_attributes"),
                         (Limits(max_string_length=3), "max_string_length"),
                         (Limits(max_name_length=4), "max_name_length"),
                         (Limits(max_array_length=0), "max_array_length")]:
        assert decode_notify_deliver(body, 0, len(body), limits) is None
        error = general_error(body, limits)
        assert isinstance(error, LimitError) and error.limit == name


def test_a_cached_name_is_still_checked_against_the_limits():
    long_name = "a-rather-long-attribute-name"
    body = encode_packet(NotifyDeliver({long_name: 1}, (), (1,)))
    assert decode_packet(body).attributes == {long_name: 1}      # now cached
    error = general_error(body, Limits(max_name_length=8))
    assert isinstance(error, LimitError) and error.limit == "max_name_length"
    assert decode_notify_deliver(body, 0, len(body), Limits(max_name_length=8)) is None


def test_bad_names_are_never_cached():
    good = encode_packet(NotifyDeliver({"ab\u00e9": 1}, (), (1,)))
    bad_utf8 = good.replace("ab\u00e9".encode(), b"ab\xff\xfe")
    with_nul = good.replace("ab\u00e9".encode(), b"ab\0\0")
    for body, message in [(bad_utf8, "invalid UTF-8"), (with_nul, "NUL")]:
        for _ in range(2):       # the second time must fail the same way
            assert message in str(general_error(body))
            assert decode_notify_deliver(body, 0, len(body)) is None


def test_frame_decoder_uses_the_fast_path_and_keeps_errors_exact():
    good = [NotifyDeliver(dict(NOTIFICATION, Seq=i), (), (1,)) for i in range(3)]
    bad_body = encode_packet(good[0])[:-4]               # truncated id list
    bad = struct.pack(">I", len(bad_body)) + bad_body
    stream = frame(good[0]) + bad + frame(good[1]) + frame(good[2])
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError) as info:
        decoder.feed(stream)
    assert str(info.value) == str(general_error(bad_body))
    assert info.value.offset == general_error(bad_body).offset      # packet-relative
    assert [same(a, b) for a, b in zip(info.value.packets, good[:1], strict=True)] == [True]
    rest = decoder.feed(b"")
    assert len(rest) == 2 and all(same(a, b) for a, b in zip(rest, good[1:], strict=True))
    assert decoder.at_boundary


@SETTINGS
@given(st.lists(st.tuples(attributes, ids, ids), min_size=1, max_size=5),
       st.integers(1, 97))
def test_frame_decoder_any_chunking_equals_decode_packet(items, chunk):
    packets = [NotifyDeliver(a, s, i) for a, s, i in items]
    stream = b"".join(frame(p) for p in packets)
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(stream), chunk):
        out += decoder.feed(stream[i:i + chunk])
    assert len(out) == len(packets)
    assert all(same(a, decode_packet(encode_packet(b))) for a, b in zip(out, packets,
                                                                        strict=True))
    assert decoder.at_boundary


def test_only_bytes_take_the_fast_path():
    # slicing a bytearray would hand out bytearray opaques: declined
    body = encode_packet(NotifyDeliver(NOTIFICATION, (), (1,)))
    assert decode_notify_deliver(bytearray(body), 0, len(body)) is None
    assert type(decode_packet(bytearray(body)).attributes["Payload"]) is bytes


@SETTINGS
@given(attributes, st.integers(0, 2**64 - 1))
def test_a_fan_out_frame_from_the_shared_head_is_the_whole_frame(attrs, sub_id):
    """The router builds ``notify_deliver_head`` once per notification and
    adds each subscriber's id: byte for byte what ``frame_notify_deliver``
    writes, and what decodes to the NotifyDeliver with that one id."""
    block = encode_attributes(attrs)
    data = notify_deliver_head(block) + one_insecure_id(sub_id)
    assert data == frame_notify_deliver(block, (), (sub_id,))
    packet = decode_packet(data[4:])
    assert same(packet, NotifyDeliver(attrs, (), (sub_id,)))
