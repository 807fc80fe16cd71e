"""Tree -> canonical subscription text.

``parse(unparse(tree)) == tree`` for every tree ``parse`` can return and
every valid tree from the wire. Every operator is parenthesised except the
outermost one; strings are written in double
quotes with ``"`` and ``\\`` escaped; names escape (with ``\\``) every
character that may not appear unescaped in that place; int64 literals get
an ``L``; reals are written with ``repr`` (shortest round-tripping form)
and always carry a ``.``, e.g. ``1.0e300``. A unary minus applied to a
number literal is written ``-(5)`` so that it does not become the literal
``-5``.

A logical node with n operands is written as one chain, ``(a || b || c)``,
which the parser turns back into the same n-ary node. A logical node whose
operand is a node of the same kind (``OR(OR(a, b), c)``, from the wire or
from the text ``(a || b) || c``) gets that operand parenthesised, like any
other operand, so it parses back with the same shape: ``validate`` does not
flatten trees, and the evaluator and analyses treat both shapes alike.
"""

from __future__ import annotations

import math

from elvin.subscription.ast import FUNCTION_NAMES, LITERAL_KINDS, OPERATOR_TEXT, Kind, Node

__all__ = ["unparse", "unparse_brief", "quote_name", "quote_string", "format_real",
           "implicit_groupings"]

_UNARY = {Kind.NOT: "!", Kind.UNARY_MINUS: "-", Kind.UNARY_PLUS: "+", Kind.BIT_NEGATE: "~"}
_RESERVED = set("\"'(),[\\]")


def _id_first(c: str) -> bool:
    if c.isascii():
        return c.isalpha() or c == "_"
    return not c.isspace()


def _id_char(c: str) -> bool:
    if c.isascii():
        return "\x21" <= c <= "\x7e" and c not in _RESERVED
    return not c.isspace()


def quote_name(name: str) -> str:
    if not name:
        raise ValueError("attribute names may not be empty")
    out = [name[0] if _id_first(name[0]) else "\\" + name[0]]
    for c in name[1:]:
        out.append(c if _id_char(c) else "\\" + c)
    return "".join(out)


def quote_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_real(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"real64 {value} has no literal form")
    text = repr(float(value))
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    if e:
        return f"{mantissa}e{int(exponent)}"
    return mantissa


def _literal(node: Node) -> str:
    k = node.kind
    if k is Kind.STRING:
        return quote_string(node.value)
    if k is Kind.INT32:
        return str(int(node.value))
    if k is Kind.INT64:
        return f"{int(node.value)}L"
    return format_real(node.value)


def _unparse(node: Node, top: bool) -> str:
    k = node.kind
    if k is Kind.NAME:
        return quote_name(node.value)
    if k in LITERAL_KINDS:
        return _literal(node)
    if k in _UNARY:
        child = node.children[0]
        text = _unparse(child, False)
        if k is not Kind.NOT and child.kind in LITERAL_KINDS and child.kind is not Kind.STRING:
            text = f"({text})"
        return _UNARY[k] + text
    if k in FUNCTION_NAMES:
        args = ", ".join(_unparse(c, True) for c in node.children)
        return f"{FUNCTION_NAMES[k]}({args})"
    op = OPERATOR_TEXT.get(k)
    if op is None or len(node.children) < 2:
        raise ValueError(f"cannot unparse a {k.name} node with {len(node.children)} children")
    text = f" {op} ".join(_unparse(c, False) for c in node.children)
    return text if top else f"({text})"


def unparse(node: Node) -> str:
    """Canonical text for ``node``; ``parse(unparse(node)) == node``."""
    return _unparse(node, True)


_ARITHMETIC = frozenset({Kind.ADD, Kind.SUBTRACT, Kind.MULTIPLY, Kind.DIVIDE, Kind.MODULO})
_BITWISE = frozenset({Kind.SHIFT_LEFT, Kind.SHIFT_RIGHT, Kind.LOGICAL_SHIFT_RIGHT,
                      Kind.BIT_AND, Kind.BIT_OR, Kind.BIT_XOR})
_MATH = _ARITHMETIC | _BITWISE


def implicit_groupings(tree: Node, text: str) -> list[str]:
    """The sub-expressions of ``tree`` (parsed from ``text``) that mix shift
    or bitwise operators with others and whose grouping the precedence rules
    decided, each written with its parentheses: ``A | 2 + 1 > 3`` gives
    ``["(A | 2) + 1"]``.

    The language's order of those operators is not C's (``+ -`` bind
    loosest, ``&`` tightest), so an editor shows this to say how such an
    expression is read; plain arithmetic (``B * 2 + 1``) reads as anyone
    expects and is left out. An operand the user put in parentheses is not
    implicit (a node's ``pos`` is then its ``(``; a parenthesised left
    operand, as in ``(A) & 1 | 2``, looks the same and hides the hint).
    """
    found: list[str] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if node.kind not in _MATH:
            stack.extend(reversed(node.children))
            continue
        region, outside = _implicit_region(node, text)
        if len(region) > 1 and any(n.kind in _BITWISE for n in region):
            found.append(_unparse(node, True))
        stack.extend(reversed(outside))
    return found


def _implicit_region(node: Node, text: str) -> tuple[list[Node], list[Node]]:
    """(``node`` and the math operators grouped with it by precedence alone,
    the operands around that region)."""
    region = [node]
    outside: list[Node] = []
    stack = list(reversed(node.children))
    while stack:
        child = stack.pop()
        if child.kind in _MATH and not (0 <= child.pos < len(text) and text[child.pos] == "("):
            region.append(child)
            stack.extend(reversed(child.children))
        else:
            outside.append(child)
    return region, outside


def unparse_brief(node: Node, limit: int = 60) -> str:
    """Short text of a sub-expression for error messages."""
    try:
        text = _unparse(node, True)
    except (ValueError, TypeError, AttributeError):
        text = node.kind.name if isinstance(node, Node) else repr(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."
