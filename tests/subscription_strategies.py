"""Hypothesis strategies for subscription trees and notifications.

Shared by the differential tests of the evaluators (tests/unit) and of the
Spark translation (tests/pipeline), so that both draw the same kind of
expression: arithmetic and bitwise operators of every precedence level,
``%`` on reals, comparisons of every numeric type, string tests, and
logical operators over partly constant operands (``x == 1 || 1 == 2``,
``1 / 0 == 1 || ...``), which the checker accepts (issue 18).
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

from elvin.errors import SubscriptionError
from elvin.subscription import Kind, Node, validate
from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64

VALUE_BINARY = [Kind.ADD, Kind.SUBTRACT, Kind.MULTIPLY, Kind.DIVIDE, Kind.MODULO,
                Kind.SHIFT_LEFT, Kind.SHIFT_RIGHT, Kind.LOGICAL_SHIFT_RIGHT, Kind.BIT_AND,
                Kind.BIT_OR, Kind.BIT_XOR]
VALUE_UNARY = [Kind.UNARY_MINUS, Kind.UNARY_PLUS, Kind.BIT_NEGATE]
COMPARISONS = [Kind.EQUALS, Kind.NOT_EQUALS, Kind.LESS_THAN, Kind.LESS_THAN_EQUALS,
               Kind.GREATER_THAN, Kind.GREATER_THAN_EQUALS]
TYPE_TESTS = [Kind.FUNC_REQUIRE, Kind.FUNC_INT32, Kind.FUNC_INT64, Kind.FUNC_REAL64,
              Kind.FUNC_STRING, Kind.FUNC_OPAQUE, Kind.FUNC_NAN]
SUBSTRING_TESTS = [Kind.FUNC_BEGINS_WITH, Kind.FUNC_ENDS_WITH, Kind.FUNC_CONTAINS]
LOGICAL = [Kind.AND, Kind.OR, Kind.XOR]

#: reals a notification or a folded literal may hold: the edges of issue 18
SPECIAL_REALS = [0.0, -0.0, math.nan, math.inf, -math.inf, 2.5, 7.0, -7.0, 0.5, 1e308, -1e308,
                 5e-324, 2.0 ** 53, 2147483648.0, 9.2e18, -1.0]
INT32_EDGES = [INT32_MIN, INT32_MAX, INT32_MIN + 1, 0, -1, 1, 2, 31, 32, 33]
INT64_EDGES = [Int64(INT64_MIN), Int64(INT64_MAX), Int64(0), Int64(-1), Int64(63), Int64(64),
               2 ** 53 + 1, Int64(2 ** 53 + 1), 2 ** 31, -(2 ** 31) - 1, INT64_MIN, INT64_MAX]
TEXTS = ["", "a", "A", "ab", "ß", "SS", "ss", "é", "e\u0301", "\u212a", "k", "\U0001f600",
         "Straße", "line\nbreak", "日本"]


def node(kind: Kind, *children: Node, value=None) -> Node:
    return Node(kind, tuple(children), value)


def _binary(kinds, children):
    return st.tuples(st.sampled_from(kinds), children, children).map(
        lambda t: node(t[0], t[1], t[2]))


def _unary(kinds, children):
    return st.tuples(st.sampled_from(kinds), children).map(lambda t: node(t[0], t[1]))


def _nary(kinds, children):
    return st.tuples(st.sampled_from(kinds), st.lists(children, min_size=3, max_size=4)).map(
        lambda t: node(t[0], *t[1]))


def is_valid(tree: Node) -> bool:
    try:
        validate(tree)
    except SubscriptionError:
        return False
    return True


int32_literal = st.one_of(st.integers(-8, 8), st.sampled_from(INT32_EDGES),
                          st.integers(INT32_MIN, INT32_MAX)).map(
    lambda v: node(Kind.INT32, value=v))
int64_literal = st.one_of(st.integers(-8, 8), st.sampled_from([INT64_MIN, INT64_MAX, 2 ** 53 + 1]),
                          st.integers(INT64_MIN, INT64_MAX)).map(
    lambda v: node(Kind.INT64, value=v))
# literals are finite (the language has no NaN or infinity literal); folding
# makes those from 0.0 / 0.0 and 1.0 / 0.0
real_literal = st.one_of(st.sampled_from([r for r in SPECIAL_REALS if math.isfinite(r)]),
                         st.floats(allow_nan=False, allow_infinity=False)).map(
    lambda v: node(Kind.REAL64, value=v))
string_literal = st.one_of(st.sampled_from(TEXTS), st.text(max_size=3)).map(
    lambda v: node(Kind.STRING, value=v))


def value_expressions(names: list[str], string_names: list[str] = ()):
    """Numeric value trees over ``names``: every arithmetic and bitwise
    operator, literals of the three numeric types, ``size(name)``."""
    name = st.sampled_from(names).map(lambda v: node(Kind.NAME, value=v))
    sized = st.sampled_from(list(string_names) or names).map(
        lambda v: node(Kind.FUNC_SIZE, node(Kind.NAME, value=v)))
    leaf = st.one_of(name, name, sized, int32_literal, int64_literal, real_literal)
    return st.recursive(leaf, lambda c: st.one_of(_binary(VALUE_BINARY, c),
                                                  _unary(VALUE_UNARY, c)), max_leaves=4)


def compared_literals():
    """What a plain ``name OP literal`` compares with (the compiler writes
    those out inline): zeros of both signs, ints at the type edges, reals,
    and the NaN and infinities that folding makes of ``0.0 / 0.0``."""
    zero = node(Kind.REAL64, value=0.0)
    return st.one_of(
        st.sampled_from([0, 1, -1, 2, INT32_MAX, INT32_MIN]).map(
            lambda v: node(Kind.INT32, value=v)),
        st.sampled_from([0, 2 ** 53 + 1, INT64_MAX, INT64_MIN]).map(
            lambda v: node(Kind.INT64, value=v)),
        st.sampled_from([0.0, -0.0, 2.5, -1.0, 1e308, 2.0 ** 53, 9.2e18]).map(
            lambda v: node(Kind.REAL64, value=v)),
        st.sampled_from([0.0, 1.0, -1.0]).map(
            lambda v: node(Kind.DIVIDE, node(Kind.REAL64, value=v), zero)))


def constant_values():
    """Value trees of literals only (constant, sometimes bottom or NaN)."""
    leaf = st.one_of(int32_literal, int64_literal, real_literal,
                     st.sampled_from([0, 1, 2]).map(lambda v: node(Kind.INT32, value=v)),
                     st.sampled_from([0.0, -0.0]).map(lambda v: node(Kind.REAL64, value=v)))
    return st.recursive(leaf, lambda c: st.one_of(_binary(VALUE_BINARY, c),
                                                  _unary(VALUE_UNARY, c)), max_leaves=3)


def predicates(names: list[str], string_names: list[str], *, string_functions: bool = True,
               max_leaves: int = 5):
    """Valid predicate trees (filtered through ``validate``): arithmetic over
    ``names``, string tests mostly over ``string_names`` (any name may meet
    any test: notifications hold any type too).

    ``string_functions``: also fold-case / decompose / decompose-compat
    (the Spark test leaves them out: ICU's Unicode version is not Python's).
    """
    every = list(names) + list(string_names)
    name = st.one_of(st.sampled_from(string_names), st.sampled_from(string_names),
                     st.sampled_from(every)).map(lambda v: node(Kind.NAME, value=v))
    values = value_expressions(names, string_names)
    if string_functions:
        strings = st.recursive(name, lambda c: _unary(
            [Kind.FUNC_FOLD_CASE, Kind.FUNC_DECOMPOSE, Kind.FUNC_DECOMPOSE_COMPAT], c),
            max_leaves=2)
    else:
        strings = name
    comparison = st.tuples(st.sampled_from(COMPARISONS), values, values).map(
        lambda t: node(t[0], t[1], t[2]))
    numeric_name = st.sampled_from(names).map(lambda v: node(Kind.NAME, value=v))
    simple = st.tuples(st.sampled_from(COMPARISONS), numeric_name, compared_literals(),
                       st.booleans()).map(
        lambda t: node(t[0], t[1], t[2]) if t[3] else node(t[0], t[2], t[1]))
    constant = st.tuples(st.sampled_from(COMPARISONS), constant_values(), constant_values()).map(
        lambda t: node(t[0], t[1], t[2]))
    string_equality = st.tuples(st.sampled_from([Kind.EQUALS, Kind.NOT_EQUALS]), strings,
                                st.one_of(string_literal, strings)).map(
        lambda t: node(t[0], t[1], t[2]))
    type_test = _unary(TYPE_TESTS, name)
    substring = st.tuples(st.sampled_from(SUBSTRING_TESTS), strings,
                          st.lists(string_literal, min_size=1, max_size=2)).map(
        lambda t: node(t[0], t[1], *t[2]))
    equals = st.tuples(st.one_of(values, strings),
                       st.lists(st.one_of(int32_literal, real_literal, string_literal, name,
                                          constant_values()), min_size=1, max_size=3)).map(
        lambda t: node(Kind.FUNC_EQUALS, t[0], *t[1]))
    # equals(name, literals) and a || of name == literal (or && of !=) on one
    # name: the compiler makes set look-ups of those
    membership = st.tuples(numeric_name, st.lists(compared_literals(), min_size=1, max_size=3),
                           st.sampled_from(["equals", "or", "and"])).map(
        lambda t: node(Kind.FUNC_EQUALS, t[0], *t[1]) if t[2] == "equals" or len(t[1]) < 2
        else node(Kind.OR, *(node(Kind.EQUALS, t[0], c) for c in t[1])) if t[2] == "or"
        else node(Kind.AND, *(node(Kind.NOT_EQUALS, t[0], c) for c in t[1])))
    atom = st.one_of(simple, simple, comparison, comparison, constant, string_equality,
                     type_test, substring, equals, membership)
    logic = st.recursive(atom, lambda c: st.one_of(_binary(LOGICAL, c), _nary(LOGICAL, c),
                                                   _unary([Kind.NOT], c)),
                         max_leaves=max_leaves)
    return logic.filter(is_valid)


def elvin_values():
    """Attribute values of every Elvin type, edges first."""
    return st.one_of(
        st.integers(-8, 8), st.sampled_from(INT32_EDGES), st.integers(INT32_MIN, INT32_MAX),
        st.sampled_from(INT64_EDGES), st.integers(INT64_MIN, INT64_MAX),
        st.integers(-8, 8).map(Int64), st.sampled_from(SPECIAL_REALS), st.floats(),
        st.sampled_from(TEXTS), st.text(max_size=4), st.binary(max_size=3))


def numbers():
    """Numeric values of the three types, edges first."""
    edges = st.sampled_from([math.nan, -0.0, 0.0, math.inf, -math.inf, 0, Int64(0), 1])
    return st.one_of(edges, edges, edges, st.integers(-8, 8), st.sampled_from(INT32_EDGES),
                     st.sampled_from(INT64_EDGES), st.integers(-8, 8).map(Int64),
                     st.sampled_from(SPECIAL_REALS), st.floats())


def notifications(names: list[str], string_names: list[str], *, foreign: bool = False):
    """Notifications: some sparse with values of any type, some with every
    name, mostly numbers in ``names`` and strings in ``string_names`` (so
    that comparisons are often true or false, not bottom). ``foreign`` adds
    values of no Elvin type (a local caller may pass them; they must
    evaluate as bottom)."""
    values = elvin_values()
    if foreign:
        values = st.one_of(values, st.sampled_from([True, None, 2 ** 70, -(2 ** 70), [1],
                                                    "\ud800", 1j]))
    texts = st.one_of(st.sampled_from(TEXTS), st.text(max_size=4))
    full = st.fixed_dictionaries({
        **{n: st.one_of(numbers(), numbers(), numbers(), values) for n in names},
        **{n: st.one_of(texts, texts, texts, values) for n in string_names}})
    every = list(names) + list(string_names)
    return st.one_of(full, full, full,
                     st.dictionaries(st.sampled_from(every), values, max_size=len(every)))
