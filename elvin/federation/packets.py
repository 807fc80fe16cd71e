"""Packets of the Elvin Federation Protocol 1.0 and their XDR codec (sans-IO).

Section 6.2 of the draft: four federation packets plus six shared with the
client protocol (same ids, same layout)::

    FedConnRqst   192  { id32 xid; uint32 major_version; uint32 minor_version;
                         string router_domain; }
    FedConnRply   193  { id32 xid; string router_domain; }
    FedSubReplace 194  { id32 xid; SubAST pull_filter; }
    FedNotify     195  { NameValue attributes[]; boolean deliver_insecure;
                         Keys keys; string routing[]; }
    Disconn 53, Nack 48, DropWarn 62, TestConn 63, ConfConn 64  (client protocol)
    Ack           65   { id32 xid; }

Ack (65) is not a client protocol packet: the draft lists it without a
struct; as Avis (``org.avis.federation.io.messages.Ack``) it is just the xid
of the request it answers. (65 is the client protocol's ``func_equals_tc``
*SubAST* code, not a packet id, so there is no clash.)

Framing is the client protocol's (4-byte length, then the body). The shared
packets are encoded and decoded by ``elvin.protocol.xdr``; attributes, keys
and strings use its primitives, and the pull filter uses the federation SubAST
form of ``elvin.federation.subast``.

``decode_fed_packet`` raises only ``ProtocolError`` (``LimitError`` for
limits), with ``packet_id`` and ``xid`` attributes when known, so a link can
Nack or Disconn with the reason.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from elvin.federation.subast import PullFilter, decode_subast, encode_subast_into
from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import xdr, xdrprim
from elvin.protocol.federation_ids import (
    ACK,
    FED_CONN_RPLY,
    FED_CONN_RQST,
    FED_NOTIFY,
    FED_SUB_REPLACE,
    VERSION_MAJOR,
    VERSION_MINOR,
)
from elvin.protocol.limits import DEFAULT_LIMITS, Limits
from elvin.protocol.packets import ConfConn, Disconn, DropWarn, Nack, TestConn
from elvin.values import Value

__all__ = [
    "FED_CONN_RQST", "FED_CONN_RPLY", "FED_SUB_REPLACE", "FED_NOTIFY", "ACK",
    "VERSION_MAJOR", "VERSION_MINOR",
    "Ack", "FedConnRply", "FedConnRqst", "FedNotify", "FedSubReplace",
    "decode_fed_notify", "decode_fed_packet", "encode_fed_packet", "frame_fed_packet", "fed_notify_frame",
    "keys_block", "routing_block",
]


_p_i32 = xdrprim.INT32.pack
_p_u32 = xdrprim.UINT32.pack
_i32 = xdrprim.INT32.unpack_from
_u32 = xdrprim.UINT32.unpack_from


@dataclass(frozen=True, slots=True)
class FedConnRqst:
    ID: ClassVar[int] = FED_CONN_RQST
    xid: int
    major_version: int
    minor_version: int
    router_domain: str


@dataclass(frozen=True, slots=True)
class FedConnRply:
    ID: ClassVar[int] = FED_CONN_RPLY
    xid: int
    router_domain: str


@dataclass(frozen=True, slots=True)
class FedSubReplace:
    ID: ClassVar[int] = FED_SUB_REPLACE
    xid: int
    pull_filter: PullFilter


@dataclass(frozen=True, slots=True)
class FedNotify:
    ID: ClassVar[int] = FED_NOTIFY
    attributes: dict[str, Value]
    deliver_insecure: bool = True
    keys: Keys = EMPTY_KEYS
    routing: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class Ack:
    ID: ClassVar[int] = ACK
    xid: int


_SHARED = (int(Disconn.ID), int(Nack.ID), int(DropWarn.ID), int(TestConn.ID),
           int(ConfConn.ID))
_NAMES = {FED_CONN_RQST: "FedConnRqst", FED_CONN_RPLY: "FedConnRply",
          FED_SUB_REPLACE: "FedSubReplace", FED_NOTIFY: "FedNotify", ACK: "Ack"}


# --------------------------------------------------------------------------
# encoding

def keys_block(keys: Keys) -> bytes:
    b = bytearray()
    xdrprim.put_keys(b, keys)
    return bytes(b)


def routing_block(routing: Sequence[str]) -> bytes:
    b = bytearray()
    xdrprim.put_names(b, routing, "routing list entry")
    return bytes(b)


def fed_notify_frame(attributes_block: bytes, deliver_insecure: bool, keys: bytes,
                     routing: bytes) -> bytes:
    """A framed FedNotify from already encoded parts: the router encodes the
    attributes once per notification (the same block as its NotifyDelivers)."""
    total = 8 + len(attributes_block) + len(keys) + len(routing)
    return b"".join((_p_u32(total), _p_i32(FED_NOTIFY), attributes_block,
                     xdrprim.XDR_TRUE if deliver_insecure else xdrprim.XDR_FALSE, keys, routing))


def encode_fed_packet(packet: object) -> bytes:
    """The XDR body (packet id first, no frame header) of any federation packet."""
    if isinstance(packet, (Disconn, Nack, DropWarn, TestConn, ConfConn)):
        return xdr.encode_packet(packet)
    b = bytearray(_p_i32(packet.ID))  # type: ignore[attr-defined]
    if isinstance(packet, FedConnRqst):
        xdrprim.put_u32(b, packet.xid, "xid")
        xdrprim.put_u32(b, packet.major_version, "major_version")
        xdrprim.put_u32(b, packet.minor_version, "minor_version")
        xdrprim.put_string(b, packet.router_domain, "router_domain")
    elif isinstance(packet, FedConnRply):
        xdrprim.put_u32(b, packet.xid, "xid")
        xdrprim.put_string(b, packet.router_domain, "router_domain")
    elif isinstance(packet, FedSubReplace):
        xdrprim.put_u32(b, packet.xid, "xid")
        encode_subast_into(b, packet.pull_filter)
    elif isinstance(packet, FedNotify):
        xdrprim.put_attrs(b, packet.attributes)
        xdrprim.put_bool(b, packet.deliver_insecure)
        xdrprim.put_keys(b, packet.keys)
        xdrprim.put_names(b, packet.routing, "routing list entry")
    elif isinstance(packet, Ack):
        xdrprim.put_u32(b, packet.xid, "xid")
    else:
        raise TypeError(f"not a federation packet: {type(packet).__name__}")
    return bytes(b)


def frame_fed_packet(packet: object) -> bytes:
    body = encode_fed_packet(packet)
    return _p_u32(len(body)) + body


# --------------------------------------------------------------------------
# decoding

def decode_fed_packet(data: bytes | bytearray | memoryview,
                      limits: Limits = DEFAULT_LIMITS) -> object:
    """Decode one packet body; raises ``ProtocolError`` saying what and where."""
    return xdr.decode_packet(data, limits, _PACKETS)[0]


def decode_fed_notify(data: bytes, limits: Limits = DEFAULT_LIMITS) -> tuple[object, int]:
    """Like ``decode_fed_packet``; for a FedNotify also the offset where its
    attributes end (0 for other packets), so that the router can pass their
    XDR on (NotifyDeliver, onward FedNotify) without encoding them again."""
    return xdr.decode_packet(data, limits, _PACKETS)


# Each decoder gives ``((packet, attributes end), offset)``, the value being
# what decode_fed_notify returns (see xdr.PacketTable).

def _dec_conn_rqst(data: bytes, o: int, end: int, limits: Limits):
    xid, major, minor = struct.unpack_from(">III", data, o)
    domain, o = xdrprim.read_string(data, o + 12, end, "FedConnRqst router_domain",
                                    limits.max_string_length, "max_string_length")
    return (FedConnRqst(xid, major, minor, domain), 0), o


def _dec_conn_rply(data: bytes, o: int, end: int, limits: Limits):
    (xid,) = _u32(data, o)
    domain, o = xdrprim.read_string(data, o + 4, end, "FedConnRply router_domain",
                                    limits.max_string_length, "max_string_length")
    return (FedConnRply(xid, domain), 0), o


def _dec_sub_replace(data: bytes, o: int, end: int, limits: Limits):
    (xid,) = _u32(data, o)
    pull, o = decode_subast(data, o + 4, limits, end)
    return (FedSubReplace(xid, pull), 0), o


def _dec_notify(data: bytes, o: int, end: int, limits: Limits):
    attrs, o = xdrprim.read_attrs(data, o, end, limits, "FedNotify attributes")
    attrs_end = o
    insecure, o = xdrprim.read_bool(data, o, "FedNotify deliver_insecure")
    keys, o = xdrprim.read_keys(data, o, end, limits, "FedNotify keys")
    routing, o = xdrprim.read_strings(data, o, end, limits, "FedNotify routing")
    return (FedNotify(attrs, insecure, keys, routing), attrs_end), o


def _dec_ack(data: bytes, o: int, end: int, limits: Limits):
    return (Ack(_u32(data, o)[0]), 0), o + 4


def _shared(decode: Callable) -> Callable:
    """A client protocol packet's decoder, giving what the other decoders give."""
    def decode_shared(data: bytes, o: int, end: int, limits: Limits):
        packet, o = decode(data, o, end, limits)
        return (packet, 0), o
    return decode_shared


_CLIENT = xdr.CLIENT_PACKETS
_PACKETS = xdr.PacketTable(
    {**{pid: _shared(_CLIENT.decoders[pid]) for pid in _SHARED},
     FED_CONN_RQST: _dec_conn_rqst, FED_CONN_RPLY: _dec_conn_rply,
     FED_SUB_REPLACE: _dec_sub_replace, FED_NOTIFY: _dec_notify, ACK: _dec_ack},
    {**{pid: _CLIENT.names[pid] for pid in _SHARED}, **_NAMES},
    frozenset({FED_CONN_RQST, FED_CONN_RPLY, FED_SUB_REPLACE, ACK,
               *(pid for pid in _SHARED if pid in _CLIENT.has_xid)}),
    "unknown or unexpected packet type {} on a federation link")
