"""What a subscription needs from a notification: the router's index keys.

``required_names(tree)``: attribute names that must all be present for the
expression to be true. It is computed for both outcomes of every predicate,
because ``!`` turns "false" into "true" and ``||``/``^^`` combine them:

    need_T(a && b) = need_T(a) | need_T(b)   need_F(a && b) = need_F(a) & need_F(b)
    need_T(a || b) = need_T(a) & need_T(b)   need_F(a || b) = need_F(a) | need_F(b)
    need_T(!a) = need_F(a)                   need_F(!a) = need_T(a)
    a ^^ b is true or false only when both are: need = defined(a) | defined(b)

A comparison, a type test, a string predicate is true *or false* only when
every attribute it names is present (a missing attribute makes it bottom).
``require(x)`` is never false, so ``!require(x)`` is never true; an outcome
that can never happen requires "everything" (``_NEVER``), which is the unit
of ``&`` and absorbs ``|``. A constant predicate inside a larger expression
(``1 == 2`` in ``x == 1 || 1 == 2``) requires nothing for the outcome it
always has and "everything" for the others. When the whole expression can never be true we
return every name it mentions (any answer is then sound).

``index_constraint(tree)``: ``(attribute, values)`` such that the expression
can only be true when ``index_value(notification[attribute])`` is one of
``values``; from ``name == literal``, ``equals(name, literals...)``, an
``||`` of those on one attribute (values united) and an ``&&`` (the side
with fewer values). ``fold-case(x) == "a"`` and the like give nothing: the
raw value is not what is compared.

``index_value(v)`` makes equal-comparing numbers the same key: an int32, an
int64 and a real64 that ``==`` says are equal get equal, equally hashed keys
(Python's ``5 == 5.0`` with equal hashes does the rest). Integers beyond
2**53 become the real64 they convert to, as ``==`` with a real converts
them. Every NaN gets the one key ``NAN_KEY`` (a NaN equals a NaN, but
Python's ``nan in {nan}`` only finds the very same object). -0.0 and 0.0
share a key although ``==`` tells them apart: a key may stand for more than
one value (the router evaluates every candidate), never for too few. The
key of a key is itself (the router files ``index_value`` of the keys that
``index_constraint`` gives). Values of no Elvin type, and opaques (never
equal to anything), get a key that matches nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from elvin.subscription.ast import Kind, Node, flatten, name_equals_literals, names_in
from elvin.subscription.checker import COMPARISONS, STRING_PREDICATES, TYPE_PREDICATES, fold
from elvin.subscription.reference import evaluate
from elvin.values import INT64_MAX, INT64_MIN, Int64
from elvin.values import REAL64_EXACT as _EXACT

__all__ = ["index_constraint", "index_value", "literal_key",
           "required_names"]

_NEVER = None  # "cannot happen": requires everything
#: what a subtree needs present to be true (or to be false): names, or _NEVER
_Need = frozenset[str] | None


class _Unindexable:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unindexable>"


UNINDEXABLE = _Unindexable()


class _NaNKey:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<NaN>"


NAN_KEY = _NaNKey()


def _union(sets: Iterable[_Need]) -> _Need:
    out: set[str] = set()
    for s in sets:
        if s is _NEVER:
            return _NEVER
        out |= s
    return frozenset(out)


def _intersection(sets: Iterable[_Need]) -> _Need:
    out: frozenset[str] | None = None
    for s in sets:
        if s is _NEVER:
            continue
        out = s if out is None else out & s
    return _NEVER if out is None else frozenset(out)


def _need(node: Node, want: bool) -> _Need:
    k = node.kind
    if k is Kind.NOT:
        return _need(node.children[0], not want)
    if k is Kind.AND or k is Kind.OR:
        parts = [_need(c, want) for c in flatten(node)]
        return _union(parts) if (k is Kind.AND) == want else _intersection(parts)
    if k is Kind.XOR:
        defined = [_intersection([_need(c, True), _need(c, False)]) for c in flatten(node)]
        return _union(defined)
    if k is Kind.FUNC_REQUIRE:
        return frozenset({node.children[0].value}) if want else _NEVER
    if (k in COMPARISONS or k in STRING_PREDICATES or k is Kind.FUNC_EQUALS) and \
            not names_in(node):
        return frozenset() if evaluate(node, {}) is want else _NEVER
    if k is Kind.FUNC_EQUALS and want:
        first, *rest = node.children
        common = _intersection([names_in(r) for r in rest])   # rest is never empty
        return names_in(first) | (common or frozenset())
    if k in COMPARISONS or k in TYPE_PREDICATES or k is Kind.FUNC_EQUALS:
        return names_in(node)
    if k in STRING_PREDICATES:
        return names_in(node.children[0])
    return frozenset()   # unknown: require nothing (always sound)


def required_names(node: Node) -> frozenset[str]:
    """Names that must all be present for ``node`` to be true."""
    result = _need(node, True)
    if result is _NEVER:
        return names_in(node)
    return result


def index_value(value: object) -> object:
    """Hashable key for a value, equal for values that ``==`` says are equal."""
    t = type(value)
    if t is str:
        return value
    if t is float:
        return value if value == value else NAN_KEY
    if value is NAN_KEY:
        return NAN_KEY
    if t is int or t is Int64:
        if not INT64_MIN <= value <= INT64_MAX:  # type: ignore[operator]  # type() is, for speed: an int here
            return UNINDEXABLE
        if -_EXACT <= value <= _EXACT:  # type: ignore[operator]  # as above
            return int(value)  # type: ignore[call-overload]  # as above
        return float(value)  # type: ignore[arg-type]  # as above
    return UNINDEXABLE


def literal_key(node: Node) -> object:
    """The ``index_value`` of a literal node (an int64 literal as an int64)."""
    if node.kind is Kind.INT64:
        return index_value(Int64(node.value))
    return index_value(node.value)


def _constraint(node: Node) -> tuple[str, frozenset[Any]] | None:
    k = node.kind
    if k is Kind.NOT:
        child = node.children[0]
        if child.kind is Kind.NOT_EQUALS:
            return _constraint(Node(Kind.EQUALS, child.children))
        if child.kind is Kind.NOT:
            return _constraint(child.children[0])
        return None
    if k is Kind.EQUALS or k is Kind.FUNC_EQUALS:
        found = name_equals_literals(node)
        if found is None:
            return None
        return found[0], frozenset(literal_key(r) for r in found[1])
    if k is Kind.OR:
        alternatives = [_constraint(c) for c in flatten(node)]
        known = [f for f in alternatives if f is not None]
        if len(known) != len(alternatives):
            return None
        attrs = {alt[0] for alt in known}
        if len(attrs) != 1:
            return None
        values: set[object] = set()
        for alt in known:
            values |= alt[1]
        return attrs.pop(), frozenset(values)
    if k is Kind.AND:
        best: tuple[str, frozenset[Any]] | None = None
        for c in flatten(node):
            f = _constraint(c)
            if f is not None and (best is None or len(f[1]) < len(best[1])):
                best = f
        return best
    return None


def index_constraint(node: Node) -> tuple[str, frozenset[Any]] | None:
    """``(attribute, keys)`` such that ``node`` can be true only when
    ``index_value(notification[attribute]) in keys``; or None."""
    return _constraint(fold(node))
