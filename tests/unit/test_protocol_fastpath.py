"""The router's hand-read and hand-written wire layout (elvin.protocol.fastpath)
answers exactly what the generic codec does."""

from __future__ import annotations

import pytest

from elvin.errors import ProtocolError
from elvin.keys import Keys
from elvin.protocol import LimitError, Limits, NotifyEmit, PacketId, SubRply, UNotify, frame
from elvin.protocol.fastpath import (
    NOTIFY_EMIT_HEADER,
    SUB_ADD_RQST_HEADER,
    UNOTIFY_HEADER,
    decode_notify_emit,
    header,
    notify_emit_frame,
    sub_rply_frame,
    unotify_frame,
)
from elvin.protocol.xdr import decode_packet, encode_packet
from elvin.values import Int64


@pytest.mark.parametrize("packet", [
    NotifyEmit({"N": 1, "S": "text", "L": Int64(2**40), "F": 0.5, "O": b"\0\1"}),
    NotifyEmit({"N": 1}, False),
    NotifyEmit({}, True),
    NotifyEmit({"N": 1}, False, Keys.producer_notification("secret")),
])
def test_a_notify_emit_decodes_as_the_generic_decoder_has_it(packet: NotifyEmit) -> None:
    body = encode_packet(packet)
    attrs, end, insecure, keys = decode_notify_emit(body, Limits())
    generic = decode_packet(body)
    assert isinstance(generic, NotifyEmit)
    assert attrs == generic.attributes and insecure == generic.deliver_insecure
    assert (keys or Keys()) == generic.keys
    # the attributes' XDR, forwarded as is in a NotifyDeliver, ends at ``end``
    assert body[4:end] == encode_packet(NotifyEmit(packet.attributes))[4:-8]


def test_a_notify_emit_with_a_bad_tail_or_over_the_limits_raises_as_decode_packet() -> None:
    body = encode_packet(NotifyEmit({"N": 1}))
    garbage = body[:-8] + b"\xff" * 12
    with pytest.raises(ProtocolError):
        decode_notify_emit(garbage, Limits())
    with pytest.raises(LimitError):
        decode_notify_emit(encode_packet(NotifyEmit({"A": 1, "B": 2})),
                           Limits(max_attributes=1))


def test_a_sub_rply_frame_is_the_encoders() -> None:
    for xid, sub_id in ((1, 2), (2**32 - 1, 2**64 - 1), (0, 0)):
        assert sub_rply_frame(xid, sub_id) == frame(SubRply(xid, sub_id))


def test_headers_are_the_first_word_of_a_body() -> None:
    assert NOTIFY_EMIT_HEADER == encode_packet(NotifyEmit({}))[:4]
    assert UNOTIFY_HEADER == int(PacketId.UNOTIFY).to_bytes(4, "big")
    assert SUB_ADD_RQST_HEADER == header(PacketId.SUB_ADD_RQST)
    assert header(-1) == b"\xff\xff\xff\xff"


EMITTED = [
    ({"N": 1, "S": "text", "L": Int64(2**40), "F": 0.5, "O": b"\0\1"}, True, Keys()),
    ({"N": 1}, False, Keys()),
    ({}, True, Keys()),
    ({"N": 1}, False, Keys.producer_notification("secret")),
]


@pytest.mark.parametrize(("attributes", "insecure", "keys"), EMITTED)
def test_a_notify_emit_frame_is_the_encoders_and_the_router_reads_it_back(
        attributes: dict, insecure: bool, keys: Keys) -> None:
    data = notify_emit_frame(attributes, insecure, keys)
    assert data == frame(NotifyEmit(attributes, insecure, keys))
    read, _end, read_insecure, read_keys = decode_notify_emit(data[4:], Limits())
    assert (read, read_insecure, read_keys or Keys()) == (attributes, insecure, keys)


@pytest.mark.parametrize(("attributes", "insecure", "keys"), EMITTED)
def test_a_unotify_frame_is_the_encoders(attributes: dict, insecure: bool,
                                         keys: Keys) -> None:
    assert unotify_frame((4, 0), attributes, insecure, keys) == frame(
        UNotify(4, 0, attributes, insecure, keys))
    generic = decode_packet(unotify_frame((4, 1), attributes, insecure, keys)[4:])
    assert generic == UNotify(4, 1, attributes, insecure, keys)


def test_a_unotify_frame_refuses_what_the_encoder_refuses() -> None:
    with pytest.raises(ValueError) as generic:
        frame(UNotify(256, 0, {"N": 1}, True, Keys()))
    with pytest.raises(ValueError) as fast:
        unotify_frame((256, 0), {"N": 1}, True, Keys())
    assert str(fast.value) == str(generic.value)
