"""The closures' chains (``closures._Builder.operands``): an ``&&``/``||``
chain runs its comparisons of an attribute with a literal and its
``require``s as rows in its own loop. Long expressions are made of little
else, so these chains are checked against the reference interpreter on
their own, with the values that make three-valued logic differ: a missing
attribute, a type that does not compare, NaN, -0.0, int64 against int32."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elvin.subscription import Kind, Node, closures
from elvin.subscription.reference import evaluate as reference
from elvin.values import Int64

NAMES = ["a", "b", "c"]
COMPARE = [Kind.EQUALS, Kind.NOT_EQUALS, Kind.LESS_THAN, Kind.LESS_THAN_EQUALS,
           Kind.GREATER_THAN, Kind.GREATER_THAN_EQUALS]


def node(kind: Kind, *children: Node, value=None) -> Node:
    return Node(kind, tuple(children), value)


name = st.sampled_from(NAMES).map(lambda v: node(Kind.NAME, value=v))
literal = st.one_of(
    st.integers(-2, 2).map(lambda v: node(Kind.INT32, value=v)),
    st.integers(-2, 2).map(lambda v: node(Kind.INT64, value=v)),
    st.sampled_from([0.0, -0.0, 1.5, -2.0]).map(lambda v: node(Kind.REAL64, value=v)),
    st.sampled_from(["", "1", "x"]).map(lambda v: node(Kind.STRING, value=v)))
row = st.one_of(
    st.tuples(st.sampled_from(COMPARE), name, literal).map(lambda t: node(t[0], t[1], t[2])),
    name.map(lambda n: node(Kind.FUNC_REQUIRE, n)))
#: something that is not a row: a literal on the left, or a negation
other = st.one_of(
    st.tuples(st.sampled_from(COMPARE), literal, name).map(lambda t: node(t[0], t[1], t[2])),
    row.map(lambda r: node(Kind.NOT, r)))
chain = st.recursive(
    st.one_of(row, row, other),
    lambda c: st.tuples(st.sampled_from([Kind.AND, Kind.OR]),
                        st.lists(c, min_size=2, max_size=5)).map(
        lambda t: node(t[0], *t[1])),
    max_leaves=12)
value = st.one_of(st.integers(-2, 2), st.integers(-2, 2).map(Int64),
                  st.sampled_from([0.0, -0.0, 1.5, -2.0, float("nan")]),
                  st.sampled_from(["", "1", "x"]), st.just(b"\x00"))
notification = st.dictionaries(st.sampled_from(NAMES), value, max_size=3)


@settings(max_examples=600, deadline=None)
@given(chain, st.lists(notification, min_size=1, max_size=4))
def test_chains_agree_with_the_reference(tree, notifications):
    matches, evaluate = closures.build(tree)
    for attrs in notifications:
        expected = reference(tree, attrs)
        assert evaluate(attrs) is expected, (tree, attrs)
        assert matches(attrs) is (expected is True)


def test_a_missing_required_name_leaves_a_conjunction_undecided():
    tree = node(Kind.AND, node(Kind.FUNC_REQUIRE, node(Kind.NAME, value="a")),
                node(Kind.EQUALS, node(Kind.NAME, value="b"), node(Kind.INT32, value=1)))
    _matches, evaluate = closures.build(tree)
    assert evaluate({"b": 1}) is None
    assert evaluate({"a": "x", "b": 1}) is True


def test_a_bottom_row_does_not_decide_a_disjunction():
    tree = node(Kind.OR, node(Kind.LESS_THAN, node(Kind.NAME, value="a"), node(Kind.INT32, value=1)),
                node(Kind.LESS_THAN, node(Kind.NAME, value="b"), node(Kind.INT32, value=1)))
    _matches, evaluate = closures.build(tree)
    assert evaluate({"a": "text", "b": 5}) is None  # a type that does not compare: bottom
    assert evaluate({"a": 5, "b": 5}) is False
    assert evaluate({"a": 5, "b": 0}) is True
    assert evaluate({"b": 0}) is True


def _lt(name: str, value: int) -> Node:
    return node(Kind.LESS_THAN, node(Kind.NAME, value=name), node(Kind.INT32, value=value))


def test_a_group_decided_by_one_row_is_not_undone_by_a_later_missing_one():
    # (a < 1 || b < 1) && c < 1: the || is a group of the && chain
    tree = node(Kind.AND, node(Kind.OR, _lt("a", 1), _lt("b", 1)), _lt("c", 1))
    _matches, evaluate = closures.build(tree)
    assert evaluate({"a": 0, "c": 0}) is True       # b missing after a decided the group
    assert evaluate({"b": 0, "c": 0}) is True
    assert evaluate({"a": 5, "c": 0}) is None
    assert evaluate({"a": 5, "b": 5, "c": 0}) is False
    # (a < 1 && b < 1) || c < 1: the && is a group of the || chain
    tree = node(Kind.OR, node(Kind.AND, _lt("a", 1), _lt("b", 1)), _lt("c", 1))
    _matches, evaluate = closures.build(tree)
    assert evaluate({"a": 5, "c": 5}) is False      # b missing after a decided the group
    assert evaluate({"b": 5, "c": 5}) is False
    assert evaluate({"a": 0, "c": 5}) is None
    assert evaluate({"a": 0, "b": 0, "c": 5}) is True


groups = st.tuples(st.sampled_from([Kind.AND, Kind.OR]),
                   st.lists(st.one_of(row, st.lists(row, min_size=2, max_size=4)),
                            min_size=1, max_size=4))


@settings(max_examples=400, deadline=None)
@given(groups, st.lists(notification, min_size=1, max_size=6))
def test_chains_of_groups_agree_with_the_reference(made, notifications):
    outer, operands = made
    inner = Kind.OR if outer is Kind.AND else Kind.AND
    children = [node(inner, *o) if isinstance(o, list) else o for o in operands]
    tree = node(outer, *children, _lt("a", 1)) if len(children) == 1 else node(outer, *children)
    _matches, evaluate = closures.build(tree)
    for attrs in notifications:
        assert evaluate(attrs) is reference(tree, attrs), (tree, attrs)
