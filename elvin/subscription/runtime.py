"""Value semantics of the subscription language, shared by the compiled
evaluator and the constant folder.

Every function here takes Python values as they appear in a notification
(or ``None`` for bottom / a missing attribute) and returns a value or
``None``; none of them raises on any input.

Elvin types follow from Python types, checked with ``type(v) is ...`` so
that subclasses (``bool``, ``str`` subclasses...) are *not* Elvin values:

* ``int`` in the int32 range -> int32; ``int`` in the int64 range -> int64;
  a larger ``int`` is no Elvin value at all (treated like a wrong type);
* ``Int64`` -> int64 (always, whatever the magnitude);
* ``float`` -> real64; ``str`` -> string; ``bytes`` -> opaque.

Arithmetic follows Java: int32 and int64 results wrap in two's complement,
``/`` truncates toward zero, ``%`` takes the sign of the dividend, shift
counts are masked to 5 (int32) or 6 (int64) bits, ``>>>`` shifts in zeros.
Operands are promoted first (int32 < int64 < real64, spec 6.2) -- for the
shifts too, so ``1 << 40L`` is the int64 ``1 << 40`` (Java would keep the
left operand's type; the spec says "the type of the result value is always
the promoted type"). Integer division or remainder by zero is bottom; real
division by zero gives the IEEE 754 infinities or NaN. ``%`` and the
bitwise operators are defined on the integer types only (spec 6.1.12);
on a real64 they give bottom. Comparisons promote too: an int64 compared
with a real64 is converted to a double first, as Java does, so
``9007199254740993L == 9007199254740992.0``. NaN compares false with
everything (so ``!=`` -- defined as ``!(a == b)`` -- is true).

Strings: ``fold-case`` is Unicode full case folding (``str.casefold``, so
``"Straße"`` folds to ``"strasse"``; Avis uses Java's ``toLowerCase``, which
keeps the ``ß``); ``decompose`` is NFD and ``decompose-compat`` NFKD;
``size`` of a string is its UTF-8 length in bytes (a lone surrogate, which
a local caller may put in a ``str``, counts as its 3-byte encoding instead
of raising).
"""

from __future__ import annotations

import math
import unicodedata

from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64

__all__ = [
    "I32", "I64", "R64",
    "rank", "make_int64",
    "add", "sub", "mul", "div", "mod", "shl", "shr", "ushr",
    "bit_and", "bit_or", "bit_xor", "neg", "pos", "inv",
    "eq", "ne", "lt", "le", "gt", "ge",
    "fold_case", "decompose", "decompose_compat", "size",
]

#: numeric ranks, the promotion order of spec 6.2
I32, I64, R64 = 0, 1, 2

_new_int = int.__new__


def make_int64(value: int) -> Int64:
    """An ``Int64`` without the range check of ``Int64()`` (callers wrap)."""
    return _new_int(Int64, value)


def rank(v: object) -> int:
    """I32 / I64 / R64 for a numeric Elvin value, -1 for anything else."""
    t = type(v)
    if t is int:
        if INT32_MIN <= v <= INT32_MAX:  # type: ignore[operator]
            return I32
        if INT64_MIN <= v <= INT64_MAX:  # type: ignore[operator]
            return I64
        return -1
    if t is float:
        return R64
    if t is Int64:
        return I64
    return -1


def _rank2(x: object, y: object) -> int:
    rx = rank(x)
    if rx < 0:
        return -1
    ry = rank(y)
    if ry < 0:
        return -1
    return rx if rx > ry else ry


def _wrap32(v: int) -> int:
    return ((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def _wrap64(v: int) -> Int64:
    return _new_int(Int64, ((v + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000)


def add(x, y):
    r = _rank2(x, y)
    if r == I32:
        return _wrap32(x + y)
    if r == I64:
        return _wrap64(x + y)
    if r == R64:
        return float(x) + float(y)
    return None


def sub(x, y):
    r = _rank2(x, y)
    if r == I32:
        return _wrap32(x - y)
    if r == I64:
        return _wrap64(x - y)
    if r == R64:
        return float(x) - float(y)
    return None


def mul(x, y):
    r = _rank2(x, y)
    if r == I32:
        return _wrap32(x * y)
    if r == I64:
        return _wrap64(x * y)
    if r == R64:
        return float(x) * float(y)
    return None


def _trunc_div(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return -q if (x < 0) != (y < 0) else q


def _real_div(x: float, y: float) -> float:
    if y == 0.0:
        if x == 0.0 or x != x:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def div(x, y):
    r = _rank2(x, y)
    if r == I32:
        return None if y == 0 else _wrap32(_trunc_div(x, y))
    if r == I64:
        return None if y == 0 else _wrap64(_trunc_div(x, y))
    if r == R64:
        return _real_div(float(x), float(y))
    return None


def _java_rem(x: int, y: int) -> int:
    m = abs(x) % abs(y)
    return -m if x < 0 else m


def mod(x, y):
    r = _rank2(x, y)
    if r == I32:
        return None if y == 0 else _java_rem(x, y)
    if r == I64:
        return None if y == 0 else _new_int(Int64, _java_rem(x, y))
    return None


def shl(x, y):
    r = _rank2(x, y)
    if r == I32:
        return _wrap32(x << (y & 31))
    if r == I64:
        return _wrap64(x << (y & 63))
    return None


def shr(x, y):
    r = _rank2(x, y)
    if r == I32:
        return x >> (y & 31)
    if r == I64:
        return _new_int(Int64, x >> (y & 63))
    return None


def ushr(x, y):
    r = _rank2(x, y)
    if r == I32:
        return _wrap32((x & 0xFFFFFFFF) >> (y & 31))
    if r == I64:
        return _wrap64((x & 0xFFFFFFFFFFFFFFFF) >> (y & 63))
    return None


def bit_and(x, y):
    r = _rank2(x, y)
    if r == I32:
        return x & y
    if r == I64:
        return _new_int(Int64, x & y)
    return None


def bit_or(x, y):
    r = _rank2(x, y)
    if r == I32:
        return x | y
    if r == I64:
        return _new_int(Int64, x | y)
    return None


def bit_xor(x, y):
    r = _rank2(x, y)
    if r == I32:
        return x ^ y
    if r == I64:
        return _new_int(Int64, x ^ y)
    return None


def neg(x):
    r = rank(x)
    if r == I32:
        return _wrap32(-x)
    if r == I64:
        return _wrap64(-x)
    if r == R64:
        return -x
    return None


def pos(x):
    r = rank(x)
    if r == I64 and type(x) is int:
        return _new_int(Int64, x)
    return x if r >= 0 else None


def inv(x):
    r = rank(x)
    if r == I32:
        return ~x
    if r == I64:
        return _new_int(Int64, ~x)
    return None


def eq(x, y):
    """``==``: numbers after promotion, strings with strings, else bottom."""
    rx = rank(x)
    if rx >= 0:
        ry = rank(y)
        if ry < 0:
            return None
        if rx == R64 or ry == R64:
            return float(x) == float(y)
        return x == y
    if type(x) is str and type(y) is str:
        return x == y
    return None


def ne(x, y):
    r = eq(x, y)
    return None if r is None else not r


def _ordered(x, y):
    rx = rank(x)
    if rx < 0:
        return None
    ry = rank(y)
    if ry < 0:
        return None
    if rx == R64 or ry == R64:
        return float(x), float(y)
    return x, y


def lt(x, y):
    p = _ordered(x, y)
    return None if p is None else p[0] < p[1]


def le(x, y):
    p = _ordered(x, y)
    return None if p is None else p[0] <= p[1]


def gt(x, y):
    p = _ordered(x, y)
    return None if p is None else p[0] > p[1]


def ge(x, y):
    p = _ordered(x, y)
    return None if p is None else p[0] >= p[1]


def fold_case(s):
    return s.casefold() if type(s) is str else None


def decompose(s):
    return unicodedata.normalize("NFD", s) if type(s) is str else None


def decompose_compat(s):
    return unicodedata.normalize("NFKD", s) if type(s) is str else None


def size(v):
    """Size in bytes: UTF-8 length of a string, length of an opaque."""
    t = type(v)
    if t is str:
        return len(v.encode("utf-8", "surrogatepass"))
    if t is bytes:
        return len(v)
    return None
