"""A recursive-descent parser of the subscription language: lark's trees, faster.

``parse(text)`` makes exactly the tree ``parser.parse_tree`` makes with lark
-- every node, value and character offset, the n-ary logical chains, the
minus folded into a number literal, the depth limits -- for any text that
is valid, about ten times faster (lark's LALR parser runs its tables in
Python, with a callback per reduction). Anything else raises ``Unusual``
and is left to lark: a syntax error, a number the fast literal reader does
not take (octal, hex, exponents), an unknown function, nesting beyond
``MAX_DEPTH``. Errors therefore all come from one place and read the same.

The grammar (``grammar.lark``), lowest precedence first::

    or  := xor ('||' xor)*          -> one OR node for an unparenthesised chain
    xor := and ('^^' and)*          (the same)
    and := not ('&&' not)*          (the same)
    not := '!' not | cmp
    cmp := sum [CMP sum]            (comparisons do not chain)
    sum, product, shift, |, ^, &    left-associative binary levels
    unary := ('-' | '+' | '~') unary | primary
    primary := NUMBER | STRING | NAME | NAME '(' [or (',' or)*] ')' | '(' or ')'

Prefix operators are collected in a loop and binary levels climb by
precedence in one function, so the Python stack grows with parentheses (at
most ``MAX_DEPTH``, checked before parsing), not with the length of an
operator chain; the tree's depth is measured once, after parsing. ``checkpoint()`` runs every few hundred tokens: a long
expression's parse on the router's worker may be cancelled.
"""

from __future__ import annotations

from elvin.subscription.ast import FUNCTION_KINDS, MAX_DEPTH, Kind, Node
from elvin.subscription.cancel import checkpoint
from elvin.subscription.tokens import Unusual, node, number_leaf, string_leaf, token_list, unescape

__all__ = ["Unusual", "parse"]

_LOGICAL = {"||": Kind.OR, "^^": Kind.XOR, "&&": Kind.AND}
#: binary operators below the logical ones: (precedence, kind)
_BINARY = {
    "==": (1, Kind.EQUALS), "!=": (1, Kind.NOT_EQUALS), "<": (1, Kind.LESS_THAN),
    "<=": (1, Kind.LESS_THAN_EQUALS), ">": (1, Kind.GREATER_THAN),
    ">=": (1, Kind.GREATER_THAN_EQUALS),
    "+": (2, Kind.ADD), "-": (2, Kind.SUBTRACT),
    "*": (3, Kind.MULTIPLY), "/": (3, Kind.DIVIDE), "%": (3, Kind.MODULO),
    "<<": (4, Kind.SHIFT_LEFT), ">>": (4, Kind.SHIFT_RIGHT), ">>>": (4, Kind.LOGICAL_SHIFT_RIGHT),
    "|": (5, Kind.BIT_OR), "^": (6, Kind.BIT_XOR), "&": (7, Kind.BIT_AND),
}
_COMPARISON = 1
_PREFIX = {"-": Kind.UNARY_MINUS, "+": Kind.UNARY_PLUS, "~": Kind.BIT_NEGATE}
_LOGICAL_PRECEDENCE = {"||": 1, "^^": 2, "&&": 3}
_CHECK_EVERY = 256      # tokens between cancellation checkpoints


class _Descent:
    """One parse: the tokens (ending with an empty sentinel) and the position."""

    __slots__ = ("texts", "starts", "i", "next_check", "parens")

    def __init__(self, starts: list[int], texts: list[str]) -> None:
        self.texts = [*texts, ""]
        self.starts = starts
        self.i = 0
        self.next_check = _CHECK_EVERY
        #: parentheses open here (a call's too): beyond MAX_DEPTH, ``Unusual``,
        #: and ``parser._check_parens`` says NESTING_TOO_DEEP before lark
        #: runs; so the Python stack stays bounded without a pass over the text
        self.parens = 0

    # -- logical levels ------------------------------------------------------------------
    def logical(self, lowest: int = 1) -> Node:
        """``||`` (precedence 1), ``^^`` (2), ``&&`` (3), climbing by
        precedence: an unparenthesised chain of one operator is one node."""
        texts = self.texts
        left = self.negation() if texts[self.i] == "!" else self.binary(_COMPARISON)
        while True:
            op = texts[self.i]
            precedence = _LOGICAL_PRECEDENCE.get(op, 0)
            if precedence < lowest:
                return left
            items = [left]
            while texts[self.i] == op:
                self.i += 1
                items.append(self.logical(precedence + 1) if precedence < 3
                             else self.negation() if texts[self.i] == "!"
                             else self.binary(_COMPARISON))
            left = node(_LOGICAL[op], tuple(items), None, left.pos)

    def negation(self) -> Node:
        texts = self.texts
        starts: list[int] = []
        while texts[self.i] == "!":
            starts.append(self.starts[self.i])
            self.i += 1
        result = self.binary(_COMPARISON)
        for start in reversed(starts):
            result = node(Kind.NOT, (result,), None, start)
        return result

    # -- comparisons, arithmetic and bitwise levels ----------------------------------------
    def binary(self, lowest: int) -> Node:
        texts = self.texts
        left = self.unary() if texts[self.i] in _PREFIX else self.primary()[0]
        while True:
            found = _BINARY.get(texts[self.i])
            if found is None or found[0] < lowest:
                return left
            precedence, kind = found
            self.i += 1
            right = self.binary(precedence + 1)
            left = node(kind, (left, right), None, left.pos)
            if precedence == _COMPARISON:
                if _BINARY.get(texts[self.i], (0,))[0] == _COMPARISON:
                    raise Unusual       # comparisons do not chain: lark's error
                return left

    def unary(self) -> Node:
        texts = self.texts
        ops: list[tuple[Kind, int]] = []
        while (kind := _PREFIX.get(texts[self.i])) is not None:
            ops.append((kind, self.starts[self.i]))
            self.i += 1
        result, raw = self.primary()
        for kind, start in reversed(ops):
            if kind is Kind.UNARY_MINUS and raw:
                # a minus written before a number literal is part of it
                result = node(result.kind, (), -result.value, start)
            else:
                result = node(kind, (result,), None, start)
            raw = False
        return result

    def primary(self) -> tuple[Node, bool]:
        """The node, and whether it is a bare number literal."""
        i = self.i
        tok = self.texts[i]
        if not tok:
            raise Unusual               # the end, where an operand must be
        if i >= self.next_check:
            checkpoint()                # a long expression's parse may be cancelled
            self.next_check = i + _CHECK_EVERY
        start = self.starts[i]
        self.i = i + 1
        c = tok[0]
        if c == '"' or c == "'":
            return string_leaf(tok, start), False
        if "0" <= c <= "9":
            return number_leaf(tok, start), True
        if c == "(":
            self.parens += 1
            if self.parens > MAX_DEPTH:
                raise Unusual
            inner = self.logical()
            if self.texts[self.i] != ")":
                raise Unusual
            self.i += 1
            self.parens -= 1
            return node(inner.kind, inner.children, inner.value, start), False
        if c.isalpha() or c == "_" or c == "\\" or c > "\x7f":
            if self.texts[self.i] == "(":
                return self.call(tok, start), False
            return node(Kind.NAME, (), unescape(tok) if "\\" in tok else tok, start), False
        raise Unusual                   # an operator where an operand must be

    def call(self, tok: str, start: int) -> Node:
        kind = FUNCTION_KINDS.get(unescape(tok) if "\\" in tok else tok)
        if kind is None:
            raise Unusual               # lark names the known functions
        self.i += 1                     # (
        self.parens += 1
        if self.parens > MAX_DEPTH:
            raise Unusual
        texts = self.texts
        args: list[Node] = []
        if texts[self.i] != ")":
            args.append(self.logical())
            while texts[self.i] == ",":
                self.i += 1
                args.append(self.logical())
        if texts[self.i] != ")":
            raise Unusual
        self.i += 1
        self.parens -= 1
        return node(kind, tuple(args), None, start)


def parse(text: str) -> Node:
    """The tree lark makes of ``text``, or ``Unusual`` (see the module doc).
    The caller has checked what ``parser.parse_tree`` checks before lark
    runs (a str, not blank, no NUL, no lone surrogate, parentheses)."""
    tokens = token_list(text)
    if tokens is None:
        raise Unusual
    starts, texts = tokens
    descent = _Descent(starts, texts)
    tree = descent.logical()
    if descent.i != len(texts):
        raise Unusual
    # the parser refuses a tree deeper than MAX_DEPTH (a leaf is one level,
    # an operator or a call one more, a chain one however long); only a
    # text of that many tokens can be
    if len(texts) > MAX_DEPTH and _deeper_than(tree, MAX_DEPTH):
        raise Unusual                   # lark says NESTING_TOO_DEEP
    return tree


def _deeper_than(tree: Node, limit: int) -> bool:
    """``tree_depth(tree) > limit`` for the parser's own trees (tuples of
    nodes), in half the time: a leaf is never pushed (a long expression's
    nodes are mostly leaves); its depth is its parent's plus one."""
    stack = [(tree, 1)]
    pop = stack.pop
    push = stack.append
    while stack:
        n, d = pop()
        children = n.children
        if children:
            if d >= limit:
                return True             # its children are deeper than the limit
            below = d + 1
            for child in children:
                if child.children:
                    push((child, below))
        elif d > limit:
            return True
    return False
