"""Shape-compiled subscriptions (elvin.subscription.shapes) are exactly the
ordinary ones: the same tree as the lark parser (positions included), the
same checks and errors, the same evaluation -- and subscriptions sharing a
shape never see each other's constants."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from elvin.errors import SubscriptionError
from elvin.subscription import compile as compile_one
from elvin.subscription.checker import fold
from elvin.subscription.conditions import EQ, RANGE, plan_of
from elvin.subscription.parser import parse_tree
from elvin.subscription.shapes import ShapeCompiler

NAMES = ("A", "B", "C")

# atoms with typed holes: i int32, l int64, r real64, s string, x regex-safe string
ATOMS = (
    "{n} == {i}", "{n} != {i}", "{n} < {r}", "{n} >= {l}", "{n} == {s}", "{n} != {s}",
    "begins-with({n}, {s})", "ends-with({n}, {s}, {s})", "contains({n}, {s})",
    "fold-case({n}) == {s}", "regex({n}, {x})", "wildcard({n}, {x})", "require({n})",
    "{n} + {i} > {i}", "{n} * {r} <= {i}", "equals({n}, {s}, {s})", "equals({n}, {i}, {r})",
    "({n} == {i})", "{n} == -{i}", "{n} - -{r} < 0", "size({n}) > {i}", "int32({n})",
    "!({n} == {i})", "{n} % {i} == {i}", "{n} << {i} > {l}",
)

INT32 = st.sampled_from([0, 1, 7, 42, 2147483647, 2147483648, 99999999999]) | \
    st.integers(0, 3000)
HOLES = {
    "i": INT32.map(str),
    "l": st.integers(0, 2**63).map(lambda v: f"{v}L"),
    "r": st.sampled_from(["0.0", "1.5", "2.0", "1.0e3", "3.25", "9007199254740993.0",
                          "1.0e400"]),
    "s": st.text(st.sampled_from("ab \"'\\é"), max_size=4).map(
        lambda t: '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    "x": st.text(st.sampled_from("abc"), min_size=1, max_size=3).map(lambda t: f'"{t}"'),
}


@st.composite
def shapes(draw):
    """A text template: atoms joined by &&, ||, ^^ with some parentheses."""
    def atom():
        return draw(st.sampled_from(ATOMS)).replace("{n}", draw(st.sampled_from(NAMES)))

    text = atom()
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from([" && ", " || ", " ^^ "]))
        text = f"({text}){op}{atom()}" if draw(st.booleans()) else f"{text}{op}{atom()}"
    return text


def fill(draw, template: str) -> str:
    out = []
    i = 0
    while i < len(template):
        if template[i] == "{" and template[i + 2] == "}":
            out.append(draw(HOLES[template[i + 1]]))
            i += 3
        else:
            out.append(template[i])
            i += 1
    return "".join(out)


VALUES = st.sampled_from([0, 1, 42, -7, 2147483648, 2.0, 1.5, -0.0, math.nan, math.inf,
                          "a", "ab", "é", "", b"x", "abc", "A"])
NOTIFICATIONS = st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=3)


def positions(node):
    """The tree with every node's position (equality ignores ``pos``)."""
    return (node.kind, node.value, node.pos, tuple(positions(c) for c in node.children))


def ordinary(text: str):
    try:
        return compile_one(text)
    except SubscriptionError as exc:
        return exc


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_shape_compiled_equals_individually_compiled(data):
    template = data.draw(shapes())
    compiler = ShapeCompiler()
    for _ in range(3):      # the first text teaches the shape, the others use it
        text = fill(data.draw, template)
        expected = ordinary(text)
        try:
            got = compiler.compile(text)
        except SubscriptionError as exc:
            assert isinstance(expected, SubscriptionError), (text, exc)
            assert (exc.code, exc.position, exc.message) == \
                (expected.code, expected.position, expected.message)
            continue
        assert not isinstance(expected, SubscriptionError), (text, expected)
        assert positions(got.ast) == positions(parse_tree(text)), text
        if got.index is not None:       # the shape's analysis, finalised: as the tree's own
            assert got.index == plan_of(fold(got.ast)), text
        for attrs in data.draw(st.lists(NOTIFICATIONS, min_size=1, max_size=6)):
            assert got.evaluate(attrs) is expected.evaluate(attrs), (text, attrs)
            assert got.matches(attrs) is expected.matches(attrs), (text, attrs)


def test_subscriptions_of_one_shape_keep_their_own_constants():
    compiler = ShapeCompiler()
    subs = [compiler.compile(f'Group == "g{i}" && Level > {i}') for i in range(50)]
    assert compiler.fast == 50 and len(compiler) == 1
    for i, sub in enumerate(subs):
        assert sub.matches({"Group": f"g{i}", "Level": i + 1})
        assert not sub.matches({"Group": f"g{i}", "Level": i})
        assert not sub.matches({"Group": f"g{i + 1}", "Level": 1000})
        # the shape's index analysis, with this subscription's constants
        assert sub.index == (((EQ, "Group", (f"g{i}",)), (RANGE, "Level", float(i), math.inf)),)


def test_pattern_subscriptions_of_one_shape_share_their_code():
    """regex() and wildcard() subscriptions of one shape share one compiled
    code (each gets its own matcher as a parameter): code per subscription
    cost ~3.5 KB each."""
    compiler = ShapeCompiler()
    for template, hit, miss in (
            ('regex(Message, "^alert-{}[0-9]+$") && Level > 2', "alert-{}7", "alert-{}x"),
            ('wildcard(File, "*.{}") || Kind == "x"', "a.{}", "a.{}z")):
        subs = [compiler.compile(template.format(i)) for i in range(20)]
        assert len({id(sub.matches.__code__) for sub in subs}) == 1     # one object
        name = "Message" if "Message" in template else "File"
        for i, sub in enumerate(subs):
            assert sub.evaluate({name: hit.format(i), "Level": 3, "Kind": "y"}) is True
            assert sub.evaluate({name: miss.format(i), "Level": 3, "Kind": "y"}) is False
            assert sub.evaluate({name: hit.format(i + 1), "Level": 3, "Kind": "y"}) is False


def test_literal_free_parts_of_a_shape_are_shared_between_subscriptions():
    """``require(Message)`` (and the name ``Group``) are the same nodes, at
    the same positions, in every subscription of the shape that places them
    alike: one copy in memory, not one per subscription."""
    compiler = ShapeCompiler()
    a, b, c = (compiler.compile(f'Group == "{g}" && require(Message)')
               for g in ("g1", "g2", "g33"))
    assert a.ast.children[1] is b.ast.children[1]
    assert a.ast.children[0].children[0] is b.ast.children[0].children[0] \
        is c.ast.children[0].children[0]
    assert c.ast.children[1] is not a.ast.children[1]          # placed further on
    assert positions(c.ast) == positions(parse_tree('Group == "g33" && require(Message)'))


def test_a_subscriptions_constants_cost_no_closure_cells():
    """A shape's code takes each subscription's constants as defaults of its
    functions (a closure cell per constant per subscription cost 40 bytes),
    and a pattern's matcher is built once for both polarities."""
    from elvin.subscription.compiler import generate

    compiler = ShapeCompiler()
    for text in ('Price * 2 > 4 && Volume - 10 <= 12', 'regex(Message, "^a-1[0-9]+$")'):
        compiler.compile(text)
        sub = compiler.compile(text.replace("1", "3"))
        assert sub.matches.__closure__ is None, text
    matchers: dict = {}
    generate(parse_tree('regex(x, "a+") && !wildcard(y, "b*") || regex(x, "a+")'),
             matchers=matchers)
    assert sorted(kind.name for kind, _ in matchers.values()) == ["FUNC_REGEX",
                                                                  "FUNC_WILDCARD"]


def test_a_known_spelling_is_matched_without_tokenising_but_not_across_token_classes():
    """A text spelled as a known one but for its literals skips the
    tokeniser: the result is still exactly the ordinary one, including for
    literals of another class (5L, 5.0, 1.5e+3, other quotes)."""
    compiler = ShapeCompiler()
    compiler.compile('x == 5 && y == "a" && z > 1.5')
    notes = [{"x": 5, "y": "a", "z": 2.0}, {"x": 50, "y": "", "z": 1e4}, {"x": 5}]
    for text in ('x == 6 && y == "b" && z > 2.5', 'x == 5L && y == "a" && z > 1.5',
                 'x == 5 && y == "a\\"b" && z > 1.5e+3', "x == 5 && y == 'a' && z > 1.5",
                 'x == 50 && y == "" && z > 15.', 'x == 5.0 && y == "a" && z > 1',
                 'x == 5x && y == "a" && z > 1.5', 'x == 2147483648 && y == "a" && z > 1.5'):
        expected = ordinary(text)
        try:
            got = compiler.compile(text)
        except SubscriptionError as exc:
            assert isinstance(expected, SubscriptionError), text
            assert (exc.code, exc.position) == (expected.code, expected.position), text
            continue
        assert not isinstance(expected, SubscriptionError), text
        assert positions(got.ast) == positions(parse_tree(text)), text
        for attrs in notes:
            assert got.evaluate(attrs) is expected.evaluate(attrs), (text, attrs)
    assert compiler.fast >= 4


def test_a_bad_constant_in_a_known_shape_gets_the_ordinary_error():
    compiler = ShapeCompiler()
    compiler.compile("x == 5 && regex(y, \"a\")")
    for text in ("x == 2147483648 && regex(y, \"a\")", "x == 5 && regex(y, \"(\")"):
        try:
            compiler.compile(text)
        except SubscriptionError as exc:
            expected = ordinary(text)
            assert (exc.code, exc.position) == (expected.code, expected.position)
        else:
            raise AssertionError(f"{text} accepted")


def test_the_shape_cache_is_bounded():
    compiler = ShapeCompiler(max_shapes=10)
    for i in range(30):
        compiler.compile(f"A{i} == 1")
    assert len(compiler) == 10


def test_tokenise_refuses_text_with_characters_it_does_not_know():
    """Anywhere in the text (start, middle, end) an unknown character sends
    the text the ordinary way, where lark says what is wrong with it."""
    from elvin.subscription.shapes import tokenise

    for text in ("`a == 1", "a == ` 1", "a == 1 `", "a == 1 `  ", "", "   "):
        assert tokenise(text) is None, text
    key, starts, texts, literals = tokenise('  a == "x"  ')  # type: ignore[misc]
    assert texts == ["a", "==", '"x"'] and starts == [2, 4, 7] and literals == [2]
