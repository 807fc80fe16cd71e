"""Tokens of a subscription text, as lark's lexer would make them.

``tokenise(text)`` gives the shape key (the token sequence with each literal
replaced by its class: string, int32, int64 or real64 literal), the tokens'
start offsets and texts, and which tokens are literals. The recursive
descent parser (``descent``) and the subscription cache (``shapes``) start
from it; anything it does not know (a character no token starts with) is
left to lark, which says what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from elvin.subscription.ast import Kind, Node
from elvin.values import INT32_MAX, INT64_MAX

__all__ = ["INT32_KEY", "INT64_KEY", "REAL_KEY", "SPACE_CHARS", "STRING_KEY", "TOKEN", "Unusual",
           "node", "number_leaf", "string_leaf", "token_list", "tokenise", "unescape"]


class Unusual(Exception):
    """A fast path does not handle this text: take the ordinary way."""


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
_ESCAPE = re.compile(r"\\([\s\S])")

# key parts of literals: never the text of a token
STRING_KEY, INT32_KEY, INT64_KEY, REAL_KEY = "\x00s", "\x00i", "\x00l", "\x00r"

_new = object.__new__
# the slots' own descriptors (vars(): mypy types a slot read on the class as the field)
_set_kind: Callable[[Node, Kind], None] = vars(Node)["kind"].__set__
_set_children: Callable[[Node, tuple[Node, ...]], None] = vars(Node)["children"].__set__
_set_value: Callable[[Node, object], None] = vars(Node)["value"].__set__
_set_pos: Callable[[Node, int], None] = vars(Node)["pos"].__set__


def unescape(text: str) -> str:
    """A string literal's or name's text without its backslash escapes."""
    return _ESCAPE.sub(r"\1", text)


def node(kind: Kind, children: tuple[Any, ...], value: Any, pos: int) -> Node:
    """``Node(kind, children, value, pos)`` without the frozen dataclass's
    ``__init__`` (an ``object.__setattr__`` per field): half the cost, and
    a registration builds a tree of several nodes."""
    made = _new(Node)
    _set_kind(made, kind)
    _set_children(made, children)
    _set_value(made, value)
    _set_pos(made, pos)
    return made


def tokenise(text: str) -> tuple[tuple[Any, ...], list[int], list[str], list[int]] | None:
    """``(shape key, token starts, token texts, literal token indexes)``, or
    None if the text holds something the tokeniser does not know (lark will
    say what is wrong with it)."""
    tokens = token_list(text)
    if tokens is None:
        return None
    starts, texts = tokens
    key: list[str] = []
    literals: list[int] = []
    for i, tok in enumerate(texts):
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
    return tuple(key), starts, texts, literals


def token_list(text: str) -> tuple[list[int], list[str]] | None:
    """``(token starts, token texts)``, or None if the text holds something
    no token starts with (the parser and ``tokenise`` start from it)."""
    starts: list[int] = []
    texts: list[str] = []
    pos = 0
    for space, tok in _PAIRS.findall(text):
        pos += len(space)
        starts.append(pos)
        pos += len(tok)
        texts.append(tok)
    # findall skips what no token matches: then the tokens do not reach the end
    # (the same verdict as matching the text against (space token)+ space)
    if not texts or pos != len(text.rstrip(SPACE_CHARS)):
        return None
    return starts, texts


_DECIMAL = re.compile(r"(?:[1-9][0-9]{0,18}|0)([lL]?)\Z")
_REAL = re.compile(r"[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?\Z")   # as the parser's


_INF = float("inf")


def string_leaf(tok: str, start: int) -> Node:
    """The leaf the parser makes of a string literal token."""
    body = tok[1:-1]
    return node(Kind.STRING, (), unescape(body) if "\\" in body else body, start)


def number_leaf(tok: str, start: int) -> Node:
    """The leaf the parser makes of the usual number tokens (decimal
    integers within range, reals); ``Unusual`` for the others (octal, hex,
    errors: the parser's ``_Builder.number`` knows them)."""
    decimal = _DECIMAL.match(tok)
    if decimal is not None:
        if decimal.group(1):
            value = int(tok[:-1])
            if value <= INT64_MAX + 1:
                return node(Kind.INT64, (), value, start)
        else:
            value = int(tok)
            if value <= INT32_MAX + 1:
                return node(Kind.INT32, (), value, start)
    elif _REAL.match(tok) is not None:
        real = float(tok)
        if real != _INF:               # else the parser's OVERFLOW
            return node(Kind.REAL64, (), real, start)
    raise Unusual
