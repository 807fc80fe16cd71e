"""Subscription text -> checked AST (lark LALR(1), grammar in grammar.lark).

Decisions (the spec leaves them open or Avis differs):

* The tree keeps the shape of the source: ``x > 2 + 3`` is
  ``GREATER_THAN(x, ADD(2, 3))``; only ``compile()`` folds constants. One
  exception: a minus sign written directly before a number literal is part
  of the literal (spec 6.1.4: "an optional leading minus sign negates the
  value"), so ``-5`` is ``INT32(-5)`` and ``-2147483648`` is a valid int32.
  ``-(5)`` and ``- -5`` stay ``UNARY_MINUS`` nodes.
* Binary operators are left-associative (``1 - 2 + 3`` is ``(1 - 2) + 3``);
  comparisons do not chain (``a < b < c`` is a PARSE_ERROR).
* A chain of one logical operator is one n-ary node: ``a || b || c`` is
  ``OR(a, b, c)``, and the same for ``&&`` and ``^^``. All three are
  associative in the spec's three-valued logic (for ``^^``: bottom if any
  operand is bottom, else the parity of the true ones), so this is only a
  matter of shape, and it keeps a subscription that ORs a thousand groups
  one level deep instead of a thousand. Parentheses close a chain:
  ``(a || b) || c`` stays ``OR(OR(a, b), c)`` (the tree keeps the shape of
  the source, so every tree, binary or n-ary, round-trips through
  ``unparse``). The evaluator and the analyses flatten such nesting anyway.
* String literals: a backslash escapes any character, which then stands for
  itself (``'a\\n'`` is ``an``, as the spec and Avis say). Names take the same
  escapes (``\\ `` for a space).
* Names swallow operator characters (``a==1`` is one name): the spec's
  id-char includes ``= < > ! & | ^ + - * /`` and the Elvin docs say names,
  operators and literals must be separated by white space. When the whole
  expression or an operand turns out to be such a name, the error says so.
* Hex literals are magnitudes: ``0xFFFFFFFF`` is an OVERFLOW, not -1.
* Positions are character offsets (not UTF-8 byte offsets) into the text.
  A node's ``pos`` is where its text starts (the ``(`` of a parenthesised
  expression, the left operand of a binary operator).
* Nesting: the tree may be at most ``MAX_DEPTH`` levels deep (a leaf is one
  level, each operator or function call one more -- an n-ary logical chain
  is one level however long it is), and parentheses may
  nest at most ``MAX_DEPTH`` deep; beyond either it is NESTING_TOO_DEEP.
  The two limits are separate so that the fully parenthesised text of any
  valid tree (``unparse``) parses back. Parentheses are counted before
  parsing, so a huge input of nested parentheses fails fast, and the tree
  depth is checked as the parser reduces, so nothing here, in the checker
  or in the compiler recurses deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

from elvin.errors import SubscriptionError
from elvin.subscription import descent
from elvin.subscription.ast import FUNCTION_KINDS, MAX_DEPTH, Kind, Node
from elvin.subscription.cancel import checkpoint
from elvin.subscription.tokens import unescape
from elvin.values import INT32_MAX, INT64_MAX

__all__ = ["MAX_DEPTH", "parse_tree", "unescape"]

_BINARY_KINDS = {
    "||": Kind.OR, "^^": Kind.XOR, "&&": Kind.AND,
    "==": Kind.EQUALS, "!=": Kind.NOT_EQUALS, "<": Kind.LESS_THAN,
    "<=": Kind.LESS_THAN_EQUALS, ">": Kind.GREATER_THAN, ">=": Kind.GREATER_THAN_EQUALS,
    "|": Kind.BIT_OR, "^": Kind.BIT_XOR, "&": Kind.BIT_AND,
    "<<": Kind.SHIFT_LEFT, ">>": Kind.SHIFT_RIGHT, ">>>": Kind.LOGICAL_SHIFT_RIGHT,
    "+": Kind.ADD, "-": Kind.SUBTRACT, "*": Kind.MULTIPLY, "/": Kind.DIVIDE, "%": Kind.MODULO,
}
_LOGICAL_KINDS = frozenset({Kind.OR, Kind.XOR, Kind.AND})
_UNARY_KINDS = {"!": Kind.NOT, "-": Kind.UNARY_MINUS, "+": Kind.UNARY_PLUS, "~": Kind.BIT_NEGATE}

_TOKEN_NAMES = {
    "OR": "'||'", "XOR": "'^^'", "AND": "'&&'", "NOT": "'!'", "CMP": "a comparison",
    "BOR": "'|'", "BXOR": "'^'", "BAND": "'&'", "SHIFT": "a shift operator",
    "ADDOP": "'+' or '-'", "MULOP": "'*', '/' or '%'", "TILDE": "'~'",
    "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "STRING": "a string",
    "NUMBER": "a number", "NAME": "a name", "$END": "the end of the expression",
}

_INT = re.compile(r"(?:0[xX](?P<hex>[0-9a-fA-F]+)|(?P<oct>0[0-7]*)|(?P<dec>[1-9][0-9]*))"
                  r"(?P<long>[lL]?)\Z")
_REAL = re.compile(r"[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?\Z")


class _P:
    """A parsed piece: node, nesting depth, start offset, bare number literal?

    An unparenthesised chain of one logical operator (``chain`` is its kind)
    collects its operands in ``items`` and makes its node when it is asked
    for, so that a chain of n operands costs O(n), not O(n**2).
    """

    __slots__ = ("_node", "depth", "start", "raw", "chain", "items")

    def __init__(self, node: Node | None, depth: int, start: int, raw: bool = False) -> None:
        self._node = node
        self.depth = depth
        self.start = start
        self.raw = raw
        self.chain: Kind | None = None
        self.items: list[Node] | None = None

    @property
    def node(self) -> Node:
        if self._node is None:
            self._node = Node(self.chain, tuple(self.items), pos=self.start)  # type: ignore[arg-type]  # a chain's kind and items are set with it
        return self._node


def _error(code: str, message: str, pos: int | None, text: str | None,
           *args: object) -> SubscriptionError:
    return SubscriptionError(code, message, pos, text, (pos, *args) if pos is not None else args)


def _pos(tok: Token) -> int:
    """A token's offset (lark types it optional; its LALR lexer always sets it)."""
    pos = tok.start_pos
    assert pos is not None
    return pos


class _Builder(Transformer[Token, Any]):
    """Callbacks run by the LALR parser as it reduces (no tree, no recursion)."""

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)

    @staticmethod
    def _deeper(depth: int, start: int) -> int:
        if depth > MAX_DEPTH:
            raise _error("NESTING_TOO_DEEP",
                         f"expression nests more than {MAX_DEPTH} levels deep", start, None)
        return depth

    def number(self, children: list[Any]) -> _P:
        tok: Token = children[0]
        text = str(tok)
        pos = _pos(tok)
        m = _INT.match(text)
        if m is not None:
            digits = m.group("hex") or m.group("oct") or m.group("dec")
            if len(digits) > 40:
                raise _error("OVERFLOW", f"number {text[:20]}... is far too large", pos, None, text)
            if m.group("hex"):
                value = int(digits, 16)
            elif m.group("oct"):
                value = int(digits, 8)
            else:
                value = int(digits)
            if m.group("long"):
                kind, limit = Kind.INT64, INT64_MAX
            else:
                kind, limit = Kind.INT32, INT32_MAX
            if value > limit + 1:
                what = "int64" if kind is Kind.INT64 else "int32 (add L for an int64)"
                raise _error("OVERFLOW", f"{text} is too large for an {what}", pos, None, text)
            # limit + 1 is allowed here for a leading minus; the checker refuses
            # it otherwise
            return _P(Node(kind, value=value, pos=pos), 1, pos, raw=True)
        if _REAL.match(text):
            real = float(text)
            if real == float("inf"):
                raise _error("OVERFLOW", f"{text} is too large for a real64", pos, None, text)
            return _P(Node(Kind.REAL64, value=real, pos=pos), 1, pos, raw=True)
        if re.match(r"0[0-7]*[89]", text) and not re.search(r"[.xXeE]", text):
            why = "octal literals (leading 0) take only the digits 0-7"
        elif re.match(r"[0-9]+[eE][+-]?[0-9]*\Z", text):
            why = "real literals need a decimal point, e.g. 1.0e5"
        elif "." in text:
            why = ("real literals need digits on both sides of the point and an "
                   "optional exponent, e.g. 1.5, 1.5e10, 1.5E-3")
        else:
            why = ("integer literals are decimal, octal (leading 0) or hex (0x), with an "
                   "optional L for int64; separate numbers from names with white space")
        raise _error("INVALID_TOKEN", f"malformed number {text!r}: {why}", pos, None, text)

    def string(self, children: list[Any]) -> _P:
        tok: Token = children[0]
        text = str(tok)
        pos = _pos(tok)
        return _P(Node(Kind.STRING, value=unescape(text[1:-1]), pos=pos), 1, pos)

    def name(self, children: list[Any]) -> _P:
        checkpoint()
        tok: Token = children[0]
        pos = _pos(tok)
        return _P(Node(Kind.NAME, value=unescape(str(tok)), pos=pos), 1, pos)

    def arglist(self, children: list[Any]) -> list[_P]:
        return [c for c in children if isinstance(c, _P)]

    def call(self, children: list[Any]) -> _P:
        tok: Token = children[0]
        fname = unescape(str(tok))
        pos = _pos(tok)
        kind = FUNCTION_KINDS.get(fname)
        if kind is None:
            known = ", ".join(sorted(FUNCTION_KINDS))
            raise _error("UNKNOWN_FUNC", f"unknown function {fname!r} (known: {known})",
                         pos, None, fname)
        args = children[2] or []
        depth = 1 + max((a.depth for a in args), default=0)
        node = Node(kind, tuple(a.node for a in args), pos=pos)
        return _P(node, self._deeper(depth, pos), pos)

    def paren(self, children: list[Any]) -> _P:
        lpar: Token = children[0]
        inner: _P = children[1]
        pos = _pos(lpar)
        node = replace(inner.node, pos=pos)
        # parentheses are limited by _check_parens, not counted in the tree depth,
        # so that the fully parenthesised unparse() of a tree parses back
        return _P(node, inner.depth, pos)

    def unary(self, children: list[Any]) -> _P:
        tok: Token = children[0]
        operand: _P = children[1]
        pos = _pos(tok)
        kind = _UNARY_KINDS[str(tok)]
        if kind is Kind.UNARY_MINUS and operand.raw:
            lit = operand.node
            return _P(Node(lit.kind, value=-lit.value, pos=pos), 1, pos)
        node = Node(kind, (operand.node,), pos=pos)
        return _P(node, self._deeper(operand.depth + 1, pos), pos)

    def binary(self, children: list[Any]) -> _P:
        checkpoint()                # a long expression's parse may be cancelled
        left: _P = children[0]
        tok: Token = children[1]
        right: _P = children[2]
        kind = _BINARY_KINDS[str(tok)]
        if kind in _LOGICAL_KINDS:
            # the grammar is left-recursive: extend the chain on the left
            if left.chain is kind:
                left.items.append(right.node)  # type: ignore[union-attr]  # as above: left is a chain
                left._node = None
                if right.depth + 1 > left.depth:
                    left.depth = self._deeper(right.depth + 1, left.start)
                return left
            chain = _P(None, self._deeper(1 + max(left.depth, right.depth), left.start),
                       left.start)
            chain.chain = kind
            chain.items = [left.node, right.node]
            return chain
        node = Node(kind, (left.node, right.node), pos=left.start)
        depth = 1 + max(left.depth, right.depth)
        return _P(node, self._deeper(depth, left.start), left.start)


_PARSER: Lark | None = None


def _parser() -> Lark:
    global _PARSER
    if _PARSER is None:
        grammar = resources.files("elvin.subscription").joinpath("grammar.lark").read_text(
            encoding="utf-8")
        _PARSER = Lark(grammar, parser="lalr", lexer="basic", transformer=_Builder(),
                       maybe_placeholders=True)
    return _PARSER


_SKIP = re.compile(r'"(?:[^"\\]|\\[\s\S])*"|\'(?:[^\'\\]|\\[\s\S])*\'|\\[\s\S]|[^()"\'\\]+')


def _check_parens(text: str) -> None:
    """NESTING_TOO_DEEP before parsing, for inputs full of parentheses."""
    if text.count("(") <= MAX_DEPTH:
        return
    depth = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "(":
            checkpoint()            # (a pass over a long text: it may be cancelled)
            depth += 1
            if depth > MAX_DEPTH:
                raise _error("NESTING_TOO_DEEP",
                             f"parentheses nest more than {MAX_DEPTH} levels deep", i, text)
            i += 1
        elif c == ")":
            depth -= 1
            i += 1
        else:
            m = _SKIP.match(text, i)
            i = m.end() if m else i + 1


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "the end of the expression"
    text = str(tok)
    if len(text) > 30:
        text = text[:27] + "..."
    if tok.type in ("NAME", "NUMBER", "STRING"):
        return f"{tok.type.lower()} {text}"
    return repr(text)


def parse_tree(text: str) -> Node:
    """Parse ``text`` into a tree (syntax only; the caller runs the checker)."""
    if not isinstance(text, str):
        raise TypeError(f"a subscription is a str, not {type(text).__name__}")
    if not text.strip(" \t\r\n\f\v"):
        raise _error("PARSE_ERROR", "the subscription expression is empty", 0, text, "")
    nul = text.find("\x00")
    if nul >= 0:
        raise _error("INVALID_TOKEN", "NUL characters are not allowed", nul, text, "\\0")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _error("INVALID_TOKEN", "lone surrogate character (not valid Unicode text)",
                     exc.start, text, text[exc.start]) from None
    try:
        return descent.parse(text)      # the same tree, ten times faster
    except descent.Unusual:
        pass                            # (errors, rare literals: lark says it)
    _check_parens(text)                 # (the descent stops at the same depth)
    try:
        result = _parser().parse(text)
    except SubscriptionError as exc:
        if exc.expression is None:
            raise SubscriptionError(exc.code, exc.message, exc.position, text, exc.args_) from None
        raise
    except UnexpectedCharacters as exc:
        # (lark declares pos_in_stream None on the class; each error sets it)
        raise _lex_error(text, exc.pos_in_stream) from None  # type: ignore[arg-type]  # see above
    except UnexpectedToken as exc:
        raise _syntax_error(text, exc.token, exc.expected, exc.state) from None
    except UnexpectedEOF:
        raise _error("PARSE_ERROR", "unexpected end of the expression", len(text), text,
                     "") from None
    # our callbacks make every reduction a _P: lark's parse says only "a Tree"
    node = result.node if isinstance(result, _P) else result
    return node  # type: ignore[return-value]  # see above


def _lex_error(text: str, pos: int) -> SubscriptionError:
    c = text[pos]
    if c in "\"'":
        return _error("UNTERM_STRING", f"string starting here has no closing {c}", pos, text)
    if c == "\\":
        return _error("INVALID_TOKEN", "a backslash must be followed by the character it "
                      "escapes", pos, text, c)
    if c == "=":
        hint = " (equality is '==')"
    elif c == ".":
        hint = " (real literals need a digit before the point: 0.5)"
    elif c in "[]":
        hint = " (brackets in names must be escaped with a backslash)"
    else:
        hint = ""
    return _error("INVALID_TOKEN", f"unexpected character {c!r}{hint}", pos, text, c)


def _syntax_error(text: str, tok: Token, expected: Iterable[str] | None,
                  state: object) -> SubscriptionError:
    pos = len(text) if tok.type == "$END" else tok.start_pos
    names = sorted({_TOKEN_NAMES.get(e, e) for e in (expected or ())} - {"$END"})
    if tok.type == "CMP" and "CMP" not in (expected or ()):
        msg = ("comparisons do not chain: write a < b && b < c; a boolean result cannot "
               "be compared")
    elif tok.type == "$END":
        msg = "the expression ends too early"
        if names:
            msg += f"; expected {_join(names)}"
    else:
        msg = f"unexpected {_describe(tok)}"
        if tok.type == "LPAR":
            msg += " (only functions are followed by '(')"
        elif tok.type in ("NAME", "NUMBER", "STRING") and "$END" in (expected or ()):
            msg += " (missing operator?)"
        elif names:
            msg += f"; expected {_join(names)}"
    token_text = "" if tok.type == "$END" else str(tok)
    return _error("PARSE_ERROR", msg, pos, text, token_text)


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    if len(items) > 6:
        return ", ".join(items[:6]) + " or ..."
    return ", ".join(items[:-1]) + " or " + items[-1]
