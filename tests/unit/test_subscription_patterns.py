"""POSIX ERE and wildcard translation (elvin.subscription.patterns)."""

from __future__ import annotations

import re
import sys
import time

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from elvin.subscription import compile, parse
from elvin.subscription import patterns as patterns_module
from elvin.subscription.patterns import (
    PatternError,
    compile_glob,
    compile_regex,
    engine_pattern,
    ere_to_python,
    glob_matcher,
    glob_to_python,
    regex_matcher,
)
from elvin.subscription.reference import evaluate as reference

# (ERE, value, matches?) -- search semantics: anywhere in the value
REGEX_CASES = [
    ("ell", "Hello", True), ("^ell", "Hello", False), ("^H", "Hello", True),
    ("o$", "Hello", True), ("l$", "Hello", False), ("a$", "a\n", False), ("a.$", "a\n", True),
    ("a.b", "a\nb", True), ("^a|b$", "xb", True), ("(^a)|(b$)", "ax", True),
    ("a|b", "c", False), ("(ab)+", "xababx", True), ("^(ab)+$", "abab", True),
    ("^(ab)+$", "aba", False), ("a?b", "b", True), ("a{2}", "a", False),
    ("a{2}", "xaax", True), ("^a{2,3}$", "aaaa", False), ("^a{2,}$", "aaaa", True),
    ("^a{0,1}$", "", True), ("x{", "x{", True), ("x{a}", "x{a}", True), ("a{,2}", "a{,2}", True),
    ("[abc]", "xbx", True), ("[^abc]", "abc", False), ("[]a]", "]", True), ("[^]a]", "]", False),
    ("[a-]", "-", True), ("[-a]", "-", True), ("[a-c]", "b", True), ("[a-c]", "d", False),
    ("[\\d]", "\\", True), ("[\\d]", "d", True), ("[\\d]", "5", False),
    ("[[:alpha:]]", "\u00e9", True), ("[[:alpha:]]", "5", False), ("[[:digit:]]", "5", True),
    ("[[:digit:]]", "\u0665", True), ("[[:alnum:]]", "_", False), ("[[:upper:]]", "\u00c9", True),
    ("[[:upper:]]", "\u00e9", False), ("[[:lower:]]", "\u00e9", True), ("[[:space:]]", "\t", True),
    ("[[:blank:]]", "\n", False), ("[[:blank:]]", " ", True), ("[[:punct:]]", "!", True),
    ("[[:punct:]]", "a", False), ("[[:xdigit:]]", "f", True), ("[[:xdigit:]]", "g", False),
    ("[[:cntrl:]]", "\x01", True), ("[[:print:]]", "\x01", False), ("[[:graph:]]", " ", False),
    ("[[:graph:]]", "x", True), ("[^[:digit:]]", "5", False), ("[^[:digit:]]", "x", True),
    ("[^[:digit:]x]", "x", False), ("[x[:digit:]]", "5", True), ("[[.a.]]", "a", True),
    ("[[=a=]]", "a", True), ("[[.-.]a]", "-", True),
    ("\\.", "a", False), ("\\.", ".", True), ("\\(", "(", True), ("\\\\", "\\", True),
    ("\\w+", "abc", True), ("\\d", "x", False), ("\\s", " ", True), ("\\bfoo\\b", "a foo b", True),
    ("\\<foo\\>", "afoo", False), ("\\<foo", "a foo", True), ("\\n", "\n", True),
    ("\\t", "\t", True), ("\\/", "/", True), ("a*?", "b", True), ("a+?", "b", True),
    ("a??", "", True), ("()", "x", True), ("(|a)", "x", True), ("}", "}", True), ("]", "]", True),
    ("\u00e9", "caf\u00e9", True), ("\U0001f600", "\U0001f600", True), (".", "\ud800", True),
    ("^$", "", True), ("^$", "\n", False),
]


@pytest.mark.parametrize(("pattern", "value", "expected"), REGEX_CASES)
def test_regex(pattern, value, expected):
    assert (compile_regex([pattern]).search(value) is not None) is expected, \
        ere_to_python(pattern)


@pytest.mark.parametrize(("pattern", "too_complex"), [
    ("(a", False), ("a)", False), ("*a", False), ("+", False), ("a|*", False), ("(*a)", False),
    ("[z-a]", False), ("[a", False), ("[[:alpha:]", False), ("[[:nope:]]", False),
    ("[[.ab.]]", False), ("a{3,2}", False), ("\\", False), ("\\1", False), ("\\q", False),
    ("^*", False), ("a|$+", False), ("(a+)+", True), ("(a*)*", True), ("(a|b*){2,}", True),
    ("((a+))+", True), ("a{256}", True), ("a{1,1000}", True), ("(" * 40 + ")" * 40, True),
    ("a*+", True), ("a+*", True),
])
def test_regex_errors(pattern, too_complex):
    with pytest.raises(PatternError) as info:
        compile_regex([pattern])
    assert info.value.too_complex is too_complex
    assert 0 <= info.value.offset <= len(pattern)


@pytest.mark.parametrize("pattern", ["(ab*)*", "(\\.[a-z]+)*$", "(a+b)+", "(a?)+", "(a|b)*",
                                     "a{255}", "(a{2})*"])
def test_regex_accepted(pattern):
    compile_regex([pattern])


def test_several_regexes_are_alternatives():
    rx = compile_regex(["^a", "b$"])
    assert rx.search("ax") and rx.search("xb") and not rx.search("xa")


# (glob, value, matches?) -- the whole value must match
GLOB_CASES = [
    ("*", "", True), ("*", "anything\nat all", True), ("?", "", False), ("?", "\n", True),
    ("a*", "abc", True), ("a*", "bac", False), ("*c", "abc", True), ("*b*", "abc", True),
    ("a?c", "abc", True), ("a?c", "ac", False), ("[ab]c", "bc", True), ("[!ab]c", "bc", False),
    ("[^ab]c", "xc", True), ("[a-c]", "b", True), ("[]]", "]", True), ("[!]]", "]", False),
    ("\\*", "*", True), ("\\*", "a", False), ("\\?", "?", True), ("\\[a]", "[a]", True),
    ("[\\]]", "]", True), ("[abc", "[abc", True), ("[abc", "a", False), ("abc\\", "abc\\", True),
    ("*a*a*a*b", "aaab", True), ("*a*a*a*b", "aab", False), ("**", "x", True),
    ("a**b", "ab", True), ("*[Hh]ello*", "hello sailor", True), ("H*o", "Hello", True),
    ("hello", "Hello", False), ("", "", True), ("", "a", False), ("*.txt", "a.b.txt", True),
    ("*/x", "a/b/x", True), ("\u00e9*", "\u00e9t\u00e9", True), ("[\u00e0-\u00ff]", "\u00e9", True),
]


@pytest.mark.parametrize(("pattern", "value", "expected"), GLOB_CASES)
def test_glob(pattern, value, expected):
    assert (compile_glob([pattern]).fullmatch(value) is not None) is expected, \
        glob_to_python(pattern)


def test_glob_reversed_range_is_an_error():
    with pytest.raises(PatternError):
        compile_glob(["[z-a]"])


def test_glob_never_backtracks_catastrophically():
    rx = compile_glob(["*a*a*a*a*a*a*a*a*a*a*b"])
    start = time.perf_counter()
    assert rx.fullmatch("a" * 5000) is None
    assert time.perf_counter() - start < 1.0


def test_regex_guard_blocks_textbook_redos():
    # (a+)+b would take exponential time on "aaaa...c"; it is refused instead
    with pytest.raises(PatternError) as info:
        compile_regex(["(a+)+b"])
    assert info.value.too_complex


# -- the regex module means what re means ---------------------------------------------

# characters where Python re and the regex module disagree about \w \d \s:
# superscript digits and vulgar fractions (re: \w), combining marks (regex: \w),
# U+001C..U+001F (re: \s)
EDGE_CHARS = "\u00b2\u00bd\u0301\u0300\u200d\u200c\u203f\x1c\x1f\x85\xa0\u2028" \
             "\u2160\u0665_a5 !\n\ud800"
ENGINE_PATTERNS = [case[0] for case in REGEX_CASES] + [
    "\\w", "\\W", "\\d", "\\D", "\\s", "\\S", "\\b", "\\B", "\\<", "\\>", "^\\B$", "\\Ba",
    "a\\b", "[[:alpha:]]", "[[:alnum:]]", "[[:digit:]]", "[[:space:]]", "[^[:alpha:]]",
    "[^[:alnum:]x]", "[^[:space:]]", "\\w+\\s\\d", "x\\>", "\\<x", "[\\w]", "[\\s]",
]


def _code_points(known_only: bool) -> str:
    """Every code point, or those that Python's Unicode database assigns
    (lone surrogates count: re matches them too)."""
    import unicodedata

    return "".join(c for c in map(chr, range(sys.maxunicode + 1))
                   if not known_only or unicodedata.category(c) != "Cn")


@pytest.mark.parametrize("python", ["\\d", "\\D", "\\w", "\\W", "\\s", "\\S",
                                    "[^\\W\\d_]", "[^\\W_]", "[\\s\\S]"])
def test_shorthand_classes_are_exactly_re_s(python):
    """Exactly re's meaning on every character Python's Unicode database
    knows (\\s and \\S: on every code point)."""
    every = _code_points(known_only=python not in ("\\s", "\\S"))
    ours = regex.compile(engine_pattern(python), regex.VERSION0 | regex.DOTALL)
    assert ours.findall(every) == re.findall(python, every)


def test_characters_newer_than_python_follow_regex():
    # U+10D40 GARAY DIGIT ZERO (Unicode 16) is unassigned to Python 3.11's re
    new_digit = "\U00010d40"
    assert compile_regex(["\\d"]).search(new_digit)
    assert compile_regex(["^\\w$"]).search(new_digit)


def test_spelled_shorthands_stay_small():
    # as code-point ranges one \w compiled to ~200 KB and \b to ~650 KB
    for pattern in ("\\bfoo\\b", "\\w+", "[[:alpha:]]", "[^[:alnum:]]", "\\<a\\>"):
        assert sys.getsizeof(compile_regex([pattern])) < 20000, pattern


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ENGINE_PATTERNS), st.text(alphabet=EDGE_CHARS + "abc", max_size=6))
def test_engine_agrees_with_re(pattern, value):
    """compile_regex (regex module, engine_pattern) finds a match exactly
    where Python re does with the plain translation, match positions too."""
    python = ere_to_python(pattern)
    theirs = [m.span() for m in re.finditer(python, value, re.DOTALL)]
    ours = [m.span() for m in compile_regex([pattern]).finditer(value)]
    assert ours == theirs, (pattern, value)


@pytest.mark.parametrize("pattern", ENGINE_PATTERNS)
def test_engine_agrees_with_re_on_edge_characters(pattern):
    python = re.compile(ere_to_python(pattern), re.DOTALL)
    ours = compile_regex([pattern])
    for value in ["", *EDGE_CHARS, EDGE_CHARS, "a" + EDGE_CHARS + "a", "foo bar"]:
        assert (ours.search(value) is None) == (python.search(value) is None), \
            (pattern, value)


def test_engine_pattern_leaves_escaped_backslashes_alone():
    assert engine_pattern("\\\\d") == "\\\\d"
    assert engine_pattern("a\\.b[x\\]]") == "a\\.b[x\\]]"
    assert compile_regex(["\\\\d"]).search("\\d")


# -- time limits --------------------------------------------------------------------

# (ERE, hostile value, the true answer): Python re takes seconds to years on these
PATHOLOGICAL = [
    ("(a|aa)*b", "a" * 30, False),
    ("^(a|aa)*b$", "a" * 30 + "ba", False),
    ("^(a|aa)*c", "a" * 29 + "b", False),
    ("(\\w+\\s?)*$", "a" * 29 + "!", True),
    ("^(\\w+\\s?)*$", "a" * 29 + "!", False),
    ("^([a-z]+[0-9]?)*$", "abcdefghij" * 3 + "!", False),
    ("a*a*a*a*a*a*a*a*b$", "a" * 29 + "ba", False),
]


@pytest.mark.parametrize(("pattern", "value", "answer"), PATHOLOGICAL)
def test_pathological_regex_is_bottom_or_right_and_fast(pattern, value, answer):
    sub = compile(f'regex(Message, "{pattern}")'.replace("\\", "\\\\"))
    start = time.perf_counter()
    result = sub.evaluate({"Message": value})
    matched = sub.matches({"Message": value})
    negated = compile(f'!regex(Message, "{pattern}")'.replace("\\", "\\\\"))
    opposite = negated.evaluate({"Message": value})
    elapsed = time.perf_counter() - start
    assert result in (answer, None)
    assert matched in (answer, False)
    assert opposite in (not answer, None)
    assert elapsed < 0.2 * 3, elapsed      # three evaluations, each within ~0.2 s
    assert reference(sub.ast, {"Message": value}) in (answer, None)


def _timing_out(monkeypatch):
    class Slow:
        def search(self, value, timeout=None):
            assert timeout in (patterns_module.MATCH_TIMEOUT, patterns_module._LAST_TRY)
            raise TimeoutError("regex timed out")

        fullmatch = search

    from elvin.subscription import reference as reference_module

    for module in (patterns_module, reference_module):
        monkeypatch.setattr(module, "compile_regex", lambda patterns: Slow())
        monkeypatch.setattr(module, "compile_glob", lambda patterns: Slow())


def test_timed_out_match_is_bottom(monkeypatch):
    tree = parse('regex(Message, "x") || wildcard(Subject, "y*")')
    _timing_out(monkeypatch)
    assert regex_matcher(["x"])("xxx") is None
    assert glob_matcher(["y*"])("yyy") is None
    sub = compile(tree)
    for attrs in ({"Message": "x", "Subject": "y"}, {"Message": "x"}, {}):
        assert sub.evaluate(attrs) is None
        assert sub.matches(attrs) is False
        assert reference(tree, attrs) is None
    assert compile(parse('!regex(Message, "x")')).evaluate({"Message": "x"}) is None
    # bottom || true is true
    sub = compile(parse('regex(Message, "x") || require(Other)'))
    assert sub.evaluate({"Message": "x", "Other": 1}) is True


def test_real_time_out_is_bottom():
    matcher = regex_matcher(["^(a|aa)*b$"])
    start = time.perf_counter()
    assert matcher("a" * 40 + "ba") in (None, False)
    assert time.perf_counter() - start < 0.2


def test_constant_pathological_regex_is_refused_fast():
    from elvin.errors import SubscriptionError

    start = time.perf_counter()
    with pytest.raises(SubscriptionError) as info:
        parse('regex("' + "a" * 40 + 'ba", "^(a|aa)*b$")')
    assert info.value.code == "EXP_IS_TRIVIAL"
    assert time.perf_counter() - start < 1


def test_wildcard_on_long_values_is_bounded():
    sub = compile('wildcard(Message, "*a*a*a*a*a*a*a*a*a*a*b")')
    start = time.perf_counter()
    assert sub.evaluate({"Message": "a" * 100000}) in (False, None)
    assert sub.evaluate({"Message": "a" * 1000 + "b"}) is True
    assert time.perf_counter() - start < 0.5


def test_normal_regexes_are_unchanged():
    sub = compile('regex(Subject, "^(Re|Fwd): .*chat") && !regex(USER, "[Ss]egall")')
    assert sub.evaluate({"Subject": "Re: lunch chat", "USER": "bob"}) is True
    assert sub.evaluate({"Subject": "Re: lunch chat", "USER": "Segall"}) is False
    assert sub.evaluate({"Subject": "lunch chat", "USER": "bob"}) is False
    assert sub.evaluate({"Subject": "Re: chat"}) is None
    assert sub.evaluate({"Subject": 1, "USER": "bob"}) is None


# -- the literal pre-filter -------------------------------------------------------------

def test_required_literals_examples():
    from elvin.subscription.patterns import required_literals

    assert required_literals(["[Ss]egall"]) == ("egall",)
    assert required_literals(["^(Re|Fwd): .*chat"]) == ("chat",)
    assert required_literals(["a|bc"]) == ("a", "bc")
    assert required_literals(["a|b*"]) is None
    assert required_literals(["abc?d"]) == ("ab",)
    assert required_literals(["x{2}yz", "\\.com$"]) == ("yz", ".com")
    assert required_literals(["(abc)"]) is None


ERE_PIECES = ["a", "b", "ab", "(", ")", "|", "*", "+", "?", "{2}", "{1,2}", "{", "[ab]",
              "[^a]", ".", "^", "$", "\\.", "\\n", "\\w", "\n"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(ERE_PIECES), max_size=7).map("".join),
       st.text(alphabet="ab.\n{", max_size=8))
def test_required_literals_are_required(pattern, value):
    """A value without any of the required strings never matches, so the
    matcher may answer False without running the engine."""
    from elvin.subscription.patterns import required_literals

    try:
        rx = compile_regex([pattern])
    except PatternError:
        return
    required = required_literals([pattern])
    matched = rx.search(value) is not None
    if required is not None and matched:
        assert any(r in value for r in required), (pattern, value, required)
    assert regex_matcher([pattern])(value) is matched


GLOB_PIECES = ["a", "b", "*", "?", "[ab]", "[!a]", "\\*", "[", "]", "ab"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(GLOB_PIECES), max_size=6).map("".join),
       st.text(alphabet="ab*[]", max_size=8))
def test_glob_matcher_agrees_with_fullmatch(pattern, value):
    try:
        rx = compile_glob([pattern])
    except PatternError:
        return
    assert glob_matcher([pattern])(value) is (rx.fullmatch(value) is not None)
    assert glob_matcher([pattern, "b*"])(value) is \
        (compile_glob([pattern, "b*"]).fullmatch(value) is not None)
