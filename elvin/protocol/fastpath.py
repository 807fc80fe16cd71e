"""Wire layout the router's hot paths read and write without the generic codec.

A router session handles most of its packets in one of two shapes: a
NotifyEmit (a publisher's stream) and a SubAddRqst answered by a SubRply (a
registration burst). For those, the generic decoder and encoder (one call
per field, a packet object each way) cost about as much as the work itself,
so the router reads the NotifyEmit's tail and writes the SubRply straight
from and into bytes. That layout is the protocol's business, not the
session's: it lives here, beside ``elvin.protocol.xdr`` (whose
``decode_sub_add_rqst`` is the third such fast path), and answers exactly
what the generic codec would (``tests/unit/test_protocol_fastpath.py``).

Sans-IO, no state: the router's worker may run ``decode_notify_emit`` for a
wide notification.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any

from elvin.keys import Keys
from elvin.protocol import _accel
from elvin.protocol.limits import Limits
from elvin.protocol.packets import NotifyEmit, PacketId
from elvin.protocol.xdr import decode_attributes, decode_packet
from elvin.protocol.xdrprim import ACCEL_READER_ARGS
from elvin.values import Value

__all__ = ["NOTIFY_EMIT_HEADER", "NotifyEmitFields", "SUB_ADD_RQST_HEADER", "UNOTIFY_HEADER",
           "decode_notify_emit", "decode_notify_emit_pure", "header", "sub_rply_frame"]


def header(pid: int) -> bytes:
    """The first word of a packet body of type ``pid`` (what ``body[:4]`` is)."""
    return pid.to_bytes(4, "big", signed=True)


NOTIFY_EMIT_HEADER = header(PacketId.NOTIFY_EMIT)
UNOTIFY_HEADER = header(PacketId.UNOTIFY)
SUB_ADD_RQST_HEADER = header(PacketId.SUB_ADD_RQST)

_ZERO4 = b"\0\0\0\0"
_ONE4 = b"\0\0\0\1"

#: a framed SubRply from (xid, subscription id): frame length, pkt_id, xid,
#: id64 (a C call: no packet object, no generic encoder)
sub_rply_frame: Callable[[int, int], bytes] = functools.partial(
    struct.Struct(">IiIQ").pack, 16, int(PacketId.SUB_RPLY))

#: a NotifyEmit decoded: its attributes, where their XDR ends in the body (the
#: bytes ``body[4:end]`` are forwarded as they are in every NotifyDeliver),
#: deliver-insecure, and its keys (None: none)
NotifyEmitFields = tuple[dict[str, Value], int, bool, "Keys | None"]


def decode_notify_emit_pure(body: bytes, limits: Limits) -> NotifyEmitFields:
    """The fields of a NotifyEmit body (``pkt_id`` first); LimitError or
    ProtocolError as ``decode_packet`` raises them. The usual tail (a
    deliver-insecure word and an empty key list) is read from the bytes;
    any other (keys, or something odd) goes to the general decoder, which
    gives the keys or the exact error."""
    attrs, end = decode_attributes(body, 4, limits)
    tail = body[end:]
    if (len(tail) == 8 and tail[4:] == _ZERO4
            and (tail[:4] == _ONE4 or tail[:4] == _ZERO4)):
        return attrs, end, tail[:4] == _ONE4, None
    packet: NotifyEmit = decode_packet(body, limits)   # (its pkt_id was NotifyEmit's)
    return attrs, end, packet.deliver_insecure, packet.keys


_FAST_NOTIFY_EMIT: Callable[..., Any] | None = getattr(_accel.xdrfast, "read_notify_emit", None)
_NAMES, _NAMES_MAX, _NEW_INT64 = ACCEL_READER_ARGS


def _decode_notify_emit_compiled(body: bytes, limits: Limits) -> NotifyEmitFields:
    """``decode_notify_emit_pure`` in one compiled call for the usual body
    (well-formed attributes, the usual tail); anything else, whatever the
    compiled reader declines, is the pure decoder's to decode or refuse."""
    got: NotifyEmitFields | None = _FAST_NOTIFY_EMIT(  # type: ignore[misc]  # set: chosen below
        body, limits.max_attributes, limits.max_name_length, limits.max_string_length,
        limits.max_opaque_length, _NAMES, _NAMES_MAX, _NEW_INT64)
    if got is None:
        return decode_notify_emit_pure(body, limits)
    return got


#: the NotifyEmit decoder: one compiled call when the accelerator has it
#: (``make accel``; ``ELVIN_PURE=1`` turns it off), else the pure one
decode_notify_emit: Callable[[bytes, Limits], NotifyEmitFields] = (
    decode_notify_emit_pure if _FAST_NOTIFY_EMIT is None else _decode_notify_emit_compiled)
