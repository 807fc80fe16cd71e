"""The ec/ep notification text format (elvin.text)."""

from __future__ import annotations

import math
import pickle

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from elvin.errors import ElvinError
from elvin.text import (
    NotificationReader,
    TextFormatError,
    format_name,
    format_notification,
    format_value,
    parse_notifications,
    parse_value,
)
from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64


def same(a: object, b: object) -> bool:
    """Equal value and identical Python (so Elvin) type; NaN equals NaN, 0.0 != -0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    return a == b


def same_notification(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(same(a[k], b[k]) for k in a)


# ---------------------------------------------------------------------------
# Values


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (42, "42"),
        (-7, "-7"),
        (0, "0"),
        (INT32_MAX, "2147483647"),
        (INT32_MIN, "-2147483648"),
        (INT32_MAX + 1, "2147483648L"),
        (Int64(3), "3L"),
        (Int64(-5), "-5L"),
        (Int64(INT64_MIN), "-9223372036854775808L"),
        (3.1415, "3.1415"),
        (3.0, "3.0"),
        (-0.0, "-0.0"),
        (1e300, "1.0e+300"),
        (1e-05, "1.0e-05"),
        (1.5e-300, "1.5e-300"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
        ("hello world", '"hello world"'),
        ("", '""'),
        ('say "hi"', '"say \\"hi\\""'),
        ("C:\\temp", '"C:\\\\temp"'),
        ("two\nlines", '"two\\\nlines"'),
        ("tab\there", '"tab\there"'),
        ("ünïcødé ☃", '"ünïcødé ☃"'),
        (b"\xde\xed\xbe\xef\xf0\x0d", "[de ed be ef f0 0d]"),
        (b"", "[]"),
        (b"\x00", "[00]"),
        (bytearray(b"\x01\x02"), "[01 02]"),
    ],
)
def test_format_value(value, text):
    assert format_value(value) == text
    back = parse_value(text)
    expected = bytes(value) if isinstance(value, bytearray) else value
    if type(expected) is int and not INT32_MIN <= expected <= INT32_MAX:
        expected = Int64(expected)
    assert same(back, expected)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("  42  ", 42),
        ("-7", -7),
        ("+7", 7),
        ("007", 7),
        ("0x2a", 42),
        ("0X2A", 42),
        ("-0x2a", -42),
        ("0x7fffffff", INT32_MAX),
        ("1234L", Int64(1234)),
        ("1234l", Int64(1234)),
        ("-5L", Int64(-5)),
        ("0x2aL", Int64(42)),
        ("3L", Int64(3)),
        ("9223372036854775807L", Int64(INT64_MAX)),
        ("-9223372036854775808L", Int64(INT64_MIN)),
        ("3.1415", 3.1415),
        ("3.", 3.0),
        (".5", 0.5),
        ("-2.5", -2.5),
        ("1e5", 1e5),
        ("1E5", 1e5),
        ("1.0E300", 1e300),  # Java's Double.toString, as Avis's ec prints it
        ("4.9E-324", 5e-324),
        ("1e-999", 0.0),
        ("NaN", math.nan),
        ("nan", math.nan),
        ("Infinity", math.inf),
        ("-Infinity", -math.inf),
        ("+inf", math.inf),
        ("-INF", -math.inf),
        ('"hello world"', "hello world"),
        ("'single'", "single"),
        ("'it\\'s'", "it's"),
        ("'a \"b\"'", 'a "b"'),
        ("\"a 'b'\"", "a 'b'"),
        ('"\\n"', "n"),  # Avis meaning: a backslash makes the next char literal
        ('"\\\\"', "\\"),
        ('"a\\\nb"', "a\nb"),
        ('"a\nb"', "a\nb"),  # a raw newline, as Avis's ec prints one
        ("[de ed be ef f0 0d]", b"\xde\xed\xbe\xef\xf0\x0d"),
        ("[DEEDBEEF]", b"\xde\xed\xbe\xef"),
        ("[deed be ef]", b"\xde\xed\xbe\xef"),
        ("[ de ]", b"\xde"),
        ("[]", b""),
        ("[ ]", b""),
        ("[\tde\tad\t]", b"\xde\xad"),
    ],
)
def test_parse_value(text, value):
    assert same(parse_value(text), value)


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("", 1, 1, "missing value"),
        ("   ", 1, 4, "missing value"),
        ('"abc', 1, 1, "unterminated string"),
        ('  "abc\\', 1, 3, "unterminated string"),
        ("'abc\"", 1, 1, "unterminated string"),
        ('"a\nb', 1, 1, "unterminated string"),
        ('"a\x00b"', 1, 3, "strings may not contain NUL"),
        ('"a\nb\x00"', 2, 2, "strings may not contain NUL"),
        ("2147483648", 1, 1, "does not fit in int32: use the L suffix for int64"),
        ("-2147483649", 1, 1, "use the L suffix for int64"),
        ("0x80000000", 1, 1, "use the L suffix for int64"),
        ("9223372036854775808L", 1, 1, "does not fit in int64"),
        ("-9223372036854775809L", 1, 1, "does not fit in int64"),
        ("1e999", 1, 1, "too large for real64"),
        ("-1e999", 1, 1, "too large for real64"),
        ("hello", 1, 1, "strings must be in double quotes"),
        ("1.5L", 1, 1, "the L suffix is only for integers"),
        ("1_000", 1, 1, "invalid value '1_000'"),
        ("0x", 1, 1, "invalid value"),
        ("--1", 1, 1, "invalid value"),
        ("1.2.3", 1, 1, "invalid value"),
        ("42 43", 1, 4, "unexpected text after the value"),
        ('"a" "b"', 1, 5, "unexpected text after the value"),
        ("[de ad", 1, 1, "unterminated opaque value (missing ']')"),
        ("[de\nad]", 1, 1, "unterminated opaque value"),
        ("[de a]", 1, 5, "odd number of hex digits"),
        ("[abc]", 1, 2, "odd number of hex digits"),
        ("[de, ad]", 1, 4, "invalid character ',' in opaque value"),
        ("[0xde]", 1, 3, "invalid character 'x' in opaque value"),
        ("[de]x", 1, 5, "unexpected text after the value"),
    ],
)
def test_parse_value_errors(text, line, column, message):
    with pytest.raises(TextFormatError) as info:
        parse_value(text)
    error = info.value
    assert (error.line, error.column) == (line, column)
    assert message in error.message
    assert str(error) == f"line {line}, column {column}: {error.message}"


def test_error_type():
    error = TextFormatError("unterminated string", 3, 9)
    assert str(error) == "line 3, column 9: unterminated string"
    assert isinstance(error, ElvinError)
    assert isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.message, copy.line, copy.column) == ("unterminated string", 3, 9)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (True, TypeError),
        (None, TypeError),
        ([1], TypeError),
        (2**63, ValueError),
        (-(2**63) - 1, ValueError),
        ("a\x00b", ValueError),
    ],
)
def test_format_value_rejects(value, error):
    with pytest.raises(error):
        format_value(value)


# ---------------------------------------------------------------------------
# Names and notifications


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("Greeting", "Greeting"),
        ("Presence-Protocol", "Presence-Protocol"),
        ("with space", "with space"),
        ("Name: with colon", "Name\\: with colon"),
        ("back\\slash", "back\\\\slash"),
        (" padded ", "\\ padded\\ "),
        ("\t", "\\\t"),
        ("two\nlines", "two\\\nlines"),
        ("#hash", "\\#hash"),
        ("$dollar", "\\$dollar"),
        ("a#b$c", "a#b$c"),
        ("---", "---"),
        ('"quoted"', '"quoted"'),
        ("ünïcødé", "ünïcødé"),
    ],
)
def test_format_name(name, text):
    assert format_name(name) == text
    assert parse_notifications(f"{text}: 1\n") == [{name: 1}]


def test_format_notification():
    text = format_notification(
        {
            "Greeting": "hello world",
            "Number": 42,
            "Long": Int64(1234),
            "Real": 3.1415,
            "Opaque": b"\xde\xed\xbe\xef\xf0\x0d",
        }
    )
    assert text == (
        'Greeting: "hello world"\n'
        "Number: 42\n"
        "Long: 1234L\n"
        "Real: 3.1415\n"
        "Opaque: [de ed be ef f0 0d]\n"
    )
    assert format_notification({}) == ""


@pytest.mark.parametrize(
    ("attributes", "error"),
    [
        ({"": 1}, ValueError),
        ({1: 1}, TypeError),
        ({"a\x00": 1}, ValueError),
        ({"a": True}, TypeError),
        ({"a": "b\x00"}, ValueError),
    ],
)
def test_format_notification_rejects(attributes, error):
    with pytest.raises(error):
        format_notification(attributes)


EP_EXAMPLE = """\
Greeting: "hello world"
Number:   42
Long:     1234L
Real:     3.1415
Opaque:   [de ed be ef f0 0d]
---
"""

EC_EXAMPLE = """\
$time 2008-07-10T11:51:08.729+0930
Client-Id: "0307ec7b6956d1c2b"
Distribution: "world"
Groups: "|osx|elvin|chat|aquatik|"
Presence-Info: "update"
Presence-Protocol: 1000
Status: "online"
Status-Duration: 69147
Status-Text: "Inactive"
User: "lawley@csiro"
---
$time 2008-07-10T11:51:20.155+0930
Client-Id: "8146eae7b84334da7"
Distribution: "world"
Groups: "|elvin|ticker-dev|"
Presence-Info: "update"
Presence-Protocol: 1000
Status: "unavailable"
Status-Duration: 0
Status-Text: "Do not disturb"
User: "matthew@home"
---
"""


def test_avis_ep_example():
    [notification] = parse_notifications(EP_EXAMPLE)
    assert same_notification(
        notification,
        {
            "Greeting": "hello world",
            "Number": 42,
            "Long": Int64(1234),
            "Real": 3.1415,
            "Opaque": b"\xde\xed\xbe\xef\xf0\x0d",
        },
    )


def test_avis_ec_example():
    first, second = parse_notifications(EC_EXAMPLE)
    assert first == {
        "Client-Id": "0307ec7b6956d1c2b",
        "Distribution": "world",
        "Groups": "|osx|elvin|chat|aquatik|",
        "Presence-Info": "update",
        "Presence-Protocol": 1000,
        "Status": "online",
        "Status-Duration": 69147,
        "Status-Text": "Inactive",
        "User": "lawley@csiro",
    }
    assert second["Status-Text"] == "Do not disturb"
    assert second["Status-Duration"] == 0
    assert type(second["Presence-Protocol"]) is int
    # what we print reads back the same
    again = parse_notifications("".join(format_notification(n) + "---\n" for n in (first, second)))
    assert again == [first, second]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("\n\n", []),
        ("---\n", []),
        ("---\n---\n\n---\n", []),
        ("a: 1\n", [{"a": 1}]),
        ("a: 1", [{"a": 1}]),
        ("a: 1\n---", [{"a": 1}]),
        ("a: 1\n---\nb: 2\n", [{"a": 1}, {"b": 2}]),
        ("a: 1\n---\n---\nb: 2\n---\n", [{"a": 1}, {"b": 2}]),
        ("a:1\n", [{"a": 1}]),
        ("  a  :\t 1  \n", [{"a": 1}]),
        ("a: 1\n\n   \nb: 2\n", [{"a": 1, "b": 2}]),
        ("# comment\na: 1\n  # indented comment: 2\n---\n", [{"a": 1}]),
        ("$time 2008-07-10T11:51:08.729+0930\na: 1\n$other\n", [{"a": 1}]),
        ("a: 1\r\nb: 2\r\n---\r\n", [{"a": 1, "b": 2}]),
        ("  ---  \na: 1\n", [{"a": 1}]),
        ("---: 1\n", [{"---": 1}]),
        ("a\\:b: 1\n", [{"a:b": 1}]),
        ("a\\b: 1\n", [{"ab": 1}]),
        ("\\#x: 1\n", [{"#x": 1}]),
        ("\\ a\\ : 1\n", [{" a ": 1}]),
        ("a b: 1\n", [{"a b": 1}]),
        ('a: "x:y"\n', [{"a": "x:y"}]),
        ('a: "one\\\ntwo"\n---\n', [{"a": "one\ntwo"}]),
        ('a: "one\ntwo"\n---\n', [{"a": "one\ntwo"}]),  # raw newline, as Avis prints
        (
            'a: "one\n# not a comment\n$nor a directive\n\n"\n',
            [{"a": "one\n# not a comment\n$nor a directive\n\n"}],
        ),
        ("a\\\nb: 1\n", [{"a\nb": 1}]),
        ('a: "x\\\n---\\\n"\n', [{"a": "x\n---\n"}]),
        ('a: "x\\\n---"\n', [{"a": "x\n---"}]),
    ],
)
def test_parse_notifications(text, expected):
    assert parse_notifications(text) == expected


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("a 1\n", 1, 4, "missing ':' after attribute name"),
        ("a: 1\nb 2\n", 2, 4, "missing ':'"),
        (": 1\n", 1, 1, "empty attribute name"),
        ("   : 1\n", 1, 4, "empty attribute name"),
        ("a:\n", 1, 3, "missing value"),
        ("a: 1\n\n  Number: hello\n", 3, 11, "strings must be in double quotes"),
        ('x: 1\ny: 2\nGreeting: "hello\n', 3, 11, "unterminated string"),
        ('x: 1\ny: 2\nGreeting: "hello\n---\n', 3, 11, "unterminated string"),
        ('a: "x\nmore\n', 1, 4, "unterminated string"),
        ("a: -5\nb: 2147483648\n", 2, 4, "use the L suffix for int64"),
        ("a: 99999999999999999999L\n", 1, 4, "does not fit in int64"),
        ("a: 1\nb: 2\na: 3\n", 3, 1, "duplicate attribute 'a' (first given on line 1)"),
        ("  a: 1\n  a : 2\n", 2, 3, "duplicate attribute 'a'"),
        ("a: [de ad\n", 1, 4, "unterminated opaque value"),
        ("a: [de ad] 7\n", 1, 12, "unexpected text after the value"),
        ('a: "x" y\n', 1, 8, "unexpected text after the value"),
        ('a: "one\ntwo" x\n', 2, 6, "unexpected text after the value"),
        ('a: "one\ntwo\x00"\n', 2, 4, "strings may not contain NUL"),
        ("a\\\x00: 1\n", 1, 1, "attribute names may not contain NUL"),
        ("name\\\n---\n", 1, 5, "attribute name ends with a backslash"),
        ("name\\", 1, 5, "attribute name ends with a backslash"),
    ],
)
def test_parse_notification_errors(text, line, column, message):
    with pytest.raises(TextFormatError) as info:
        parse_notifications(text)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)
    assert message in info.value.message


def test_parse_lines_iterable():
    lines = ["a: 1\n", 'b: "x\\\n', 'y"\n', "---\n", "c: 2L"]
    assert parse_notifications(lines) == [{"a": 1, "b": "x\ny"}, {"c": Int64(2)}]
    assert parse_notifications(iter(["a: 1", "---", "b: 2"])) == [{"a": 1}, {"b": 2}]


def test_only_newline_splits_lines():
    # \r, \x0b, \x1c, U+2028... are ordinary characters in strings and names
    weird = "a\rb\x0bc\x1cd\x85e\u2028f"
    text = format_notification({weird: weird})
    assert text.count("\n") == 1
    assert parse_notifications(text) == [{weird: weird}]


# ---------------------------------------------------------------------------
# The incremental reader


def test_reader_feeds_lines():
    reader = NotificationReader()
    assert not reader.in_notification
    assert reader.feed("$time 2008-07-10T11:51:08.729+0930\n") is None
    assert not reader.in_notification
    assert reader.feed("a: 1\n") is None
    assert reader.in_notification
    assert reader.feed('b: "multi\\\n') is None
    assert reader.feed('line"\n') is None
    assert reader.feed("---\n") == {"a": 1, "b": "multi\nline"}
    assert reader.line_number == 5
    assert not reader.in_notification
    assert reader.feed("---\n") is None  # empty notification skipped
    assert reader.feed("c: 3") is None
    assert reader.finish() == {"c": 3}
    assert reader.finish() is None


def test_reader_read_generator():
    reader = NotificationReader()
    out = reader.read(EC_EXAMPLE.splitlines(keepends=True))
    assert next(out)["User"] == "lawley@csiro"
    assert reader.line_number == 11  # lazily: only the first notification read
    assert next(out)["User"] == "matthew@home"
    assert list(out) == []


def test_reader_first_line():
    reader = NotificationReader(first_line=10)
    reader.feed("a: 1")
    with pytest.raises(TextFormatError) as info:
        reader.feed("b: x")
    assert info.value.line == 11


def test_reader_rejects_embedded_newline():
    with pytest.raises(ValueError):
        NotificationReader().feed("a: 1\nb: 2\n")


def test_reader_recovers_after_error():
    reader = NotificationReader()
    reader.feed("a: 1")
    with pytest.raises(TextFormatError) as info:
        reader.feed("b: oops")
    assert info.value.line == 2
    # the rest of the bad notification is skipped, errors and all
    assert reader.feed("c: also bad") is None
    assert reader.feed("---") is None
    assert reader.feed("d: 4") is None
    assert reader.feed("---") == {"d": 4}


def test_reader_recovers_after_duplicate():
    reader = NotificationReader()
    reader.feed("a: 1")
    with pytest.raises(TextFormatError, match="duplicate"):
        reader.feed("a: 2")
    assert reader.feed("---") is None
    assert reader.feed("a: 3") is None
    assert reader.finish() == {"a": 3}


def test_reader_unterminated_string_at_separator():
    reader = NotificationReader()
    reader.feed("a: 1")
    reader.feed('Greeting: "hello')
    with pytest.raises(TextFormatError) as info:
        reader.feed("---")
    assert str(info.value) == "line 2, column 11: unterminated string"
    # the --- ended the bad notification; the next one reads normally
    assert reader.feed("b: 2") is None
    assert reader.feed("---") == {"b": 2}


def test_reader_unterminated_string_at_end():
    reader = NotificationReader()
    reader.feed('a: "x')
    reader.feed("more")
    with pytest.raises(TextFormatError, match="unterminated string"):
        reader.finish()
    assert reader.finish() is None


def test_reader_error_then_end():
    reader = NotificationReader()
    with pytest.raises(TextFormatError):
        reader.feed("a: b")
    assert reader.finish() is None


# ---------------------------------------------------------------------------
# Round trips

SPECIAL = list(":\\ \t\n\r\"'#$-[]0x.L\u2028\x85")
chars = st.one_of(
    st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
    st.sampled_from(SPECIAL),
)
names = st.text(chars, min_size=1, max_size=12)
strings = st.text(chars, max_size=20)
values = st.one_of(
    st.integers(INT32_MIN, INT32_MAX),
    st.integers(INT64_MIN, INT64_MAX).map(Int64),
    st.floats(allow_nan=True, allow_infinity=True),
    strings,
    st.binary(max_size=12),
)
notifications = st.dictionaries(names, values, max_size=6)

ROUND_TRIP = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@ROUND_TRIP
@given(values)
@example(Int64(3))
@example(3)
@example(-0.0)
@example(float("nan"))
@example(1e16)
@example('"\\\n')
@example("\n---\n")
def test_value_round_trip(value):
    assert same(parse_value(format_value(value)), value)


@ROUND_TRIP
@given(st.integers(INT32_MAX + 1, INT64_MAX) | st.integers(INT64_MIN, INT32_MIN - 1))
def test_big_int_becomes_int64(number):
    assert same(parse_value(format_value(number)), Int64(number))


@ROUND_TRIP
@given(notifications)
@example({"\n---\n": "\n---\n", " #x": "\r", "$y\n": b"", "a\\": Int64(0)})
@example({"\r\n---": "\r\n---\r"})
def test_notification_round_trip(notification):
    parsed = parse_notifications(format_notification(notification) + "---\n")
    if not notification:
        assert parsed == []
    else:
        assert len(parsed) == 1
        assert same_notification(parsed[0], notification)


@ROUND_TRIP
@given(st.lists(notifications, max_size=4), st.booleans())
def test_stream_round_trip(batch, crlf):
    """Several notifications with $time lines, fed line by line (CRLF too)."""
    text = "".join(
        f"$time 2008-07-10T11:51:08.729+0930\n{format_notification(n)}---\n" for n in batch
    )
    lines = text.split("\n")
    if crlf:
        lines = [line + "\r\n" for line in lines]
    parsed = list(NotificationReader().read(lines))
    expected = [n for n in batch if n]
    assert len(parsed) == len(expected)
    for got, want in zip(parsed, expected, strict=True):
        assert same_notification(got, want)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_parse_never_crashes(text):
    """Any text either parses or raises TextFormatError, nothing else."""
    try:
        parse_notifications(text)
    except TextFormatError as error:
        assert error.line >= 1 and error.column >= 1
    try:
        parse_value(text)
    except TextFormatError as error:
        assert error.line >= 1 and error.column >= 1
