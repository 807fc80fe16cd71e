"""Subscription tree -> nested closures: an evaluator that is cheap to build.

The compiler (``compiler.py``) writes Python source and has ``compile``
turn it into bytecode: the fastest evaluator, but for a 4 KB expression of
350 terms generating and compiling the code takes ~50 ms, most of it in
``compile`` itself, which holds the GIL. A client registering a few hundred
such subscriptions would keep the router's worker busy for many seconds.
For a large tree this module builds one closure per node instead (about a
millisecond for that expression); each returns the node's three-valued
result (True, False or None for bottom) or value, using the same runtime
helpers as the compiled code (``runtime.py``: comparisons by Java's rules,
arithmetic that wraps, bottom for a missing attribute or a wrong type).
Evaluating is a few times slower than compiled code, which matters little:
the router's index lets a large expression through only when the
notification meets one of its necessary conditions.

``build(tree)`` gives ``(matches, evaluate)`` like ``compiler.build``;
both catch every exception (there should be none) and never raise. No
closure refers back to another, so a dropped subscription's evaluator is
freed by reference counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from elvin.subscription import runtime as rt
from elvin.subscription.ast import LITERAL_KINDS, Kind, Node, flatten
from elvin.subscription.cancel import checkpoint
from elvin.subscription.checker import (
    BINARY_VALUE_OPS,
    COMPARE_FUNCS,
    STRING_FUNCTIONS,
    UNARY_VALUE_OPS,
    fold,
)
from elvin.subscription.patterns import glob_matcher, regex_matcher
from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64

__all__ = ["build", "build_checked", "build_named"]

Closure = Callable[[Mapping[str, Any]], Any]
#: ``(name, test, constant)``: see ``_Builder.row``
Row = tuple[str, Callable[[Any, Any], Any], Any]

_COMPARE = COMPARE_FUNCS
_STRING_FUNCTIONS = STRING_FUNCTIONS
_CHECK_EVERY = 256          # nodes between cancellation checkpoints
_LITERALS = frozenset((Kind.INT32, Kind.INT64, Kind.REAL64, Kind.STRING))


def _int32(v: Any) -> bool:
    return type(v) is int and INT32_MIN <= v <= INT32_MAX


def _int64(v: Any) -> bool:
    return type(v) is Int64 or (type(v) is int and not INT32_MIN <= v <= INT32_MAX
                                and INT64_MIN <= v <= INT64_MAX)


_TYPE_TESTS: dict[Kind, Callable[[Any], bool]] = {
    Kind.FUNC_INT32: _int32,
    Kind.FUNC_INT64: _int64,
    Kind.FUNC_REAL64: lambda v: type(v) is float,
    Kind.FUNC_STRING: lambda v: type(v) is str,
    Kind.FUNC_OPAQUE: lambda v: type(v) is bytes,
    Kind.FUNC_NAN: lambda v: type(v) is float and v != v,
}


class _Builder:
    __slots__ = ("count", "names", "foldable")

    def __init__(self) -> None:
        self.count = 0
        #: every attribute name the tree reads (each reaches the builder
        #: once): a long tree's names without another walk
        self.names: set[str] = set()
        #: whether ``checker.fold`` would change the tree: a value operator
        #: with only literal operands (each reaches ``value``)
        self.foldable = False

    def tick(self) -> None:
        self.count += 1
        if self.count % _CHECK_EVERY == 0:
            checkpoint()            # a long expression's build may be cancelled

    # -- values: the value, or None (bottom) -------------------------------------------------
    def value(self, node: Node) -> Closure:
        self.tick()
        k = node.kind
        if k is Kind.NAME:
            name = node.value
            self.names.add(name)
            return lambda a: a.get(name)
        if k in (Kind.INT32, Kind.INT64, Kind.REAL64, Kind.STRING):
            constant = _constant(node)
            return lambda a: constant
        if k in BINARY_VALUE_OPS:
            op = BINARY_VALUE_OPS[k]
            a_node, b_node = node.children
            if a_node.kind in LITERAL_KINDS and b_node.kind in LITERAL_KINDS:
                self.foldable = True
            left, right = self.value(a_node), self.value(b_node)
            return lambda a: op(left(a), right(a))
        if k in UNARY_VALUE_OPS or k in _STRING_FUNCTIONS:
            unary: Callable[[Any], object] = UNARY_VALUE_OPS.get(k) or _STRING_FUNCTIONS[k]
            if node.children[0].kind in LITERAL_KINDS:
                self.foldable = True
            operand = self.value(node.children[0])
            return lambda a: unary(operand(a))
        if k is Kind.FUNC_SIZE:
            name = node.children[0].value
            self.names.add(name)
            return lambda a: rt.size(a.get(name))
        raise AssertionError(f"not a value node: {k!r}")

    # -- predicates: True, False or None ----------------------------------------------------
    def truth(self, node: Node) -> Closure:
        self.count += 1
        if not self.count % _CHECK_EVERY:
            checkpoint()            # a long expression's build may be cancelled
        k = node.kind
        if k in _COMPARE:           # (the commonest node of a long expression)
            return self.comparison(node)
        if k is Kind.AND:
            return _all(*self.operands(node))
        if k is Kind.OR:
            return _any(*self.operands(node))
        if k is Kind.XOR:
            return _xor(tuple([self.truth(c) for c in flatten(node)]))
        if k is Kind.NOT:
            operand = self.truth(node.children[0])
            return lambda a: None if (v := operand(a)) is None else not v
        if k is Kind.FUNC_EQUALS:
            first = self.value(node.children[0])
            rest = tuple(self.value(c) for c in node.children[1:])
            return _any((), (), tuple(_compared(rt.eq, first, r) for r in rest))
        if k is Kind.FUNC_REQUIRE:
            name = node.children[0].value
            self.names.add(name)
            return lambda a: True if name in a else None
        if k in _TYPE_TESTS:
            name = node.children[0].value
            self.names.add(name)
            test = _TYPE_TESTS[k]
            return lambda a: test(a[name]) if name in a else None
        if k in (Kind.FUNC_BEGINS_WITH, Kind.FUNC_ENDS_WITH, Kind.FUNC_CONTAINS,
                 Kind.FUNC_REGEX, Kind.FUNC_WILDCARD):
            return self.string_predicate(node)
        raise AssertionError(f"not a predicate: {k!r}")

    def operands(self, node: Node) -> tuple[tuple[Row, ...], tuple[tuple[Row, ...], ...],
                                            tuple[Closure, ...]]:
        """An ``&&`` or ``||`` chain's operands, most of a long expression
        in three kinds the chain's closure runs in loops of its own, with no
        closure to build or call for each: rows (``_row``), groups (an
        operand that is a chain of the other operator, all of rows: the
        ``(a > 1 && b < 2)`` of an ``||``), and closures for the rest. The
        chain's value does not depend on the order (no operand has an
        effect), so rows and groups run first."""
        rows: list[Row] = []
        groups: list[tuple[Row, ...]] = []
        others: list[Closure] = []
        inner = Kind.OR if node.kind is Kind.AND else Kind.AND
        for child in flatten(node):
            row = self.row(child)
            if row is not None:
                rows.append(row)
                continue
            if child.kind is inner:
                group = [self.row(c) for c in flatten(child)]
                if None not in group:
                    groups.append(tuple(group))  # type: ignore[arg-type]  # None is not in group
                    continue
            others.append(self.truth(child))
        return tuple(rows), tuple(groups), tuple(others)

    def row(self, node: Node) -> Row | None:
        """``(name, test, constant)`` for an attribute compared with a
        literal or a ``require``, whose value is ``test(value, constant)``
        when the attribute is there and bottom when it is not; else None."""
        self.count += 1
        if not self.count % _CHECK_EVERY:
            checkpoint()            # a long expression's build may be cancelled
        k = node.kind
        compare = _COMPARE.get(k)
        if compare is not None:
            left, right = node.children
            if left.kind is Kind.NAME:
                name = left.value
                rk = right.kind
                if rk is Kind.STRING or rk is Kind.INT32:
                    constant = right.value
                elif rk is Kind.REAL64 or rk is Kind.INT64:
                    constant = _constant(right)
                else:
                    return None
                self.names.add(name)
                return (name, compare, constant)
            return None
        if k is Kind.FUNC_REQUIRE:
            name = node.children[0].value
            self.names.add(name)
            return (name, _required, None)
        return None

    def comparison(self, node: Node) -> Closure:
        compare = _COMPARE[node.kind]
        left, right = node.children
        if left.kind is Kind.NAME and right.kind in _LITERALS:
            name, constant = left.value, _constant(right)
            self.names.add(name)
            return lambda a: compare(a.get(name), constant)
        return _compared(compare, self.value(left), self.value(right))

    def string_predicate(self, node: Node) -> Closure:
        k = node.kind
        subject = self.value(node.children[0])
        patterns = tuple(c.value for c in node.children[1:])
        if k is Kind.FUNC_BEGINS_WITH:
            return lambda a: s.startswith(patterns) if type(s := subject(a)) is str else None
        if k is Kind.FUNC_ENDS_WITH:
            return lambda a: s.endswith(patterns) if type(s := subject(a)) is str else None
        if k is Kind.FUNC_CONTAINS:
            return lambda a: (any(p in s for p in patterns) if type(s := subject(a)) is str
                              else None)
        # True / False / None (out of time)
        matcher = (glob_matcher if k is Kind.FUNC_WILDCARD else regex_matcher)(patterns)
        return lambda a: matcher(s) if type(s := subject(a)) is str else None


def _constant(node: Node) -> Any:
    k = node.kind
    if k is Kind.INT64:
        return rt.make_int64(int(node.value))
    if k is Kind.INT32:
        return int(node.value)
    if k is Kind.REAL64:
        return float(node.value)
    return node.value


def _required(value: Any, _unused: None) -> bool:
    """``require(name)`` as a row of a chain (``_Builder.operands``): a
    notification's values are never None, so the chain's ``get`` has said
    whether it is there, and a row is only tested with a value."""
    return True


def _compared(compare: Callable[..., Any], left: Closure, right: Closure) -> Closure:
    return lambda a: compare(left(a), right(a))


def _all(rows: tuple[Row, ...], groups: tuple[tuple[Row, ...], ...],
         parts: tuple[Closure, ...]) -> Closure:
    """An ``&&`` chain (``_Builder.operands``; its groups are ``||``s)."""
    def conjunction(a: Mapping[str, Any]) -> bool | None:
        result: bool | None = True
        get = a.get
        for name, compare, constant in rows:
            v = get(name)
            if v is None:               # missing: bottom, whatever the row's test
                result = None
                continue
            v = compare(v, constant)
            if v is False:
                return False
            if v is None:
                result = None
        for group in groups:
            g: bool | None = False
            for name, compare, constant in group:
                v = get(name)
                if v is None:
                    g = None
                    continue
                v = compare(v, constant)
                if v is True:
                    g = True
                    break
                if v is None:
                    g = None
            if g is False:
                return False
            if g is None:
                result = None
        for part in parts:
            v = part(a)
            if v is False:
                return False
            if v is None:
                result = None
        return result
    return conjunction


def _any(rows: tuple[Row, ...], groups: tuple[tuple[Row, ...], ...],
         parts: tuple[Closure, ...]) -> Closure:
    """An ``||`` chain (``_Builder.operands``; its groups are ``&&``s)."""
    def disjunction(a: Mapping[str, Any]) -> bool | None:
        result: bool | None = False
        get = a.get
        for name, compare, constant in rows:
            v = get(name)
            if v is None:               # missing: bottom, whatever the row's test
                result = None
                continue
            v = compare(v, constant)
            if v is True:
                return True
            if v is None:
                result = None
        for group in groups:
            g: bool | None = True
            for name, compare, constant in group:
                v = get(name)
                if v is None:
                    g = None
                    continue
                v = compare(v, constant)
                if v is False:
                    g = False
                    break
                if v is None:
                    g = None
            if g is True:
                return True
            if g is None:
                result = None
        for part in parts:
            v = part(a)
            if v is True:
                return True
            if v is None:
                result = None
        return result
    return disjunction


def _xor(parts: tuple[Closure, ...]) -> Closure:
    def exclusive(a: Mapping[str, Any]) -> bool | None:
        result = False
        for part in parts:
            v = part(a)
            if v is None:
                return None
            result = result is not v
        return result
    return exclusive


def build(tree: Node) -> tuple[Callable[[Mapping[str, Any]], bool], Callable[[Mapping[str, Any]], bool | None]]:
    """``(matches, evaluate)`` for a checked, folded tree."""
    matches, evaluate, _names = build_named(tree)
    return matches, evaluate


def build_checked(tree: Node) -> tuple[Node, Callable[[Mapping[str, Any]], bool],
                                       Callable[[Mapping[str, Any]], bool | None], frozenset[str]]:
    """``(folded tree, matches, evaluate, names)`` for a checked tree:
    ``checker.fold``'s tree and ``build_named``'s, with no walk to find out
    whether there is anything to fold (the usual case: nothing) -- the
    builder meets every value operator, and builds again when one folds."""
    builder = _Builder()
    root = builder.truth(tree)
    if builder.foldable:
        tree = fold(tree)
        builder = _Builder()
        root = builder.truth(tree)
    return (tree, *_entry_points(root), frozenset(builder.names))


def build_named(tree: Node) -> tuple[Callable[[Mapping[str, Any]], bool],
                                     Callable[[Mapping[str, Any]], bool | None], frozenset[str]]:
    """``(matches, evaluate, names)``: ``build``'s, and the tree's attribute
    names (``ast.names_in``'s), gathered on the way."""
    builder = _Builder()
    root = builder.truth(tree)
    return (*_entry_points(root), frozenset(builder.names))


def _entry_points(root: Closure) -> tuple[Callable[[Mapping[str, Any]], bool],
                                          Callable[[Mapping[str, Any]], bool | None]]:
    """``(matches, evaluate)`` of a root closure: neither ever raises."""
    def evaluate(a: Mapping[str, Any]) -> bool | None:
        try:
            result: bool | None = root(a)
        except Exception:  # noqa: BLE001 - the contract: evaluation never raises
            return None
        return result

    def matches(a: Mapping[str, Any]) -> bool:
        try:
            return root(a) is True
        except Exception:  # noqa: BLE001 - the contract: matching never raises
            return False

    return matches, evaluate

