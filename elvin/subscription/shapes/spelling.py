"""Spellings: a text matched as a whole against one learnt before.

A ``Layout`` is the text of a learnt shape with each literal a regex group:
a text it matches has the same tokens but for its literals' texts, so it
needs no tokenising. ``literal_leaf`` makes a literal's leaf as the parser
does.
"""

from __future__ import annotations

import re
from typing import Any

from lark import Token

from elvin.errors import SubscriptionError
from elvin.subscription.ast import Node
from elvin.subscription.parser import _Builder
from elvin.subscription.tokens import (
    INT32_KEY,
    INT64_KEY,
    REAL_KEY,
    Unusual,
    number_leaf,
    string_leaf,
)

__all__ = ["Layout", "literal_leaf"]

_BUILDER = _Builder()


def literal_leaf(tok: str, start: int) -> Node:
    """The leaf the parser makes of a literal token (its errors: ``Unusual``)."""
    if tok[0] in "\"'":
        return string_leaf(tok, start)
    try:
        return number_leaf(tok, start)     # the usual numbers, 5x faster
    except Unusual:
        pass
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
                 literals: list[int], key: tuple[Any, ...]) -> None:
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
        if len(groups) == 1:            # (the usual case; a strict zip costs a microsecond)
            return starts, {self.literals[0]: groups[0]}
        return starts, dict(zip(self.literals, groups, strict=True))
