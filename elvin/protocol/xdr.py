"""XDR marshalling of Elvin Client Protocol 4.0 packets (spec section 8.2.3).

``encode_packet`` turns a packet of ``elvin.protocol.packets`` into its XDR
body (``pkt_id`` first, no frame header); ``decode_packet`` turns a body back
into a packet. Sans-IO: bytes in, values out.

Wire rules (spec 8.2.3.2 and 7.4):

* boolean: 4 bytes, 0 or 1 (anything else is a ``ProtocolError``).
* uint8 (protocol versions) and uint16 (Nack error code): a 4-byte XDR
  unsigned int, range-checked.
* int32 / int64 / real64: 4 / 8 / 8 bytes big-endian (``hyper``, IEEE double).
* id32 / id64: 4 / 8 bytes, decoded as *unsigned* whatever the bit pattern.
  (Disconn's ``reason`` is an id32 in the spec's struct; we carry it as a
  signed int32 as the suite's contract says: the defined reasons 1, 2 and 4
  read the same either way.)
* string / opaque: uint32 length, the bytes, padding to a multiple of 4.
  Strings are UTF-8 without NUL. Padding bytes are *not* checked to be zero:
  like Avis, we accept whatever the peer put there (we always send zeros).
* arrays: int32 count then the items.
* Value: int32 typecode (1 int32, 2 int64, 3 real64, 4 string, 5 opaque)
  then the value. Decoded int64 values are ``Int64`` (even small ones);
  Python ``int`` encodes as int32 when it fits, else int64.
* Keys: array of ``{id32 scheme; array of {array of opaque}}``.
* SubAST: int32 typecode (``elvin.subscription.ast.Kind``), then a string
  (NAME, STRING), int32, hyper or double for the literals, and an array of
  child SubASTs for every other kind (including EMPTY).

Decoding never raises anything but ``ProtocolError`` (or its subclass
``LimitError``) for bad bytes: unknown packet/value/SubAST typecodes,
truncation, trailing bytes, negative or impossible lengths and counts
(checked against the bytes that remain *before* anything is allocated),
invalid UTF-8, NUL in strings, and the ``Limits`` in force. Every error says
what was wrong and at which byte offset of the packet; errors raised while
decoding a packet also carry ``packet_id`` and (for packets that have one and
when it could be read) ``xid`` attributes, so a router can Nack the request.

Leniencies (as Avis): non-zero padding is accepted; duplicate attribute names
keep the last value; empty attribute names and empty notifications are
accepted here (the router or client decides whether they are acceptable);
unknown key scheme ids and any number of key sets are kept, for the router
to Nack (BAD_KEY_SCHEME / BAD_KEY_INDEX).

Encoding raises ``TypeError``/``ValueError`` for packets that cannot be
encoded (wrong value types, NUL in strings, out-of-range ids). The encoder
never enforces ``Limits``; anything the decoder accepts can be re-encoded.

Hot paths for the router and client: ``encode_attributes`` +
``frame_notify_deliver`` build a NotifyDeliver per subscriber without
re-encoding the attributes, and NotifyEmit / UNotify / NotifyDeliver decode
through one tight attribute loop (which caches attribute names);
``decode_notify_deliver`` is the receiving counterpart of
``frame_notify_deliver``: it decodes a NotifyDeliver in place in a receive
buffer and defers to ``decode_packet`` for anything unusual.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from elvin.errors import ProtocolError
from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import packets as pk
from elvin.protocol.limits import DEFAULT_LIMITS, LimitError, Limits
from elvin.protocol.xdrprim import (
    INT32,
    INT64,
    REAL64,
    TYPED_INT32,
    UINT32,
    UINT64,
    XDR_FALSE,
    XDR_TRUE,
    add_child,
    check_range,
    id64_array,
    put_attrs,
    put_bool,
    put_ids,
    put_keys,
    put_names,
    put_string,
    put_u32,
    put_u64,
    put_value,
    read_attrs,
    read_bool,
    read_count,
    read_id64s,
    read_keys,
    read_string,
    read_strings,
    read_uint,
    read_values,
    skip_attrs,
)
from elvin.subscription.ast import Kind, Node
from elvin.values import INT32_MAX, INT32_MIN, Int64, Value

__all__ = [
    "decode_ast",
    "decode_attributes",
    "decode_notify_deliver",
    "decode_packet",
    "decode_sub_add_rqst",
    "encode_ast",
    "encode_attributes",
    "encode_packet",
    "encode_value",
    "frame_notify_deliver",
    "notify_deliver_head",
    "one_insecure_id",
    "frame_packet",
    "split_notify_deliver",
]

# --------------------------------------------------------------------------
# precompiled structs (the layouts are xdrprim's)
_i32 = INT32.unpack_from
_u32 = UINT32.unpack_from
_i64 = INT64.unpack_from
_u64 = UINT64.unpack_from
_f64 = REAL64.unpack_from
_p_i32 = INT32.pack
_p_u32 = UINT32.pack
_p_i64 = INT64.pack
_p_f64 = REAL64.pack
_p_ii = TYPED_INT32.pack
_pack_into_u32 = UINT32.pack_into
_STRUCT_ERROR = struct.error
_new_int64 = int.__new__   # Int64 without the range check: 8 bytes always fit

_T = TypeVar("_T")
#: a packet decoder: (data, offset, end, limits) -> (packet, offset after it)
_Decoder = Callable[[bytes, int, int, Limits], tuple[pk.Packet, int]]
#: a packet encoder; each takes the packet class it is registered for (so ``Any``:
#: a callable of one subclass is not a callable of ``Packet``)
_Encoder = Callable[[bytearray, Any], None]


_KINDS: dict[int, Kind] = {int(k): k for k in Kind}
#: for the labels of errors: an Enum's ``name`` costs a property call per node
_LOWER_NAMES: dict[Kind, str] = {k: k.name.lower() for k in Kind}
_K_NAME, _K_STRING, _K_INT32, _K_INT64, _K_REAL64 = (
    Kind.NAME, Kind.STRING, Kind.INT32, Kind.INT64, Kind.REAL64)


def _operator(kind: Kind, children: list[Node], o: int) -> Node:
    return Node(kind, tuple(children))


def _read_ast(data: bytes, o: int, end: int, limits: Limits,
              what: str = "SubAST") -> tuple[Node, int]:
    """Iterative, so no input can exhaust the Python stack; nesting deeper
    than ``limits.max_ast_depth`` is refused."""
    stack: list[tuple[Kind, int, list[Node]]] = []
    max_depth = limits.max_ast_depth
    max_array = limits.max_array_length
    while True:
        (tc,) = _i32(data, o)
        kind = _KINDS.get(tc)
        if kind is None:
            raise ProtocolError(f"{what}: unknown SubAST typecode {tc}", o)
        o += 4
        if kind is _K_NAME or kind is _K_STRING:
            text, o = read_string(data, o, end, f"{what} {_LOWER_NAMES[kind]}",
                                   limits.max_string_length, "max_string_length")
            node = Node(kind, value=text)
        elif kind is _K_INT32:
            node = Node(kind, value=_i32(data, o)[0])
            o += 4
        elif kind is _K_INT64:
            node = Node(kind, value=_new_int64(Int64, _i64(data, o)[0]))
            o += 8
        elif kind is _K_REAL64:
            node = Node(kind, value=_f64(data, o)[0])
            o += 8
        else:
            # every SubAST takes at least 8 bytes (typecode + one word)
            n, o = read_count(data, o, end, f"{what} {_LOWER_NAMES[kind]} children", 8,
                               max_array, "max_array_length")
            if n:
                if len(stack) >= max_depth:
                    raise LimitError(f"{what}: nesting deeper than {max_depth}", o - 8,
                                     "max_ast_depth")
                stack.append((kind, n, []))
                continue
            node = Node(kind)
        root = add_child(stack, node, _operator, o)
        if root is not None:
            return root, o


# ==========================================================================
# per-packet decoders: (data, offset, end, limits) -> (packet, offset)


def _d_xid(data: bytes, o: int) -> tuple[int, int]:
    return _u32(data, o)[0], o + 4


def _dec_unotify(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    major, o = read_uint(data, o, "UNotify client_major_version", 255)
    minor, o = read_uint(data, o, "UNotify client_minor_version", 255)
    attrs, o = read_attrs(data, o, end, limits, "UNotify attributes")
    insecure, o = read_bool(data, o, "UNotify deliver_insecure")
    keys, o = read_keys(data, o, end, limits, "UNotify keys")
    return pk.UNotify(major, minor, attrs, insecure, keys), o


def _dec_nack(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    xid, o = _d_xid(data, o)
    error, o = read_uint(data, o, "Nack error", 0xFFFF)
    message, o = read_string(data, o, end, "Nack message")
    args, o = read_values(data, o, end, limits, "Nack args")
    return pk.Nack(xid, error, message, args), o


def _dec_conn_rqst(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    xid, o = _d_xid(data, o)
    major, o = read_uint(data, o, "ConnRqst client_major_version", 255)
    minor, o = read_uint(data, o, "ConnRqst client_minor_version", 255)
    options, o = read_attrs(data, o, end, limits, "ConnRqst options")
    nfn_keys, o = read_keys(data, o, end, limits, "ConnRqst nfn_keys")
    sub_keys, o = read_keys(data, o, end, limits, "ConnRqst sub_keys")
    return pk.ConnRqst(xid, major, minor, options, nfn_keys, sub_keys), o


def _options_decoder(cls: Callable[..., pk.Packet]) -> _Decoder:
    label = f"{cls.__name__} options"

    def decode(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
        xid, o = _d_xid(data, o)
        options, o = read_attrs(data, o, end, limits, label)
        return cls(xid, options), o
    return decode


def _xid_decoder(cls: Callable[..., pk.Packet]) -> _Decoder:
    def decode(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
        return cls(_u32(data, o)[0]), o + 4
    return decode


def _xid_id64_decoder(cls: Callable[..., pk.Packet]) -> _Decoder:
    def decode(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
        xid, ident = _S_XID_ID64.unpack_from(data, o)
        return cls(xid, ident), o + 12
    return decode


_S_XID_ID64 = struct.Struct(">IQ")


def _empty_decoder(cls: Callable[..., pk.Packet]) -> _Decoder:
    instance = cls()

    def decode(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
        return instance, o
    return decode


def _dec_disconn(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    (reason,) = _i32(data, o)
    args, o = read_string(data, o + 4, end, "Disconn args")
    return pk.Disconn(reason, args), o


def _dec_sec_rqst(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    xid, o = _d_xid(data, o)
    add_nfn, o = read_keys(data, o, end, limits, "SecRqst add_nfn_keys")
    del_nfn, o = read_keys(data, o, end, limits, "SecRqst del_nfn_keys")
    add_sub, o = read_keys(data, o, end, limits, "SecRqst add_sub_keys")
    del_sub, o = read_keys(data, o, end, limits, "SecRqst del_sub_keys")
    return pk.SecRqst(xid, add_nfn, del_nfn, add_sub, del_sub), o


def _dec_notify_emit(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    attrs, o = read_attrs(data, o, end, limits, "NotifyEmit attributes")
    (flag,) = _u32(data, o)
    if flag > 1:
        raise ProtocolError(f"NotifyEmit deliver_insecure: boolean must be 0 or 1, "
                            f"not {flag}", o)
    (nkeys,) = _i32(data, o + 4)
    if nkeys == 0:
        return pk.NotifyEmit(attrs, flag == 1, EMPTY_KEYS), o + 8
    keys, o = read_keys(data, o + 4, end, limits, "NotifyEmit keys")
    return pk.NotifyEmit(attrs, flag == 1, keys), o


def _dec_notify_deliver(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    attrs, o = read_attrs(data, o, end, limits, "NotifyDeliver attributes")
    secure, o = read_id64s(data, o, end, limits, "NotifyDeliver secure_matches")
    insecure, o = read_id64s(data, o, end, limits, "NotifyDeliver insecure_matches")
    return pk.NotifyDeliver(attrs, secure, insecure), o


def _dec_sub_add_rqst(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    xid, o = _d_xid(data, o)
    expr, o = read_string(data, o, end, "SubAddRqst expression")
    accept, o = read_bool(data, o, "SubAddRqst accept_insecure")
    keys, o = read_keys(data, o, end, limits, "SubAddRqst keys")
    return pk.SubAddRqst(xid, expr, accept, keys), o


def _dec_sub_mod_rqst(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    xid, sub_id = _S_XID_ID64.unpack_from(data, o)
    expr, o = read_string(data, o + 12, end, "SubModRqst expression")
    accept, o = read_bool(data, o, "SubModRqst accept_insecure")
    add_keys, o = read_keys(data, o, end, limits, "SubModRqst add_keys")
    del_keys, o = read_keys(data, o, end, limits, "SubModRqst del_keys")
    return pk.SubModRqst(xid, sub_id, expr, accept, add_keys, del_keys), o


def _dec_qnch_add_rqst(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    xid, o = _d_xid(data, o)
    names, o = read_strings(data, o, end, limits, "QnchAddRqst names")
    insecure, o = read_bool(data, o, "QnchAddRqst deliver_insecure")
    keys, o = read_keys(data, o, end, limits, "QnchAddRqst keys")
    return pk.QnchAddRqst(xid, names, insecure, keys), o


def _dec_qnch_mod_rqst(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    xid, quench_id = _S_XID_ID64.unpack_from(data, o)
    names_add, o = read_strings(data, o + 12, end, limits, "QnchModRqst names_add")
    names_del, o = read_strings(data, o, end, limits, "QnchModRqst names_del")
    insecure, o = read_bool(data, o, "QnchModRqst deliver_insecure")
    add_keys, o = read_keys(data, o, end, limits, "QnchModRqst add_keys")
    del_keys, o = read_keys(data, o, end, limits, "QnchModRqst del_keys")
    return pk.QnchModRqst(xid, quench_id, names_add, names_del, insecure, add_keys,
                       del_keys), o


def _sub_notify_decoder(cls: Callable[..., pk.Packet]) -> _Decoder:
    label = cls.__name__

    def decode(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
        secure, o = read_id64s(data, o, end, limits, f"{label} secure_quench_ids")
        insecure, o = read_id64s(data, o, end, limits, f"{label} insecure_quench_ids")
        (term_id,) = _u64(data, o)
        expr, o = _read_ast(data, o + 8, end, limits, f"{label} sub_expr")
        return cls(secure, insecure, term_id, expr), o
    return decode


def _dec_sub_del_notify(data: bytes, o: int, end: int, limits: Limits) -> tuple[pk.Packet, int]:
    ids, o = read_id64s(data, o, end, limits, "SubDelNotify quench_ids")
    (term_id,) = _u64(data, o)
    return pk.SubDelNotify(ids, term_id), o + 8


_DECODERS: dict[int, _Decoder] = {
    pk.PacketId.UNOTIFY: _dec_unotify,
    pk.PacketId.NACK: _dec_nack,
    pk.PacketId.CONN_RQST: _dec_conn_rqst,
    pk.PacketId.CONN_RPLY: _options_decoder(pk.ConnRply),
    pk.PacketId.DISCONN_RQST: _xid_decoder(pk.DisconnRqst),
    pk.PacketId.DISCONN_RPLY: _xid_decoder(pk.DisconnRply),
    pk.PacketId.DISCONN: _dec_disconn,
    pk.PacketId.SEC_RQST: _dec_sec_rqst,
    pk.PacketId.SEC_RPLY: _xid_decoder(pk.SecRply),
    pk.PacketId.NOTIFY_EMIT: _dec_notify_emit,
    pk.PacketId.NOTIFY_DELIVER: _dec_notify_deliver,
    pk.PacketId.SUB_ADD_RQST: _dec_sub_add_rqst,
    pk.PacketId.SUB_MOD_RQST: _dec_sub_mod_rqst,
    pk.PacketId.SUB_DEL_RQST: _xid_id64_decoder(pk.SubDelRqst),
    pk.PacketId.SUB_RPLY: _xid_id64_decoder(pk.SubRply),
    pk.PacketId.DROP_WARN: _empty_decoder(pk.DropWarn),
    pk.PacketId.TEST_CONN: _empty_decoder(pk.TestConn),
    pk.PacketId.CONF_CONN: _empty_decoder(pk.ConfConn),
    pk.PacketId.QOS_RQST: _options_decoder(pk.QosRqst),
    pk.PacketId.QOS_RPLY: _options_decoder(pk.QosRply),
    pk.PacketId.QNCH_ADD_RQST: _dec_qnch_add_rqst,
    pk.PacketId.QNCH_MOD_RQST: _dec_qnch_mod_rqst,
    pk.PacketId.QNCH_DEL_RQST: _xid_id64_decoder(pk.QnchDelRqst),
    pk.PacketId.QNCH_RPLY: _xid_id64_decoder(pk.QnchRply),
    pk.PacketId.SUB_ADD_NOTIFY: _sub_notify_decoder(pk.SubAddNotify),
    pk.PacketId.SUB_MOD_NOTIFY: _sub_notify_decoder(pk.SubModNotify),
    pk.PacketId.SUB_DEL_NOTIFY: _dec_sub_del_notify,
}
# plain-int keys: dict lookups with an int are then as fast as they get
_DECODERS = {int(k): v for k, v in _DECODERS.items()}
assert set(_DECODERS) == set(pk.PACKET_CLASSES)

@dataclass(frozen=True, slots=True)
class PacketTable(Generic[_T]):
    """One protocol's packets, as ``decode_packet`` reads them.

    The client protocol's table is ``CLIENT_PACKETS``; federation has its own
    (its packets plus the client packets it shares), so that both protocols
    check a body, and say what is wrong with it, in the one ``decode_packet``.

    ``decoders`` map a ``pkt_id`` to ``(data, offset, end, limits) ->
    (value, offset)``; ``decode_packet`` returns the ``value`` (a packet
    here, a packet and more for federation). ``names`` name the packets in
    errors, ``has_xid`` are the packets whose second word is their xid, and
    ``unknown`` is the error for any other ``pkt_id`` (``{}`` is the id)."""

    decoders: dict[int, Callable[[bytes, int, int, Limits], tuple[_T, int]]]
    names: dict[int, str]
    has_xid: frozenset[int]
    unknown: str = "unknown packet type {}"


CLIENT_PACKETS: PacketTable[pk.Packet] = PacketTable(
    _DECODERS,
    {int(pid): cls.__name__ for pid, cls in pk.PACKET_CLASSES.items()},
    frozenset(int(pid) for pid, cls in pk.PACKET_CLASSES.items()
              if "xid" in cls.__slots__))     # (slotted dataclasses: the fields)


def _annotate(exc: ProtocolError, data: bytes, pid: int | None,
              has_xid: frozenset[int] = frozenset()) -> ProtocolError:
    exc.packet_id = pid
    exc.xid = (_u32(data, 4)[0]
               if pid in has_xid and len(data) >= 8 else None)
    return exc


def decode_packet(data: bytes | bytearray | memoryview,
                  limits: Limits = DEFAULT_LIMITS,
                  table: PacketTable[_T] = CLIENT_PACKETS) -> _T:  # type: ignore[assignment]  # the default table's _T is Packet (no TypeVar defaults here)
    """Decode one XDR packet body (``pkt_id`` first, no frame header).

    Raises ``ProtocolError`` (``LimitError`` for limits) saying what is wrong
    and at which offset; the error has ``packet_id`` and ``xid`` attributes
    (``None`` when unknown). ``table`` says which protocol's packets the body
    may hold: the client protocol's unless told (a table is a default
    argument rather than a wrapper so that the client's hot path pays for no
    extra call)."""
    if type(data) is not bytes:
        data = bytes(data)
    end = len(data)
    if end < 4:
        raise _annotate(ProtocolError(f"a packet of {end} bytes is too short to hold a "
                                      "packet type", 0), data, None)
    (pid,) = _i32(data, 0)
    if end > limits.max_packet_length:
        raise _annotate(LimitError(f"packet of {end} bytes exceeds the limit of "
                                   f"{limits.max_packet_length}", 0, "max_packet_length"),
                        data, pid, table.has_xid)
    decoder = table.decoders.get(pid)
    if decoder is None:
        raise _annotate(ProtocolError(table.unknown.format(pid), 0), data, pid)
    try:
        packet, o = decoder(data, 4, end, limits)
    except ProtocolError as exc:
        raise _annotate(exc, data, pid, table.has_xid) from None
    except _STRUCT_ERROR:
        raise _annotate(ProtocolError(f"truncated {table.names[pid]} packet: the data ends "
                                      "before the packet is complete", end),
                        data, pid, table.has_xid) from None
    except (ValueError, IndexError, KeyError, OverflowError, RecursionError,
            MemoryError) as exc:   # defence in depth: nothing else may escape
        raise _annotate(ProtocolError(f"undecodable {table.names[pid]} packet "
                                      f"({type(exc).__name__}: {exc})", None),
                        data, pid, table.has_xid) from None
    if o != end:
        name = table.names[pid]
        if o > end:
            raise _annotate(ProtocolError(f"truncated {name} packet: the data ends "
                                          "before the packet is complete", end),
                            data, pid, table.has_xid)
        raise _annotate(ProtocolError(f"{end - o} bytes of trailing data after a complete "
                                      f"{name} packet", o), data, pid, table.has_xid)
    return packet


_DELIVER_PID = _p_i32(int(pk.PacketId.NOTIFY_DELIVER))


def decode_notify_deliver(data: bytes, start: int, end: int,
                          limits: Limits = DEFAULT_LIMITS) -> pk.NotifyDeliver | None:
    """The fast path of ``decode_packet`` for the packet a subscriber receives
    most: the NotifyDeliver body at ``data[start:end]`` (``pkt_id`` first),
    decoded in place, so a receive buffer holding hundreds of frames is not
    copied frame by frame.

    Returns ``None`` whenever the body is not a plainly valid NotifyDeliver
    (another packet type, any error, more than one subscription id per
    list): the caller then decodes ``data[start:end]`` with ``decode_packet``,
    which gives the same packet or the exact error with offsets relative to
    the packet. The fast path shares ``read_attrs`` with the general one, so
    whatever it returns is what ``decode_packet`` would have returned.

    Reads are sequential and the offset only grows, so a body that would
    read past ``end`` (into the next frame) always ends with an offset other
    than ``end`` and is handed back to the general decoder."""
    if (type(data) is not bytes       # slices of a bytearray would make opaques bytearrays
            or end - start > limits.max_packet_length
            or not data.startswith(_DELIVER_PID, start)):
        return None
    try:
        attrs, o = read_attrs(data, start + 4, end, limits, "NotifyDeliver attributes")
        # the usual tail, no secure match and one insecure match, in one read
        # (16 bytes may also be one secure match and no insecure one)
        if (end - o == 16 and limits.max_array_length
                and data.startswith(_NO_SECURE_ONE_INSECURE, o)):
            secure: tuple[int, ...] = ()
            insecure: tuple[int, ...] = _u64(data, o + 8)
        else:
            # otherwise each list is almost always empty or one subscription id
            ids: list[tuple[int, ...]] = []
            for _list in (0, 1):                    # secure, then insecure
                (n,) = _i32(data, o)
                if n == 0:
                    ids.append(())
                    o += 4
                elif n == 1 and limits.max_array_length:
                    ids.append(_u64(data, o + 4))
                    o += 12
                else:
                    return None
            if o != end:
                return None
            secure, insecure = ids
    except Exception:      # noqa: BLE001 - the general decoder reports it exactly
        return None
    # NotifyDeliver(attrs, secure, insecure) without the frozen dataclass's
    # generated __init__ (object.__setattr__ by name, per field): the slots'
    # own descriptors set the same three fields, in a third less time
    packet = _new_object(pk.NotifyDeliver)
    _set_attributes(packet, attrs)
    _set_secure(packet, secure)
    _set_insecure(packet, insecure)
    return packet


def split_notify_deliver(data: bytes, start: int, end: int,
                         limits: Limits = DEFAULT_LIMITS
                         ) -> tuple[int, int, tuple[int, ...], tuple[int, ...]] | None:
    """A NotifyDeliver body at ``data[start:end]`` without decoding its
    attributes: ``(attributes_start, attributes_end, secure_matches,
    insecure_matches)``, the attributes still encoded (``encode_attributes``
    form). None when the body is not a valid NotifyDeliver."""
    if not data.startswith(_DELIVER_PID, start):
        return None
    try:
        attrs_end = skip_attrs(data, start + 4, end)
        secure, o = read_id64s(data, attrs_end, end, limits, "NotifyDeliver secure_matches")
        insecure, o = read_id64s(data, o, end, limits, "NotifyDeliver insecure_matches")
    except (ProtocolError, struct.error):
        return None
    if o != end:
        return None
    return start + 4, attrs_end, secure, insecure


_NO_SECURE_ONE_INSECURE = _p_ii(0, 1)     # the two id-list counts of the usual tail
_new_object = object.__new__
# the slots' own descriptors (vars(): mypy types a slot read on the class as the field)
_set_attributes: Callable[[pk.NotifyDeliver, dict[str, Value]], None] = \
    vars(pk.NotifyDeliver)["attributes"].__set__
_set_secure: Callable[[pk.NotifyDeliver, tuple[int, ...]], None] = \
    vars(pk.NotifyDeliver)["secure_matches"].__set__
_set_insecure: Callable[[pk.NotifyDeliver, tuple[int, ...]], None] = \
    vars(pk.NotifyDeliver)["insecure_matches"].__set__


_SUB_ADD_PID = _p_i32(int(pk.PacketId.SUB_ADD_RQST))
_S_XID_LENGTH = struct.Struct(">II")
#: the usual tail of a SubAddRqst, its accept_insecure word and no keys
_NO_KEYS_TAILS = {_p_ii(0, 0): False, _p_ii(1, 0): True}


def decode_sub_add_rqst(data: bytes, limits: Limits = DEFAULT_LIMITS) -> pk.SubAddRqst | None:
    """The fast path of ``decode_packet`` for the request a router receives
    in bursts (a client registering its subscriptions): a SubAddRqst body
    (``pkt_id`` first) without keys, read straight from the bytes (the
    generic decoder's calls per field cost a registration about 1 us).

    Returns ``None`` whenever the body is not a plainly valid SubAddRqst
    without keys (another packet type, keys, any error): the caller then
    decodes it with ``decode_packet``, which gives the same packet or the
    exact error. The checks are those of ``read_string`` and ``read_bool``;
    ``SubAddRqst`` has no limit of its own but the packet length."""
    if (type(data) is not bytes
            or len(data) > limits.max_packet_length
            or not data.startswith(_SUB_ADD_PID)):
        return None
    end = len(data)
    try:
        xid, n = _S_XID_LENGTH.unpack_from(data, 4)
        e = 12 + n
        if e + (-n & 3) + 8 != end:
            return None
        accept = _NO_KEYS_TAILS.get(data[end - 8:])
        if accept is None:
            return None
        text = data[12:e].decode("utf-8")
    except Exception:      # noqa: BLE001 - the general decoder reports it exactly
        return None
    if "\0" in text:
        return None
    # as decode_notify_deliver: the slots' own descriptors, not the frozen
    # dataclass's __init__ (half the time)
    packet = _new_object(pk.SubAddRqst)
    _set_xid(packet, xid)
    _set_expression(packet, text)
    _set_accept(packet, accept)
    _set_keys(packet, EMPTY_KEYS)
    return packet


_set_xid: Callable[[pk.SubAddRqst, int], None] = vars(pk.SubAddRqst)["xid"].__set__
_set_expression: Callable[[pk.SubAddRqst, str], None] = vars(pk.SubAddRqst)["expression"].__set__
_set_accept: Callable[[pk.SubAddRqst, bool], None] = \
    vars(pk.SubAddRqst)["accept_insecure"].__set__
_set_keys: Callable[[pk.SubAddRqst, Keys], None] = vars(pk.SubAddRqst)["keys"].__set__


def decode_ast(data: bytes | bytearray | memoryview, offset: int = 0,
               limits: Limits = DEFAULT_LIMITS) -> tuple[Node, int]:
    """Decode one SubAST at ``offset``; returns ``(node, end_offset)``.

    Used by the packet decoder and by federation, whose packets carry ASTs."""
    if type(data) is not bytes:
        data = bytes(data)
    try:
        node, end = _read_ast(data, offset, len(data), limits)
    except _STRUCT_ERROR:
        raise ProtocolError("truncated SubAST", len(data)) from None
    except (ValueError, IndexError, OverflowError, RecursionError, MemoryError) as exc:
        raise ProtocolError(f"undecodable SubAST ({type(exc).__name__}: {exc})") from None
    if end > len(data):
        raise ProtocolError("truncated SubAST", len(data))
    return node, end


def decode_attributes(data: bytes | bytearray | memoryview, offset: int = 0,
                      limits: Limits = DEFAULT_LIMITS) -> tuple[dict[str, Value], int]:
    """Decode one NameValue array at ``offset``; returns ``(dict, end_offset)``."""
    if type(data) is not bytes:
        data = bytes(data)
    try:
        attrs, end = read_attrs(data, offset, len(data), limits)
    except _STRUCT_ERROR:
        raise ProtocolError("truncated attributes", len(data)) from None
    except (ValueError, IndexError, OverflowError, MemoryError) as exc:
        raise ProtocolError(f"undecodable attributes ({type(exc).__name__}: {exc})") from None
    if end > len(data):
        raise ProtocolError("truncated attributes", len(data))
    return attrs, end


_LEAF_STRING = frozenset({Kind.NAME, Kind.STRING})


def _put_ast(b: bytearray, root: Node) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        if not isinstance(node, Node):
            raise TypeError(f"SubAST nodes are elvin.subscription.ast.Node, "
                            f"not {type(node).__name__}")
        kind = node.kind
        if int(kind) not in _KINDS:
            raise ValueError(f"unknown SubAST kind {kind!r}")
        b += _p_i32(int(kind))
        value = node.value
        if kind in _LEAF_STRING:
            put_string(b, value, f"SubAST {Kind(kind).name} value")
        elif kind == Kind.INT32:
            b += _p_i32(check_range(value, INT32_MIN, INT32_MAX, "SubAST int32 value"))
        elif kind == Kind.INT64:
            b += _p_i64(check_range(value, -(2**63), 2**63 - 1, "SubAST int64 value"))
        elif kind == Kind.REAL64:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"SubAST real64 value must be a float, not "
                                f"{type(value).__name__}")
            b += _p_f64(float(value))
        else:
            children = node.children
            b += _p_i32(len(children))
            stack.extend(reversed(children))


def _enc_unotify(b: bytearray, p: pk.UNotify) -> None:
    put_u32(b, p.client_major_version, "client_major_version", 255)
    put_u32(b, p.client_minor_version, "client_minor_version", 255)
    put_attrs(b, p.attributes)
    put_bool(b, p.deliver_insecure)
    put_keys(b, p.keys)


def _enc_nack(b: bytearray, p: pk.Nack) -> None:
    put_u32(b, p.xid, "xid")
    put_u32(b, p.error, "Nack error", 0xFFFF)
    put_string(b, p.message, "Nack message")
    b += _p_i32(len(p.args))
    for i, arg in enumerate(p.args):
        put_value(b, arg, f"Nack args[{i}]")


def _enc_conn_rqst(b: bytearray, p: pk.ConnRqst) -> None:
    put_u32(b, p.xid, "xid")
    put_u32(b, p.client_major_version, "client_major_version", 255)
    put_u32(b, p.client_minor_version, "client_minor_version", 255)
    put_attrs(b, p.options)
    put_keys(b, p.nfn_keys)
    put_keys(b, p.sub_keys)


def _enc_options(b: bytearray, p: pk.ConnRply | pk.QosRqst | pk.QosRply) -> None:
    put_u32(b, p.xid, "xid")
    put_attrs(b, p.options)


def _enc_xid(b: bytearray, p: pk.DisconnRqst | pk.DisconnRply | pk.SecRply) -> None:
    put_u32(b, p.xid, "xid")


def _enc_xid_sub_id(b: bytearray, p: pk.SubDelRqst | pk.SubRply) -> None:
    put_u32(b, p.xid, "xid")
    put_u64(b, p.subscription_id, "subscription_id")


def _enc_xid_quench_id(b: bytearray, p: pk.QnchDelRqst | pk.QnchRply) -> None:
    put_u32(b, p.xid, "xid")
    put_u64(b, p.quench_id, "quench_id")


def _enc_nothing(b: bytearray, p: pk.Packet) -> None:
    pass


def _enc_disconn(b: bytearray, p: pk.Disconn) -> None:
    b += _p_i32(check_range(p.reason, INT32_MIN, INT32_MAX, "Disconn reason"))
    put_string(b, p.args, "Disconn args")


def _enc_sec_rqst(b: bytearray, p: pk.SecRqst) -> None:
    put_u32(b, p.xid, "xid")
    put_keys(b, p.add_nfn_keys)
    put_keys(b, p.del_nfn_keys)
    put_keys(b, p.add_sub_keys)
    put_keys(b, p.del_sub_keys)


def _enc_notify_emit(b: bytearray, p: pk.NotifyEmit) -> None:
    put_attrs(b, p.attributes)
    b += XDR_TRUE if p.deliver_insecure else XDR_FALSE
    put_keys(b, p.keys)


def _enc_notify_deliver(b: bytearray, p: pk.NotifyDeliver) -> None:
    put_attrs(b, p.attributes)
    put_ids(b, p.secure_matches, "secure_matches id")
    put_ids(b, p.insecure_matches, "insecure_matches id")


def _enc_sub_add_rqst(b: bytearray, p: pk.SubAddRqst) -> None:
    put_u32(b, p.xid, "xid")
    put_string(b, p.expression, "SubAddRqst expression")
    put_bool(b, p.accept_insecure)
    put_keys(b, p.keys)


def _enc_sub_mod_rqst(b: bytearray, p: pk.SubModRqst) -> None:
    put_u32(b, p.xid, "xid")
    put_u64(b, p.subscription_id, "subscription_id")
    put_string(b, p.expression, "SubModRqst expression")
    put_bool(b, p.accept_insecure)
    put_keys(b, p.add_keys)
    put_keys(b, p.del_keys)


def _enc_qnch_add_rqst(b: bytearray, p: pk.QnchAddRqst) -> None:
    put_u32(b, p.xid, "xid")
    put_names(b, p.names, "QnchAddRqst names")
    put_bool(b, p.deliver_insecure)
    put_keys(b, p.keys)


def _enc_qnch_mod_rqst(b: bytearray, p: pk.QnchModRqst) -> None:
    put_u32(b, p.xid, "xid")
    put_u64(b, p.quench_id, "quench_id")
    put_names(b, p.names_add, "QnchModRqst names_add")
    put_names(b, p.names_del, "QnchModRqst names_del")
    put_bool(b, p.deliver_insecure)
    put_keys(b, p.add_keys)
    put_keys(b, p.del_keys)


def _enc_sub_notify(b: bytearray, p: pk.SubAddNotify | pk.SubModNotify) -> None:
    put_ids(b, p.secure_quench_ids, "secure_quench_ids id")
    put_ids(b, p.insecure_quench_ids, "insecure_quench_ids id")
    put_u64(b, p.term_id, "term_id")
    _put_ast(b, p.sub_expr)


def _enc_sub_del_notify(b: bytearray, p: pk.SubDelNotify) -> None:
    put_ids(b, p.quench_ids, "quench_ids id")
    put_u64(b, p.term_id, "term_id")


_ENCODERS: dict[type[pk.Packet], _Encoder] = {
    pk.UNotify: _enc_unotify,
    pk.Nack: _enc_nack,
    pk.ConnRqst: _enc_conn_rqst,
    pk.ConnRply: _enc_options,
    pk.DisconnRqst: _enc_xid,
    pk.DisconnRply: _enc_xid,
    pk.Disconn: _enc_disconn,
    pk.SecRqst: _enc_sec_rqst,
    pk.SecRply: _enc_xid,
    pk.NotifyEmit: _enc_notify_emit,
    pk.NotifyDeliver: _enc_notify_deliver,
    pk.SubAddRqst: _enc_sub_add_rqst,
    pk.SubModRqst: _enc_sub_mod_rqst,
    pk.SubDelRqst: _enc_xid_sub_id,
    pk.SubRply: _enc_xid_sub_id,
    pk.DropWarn: _enc_nothing,
    pk.TestConn: _enc_nothing,
    pk.ConfConn: _enc_nothing,
    pk.QosRqst: _enc_options,
    pk.QosRply: _enc_options,
    pk.QnchAddRqst: _enc_qnch_add_rqst,
    pk.QnchModRqst: _enc_qnch_mod_rqst,
    pk.QnchDelRqst: _enc_xid_quench_id,
    pk.QnchRply: _enc_xid_quench_id,
    pk.SubAddNotify: _enc_sub_notify,
    pk.SubModNotify: _enc_sub_notify,
    pk.SubDelNotify: _enc_sub_del_notify,
}
assert set(_ENCODERS) == set(pk.PACKET_CLASSES.values())
_HEADERS = {cls: _p_i32(int(cls.ID)) for cls in _ENCODERS}


def _encode_into(b: bytearray, packet: pk.Packet) -> None:
    cls = type(packet)
    encoder = _ENCODERS.get(cls)
    if encoder is None:
        raise TypeError(f"not an Elvin packet: {cls.__name__}")
    b += _HEADERS[cls]
    try:
        encoder(b, packet)
    except _STRUCT_ERROR as exc:
        raise ValueError(f"cannot encode {cls.__name__}: {exc}") from None


def encode_packet(packet: pk.Packet) -> bytes:
    """The XDR body of ``packet`` (``pkt_id`` first, no frame header)."""
    b = bytearray()
    _encode_into(b, packet)
    return bytes(b)


def frame_packet(packet: pk.Packet) -> bytes:
    """``packet`` encoded with its 4-byte big-endian TCP frame header (8.2.1)."""
    b = bytearray(4)
    _encode_into(b, packet)
    _pack_into_u32(b, 0, len(b) - 4)
    return bytes(b)


def encode_ast(node: Node) -> bytes:
    """One SubAST (spec 8.2.3.4) as XDR."""
    b = bytearray()
    try:
        _put_ast(b, node)
    except _STRUCT_ERROR as exc:
        raise ValueError(f"cannot encode SubAST: {exc}") from None
    return bytes(b)


def encode_value(value: object) -> bytes:
    """One typed Value (typecode + value) as XDR, e.g. a pk.Nack argument."""
    b = bytearray()
    put_value(b, value)
    return bytes(b)


def encode_attributes(attributes: Mapping[str, object]) -> bytes:
    """A NameValue array (count + name/type/value triples) as XDR.

    The router encodes a notification's attributes once with this and then
    builds each subscriber's pk.NotifyDeliver with ``frame_notify_deliver``."""
    b = bytearray()
    try:
        put_attrs(b, attributes)
    except _STRUCT_ERROR as exc:
        raise ValueError(f"cannot encode attributes: {exc}") from None
    return bytes(b)


_DELIVER_ID = int(pk.PacketId.NOTIFY_DELIVER)
_S_HDR_ID = struct.Struct(">Ii")
_ONE_ID = struct.Struct(">iQ")
_NO_IDS = XDR_FALSE


def _ids_block(ids: Iterable[int] | Sequence[int]) -> bytes:
    n = len(ids)  # type: ignore[arg-type]  # an Iterable without len() is a caller's TypeError, as before
    if not n:
        return _NO_IDS
    if n == 1:
        (only,) = ids
        return _ONE_ID.pack(1, only)
    return _p_i32(n) + id64_array(n).pack(*ids)


def notify_deliver_head(attributes_block: bytes) -> bytes:
    """What every framed pk.NotifyDeliver of one notification to a single
    insecure subscription starts with (frame length, pkt_id, the attributes,
    no secure ids): a fan-out builds it once, and each subscriber's frame is
    it plus ``one_insecure_id(id)``, as ``frame_notify_deliver(block, (), (id,))``."""
    return b"".join((_S_HDR_ID.pack(len(attributes_block) + 20, _DELIVER_ID),
                     attributes_block, _NO_IDS))


#: the end of a frame that starts with ``notify_deliver_head``: one insecure id
one_insecure_id: Callable[[int], bytes] = functools.partial(_ONE_ID.pack, 1)


def frame_notify_deliver(attributes_block: bytes, secure_matches: Sequence[int] = (),
                         insecure_matches: Sequence[int] = ()) -> bytes:
    """A framed pk.NotifyDeliver from attributes already encoded with
    ``encode_attributes``: the per-subscriber cost is two small packs."""
    try:
        if not secure_matches and len(insecure_matches) == 1:
            # the usual delivery: one subscription of the client, no keys
            (only,) = insecure_matches
            return b"".join((_S_HDR_ID.pack(len(attributes_block) + 20, _DELIVER_ID),
                             attributes_block, _NO_IDS, _ONE_ID.pack(1, only)))
        secure = _ids_block(secure_matches)
        insecure = _ids_block(insecure_matches)
    except _STRUCT_ERROR as exc:
        raise ValueError(f"cannot encode pk.NotifyDeliver subscription ids: {exc}") from None
    total = 4 + len(attributes_block) + len(secure) + len(insecure)
    return b"".join((_S_HDR_ID.pack(total, _DELIVER_ID), attributes_block, secure, insecure))
