"""The subscription abstract syntax tree, shaped as the protocol's SubAST.

Node kinds are the ``subast_typecode`` values of section 8.2.3.4 of the client
protocol, so the codec can ship a tree to quenchers and federated routers with
no translation table, and the router, quench helpers and the Spark back-test
all walk the same tree.

Leaves (``NAME``, ``INT32``, ``INT64``, ``REAL64``, ``STRING``) carry ``value``;
every other kind carries ``children``. ``pos`` is the character offset in the
source text (for error messages) and takes no part in equality.

Two trees are equal when they mean the same: real64 literals compare by
their bits, as the language compares reals (``x == -0.0`` and ``x == 0.0``
are different subscriptions; a NaN literal, which only folding or the wire
can make, equals a NaN literal). The router shares one compiled predicate
among equal trees, so Python's ``-0.0 == 0.0`` must not decide that.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from elvin.subscription.runtime import real_key


class Kind(IntEnum):
    EMPTY = 0
    NAME = 1
    INT32 = 2
    INT64 = 3
    REAL64 = 4
    STRING = 5

    EQUALS = 8
    NOT_EQUALS = 9
    LESS_THAN = 10
    LESS_THAN_EQUALS = 11
    GREATER_THAN = 12
    GREATER_THAN_EQUALS = 13

    OR = 16
    XOR = 17
    AND = 18
    NOT = 19

    UNARY_PLUS = 20
    UNARY_MINUS = 21
    MULTIPLY = 22
    DIVIDE = 23
    MODULO = 24
    ADD = 25
    SUBTRACT = 26

    SHIFT_LEFT = 27
    SHIFT_RIGHT = 28
    LOGICAL_SHIFT_RIGHT = 29
    BIT_AND = 30
    BIT_XOR = 31
    BIT_OR = 32
    BIT_NEGATE = 33

    FUNC_INT32 = 40
    FUNC_INT64 = 41
    FUNC_REAL64 = 42
    FUNC_STRING = 43
    FUNC_OPAQUE = 44
    FUNC_NAN = 45

    FUNC_BEGINS_WITH = 48
    FUNC_CONTAINS = 49
    FUNC_ENDS_WITH = 50
    FUNC_WILDCARD = 51
    FUNC_REGEX = 52

    FUNC_FOLD_CASE = 56
    FUNC_DECOMPOSE = 57
    FUNC_DECOMPOSE_COMPAT = 58

    FUNC_REQUIRE = 64
    FUNC_EQUALS = 65
    FUNC_SIZE = 66


#: Deepest nesting of parentheses / operators / function calls accepted (a
#: leaf is one level, each operator or call one more, an n-ary logical chain
#: one however long).
MAX_DEPTH = 64

LEAF_KINDS = frozenset({Kind.NAME, Kind.INT32, Kind.INT64, Kind.REAL64, Kind.STRING})
LITERAL_KINDS = frozenset({Kind.INT32, Kind.INT64, Kind.REAL64, Kind.STRING})

#: Function names of the language, by node kind.
FUNCTION_NAMES: dict[Kind, str] = {
    Kind.FUNC_INT32: "int32",
    Kind.FUNC_INT64: "int64",
    Kind.FUNC_REAL64: "real64",
    Kind.FUNC_STRING: "string",
    Kind.FUNC_OPAQUE: "opaque",
    Kind.FUNC_NAN: "nan",
    Kind.FUNC_BEGINS_WITH: "begins-with",
    Kind.FUNC_CONTAINS: "contains",
    Kind.FUNC_ENDS_WITH: "ends-with",
    Kind.FUNC_WILDCARD: "wildcard",
    Kind.FUNC_REGEX: "regex",
    Kind.FUNC_FOLD_CASE: "fold-case",
    Kind.FUNC_DECOMPOSE: "decompose",
    Kind.FUNC_DECOMPOSE_COMPAT: "decompose-compat",
    Kind.FUNC_REQUIRE: "require",
    Kind.FUNC_EQUALS: "equals",
    Kind.FUNC_SIZE: "size",
}
FUNCTION_KINDS: dict[str, Kind] = {name: kind for kind, name in FUNCTION_NAMES.items()}

#: How each operator is written (the unary ones as messages name them): the
#: one table the checker's messages and ``unparse`` share.
OPERATOR_TEXT: dict[Kind, str] = {
    Kind.OR: "||", Kind.XOR: "^^", Kind.AND: "&&", Kind.NOT: "!",
    Kind.EQUALS: "==", Kind.NOT_EQUALS: "!=", Kind.LESS_THAN: "<",
    Kind.LESS_THAN_EQUALS: "<=", Kind.GREATER_THAN: ">", Kind.GREATER_THAN_EQUALS: ">=",
    Kind.BIT_OR: "|", Kind.BIT_XOR: "^", Kind.BIT_AND: "&", Kind.SHIFT_LEFT: "<<",
    Kind.SHIFT_RIGHT: ">>", Kind.LOGICAL_SHIFT_RIGHT: ">>>", Kind.ADD: "+",
    Kind.SUBTRACT: "-", Kind.MULTIPLY: "*", Kind.DIVIDE: "/", Kind.MODULO: "%",
    Kind.UNARY_MINUS: "unary -", Kind.UNARY_PLUS: "unary +", Kind.BIT_NEGATE: "~",
}


def op_text(kind: Kind) -> str:
    """An operator's or function's spelling (for messages)."""
    return OPERATOR_TEXT.get(kind) or FUNCTION_NAMES.get(kind) or kind.name


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    kind: Kind
    children: tuple[Node, ...] = ()
    #: the kind says which: a str (NAME, STRING), an int (INT32, INT64), a float
    #: (REAL64), None (the rest). Any: one class for every kind, and mypy cannot tie
    #: a field's type to another field's value
    value: Any = None
    pos: int = field(default=-1, repr=False)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if other.__class__ is not Node:
            return NotImplemented
        if self.kind != other.kind:
            return False
        a, b = self.value, other.value
        if a.__class__ is float and b.__class__ is float:
            if real_key(a) != real_key(b):
                return False
        elif a != b:
            return False
        return self.children == other.children

    def __hash__(self) -> int:
        value = self.value
        if value.__class__ is float:
            value = real_key(value)
        return hash((self.kind, self.children, value))

    @property
    def is_leaf(self) -> bool:
        return self.kind in LEAF_KINDS

    def walk(self) -> Iterator[Node]:
        """Every node of the tree, parents before children."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


def name(attribute: str, pos: int = -1) -> Node:
    return Node(Kind.NAME, value=attribute, pos=pos)


def const(kind: Kind, value: int | float | str, pos: int = -1) -> Node:
    return Node(kind, value=value, pos=pos)


def op(kind: Kind, *children: Node, pos: int = -1) -> Node:
    return Node(kind, tuple(children), pos=pos)


def flatten(node: Node) -> list[Node]:
    """The operands of an ``&&``, ``||`` or ``^^`` chain, left to right:
    ``a && (b && c)`` and ``(a && b) && c`` both give ``[a, b, c]``. The
    parser, the wire and the folder make either nesting, and ``&&``, ``||``
    and ``^^`` are associative, so every walker treats them alike; an operand
    of another kind (the ``b || c`` of ``a && (b || c)``) stays whole."""
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind is node.kind:
            stack.extend(reversed(n.children))
        else:
            out.append(n)
    return out


def name_equals_literals(node: Node) -> tuple[str, tuple[Node, ...]] | None:
    """``(attribute, literals)`` when ``node`` is ``name == literal`` (either
    way round) or ``equals(name, literal, ...)``: true only when one
    attribute's value equals one of some constants. The router's index and
    the compiler's merging of such tests both start from this."""
    k = node.kind
    if k is Kind.EQUALS:
        a, b = node.children
        if a.kind in LITERAL_KINDS:
            a, b = b, a
        if a.kind is Kind.NAME and b.kind in LITERAL_KINDS:
            return a.value, (b,)
        return None
    if k is Kind.FUNC_EQUALS:
        first, *rest = node.children
        if first.kind is Kind.NAME and all(r.kind in LITERAL_KINDS for r in rest):
            return first.value, tuple(rest)
    return None


def names_in(node: Node) -> frozenset[str]:
    """Every attribute name the tree refers to, ``require(x)``'s included:
    the router's index and the quench helpers ask "can this notification
    decide it?", so any mention counts."""
    names: set[str] = set()
    stack = [node]
    pop, extend, add = stack.pop, stack.extend, names.add
    while stack:
        n = pop()
        if n.children:
            extend(n.children)
        elif n.kind is Kind.NAME:
            add(n.value)
    return frozenset(names)


def names_in_order(node: Node) -> list[str]:
    """``names_in`` as a list in source order (first mention wins), for
    messages and generated columns that must read and come out the same way
    every time."""
    return list(dict.fromkeys(n.value for n in node.walk()
                              if n.kind is Kind.NAME))


def tree_depth(node: Node) -> int:
    """Depth of a tree, computed without recursion (1 for a leaf)."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        if d > deepest:
            deepest = d
        if d > MAX_DEPTH + 1:
            return d
        children = getattr(n, "children", ())
        if isinstance(children, (tuple, list)):
            for child in children:
                stack.append((child, d + 1))
    return deepest
