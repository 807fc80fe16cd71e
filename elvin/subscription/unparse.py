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

from elvin.subscription.ast import FUNCTION_NAMES, LITERAL_KINDS, Kind, Node
from elvin.subscription.checker import _OPS_TEXT

__all__ = ["unparse", "unparse_brief", "quote_name", "quote_string", "format_real"]

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
        return quote_string(node.value)  # type: ignore[arg-type]
    if k is Kind.INT32:
        return str(int(node.value))  # type: ignore[arg-type]
    if k is Kind.INT64:
        return f"{int(node.value)}L"  # type: ignore[arg-type]
    return format_real(node.value)  # type: ignore[arg-type]


def _unparse(node: Node, top: bool) -> str:
    k = node.kind
    if k is Kind.NAME:
        return quote_name(node.value)  # type: ignore[arg-type]
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
    op = _OPS_TEXT.get(k)
    if op is None or len(node.children) < 2:
        raise ValueError(f"cannot unparse a {k.name} node with {len(node.children)} children")
    text = f" {op} ".join(_unparse(c, False) for c in node.children)
    return text if top else f"({text})"


def unparse(node: Node) -> str:
    """Canonical text for ``node``; ``parse(unparse(node)) == node``."""
    return _unparse(node, True)


def unparse_brief(node: Node, limit: int = 60) -> str:
    """Short text of a sub-expression for error messages."""
    try:
        text = _unparse(node, True)
    except (ValueError, TypeError, AttributeError):
        text = node.kind.name if isinstance(node, Node) else repr(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."
