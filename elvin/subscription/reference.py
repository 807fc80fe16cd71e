"""A plain tree-walking interpreter: the executable reading of the semantics.

It is deliberately simple and independent of the compiler and of
``runtime.py`` (values are tagged tuples, integer wrapping is done with
``struct``-free modular arithmetic written out again; reals are compared
by their bit patterns, as Java's ``Double.compare`` does, and their
remainder is computed exactly with fractions) so that the tests can check
the compiled evaluator against it. It is slow; do not use it to route.

``evaluate(tree, notification)`` returns True, False or None (bottom).
"""

from __future__ import annotations

import math
import struct
import unicodedata
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Literal, TypeGuard

from elvin.subscription.ast import Kind, Node
from elvin.subscription.logic import and3, not3, or3, xor3
from elvin.subscription.patterns import MATCH_TIMEOUT, compile_glob, compile_regex
from elvin.values import Int64

__all__ = ["evaluate"]

# Tagged values: ("int32", n) ("int64", n) ("real64", x) ("string", s)
# ("opaque", b) ("other", v) for a present value of no Elvin type; None is bottom.

_BITS = {"int32": 32, "int64": 64}

#: a value with its Elvin type, as above (None: bottom)
Tagged = tuple[str, Any] | None


def _tag(v: object) -> tuple[str, Any]:
    if type(v) is str:
        return ("string", v)
    if type(v) is bytes:
        return ("opaque", v)
    if type(v) is float:
        return ("real64", v)
    if type(v) is Int64:
        return ("int64", int(v))
    if type(v) is int:
        if -(2 ** 31) <= v < 2 ** 31:
            return ("int32", v)
        if -(2 ** 63) <= v < 2 ** 63:
            return ("int64", v)
    return ("other", v)


def _signed(n: int, bits: int) -> int:
    n %= 2 ** bits
    if n >= 2 ** (bits - 1):
        n -= 2 ** bits
    return n


def _real_bits(x: float) -> int:
    """Java's ``Double.doubleToLongBits``: the IEEE 754 bits as a signed
    64-bit integer, every NaN as the one canonical NaN."""
    if math.isnan(x):
        return 0x7FF8000000000000
    bits: int = struct.unpack(">q", struct.pack(">d", x))[0]
    return bits


def _real_order(x: float, y: float) -> int:
    """Java's ``Double.compare``: numeric order, then the bit patterns (so
    -0.0 < 0.0 and NaN, the largest pattern, above +inf)."""
    if x < y:
        return -1
    if x > y:
        return 1
    bx, by = _real_bits(x), _real_bits(y)
    return (bx > by) - (bx < by)


def _real_remainder(x: float, y: float) -> float:
    """Java's ``%`` on doubles: x - y * trunc(x / y), computed exactly."""
    if math.isnan(x) or math.isnan(y) or math.isinf(x) or y == 0.0:
        return math.nan
    if math.isinf(y):
        return x
    fx, fy = Fraction(x), Fraction(y)
    quotient = fx / fy
    whole = math.floor(quotient) if quotient >= 0 else math.ceil(quotient)
    r = float(fx - whole * fy)
    return math.copysign(abs(r), x) if r == 0.0 else r


def _is_num(t: Tagged) -> TypeGuard[tuple[str, Any]]:
    return t is not None and t[0] in ("int32", "int64", "real64")


def _common(a: tuple[str, Any], b: tuple[str, Any]) -> str:
    kinds = {a[0], b[0]}
    if "real64" in kinds:
        return "real64"
    if "int64" in kinds:
        return "int64"
    return "int32"


def _arith(kind: Kind, a: Tagged, b: Tagged) -> Tagged:
    if not (_is_num(a) and _is_num(b)):
        return None
    t = _common(a, b)
    x, y = a[1], b[1]
    if t == "real64":
        x, y = float(x), float(y)
        if kind is Kind.ADD:
            return (t, x + y)
        if kind is Kind.SUBTRACT:
            return (t, x - y)
        if kind is Kind.MULTIPLY:
            return (t, x * y)
        if kind is Kind.DIVIDE:
            if y != 0.0:
                return (t, x / y)
            if math.isnan(x) or x == 0.0:
                return (t, math.nan)
            negative = (math.copysign(1.0, x) < 0) != (math.copysign(1.0, y) < 0)
            return (t, -math.inf if negative else math.inf)
        if kind is Kind.MODULO:
            return (t, _real_remainder(x, y))
        return None  # the shifts and bitwise operators are not defined on reals
    bits = _BITS[t]
    if kind is Kind.ADD:
        r = x + y
    elif kind is Kind.SUBTRACT:
        r = x - y
    elif kind is Kind.MULTIPLY:
        r = x * y
    elif kind is Kind.DIVIDE:
        if y == 0:
            return None
        r = int(abs(x) // abs(y))
        if (x < 0) != (y < 0):
            r = -r
    elif kind is Kind.MODULO:
        if y == 0:
            return None
        q = abs(x) // abs(y)
        if (x < 0) != (y < 0):
            q = -q
        r = x - q * y
    elif kind is Kind.SHIFT_LEFT:
        r = x << (y % bits)
    elif kind is Kind.SHIFT_RIGHT:
        r = x >> (y % bits)
    elif kind is Kind.LOGICAL_SHIFT_RIGHT:
        r = (x % 2 ** bits) >> (y % bits)
    elif kind is Kind.BIT_AND:
        r = x & y
    elif kind is Kind.BIT_OR:
        r = x | y
    elif kind is Kind.BIT_XOR:
        r = x ^ y
    else:
        raise AssertionError(kind)
    return (t, _signed(r, bits))


def _compare(kind: Kind, a: Tagged, b: Tagged) -> bool | None:
    if a is None or b is None:
        return None
    if _is_num(a) and _is_num(b):
        if "real64" in (a[0], b[0]):
            order = _real_order(float(a[1]), float(b[1]))
        else:
            order = (a[1] > b[1]) - (a[1] < b[1])
    elif a[0] == "string" and b[0] == "string" and kind in (Kind.EQUALS, Kind.NOT_EQUALS):
        order = 0 if a[1] == b[1] else 1
    else:
        return None
    if kind is Kind.EQUALS:
        return order == 0
    if kind is Kind.NOT_EQUALS:
        return order != 0
    if kind is Kind.LESS_THAN:
        return order < 0
    if kind is Kind.LESS_THAN_EQUALS:
        return order <= 0
    if kind is Kind.GREATER_THAN:
        return order > 0
    return order >= 0


class _Interp:
    def __init__(self, attrs: Mapping[str, Any]) -> None:
        self.attrs = attrs

    def lookup(self, name: str) -> Tagged:
        if name not in self.attrs:
            return None
        return _tag(self.attrs[name])

    def value(self, node: Node) -> Tagged:
        k = node.kind
        if k is Kind.NAME:
            return self.lookup(node.value)
        if k is Kind.INT32:
            return ("int32", node.value)
        if k is Kind.INT64:
            return ("int64", int(node.value))
        if k is Kind.REAL64:
            return ("real64", node.value)
        if k is Kind.STRING:
            return ("string", node.value)
        if k in (Kind.ADD, Kind.SUBTRACT, Kind.MULTIPLY, Kind.DIVIDE, Kind.MODULO,
                 Kind.SHIFT_LEFT, Kind.SHIFT_RIGHT, Kind.LOGICAL_SHIFT_RIGHT,
                 Kind.BIT_AND, Kind.BIT_OR, Kind.BIT_XOR):
            return _arith(k, self.value(node.children[0]), self.value(node.children[1]))
        if k is Kind.UNARY_PLUS:
            a = self.value(node.children[0])
            return a if _is_num(a) else None
        if k is Kind.UNARY_MINUS:
            a = self.value(node.children[0])
            if not _is_num(a):
                return None
            if a[0] == "real64":
                return (a[0], -a[1])
            return (a[0], _signed(-a[1], _BITS[a[0]]))
        if k is Kind.BIT_NEGATE:
            a = self.value(node.children[0])
            if a is None or a[0] not in _BITS:
                return None
            return (a[0], -a[1] - 1)
        if k in (Kind.FUNC_FOLD_CASE, Kind.FUNC_DECOMPOSE, Kind.FUNC_DECOMPOSE_COMPAT):
            a = self.value(node.children[0])
            if a is None or a[0] != "string":
                return None
            if k is Kind.FUNC_FOLD_CASE:
                return ("string", a[1].casefold())
            form: Literal["NFD", "NFKD"] = "NFD" if k is Kind.FUNC_DECOMPOSE else "NFKD"
            return ("string", unicodedata.normalize(form, a[1]))
        if k is Kind.FUNC_SIZE:
            a = self.value(node.children[0])
            if a is None:
                return None
            if a[0] == "string":
                return ("int32", len(a[1].encode("utf-8", "surrogatepass")))
            if a[0] == "opaque":
                return ("int32", len(a[1]))
            return None
        raise AssertionError(f"not a value: {k!r}")

    def truth(self, node: Node) -> bool | None:
        k = node.kind
        if k is Kind.AND:
            result: bool | None = True
            for c in node.children:
                result = and3(result, self.truth(c))
            return result
        if k is Kind.OR:
            result = False
            for c in node.children:
                result = or3(result, self.truth(c))
            return result
        if k is Kind.XOR:
            values = [self.truth(c) for c in node.children]
            result = values[0]
            for v in values[1:]:
                result = xor3(result, v)
            return result
        if k is Kind.NOT:
            return not3(self.truth(node.children[0]))
        if k in (Kind.EQUALS, Kind.NOT_EQUALS, Kind.LESS_THAN, Kind.LESS_THAN_EQUALS,
                 Kind.GREATER_THAN, Kind.GREATER_THAN_EQUALS):
            return _compare(k, self.value(node.children[0]), self.value(node.children[1]))
        if k is Kind.FUNC_EQUALS:
            first = self.value(node.children[0])
            result = False
            for c in node.children[1:]:
                result = or3(result, _compare(Kind.EQUALS, first, self.value(c)))
            return result
        if k is Kind.FUNC_REQUIRE:
            return True if node.children[0].value in self.attrs else None
        if k in (Kind.FUNC_INT32, Kind.FUNC_INT64, Kind.FUNC_REAL64, Kind.FUNC_STRING,
                 Kind.FUNC_OPAQUE, Kind.FUNC_NAN):
            a = self.lookup(node.children[0].value)
            if a is None:
                return None
            if k is Kind.FUNC_NAN:
                return a[0] == "real64" and math.isnan(a[1])
            wanted = {Kind.FUNC_INT32: "int32", Kind.FUNC_INT64: "int64",
                      Kind.FUNC_REAL64: "real64", Kind.FUNC_STRING: "string",
                      Kind.FUNC_OPAQUE: "opaque"}[k]
            return a[0] == wanted
        if k in (Kind.FUNC_BEGINS_WITH, Kind.FUNC_ENDS_WITH, Kind.FUNC_CONTAINS,
                 Kind.FUNC_WILDCARD, Kind.FUNC_REGEX):
            a = self.value(node.children[0])
            if a is None or a[0] != "string":
                return None
            s = a[1]
            patterns = [c.value for c in node.children[1:]]
            result = False
            for p in patterns:
                if k is Kind.FUNC_BEGINS_WITH and s[:len(p)] == p:
                    return True
                if k is Kind.FUNC_ENDS_WITH and (p == "" or s[-len(p):] == p):
                    return True
                if k is Kind.FUNC_CONTAINS and s.find(p) >= 0:
                    return True
                if k is Kind.FUNC_WILDCARD or k is Kind.FUNC_REGEX:
                    # the engine itself (not the matchers' literal pre-filter);
                    # a match that runs out of time is bottom
                    try:
                        if k is Kind.FUNC_WILDCARD:
                            found = compile_glob([p]).fullmatch(s, timeout=MATCH_TIMEOUT)
                        else:
                            found = compile_regex([p]).search(s, timeout=MATCH_TIMEOUT)
                    except TimeoutError:
                        result = None
                        continue
                    if found is not None:
                        return True
            return result
        raise AssertionError(f"not a predicate: {k!r}")


def evaluate(node: Node, attrs: Mapping[str, Any]) -> bool | None:
    """True, False or None (bottom) for ``node`` on the notification ``attrs``."""
    return _Interp(attrs).truth(node)
