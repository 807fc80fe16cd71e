"""The recursive-descent parser makes exactly lark's trees (every node,
value and offset), and leaves to lark everything lark would refuse."""

from __future__ import annotations

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark.exceptions import LarkError

from elvin.errors import SubscriptionError
from elvin.subscription import descent, parser, unparse
from elvin.subscription.ast import MAX_DEPTH
from tests.subscription_strategies import predicates

SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _empty_regex_cache():
    regex.purge()       # see test_subscription_props


def positions(node):
    """The tree with every node's position (equality ignores ``pos``)."""
    return (node.kind, type(node.value), node.value, node.pos,
            tuple(positions(c) for c in node.children))


def lark_tree(text: str):
    """What lark makes of ``text`` (None if it refuses it)."""
    try:
        result = parser._parser().parse(text)
    except (SubscriptionError, LarkError):
        return None
    return result.node if isinstance(result, parser._P) else result


def agree(text: str) -> bool:
    """Descent and lark agree on ``text``; True if descent parsed it."""
    expected = lark_tree(text)
    try:
        got = descent.parse(text)
    except descent.Unusual:
        return False
    assert expected is not None, f"descent accepted what lark refuses: {text!r}"
    assert positions(got) == positions(expected), text
    return True


CASES = [
    "a == 1", "  a==1 ", "a == 1 || b == 2 || c == 3", "(a || b) || c", "a || (b || c)",
    "a && b || c && d", "a ^^ b ^^ c && d", "!a", "!!a && !(b)", "! a == b", "-5 == x",
    "- -5 == x", "-(5) == x", "- 5 == x", "+5 == x", "~5 == x", "-+5 == x", "x == -2147483648",
    "x == 2147483648", "x == -9223372036854775808L", "x == 1.5", "x == -0.0", "x < 1 + 2 * 3",
    "x < (1 + 2) * 3", "1 - 2 + 3 == x", "a | 2 + 1 == b", "a - 1 << 2 == b", "a & b ^ c | d == 0",
    "a >>> 2 >> 1 << 3 == b", "x % 3 / 2 * 1 == 0", 'begins-with(s, "a", "b")', "require(x)",
    'fold-case(decompose(s)) == "e"', "equals(x, 1, 2.5, \"a\")", 'a\\ b == "x\\"y"',
    "'single' == s", "size(s) > 3", "nan(x)", "é == 1", "x\\(1\\) == 2", "a==1",
    "(((a)))", "((a == 1) && (b == 2)) || c", "int32(x) && !int64(y)",
    # refused or unusual: lark's (descent leaves them)
    "a < b < c", "a ==", "== a", "(a", "a)", "f(x)", "require(", "x == 010", "x == 0x1F",
    "x == 1.5e3x", "x == 12abc", "x == 1.", "a b", "a,b", "", "   ", "(a || b", "x == 99999999999",
    "x == 9223372036854775809L", "!", "a && && b", "-", "a - - - - 5 == b", "x == 1.5e400", "x == 1.5e3",
]


@pytest.mark.parametrize("text", CASES)
def test_the_same_tree_as_lark(text):
    agree(text)


def test_usual_texts_take_the_fast_way():
    parsed = [text for text in CASES[:CASES.index("a < b < c")] if agree(text)]
    assert len(parsed) == CASES.index("a < b < c")


def test_depth_limits_are_lark_s():
    deep = "a == 1"
    for _ in range(MAX_DEPTH - 2):
        deep = f"!({deep})"
    assert agree(deep)                      # MAX_DEPTH levels: fine
    too_deep = f"!({deep})"
    assert lark_tree(too_deep) is None and not agree(too_deep)
    chain = " && ".join(f"x{i} == {i}" for i in range(5000))
    assert agree(chain)                     # a long chain is one level, no recursion
    prefix = "!" * 3000 + "a"
    assert not agree(prefix)                # too deep: lark's NESTING_TOO_DEEP
    with pytest.raises(SubscriptionError, match="NESTING_TOO_DEEP"):
        parser.parse_tree(prefix)


@settings(SETTINGS, max_examples=100)     # (each example parses twice, with lark too)
@given(predicates(["a", "b"], ["s", "t"], max_leaves=6))
def test_unparsed_trees_parse_alike(tree):
    text = unparse(tree)
    assert agree(text), text


SPACES = st.sampled_from(["", " ", "  ", "\t", "\n"])
TOKENS = st.sampled_from(["a", "b", "x y", "1", "-", "+", "~", "!", "2.5", "5L", '"s"', "'t'",
                          "(", ")", ",", "==", "!=", "<", ">=", "&&", "||", "^^", "&", "|",
                          "^", "<<", ">>>", "*", "/", "%", "begins-with", "require",
                          "fold-case", "0x1", "07", "1e5"])


@SETTINGS
@given(st.lists(st.tuples(SPACES, TOKENS), min_size=1, max_size=12))
def test_token_soup_never_disagrees(pairs):
    """Random token sequences, mostly invalid: descent never accepts what
    lark refuses, and makes lark's tree when it accepts."""
    agree("".join(space + tok for space, tok in pairs))
