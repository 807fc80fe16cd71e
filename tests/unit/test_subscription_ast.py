"""The shared AST walkers (flatten, names_in, names_in_order) and the
three-valued connectives every evaluator and analysis builds on."""

from __future__ import annotations

import itertools

import pytest

from elvin.subscription import parse
from elvin.subscription.ast import (
    Kind,
    Node,
    flatten,
    name,
    name_equals_literals,
    names_in,
    names_in_order,
    op,
)
from elvin.subscription.logic import and3, not3, or3, xor3


def test_flatten_either_nesting_gives_operands_in_order():
    a, b, c = name("a"), name("b"), name("c")
    left = op(Kind.AND, op(Kind.AND, a, b), c)
    right = op(Kind.AND, a, op(Kind.AND, b, c))
    assert flatten(left) == flatten(right) == [a, b, c]


def test_flatten_keeps_other_operators_whole():
    tree = parse("a == 1 && (b == 2 || c == 3) && !(d == 4 && e == 5)")
    parts = flatten(tree)
    assert [p.kind for p in parts] == [Kind.EQUALS, Kind.OR, Kind.NOT]
    assert flatten(parts[1]) == list(parts[1].children)


def test_names_include_require_and_nested_functions():
    tree = parse('require(Zed) && fold-case(Bee) == "x" || size(Ay) > Bee')
    assert names_in(tree) == frozenset({"Zed", "Bee", "Ay"})
    # source order, each name once: messages and Spark columns come out stable
    assert names_in_order(tree) == ["Zed", "Bee", "Ay"]


def test_names_of_a_constant_expression_are_none():
    tree = Node(Kind.EQUALS, (Node(Kind.INT32, value=1), Node(Kind.INT32, value=2)))
    assert names_in(tree) == frozenset()
    assert names_in_order(tree) == []


def test_names_walk_deep_trees_without_recursion():
    tree = name("n0")
    for i in range(1, 5000):
        tree = op(Kind.ADD, tree, name(f"n{i % 7}"))
    assert names_in_order(tree) == [f"n{i}" for i in range(7)]


_VALUES = (True, False, None)


def _kleene_rank(v: bool | None) -> int:
    return {False: 0, None: 1, True: 2}[v]


@pytest.mark.parametrize(("a", "b"), list(itertools.product(_VALUES, repeat=2)))
def test_connectives_are_kleenes_strong_logic(a, b):
    # && is the minimum and || the maximum in the order false < bottom < true
    ranked = sorted(_VALUES, key=_kleene_rank)
    assert and3(a, b) is ranked[min(_kleene_rank(a), _kleene_rank(b))]
    assert or3(a, b) is ranked[max(_kleene_rank(a), _kleene_rank(b))]
    assert xor3(a, b) is (None if a is None or b is None else a != b)
    assert and3(a, b) is and3(b, a) and or3(a, b) is or3(b, a)
    # De Morgan holds in Kleene logic
    assert not3(and3(a, b)) is or3(not3(a), not3(b))


def test_not3():
    assert [not3(v) for v in _VALUES] == [False, True, None]


def test_name_equals_literals_either_way_round_and_equals():
    assert name_equals_literals(parse('Group == "chat"')) == ("Group", (Node(Kind.STRING, value="chat"),))
    assert name_equals_literals(parse('"chat" == Group')) == ("Group", (Node(Kind.STRING, value="chat"),))
    found = name_equals_literals(parse('equals(Port, 1, 2L, "x")'))
    assert found is not None and found[0] == "Port"
    assert [n.kind for n in found[1]] == [Kind.INT32, Kind.INT64, Kind.STRING]


@pytest.mark.parametrize("text", [
    "a == b", 'fold-case(a) == "x"', 'a != "x"', "equals(a, b)", "a < 1", "require(a)",
])
def test_name_equals_literals_refuses_anything_else(text):
    assert name_equals_literals(parse(text)) is None
