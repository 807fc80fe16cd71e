"""Property tests: unparse/parse round trips, the compiled evaluator against
the reference interpreter, robustness of parse, and soundness of the index
analyses (required_names, index_constraint)."""

from __future__ import annotations

import math
import random

import pytest
import regex
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from elvin.errors import SubscriptionError
from elvin.subscription import (
    MAX_DEPTH,
    Kind,
    Node,
    closures,
    compile,
    index_constraint,
    index_value,
    parse,
    required_names,
    unparse,
    validate,
)
from elvin.subscription.ast import names_in
from elvin.subscription.checker import fold
from elvin.subscription.reference import evaluate as reference
from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64


@pytest.fixture(autouse=True)
def _empty_regex_cache():
    """The regex module empties a full pattern cache with the global
    ``random``; Hypothesis warns when that happens inside a strategy (the
    validity filters compile patterns). Start each test with room to spare."""
    regex.purge()


SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])

NAMES = ["a", "b", "c", "s", "x y", "n=", "\u00e9"]
ALPHABET = "aAbB \u00df\u00e9\u0301*?[]\\.()'\""


def node(kind, *children, value=None):
    return Node(kind, tuple(children), value)


name_node = st.sampled_from(NAMES).map(lambda v: node(Kind.NAME, value=v))
short_text = st.text(alphabet=ALPHABET, max_size=4)
int32_lit = st.one_of(st.integers(-3, 3), st.integers(INT32_MIN, INT32_MAX),
                      st.sampled_from([INT32_MIN, INT32_MAX])).map(
    lambda v: node(Kind.INT32, value=v))
int64_lit = st.one_of(st.integers(-3, 3), st.integers(INT64_MIN, INT64_MAX),
                      st.sampled_from([INT64_MIN, INT64_MAX, 2 ** 53 + 1])).map(
    lambda v: node(Kind.INT64, value=v))
real_lit = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                     st.sampled_from([0.0, -0.0, 0.5, 2.0, -1.5, 1e300, 2.0 ** 53])).map(
    lambda v: node(Kind.REAL64, value=v))
str_lit = short_text.map(lambda v: node(Kind.STRING, value=v))
size_node = name_node.map(lambda n: node(Kind.FUNC_SIZE, n))

INT_BINARY = [Kind.ADD, Kind.SUBTRACT, Kind.MULTIPLY, Kind.DIVIDE, Kind.MODULO,
              Kind.SHIFT_LEFT, Kind.SHIFT_RIGHT, Kind.LOGICAL_SHIFT_RIGHT, Kind.BIT_AND,
              Kind.BIT_OR, Kind.BIT_XOR]
ARITH = [Kind.ADD, Kind.SUBTRACT, Kind.MULTIPLY, Kind.DIVIDE]
COMPARE = [Kind.EQUALS, Kind.NOT_EQUALS, Kind.LESS_THAN, Kind.LESS_THAN_EQUALS,
           Kind.GREATER_THAN, Kind.GREATER_THAN_EQUALS]
TYPE_FUNCS = [Kind.FUNC_REQUIRE, Kind.FUNC_INT32, Kind.FUNC_INT64, Kind.FUNC_REAL64,
              Kind.FUNC_STRING, Kind.FUNC_OPAQUE, Kind.FUNC_NAN]
STRING_FUNCS = [Kind.FUNC_FOLD_CASE, Kind.FUNC_DECOMPOSE, Kind.FUNC_DECOMPOSE_COMPAT]
REGEXES = ["a", "^a", "b$", "a|B", "[ab]+", "^$", "[[:upper:]]", "(a|b)*c?", ".", "\u00e9",
           "\\.", "a{2}", "[^a]", "\\w"]
GLOBS = ["*", "a*", "*b", "?", "[aA]*", "[!a]*", "a?b", "\\*", "*\u00df*", "", "[]a]"]


def _binary(kinds, children):
    return st.tuples(st.sampled_from(kinds), children, children).map(
        lambda t: node(t[0], t[1], t[2]))


def _unary(kinds, children):
    return st.tuples(st.sampled_from(kinds), children).map(lambda t: node(t[0], t[1]))


int_expr = st.recursive(
    st.one_of(name_node, name_node, size_node, int32_lit, int64_lit),
    lambda c: st.one_of(_binary(INT_BINARY, c),
                        _unary([Kind.UNARY_MINUS, Kind.UNARY_PLUS, Kind.BIT_NEGATE], c)),
    max_leaves=4)
num_expr = st.recursive(
    st.one_of(int_expr, real_lit, name_node),
    lambda c: st.one_of(_binary(ARITH, c), _unary([Kind.UNARY_MINUS, Kind.UNARY_PLUS], c)),
    max_leaves=4)
str_expr = st.recursive(name_node, lambda c: _unary(STRING_FUNCS, c), max_leaves=2)

literal = st.one_of(int32_lit, int64_lit, real_lit, str_lit)
comparison = st.tuples(st.sampled_from(COMPARE), st.one_of(name_node, num_expr), num_expr).map(
    lambda t: node(t[0], t[1], t[2]))
str_equality = st.tuples(st.sampled_from([Kind.EQUALS, Kind.NOT_EQUALS]), str_expr,
                         st.one_of(str_lit, str_expr)).flatmap(
    lambda t: st.sampled_from([node(t[0], t[1], t[2]), node(t[0], t[2], t[1])]))
name_equality = st.tuples(st.sampled_from([Kind.EQUALS, Kind.NOT_EQUALS]), name_node,
                          literal).map(lambda t: node(t[0], t[1], t[2]))
type_pred = _unary(TYPE_FUNCS, name_node)
substring_pred = st.tuples(
    st.sampled_from([Kind.FUNC_BEGINS_WITH, Kind.FUNC_ENDS_WITH, Kind.FUNC_CONTAINS]),
    str_expr, st.lists(str_lit, min_size=1, max_size=3)).map(
    lambda t: node(t[0], t[1], *t[2]))
regex_pred = st.tuples(str_expr, st.lists(st.sampled_from(REGEXES), min_size=1, max_size=2)).map(
    lambda t: node(Kind.FUNC_REGEX, t[0], *(node(Kind.STRING, value=p) for p in t[1])))
glob_pred = st.tuples(str_expr, st.lists(st.sampled_from(GLOBS), min_size=1, max_size=2)).map(
    lambda t: node(Kind.FUNC_WILDCARD, t[0], *(node(Kind.STRING, value=p) for p in t[1])))
equals_pred = st.tuples(st.one_of(name_node, str_expr, num_expr),
                        st.lists(st.one_of(literal, name_node), min_size=1, max_size=3)).map(
    lambda t: node(Kind.FUNC_EQUALS, t[0], *t[1]))

atom = st.one_of(comparison, str_equality, name_equality, name_equality, type_pred,
                 substring_pred, regex_pred, glob_pred, equals_pred)


LOGICAL = [Kind.AND, Kind.OR, Kind.XOR]


def _nary(kinds, children):
    """n-ary logical nodes, as the parser makes from ``a || b || c``."""
    return st.tuples(st.sampled_from(kinds), st.lists(children, min_size=3, max_size=5)).map(
        lambda t: node(t[0], *t[1]))


def _logic(c):
    # binary nodes too: a binary OR whose child is an OR is what the parser
    # makes of (a || b) || c, and must round-trip through unparse
    return st.one_of(_binary(LOGICAL, c), _nary(LOGICAL, c), _unary([Kind.NOT], c))


raw_predicate = st.recursive(atom, _logic, max_leaves=6)


def _valid(tree: Node) -> bool:
    try:
        validate(tree)
    except SubscriptionError:
        return False
    return True


predicate = raw_predicate.filter(_valid)

values = st.one_of(
    st.integers(-3, 3), st.integers(INT32_MIN, INT32_MAX),
    st.integers(INT64_MIN, INT64_MAX), st.integers(INT64_MIN, INT64_MAX).map(Int64),
    st.integers(-3, 3).map(Int64), st.floats(),
    st.sampled_from([0.0, -0.0, 0.5, 2.0, math.nan, math.inf, -math.inf, 2.0 ** 53,
                     float(INT64_MAX), 1e300]),
    short_text, st.text(max_size=3), st.binary(max_size=3),
    st.sampled_from([True, None, 2 ** 70, -(2 ** 70), [1], "\ud800", INT32_MIN, INT32_MAX,
                     2 ** 53 + 1, INT64_MIN, Int64(2 ** 53 + 1)]),
)
notification = st.dictionaries(st.sampled_from(NAMES), values, max_size=len(NAMES))


# -- round trips -----------------------------------------------------------------

@SETTINGS
@given(predicate)
def test_unparse_parse_round_trip(tree):
    text = unparse(tree)
    assert parse(text) == tree, text
    assert unparse(parse(text)) == text


@SETTINGS
@given(num_expr.map(lambda e: node(Kind.EQUALS, node(Kind.NAME, value="v"), e)).filter(_valid))
def test_value_expression_round_trip(tree):
    assert parse(unparse(tree)) == tree


# -- compiled evaluator == reference interpreter ------------------------------------

@SETTINGS
@given(predicate, notification)
def test_compiled_agrees_with_reference(tree, attrs):
    expected = reference(tree, attrs)
    assert expected in (True, False, None)
    sub = compile(tree)
    assert sub._evaluate_raw(attrs) is expected, sub.source
    assert sub.evaluate(attrs) is expected
    assert sub.matches(attrs) is (expected is True)
    # the closures the router evaluates large expressions with
    matches, evaluate, names = closures.build_named(fold(tree))
    assert evaluate(attrs) is expected
    assert matches(attrs) is (expected is True)
    assert names == names_in(tree)      # (what the engine and the plan are given)
    # the router's way for a long expression: fold only when there is something to fold
    folded, matches, evaluate, names = closures.build_checked(tree)
    assert folded == fold(tree)
    assert evaluate(attrs) is expected
    assert matches(attrs) is (expected is True)
    assert names == names_in(tree)


@SETTINGS
@given(predicate, st.lists(notification, min_size=1, max_size=5))
def test_compiled_from_text_agrees(tree, many):
    sub = compile(unparse(tree))
    for attrs in many:
        assert sub._evaluate_raw(attrs) is reference(tree, attrs)


num_values = st.one_of(
    st.integers(-40, 40), st.integers(-40, 40).map(Int64), st.integers(INT32_MIN, INT32_MAX),
    st.integers(INT64_MIN, INT64_MAX), st.integers(INT64_MIN, INT64_MAX).map(Int64),
    st.floats(), st.sampled_from([INT32_MIN, INT32_MAX, Int64(INT64_MIN), Int64(INT64_MAX),
                                  0.0, -0.0, math.nan, math.inf, 2.0 ** 53, 2 ** 53 + 1]),
    st.sampled_from(["ab", b"ab", None]))
num_notification = st.fixed_dictionaries({n: num_values for n in NAMES})
ZZ = node(Kind.NAME, value="zz")
_TYPES = {"int32": int, "int64": Int64, "real64": float}


@settings(SETTINGS, max_examples=500)
@given(st.one_of(int_expr, num_expr), num_notification)
def test_value_semantics_agree(expr, attrs):
    """The value (and type) of an arithmetic expression is what the reference
    computes: put the reference's value in ``zz`` and compare."""
    from elvin.subscription.reference import _Interp

    tree = node(Kind.EQUALS, expr, ZZ)
    assume(_valid(tree))
    tagged = _Interp(attrs).value(expr)
    if tagged is None or tagged[0] in ("opaque", "other"):   # == is bottom
        assert compile(tree)._evaluate_raw({**attrs, "zz": 0}) is None
        return
    kind, value = tagged
    full = {**attrs, "zz": _TYPES.get(kind, str)(value)}
    # reals are equal when their bits are (a NaN equals a NaN, -0.0 is not 0.0)
    checks = [tree]
    if kind == "real64" and math.isnan(value):
        checks.append(node(Kind.FUNC_NAN, ZZ))
    if kind in ("int32", "int64"):   # same int type: wraps and shifts the same way
        big = node(Kind.INT32, value=INT32_MAX)
        n33 = node(Kind.INT32, value=33)
        checks.append(node(Kind.EQUALS, node(Kind.ADD, expr, big), node(Kind.ADD, ZZ, big)))
        checks.append(node(Kind.EQUALS, node(Kind.SHIFT_LEFT, expr, n33),
                           node(Kind.SHIFT_LEFT, ZZ, n33)))
    for check in checks:
        assert reference(check, full) is True
        assert compile(check)._evaluate_raw(full) is True, (unparse(check), full)


# -- robustness -----------------------------------------------------------------------

GRAMMAR_CHARS = "ab ()!=<>&|^~+-*/%,'\"\\0123456789.eExL_\t\n"


def _parse_or_error(text: str) -> None:
    try:
        tree = parse(text)
    except SubscriptionError as exc:
        assert exc.code
        assert exc.position is None or 0 <= exc.position <= len(text)
        return
    compile(tree)   # anything that parses compiles


@SETTINGS
@given(st.text(max_size=40))
def test_random_text_raises_only_subscription_error(text):
    _parse_or_error(text)


@SETTINGS
@given(st.text(alphabet=GRAMMAR_CHARS, max_size=40))
def test_random_grammar_text_raises_only_subscription_error(text):
    _parse_or_error(text)


@SETTINGS
@given(predicate, st.randoms(use_true_random=False))
def test_mutated_expressions_raise_only_subscription_error(tree, rnd: random.Random):
    text = list(unparse(tree))
    for _ in range(rnd.randint(1, 3)):
        pos = rnd.randrange(len(text) + 1)
        action = rnd.choice(["insert", "delete", "replace"])
        ch = rnd.choice(GRAMMAR_CHARS + "\u00e9[]@")
        if action == "insert":
            text.insert(pos, ch)
        elif text and pos < len(text):
            if action == "delete":
                del text[pos]
            else:
                text[pos] = ch
    _parse_or_error("".join(text))


# -- analyses -------------------------------------------------------------------------

eq_atom = st.one_of(
    name_equality,
    st.tuples(name_node, st.lists(literal, min_size=1, max_size=3)).map(
        lambda t: node(Kind.FUNC_EQUALS, t[0], *t[1])),
    atom)
index_predicate = st.recursive(eq_atom, _logic, max_leaves=5).filter(_valid)
small_values = st.one_of(
    st.integers(-3, 3), st.integers(-3, 3).map(Int64), st.sampled_from([0.0, -0.0, 2.0, 0.5,
                                                                          -1.5, math.nan]),
    short_text, st.sampled_from([2 ** 53 + 1, Int64(2 ** 53 + 1), 2.0 ** 53, b"a", True]))
small_notification = st.dictionaries(st.sampled_from(NAMES), st.one_of(small_values, values),
                                      max_size=len(NAMES))


@SETTINGS
@given(index_predicate, small_notification)
def test_required_names_sound(tree, attrs):
    need = required_names(tree)
    assert isinstance(need, frozenset)
    if compile(tree).evaluate(attrs) is True:
        assert need <= attrs.keys(), (unparse(tree), need)


@SETTINGS
@given(index_predicate, small_notification)
def test_index_constraint_sound(tree, attrs):
    constraint = index_constraint(tree)
    if constraint is None:
        return
    attr, keys = constraint
    if compile(tree).evaluate(attrs) is True:
        assert attr in attrs, unparse(tree)
        assert index_value(attrs[attr]) in keys, (unparse(tree), attrs[attr], keys)


@SETTINGS
@given(st.one_of(values, small_values), st.one_of(values, small_values))
def test_index_value_agrees_with_equality(x, y):
    tree = parse("x == y")
    if compile(tree).evaluate({"x": x, "y": y}) is True:
        assert index_value(x) == index_value(y)
        assert hash(index_value(x)) == hash(index_value(y))


# -- deep trees (code generation must stay within Python's limits) ----------------

def _deep_trees():
    x = node(Kind.NAME, value="a")
    req = node(Kind.FUNC_REQUIRE, x)
    eq = node(Kind.GREATER_THAN, x, node(Kind.INT32, value=0))
    left = req
    right = eq
    nots = req
    mixed = eq
    arith = x
    xor = req
    for i in range(MAX_DEPTH - 3):
        left = node(Kind.AND, left, eq)
        right = node(Kind.OR if i % 2 else Kind.AND, eq, right)
        nots = node(Kind.NOT, nots)
        mixed = node([Kind.AND, Kind.OR, Kind.XOR, Kind.NOT][i % 4], mixed, *(
            [] if i % 4 == 3 else [node(Kind.FUNC_REQUIRE, node(Kind.NAME, value="b"))]))
        arith = node([Kind.ADD, Kind.MULTIPLY, Kind.SUBTRACT, Kind.BIT_XOR][i % 4], arith,
                     node(Kind.INT32, value=i + 1))
        xor = node(Kind.XOR, req, xor) if i % 2 else node(Kind.XOR, xor, eq)
    return [left, right, nots, mixed, xor,
            node(Kind.GREATER_THAN, arith, node(Kind.INT32, value=0)),
            node(Kind.FUNC_EQUALS, arith, node(Kind.NAME, value="b"))]


@pytest.mark.parametrize("tree", _deep_trees())
def test_deep_trees_compile_and_agree(tree):
    validate(tree)
    sub = compile(tree)
    again = parse(unparse(tree))
    assert again == tree
    _matches, by_closures = closures.build(fold(tree))
    for attrs in ({}, {"a": 1}, {"a": -1, "b": 2}, {"a": 7, "b": "x"}, {"b": 1},
                  {"a": Int64(3), "b": 3}, {"a": 2.5, "b": 0}):
        assert sub._evaluate_raw(attrs) is reference(tree, attrs)
        assert by_closures(attrs) is reference(tree, attrs)


# -- examples the brief names ------------------------------------------------------------

def test_index_constraint_examples():
    assert index_constraint(parse('Group == "x"')) == ("Group", frozenset({"x"}))
    assert index_constraint(parse('Group == "a" || Group == "b"')) == \
        ("Group", frozenset({"a", "b"}))
    assert index_constraint(parse('equals(Group, "a", "b")')) == ("Group", frozenset({"a", "b"}))
    assert index_constraint(parse('fold-case(Group) == "chat"')) is None
    assert index_constraint(parse('Group == "a" || From == "b"')) is None
    assert index_constraint(parse('Group != "a"')) is None
    assert index_constraint(parse('!(Group != "a")')) == ("Group", frozenset({"a"}))
    assert index_constraint(parse(
        'equals(Group, "a", "b", "c") && From == "x"')) == ("From", frozenset({"x"}))
    assert index_constraint(parse('require(Message) && Group == "g"')) == \
        ("Group", frozenset({"g"}))
    assert index_constraint(parse("x > 2 + 3 && y == 2 + 3")) == ("y", frozenset({5}))
    assert index_constraint(parse('"x" == Group')) == ("Group", frozenset({"x"}))
    assert index_constraint(parse('Group == "a" ^^ Group == "b"')) is None
    keys = index_constraint(parse("x == 5"))[1]
    for v in (5, Int64(5), 5.0):
        assert index_value(v) in keys
    for v in ("5", b"5", 5.5, True, 2 ** 70, None, [5]):
        assert index_value(v) not in keys


def test_required_names_examples():
    tickertape = parse('require(Message) && fold-case(Group) == "chat" || Group == "elvin"')
    assert required_names(tickertape) == {"Group"}
    assert required_names(parse("require(A) && B == 1")) == {"A", "B"}
    assert required_names(parse("require(A) || require(B)")) == frozenset()
    assert required_names(parse("!require(A)")) == {"A"}         # never true
    assert required_names(parse("!(A == 1)")) == {"A"}
    assert required_names(parse("!(A == 1 && B == 2)")) == frozenset()
    assert required_names(parse("!(A == 1 || B == 2)")) == {"A", "B"}
    assert required_names(parse("A == 1 ^^ B == 2")) == {"A", "B"}
    assert required_names(parse("require(A) ^^ B == 2")) == {"A", "B"}
    assert required_names(parse("A + B > C")) == {"A", "B", "C"}
    assert required_names(parse("equals(A, B, 1)")) == {"A"}
    assert required_names(parse("equals(A, B, C)")) == {"A"}
    assert required_names(parse("equals(A, B)")) == {"A", "B"}
    assert required_names(parse("begins-with(fold-case(A), 'x')")) == {"A"}
    assert required_names(parse("!int32(A)")) == {"A"}
    assert required_names(parse("!!require(A)")) == {"A"}


_D = MAX_DEPTH - 2


@pytest.mark.parametrize("text", [
    "fold-case(" * _D + "a" + ")" * _D + ' == "a"',
    "begins-with(" + "decompose(" * (_D - 1) + "a" + ")" * (_D - 1) + ', "A")',
    "size(a) " + "+ 1 " * (_D - 2) + "> 3",
    "-" * (_D - 1) + "a == 1",
    "~" * (_D - 1) + "a == 1",
    "a == " + "-(" * (_D - 2) + "1" + ")" * (_D - 2),
    "(" * (MAX_DEPTH - 1) + "a == 1" + ")" * (MAX_DEPTH - 1),
])
def test_deepest_texts_compile_and_agree(text):
    sub = compile(text)
    for attrs in ({}, {"a": "A"}, {"a": 1}, {"a": -1}, {"a": Int64(2)}, {"a": 0.5}):
        assert sub._evaluate_raw(attrs) is reference(sub.ast, attrs)


# -- n-ary logical chains ------------------------------------------------------------

def _req(v):
    return node(Kind.FUNC_REQUIRE, node(Kind.NAME, value=v))


@pytest.mark.parametrize("kind", LOGICAL)
def test_nested_same_kind_round_trips_with_parentheses(kind):
    a, b, c, d = (_req(v) for v in "abcd")
    op = {Kind.AND: "&&", Kind.OR: "||", Kind.XOR: "^^"}[kind]
    for tree, text in [
        (node(kind, node(kind, a, b), c), f"(require(a) {op} require(b)) {op} require(c)"),
        (node(kind, a, node(kind, b, c)), f"require(a) {op} (require(b) {op} require(c))"),
        (node(kind, a, b, c), f"require(a) {op} require(b) {op} require(c)"),
        (node(kind, node(kind, a, b, c), d),
         f"(require(a) {op} require(b) {op} require(c)) {op} require(d)"),
    ]:
        assert validate(tree) is tree          # validate() keeps the shape
        assert unparse(tree) == text
        assert parse(text) == tree


chain_names = st.sampled_from(["a", "b"]).map(lambda v: node(Kind.NAME, value=v))
chain_literal = st.one_of(
    st.sampled_from(["x", "y", "", "\u00e9"]).map(lambda v: node(Kind.STRING, value=v)),
    st.sampled_from([0, 1, -1, INT32_MAX]).map(lambda v: node(Kind.INT32, value=v)),
    st.sampled_from([1, 2 ** 53 + 1, INT64_MIN]).map(lambda v: node(Kind.INT64, value=v)),
    st.sampled_from([1.0, 0.5, -0.0, 2.0 ** 53]).map(lambda v: node(Kind.REAL64, value=v)))
chain_atom = st.one_of(
    st.tuples(st.sampled_from([Kind.EQUALS, Kind.NOT_EQUALS]), chain_names, chain_literal,
              st.booleans()).map(
        lambda t: node(t[0], t[1], t[2]) if t[3] else node(t[0], t[2], t[1])),
    st.tuples(chain_names, st.lists(chain_literal, min_size=1, max_size=3)).map(
        lambda t: node(Kind.FUNC_EQUALS, t[0], *t[1])),
    st.just(_req("a")))
chain_operand = st.one_of(chain_atom, chain_atom.map(lambda n: node(Kind.NOT, n)))
chain = st.tuples(st.sampled_from([Kind.AND, Kind.OR]),
                  st.lists(chain_operand, min_size=2, max_size=8)).map(
    lambda t: node(t[0], *t[1])).filter(_valid)
chain_values = st.one_of(
    st.sampled_from(["x", "y", "", "\u00e9", "z", 0, 1, -1, 2, INT32_MAX, Int64(1),
                     Int64(2 ** 53 + 1), 2 ** 53 + 1, INT64_MIN, Int64(INT64_MIN), 1.0, 0.5,
                     -0.0, 2.0 ** 53, math.nan, b"x", None, True]),
    values)
chain_notification = st.dictionaries(st.sampled_from(["a", "b"]), chain_values)


@settings(SETTINGS, max_examples=500)
@given(chain, chain_notification)
def test_equality_chains_agree_with_reference(tree, attrs):
    """||/&& chains of equalities on one attribute compile to set look-ups:
    same answers as the reference, which compares one by one."""
    sub = compile(tree)
    expected = reference(tree, attrs)
    assert sub._evaluate_raw(attrs) is expected, sub.source
    assert sub.evaluate(attrs) is expected
    assert sub.matches(attrs) is (expected is True)


def test_ten_thousand_groups():
    """A tickertape user in 10,000 groups: one flat OR, compiled to one set
    look-up, indexed on Group with every value."""
    import time

    groups = [f"g{i}" for i in range(10000)]
    text = " || ".join(f'Group == "{g}"' for g in groups)
    start = time.perf_counter()
    sub = compile(text)
    elapsed = time.perf_counter() - start
    assert elapsed < 10, elapsed       # typically well under a second; the machine is shared
    assert sub.ast.kind is Kind.OR and len(sub.ast.children) == 10000
    assert len(sub.source) < 2000      # a set look-up, not 10,000 comparisons
    for g in ("g0", "g5000", "g9999"):
        assert sub.evaluate({"Group": g}) is True
    assert sub.evaluate({"Group": "g10000"}) is False
    assert sub.evaluate({"Group": 5}) is None
    assert sub.evaluate({}) is None
    assert sub.matches({"Group": "g1234", "Message": "hi"})
    assert required_names(sub.ast) == {"Group"}
    assert index_constraint(sub.ast) == ("Group", frozenset(groups))
    assert unparse(parse(unparse(sub.ast))) == unparse(sub.ast)
    # the same chain with && and !=, and behind a negation
    sub = compile(" && ".join(f'Group != "{g}"' for g in groups))
    assert sub.evaluate({"Group": "g77"}) is False
    assert sub.evaluate({"Group": "elvin"}) is True
    assert sub.evaluate({"Group": 1}) is None
    sub = compile("!(" + text + ")")
    assert sub.evaluate({"Group": "g77"}) is False
    assert sub.evaluate({"Group": "elvin"}) is True


def test_long_chains_that_do_not_merge_compile():
    """Chains of unlike operands still compile (flat Python, no recursion)
    and agree with the reference interpreter."""
    n = 3000
    ors = " || ".join(f"a{i} == {i}" for i in range(n))
    ands = " && ".join(f"begins-with(s, 'x{i % 7}') || a{i} > {i}" for i in range(n))
    xors = " ^^ ".join(f"a{i} == {i}" for i in range(200))
    attrs = [{}, {f"a{n - 1}": n - 1}, {"a5": 5, "a7": 7}, {"s": "x3"},
             {f"a{i}": i for i in range(n)}, {f"a{i}": i + 1 for i in range(n)}]
    for text in (ors, ands, xors):
        sub = compile(text)
        for a in attrs:
            assert sub._evaluate_raw(a) is reference(sub.ast, a)
    assert index_constraint(parse(ors)) is None
    assert required_names(parse(ors)) == frozenset()
    assert index_constraint(parse("x == 1 || x == 2L || x == 3.5 || x == 'four'")) == \
        ("x", frozenset({1, 2, 3.5, "four"}))


@pytest.mark.parametrize("text", [
    "equals(x, 0.0 / 0.0)", "equals(x, 0.0 / 0.0, 1)", "x == 0.0 / 0.0 || x == 1.0",
    "x != 0.0 / 0.0 && x != 2", "equals(x, 0.0 / 0.0, 'a')",
])
def test_folded_nan_literal_equals_every_nan(text):
    """A NaN made by folding equals every NaN, not only the very same object
    (which is all a set look-up finds), and nothing else."""
    sub = compile(text)
    for value in (math.nan, float("nan"), 1, 1.0, 2, Int64(1), "a", math.inf):
        attrs = {"x": value}
        assert sub._evaluate_raw(attrs) is reference(sub.ast, attrs), (text, value)
