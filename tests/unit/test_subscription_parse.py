"""Parser trees, literals, names and unparse."""

from __future__ import annotations

import pytest

from elvin.subscription import Kind, Node, compile, parse, unparse
from elvin.subscription.unparse import format_real, quote_name


def name(v):
    return Node(Kind.NAME, value=v)


def i32(v):
    return Node(Kind.INT32, value=v)


def i64(v):
    return Node(Kind.INT64, value=v)


def real(v):
    return Node(Kind.REAL64, value=v)


def string(v):
    return Node(Kind.STRING, value=v)


def op(kind, *children):
    return Node(kind, tuple(children))


X = name("x")


def cmp(node):
    """``x == node`` (a valid predicate around a value expression)."""
    return op(Kind.EQUALS, X, node)


@pytest.mark.parametrize(("text", "value"), [
    ("x == 1 - 2 + 3", op(Kind.ADD, op(Kind.SUBTRACT, i32(1), i32(2)), i32(3))),
    ("x == 1 - 2 - 3", op(Kind.SUBTRACT, op(Kind.SUBTRACT, i32(1), i32(2)), i32(3))),
    ("x == 1 * 2 / 3", op(Kind.DIVIDE, op(Kind.MULTIPLY, i32(1), i32(2)), i32(3))),
    ("x == 1 + 2 * 3", op(Kind.ADD, i32(1), op(Kind.MULTIPLY, i32(2), i32(3)))),
    ("x == -2", i32(-2)),
    ("x == - 2", i32(-2)),
    ("x == -(2)", op(Kind.UNARY_MINUS, i32(2))),
    ("x == - -2", op(Kind.UNARY_MINUS, i32(-2))),
    ("x == +2", op(Kind.UNARY_PLUS, i32(2))),
    ("x == -x", op(Kind.UNARY_MINUS, X)),
    ("x == ~10", op(Kind.BIT_NEGATE, i32(10))),
    ("x == -2147483648", i32(-2147483648)),
    ("x == -9223372036854775808L", i64(-(2 ** 63))),
    ("x == -1.5", real(-1.5)),
    ("x == 1 & 2", op(Kind.BIT_AND, i32(1), i32(2))),
    ("x == 1 ^ 2", op(Kind.BIT_XOR, i32(1), i32(2))),
    ("x == 1 | 2", op(Kind.BIT_OR, i32(1), i32(2))),
    ("x == 1 << 2", op(Kind.SHIFT_LEFT, i32(1), i32(2))),
    ("x == 1 >> 2", op(Kind.SHIFT_RIGHT, i32(1), i32(2))),
    ("x == 1 >>> 2", op(Kind.LOGICAL_SHIFT_RIGHT, i32(1), i32(2))),
    ("x == (name1 & 0x0F) >> name2",
     op(Kind.SHIFT_RIGHT, op(Kind.BIT_AND, name("name1"), i32(15)), name("name2"))),
    ("x == (name1 << 2L) | name2 & 0xF0",
     op(Kind.BIT_OR, op(Kind.SHIFT_LEFT, name("name1"), i64(2)),
        op(Kind.BIT_AND, name("name2"), i32(240)))),
    # loosest to tightest: + -, * / %, << >> >>>, |, ^, & (the language page, Avis)
    ("x == 1 | 2 ^ 3 & 4 << 5 + 6 * 7",
     op(Kind.ADD, op(Kind.SHIFT_LEFT, op(Kind.BIT_OR, i32(1), op(Kind.BIT_XOR, i32(2), op(
         Kind.BIT_AND, i32(3), i32(4)))), i32(5)), op(Kind.MULTIPLY, i32(6), i32(7)))),
    ("x == 1 + 2 * 3 << 4 | 5 ^ 6 & 7",
     op(Kind.ADD, i32(1), op(Kind.MULTIPLY, i32(2), op(Kind.SHIFT_LEFT, i32(3), op(
         Kind.BIT_OR, i32(4), op(Kind.BIT_XOR, i32(5), op(Kind.BIT_AND, i32(6), i32(7)))))))),
    ("x == 052", i32(42)), ("x == 0x2a", i32(42)), ("x == -0x2a", i32(-42)),
    ("x == 0", i32(0)), ("x == 0l", i64(0)), ("x == 0xDeadBeefL", i64(0xDEADBEEF)),
    ("x == 0.0", real(0.0)), ("x == 3.4", real(3.4)), ("x == 1.2e10", real(1.2e10)),
    ("x == 1.2E10", real(1.2e10)), ("x == 1.2E+10", real(1.2e10)),
    ("x == 1.2E-10", real(1.2e-10)), ("x == 6.023e23", real(6.023e23)),
    ("x == 'a\\n'", string("an")), ("x == 'a\\\\'", string("a\\")),
    ('x == "a\\\\!"', string("a\\!")), ('x == "a\\""', string('a"')),
    ("x == \"'abc'\"", string("'abc'")), ("x == 'hello\\'there'", string("hello'there")),
    ('x == "this isn\'t a \\"number\\""', string('this isn\'t a "number"')),
    ("x == '\u00e9\U0001f600'", string("\u00e9\U0001f600")),
    ("x == 'multi\nline'", string("multi\nline")),
])
def test_value_trees(text, value):
    assert parse(text) == cmp(value)


@pytest.mark.parametrize(("text", "tree"), [
    ("hello == 1", op(Kind.EQUALS, name("hello"), i32(1))),
    ("_hello == 1", op(Kind.EQUALS, name("_hello"), i32(1))),
    ("_ == 1", op(Kind.EQUALS, name("_"), i32(1))),
    ("_1 == 1", op(Kind.EQUALS, name("_1"), i32(1))),
    ("begins-with == 'hello'", op(Kind.EQUALS, name("begins-with"), string("hello"))),
    ("int32 == 32", op(Kind.EQUALS, name("int32"), i32(32))),
    ("\\ we\\ can\\ have\\ spaces == 1", op(Kind.EQUALS, name(" we can have spaces"), i32(1))),
    ("\\1.0\\ Contents == 1", op(Kind.EQUALS, name("1.0 Contents"), i32(1))),
    ("this:is:a:test: == 1", op(Kind.EQUALS, name("this:is:a:test:"), i32(1))),
    ("pipe= > 20", op(Kind.GREATER_THAN, name("pipe="), i32(20))),
    ("the\\ pipe > 20", op(Kind.GREATER_THAN, name("the pipe"), i32(20))),
    ("a\\(b\\) == 1", op(Kind.EQUALS, name("a(b)"), i32(1))),
    ("temp > prev-temp + 5",
     op(Kind.GREATER_THAN, name("temp"), op(Kind.ADD, name("prev-temp"), i32(5)))),
    ("field1 > 2 && field2 == 'hello\\'there'",
     op(Kind.AND, op(Kind.GREATER_THAN, name("field1"), i32(2)),
        op(Kind.EQUALS, name("field2"), string("hello'there")))),
    ("(field1 != 10L || field2 < 3.2) ^^ (field3 == \"hello\")",
     op(Kind.XOR, op(Kind.OR, op(Kind.NOT_EQUALS, name("field1"), i64(10)),
                     op(Kind.LESS_THAN, name("field2"), real(3.2))),
        op(Kind.EQUALS, name("field3"), string("hello")))),
    ("size (name) > 1", op(Kind.GREATER_THAN, op(Kind.FUNC_SIZE, name("name")), i32(1))),
    ("size(name) > 1", op(Kind.GREATER_THAN, op(Kind.FUNC_SIZE, name("name")), i32(1))),
    ("require (name)", op(Kind.FUNC_REQUIRE, name("name"))),
    ("int32 (name)", op(Kind.FUNC_INT32, name("name"))),
    ("int64 (name)", op(Kind.FUNC_INT64, name("name"))),
    ("real64 (name)", op(Kind.FUNC_REAL64, name("name"))),
    ("string (name)", op(Kind.FUNC_STRING, name("name"))),
    ("opaque (name)", op(Kind.FUNC_OPAQUE, name("name"))),
    ("nan (name)", op(Kind.FUNC_NAN, name("name"))),
    ("begins-with (name, 'hello')", op(Kind.FUNC_BEGINS_WITH, name("name"), string("hello"))),
    ("ends-with (name, 'hello')", op(Kind.FUNC_ENDS_WITH, name("name"), string("hello"))),
    ("contains (name, 'hello')", op(Kind.FUNC_CONTAINS, name("name"), string("hello"))),
    ("regex (name, 'hello!+')", op(Kind.FUNC_REGEX, name("name"), string("hello!+"))),
    ("wildcard (name, 'hel*lo?')", op(Kind.FUNC_WILDCARD, name("name"), string("hel*lo?"))),
    ("fold-case (name) == 'a'",
     op(Kind.EQUALS, op(Kind.FUNC_FOLD_CASE, name("name")), string("a"))),
    ("decompose (name) == 'a'",
     op(Kind.EQUALS, op(Kind.FUNC_DECOMPOSE, name("name")), string("a"))),
    ("decompose-compat (name) == 'a'",
     op(Kind.EQUALS, op(Kind.FUNC_DECOMPOSE_COMPAT, name("name")), string("a"))),
    ("equals (name, 'hello')", op(Kind.FUNC_EQUALS, name("name"), string("hello"))),
    ("equals (name, 'hello', 42)",
     op(Kind.FUNC_EQUALS, name("name"), string("hello"), i32(42))),
    ("equals (name, 1 + 2)", op(Kind.FUNC_EQUALS, name("name"), op(Kind.ADD, i32(1), i32(2)))),
    ("a == 1 || b == 2 && c == 3",
     op(Kind.OR, op(Kind.EQUALS, name("a"), i32(1)),
        op(Kind.AND, op(Kind.EQUALS, name("b"), i32(2)), op(Kind.EQUALS, name("c"), i32(3))))),
    ("!a == 1 && b == 2",
     op(Kind.AND, op(Kind.NOT, op(Kind.EQUALS, name("a"), i32(1))),
        op(Kind.EQUALS, name("b"), i32(2)))),
    ("a == 1 || b == 2 ^^ c == 3",
     op(Kind.OR, op(Kind.EQUALS, name("a"), i32(1)),
        op(Kind.XOR, op(Kind.EQUALS, name("b"), i32(2)), op(Kind.EQUALS, name("c"), i32(3))))),
    # a chain of one logical operator is one n-ary node ...
    ("require(a) || require(b) || require(c)",
     op(Kind.OR, op(Kind.FUNC_REQUIRE, name("a")), op(Kind.FUNC_REQUIRE, name("b")),
        op(Kind.FUNC_REQUIRE, name("c")))),
    ("require(a) && require(b) && require(c) && require(d)",
     op(Kind.AND, *(op(Kind.FUNC_REQUIRE, name(v)) for v in "abcd"))),
    ("require(a) ^^ require(b) ^^ require(c)",
     op(Kind.XOR, *(op(Kind.FUNC_REQUIRE, name(v)) for v in "abc"))),
    ("require(a) || require(b) && require(c) && require(d) || require(e)",
     op(Kind.OR, op(Kind.FUNC_REQUIRE, name("a")),
        op(Kind.AND, *(op(Kind.FUNC_REQUIRE, name(v)) for v in "bcd")),
        op(Kind.FUNC_REQUIRE, name("e")))),
    # ... and parentheses close a chain
    ("(require(a) || require(b)) || require(c)",
     op(Kind.OR, op(Kind.OR, op(Kind.FUNC_REQUIRE, name("a")), op(Kind.FUNC_REQUIRE, name("b"))),
        op(Kind.FUNC_REQUIRE, name("c")))),
    ("require(a) || (require(b) || require(c)) || require(d)",
     op(Kind.OR, op(Kind.FUNC_REQUIRE, name("a")),
        op(Kind.OR, op(Kind.FUNC_REQUIRE, name("b")), op(Kind.FUNC_REQUIRE, name("c"))),
        op(Kind.FUNC_REQUIRE, name("d")))),
    ("(require(a) || require(b) || require(c))",
     op(Kind.OR, *(op(Kind.FUNC_REQUIRE, name(v)) for v in "abc"))),
])
def test_trees(text, tree):
    assert parse(text) == tree


def test_positions():
    tree = parse("  x == (1 + y)")
    assert tree.pos == 2
    assert tree.children[0].pos == 2
    assert tree.children[1].pos == 7            # the parenthesis
    assert tree.children[1].children[1].pos == 12
    assert parse("x == -5").children[1].pos == 5


def test_avis_ticker_subscriptions_parse():
    parse("(require (Message) && require (From) && "
          "(fold-case (Group) == \"matthew@home\" || "
          "fold-case (From) == \"matthew@home\")) || "
          "(require (TICKERTEXT) && require (USER) && "
          "fold-case (TICKERTAPE) == \"matthew@home\" || "
          "fold-case (USER) == \"matthew@home\")")
    parse("Presence-Protocol < 2000 && string (Groups) && string (User) && "
          "equals (Presence-Info, 'initial', 'update', 'xyz') && "
          "fold-case (User) != \"matthew@home\" && "
          "(contains (fold-case (Groups), \"|dsto|\", \"|elvin|\", \"|ticker-dev|\") || "
          "(equals (fold-case (User), \"foobar@dsto\", \"frodo@home\")))")
    parse('(TICKERTAPE == "elvin" || TICKERTAPE == "Chat") && ! regex(USER, "[Ss]egall")')
    parse('wildcard(TICKERTEXT, "*[Hh]ello*") && TIMEOUT > 5')


@pytest.mark.parametrize("ch", [chr(c) for c in range(0x21, 0x7F)
                                if chr(c) not in "\"'(),[\\]"])
def test_tricky_identifier_characters(ch):
    assert parse(f"tricky{ch}id == 1") == op(Kind.EQUALS, name(f"tricky{ch}id"), i32(1))


# -- unparse -----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "canonical"), [
    ("x == 1", "x == 1"),
    ("x==1 == 2", "x==1 == 2"),
    ("a == 1 || b == 2 && c == 3", "(a == 1) || ((b == 2) && (c == 3))"),
    ("a == 1 || b == 2 || c == 3", "(a == 1) || (b == 2) || (c == 3)"),
    ("(a == 1 || b == 2) || c == 3", "((a == 1) || (b == 2)) || (c == 3)"),
    ("x == 1 && (a == 1 || b == 2 || c == 3)", "(x == 1) && ((a == 1) || (b == 2) || (c == 3))"),
    ("a == 1 ^^ b == 2 ^^ c == 3", "(a == 1) ^^ (b == 2) ^^ (c == 3)"),
    ("x == 1 - 2 + 3", "x == ((1 - 2) + 3)"),
    ("x == -(5)", "x == -(5)"),
    ("x == - -5", "x == -(-5)"),
    ("x == -x", "x == -x"),
    ("!require(x)", "!require(x)"),
    ("!!require(x)", "!!require(x)"),
    ("! (x == 1)", "!(x == 1)"),
    ("x == 10L", "x == 10L"),
    ("x == 1.0e300", "x == 1.0e300"),
    ("x == 1.5E-7", "x == 1.5e-7"),
    ("x == 0x10", "x == 16"),
    ("x == 'it\\'s'", 'x == "it\'s"'),
    ("x == \"a\\\\b\\\"c\"", 'x == "a\\\\b\\"c"'),
    ("\\1.0\\ Contents == 1", "\\1.0\\ Contents == 1"),
    ("a\\(b\\) == 1", "a\\(b\\) == 1"),
    ("size (name) > 3", "size(name) > 3"),
    ("equals (name, 'a', 1 + 2)", 'equals(name, "a", 1 + 2)'),
    ("contains(fold-case(g), 'a', 'b')", 'contains(fold-case(g), "a", "b")'),
])
def test_unparse_canonical(text, canonical):
    tree = parse(text)
    assert unparse(tree) == canonical
    assert parse(canonical) == tree


@pytest.mark.parametrize(("value", "text"), [
    (1e300, "1.0e300"), (1e-300, "1.0e-300"), (1.5, "1.5"), (0.0, "0.0"), (-0.0, "-0.0"),
    (1e16, "1.0e16"), (1.7976931348623157e308, "1.7976931348623157e308"),
    (5e-324, "5.0e-324"), (123456789.123, "123456789.123"), (0.1, "0.1"),
])
def test_format_real(value, text):
    assert format_real(value) == text
    assert parse(f"x == {text}") == cmp(real(value))


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_format_real_refuses_non_finite(bad):
    with pytest.raises(ValueError):
        format_real(bad)


@pytest.mark.parametrize("attr", [
    "a", "_", "1", "1.0 Contents", " ", "a b", "(", ")", ",", "[x]", "'", '"', "\\",
    "a\\b", "=", "==", "a==b", "-x", "\u00e9t\u00e9", "\u00a0", "tab\there", "new\nline",
    "begins-with", "require", "\U0001f600", "x\u2028y",
])
def test_quote_name_round_trips(attr):
    tree = op(Kind.EQUALS, name(attr), i32(1))
    text = unparse(tree)
    assert parse(text) == tree
    assert quote_name(attr)


def test_function_named_attribute_followed_by_paren_is_a_call():
    # `require (x)` is the function: an attribute called require needs escaping
    # only when a parenthesis follows, which unparse never writes after a name
    assert parse("require == 1") == op(Kind.EQUALS, name("require"), i32(1))


def test_compiled_keeps_text_and_ast():
    sub = compile("x > 2 + 3")
    assert sub.text == "x > 2 + 3"
    assert sub.ast == op(Kind.GREATER_THAN, X, op(Kind.ADD, i32(2), i32(3)))
    assert "5" in sub.source and "2 + 3" not in sub.source   # folded in the evaluator
    assert repr(sub) == "CompiledSubscription('x > 2 + 3')"
    assert sub({"x": 6}) is True
