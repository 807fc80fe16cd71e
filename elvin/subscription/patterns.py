"""POSIX extended regular expressions and wildcards, written in Python ``re``
syntax and run by the ``regex`` module with a time limit.

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
* Backtracking engines can take time exponential in the length of the
  value (``(a|aa)*b``, ``(\\w+\\s?)*$``). Two defences:

  - statically, repeating (``*``, ``+``, ``{n,m}`` with m > 1) a group that
    is nothing but an unbounded repetition (``(a+)+``, ``(x*)*``,
    ``(a|b*){2,}``) is refused with REGEXP_TOO_COMPLEX, intervals are capped
    at 255 and groups nest at most 32 deep (the textbook cases);
  - at run time, every match runs in the third-party ``regex`` module with
    a time limit of ``MATCH_TIMEOUT`` seconds of its own (``regex_matcher``,
    ``glob_matcher``, ``_run``): a match that spends that long on the CPU
    makes the predicate *bottom* for that notification (neither true nor
    false), never an exception and never a stalled router. The limit is
    each match's own, never shared: no other subscription's cost, no load
    on the machine can make a cheap pattern miss (the router's engine
    charges an overrun to the subscription whose pattern it was). ``regex`` also cuts short most
    catastrophic backtracking by itself. The patterns of one predicate
    (``regex(x, p1, p2)``) run as one alternation, so a time-out is bottom
    even if another of them might have matched.

  The patterns are still written in Python ``re`` syntax (``ere_to_python``,
  ``glob_to_python``; the Spark back-test re-spells that for Java) and are
  handed to ``regex`` in its re-compatible VERSION0 mode with one change of
  spelling (``engine_pattern``): ``regex`` gives ``\\w \\d \\s \\b`` their
  UTS #18 meanings (its ``\\w`` takes combining marks but not superscript
  digits, its ``\\s`` leaves out U+001C..U+001F), so they are spelled as
  what they mean to ``re``: ``\\w`` is ``[\\p{L}\\p{N}_]``, ``\\d`` is
  ``\\p{Nd}``, ``\\s`` the explicit list of ``str.isspace()`` characters, and
  ``\\b \\B`` look-arounds over that ``\\w``. That is exactly ``re``'s meaning
  for every character of Python's Unicode database; characters assigned
  after it (Unicode 15 on) are classified by ``regex``'s newer database,
  where ``re`` would call them unassigned. Google RE2 (``google-re2``:
  linear time, so no time limit needed) was considered and rejected: it has
  no look-around and no atomic groups, which the translations of
  ``[^[:alpha:]]``, ``\\>`` and wildcards need.

``wildcard(attr, "glob")`` patterns match the whole value: ``*`` any
sequence (``/`` and newlines included), ``?`` one character, ``[...]`` a set
(``!`` or ``^`` first negates, ``]`` first is literal, ``a-z`` ranges,
``\\`` escapes inside too), ``\\c`` the character c. An unterminated ``[`` is a
literal ``[``, as in shells and ``fnmatch``. Each ``*`` becomes an atomic
lazy group, as CPython's own ``fnmatch`` does, so matching never
backtracks catastrophically.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

import regex as _regex

__all__ = ["PatternError", "ere_to_python", "glob_to_python", "compile_regex",
           "compile_glob", "engine_pattern", "regex_matcher", "glob_matcher",
           "required_literals", "literal_search", "MATCH_ATTEMPTS", "MATCH_TIMEOUT", "mark", "overruns"]

RE_DUP_MAX = 255
MAX_GROUP_NESTING = 32
#: Seconds of its own that one match of one regex() or wildcard() predicate
#: may take; a match that runs that long on the CPU is given up and the
#: predicate is bottom for that notification (see ``_run``). The bound is the
#: pattern's own: nothing another subscription, the machine's load or another
#: thread costs counts against it.
MATCH_TIMEOUT = 0.005
#: tries a match gets when ``regex``'s limit (process CPU time) ran out but the
#: matching thread did not spend it (another thread of the process ran)
MATCH_ATTEMPTS = 4
#: the limit of the last try, when the earlier ones were all interrupted
#: more than they ran (a process that busy is rare)
_LAST_TRY = 1.0


class _Overruns(threading.local):
    """``state[0]``: the matches in this thread that ran out of their own time
    (``MATCH_TIMEOUT`` of CPU). Whoever evaluates many subscriptions for one
    notification (the router's engine) reads it around each evaluation to
    tell which subscription's pattern overran, and charges that subscription
    alone (``elvin.router.engine``: the account, the log line, the counter).

    There once was a budget here shared by every pattern match of one
    notification (25 ms of wall clock from the first pattern): whatever ran
    after it, other clients' subscriptions, a garbage collection, the compile
    worker holding the interpreter, made a cheap pattern evaluated late
    bottom, so its subscriber silently missed the notification (issue 42)."""

    def __init__(self) -> None:
        self.state = [0]
        #: the CPU time other threads of the process had spent at this
        #: thread's last ``mark()`` (None: no mark); taken when the first
        #: pattern after the mark runs (``pending``): reading the process's
        #: CPU clock is a system call (~0.7 us), too dear for every
        #: notification when most match no pattern at all
        self.others: float | None = None
        self.pending = False


_THREAD = _Overruns()
_FLAGS = _regex.DOTALL | _regex.VERSION0


def overruns() -> list[Any]:
    """This thread's overrun counter (``[count]``, see :class:`_Overruns`);
    the engine holds on to the list and compares ``[0]`` around evaluations."""
    return _THREAD.state


def mark() -> None:
    """Note how much CPU the process's other threads have spent so far. A
    match that runs out of ``regex``'s limit (process CPU time) after a mark
    is bottom at once when those threads spent less than half a limit
    meanwhile: the time was its own, and trying it again (``_overran``)
    would cost the loop a second limit. The engine marks at every step of a
    match; the clocks are read when its first pattern runs (``_run``), so a
    mark costs nothing in a step that runs none."""
    _THREAD.pending = True


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

#: a compiled pattern's search or fullmatch: ``method(value, timeout=...)``
_Method = Callable[..., Any]


def _ranges(pred: Callable[[str], bool]) -> str:
    """A Python character-class body for every code point satisfying pred."""
    out = []
    start = None
    prev = 0                    # (read only once start is set, and set with it)
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
        if posix and c == "[" and i + 1 < n and p[i + 1] == ":":
            end = p.find(":]", i + 2)
            if end < 0:
                raise PatternError("unterminated '[:' in bracket expression", i)
            inner = p[i + 2:end]
            i = end + 2
            sub = _class_pattern(inner)
            if sub is None:
                raise PatternError(f"unknown character class [:{inner}:]", start)
            classes.append(sub)
            continue
        lo, i = _bracket_char(p, i, posix, start)
        # a range?
        if i + 1 < n and p[i] == "-" and p[i + 1] != "]":
            hi, i = _bracket_char(p, i + 1, posix, start)
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


def _bracket_char(p: str, i: int, posix: bool, start: int) -> tuple[str, int]:
    """The character at ``p[i]`` in a bracket expression, a range's start or
    end alike, and the index after it: a collating element ``[.c.]`` or
    ``[=c=]`` (regex; single characters only), a backslash escape (wildcard),
    or the character itself."""
    c = p[i]
    if posix and c == "[" and i + 1 < len(p) and p[i + 1] in ".=":
        kind = p[i + 1]
        end = p.find(kind + "]", i + 2)
        if end < 0:
            raise PatternError(f"unterminated '[{kind}' in bracket expression", i)
        inner = p[i + 2:end]
        if len(inner) != 1:
            raise PatternError(f"collating element [{kind}{inner}{kind}] is not supported "
                               "(single characters only)", start)
        return inner, end + 2
    if not posix and c == "\\" and i + 1 < len(p):
        return p[i + 1], i + 2
    return c, i + 1


# --------------------------------------------------------------------------
# ERE

_INTERVAL = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")
_ESCAPE_CLASSES = {"d": "\\d", "D": "\\D", "w": "\\w", "W": "\\W", "s": "\\s", "S": "\\S"}
_ESCAPE_ANCHORS = {"b": "\\b", "B": "\\B", "<": "\\b(?=\\w)", ">": "\\b(?<=\\w)"}
_ESCAPE_CONTROLS = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}


class _Item:
    __slots__ = ("text", "kind", "unbounded", "literal")

    def __init__(self, text: str, kind: str, unbounded: bool = False,
                 literal: str | None = None) -> None:
        self.text = text
        self.kind = kind          # 'atom', 'anchor', 'quantified'
        self.unbounded = unbounded  # is (a group of just) an unbounded repetition
        self.literal = literal    # the character, for an atom matching just that


def _literal_item(c: str) -> _Item:
    return _Item(re.escape(c), "atom", literal=c)


def _longest_run(literals: Iterable[str | None]) -> str:
    """The longest run of consecutive characters (None breaks a run)."""
    best = ""
    run: list[str] = []
    for c in [*literals, None]:
        if c is None:
            if len(run) > len(best):
                best = "".join(run)
            run = []
        else:
            run.append(c)
    return best


class _Frame:
    __slots__ = ("branches", "items", "start", "unbounded", "required")

    def __init__(self, start: int) -> None:
        self.branches: list[str] = []
        self.items: list[_Item] = []
        self.start = start
        self.unbounded = False
        # per branch, a string every match of the branch contains ('' if none)
        self.required: list[str] = []

    def close_branch(self) -> None:
        self.branches.append("".join(it.text for it in self.items))
        self.required.append(_longest_run(it.literal for it in self.items))
        if len(self.items) == 1 and self.items[0].unbounded:
            self.unbounded = True
        self.items = []

    def text(self) -> str:
        return "|".join(self.branches)


def ere_to_python(pattern: str) -> str:
    """The Python ``re`` pattern (for ``search``, with DOTALL) equivalent to
    a POSIX ERE, or ``PatternError``."""
    return _translate_ere(pattern)[0]


def _translate_ere(pattern: str) -> tuple[str, tuple[str, ...] | None]:
    """(``ere_to_python(pattern)``, literals one of which every match
    contains -- or None when there is no such set)."""
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
                    frame.items.append(_literal_item("{"))
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
                frame.items.append(_literal_item(_ESCAPE_CONTROLS[e]))
            elif e.isdigit():
                raise PatternError(f"back-reference \\{e} is not part of POSIX extended "
                                   "regular expressions", i)
            elif e.isalnum():
                raise PatternError(f"unknown escape \\{e}", i)
            else:
                frame.items.append(_literal_item(e))
            i += 2
        else:
            frame.items.append(_literal_item(c))
            i += 1
    if len(stack) > 1:
        raise PatternError("unmatched '('", stack[-1].start)
    top = stack[0]
    top.close_branch()
    required = tuple(top.required) if all(top.required) else None
    return top.text(), required


def compile_regex(patterns: list[str] | tuple[str, ...]) -> Any:   # a regex.Pattern
    """One compiled ``regex`` pattern matching any of the EREs (use
    ``.search``, with ``timeout=``: see ``regex_matcher``)."""
    parts = [ere_to_python(p) for p in patterns]
    text = parts[0] if len(parts) == 1 else "|".join(f"(?:{q})" for q in parts)
    return _compile(text, "regular expression")


def required_literals(patterns: list[str] | tuple[str, ...]) -> tuple[str, ...] | None:
    """Strings one of which is in every value that one of the EREs matches
    (``("egall",)`` for ``[Ss]egall``), or None when there is no such set."""
    out: list[str] = []
    for p in patterns:
        required = _translate_ere(p)[1]
        if required is None:
            return None
        out.extend(required)
    return tuple(dict.fromkeys(out))


def regex_matcher(patterns: list[str] | tuple[str, ...]) -> Callable[[str], bool | None]:
    """``f(value)``: does one of the EREs match somewhere in ``value``? True,
    False, or None when the search ran out of time (``MATCH_TIMEOUT``)."""
    return _matcher(compile_regex(patterns).search, required_literals(patterns))


def _matcher(method: _Method, required: tuple[str, ...] | None) -> Callable[[str], bool | None]:
    """Run ``method(value, timeout=...)`` for a tri-state answer; a value
    holding none of the ``required`` strings cannot match, and is answered
    without the engine (a time-limited call costs a few microseconds: the
    ``regex`` module reads the CPU clock). One function, its state in its
    defaults (no closure cells): a router holds one per pattern subscription."""
    if required is None:
        return functools.partial(_run, method)
    # (no annotations: they would make a dict per function)
    if len(required) == 1:
        def one(value, _needle=required[0], _method=method):  # type: ignore[no-untyped-def]  # no annotations: they would make a dict per function (above)
            return False if _needle not in value else _run(_method, value)
        return one

    def any_of(value, _required=required, _method=method):  # type: ignore[no-untyped-def]  # as above
        for needle in _required:
            if needle in value:
                return _run(_method, value)
        return False
    return any_of


def _run(method: _Method, value: str) -> bool | None:
    """``method`` within the pattern's own time (bottom: None). The first try
    costs nothing extra. ``regex``'s limit is the *process's* CPU time (C's
    ``clock()``), which is the pattern's own unless another thread of the
    process ran meanwhile (the router's compile workers do); so a try that
    ran out is looked at more closely (``_overran``)."""
    last = _LAST_OVERRUN
    if value is last[1] and method is last[0]:
        # it overran on this very value last time (an expression may ask
        # twice): the same answer, counted again, without the cost
        _THREAD.state[0] += 1
        return None
    thread = _THREAD
    if thread.pending:              # the first pattern since a mark()
        thread.pending = False
        thread.others = time.process_time() - time.thread_time()
    try:
        return method(value, timeout=MATCH_TIMEOUT) is not None
    except TimeoutError:
        return _overran(method, value)


def _overran(method: _Method, value: str) -> bool | None:
    """A match ran out of ``regex``'s time: try again, measuring this thread's
    CPU time, until a try either finishes or spends at least half its limit
    on the CPU (then the cost is the pattern's own: bottom, counted in this
    thread's ``overruns``). A try interrupted for most of its time (the OS
    ran something else, another thread held the interpreter) says nothing
    about the pattern, so it does not count; after ``MATCH_ATTEMPTS`` such
    tries the last one gets ``_LAST_TRY`` seconds. After a ``mark()`` that
    shows the other threads idle meanwhile, the first try was this thread's
    own: bottom without another."""
    others = _THREAD.others
    if others is not None and (time.process_time() - time.thread_time()) - others \
            < MATCH_TIMEOUT / 2:
        _bottom(method, value)
        return None
    clock = time.thread_time
    for attempt in range(1, MATCH_ATTEMPTS + 1):
        limit = MATCH_TIMEOUT if attempt < MATCH_ATTEMPTS else _LAST_TRY
        start = clock()
        try:
            return method(value, timeout=limit) is not None
        except TimeoutError:
            if clock() - start >= MATCH_TIMEOUT / 2:
                break
    _bottom(method, value)
    return None


def _bottom(method: _Method, value: str) -> None:
    """(An overrun of ``method`` on ``value``: counted, remembered.)"""
    _THREAD.state[0] += 1
    _LAST_OVERRUN[0], _LAST_OVERRUN[1] = method, value


#: [method, value] of the last overrun (any thread: only ever a shortcut to
#: the same answer, bottom, for the same pattern on the same string object)
_LAST_OVERRUN: list[Any] = [None, None]


# --------------------------------------------------------------------------
# the engine's spelling

# re's \w is str.isalnum() or "_": exactly the letters and numbers (categories
# L* and N*) of Python's Unicode database, its \d the decimal digits (Nd). As
# Unicode properties these stay small; spelled out as code-point ranges a
# single \w compiles to 200 KB in regex.
_WORD = "\\p{L}\\p{N}_"
_SHORTHAND_ITEMS = {"w": "[" + _WORD + "]", "W": "[^" + _WORD + "]",
                    "d": "\\p{Nd}", "D": "\\P{Nd}"}
# whole classes that ere_to_python emits for [:alpha:] and [:alnum:]
_WHOLE_CLASSES = {"[^\\W\\d_]": "[\\p{L}\\p{Nl}\\p{No}]", "[^\\W_]": "[\\p{L}\\p{N}]",
                  "[\\s\\S]": "[\\s\\S]"}   # (any character, to both)
_SHORTHAND_BODIES: dict[str, str] = {}
_EVERY: list[str] = []


def _every_code_point() -> str:
    if not _EVERY:
        _EVERY.append("".join(map(chr, range(sys.maxunicode + 1))))
    return _EVERY[0]


def _shorthand_body(letter: str) -> str:
    """Class body (no brackets) of exactly the code points that Python ``re``
    matches with backslash-``letter`` (lone surrogates included, as in ``re``).
    Used for backslash-s and -S (their meaning in re, str.isspace(), is no
    Unicode property; the body is ten ranges), and for a backslash-W inside
    a class, which the translations never emit."""
    body = _SHORTHAND_BODIES.get(letter)
    if body is None:
        runs = re.finditer("\\" + letter + "+", _every_code_point())
        body = "".join(_class_range(m.start(), m.end() - 1) for m in runs)
        _SHORTHAND_BODIES[letter] = body
    return body


def _shorthand(letter: str, in_class: bool) -> str:
    if letter in "sS":
        body = _shorthand_body(letter)
        return body if in_class else "[" + body + "]"
    if not in_class:
        return _SHORTHAND_ITEMS[letter]
    if letter == "w":
        return _WORD
    if letter == "W":
        return _shorthand_body("W")
    return _SHORTHAND_ITEMS[letter]    # \p{Nd} and \P{Nd} work inside a class


def _boundary(letter: str) -> str:
    w = _SHORTHAND_ITEMS["w"]
    if letter == "b":
        return f"(?:(?<={w})(?!{w})|(?<!{w})(?={w}))"
    # re's \B matches nowhere in an empty string
    return f"(?:(?<={w})(?={w})|(?<!{w})(?!{w})(?:(?<=[\\s\\S])|(?=[\\s\\S])))"


_SHORTHAND = re.compile(r"\\[dDwWsSbB]")


def engine_pattern(pattern: str) -> str:
    """A pattern made by ``ere_to_python`` / ``glob_to_python``, spelled for
    the ``regex`` module (VERSION0) so that it means what it means to ``re``.
    Only the shorthand classes and word boundaries change (see the module
    notes); everything else those translations emit means the same to both.
    """
    if _SHORTHAND.search(pattern) is None:
        return pattern
    out = []
    i = 0
    n = len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e in "dDwWsS":
                out.append(_shorthand(e, in_class))
            elif e in "bB" and not in_class:
                out.append(_boundary(e))
            else:
                out.append(pattern[i:i + 2])
            i += 2
        elif c == "[" and not in_class:
            whole = next((w for w in _WHOLE_CLASSES if pattern.startswith(w, i)), None)
            if whole is not None:
                out.append(_WHOLE_CLASSES[whole])
                i += len(whole)
                continue
            # a ']' inside a class is always escaped by the translations
            in_class = True
            out.append(c)
            i += 1
        elif c == "]" and in_class:
            in_class = False
            out.append(c)
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


#: compiled patterns remembered: at most this many ...
COMPILED_MOST = 1024
#: ... and about this many bytes (``_compiled_bytes``); least recently used
#: forgotten first. A count alone let 1,024 long patterns hold ~170 MB.
COMPILED_BYTES = 16 * 1024 * 1024
_COMPILED: dict[tuple[str, str], object] = {}
_COMPILED_COSTS: dict[tuple[str, str], int] = {}
_COMPILED_TOTAL = [0]
_COMPILED_LOCK = threading.Lock()       # the router's compile workers ask too


def _compiled_bytes(text: str) -> int:
    """What ``regex`` holds for a compiled pattern, on the high side (about
    90 bytes per character of the pattern as spelled for the engine, by
    ``tracemalloc``)."""
    return 2048 + 128 * len(text)


def _compile(text: str, what: str) -> Any:      # a regex.Pattern (regex has no stubs)
    """Compile once per distinct pattern: the checker, the compiler and the
    reference interpreter all ask, and ``regex`` parses patterns in Python."""
    def build() -> tuple[Any, int]:
        try:
            spelled = engine_pattern(text)
            # not in regex's own cache: it keeps 500 whatever their size,
            # which held 139 MiB behind this byte-bounded one (issue 42)
            compiled = _regex.compile(spelled, _FLAGS, cache_pattern=False)
        except _regex.error as exc:  # should not happen: the translation is valid
            raise PatternError(f"invalid {what}: {exc}", 0) from None
        except (RecursionError, OverflowError, MemoryError):
            raise PatternError(f"{what} too complex", 0, too_complex=True) from None
        return compiled, _compiled_bytes(spelled)
    return _remembered((text, what), build)


#: Python's ``re`` compiler, without ``re.compile``'s module cache (512
#: patterns, whatever their size). Private to ``re``, hence the fallback.
_compile_uncached: Callable[[str, int], re.Pattern[str]] = getattr(
    getattr(re, "_compiler", None), "compile", re.compile)


def literal_search(strings: Iterable[str]) -> Callable[[str], re.Match[str] | None]:
    """``search(s)``: a match object when ``s`` contains one of ``strings``
    (``contains()`` with many). Python's ``re``: an alternation of literals
    is searched 2-4 times faster than with ``regex``. Compiled once per set
    in the byte-bounded cache of patterns, not in ``re``'s own, which kept
    the last 512 sets however long (issue 42)."""
    text = "|".join(re.escape(s) for s in sorted(set(strings)))

    def build() -> tuple[re.Pattern[str], int]:
        # ~10-30 bytes per character of the alternation (tracemalloc)
        return _compile_uncached(text, re.DOTALL), 1024 + 48 * len(text)
    search: Callable[[str], re.Match[str] | None] = \
        _remembered((text, "contains"), build).search
    return search


def _remembered(key: tuple[str, str], build: Callable[[], tuple[Any, int]]) -> Any:
    """What ``build`` makes for ``key``, built once while remembered: at
    most ``COMPILED_MOST`` entries and ``COMPILED_BYTES`` by the cost
    ``build`` gives, least recently used forgotten first."""
    with _COMPILED_LOCK:
        found = _COMPILED.pop(key, None)
        if found is not None:
            _COMPILED[key] = found          # most recently used last
            return found
    compiled, cost = build()
    with _COMPILED_LOCK:
        if key not in _COMPILED:
            while _COMPILED and (len(_COMPILED) >= COMPILED_MOST
                                 or _COMPILED_TOTAL[0] + cost > COMPILED_BYTES):
                oldest = next(iter(_COMPILED))
                del _COMPILED[oldest]
                _COMPILED_TOTAL[0] -= _COMPILED_COSTS.pop(oldest)
            if cost <= COMPILED_BYTES:
                _COMPILED[key] = compiled
                _COMPILED_COSTS[key] = cost
                _COMPILED_TOTAL[0] += cost
    return compiled


def compiled_cache() -> tuple[int, int]:
    """(patterns, estimated bytes) the compiled-pattern cache holds now."""
    with _COMPILED_LOCK:
        return len(_COMPILED), _COMPILED_TOTAL[0]


# --------------------------------------------------------------------------
# wildcards

def glob_to_python(pattern: str) -> str:
    """A Python pattern for ``fullmatch`` (DOTALL) equivalent to a glob."""
    return _translate_glob(pattern)[0]


def _translate_glob(pattern: str) -> tuple[str, str]:
    """(``glob_to_python(pattern)``, a string every match contains, or '')."""
    p = pattern
    n = len(p)
    segments: list[list[str]] = [[]]   # pieces between stars
    literals: list[str | None] = []    # literal characters in order, None between runs
    i = 0
    while i < n:
        c = p[i]
        if c == "*":
            if segments[-1] or len(segments) == 1:
                segments.append([])
            # consecutive stars collapse: an empty middle segment adds nothing
            literals.append(None)
            i += 1
        elif c == "?":
            segments[-1].append(".")
            literals.append(None)
            i += 1
        elif c == "[":
            try:
                text, i = _parse_bracket(p, i, posix=False)
            except PatternError as exc:
                if exc.message.startswith("unterminated"):
                    segments[-1].append("\\[")
                    literals.append("[")
                    i += 1
                    continue
                raise
            segments[-1].append(text)
            literals.append(None)
        elif c == "\\" and i + 1 < n:
            segments[-1].append(re.escape(p[i + 1]))
            literals.append(p[i + 1])
            i += 2
        else:
            segments[-1].append(re.escape(c))
            literals.append(c)
            i += 1
    required = _longest_run(literals)
    if len(segments) == 1:
        return "".join(segments[0]), required
    out = ["".join(segments[0])]
    middle = segments[1:-1]
    for seg in middle:
        if seg:
            out.append("(?>.*?" + "".join(seg) + ")")
    out.append(".*" + "".join(segments[-1]))
    return "".join(out), required


def compile_glob(patterns: list[str] | tuple[str, ...]) -> Any:    # a regex.Pattern
    """One compiled ``regex`` pattern matching (``fullmatch``) any of the globs."""
    parts = [glob_to_python(p) for p in patterns]
    text = parts[0] if len(parts) == 1 else "|".join(f"(?:{q})" for q in parts)
    return _compile(text, "wildcard")


def glob_matcher(patterns: list[str] | tuple[str, ...]) -> Callable[[str], bool | None]:
    """``f(value)``: does one of the globs match the whole ``value``? True,
    False, or None when matching ran out of time (``MATCH_TIMEOUT``; the
    translation of a glob does not backtrack catastrophically, so this is
    only a second line of defence)."""
    required: list[str] | None = []
    for p in patterns:
        literal = _translate_glob(p)[1]
        if not literal:
            required = None
            break
        required.append(literal)  # type: ignore[union-attr]  # not None until the break above
    return _matcher(compile_glob(patterns).fullmatch,
                    tuple(dict.fromkeys(required)) if required is not None else None)
