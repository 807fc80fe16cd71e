"""Tokens of a subscription text, as lark's lexer would make them, and
*spellings*: a text matched as a whole against one learnt before.

``tokenise(text)`` gives the shape key (the token sequence with each literal
replaced by its class: string, int32, int64 or real64 literal), the tokens'
start offsets and texts, and which tokens are literals. A ``Layout`` is the
text of a learnt shape with each literal a regex group: a text it matches
has the same tokens but for its literals' texts, so it needs no tokenising.
"""

from __future__ import annotations

import re
from typing import Any

from lark import Token

from elvin.errors import SubscriptionError
from elvin.subscription.ast import Kind, Node
from elvin.subscription.parser import _Builder, unescape

__all__ = ["INT32_KEY", "INT64_KEY", "REAL_KEY", "STRING_KEY", "Layout", "Unusual",
           "literal_leaf", "node", "tokenise"]


class Unusual(Exception):
    """The fast path does not handle this text: take the ordinary way."""


# The grammar's tokens (grammar.lark), in the order lark's basic lexer tries
# them: STRING, NUMBER and NAME (priority 2; their first characters never
# overlap), then the operators, longest first.
TOKEN = (r"""(?:"(?:[^"\\]|\\[\s\S])*"|'(?:[^'\\]|\\[\s\S])*'"""
         r"""|[0-9][0-9A-Za-z_]*(?:\.(?:[0-9]*[eE][+-][0-9A-Za-z_]*|[0-9A-Za-z_]*))?"""
         r"""|(?:[A-Za-z_]|[^\x00-\x7f\s]|\\[\s\S])(?:[!#-&*+\--Z^-~]|[^\x00-\x7f\s]|\\[\s\S])*"""
         r"""|\|\||\^\^|&&|>>>|>>|<<|==|!=|<=|>=|[!<>|^&+\-*/%~(),])""")
_SPACE = r"[ \t\r\n\f\v]*"
SPACE_CHARS = " \t\r\n\f\v"
_PAIRS = re.compile(f"({_SPACE})({TOKEN})")
_LITERAL_FIRST = frozenset("\"'0123456789")

_BUILDER = _Builder()
# key parts of literals: never the text of a token
STRING_KEY, INT32_KEY, INT64_KEY, REAL_KEY = "\x00s", "\x00i", "\x00l", "\x00r"

_new = object.__new__
_set_kind, _set_children, _set_value, _set_pos = (
    Node.kind.__set__, Node.children.__set__, Node.value.__set__,  # type: ignore[attr-defined]
    Node.pos.__set__)  # type: ignore[attr-defined]


def node(kind: Kind, children: tuple, value: Any, pos: int) -> Node:
    """``Node(kind, children, value, pos)`` without the frozen dataclass's
    ``__init__`` (an ``object.__setattr__`` per field): half the cost, and
    a registration builds a tree of several nodes."""
    made = _new(Node)
    _set_kind(made, kind)
    _set_children(made, children)
    _set_value(made, value)
    _set_pos(made, pos)
    return made


def tokenise(text: str) -> tuple[tuple, list[int], list[str], list[int]] | None:
    """``(shape key, token starts, token texts, literal token indexes)``, or
    None if the text holds something the tokeniser does not know (lark will
    say what is wrong with it)."""
    key: list[str] = []
    starts: list[int] = []
    texts: list[str] = []
    literals: list[int] = []
    pos = 0
    i = 0
    for space, tok in _PAIRS.findall(text):
        pos += len(space)
        starts.append(pos)
        pos += len(tok)
        texts.append(tok)
        c = tok[0]
        if c in _LITERAL_FIRST:
            literals.append(i)
            if c == '"' or c == "'":
                key.append(STRING_KEY)
            elif tok[-1] in "lL":
                key.append(INT64_KEY)
            elif "." in tok:
                key.append(REAL_KEY)
            else:
                key.append(INT32_KEY)
        else:
            key.append(tok)
        i += 1
    # findall skips what no token matches: then the tokens do not reach the end
    # (the same verdict as matching the text against (space token)+ space)
    if not texts or pos != len(text.rstrip(SPACE_CHARS)):
        return None
    return tuple(key), starts, texts, literals


def literal_leaf(tok: str, start: int) -> Node:
    """The leaf the parser makes of a literal token (its errors: ``Unusual``)."""
    if tok[0] in "\"'":
        body = tok[1:-1]
        return node(Kind.STRING, (), unescape(body) if "\\" in body else body, start)
    try:
        return _BUILDER.number([Token("NUMBER", tok, start_pos=start)]).node
    except SubscriptionError:
        raise Unusual from None


# a literal token of each key class, as the tokeniser (``TOKEN``) takes it: an
# atomic group, so that a match never splits a token the tokeniser would not
_NUMBER = r"(?>[0-9][0-9A-Za-z_]*(?:\.(?:[0-9]*[eE][+-][0-9A-Za-z_]*|[0-9A-Za-z_]*))?)"
_LITERAL_PATTERNS = {
    INT32_KEY: r"(?![0-9][0-9A-Za-z_]*\.)" + _NUMBER + r"(?<![lL])",
    INT64_KEY: _NUMBER + r"(?<=[lL])",
    REAL_KEY: r"(?=[0-9][0-9A-Za-z_]*\.)" + _NUMBER + r"(?<![lL])",
}
#: token start lists a layout remembers (one per set of literal lengths)
_SHARED = 64


class Layout:
    """One spelling of a shape: its text with each literal a group, matched
    as a whole. A text it matches has exactly the tokens of the text that
    taught it but for the literals' texts (the fixed parts are the same
    characters, and each literal is one token of the same class), so it
    needs no tokenising: its token starts are the taught ones shifted by the
    literals' change in length."""

    __slots__ = ("pattern", "shape", "starts", "literals", "lengths", "after", "_placed")

    def __init__(self, shape: Any, text: str, starts: list[int], texts: list[str],
                 literals: list[int], key: tuple) -> None:
        parts = []
        pos = 0
        for lit in literals:
            tok = texts[lit]
            pattern = _LITERAL_PATTERNS.get(key[lit])
            if pattern is None:             # a string: in the quotes it was written with
                q = tok[0]
                pattern = f"{q}(?:[^{q}\\\\]|\\\\[\\s\\S])*{q}"
            parts.append(re.escape(text[pos:starts[lit]]))
            parts.append(f"({pattern})")
            pos = starts[lit] + len(tok)
        parts.append(re.escape(text[pos:]))
        self.pattern = re.compile("".join(parts))
        self.shape = shape
        self.starts = starts
        self.literals = literals
        self.lengths = [len(texts[lit]) for lit in literals]
        #: token index -> how many literals come before it
        self.after = [sum(1 for lit in literals if lit < i) for i in range(len(starts))]
        #: literal lengths -> token starts (a few sets of lengths recur)
        self._placed: dict[tuple[int, ...], list[int]] = {tuple(self.lengths): starts}

    def place(self, groups: tuple[str, ...]) -> tuple[list[int], dict[int, str]]:
        """(token starts, literal token index -> text) of a matching text."""
        lengths = tuple(map(len, groups))
        starts = self._placed.get(lengths)
        if starts is None:
            shifts = [0]
            for length, taught in zip(lengths, self.lengths, strict=True):
                shifts.append(shifts[-1] + length - taught)
            starts = [start + shifts[k] for start, k in zip(self.starts, self.after, strict=True)]
            if len(self._placed) < _SHARED:
                self._placed[lengths] = starts
        return starts, dict(zip(self.literals, groups, strict=True))
