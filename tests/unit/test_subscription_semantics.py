"""Issue 18: a subscription means the same everywhere it is evaluated.

The language's operator precedence (the subscription-language page, as
Avis parses it), real64 equality by bits and order as Java's
``Double.compareTo``, ``%`` on reals as Java's remainder, and EXP_IS_TRIVIAL
only for a whole expression that folds to a constant. Checked by example,
then differentially: random expressions and notifications through the
compiled evaluator, the reference interpreter, the text and SubAST round
trips and the quench and index analyses. (The Spark translation has its
own sample in tests/pipeline/test_backtest_semantics.py.)
"""

from __future__ import annotations

import math

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from subscription_strategies import node, notifications, predicates, value_expressions

from elvin.errors import SubscriptionError
from elvin.federation.subast import decode_subast, encode_subast
from elvin.quenching import could_match, wanted
from elvin.subscription import (
    Kind,
    compile,
    index_constraint,
    index_value,
    parse,
    required_names,
    unparse,
)
from elvin.subscription.ast import const, name, op
from elvin.subscription.reference import evaluate as reference
from elvin.values import Int64

T, F, B = True, False, None
NUMERIC_NAMES = ["A", "B", "\u00e9"]
STRING_NAMES = ["s"]
NAMES = NUMERIC_NAMES + STRING_NAMES


@pytest.fixture(autouse=True)
def _empty_regex_cache():
    regex.purge()


def _i(v: int):
    return const(Kind.INT32, v)


def _all_evaluators(text: str, attrs: dict):
    """(compiled from text, compiled from the tree, reference) on ``attrs``."""
    tree = parse(text)
    return (compile(text).evaluate(attrs), compile(tree)._evaluate_raw(attrs),
            reference(tree, attrs))


# -- 1. precedence -----------------------------------------------------------------

A = name("A")


@pytest.mark.parametrize(("text", "tree"), [
    ("A | 2 + 1", op(Kind.ADD, op(Kind.BIT_OR, A, _i(2)), _i(1))),
    ("A << 2 * 2", op(Kind.MULTIPLY, op(Kind.SHIFT_LEFT, A, _i(2)), _i(2))),
    ("A - 1 << 2", op(Kind.SUBTRACT, A, op(Kind.SHIFT_LEFT, _i(1), _i(2)))),
    ("A & 3 << 1", op(Kind.SHIFT_LEFT, op(Kind.BIT_AND, A, _i(3)), _i(1))),
    ("A | 1 ^ 2 & 3", op(Kind.BIT_OR, A, op(Kind.BIT_XOR, _i(1), op(Kind.BIT_AND, _i(2), _i(3))))),
    ("A & 1 ^ 2 | 3", op(Kind.BIT_OR, op(Kind.BIT_XOR, op(Kind.BIT_AND, A, _i(1)), _i(2)), _i(3))),
    ("A % 2 >> 1", op(Kind.MODULO, A, op(Kind.SHIFT_RIGHT, _i(2), _i(1)))),
    ("A - 1 - 2", op(Kind.SUBTRACT, op(Kind.SUBTRACT, A, _i(1)), _i(2))),      # left assoc
    ("A << 1 >> 2", op(Kind.SHIFT_RIGHT, op(Kind.SHIFT_LEFT, A, _i(1)), _i(2))),
    ("A / 2 * 3 % 4", op(Kind.MODULO, op(Kind.MULTIPLY, op(Kind.DIVIDE, A, _i(2)), _i(3)), _i(4))),
    ("-A & ~3", op(Kind.BIT_AND, op(Kind.UNARY_MINUS, A), op(Kind.BIT_NEGATE, _i(3)))),
])
def test_precedence_of_the_language_page(text, tree):
    """Loosest to tightest: + -, * / %, << >> >>>, |, ^, &, unary; left
    associative. The issue's four examples first."""
    full = parse(f"{text} == B")
    assert full == op(Kind.EQUALS, tree, name("B"))
    again = unparse(full)
    assert parse(again) == full and unparse(parse(again)) == again


@pytest.mark.parametrize(("text", "a", "expected"), [
    ("A | 2 + 1 == 3", 0, T), ("A | 2 + 1 == 7", 4, T),           # (A | 2) + 1
    ("A << 2 * 2 == 8", 1, T),                                     # (A << 2) * 2
    ("A - 1 << 2 == 6", 10, T),                                    # A - (1 << 2)
    ("A & 3 << 1 == 6", 7, T),                                     # (A & 3) << 1
    ("A | 2 + 1 == 5", 4, F), ("A - 1 << 2 == 36", 10, F),        # C's readings are wrong
])
def test_precedence_evaluates(text, a, expected):
    assert _all_evaluators(text, {"A": a}) == (expected,) * 3


# -- 2. real64 equality and order ------------------------------------------------------

@pytest.mark.parametrize(("text", "attrs", "expected"), [
    # NaN: equal to itself, above everything
    ("A == A", {"A": math.nan}, T), ("A != A", {"A": math.nan}, F),
    ("A > 1.0", {"A": math.nan}, T), ("A >= 0.0", {"A": math.nan}, T),
    ("A < 1.0", {"A": math.nan}, F), ("A == B", {"A": math.nan, "B": float("nan")}, T),
    ("A > B", {"A": math.nan, "B": math.inf}, T), ("A <= B", {"A": math.nan, "B": 1e308}, F),
    ("A > 2147483647", {"A": math.nan}, T), ("A > 9223372036854775807L", {"A": math.nan}, T),
    ("equals(A, 1.0, B)", {"A": math.nan, "B": math.nan}, T), ("nan(A)", {"A": math.nan}, T),
    # -0.0: below 0.0, not equal to it
    ("B < 0.0", {"B": -0.0}, T), ("B == 0.0", {"B": -0.0}, F), ("B != 0.0", {"B": -0.0}, T),
    ("B == -0.0", {"B": -0.0}, T), ("B >= 0.0", {"B": -0.0}, F), ("B > -1.0e-300", {"B": -0.0}, T),
    ("B < A", {"B": -0.0, "A": 0.0}, T), ("B == A", {"B": -0.0, "A": 0.0}, F),
    ("B == 0", {"B": -0.0}, F), ("B < 0", {"B": -0.0}, T), ("A == 0", {"A": 0.0}, T),
    ("B == A", {"B": -0.0, "A": 0}, F), ("B < A", {"B": -0.0, "A": Int64(0)}, T),
    ("equals(B, 0.0, 1)", {"B": -0.0}, F), ("equals(B, -0.0, 1)", {"B": -0.0}, T),
    ("B == 0.0 || B == 1.0", {"B": -0.0}, F), ("B != 0.0 && B != 1.0", {"B": -0.0}, T),
    # integers are promoted first (Java's conversion)
    ("A == 9007199254740992.0", {"A": Int64(2 ** 53 + 1)}, T),
    ("A < 0.5", {"A": 0}, T), ("A > -0.0", {"A": 0}, T),
])
def test_real_equality_and_order(text, attrs, expected):
    assert _all_evaluators(text, attrs) == (expected,) * 3


def test_trees_with_different_zeros_are_different_subscriptions():
    """The router shares a predicate between equal trees: -0.0 and 0.0
    literals must not make equal trees (and NaN literals from folding must)."""
    assert parse("A == 0.0") != parse("A == -0.0")
    assert parse("A == 0.0") == parse("A == 0.0")
    nan1, nan2 = const(Kind.REAL64, math.nan), const(Kind.REAL64, float("nan"))
    assert nan1 == nan2 and hash(nan1) == hash(nan2)
    assert len({parse("A == 0.0"), parse("A == -0.0"), parse("A == 0.0")}) == 2


def test_index_keys_find_nan_and_both_zeros():
    keys = index_constraint(parse("A == 0.0 / 0.0 || A == 1.0"))[1]
    assert index_value(float("nan")) in keys and index_value(index_value(math.nan)) in keys
    zero = index_constraint(parse("A == -0.0"))[1]
    assert index_value(-0.0) in zero          # a key may stand for both zeros: the
    assert index_value(0.0) in zero           # router evaluates every candidate


# -- 3. real % -----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "attrs", "expected"), [
    ("A % 2.5 == 2.0", {"A": 7.0}, T), ("A % B == 2.0", {"A": 7, "B": 2.5}, T),
    ("A % 2.5 == -2.0", {"A": -7.0}, T), ("A % -2.5 == 2.0", {"A": 7.0}, T),
    ("A % B == 0.0 / 0.0", {"A": 1.0, "B": 0.0}, T), ("A % B > 1.0e308", {"A": 1, "B": 0.0}, T),
    ("A % 2.0 == 1.0", {"A": math.inf}, F), ("A % B == 1.0", {"A": 1.0, "B": math.inf}, T),
    ("A % 2.0 == -0.0", {"A": -4.0}, T), ("A % 2.0 == 0.0", {"A": -4.0}, F),
    ("A % 0.1 < 0.1", {"A": 1e300}, T), ("A % 7 == 2", {"A": 9}, T),
])
def test_real_remainder_is_javas(text, attrs, expected):
    assert _all_evaluators(text, attrs) == (expected,) * 3


def test_constant_real_remainder_folds():
    """``7.0 % 2.5 == 2.0`` folds to true (so it alone is trivial, not a type
    mismatch); as an operand it is evaluated."""
    with pytest.raises(SubscriptionError) as info:
        parse("7.0 % 2.5 == 2.0")
    assert info.value.code == "EXP_IS_TRIVIAL" and "always true" in info.value.message
    sub = compile("A == 1 && 7.0 % 2.5 == 2.0")
    assert sub.evaluate({"A": 1}) is T and sub.evaluate({"A": 2}) is F


# -- 4. EXP_IS_TRIVIAL only for a constant whole -------------------------------------------

@pytest.mark.parametrize(("text", "cases"), [
    ("A == 1 || 1 == 2", [({"A": 1}, T), ({"A": 2}, F), ({}, B), ({"A": "x"}, B)]),
    ("1 == 1 ^^ A == 1", [({"A": 1}, F), ({"A": 2}, T), ({}, B), ({"A": "x"}, B)]),
    ("1 / 0 == 1 || A == 1", [({"A": 1}, T), ({"A": 2}, B), ({}, B)]),
    ("A == 1 && 1 / 0 == 1", [({"A": 1}, B), ({"A": 2}, F), ({}, B)]),
    ("!(1 == 2) && A > 0", [({"A": 1}, T), ({"A": -1}, F)]),
    ("equals(A, 1 / 0, 2)", [({"A": 2}, T), ({"A": 1}, B)]),
    ("require(A) ^^ -1 < 0", [({"A": 1}, F), ({}, B)]),
    ("A > 1 || 1 == 2 || 'a' == 'b'", [({"A": 2}, T), ({"A": 1}, F)]),
])
def test_partly_constant_expressions_are_accepted_and_three_valued(text, cases):
    for attrs, expected in cases:
        assert _all_evaluators(text, attrs) == (expected,) * 3, (text, attrs)
        assert could_match(parse(text), attrs, complete=True) is (expected is T)


@pytest.mark.parametrize(("text", "what", "position"), [
    ("1 == 1", "true", 0), ("A == 1 || 1 == 1", "true", 10), ("A == 1 && 1 == 2", "false", 10),
    ("A > 1 / 0", "bottom", 4), ("A == 1 ^^ 1 / 0 == 1", "bottom", 10),
    ("equals(A, 1 / 0)", "bottom", 10), ("!(A == 1 && 2 < 1)", "true", 12),
    ("1 == 1 ^^ 2 == 2", "false", 0),
])
def test_whole_constant_expressions_are_trivial(text, what, position):
    with pytest.raises(SubscriptionError) as info:
        parse(text)
    assert info.value.code == "EXP_IS_TRIVIAL"
    assert f"always {what}" in info.value.message
    assert info.value.position == position


def test_quench_analyses_read_constants_and_reals_as_the_evaluator():
    assert wanted(parse('A == "x" || 1 == 2'), "A").exact == {"x"}   # adds nothing
    sure = wanted(parse('A == "x" && 2 > 1'), "A")
    assert sure.matches("x") and not sure.matches("y")
    assert wanted(parse('A == "x" || 2 > 1 && B == 1'), "A").unbounded
    assert wanted(parse('A == "x" || 1 / 0 == 1'), "A").exact == {"x"}
    assert could_match(parse("A == 1 || 1 / 0 == 1"), {"A": 1})
    assert not could_match(parse("A == 1 && 2 == 2"), {"A": 2})
    assert could_match(parse("A > 1.0 && require(B)"), {"A": math.nan})
    assert not could_match(parse("A == 0.0 && require(B)"), {"A": -0.0})
    negative_zero = wanted(parse("A == -0.0"), "A")
    assert negative_zero.matches(-0.0) and not negative_zero.matches(0.0)
    assert wanted(parse("A == 0.0 / 0.0"), "A").matches(float("nan"))
    assert required_names(parse("A == 1 || 1 == 2")) == {"A"}


# -- 5. text -> AST -> text -> AST ------------------------------------------------------------

_LEVEL = {Kind.ADD: 1, Kind.SUBTRACT: 1, Kind.MULTIPLY: 2, Kind.DIVIDE: 2, Kind.MODULO: 2,
          Kind.SHIFT_LEFT: 3, Kind.SHIFT_RIGHT: 3, Kind.LOGICAL_SHIFT_RIGHT: 3, Kind.BIT_OR: 4,
          Kind.BIT_XOR: 5, Kind.BIT_AND: 6}
_SPELLING = {Kind.ADD: "+", Kind.SUBTRACT: "-", Kind.MULTIPLY: "*", Kind.DIVIDE: "/",
             Kind.MODULO: "%", Kind.SHIFT_LEFT: "<<", Kind.SHIFT_RIGHT: ">>",
             Kind.LOGICAL_SHIFT_RIGHT: ">>>", Kind.BIT_OR: "|", Kind.BIT_XOR: "^",
             Kind.BIT_AND: "&", Kind.UNARY_MINUS: "-", Kind.UNARY_PLUS: "+",
             Kind.BIT_NEGATE: "~"}
_UNARY_LEVEL = 7


def _level(n) -> int:
    if n.kind in _LEVEL:
        return _LEVEL[n.kind]
    return _UNARY_LEVEL + 1      # leaves and function calls bind tightest


def _sparse(n) -> str:
    """A value tree written with as few parentheses as the precedence table
    of the language page allows (written from that table, not the grammar)."""
    if n.kind in _LEVEL:
        left, right = n.children
        lt, rt_ = _sparse(left), _sparse(right)
        if _level(left) < _LEVEL[n.kind]:
            lt = f"({lt})"
        if _level(right) <= _LEVEL[n.kind]:      # left associative
            rt_ = f"({rt_})"
        return f"{lt} {_SPELLING[n.kind]} {rt_}"
    if n.kind in (Kind.UNARY_MINUS, Kind.UNARY_PLUS, Kind.BIT_NEGATE):
        child = n.children[0]
        text = _sparse(child)
        if _level(child) <= _UNARY_LEVEL or child.kind in (Kind.INT32, Kind.INT64, Kind.REAL64):
            text = f"({text})"   # -(5) stays a unary minus, not the literal -5
        return _SPELLING[n.kind] + text
    return unparse(n)     # a name, a literal or size(name)


SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


@SETTINGS
@given(value_expressions(["A", "B"]), value_expressions(["A", "B"]))
def test_sparse_text_parses_to_the_tree(left, right):
    """A tree written with minimal parentheses by the precedence table parses
    back to itself; its canonical text is stable (text -> AST -> text -> AST)."""
    tree = node(Kind.LESS_THAN, left, right)
    text = f"{_sparse(left)} < {_sparse(right)}"
    try:
        parsed = parse(text)
    except SubscriptionError as exc:
        assert exc.code in ("EXP_IS_TRIVIAL", "TYPE_MISMATCH", "OVERFLOW"), (text, exc)
        return
    assert parsed == tree, text
    canonical = unparse(parsed)
    assert parse(canonical) == tree
    assert unparse(parse(canonical)) == canonical


# -- 6. differential: every evaluator, every analysis ------------------------------------

@SETTINGS
@given(predicates(NUMERIC_NAMES, STRING_NAMES), notifications(NUMERIC_NAMES, STRING_NAMES, foreign=True))
def test_compiled_reference_and_round_trips_agree(tree, attrs):
    expected = reference(tree, attrs)
    assert expected in (T, F, B)
    sub = compile(tree)
    assert sub._evaluate_raw(attrs) is expected, sub.source
    assert sub.evaluate(attrs) is expected
    assert sub.matches(attrs) is (expected is T)
    # text -> AST -> text -> AST
    text = unparse(tree)
    again = parse(text)
    assert again == tree and unparse(again) == text
    assert compile(text)._evaluate_raw(attrs) is expected
    # the federation SubAST (Avis's layout) keeps the tree, -0.0 included
    # (but for Avis's spelling of a == b: an equals() of two operands)
    decoded, _ = decode_subast(encode_subast(tree))
    if not any(n.kind is Kind.FUNC_EQUALS and len(n.children) == 2 for n in tree.walk()):
        assert decoded == tree
    assert compile(decoded)._evaluate_raw(attrs) is expected


@SETTINGS
@given(predicates(NUMERIC_NAMES, STRING_NAMES), notifications(NUMERIC_NAMES, STRING_NAMES),
       st.lists(st.booleans(), min_size=len(NAMES), max_size=len(NAMES)))
def test_analyses_never_rule_out_a_match(tree, attrs, known):
    """For a notification the subscription matches: quench's could_match
    (on any part of it) and wanted(), the router's required_names and
    index_constraint all say it can match. (Where the tree is false, its
    negation matches: that one is checked instead.)"""
    outcome = reference(tree, attrs)
    assert could_match(tree, attrs, complete=True) is (outcome is T)
    if outcome is F:
        tree = node(Kind.NOT, tree)
    elif outcome is not T:
        return
    partial = {k: v for k, v, keep in zip(NAMES, (attrs.get(n) for n in NAMES), known,
                                           strict=True) if keep and k in attrs}
    assert could_match(tree, partial), (unparse(tree), partial)
    for attribute, value in attrs.items():
        assert wanted(tree, attribute).matches(value), (unparse(tree), attribute, value)
    assert required_names(tree) <= attrs.keys()
    constraint = index_constraint(tree)
    if constraint is not None:
        attribute, keys = constraint
        assert index_value(attrs[attribute]) in keys, (unparse(tree), attrs)
