"""TCP framing (spec 8.2.1) and the incremental FrameDecoder."""

from __future__ import annotations

import struct

import pytest

from elvin.errors import ProtocolError
from elvin.protocol import (
    ConfConn,
    FrameDecoder,
    LimitError,
    Limits,
    NotifyDeliver,
    NotifyEmit,
    SubRply,
    TestConn,
    encode_packet,
    frame,
    frame_body,
)

PACKETS = [
    NotifyEmit({"Message": "hello", "n": 1}),
    SubRply(1, 2),
    TestConn(),
    NotifyDeliver({"x": b"\x00" * 33}, (1,), (2, 3)),
    ConfConn(),
]
STREAM = b"".join(frame(p) for p in PACKETS)


def test_frame_is_length_then_body():
    body = encode_packet(PACKETS[0])
    assert frame(PACKETS[0]) == struct.pack(">I", len(body)) + body
    assert frame_body(body) == frame(PACKETS[0])


def test_whole_stream_in_one_feed():
    decoder = FrameDecoder()
    assert decoder.feed(STREAM) == PACKETS
    assert decoder.at_boundary and decoder.buffered == 0


@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 5, 7, 13, 64])
def test_any_chunking_gives_the_same_packets(chunk):
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(STREAM), chunk):
        out += decoder.feed(STREAM[i:i + chunk])
        # in the middle of a frame the decoder is not at a boundary
    assert out == PACKETS
    assert decoder.at_boundary


def test_partial_frame_is_buffered_until_complete():
    data = frame(PACKETS[0])
    decoder = FrameDecoder()
    assert decoder.feed(data[:2]) == []
    assert not decoder.at_boundary
    assert decoder.feed(data[2:-1]) == []
    assert decoder.buffered == len(data) - 1
    assert decoder.feed(data[-1:]) == [PACKETS[0]]
    assert decoder.at_boundary


def test_accepts_bytearray_and_memoryview_chunks():
    decoder = FrameDecoder()
    assert decoder.feed(bytearray(STREAM[:10])) == []
    assert decoder.feed(memoryview(STREAM)[10:]) == PACKETS


def test_feed_frames_returns_raw_bodies():
    decoder = FrameDecoder()
    assert decoder.feed_frames(STREAM) == [encode_packet(p) for p in PACKETS]


def test_oversized_header_is_refused_before_the_body_arrives():
    decoder = FrameDecoder(Limits(max_packet_length=1024))
    with pytest.raises(ProtocolError, match="1028-byte packet, more than the 1024") as info:
        decoder.feed(struct.pack(">I", 1028))          # only the header
    assert not isinstance(info.value, LimitError)      # the connection must be reset
    assert info.value.offset == 0
    assert decoder.broken
    with pytest.raises(ProtocolError, match="out of sync"):
        decoder.feed(b"\0" * 1028)


def test_oversized_header_split_across_feeds_and_after_good_packets():
    decoder = FrameDecoder(Limits(max_packet_length=64))
    good = frame(SubRply(1, 2))
    assert decoder.feed(good + b"\x7f\xff") == [SubRply(1, 2)]
    with pytest.raises(ProtocolError, match="2147483647-byte packet") as info:
        decoder.feed(b"\xff\xff")
    assert info.value.offset == len(good)      # stream offset of the bad header
    # good packets in the same chunk as a bad header are handed over
    decoder = FrameDecoder(Limits(max_packet_length=64))
    with pytest.raises(ProtocolError) as info:
        decoder.feed(good + good + struct.pack(">I", 1 << 20))
    assert info.value.packets == [SubRply(1, 2), SubRply(1, 2)]


@pytest.mark.parametrize(("header", "match"), [
    (0, "empty packet"),
    (5, "not a multiple of 4"),
    (2, "not a multiple of 4"),
    (0xFFFFFFFF, "more than"),
])
def test_bad_headers(header, match):
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match=match):
        decoder.feed(struct.pack(">I", header))


def test_a_bad_body_keeps_the_stream_in_sync():
    bad = struct.pack(">I", 8) + struct.pack(">ii", 99, 0)      # unknown packet type
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="unknown packet type 99") as info:
        decoder.feed(frame(PACKETS[0]) + bad + frame(PACKETS[1]) + frame(PACKETS[2]))
    assert info.value.packets == [PACKETS[0]]
    assert not decoder.broken
    assert decoder.feed(b"") == [PACKETS[1], PACKETS[2]]
    assert decoder.feed(frame(PACKETS[3])) == [PACKETS[3]]


def test_a_body_over_the_attribute_limit_is_a_limit_error():
    decoder = FrameDecoder(Limits(max_attributes=1))
    with pytest.raises(LimitError) as info:
        decoder.feed(frame(PACKETS[0]) + frame(PACKETS[1]))
    assert info.value.limit == "max_attributes"
    assert info.value.packets == []
    assert decoder.feed() == [PACKETS[1]]


def test_large_packet_in_small_chunks_is_linear():
    # a 1 MiB packet fed 1 KiB at a time: must not copy the buffer per chunk
    packet = NotifyEmit({"blob": b"x" * (1024 * 1024 - 64)})
    data = frame(packet)
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(data), 1024):
        out += decoder.feed(data[i:i + 1024])
    assert out == [packet]


def test_many_small_packets_in_one_big_chunk():
    data = frame(SubRply(1, 2)) * 20000
    decoder = FrameDecoder()
    out = decoder.feed(data)
    assert len(out) == 20000 and out[0] == SubRply(1, 2)
