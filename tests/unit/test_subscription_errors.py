"""Every error code of spec 6.3, with the position it reports."""

from __future__ import annotations

import time

import pytest

from elvin.errors import NackCode, SubscriptionError
from elvin.subscription import MAX_DEPTH, Kind, Node, compile, parse, validate

# (expression, code, position)
ERRORS: list[tuple[str, str, int | None]] = [
    # PARSE_ERROR
    ("", "PARSE_ERROR", 0), ("   ", "PARSE_ERROR", 0), ("(i > 2", "PARSE_ERROR", 6),
    ("(i > 2) (i > 1)", "PARSE_ERROR", 8), ("i == ", "PARSE_ERROR", 5),
    ("i == 1 &&", "PARSE_ERROR", 9), ("&& i == 1", "PARSE_ERROR", 0),
    ("i < 2 < 3", "PARSE_ERROR", 6), ("i == 1 == 2", "PARSE_ERROR", 7),
    ("i == 1)", "PARSE_ERROR", 6), ("()", "PARSE_ERROR", 1), ("i ==, 1", "PARSE_ERROR", 4),
    ("require(i,)", "PARSE_ERROR", 10), ("require(,i)", "PARSE_ERROR", 8),
    ("i 5", "PARSE_ERROR", 2), ("--", "PARSE_ERROR", 2), ("i == 1 !", "PARSE_ERROR", 7),
    ("i == (1 + )", "PARSE_ERROR", 10), ("i == !", "PARSE_ERROR", 5),
    ("(i == 1) (", "PARSE_ERROR", 9),
    # INVALID_TOKEN
    ("i = 1", "INVALID_TOKEN", 2), ("i == 1 @", "INVALID_TOKEN", 7),
    ("i == .5", "INVALID_TOKEN", 5), ("i == 08", "INVALID_TOKEN", 5),
    ("i == 1.", "INVALID_TOKEN", 5), ("i == 0.1e", "INVALID_TOKEN", 5),
    ("i == 0.1e-", "INVALID_TOKEN", 5), ("i == 0.1f", "INVALID_TOKEN", 5),
    ("i == 12abc", "INVALID_TOKEN", 5), ("i == 0x", "INVALID_TOKEN", 5),
    ("i == 1.5L", "INVALID_TOKEN", 5), ("i == 1e5", "INVALID_TOKEN", 5),
    ("i == 1 && \\", "INVALID_TOKEN", 10), ("[x] == 1", "INVALID_TOKEN", 0),
    ("i == 1 # c", "INVALID_TOKEN", 7), ("i == $x", "INVALID_TOKEN", 5),
    ("i == 1\x00", "INVALID_TOKEN", 6), ("s == '\ud800'", "INVALID_TOKEN", 6),
    ("i\u00a0== 1", "INVALID_TOKEN", 1), ("i == 0xfffffffffffffffffffffffffffffffffffffffffL",
                                          "OVERFLOW", 5),
    # UNTERM_STRING
    ('"abc', "UNTERM_STRING", 0), ("i == 'abc", "UNTERM_STRING", 5),
    ("'a\\'", "UNTERM_STRING", 0), ("'", "UNTERM_STRING", 0), ('"', "UNTERM_STRING", 0),
    ("s == \"a\\\"", "UNTERM_STRING", 5), ("begins-with(s, 'a)", "UNTERM_STRING", 15),
    # OVERFLOW
    ("i == 2147483648", "OVERFLOW", 5), ("i == -2147483649", "OVERFLOW", 6),
    ("i == 9223372036854775808L", "OVERFLOW", 5),
    ("i == -9223372036854775809L", "OVERFLOW", 6), ("i == 0x100000000", "OVERFLOW", 5),
    ("i == 0xFFFFFFFF", "OVERFLOW", 5), ("i == 1.0e309", "OVERFLOW", 5),
    ("i == 99999999999999999999999999999999999999999999999999", "OVERFLOW", 5),
    ("i == -(2147483648)", "OVERFLOW", 6), ("i == 040000000000", "OVERFLOW", 5),
    ("i == 18446744073709551616L", "OVERFLOW", 5), ("i == -1.0e400", "OVERFLOW", 6),
    # TYPE_MISMATCH
    ('1 + "a" == i', "TYPE_MISMATCH", 4), ('"a" < i', "TYPE_MISMATCH", 0),
    ('i < "a"', "TYPE_MISMATCH", 4), ("5 > 'name'", "TYPE_MISMATCH", 4),
    ("1.0 << 2 == i", "TYPE_MISMATCH", 0), ("i == 1 << 2.0", "TYPE_MISMATCH", 10),
    ("~'x' == i", "TYPE_MISMATCH", 1), ("~1.5 == i", "TYPE_MISMATCH", 1),
    ("- 'x' == i", "TYPE_MISMATCH", 2), ("'hello' + 'hello' == s", "TYPE_MISMATCH", 0),
    ("begins-with(s, 1)", "TYPE_MISMATCH", 15), ("begins-with(s, t)", "TYPE_MISMATCH", 15),
    ("begins-with(1, 'a')", "TYPE_MISMATCH", 12),
    ("begins-with(i + 1, 'a')", "TYPE_MISMATCH", 12),
    ("ends-with(s, 1)", "TYPE_MISMATCH", 13), ("contains(s, 1)", "TYPE_MISMATCH", 12),
    ("regex(s, 1)", "TYPE_MISMATCH", 9), ("wildcard(s, 1.5)", "TYPE_MISMATCH", 12),
    ("regex(s, fold-case(t))", "TYPE_MISMATCH", 9),
    ("field > 3 || 42", "TYPE_MISMATCH", 13), ("field > 3 || 'name'", "TYPE_MISMATCH", 13),
    ("'hello' && 'there'", "TYPE_MISMATCH", 0), ("2", "TYPE_MISMATCH", 0),
    ("'hello'", "TYPE_MISMATCH", 0), ("name", "TYPE_MISMATCH", 0),
    ("a==1", "TYPE_MISMATCH", 0), ("i==5||i==6", "TYPE_MISMATCH", 0),
    ("x || y", "TYPE_MISMATCH", 0), ("require(i) && i", "TYPE_MISMATCH", 14),
    ("!i", "TYPE_MISMATCH", 1), ("require(1)", "TYPE_MISMATCH", 8),
    ("require('i')", "TYPE_MISMATCH", 8), ("int32(i + 1)", "TYPE_MISMATCH", 6),
    ("size(1) > 2", "TYPE_MISMATCH", 5), ("size('a') > 2", "TYPE_MISMATCH", 5),
    ("size(fold-case(s)) > 2", "TYPE_MISMATCH", 5),
    ("fold-case(1) == 'a'", "TYPE_MISMATCH", 10), ("decompose(1) == 'a'", "TYPE_MISMATCH", 10),
    ("decompose-compat(1) == 'a'", "TYPE_MISMATCH", 17),
    ("equals('hello', 'there', 1)", "TYPE_MISMATCH", 25),
    ("fold-case(s) == 1", "TYPE_MISMATCH", 16), ("size(s) == 'a'", "TYPE_MISMATCH", 11),
    ("(i > 1) == 1", "TYPE_MISMATCH", 0), ("i + (j > 1) == 2", "TYPE_MISMATCH", 4),
    ("1 << 2.0 == i", "TYPE_MISMATCH", 5), ("i | 2.5 == 1", "TYPE_MISMATCH", 4),
    ("(i + 1.5) & 3 == 1", "TYPE_MISMATCH", 0), ("i ^ 1.0 == 1", "TYPE_MISMATCH", 4),
    ("i >>> (r + 0.5) == 1", "TYPE_MISMATCH", 6), ("equals(i, require(j))", "TYPE_MISMATCH", 10),
    ("fold-case(s) < 'a'", "TYPE_MISMATCH", 0), ("fold-case(s) + 1 == 2", "TYPE_MISMATCH", 0),
    ("size(s) && require(i)", "TYPE_MISMATCH", 0), ("!(i + 1)", "TYPE_MISMATCH", 1),
    ("fold-case(require(s)) == 'a'", "TYPE_MISMATCH", 10),
    ("equals(fold-case(s), 'a', 1)", "TYPE_MISMATCH", 26),
    # UNKNOWN_FUNC
    ("foo(i)", "UNKNOWN_FUNC", 0), ("i == 1 || bar (j)", "UNKNOWN_FUNC", 10),
    ("Require(i)", "UNKNOWN_FUNC", 0), ("foobar (name, 'hello')", "UNKNOWN_FUNC", 0),
    ("i == lower(s)", "UNKNOWN_FUNC", 5),
    # TOO_FEW_ARGS
    ("require()", "TOO_FEW_ARGS", 0), ("begins-with(s)", "TOO_FEW_ARGS", 0),
    ("equals(s)", "TOO_FEW_ARGS", 0), ("size() > 1", "TOO_FEW_ARGS", 0),
    ("fold-case() == 'a'", "TOO_FEW_ARGS", 0), ("regex(s)", "TOO_FEW_ARGS", 0),
    ("i == 1 && nan()", "TOO_FEW_ARGS", 10), ("wildcard(s)", "TOO_FEW_ARGS", 0),
    # TOO_MANY_ARGS
    ("require(a, b)", "TOO_MANY_ARGS", 11), ("size(a, b) > 1", "TOO_MANY_ARGS", 8),
    ("fold-case(a, b) == 'x'", "TOO_MANY_ARGS", 13), ("int32(a, b, c)", "TOO_MANY_ARGS", 9),
    ("decompose(a, 'b') == 'x'", "TOO_MANY_ARGS", 13), ("opaque(a, b)", "TOO_MANY_ARGS", 10),
    # EXP_IS_TRIVIAL
    ("1 == 1", "EXP_IS_TRIVIAL", 0), ("field > 5 || 1 == 1", "EXP_IS_TRIVIAL", 13),
    ('"a" == "a"', "EXP_IS_TRIVIAL", 0), ("1 < 2", "EXP_IS_TRIVIAL", 0),
    ("equals(1, 1, 2)", "EXP_IS_TRIVIAL", 0), ("begins-with('abc', 'a')", "EXP_IS_TRIVIAL", 0),
    ("2 + 3 == 5", "EXP_IS_TRIVIAL", 0), ("x > 1 / 0", "EXP_IS_TRIVIAL", 4),
    ("x > 1 % 0", "EXP_IS_TRIVIAL", 4), ("require(x) && !(1 == 1)", "EXP_IS_TRIVIAL", 15),
    ("!(1 == 2)", "EXP_IS_TRIVIAL", 1), ("fold-case('A') == 'a'", "EXP_IS_TRIVIAL", 0),
    ("1.0 / 0.0 > 1.0", "EXP_IS_TRIVIAL", 0), ("'a' != 'b'", "EXP_IS_TRIVIAL", 0),
    ("regex('abc', 'b')", "EXP_IS_TRIVIAL", 0), ("equals(x, 1 / 0)", "EXP_IS_TRIVIAL", 10),
    ("require(x) || 1 == 1 && 2 == 2", "EXP_IS_TRIVIAL", 14),
    ("require(x) ^^ 1 / 0 < 0", "EXP_IS_TRIVIAL", 14),
    ("x == 1 && 1 == 2", "EXP_IS_TRIVIAL", 10), ("x + 1 / 0 > 3", "EXP_IS_TRIVIAL", 4),
    ("-(1 / 0) < x", "EXP_IS_TRIVIAL", 1), ("equals(1 / 0, x, 2)", "EXP_IS_TRIVIAL", 7),
    ("(1 == 1 || x == 1) && 2 == 2", "EXP_IS_TRIVIAL", 0),
    ("1 == 1 ^^ 2 == 2", "EXP_IS_TRIVIAL", 0), ("x == 1 ^^ !(1 / 0 == 1)", "EXP_IS_TRIVIAL", 12),
    # INVALID_REGEXP (wildcards too)
    ('regex(s, "(a")', "INVALID_REGEXP", 9), ('regex(s, "a)")', "INVALID_REGEXP", 9),
    ('regex(s, "*a")', "INVALID_REGEXP", 9), ('regex(s, "[z-a]")', "INVALID_REGEXP", 9),
    ('regex(s, "[a")', "INVALID_REGEXP", 9), ('regex(s, "ok", "(bad")', "INVALID_REGEXP", 15),
    ('wildcard(s, "[z-a]")', "INVALID_REGEXP", 12), ('regex(s, "\\\\1")', "INVALID_REGEXP", 9),
    ('regex(s, "a{3,2}")', "INVALID_REGEXP", 9), ('regex(s, "[[:nope:]]")', "INVALID_REGEXP", 9),
    ('regex(s, "\\\\")', "INVALID_REGEXP", 9), ('regex(s, "\\\\q")', "INVALID_REGEXP", 9),
    ("regex (name, '(abc')", "INVALID_REGEXP", 13), ('regex(s, "^*")', "INVALID_REGEXP", 9),
    # REGEXP_TOO_COMPLEX
    ('regex(s, "(a+)+")', "REGEXP_TOO_COMPLEX", 9), ('regex(s, "a{1000}")', "REGEXP_TOO_COMPLEX", 9),
    ('regex(s, "(x*)*y")', "REGEXP_TOO_COMPLEX", 9), ('regex(s, "a*+")', "REGEXP_TOO_COMPLEX", 9),
    ('regex(s, "' + "(" * 40 + ")" * 40 + '")', "REGEXP_TOO_COMPLEX", 9),
    # NESTING_TOO_DEEP
    ("(" * (MAX_DEPTH + 1) + "i == 1" + ")" * (MAX_DEPTH + 1), "NESTING_TOO_DEEP", MAX_DEPTH),
    ("!" * 70 + "require(i)", "NESTING_TOO_DEEP", 7),
    ("require(i) || !(" * 20 + "require(i) || " * 70 + "i + " * 30 + "1 > 0" + ")" * 20,
     "NESTING_TOO_DEEP", 16 * 4),
    ("i" + " + 1" * 70 + " > 0", "NESTING_TOO_DEEP", 0),
    ("-" * 80 + "i == 1", "NESTING_TOO_DEEP", 16),
]


@pytest.mark.parametrize(("expr", "code", "position"), ERRORS,
                         ids=[f"{c[1]}:{c[0][:40]}" for c in ERRORS])
def test_error(expr, code, position):
    with pytest.raises(SubscriptionError) as info:
        compile(expr)
    err = info.value
    assert err.code == code, str(err)
    assert err.nack_code == NackCode[code]
    assert err.position == position, str(err)
    assert err.message and err.expression == expr
    if position is not None:
        assert err.args_[0] == position
        assert "^" in str(err)     # the caret line a person reads


def test_type_mismatch_args_name_the_expression_and_type():
    with pytest.raises(SubscriptionError) as info:
        parse("begins-with(i + 1, 'a')")
    assert info.value.args_ == (12, "i + 1", "number")


def test_unknown_func_args():
    with pytest.raises(SubscriptionError) as info:
        parse("i == 1 || bar (j)")
    assert info.value.args_ == (10, "bar")


def test_glued_operator_message_explains_names():
    with pytest.raises(SubscriptionError) as info:
        parse("a==1")
    assert "white space" in info.value.message


def test_chained_comparison_message():
    with pytest.raises(SubscriptionError) as info:
        parse("a < b < c")
    assert "chain" in info.value.message


@pytest.mark.parametrize("text", [
    "(" * 50000 + "i == 1" + ")" * 50000,
    "(" * 100000,
    "!" * 100000 + "require(i)",
    "-" * 100000 + "1 == i",
    "require(i) || !(" * 7000 + "require(i)" + ")" * 7000,
    "i" + " + 1" * 25000 + " > 0",
    "f(" * 30000 + "x" + ")" * 30000,
])
def test_huge_nesting_is_refused_fast(text):
    start = time.perf_counter()
    with pytest.raises(SubscriptionError) as info:
        parse(text)
    assert info.value.code in ("NESTING_TOO_DEEP", "UNKNOWN_FUNC")
    assert time.perf_counter() - start < 5


def test_long_logical_chains_are_one_level():
    """a || b || ... is one n-ary node: its length is not nesting."""
    for op in ("||", "&&", "^^"):
        text = f" {op} ".join(f"require(i{n})" for n in range(5000))
        start = time.perf_counter()
        tree = parse(text)
        assert time.perf_counter() - start < 5
        assert len(tree.children) == 5000
    # real nesting still counts, each chain one level
    deep = "require(i) || !(" * (MAX_DEPTH // 2 - 1) + "require(i)" + ")" * (MAX_DEPTH // 2 - 1)
    parse(deep)
    with pytest.raises(SubscriptionError) as info:
        parse("require(i) && (" + deep + " || require(j))")
    assert info.value.code == "NESTING_TOO_DEEP"


def test_max_depth_is_accepted():
    text = "(" * (MAX_DEPTH - 2) + "i == 1" + ")" * (MAX_DEPTH - 2)
    assert compile(text).evaluate({"i": 1}) is True
    # a leaf counts as one level: require(i) is two deep
    text = "!" * (MAX_DEPTH - 2) + "require(i)"
    assert compile(text).evaluate({"i": 1}) is (MAX_DEPTH % 2 == 0)
    with pytest.raises(SubscriptionError):
        parse("!" + text)
    text = "require(i)" + " && require(i)" * (MAX_DEPTH - 2)
    assert compile(text).evaluate({"i": 1}) is True


# -- validate(): trees from the wire --------------------------------------------

def n(kind, *children, value=None):
    return Node(kind, tuple(children), value)


NAME_X = n(Kind.NAME, value="x")
ONE = n(Kind.INT32, value=1)

WIRE_ERRORS = [
    (n(Kind.EQUALS, NAME_X), "PARSE_ERROR"),
    (n(Kind.EQUALS, NAME_X, ONE, ONE), "PARSE_ERROR"),
    (n(Kind.NOT), "PARSE_ERROR"),
    (n(Kind.EMPTY), "PARSE_ERROR"),
    (n(Kind.INT32, value="1"), "PARSE_ERROR"),
    (n(Kind.INT32, value=True), "PARSE_ERROR"),
    (n(Kind.NAME, value=""), "PARSE_ERROR"),
    (n(Kind.EQUALS, NAME_X, n(Kind.INT32, value=2 ** 31)), "OVERFLOW"),
    (n(Kind.EQUALS, NAME_X, n(Kind.INT64, value=2 ** 63)), "OVERFLOW"),
    (n(Kind.EQUALS, NAME_X, n(Kind.REAL64, value=float("inf"))), "OVERFLOW"),
    (n(Kind.EQUALS, NAME_X, n(Kind.REAL64, value=float("nan"))), "OVERFLOW"),
    (n(Kind.EQUALS, ONE, ONE), "EXP_IS_TRIVIAL"),
    (n(Kind.OR, n(Kind.FUNC_REQUIRE, NAME_X), NAME_X), "TYPE_MISMATCH"),
    (n(Kind.FUNC_REQUIRE), "TOO_FEW_ARGS"),
    (n(Kind.FUNC_REGEX, NAME_X, n(Kind.STRING, value="(")), "INVALID_REGEXP"),
    (n(Kind.FUNC_BEGINS_WITH, NAME_X, NAME_X), "TYPE_MISMATCH"),
    (NAME_X, "TYPE_MISMATCH"),
]


@pytest.mark.parametrize(("tree", "code"), WIRE_ERRORS)
def test_validate_errors(tree, code):
    with pytest.raises(SubscriptionError) as info:
        validate(tree)
    assert info.value.code == code
    assert info.value.position is None


def test_validate_deep_wire_tree_without_recursion_error():
    tree = n(Kind.FUNC_REQUIRE, NAME_X)
    for _ in range(100000):
        tree = n(Kind.NOT, tree)
    with pytest.raises(SubscriptionError) as info:
        validate(tree)
    assert info.value.code == "NESTING_TOO_DEEP"


def test_validate_accepts_nary_logic_from_the_wire():
    req = [n(Kind.FUNC_REQUIRE, n(Kind.NAME, value=v)) for v in "abc"]
    tree = n(Kind.OR, *req)
    assert validate(tree) is tree
    sub = compile(tree)
    assert sub.evaluate({"c": 1}) is True
    assert sub.evaluate({}) is None
    tree = n(Kind.XOR, *req)
    assert compile(tree).evaluate({"a": 1, "b": 1, "c": 1}) is True
    assert compile(n(Kind.AND, *req)).evaluate({"a": 1, "b": 1}) is None


def test_validate_returns_wire_tree_and_compiles_it():
    tree = n(Kind.GREATER_THAN, NAME_X, n(Kind.INT64, value=5))
    assert validate(tree) is tree
    assert compile(tree).text == "x > 5L"
    assert compile(tree).evaluate({"x": 6}) is True


def test_non_string_input_is_a_type_error():
    with pytest.raises(TypeError):
        parse(b"i == 1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compile(42)  # type: ignore[arg-type]


def test_validate_normalises_int_kinds_and_list_children():
    tree = Node(8, [Node(1, (), "x"), Node(2, (), 5)])   # type: ignore[arg-type]
    checked = validate(tree)
    assert checked == n(Kind.EQUALS, NAME_X, n(Kind.INT32, value=5))
    assert checked.kind is Kind.EQUALS and isinstance(checked.children, tuple)
    assert compile(tree).evaluate({"x": 5}) is True


@pytest.mark.parametrize("bad", [
    Node(Kind.NOT, (5,)),                                     # type: ignore[arg-type]
    Node(Kind.NOT, None),                                      # type: ignore[arg-type]
    Node(99, ()),                                              # type: ignore[arg-type]
])
def test_validate_refuses_malformed_nodes(bad):
    with pytest.raises(SubscriptionError) as info:
        validate(bad)
    assert info.value.code == "PARSE_ERROR"
