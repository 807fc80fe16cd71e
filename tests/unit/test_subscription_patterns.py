"""POSIX ERE and wildcard translation (elvin.subscription.patterns)."""

from __future__ import annotations

import time

import pytest

from elvin.subscription.patterns import (
    PatternError,
    compile_glob,
    compile_regex,
    ere_to_python,
    glob_to_python,
)

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
