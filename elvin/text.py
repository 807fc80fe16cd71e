"""The text form of notifications that ``ec`` prints and ``ep`` reads.

This is the format of Avis's command line tools, made to round-trip exactly::

    $time 2008-07-10T11:51:08.729+0930
    Greeting: "hello world"
    Number:   42
    Long:     1234L
    Real:     3.1415
    Opaque:   [de ed be ef f0 0d]
    ---

The module is sans-IO: it turns text into notifications and back, and never
touches files, sockets or event loops.

Lines
-----
* One ``Name: value`` attribute per line. Whitespace around the name, and
  between the colon and the value, is ignored.
* A line that is ``---`` (surrounding whitespace allowed) ends a notification.
  A final notification without ``---`` at the end of the input is still
  returned; a notification with no attributes is skipped silently.
* Blank lines are ignored. So are lines whose first non-blank character is
  ``#`` (comments) or ``$`` (directives such as ``ec``'s ``$time``).
* Lines end at ``\\n`` only; a ``\\r`` just before it is dropped, so CRLF input
  reads fine. Other line separators (``\\r`` alone, U+2028...) are ordinary
  characters. Callers reading a file should therefore open it with
  ``newline="\\n"`` so that Python does not turn a ``\\r`` inside a string
  into a line break (``io.TextIOWrapper(sys.stdin.buffer, newline="\\n")``).
* Two attributes with the same name in one notification are an error.

Escapes
-------
A backslash makes the next character literal, everywhere, as in Avis: ``\\x``
means ``x`` for every ``x``, including a newline. There are no C-style
escapes: ``\\n`` is the letter ``n``.

* Names extend to the first unescaped ``:``. On output, ``:``, ``\\``,
  newlines, the leading and trailing whitespace characters, and a leading
  ``#`` or ``$`` are escaped; on input any character may be escaped.
* Strings are in double quotes; single quotes are accepted on input. On
  output only ``"``, ``\\`` and the newline are escaped. A newline in a
  string or name is written as a backslash at the end of the line, the
  attribute carrying on on the next line, so a physical line inside an
  attribute never reads as ``---``, a comment or a directive. For
  compatibility with Avis's ``ec``, which prints newlines in strings raw, an
  unescaped newline inside a quoted string is accepted too (but a ``---``
  line reached inside a string is reported as an unterminated string).
* Avis's ``ec`` does not escape backslashes in strings, so its output for a
  string holding a backslash reads back without that backslash; this module
  escapes them, so its own output always reads back exactly.

Values
------
=========  ===========================  =====================================
type       written                      also read
=========  ===========================  =====================================
int32      ``42``, ``-7``               ``+7``, hex ``0x2a``, ``-0x2A``
int64      ``1234L``, ``-5L``           ``1234l``, ``0x2aL``
real64     ``3.1415``, ``1.0e+300``,    ``1E5``, ``.5``, ``5.``, ``nan``,
           ``NaN``, ``Infinity``,       ``inf``, ``-inf`` (any case)
           ``-Infinity``
string     ``"say \\"hi\\""``            ``'single quoted'``
opaque     ``[de ad be ef]``, ``[]``    ``[DEADBEEF]``, ``[de adbe ef]``
=========  ===========================  =====================================

Reals are always written with a decimal point or an exponent (the shortest
form that reads back as the same float, with ``.0`` added to a bare mantissa
so that Java's parser reads it too), and reals are always read as real64, so
``3.0`` never comes back as an int. NaN payloads and the sign of a NaN are
not kept. A real too large for real64 (``1e999``) is an error, not infinity.
An integer without ``L`` that does not fit in int32 is an error, not an
int64; an integer outside int64 is an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping

from elvin.errors import ElvinError
from elvin.values import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    ElvinType,
    Int64,
    Value,
    check_name,
    check_value,
)

__all__ = [
    "NotificationReader",
    "TextFormatError",
    "format_name",
    "format_notification",
    "format_value",
    "parse_notifications",
    "parse_value",
]

TERMINATOR = "---"


class TextFormatError(ElvinError, ValueError):
    """Text that is not a valid notification or value.

    ``line`` and ``column`` count from 1 (columns in characters); ``message``
    is the bare description, ``str()`` is ``"line 3, column 9: message"``.
    """

    def __init__(self, message: str, line: int, column: int) -> None:
        self.message = message
        self.line = line
        self.column = column
        super().__init__(f"line {line}, column {column}: {message}")

    def __reduce__(self):  # keep pickling (and so multiprocessing) working
        return (type(self), (self.message, self.line, self.column))


# --------------------------------------------------------------------------
# Output


def format_value(value: Value) -> str:
    """The text form of one value; ``TypeError``/``ValueError`` if it is not one."""
    kind = check_value("value", value)
    if kind is ElvinType.INT32:
        return str(int(value))
    if kind is ElvinType.INT64:
        return f"{int(value)}L"
    if kind is ElvinType.REAL64:
        return _format_real(float(value))
    if kind is ElvinType.STRING:
        return _format_string(str(value))
    return "[" + bytes(value).hex(" ") + "]"  # type: ignore[arg-type]  # the remaining kind is OPAQUE: a buffer


def _format_real(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        # repr gives "1e+300" or (never in practice) a bare integer; make it
        # unmistakably a real, in a form Java's Double.parseDouble reads too.
        mantissa += ".0"
    return mantissa + e + exponent


def _format_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\\n")
    return f'"{escaped}"'


def format_name(name: str) -> str:
    """An attribute name escaped so that it reads back as itself."""
    check_name(name)
    size = len(name)
    lead = 0
    while lead < size and name[lead].isspace():
        lead += 1
    trail = size
    while trail > lead and name[trail - 1].isspace():
        trail -= 1
    out: list[str] = []
    for index, char in enumerate(name):
        if char in ":\\\n" or index < lead or index >= trail or (index == 0 and char in "#$"):
            out.append("\\")
        out.append(char)
    return "".join(out)


def format_notification(attributes: Mapping[str, Value]) -> str:
    """``Name: value`` lines, each ending in ``\\n``, without the ``---`` line.

    The caller adds ``---`` (and ``ec``'s ``$time`` line). An empty mapping
    gives the empty string. Bad names or values raise ``TypeError`` or
    ``ValueError`` naming the attribute.
    """
    lines = []
    for name, value in attributes.items():
        check_value(name, value)
        lines.append(f"{format_name(name)}: {format_value(value)}\n")
    return "".join(lines)


# --------------------------------------------------------------------------
# Input

_INT_RE = re.compile(r"([+-]?)(?:0[xX]([0-9a-fA-F]+)|([0-9]+))([lL]?)")
_REAL_RE = re.compile(
    r"[+-]?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)"
)
_SPECIAL_REAL_RE = re.compile(r"([+-]?)(nan|inf|infinity)", re.IGNORECASE)
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class _Incomplete(Exception):
    """The text ran out inside a string or after a backslash.

    More lines may complete it; if none come, ``error`` is what to report.
    """

    def __init__(self, error: TextFormatError) -> None:
        super().__init__(error)
        self.error = error


class _Scanner:
    """Positions in a logical line made of physical lines joined by ``\\n``."""

    def __init__(self, text: str, first_line: int) -> None:
        self.text = text
        self.first_line = first_line

    def error(self, message: str, index: int) -> TextFormatError:
        line = self.first_line + self.text.count("\n", 0, index)
        column = index - (self.text.rfind("\n", 0, index) + 1) + 1
        return TextFormatError(message, line, column)

    def skip_space(self, index: int) -> int:
        text = self.text
        while index < len(text) and text[index].isspace():
            index += 1
        return index

    # -- values ------------------------------------------------------------

    def value(self, index: int) -> tuple[Value, int]:
        """Read the value starting at ``index`` (after any whitespace)."""
        text = self.text
        index = self.skip_space(index)
        if index >= len(text):
            raise self.error("missing value", index)
        char = text[index]
        if char in "\"'":
            return self.string(index)
        if char == "[":
            return self.opaque(index)
        return self.number(index)

    def string(self, start: int) -> tuple[str, int]:
        text = self.text
        quote = text[start]
        chars: list[str] = []
        index = start + 1
        while True:
            if index >= len(text):
                raise _Incomplete(self.error("unterminated string", start))
            char = text[index]
            if char == "\\":
                if index + 1 >= len(text):
                    raise _Incomplete(self.error("unterminated string", start))
                index += 1
                char = text[index]
            elif char == quote:
                return "".join(chars), index + 1
            if char == "\x00":
                raise self.error("strings may not contain NUL", index)
            chars.append(char)
            index += 1

    def opaque(self, start: int) -> tuple[bytes, int]:
        text = self.text
        hex_digits: list[str] = []
        index = start + 1
        run_start = -1  # index of the first digit of the current run, or -1
        while True:
            char = text[index] if index < len(text) else ""
            if char in ("", "\n"):
                raise self.error("unterminated opaque value (missing ']')", start)
            if char in _HEX_DIGITS:
                if run_start < 0:
                    run_start = index
                hex_digits.append(char)
            elif char.isspace() or char == "]":
                if run_start >= 0 and (index - run_start) % 2:
                    raise self.error(
                        "odd number of hex digits in opaque value (write each byte as two digits)",
                        run_start,
                    )
                run_start = -1
                if char == "]":
                    return bytes.fromhex("".join(hex_digits)), index + 1
            else:
                raise self.error(f"invalid character {char!r} in opaque value", index)
            index += 1

    def number(self, start: int) -> tuple[Value, int]:
        text = self.text
        end = start
        while end < len(text) and not text[end].isspace():
            end += 1
        token = text[start:end]
        match = _INT_RE.fullmatch(token)
        if match:
            sign, hex_digits, dec_digits, suffix = match.groups()
            number = int(hex_digits, 16) if hex_digits else int(dec_digits)
            if sign == "-":
                number = -number
            if suffix:
                if not INT64_MIN <= number <= INT64_MAX:
                    raise self.error(f"integer {token} does not fit in int64", start)
                return Int64(number), end
            if not INT32_MIN <= number <= INT32_MAX:
                raise self.error(
                    f"integer {token} does not fit in int32: use the L suffix for int64",
                    start,
                )
            return number, end
        if _REAL_RE.fullmatch(token):
            real = float(token)
            if math.isinf(real):
                raise self.error(f"real {token} is too large for real64", start)
            return real, end
        match = _SPECIAL_REAL_RE.fullmatch(token)
        if match:
            sign, word = match.groups()
            if word.lower() == "nan":
                return math.nan, end
            return (-math.inf if sign == "-" else math.inf), end
        raise self.error(self._bad_value_message(token), start)

    @staticmethod
    def _bad_value_message(token: str) -> str:
        if token[:1].isalpha() or token[:1] == "_":
            return f"invalid value {token!r}: strings must be in double quotes"
        if token[-1:] in "lL" and _REAL_RE.fullmatch(token[:-1]):
            return f"invalid value {token!r}: the L suffix is only for integers"
        return f"invalid value {token!r}"

    # -- attribute lines ---------------------------------------------------

    def attribute(self) -> tuple[str, Value, int]:
        """Read ``Name: value``; returns name, value and the name's index."""
        text = self.text
        index = self.skip_space(0)
        name_start = index
        chars: list[tuple[str, bool]] = []
        while True:
            if index >= len(text) or text[index] == "\n":
                raise self.error("missing ':' after attribute name", index)
            char = text[index]
            if char == "\\":
                if index + 1 >= len(text):
                    raise _Incomplete(
                        self.error(
                            "attribute name ends with a backslash and no line follows", index
                        )
                    )
                chars.append((text[index + 1], True))
                index += 2
                continue
            if char == ":":
                break
            chars.append((char, False))
            index += 1
        while chars and not chars[-1][1] and chars[-1][0].isspace():
            chars.pop()
        if not chars:
            raise self.error("empty attribute name", index)
        name = "".join(char for char, _ in chars)
        if "\x00" in name:
            raise self.error("attribute names may not contain NUL", name_start)
        value, end = self.value(index + 1)
        end = self.skip_space(end)
        if end < len(text):
            raise self.error("unexpected text after the value", end)
        return name, value, name_start


def parse_value(text: str) -> Value:
    """The value written in ``text`` (surrounding whitespace allowed).

    Raises ``TextFormatError`` with a line and column inside ``text``.
    """
    scanner = _Scanner(text, 1)
    try:
        value, end = scanner.value(0)
    except _Incomplete as incomplete:
        raise incomplete.error from None
    end = scanner.skip_space(end)
    if end < len(text):
        raise scanner.error("unexpected text after the value", end)
    return value


class NotificationReader:
    """Reads notifications one line at a time, e.g. for ``ep`` on stdin.

    ``feed(line)`` returns the notification that the line completes (a
    ``---`` line), else ``None``; at the end of the input, ``finish()``
    returns the last notification if it had no ``---``. ``read(lines)`` does
    both for an iterable of lines and yields the notifications.

    Errors raise ``TextFormatError`` with the line number counted over all
    lines fed (starting at ``first_line``). The reader stays usable after
    an error: the rest of the bad notification, up to its ``---``, is
    skipped, so one malformed notification does not stop a stream.
    """

    def __init__(self, first_line: int = 1) -> None:
        self.line_number = first_line - 1  # the last line fed
        self._attributes: dict[str, Value] = {}
        self._name_lines: dict[str, int] = {}
        self._pending: list[str] = []  # physical lines of an unfinished attribute
        self._pending_line = 0
        self._pending_error: TextFormatError | None = None
        self._skipping = False

    @property
    def in_notification(self) -> bool:
        """True when lines of a notification not yet returned have been read."""
        return bool(self._attributes or self._pending or self._skipping)

    def feed(self, line: str) -> dict[str, Value] | None:
        self.line_number += 1
        if line.endswith("\n"):
            line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
        if "\n" in line:
            raise ValueError("NotificationReader.feed takes one line at a time")
        stripped = line.strip()
        if self._pending:
            if stripped == TERMINATOR:
                error = self._pending_error
                self._reset()
                assert error is not None
                raise error
            self._pending.append(line)
            self._parse_pending()
            return None
        if stripped == TERMINATOR:
            if self._skipping:
                self._reset()
                return None
            notification = self._attributes
            self._reset()
            return notification or None
        if self._skipping or not stripped or stripped[0] in "#$":
            return None
        self._pending = [line]
        self._pending_line = self.line_number
        self._parse_pending()
        return None

    def finish(self) -> dict[str, Value] | None:
        """End of input: the unterminated last notification, if any."""
        error = self._pending_error if self._pending else None
        skipping = self._skipping
        notification = self._attributes
        self._reset()
        if error is not None:
            raise error
        if skipping:
            return None
        return notification or None

    def read(self, lines: Iterable[str]) -> Iterator[dict[str, Value]]:
        """Feed every line, then finish; yields each complete notification."""
        for line in lines:
            notification = self.feed(line)
            if notification is not None:
                yield notification
        notification = self.finish()
        if notification is not None:
            yield notification

    def _reset(self) -> None:
        self._attributes = {}
        self._name_lines = {}
        self._pending = []
        self._pending_error = None
        self._skipping = False

    def _parse_pending(self) -> None:
        scanner = _Scanner("\n".join(self._pending), self._pending_line)
        try:
            name, value, name_start = scanner.attribute()
        except _Incomplete as incomplete:
            self._pending_error = incomplete.error
            return None
        except TextFormatError:
            self._fail()
            raise
        first = self._name_lines.get(name)
        if first is not None:
            error = scanner.error(
                f"duplicate attribute {name!r} (first given on line {first})", name_start
            )
            self._fail()
            raise error
        self._attributes[name] = value
        self._name_lines[name] = self._pending_line
        self._pending = []
        self._pending_error = None
        return None

    def _fail(self) -> None:
        self._reset()
        self._skipping = True


def parse_notifications(text_or_lines: str | Iterable[str]) -> list[dict[str, Value]]:
    """All the notifications in a text, or in an iterable of lines.

    A string is split at ``\\n`` only. Raises ``TextFormatError`` at the
    first error.
    """
    if isinstance(text_or_lines, str):
        lines = text_or_lines.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
    else:
        lines = text_or_lines  # type: ignore[assignment]  # any iterable of lines
    return list(NotificationReader().read(lines))
