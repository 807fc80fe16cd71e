"""The XDR primitives of the Elvin protocols (client protocol 8.2.3.2).

One home for reading and writing the wire's building blocks (strings,
opaques, booleans, range-checked unsigned ints, counted arrays, typed
values, NameValue arrays and Keys), shared by every Elvin codec in the
suite: the client protocol (``elvin.protocol.xdr``), federation
(``elvin.federation.packets`` and ``subast``) and router discovery
(``elvin.discovery.codec``). Sharing them is what makes a string, a key set
or an attribute read exactly alike whichever protocol carries it, with the
same limits and the same error messages. Sans-IO, like the rest of
``elvin.protocol``.

Reading: every ``read_*`` takes ``(data, offset, end, ...)`` and returns
``(value, new_offset)``. ``data`` is ``bytes`` and ``end`` is where the
caller's packet (or sub-structure) stops; variable lengths and counts are
checked against ``end`` *before* anything is allocated. Fixed-size reads
past the end of ``data`` raise ``struct.error``: a packet decoder catches it
and reports a truncated packet. Everything else wrong raises
``ProtocolError`` naming ``what`` and the byte offset, or ``LimitError``
naming the ``Limits`` field exceeded. Padding bytes are not checked (as
Avis: we accept what the peer put there and always send zeros).

Writing: every ``put_*`` appends to a ``bytearray`` and raises
``TypeError``/``ValueError`` (naming ``what``) for a value that cannot be
encoded; writers never enforce ``Limits``.

The attribute reader and writer are the hot loops of the router and the
client (inlined reads, caches of attribute names); change them with
``bench/`` at hand.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from elvin.errors import ProtocolError
from elvin.keys import EMPTY_KEYS, Keys, KeyScheme
from elvin.protocol import _accel
from elvin.protocol.limits import LimitError, Limits
from elvin.values import INT32_MAX, INT32_MIN, ElvinType, Int64, Value, check_value

__all__ = [
    "ACCEL_READER_ARGS",
    "INT32",
    "INT64",
    "PAD",
    "REAL64",
    "TC_INT32",
    "TC_INT64",
    "TC_OPAQUE",
    "TC_REAL64",
    "TC_STRING",
    "TYPED_INT32",
    "TYPED_INT64",
    "TYPED_LENGTH",
    "TYPED_REAL64",
    "UINT32",
    "UINT64",
    "XDR_FALSE",
    "XDR_TRUE",
    "check_range",
    "id64_array",
    "put_attrs",
    "put_bool",
    "put_ids",
    "put_keys",
    "put_names",
    "put_opaque",
    "put_string",
    "put_u32",
    "put_u64",
    "put_value",
    "read_attrs",
    "read_attrs_pure",
    "read_bool",
    "read_count",
    "read_id64s",
    "read_keys",
    "read_opaque",
    "read_string",
    "read_strings",
    "read_uint",
    "read_value",
    "read_values",
    "skip_attrs",
]

# --------------------------------------------------------------------------
# the fixed-size layouts, big-endian as XDR requires
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")        # XDR hyper
UINT64 = struct.Struct(">Q")       # id64
REAL64 = struct.Struct(">d")       # IEEE double
TYPED_INT32 = struct.Struct(">ii")     # value typecode + int32 (or + a length word)
TYPED_INT64 = struct.Struct(">iq")     # value typecode + int64
TYPED_REAL64 = struct.Struct(">id")    # value typecode + real64
TYPED_LENGTH = struct.Struct(">iI")    # value typecode + string/opaque length

_i32 = INT32.unpack_from
_u32 = UINT32.unpack_from
_i64 = INT64.unpack_from
_u64 = UINT64.unpack_from
_f64 = REAL64.unpack_from
_ii = TYPED_INT32.unpack_from
_p_i32 = INT32.pack
_p_u32 = UINT32.pack
_p_u64 = UINT64.pack
_p_ii = TYPED_INT32.pack
_p_iq = TYPED_INT64.pack
_p_id = TYPED_REAL64.pack
_p_iu = TYPED_LENGTH.pack
_STRUCT_ERROR = struct.error

#: the padding after a string or opaque of length n is ``PAD[n & 3]``
PAD = (b"", b"\0\0\0", b"\0\0", b"\0")
XDR_FALSE = b"\0\0\0\0"
XDR_TRUE = b"\0\0\0\1"

#: value typecodes (8.2.3.3)
TC_INT32, TC_INT64, TC_REAL64, TC_STRING, TC_OPAQUE = 1, 2, 3, 4, 5

_new_int64 = int.__new__   # Int64 without the range check: 8 bytes always fit
_K = TypeVar("_K")
_N = TypeVar("_N")


def id64_array(n: int) -> struct.Struct:
    """The layout of ``n`` id64s in a row (cached for the usual small counts)."""
    s = _Q_ARRAYS.get(n)
    if s is None:
        s = struct.Struct(f">{n}Q")
        if n <= 256:
            _Q_ARRAYS[n] = s
    return s


_Q_ARRAYS: dict[int, struct.Struct] = {}


# ==========================================================================
# reading


def _utf8_error(what: str, exc: UnicodeDecodeError, start: int) -> ProtocolError:
    return ProtocolError(f"invalid UTF-8 in {what} ({exc.reason})", start + exc.start)


def _nul_error(what: str, text: str, start: int) -> ProtocolError:
    return ProtocolError(f"NUL character in {what}", start + len(text[: text.index("\0")]
                                                                  .encode("utf-8")))


def _length_error(what: str, noun: str, length: int, o: int, end: int,
                  maximum: int | None, limit: str, name: str | None = None) -> ProtocolError:
    """Why the counted bytes whose length word (signed or not) is at ``o``
    were refused: they do not fit in what remains of the packet, or they are
    over the limit. ``name``: the attribute a value belongs to. The readers
    only test, in one condition, and leave the wording to this cold path."""
    start = o + 4
    of, named = ("", "") if name is None else (f" of {name!r}", f" {name!r}")
    if length < 0 or start + length > end:
        return ProtocolError(f"{what}: {noun} length {length & 0xFFFFFFFF}{of} exceeds the "
                             f"{end - start} bytes remaining", o)
    return LimitError(f"{what}: {noun}{named} of {length} bytes exceeds the limit of "
                      f"{maximum}", o, limit)


def read_opaque(data: bytes, o: int, end: int, what: str,
                max_length: int | None = None, limit: str = "") -> tuple[bytes, int]:
    """An opaque (bytes); ``max_length`` (bytes) is the ``Limits`` field
    named ``limit``. The length is checked against the bytes that remain
    before anything is copied."""
    (n,) = _u32(data, o)
    s = o + 4
    e = s + n
    if e > end or (max_length is not None and n > max_length):
        raise _length_error(what, "opaque", n, o, end, max_length, limit)
    return data[s:e], e + _PADLEN[n & 3]


_PADLEN = (0, 3, 2, 1)


def read_string(data: bytes, o: int, end: int, what: str,
                max_length: int | None = None, limit: str = "") -> tuple[str, int]:
    """A UTF-8 string without NUL: ``read_opaque`` with the text checks
    (written out again rather than called: a call costs a SubAddRqst or Nack
    decode 5-10%)."""
    (n,) = _u32(data, o)
    s = o + 4
    e = s + n
    if e > end or (max_length is not None and n > max_length):
        raise _length_error(what, "string", n, o, end, max_length, limit)
    try:
        text = data[s:e].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _utf8_error(what, exc, s) from None
    if "\0" in text:
        raise _nul_error(what, text, s)
    return text, e + _PADLEN[n & 3]


def read_bool(data: bytes, o: int, what: str) -> tuple[bool, int]:
    """A boolean word: 0 or 1, anything else is refused."""
    (v,) = _u32(data, o)
    if v > 1:
        raise ProtocolError(f"{what}: boolean must be 0 or 1, not {v}", o)
    return v == 1, o + 4


def read_uint(data: bytes, o: int, what: str, maximum: int) -> tuple[int, int]:
    """An unsigned word up to ``maximum`` (uint8 and uint16 travel as words)."""
    (v,) = _u32(data, o)
    if v > maximum:
        raise ProtocolError(f"{what}: {v} is out of range (0..{maximum})", o)
    return v, o + 4


def read_count(data: bytes, o: int, end: int, what: str, item_size: int,
               maximum: int, limit: str) -> tuple[int, int]:
    """An array count, checked against the bytes left (each item takes at
    least ``item_size`` bytes) before anything is allocated, then the limit."""
    (n,) = _i32(data, o)
    if n < 0:
        raise ProtocolError(f"{what}: negative array count {n}", o)
    if n * item_size > end - o - 4:
        raise ProtocolError(f"{what}: array count {n} cannot fit in the {end - o - 4} bytes "
                            "remaining", o)
    if n > maximum:
        raise LimitError(f"{what}: {n} items exceed the limit of {maximum}", o, limit)
    return n, o + 4


def add_child(stack: list[tuple[_K, int, list[_N]]], node: _N,
              finish: Callable[[_K, list[_N], int], _N], o: int) -> _N | None:
    """One step of an iterative tree reader (both SubAST forms: the client
    protocol's and federation's): give ``node`` to the innermost open parent
    on ``stack`` (``(kind, child count, children so far)``), and each parent
    that this completes, ``finish(kind, children, o)``, to the one above it.

    Returns the finished root, or ``None`` while a parent still waits for
    children. Reading this way, rather than recursively, means no input can
    exhaust the Python stack; the reader bounds ``len(stack)``."""
    while stack:
        kind, count, children = stack[-1]
        children.append(node)
        if len(children) < count:
            return None
        stack.pop()
        node = finish(kind, children, o)
    return node


def read_value(data: bytes, o: int, end: int, limits: Limits,
               what: str) -> tuple[Value, int]:
    """A typed value (typecode first); int64 values come back as ``Int64``."""
    (tc,) = _i32(data, o)
    o += 4
    if tc == TC_STRING:
        return read_string(data, o, end, what, limits.max_string_length,
                            "max_string_length")
    if tc == TC_INT32:
        return _i32(data, o)[0], o + 4
    if tc == TC_INT64:
        return _new_int64(Int64, _i64(data, o)[0]), o + 8
    if tc == TC_REAL64:
        return _f64(data, o)[0], o + 8
    if tc == TC_OPAQUE:
        return read_opaque(data, o, end, what, limits.max_opaque_length,
                            "max_opaque_length")
    raise ProtocolError(f"{what}: unknown value typecode {tc}", o - 4)


#: decoded attribute names by their UTF-8 bytes (see ``read_attrs``); only
#: names that passed every check are stored, and the length limit is checked
#: again on every read, so the cache never changes what is accepted.
_DECODED_NAMES: dict[bytes, str] = {}
_DECODED_NAMES_MAX = 4096


def read_attrs_pure(data: bytes, o: int, end: int, limits: Limits,
                    what: str = "attributes") -> tuple[dict[str, Value], int]:
    """The hot loop: an array of NameValue into a dict (inlined reads). This
    is ``read_attrs`` itself unless the compiled accelerator is in use (see
    ``read_attrs`` below); it is the reference the accelerator is tested
    against, and it decides every packet the accelerator gives up on."""
    (n,) = _i32(data, o)
    if n < 0:
        raise ProtocolError(f"{what}: negative attribute count {n}", o)
    if n * 12 > end - o - 4:   # smallest NameValue: empty name + int32 = 12 bytes
        raise ProtocolError(f"{what}: attribute count {n} cannot fit in the "
                            f"{end - o - 4} bytes remaining", o)
    if n > limits.max_attributes:
        raise LimitError(f"{what}: {n} attributes exceed the limit of "
                         f"{limits.max_attributes}", o, "max_attributes")
    o += 4
    attrs: dict[str, Value] = {}
    value: Value
    if not n:
        return attrs, o
    max_name = limits.max_name_length
    max_string = limits.max_string_length
    max_opaque = limits.max_opaque_length
    u32 = _u32
    ii = _ii
    padlen = _PADLEN
    names = _DECODED_NAMES
    for _ in range(n):
        # -- name
        (ln,) = u32(data, o)
        s = o + 4
        e = s + ln
        if e > end or ln > max_name:
            raise _length_error(what, "name", ln, o, end, max_name, "max_name_length")
        # Names repeat from one notification to the next: the cache saves the
        # UTF-8 decode and NUL scan, and hands back a str whose hash is
        # already computed for the dict insert and the application's lookups.
        raw = data[s:e]
        name = names.get(raw)
        if name is None:
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _utf8_error(f"{what}: attribute name", exc, s) from None
            if "\0" in name:
                raise _nul_error(f"{what}: attribute name", name, s)
            if len(names) >= _DECODED_NAMES_MAX:
                names.clear()      # bounded: a stream of ever-new names cannot grow it
            names[raw] = name
        o = e + padlen[ln & 3]
        # -- typed value: the typecode and the next word in one unpack
        tc, w = ii(data, o)
        if tc == 4:
            s = o + 8
            e = s + w
            if w < 0 or e > end or w > max_string:
                raise _length_error(what, "string", w, o + 4, end, max_string,
                                    "max_string_length", name)
            try:
                value = data[s:e].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _utf8_error(f"{what}: value of {name!r}", exc, s) from None
            if "\0" in value:
                raise _nul_error(f"{what}: value of {name!r}", value, s)
            o = e + padlen[w & 3]
        elif tc == 1:
            value = w
            o += 8
        elif tc == 2:
            value = _new_int64(Int64, _i64(data, o + 4)[0])
            o += 12
        elif tc == 3:
            value = _f64(data, o + 4)[0]
            o += 12
        elif tc == 5:
            s = o + 8
            e = s + w
            if w < 0 or e > end or w > max_opaque:
                raise _length_error(what, "opaque", w, o + 4, end, max_opaque,
                                    "max_opaque_length", name)
            value = data[s:e]
            o = e + padlen[w & 3]
        else:
            raise ProtocolError(f"{what}: unknown value typecode {tc} for {name!r}", o)
        attrs[name] = value
    return attrs, o


def _read_attrs_compiled(data: bytes, o: int, end: int, limits: Limits,
                         what: str = "attributes") -> tuple[dict[str, Value], int]:
    """``read_attrs`` through the compiled accelerator (``elvin.protocol._accel``):
    it decodes well-formed arrays and returns None for anything else, which
    ``read_attrs_pure`` then decodes or refuses with its exact error."""
    got: tuple[dict[str, Value], int] | None = _FAST_READ_ATTRS(
        data, o, end, limits.max_attributes, limits.max_name_length,
        limits.max_string_length, limits.max_opaque_length, _DECODED_NAMES,
        _DECODED_NAMES_MAX, _NEW_INT64)
    if got is None:
        return read_attrs_pure(data, o, end, limits, what)
    return got


def _new_int64_value(value: int) -> Int64:
    return _new_int64(Int64, value)


def _no_accelerator(*_args: object) -> None:
    """Without the accelerator every array goes to the pure reader."""
    return None


_NEW_INT64 = _new_int64_value
_FAST_READ_ATTRS: Callable[..., Any] = getattr(_accel.xdrfast, "read_attrs", _no_accelerator)
#: the NameValue array reader: the compiled accelerator's when it is in use
#: (``make accel``; ``ELVIN_PURE=1`` turns it off), else the pure one
read_attrs = read_attrs_pure if _accel.xdrfast is None else _read_attrs_compiled
#: what every compiled reader takes after the limits (the name cache, its
#: size limit, the Int64 maker): ``fastpath``'s NotifyEmit reader shares them
ACCEL_READER_ARGS = (_DECODED_NAMES, _DECODED_NAMES_MAX, _NEW_INT64)


def skip_attrs(data: bytes, o: int, end: int) -> int:
    """The offset just past the NameValue array at ``o``, its values left
    encoded (a mobility proxy keeps them as they came); ProtocolError when
    it does not fit before ``end`` or has an unknown typecode. Only the
    layout is checked, not that names and strings are UTF-8: this is for
    frames the router itself encoded (``decode_attributes`` checks all)."""
    try:
        (n,) = _i32(data, o)
        if n < 0 or n * 12 > end - o - 4:
            raise ProtocolError(f"attributes: bad attribute count {n}", o)
        o += 4
        u32, ii, padlen = _u32, _ii, _PADLEN
        for _ in range(n):
            (ln,) = u32(data, o)
            o += 4 + ln + padlen[ln & 3]
            tc, w = ii(data, o)
            if tc == 4 or tc == 5:
                if w < 0:
                    raise ProtocolError("attributes: negative length", o)
                o += 8 + w + padlen[w & 3]
            elif tc == 1:
                o += 8
            elif tc == 2 or tc == 3:
                o += 12
            else:
                raise ProtocolError(f"attributes: unknown value typecode {tc}", o)
            if o > end:
                raise ProtocolError("attributes: longer than the packet", o)
    except _STRUCT_ERROR:
        raise ProtocolError("attributes: truncated", len(data)) from None
    return o


def read_id64s(data: bytes, o: int, end: int, limits: Limits,
               what: str) -> tuple[tuple[int, ...], int]:
    """A counted array of id64 (subscription and quench ids)."""
    n, o = read_count(data, o, end, what, 8, limits.max_array_length, "max_array_length")
    if not n:
        return (), o
    if n == 1:
        return _u64(data, o), o + 8
    return id64_array(n).unpack_from(data, o), o + 8 * n


def read_strings(data: bytes, o: int, end: int, limits: Limits,
                 what: str) -> tuple[tuple[str, ...], int]:
    """A counted array of names (attribute names, routing lists), each held to
    ``max_name_length``."""
    n, o = read_count(data, o, end, what, 4, limits.max_array_length, "max_array_length")
    out = []
    for i in range(n):
        text, o = read_string(data, o, end, f"{what}[{i}]", limits.max_name_length,
                               "max_name_length")
        out.append(text)
    return tuple(out), o


def read_values(data: bytes, o: int, end: int, limits: Limits,
                what: str) -> tuple[tuple[Value, ...], int]:
    """A counted array of typed values (Nack arguments)."""
    n, o = read_count(data, o, end, what, 8, limits.max_array_length, "max_array_length")
    out: list[Value] = []
    for i in range(n):
        value, o = read_value(data, o, end, limits, f"{what}[{i}]")
        out.append(value)
    return tuple(out), o


def read_keys(data: bytes, o: int, end: int, limits: Limits, what: str) -> tuple[Keys, int]:
    """A key list (``{id32 scheme; array of key sets}``): sets of one scheme
    are merged, and ``max_keys`` counts keys over all schemes."""
    (n,) = _i32(data, o)
    if n == 0:
        return EMPTY_KEYS, o + 4
    n, o = read_count(data, o, end, what, 8, limits.max_keys, "max_keys")
    total = 0
    max_keys = limits.max_keys
    schemes: dict[int, list[set[bytes]]] = {}
    for _ in range(n):
        (scheme,) = _u32(data, o)
        sets_what = f"{what}: scheme {scheme} key sets"
        nsets, o = read_count(data, o + 4, end, sets_what, 4, max_keys, "max_keys")
        merged = schemes.setdefault(scheme, [])
        for index in range(nsets):
            set_what = f"{what}: scheme {scheme} key set {index}"
            nkeys, o = read_count(data, o, end, set_what, 4, max_keys, "max_keys")
            total += nkeys
            if total > max_keys:
                raise LimitError(f"{what}: more than {max_keys} keys", o - 4, "max_keys")
            if index >= len(merged):
                merged.append(set())
            target = merged[index]
            for _k in range(nkeys):
                key, o = read_opaque(data, o, end, set_what, limits.max_opaque_length,
                                      "max_opaque_length")
                target.add(key)
    # Trailing empty sets are dropped (a dual-scheme Keys with only producer
    # keys travels as two sets but reads back as one): Keys.key_set() treats
    # a missing set as empty, so nothing is lost and round trips compare equal.
    out: dict[int, tuple[frozenset[bytes], ...]] = {}
    for scheme, sets in schemes.items():
        while sets and not sets[-1]:
            sets.pop()
        if sets:
            out[scheme] = tuple(frozenset(s) for s in sets)
    return Keys(out), o



# ==========================================================================
# writing


def put_string(b: bytearray, text: str, what: str) -> None:
    """A str as UTF-8 with padding; NUL is refused (the spec forbids it)."""
    if type(text) is not str:
        if not isinstance(text, str):
            raise TypeError(f"{what} must be a str, not {type(text).__name__}")
    if "\0" in text:
        raise ValueError(f"{what} may not contain NUL")
    raw = text.encode("utf-8")
    n = len(raw)
    b += _p_u32(n)
    b += raw
    b += PAD[n & 3]


def put_opaque(b: bytearray, raw: bytes) -> None:
    """Bytes with their length and padding."""
    n = len(raw)
    b += _p_u32(n)
    b += raw
    b += PAD[n & 3]


def check_range(value: object, low: int, high: int, what: str) -> int:
    """``value`` if it is an int (not a bool) in ``low..high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{what} {value} is out of range ({low}..{high})")
    return value


def put_u32(b: bytearray, value: int, what: str, high: int = 0xFFFFFFFF) -> None:
    """An unsigned word, refused above ``high`` (255 for a uint8, ...)."""
    b += _p_u32(check_range(value, 0, high, what))


def put_u64(b: bytearray, value: int, what: str) -> None:
    """An id64."""
    b += _p_u64(check_range(value, 0, 0xFFFFFFFFFFFFFFFF, what))


def put_bool(b: bytearray, value: object) -> None:
    """Any truth value as an XDR boolean word."""
    b += XDR_TRUE if value else XDR_FALSE


#: attribute names as XDR strings, by name (names repeat a lot)
_ENCODED_NAMES: dict[str, bytes] = {}
_ENCODED_NAMES_MAX = 4096


def _encoded_name(name: str) -> bytes:
    """An attribute name as an XDR string, cached (names repeat a lot)."""
    if type(name) is not str:
        if not isinstance(name, str):
            raise TypeError(f"attribute names are str, not {type(name).__name__}")
        name = str(name)
    if "\0" in name:
        raise ValueError(f"attribute name {name!r} contains NUL")
    raw = name.encode("utf-8")
    n = len(raw)
    enc = _p_u32(n) + raw + PAD[n & 3]
    if n <= 256:
        if len(_ENCODED_NAMES) >= _ENCODED_NAMES_MAX:
            _ENCODED_NAMES.clear()
        _ENCODED_NAMES[name] = enc
    return enc


def _put_value_slow(b: bytearray, name: str, value: object) -> None:
    kind = check_value(name, value)   # TypeError/ValueError naming the attribute
    if kind is ElvinType.INT32:
        b += _p_ii(TC_INT32, int(value))  # type: ignore[call-overload]  # check_value: an int
    elif kind is ElvinType.INT64:
        b += _p_iq(TC_INT64, int(value))  # type: ignore[call-overload]  # check_value: an int
    elif kind is ElvinType.REAL64:
        b += _p_id(TC_REAL64, float(value))  # type: ignore[arg-type]  # check_value: a number
    elif kind is ElvinType.STRING:
        b += _p_i32(TC_STRING)
        put_string(b, str(value), f"value of {name!r}")
    else:
        b += _p_i32(TC_OPAQUE)
        put_opaque(b, bytes(value))  # type: ignore[call-overload]  # check_value: a buffer


def put_attrs(b: bytearray, attrs: Mapping[str, object]) -> None:
    """A NameValue array; values as ``elvin.values`` defines them (``int``
    travels as int32 when it fits, else int64)."""
    b += _p_i32(len(attrs))
    cache = _ENCODED_NAMES
    # Any: each value's type is tested below as ``t is str`` (``t = type(value)``, once,
    # for speed), which mypy cannot follow; anything else goes to check_value
    items: Iterable[tuple[str, Any]] = attrs.items()
    for name, value in items:
        enc = cache.get(name)
        b += enc if enc is not None else _encoded_name(name)
        t = type(value)
        if t is str:
            if "\0" in value:
                raise ValueError(f"attribute {name!r}: strings may not contain NUL")
            raw = value.encode("utf-8")
            n = len(raw)
            b += _p_iu(TC_STRING, n)
            b += raw
            b += PAD[n & 3]
        elif t is int:
            if INT32_MIN <= value <= INT32_MAX:
                b += _p_ii(TC_INT32, value)
            else:
                _put_value_slow(b, name, value)
        elif t is Int64:
            b += _p_iq(TC_INT64, value)
        elif t is float:
            b += _p_id(TC_REAL64, value)
        elif t is bytes:
            n = len(value)
            b += _p_iu(TC_OPAQUE, n)
            b += value
            b += PAD[n & 3]
        else:
            _put_value_slow(b, name, value)


def put_value(b: bytearray, value: object, what: str = "value") -> None:
    """One typed value (typecode first)."""
    _put_value_slow(b, what, value)


def put_keys(b: bytearray, keys: Keys) -> None:
    """A key list, schemes in order, each known scheme with its full number
    of key sets."""
    sets = keys.sets
    if not sets:
        b += XDR_FALSE
        return
    b += _p_i32(len(sets))
    for scheme in sorted(sets):
        key_sets = list(sets[scheme])
        try:
            # known schemes always carry their full number of sets (Avis checks)
            key_sets += [frozenset()] * (KeyScheme(scheme).set_count - len(key_sets))
        except ValueError:
            pass
        put_u32(b, scheme, "key scheme id")
        b += _p_i32(len(key_sets))
        for key_set in key_sets:
            b += _p_i32(len(key_set))
            for key in sorted(key_set):
                put_opaque(b, key)


def put_ids(b: bytearray, ids: Sequence[int], what: str) -> None:
    """A counted array of id64."""
    n = len(ids)
    b += _p_i32(n)
    if n:
        try:
            b += id64_array(n).pack(*ids)
        except _STRUCT_ERROR:
            for i in ids:
                put_u64(b, i, what)


def put_names(b: bytearray, names: Sequence[str], what: str) -> None:
    """A counted array of strings (a lone str is refused, not split)."""
    if isinstance(names, str):
        raise TypeError(f"{what} is a sequence of names, not a str")
    b += _p_i32(len(names))
    for name in names:
        put_string(b, name, what)
