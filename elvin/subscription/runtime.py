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
division by zero gives the IEEE 754 infinities or NaN. ``%`` on reals is
Java's floating-point remainder (C's ``fmod``: ``7.0 % 2.5 == 2.0``, the
sign of the dividend, NaN for a zero divisor or an infinite dividend): the
spec has a FIXME there and Avis computes it so. The bitwise operators and
shifts are defined on the integer types only (spec 6.1.12); on a real64
they give bottom.

Comparisons promote too: an int64 compared with a real64 is converted to a
double first, as Java does, so ``9007199254740993L == 9007199254740992.0``.
Two real64 values are equal when their sign, mantissa and exponent are
(spec 6.1.11): ``-0.0 == 0.0`` is false and a NaN equals a NaN (all NaNs
are one value, as Java's ``Double.equals`` has it). The order of reals is a
FIXME in the spec; like Avis we use Java's ``Double.compareTo``, the total
order that agrees with that equality: -inf < ... < -0.0 < 0.0 < ... < +inf
< NaN. An integer meeting a real is promoted first (``0`` becomes ``+0.0``).

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
from typing import Any

from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64

#: what arithmetic gives (an Int64 is an int); the operands are Any: any attribute value
#: may reach an operator, and ``rank`` tells them apart by ``type(v) is``, for speed
Number = int | float

__all__ = [
    "I32", "I64", "R64",
    "rank", "make_int64",
    "add", "sub", "mul", "div", "mod", "shl", "shr", "ushr",
    "bit_and", "bit_or", "bit_xor", "neg", "pos", "inv",
    "eq", "ne", "lt", "le", "gt", "ge", "real_compare", "real_key",
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
        if INT32_MIN <= v <= INT32_MAX:  # type: ignore[operator]  # type() is, for speed: mypy does not narrow through t
            return I32
        if INT64_MIN <= v <= INT64_MAX:  # type: ignore[operator]  # as above
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


def add(x: Any, y: Any) -> Number | None:
    r = _rank2(x, y)
    if r == I32:
        return _wrap32(x + y)
    if r == I64:
        return _wrap64(x + y)
    if r == R64:
        return float(x) + float(y)
    return None


def sub(x: Any, y: Any) -> Number | None:
    r = _rank2(x, y)
    if r == I32:
        return _wrap32(x - y)
    if r == I64:
        return _wrap64(x - y)
    if r == R64:
        return float(x) - float(y)
    return None


def mul(x: Any, y: Any) -> Number | None:
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


def div(x: Any, y: Any) -> Number | None:
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


def _real_rem(x: float, y: float) -> float:
    """Java's ``x % y`` on doubles (``math.fmod`` raises where Java gives NaN)."""
    if y == 0.0 or x != x or y != y or x in (math.inf, -math.inf):
        return math.nan
    return math.fmod(x, y)


def mod(x: Any, y: Any) -> Number | None:
    r = _rank2(x, y)
    if r == I32:
        return None if y == 0 else _java_rem(x, y)
    if r == I64:
        return None if y == 0 else _new_int(Int64, _java_rem(x, y))
    if r == R64:
        return _real_rem(float(x), float(y))
    return None


def shl(x: Any, y: Any) -> Number | None:
    r = _rank2(x, y)
    if r == I32:
        return _wrap32(x << (y & 31))
    if r == I64:
        return _wrap64(x << (y & 63))
    return None


def shr(x: Any, y: Any) -> Number | None:
    r = _rank2(x, y)
    if r == I32:
        return x >> (y & 31)
    if r == I64:
        return _new_int(Int64, x >> (y & 63))
    return None


def ushr(x: Any, y: Any) -> Number | None:
    r = _rank2(x, y)
    if r == I32:
        return _wrap32((x & 0xFFFFFFFF) >> (y & 31))
    if r == I64:
        return _wrap64((x & 0xFFFFFFFFFFFFFFFF) >> (y & 63))
    return None


def bit_and(x: Any, y: Any) -> Number | None:
    r = _rank2(x, y)
    if r == I32:
        return x & y
    if r == I64:
        return _new_int(Int64, x & y)
    return None


def bit_or(x: Any, y: Any) -> Number | None:
    r = _rank2(x, y)
    if r == I32:
        return x | y
    if r == I64:
        return _new_int(Int64, x | y)
    return None


def bit_xor(x: Any, y: Any) -> Number | None:
    r = _rank2(x, y)
    if r == I32:
        return x ^ y
    if r == I64:
        return _new_int(Int64, x ^ y)
    return None


def neg(x: Any) -> Number | None:
    r = rank(x)
    if r == I32:
        return _wrap32(-x)
    if r == I64:
        return _wrap64(-x)
    if r == R64:
        return -x
    return None


def pos(x: Any) -> Number | None:
    r = rank(x)
    if r == I64 and type(x) is int:
        return _new_int(Int64, x)
    return x if r >= 0 else None


def inv(x: Any) -> Number | None:
    r = rank(x)
    if r == I32:
        return ~x
    if r == I64:
        return _new_int(Int64, ~x)
    return None


def real_compare(x: float, y: float) -> int:
    """-1, 0 or 1: Java's ``Double.compare`` (-0.0 < 0.0, NaN above +inf,
    every NaN equal to every NaN)."""
    if x < y:
        return -1
    if x > y:
        return 1
    if x == y:
        if x != 0.0:
            return 0
        sx, sy = math.copysign(1.0, x), math.copysign(1.0, y)
        return 0 if sx == sy else (-1 if sx < sy else 1)
    # a NaN is involved
    return (x != x) - (y != y)


class _RealKey:
    """The key of a real64 that Python's float equality would confuse."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_NAN_KEY = _RealKey("NaN")
_NEGATIVE_ZERO_KEY = _RealKey("-0.0")


def real_key(x: float) -> object:
    """A hashable key equal for two reals exactly when ``==`` says they are
    equal: the float itself, except for -0.0 (Python says ``-0.0 == 0.0``)
    and NaN (Python says ``nan != nan``), which get keys of their own."""
    if x != x:
        return _NAN_KEY
    if x == 0.0 and math.copysign(1.0, x) < 0.0:
        return _NEGATIVE_ZERO_KEY
    return x


def _compare(x: Any, y: Any) -> int | None:
    """-1 / 0 / 1 for two numbers after promotion, None (bottom) otherwise."""
    rx = rank(x)
    if rx < 0:
        return None
    ry = rank(y)
    if ry < 0:
        return None
    if rx == R64 or ry == R64:
        return real_compare(float(x), float(y))
    return -1 if x < y else (1 if x > y else 0)


def eq(x: Any, y: Any) -> bool | None:
    """``==``: numbers after promotion, strings with strings, else bottom."""
    if type(x) is str:
        return x == y if type(y) is str else None
    c = _compare(x, y)
    return None if c is None else c == 0


def ne(x: Any, y: Any) -> bool | None:
    r = eq(x, y)
    return None if r is None else not r


def lt(x: Any, y: Any) -> bool | None:
    c = _compare(x, y)
    return None if c is None else c < 0


def le(x: Any, y: Any) -> bool | None:
    c = _compare(x, y)
    return None if c is None else c <= 0


def gt(x: Any, y: Any) -> bool | None:
    c = _compare(x, y)
    return None if c is None else c > 0


def ge(x: Any, y: Any) -> bool | None:
    c = _compare(x, y)
    return None if c is None else c >= 0


def fold_case(s: object) -> str | None:
    return s.casefold() if type(s) is str else None


def decompose(s: object) -> str | None:
    return unicodedata.normalize("NFD", s) if type(s) is str else None


def decompose_compat(s: object) -> str | None:
    return unicodedata.normalize("NFKD", s) if type(s) is str else None


def size(v: Any) -> int | None:       # Any: told apart by type(v) is, as in eq
    """Size in bytes: UTF-8 length of a string, length of an opaque."""
    t = type(v)
    if t is str:
        return len(v.encode("utf-8", "surrogatepass"))
    if t is bytes:
        return len(v)
    return None
