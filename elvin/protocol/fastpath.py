"""Wire layout the hot paths read and write without the generic codec.

A router session handles most of its packets in one of two shapes: a
NotifyEmit (a publisher's stream) and a SubAddRqst answered by a SubRply (a
registration burst). For those, the generic decoder and encoder (one call
per field, a packet object each way) cost about as much as the work itself,
so the router reads the NotifyEmit's tail and writes the SubRply straight
from and into bytes. The client writes its NotifyEmit and UNotify the same
way (``notify_emit_frame``, ``unotify_frame``), with the tail the router
reads (``_TAILS``: one layout, written and read here). That layout is the protocol's business, not the
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
from elvin.protocol.packets import NotifyEmit, PacketId, UNotify
from elvin.protocol.xdr import decode_attributes, decode_packet, encode_attributes, frame_packet
from elvin.protocol.xdrprim import ACCEL_READER_ARGS, XDR_FALSE, XDR_TRUE
from elvin.values import Value

__all__ = ["NOTIFY_EMIT_HEADER", "NotifyEmitFields", "SUB_ADD_RQST_HEADER", "UNOTIFY_HEADER",
           "decode_notify_emit", "decode_notify_emit_pure", "header", "notify_emit_frame",
           "sub_rply_frame", "unotify_frame"]


def header(pid: int) -> bytes:
    """The first word of a packet body of type ``pid`` (what ``body[:4]`` is)."""
    return pid.to_bytes(4, "big", signed=True)


NOTIFY_EMIT_HEADER = header(PacketId.NOTIFY_EMIT)
UNOTIFY_HEADER = header(PacketId.UNOTIFY)
SUB_ADD_RQST_HEADER = header(PacketId.SUB_ADD_RQST)

#: the usual tail of a NotifyEmit or UNotify, by its deliver-insecure flag: that
#: boolean word, then an empty key list (a count of 0)
_INSECURE_TAIL = XDR_TRUE + XDR_FALSE
_SECURE_TAIL = XDR_FALSE + XDR_FALSE
_TAILS = {True: _INSECURE_TAIL, False: _SECURE_TAIL}
_FRAME_LENGTH = struct.Struct(">I").pack

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
    if tail == _INSECURE_TAIL or tail == _SECURE_TAIL:
        return attrs, end, tail == _INSECURE_TAIL, None
    packet: NotifyEmit = decode_packet(body, limits)   # (its pkt_id was NotifyEmit's)
    return attrs, end, packet.deliver_insecure, packet.keys


def notify_emit_frame(attributes: dict[str, Value], deliver_insecure: bool,
                      keys: Keys) -> bytes:
    """The framed NotifyEmit of ``attributes`` (checked values: see
    ``elvin.values.check_notification``), the bytes ``frame_packet`` would
    give; without keys, written from its parts (no packet object)."""
    if keys:
        return frame_packet(NotifyEmit(attributes, bool(deliver_insecure), keys))
    body = b"".join((NOTIFY_EMIT_HEADER, encode_attributes(attributes),
                     _TAILS[bool(deliver_insecure)]))
    return _FRAME_LENGTH(len(body)) + body


def unotify_frame(version: tuple[int, int], attributes: dict[str, Value],
                  deliver_insecure: bool, keys: Keys) -> bytes:
    """The framed UNotify of a client speaking ``version`` (major, minor),
    as ``notify_emit_frame`` for a NotifyEmit."""
    if keys or not all(0 <= number <= 255 for number in version):
        # the generic encoder gives the keys, or the error a bad version is
        return frame_packet(UNotify(*version, attributes, bool(deliver_insecure), keys))
    body = b"".join((UNOTIFY_HEADER, version[0].to_bytes(4, "big"),
                     version[1].to_bytes(4, "big"), encode_attributes(attributes),
                     _TAILS[bool(deliver_insecure)]))
    return _FRAME_LENGTH(len(body)) + body


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
