"""POSIX extended regular expressions and wildcards, mapped onto Python ``re``.

``regex(attr, "pattern")`` takes POSIX 1003.2 extended regular expressions
(ERE, the spec's "POSIX 1003.2 regular expressions with UTR #18 Level 1
compatible extensions for Unicode"). Python's ``re`` is a different dialect,
so each pattern is translated, never handed over as it is:

* Matching is a *search*: the pattern may match anywhere in the value, as
  POSIX ``regexec`` and Avis (``Matcher.find()``) do; anchor with ``^``/``$``.
  Only whether a match exists matters, so POSIX's leftmost-longest rule and
  Python's leftmost-first rule give the same answer.
* ``.`` matches any character, newline included (POSIX without REG_NEWLINE);
  ``^`` matches only at the start and ``$`` only at the very end (Python's
  ``$`` would also match before a final newline; we emit ``\\Z``).
* Groups ``( )`` do not capture. Back-references (``\\1``) are not part of
  ERE and are refused (INVALID_REGEXP).
* Inside a bracket expression a backslash is an ordinary character, as POSIX
  says (``[\\d]`` is backslash or ``d``); ``]`` first is literal, ``-`` first or
  last is literal; ``[:alpha:]``, ``[:digit:]``, ``[:alnum:]``, ``[:upper:]``,
  ``[:lower:]``, ``[:space:]``, ``[:blank:]``, ``[:punct:]``, ``[:print:]``,
  ``[:graph:]``, ``[:cntrl:]``, ``[:xdigit:]`` are translated to their Unicode
  (UTR #18) meaning; ``[.c.]`` and ``[=c=]`` are accepted for a single
  character c only.
* ``{n}``, ``{n,}``, ``{n,m}`` are intervals (bounds up to RE_DUP_MAX = 255);
  a ``{`` that does not start a valid interval is a literal, as in GNU.
  Stacked quantifiers (``a*+``) mean ``(a*)+`` as in ERE -- Python would read
  ``*+`` as possessive and ``*?`` as lazy, so they are wrapped in a group.
* Outside brackets, ``\\`` before a special character makes it literal; the
  common extensions ``\\d \\D \\w \\W \\s \\S \\b \\B \\< \\>`` and the control
  escapes ``\\n \\t \\r \\f \\v`` are accepted (GNU/Java users expect them);
  any other escaped letter or digit is refused. Remember that the string
  literal already consumed one level of backslashes: write ``"a\\\\.b"``.
* A quantifier with nothing to repeat and an unmatched ``(`` or ``)`` are
  errors (POSIX leaves them undefined).
* Python's ``re`` backtracks, so a pattern like ``(a*)*b`` can take time
  exponential in the length of the value. Repeating (``*``, ``+``, ``{n,m}``
  with m > 1) a group that is nothing but an unbounded repetition
  (``(a+)+``, ``(x*)*``, ``(a|b*){2,}``) is refused with REGEXP_TOO_COMPLEX,
  intervals are capped at 255 and groups nest at most 32 deep. This catches
  the textbook cases only: ``(a|aa)*b`` or ``(\\w+\\s?)*$`` still backtrack
  exponentially on hostile values. A linear-time engine (RE2) would close
  the gap; it is not a dependency of the project today.

``wildcard(attr, "glob")`` patterns match the whole value: ``*`` any
sequence (``/`` and newlines included), ``?`` one character, ``[...]`` a set
(``!`` or ``^`` first negates, ``]`` first is literal, ``a-z`` ranges,
``\\`` escapes inside too), ``\\c`` the character c. An unterminated ``[`` is a
literal ``[``, as in shells and ``fnmatch``. Each ``*`` becomes an atomic
lazy group, as CPython's own ``fnmatch`` does, so matching never
backtracks catastrophically.
"""

from __future__ import annotations

import re
import sys
import unicodedata

__all__ = ["PatternError", "ere_to_python", "glob_to_python", "compile_regex",
           "compile_glob"]

RE_DUP_MAX = 255
MAX_GROUP_NESTING = 32


class PatternError(ValueError):
    """A pattern we cannot translate; ``offset`` is within the pattern."""

    def __init__(self, message: str, offset: int, too_complex: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.too_complex = too_complex


# --------------------------------------------------------------------------
# character classes

_CLASS_CACHE: dict[str, str] = {}


def _ranges(pred) -> str:
    """A Python character-class body for every code point satisfying pred."""
    out = []
    start = None
    prev = None
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            ok = False
        else:
            ok = pred(chr(cp))
        if ok:
            if start is None:
                start = cp
            prev = cp
        elif start is not None:
            out.append(_class_range(start, prev))
            start = None
    if start is not None:
        out.append(_class_range(start, prev))
    return "".join(out)


def _class_char(c: str) -> str:
    if c in "\\]^-[":
        return "\\" + c
    if not c.isprintable() or c.isspace():
        return f"\\U{ord(c):08x}"
    return c


def _class_range(a: int, b: int) -> str:
    if a == b:
        return _class_char(chr(a))
    return f"{_class_char(chr(a))}-{_class_char(chr(b))}"


def _cat(c: str) -> str:
    return unicodedata.category(c)


_ASCII_SYMBOLS = set("$+<=>^`|~")

_CLASS_PREDICATES = {
    "upper": lambda c: c.isupper() or _cat(c) == "Lu",
    "lower": lambda c: c.islower() or _cat(c) == "Ll",
    "punct": lambda c: _cat(c).startswith("P") or c in _ASCII_SYMBOLS,
    "cntrl": lambda c: _cat(c) == "Cc",
    "graph": lambda c: not c.isspace() and _cat(c) not in ("Cc", "Cs", "Cn", "Zs", "Zl", "Zp"),
    "print": lambda c: (not c.isspace() or _cat(c) == "Zs")
    and _cat(c) not in ("Cc", "Cs", "Cn", "Zl", "Zp"),
    "blank": lambda c: c == "\t" or _cat(c) == "Zs",
}

_SIMPLE_CLASSES = {
    "alpha": "[^\\W\\d_]",
    "digit": "\\d",
    "alnum": "[^\\W_]",
    "space": "\\s",
    "xdigit": "[0-9A-Fa-f]",
}


def _class_pattern(name: str) -> str | None:
    if name in _SIMPLE_CLASSES:
        return _SIMPLE_CLASSES[name]
    pred = _CLASS_PREDICATES.get(name)
    if pred is None:
        return None
    cached = _CLASS_CACHE.get(name)
    if cached is None:
        cached = "[" + _ranges(pred) + "]"
        _CLASS_CACHE[name] = cached
    return cached


def _parse_bracket(p: str, i: int, posix: bool) -> tuple[str, int]:
    """Translate the bracket expression starting at p[i] == '['.

    Returns (python pattern, index after ']'). ``posix``: backslash is
    literal and [: :] classes are recognised (regex); otherwise (wildcard)
    backslash escapes and '!' negates too.
    """
    start = i
    i += 1
    n = len(p)
    negate = False
    if i < n and (p[i] == "^" or (not posix and p[i] == "!")):
        negate = True
        i += 1
    items: list[str] = []     # class-body pieces
    classes: list[str] = []   # whole sub-patterns ([:alpha:] etc.)
    first = True
    while True:
        if i >= n:
            raise PatternError("unterminated bracket expression '['", start)
        c = p[i]
        if c == "]" and not first:
            i += 1
            break
        first = False
        if posix and c == "[" and i + 1 < n and p[i + 1] in ":.=":
            kind = p[i + 1]
            end = p.find(kind + "]", i + 2)
            if end < 0:
                raise PatternError(f"unterminated '[{kind}' in bracket expression", i)
            inner = p[i + 2:end]
            i = end + 2
            if kind == ":":
                sub = _class_pattern(inner)
                if sub is None:
                    raise PatternError(f"unknown character class [:{inner}:]", start)
                classes.append(sub)
                continue
            if len(inner) != 1:
                raise PatternError(f"collating element [{kind}{inner}{kind}] is not supported "
                                   "(single characters only)", start)
            lo = inner
        elif not posix and c == "\\" and i + 1 < n:
            lo = p[i + 1]
            i += 2
        else:
            lo = c
            i += 1
        # a range?
        if i + 1 < n and p[i] == "-" and p[i + 1] != "]":
            i += 1
            c2 = p[i]
            if posix and c2 == "[" and i + 1 < n and p[i + 1] in ".=":
                kind = p[i + 1]
                end = p.find(kind + "]", i + 2)
                if end < 0 or end - (i + 2) != 1:
                    raise PatternError("bad range end point", i)
                hi = p[i + 2]
                i = end + 2
            elif not posix and c2 == "\\" and i + 1 < n:
                hi = p[i + 1]
                i += 2
            else:
                hi = c2
                i += 1
            if ord(hi) < ord(lo):
                raise PatternError(f"invalid range {lo}-{hi} (end before start)", start)
            items.append(_class_range(ord(lo), ord(hi)))
        else:
            items.append(_class_char(lo))
    body = "".join(items)
    if not classes:
        if not body:  # cannot happen: ']' first is literal
            raise PatternError("empty bracket expression", start)
        return ("[^" if negate else "[") + body + "]", i
    alts = list(classes)
    if body:
        alts.insert(0, "[" + body + "]")
    alt = "|".join(alts)
    if negate:
        return "(?:(?!" + alt + ")[\\s\\S])", i
    return "(?:" + alt + ")", i


# --------------------------------------------------------------------------
# ERE

_INTERVAL = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")
_ESCAPE_CLASSES = {"d": "\\d", "D": "\\D", "w": "\\w", "W": "\\W", "s": "\\s", "S": "\\S"}
_ESCAPE_ANCHORS = {"b": "\\b", "B": "\\B", "<": "\\b(?=\\w)", ">": "\\b(?<=\\w)"}
_ESCAPE_CONTROLS = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}


class _Item:
    __slots__ = ("text", "kind", "unbounded")

    def __init__(self, text: str, kind: str, unbounded: bool = False) -> None:
        self.text = text
        self.kind = kind          # 'atom', 'anchor', 'quantified'
        self.unbounded = unbounded  # is (a group of just) an unbounded repetition


class _Frame:
    __slots__ = ("branches", "items", "start", "unbounded")

    def __init__(self, start: int) -> None:
        self.branches: list[str] = []
        self.items: list[_Item] = []
        self.start = start
        self.unbounded = False

    def close_branch(self) -> None:
        self.branches.append("".join(it.text for it in self.items))
        if len(self.items) == 1 and self.items[0].unbounded:
            self.unbounded = True
        self.items = []

    def text(self) -> str:
        return "|".join(self.branches)


def ere_to_python(pattern: str) -> str:
    """The Python ``re`` pattern (for ``search``, with DOTALL) equivalent to
    a POSIX ERE, or ``PatternError``."""
    p = pattern
    n = len(p)
    stack = [_Frame(0)]
    i = 0
    while i < n:
        c = p[i]
        frame = stack[-1]
        if c == "(":
            if len(stack) > MAX_GROUP_NESTING:
                raise PatternError(f"groups nest more than {MAX_GROUP_NESTING} deep", i,
                                   too_complex=True)
            stack.append(_Frame(i))
            i += 1
        elif c == ")":
            if len(stack) == 1:
                raise PatternError("unmatched ')'", i)
            frame.close_branch()
            stack.pop()
            stack[-1].items.append(_Item("(?:" + frame.text() + ")", "atom", frame.unbounded))
            i += 1
        elif c == "|":
            frame.close_branch()
            i += 1
        elif c in "*+?{":
            lo, hi, length = 0, None, 1
            if c == "{":
                m = _INTERVAL.match(p, i)
                if m is None:
                    frame.items.append(_Item("\\{", "atom"))
                    i += 1
                    continue
                lo = int(m.group(1)) if len(m.group(1)) < 6 else RE_DUP_MAX + 1
                if m.group(2) is None:
                    hi = lo
                elif m.group(3):
                    hi = int(m.group(3)) if len(m.group(3)) < 6 else RE_DUP_MAX + 1
                else:
                    hi = None
                if lo > RE_DUP_MAX or (hi is not None and hi > RE_DUP_MAX):
                    raise PatternError(f"repetition count above {RE_DUP_MAX}", i,
                                       too_complex=True)
                if hi is not None and hi < lo:
                    raise PatternError(f"bad interval {m.group(0)} (maximum below minimum)", i)
                length = m.end() - i
                quant = m.group(0)
            else:
                quant = c
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            if not frame.items or frame.items[-1].kind == "anchor":
                raise PatternError(f"'{p[i:i + length]}' has nothing to repeat", i)
            item = frame.items[-1]
            if item.unbounded and (hi is None or hi > 1):
                raise PatternError("nested repetition of a repeated expression "
                                   "(could take exponential time)", i, too_complex=True)
            text = item.text
            if item.kind == "quantified":
                text = "(?:" + text + ")"
            frame.items[-1] = _Item(text + quant, "quantified", hi is None)
            i += length
        elif c == "[":
            text, i = _parse_bracket(p, i, posix=True)
            frame.items.append(_Item(text, "atom"))
        elif c == ".":
            frame.items.append(_Item(".", "atom"))
            i += 1
        elif c == "^":
            frame.items.append(_Item("^", "anchor"))
            i += 1
        elif c == "$":
            frame.items.append(_Item("\\Z", "anchor"))
            i += 1
        elif c == "\\":
            if i + 1 >= n:
                raise PatternError("pattern ends with a lone backslash", i)
            e = p[i + 1]
            if e in _ESCAPE_CLASSES:
                frame.items.append(_Item(_ESCAPE_CLASSES[e], "atom"))
            elif e in _ESCAPE_ANCHORS:
                frame.items.append(_Item(_ESCAPE_ANCHORS[e], "anchor"))
            elif e in _ESCAPE_CONTROLS:
                frame.items.append(_Item(re.escape(_ESCAPE_CONTROLS[e]), "atom"))
            elif e.isdigit():
                raise PatternError(f"back-reference \\{e} is not part of POSIX extended "
                                   "regular expressions", i)
            elif e.isalnum():
                raise PatternError(f"unknown escape \\{e}", i)
            else:
                frame.items.append(_Item(re.escape(e), "atom"))
            i += 2
        else:
            frame.items.append(_Item(re.escape(c), "atom"))
            i += 1
    if len(stack) > 1:
        raise PatternError("unmatched '('", stack[-1].start)
    stack[0].close_branch()
    return stack[0].text()


def compile_regex(patterns: list[str] | tuple[str, ...]):
    """One compiled ``re`` pattern matching any of the EREs (use ``.search``)."""
    parts = [ere_to_python(p) for p in patterns]
    text = parts[0] if len(parts) == 1 else "|".join(f"(?:{q})" for q in parts)
    try:
        return re.compile(text, re.DOTALL)
    except re.error as exc:  # should not happen: the translation is valid Python
        raise PatternError(f"invalid regular expression: {exc}", 0) from None
    except (RecursionError, OverflowError, MemoryError):
        raise PatternError("regular expression too complex", 0, too_complex=True) from None


# --------------------------------------------------------------------------
# wildcards

def glob_to_python(pattern: str) -> str:
    """A Python pattern for ``fullmatch`` (DOTALL) equivalent to a glob."""
    p = pattern
    n = len(p)
    segments: list[list[str]] = [[]]   # pieces between stars
    i = 0
    while i < n:
        c = p[i]
        if c == "*":
            if segments[-1] or len(segments) == 1:
                segments.append([])
            # consecutive stars collapse: an empty middle segment adds nothing
            i += 1
        elif c == "?":
            segments[-1].append(".")
            i += 1
        elif c == "[":
            try:
                text, i = _parse_bracket(p, i, posix=False)
            except PatternError as exc:
                if exc.message.startswith("unterminated"):
                    segments[-1].append("\\[")
                    i += 1
                    continue
                raise
            segments[-1].append(text)
        elif c == "\\" and i + 1 < n:
            segments[-1].append(re.escape(p[i + 1]))
            i += 2
        else:
            segments[-1].append(re.escape(c))
            i += 1
    if len(segments) == 1:
        return "".join(segments[0])
    out = ["".join(segments[0])]
    middle = segments[1:-1]
    for seg in middle:
        if seg:
            out.append("(?>.*?" + "".join(seg) + ")")
    out.append(".*" + "".join(segments[-1]))
    return "".join(out)


def compile_glob(patterns: list[str] | tuple[str, ...]):
    """One compiled pattern matching (``fullmatch``) any of the globs."""
    parts = [glob_to_python(p) for p in patterns]
    text = parts[0] if len(parts) == 1 else "|".join(f"(?:{q})" for q in parts)
    try:
        return re.compile(text, re.DOTALL)
    except re.error as exc:
        raise PatternError(f"invalid wildcard: {exc}", 0) from None
    except (RecursionError, OverflowError, MemoryError):
        raise PatternError("wildcard too complex", 0, too_complex=True) from None
