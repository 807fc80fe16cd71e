"""Sans-IO codec for the Elvin Router Discovery Protocol (ERDP) packets.

The packets and their XDR encoding follow draft-arnold-elvin-discovery-prelim-00
(``reference/elvin-router-discovery-draft.txt``), sections 5.2, 5.3 and 6.1.2::

    enum { SvrRqst = 16, SvrAdvt = 17, SvrAdvtClose = 18 } pkt_id;   (XDR int)

    struct SvrRqst      { uint8 major_version; uint8 minor_version; uint8 locality; };
    struct SvrAdvt      { uint8 major_version; uint8 minor_version; boolean default_flag;
                          id32 revision; string scope_name; string server_name;
                          string uri[]; };
    struct SvrAdvtClose { uint8 major_version; uint8 minor_version; string server; };

Every packet begins with its sender's version (``Versioned``: keyword
arguments, ``SvrRqst(0, major_version=9)``), then its own fields.

uint8 is a 4-byte XDR unsigned int whose value must fit in 8 bits, boolean a
4-byte 0 or 1, id32 4 bytes (read unsigned), string a length + UTF-8 + padding,
and ``uri[]`` an XDR variable-length array (count, then the strings). UDP gives
the framing: one packet per datagram, nothing after it.

The decoder is strict because datagrams come from anybody on the network: any
departure from the draft (unknown pkt_id, truncation, trailing bytes, a uint8
out of range, bad UTF-8, a reserved all-zero revision, a scope name with a
colon, an advertisement without URIs) raises :class:`DiscoveryDecodeError`, so
the responder and ``discover()`` can drop the datagram with a debug log.
Version compatibility is *not* a decoding error: compatible packets are
chosen with :func:`is_compatible`, as the draft says to "discard" the others.

The XDR primitives are the client protocol's (``elvin.protocol.xdrprim``), so both
protocols read strings, booleans and counts exactly alike.
"""

from __future__ import annotations

import struct
from dataclasses import KW_ONLY, dataclass

from elvin.errors import ProtocolError
from elvin.protocol.xdrprim import (
    INT32,
    put_bool,
    put_string,
    put_u32,
    read_bool,
    read_count,
    read_string,
    read_uint,
)

__all__ = [
    "MAJOR_VERSION",
    "MAX_DATAGRAM",
    "MINOR_VERSION",
    "DiscoveryDecodeError",
    "SvrAdvt",
    "SvrAdvtClose",
    "SvrRqst",
    "Versioned",
    "decode",
    "encode",
    "is_compatible",
]

#: ERDP protocol version described by the draft (section 5.2.1).
MAJOR_VERSION, MINOR_VERSION = 4, 0

SVR_RQST, SVR_ADVT, SVR_ADVT_CLOSE = 16, 17, 18

#: Largest advertisement we send: an Ethernet MTU's worth of UDP payload, so
#: that an advertisement is never fragmented (the draft lets a router leave
#: out endpoints "where the limitations of the underlying concrete protocol"
#: require it, section 5.3).
MAX_DATAGRAM = 1472

_UINT8_MAX = 0xFF
_ID32_MAX = 0xFFFFFFFF


class DiscoveryDecodeError(ProtocolError):
    """A datagram that is not a well-formed ERDP packet; says what and where."""


@dataclass(frozen=True)
class Versioned:
    """What every ERDP packet carries first, after its pkt_id: the version of
    the protocol its sender speaks (draft 5.2.1), ours unless told, for
    ``is_compatible`` to check. Keyword-only, so that each packet's own
    fields are its positional arguments."""

    _: KW_ONLY
    major_version: int = MAJOR_VERSION
    minor_version: int = MINOR_VERSION


@dataclass(frozen=True)
class SvrRqst(Versioned):
    """Router solicitation (client -> routers). ``locality`` maps to the IP TTL."""

    locality: int = 0


@dataclass(frozen=True)
class SvrAdvt(Versioned):
    """Router advertisement (router -> clients): the router's endpoint URIs."""

    server_name: str
    uris: tuple[str, ...]
    scope: str = ""
    default: bool = False
    revision: int = 1


@dataclass(frozen=True)
class SvrAdvtClose(Versioned):
    """Advertisement withdrawal (router -> clients), sent when a router stops."""

    server_name: str


Packet = SvrRqst | SvrAdvt | SvrAdvtClose


def is_compatible(packet: Packet) -> bool:
    """The draft's rule (5.2.1): same major version, and our minor version no
    greater than the packet's. Incompatible packets must be discarded."""
    return packet.major_version == MAJOR_VERSION and MINOR_VERSION <= packet.minor_version


def check_scope(scope: str) -> str:
    """A scope name is UTF-8 text without a colon (draft 5.1.1); may be empty."""
    if not isinstance(scope, str):
        raise TypeError(f"scope name must be a str, not {type(scope).__name__}")
    if ":" in scope:
        raise ValueError(f"scope name {scope!r} may not contain ':'")
    if "\0" in scope:
        raise ValueError(f"scope name {scope!r} may not contain NUL")
    return scope


# --------------------------------------------------------------------------
# encoding


def _header(pid: int, packet: Versioned) -> bytearray:
    """How every ERDP packet begins: its pkt_id and its sender's version."""
    b = bytearray(INT32.pack(pid))
    put_u32(b, packet.major_version, "major_version", _UINT8_MAX)
    put_u32(b, packet.minor_version, "minor_version", _UINT8_MAX)
    return b


def _advt_body(p: SvrAdvt, uris: tuple[str, ...]) -> bytearray:
    b = _header(SVR_ADVT, p)
    put_bool(b, p.default)
    put_u32(b, p.revision, "revision", _ID32_MAX)
    put_string(b, check_scope(p.scope), "scope_name")
    put_string(b, p.server_name, "server_name")
    b += INT32.pack(len(uris))
    for uri in uris:
        put_string(b, uri, "uri")
    return b


def encode(packet: Packet, max_size: int = MAX_DATAGRAM) -> bytes:
    """One ERDP packet as a datagram payload.

    An advertisement whose URIs do not all fit in ``max_size`` bytes keeps as
    many leading URIs as fit (routers order them by preference, so the first
    ones matter most); one that cannot hold even one URI is a ``ValueError``.
    Bad field values raise ``TypeError``/``ValueError`` naming the field.
    """
    if isinstance(packet, SvrRqst):
        b = _header(SVR_RQST, packet)
        put_u32(b, packet.locality, "locality", _UINT8_MAX)
        return bytes(b)
    if isinstance(packet, SvrAdvtClose):
        b = _header(SVR_ADVT_CLOSE, packet)
        put_string(b, packet.server_name, "server")
        return bytes(b)
    if isinstance(packet, SvrAdvt):
        if packet.revision == 0:
            raise ValueError("revision 0 is reserved (draft 5.2: all-zero id32)")
        uris = tuple(packet.uris)
        if not uris:
            raise ValueError("an advertisement must carry at least one URI (draft 5.3)")
        b = _advt_body(packet, uris)
        while len(b) > max_size and len(uris) > 1:
            uris = uris[:-1]
            b = _advt_body(packet, uris)
        if len(b) > max_size:
            raise ValueError(f"advertisement of {len(b)} bytes does not fit in {max_size}")
        return bytes(b)
    raise TypeError(f"not an ERDP packet: {type(packet).__name__}")


# --------------------------------------------------------------------------
# decoding


def decode(data: bytes | bytearray | memoryview) -> Packet:
    """One datagram -> one packet, or :class:`DiscoveryDecodeError`."""
    data = bytes(data)
    end = len(data)
    try:
        if end < 4:
            raise DiscoveryDecodeError(f"datagram of {end} bytes is too short for a pkt_id", 0)
        (pid,) = INT32.unpack_from(data, 0)
        o = 4
        major, o = read_uint(data, o, "major_version", _UINT8_MAX)
        minor, o = read_uint(data, o, "minor_version", _UINT8_MAX)
        version = {"major_version": major, "minor_version": minor}
        packet: Packet
        if pid == SVR_RQST:
            locality, o = read_uint(data, o, "locality", _UINT8_MAX)
            packet = SvrRqst(locality, **version)
        elif pid == SVR_ADVT:
            default, o = read_bool(data, o, "default_flag")
            revision, o = read_uint(data, o, "revision", _ID32_MAX)
            if revision == 0:
                raise DiscoveryDecodeError("revision 0 is reserved", o - 4)
            scope, o = read_string(data, o, end, "scope_name")
            if ":" in scope:
                raise DiscoveryDecodeError(f"scope name {scope!r} contains ':'", o)
            server, o = read_string(data, o, end, "server_name")
            count, o = read_count(data, o, end, "uri[]", 4, end, "")
            if count == 0:
                raise DiscoveryDecodeError("advertisement without URIs", o - 4)
            uris = []
            for _ in range(count):
                uri, o = read_string(data, o, end, "uri")
                uris.append(uri)
            packet = SvrAdvt(server, tuple(uris), scope, default, revision, **version)
        elif pid == SVR_ADVT_CLOSE:
            server, o = read_string(data, o, end, "server")
            packet = SvrAdvtClose(server, **version)
        else:
            raise DiscoveryDecodeError(f"unknown ERDP packet type {pid}", 0)
    except struct.error:
        raise DiscoveryDecodeError(f"truncated datagram ({end} bytes)", end) from None
    except DiscoveryDecodeError:
        raise
    except ProtocolError as exc:
        error = DiscoveryDecodeError(str(exc))   # the message already says where
        error.offset = exc.offset
        raise error from None
    if o != end:
        raise DiscoveryDecodeError(f"{end - o} bytes after the packet", o)
    return packet
