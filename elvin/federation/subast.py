"""SubAST as federation routers exchange it (FedSubReplace pull filters).

The federation draft carries a ``SubAST pull_filter`` and refers to the client
protocol's ``union SubAST`` (8.2.3.4), whose concrete encoding the drafts
leave open (the union's arms are named but no value layout is given).
Avis, the reference implementation we must interoperate with
(``org.avis.federation.io.XdrAstCoding`` / ``XdrAstParser``), writes every
node as::

    int32 subast_typecode
    int32 value_typecode   (1 int32, 2 int64, 3 real64, 4 string for leaves;
                            0 for every node with children)
    leaf:   the value (XDR int / hyper / double / string)
    other:  int32 child count, then the children

and a lone ``empty_tc`` (0), with nothing after it, for the constant FALSE.
We write and read exactly that. (The quench packets of ``elvin.protocol.xdr``
use the plainer union layout without the value typecode: that is a different
wire form for a different packet family, so federation has its own codec
here, built on the same XDR primitives.)

Pull filters also need the constants "everything" and "nothing", which the
subscription language does not have. ``PullFilter = Node | bool``:

* ``False`` travels as ``empty_tc`` (as Avis does).
* ``True`` has no encoding of its own (Avis refuses to encode TRUE:
  "Cannot encode TRUE in AST"), so we send the constant comparison
  ``1 == 1``: it is the only tree that is true for every notification
  (anything naming an attribute is bottom where the attribute is missing,
  ``!require(x)`` included). Avis folds it to TRUE on receipt
  (``inlineConstants``); our checker calls such a tree trivial, so
  ``decode_subast`` recognises it and gives back ``True``, and
  ``pullfilter.compile_pull_filter`` evaluates any other constant tree.

Decoding is iterative (no input can exhaust the stack), checks every count
against the bytes that remain before allocating, and enforces the
``Limits``' depth, array and string sizes; errors are ``ProtocolError``.
Avis-isms accepted on input: ``func_equals_tc`` with two children (Avis
sends ``a == b`` that way) becomes ``==``; ``unary_plus`` is kept; an
``empty_tc`` child of an OR is dropped (FALSE is the identity of OR).
"""

from __future__ import annotations

import struct

from elvin.errors import ProtocolError
from elvin.protocol.limits import DEFAULT_LIMITS, LimitError, Limits
from elvin.protocol.xdrprim import (
    INT32,
    INT64,
    REAL64,
    TC_INT32,
    TC_INT64,
    TC_REAL64,
    TC_STRING,
    add_child,
    put_string,
    read_count,
    read_string,
)
from elvin.subscription.ast import LEAF_KINDS, LITERAL_KINDS, Kind, Node, const, op
from elvin.values import INT32_MAX, INT32_MIN, Int64

__all__ = ["TRUE_FILTER_AST", "PullFilter", "decode_subast", "encode_subast"]

PullFilter = Node | bool

#: how TRUE ("everything") travels: ``1 == 1``
TRUE_FILTER_AST = op(Kind.EQUALS, const(Kind.INT32, 1), const(Kind.INT32, 1))

_LEAF_VALUE_TC = {Kind.NAME: TC_STRING, Kind.STRING: TC_STRING, Kind.INT32: TC_INT32,
                  Kind.INT64: TC_INT64, Kind.REAL64: TC_REAL64}
_KINDS = {int(k): k for k in Kind}
# the labels of errors, made once: an Enum's ``name`` costs a property call per node
_STRING_WHAT = {Kind.NAME: "SubAST name", Kind.STRING: "SubAST string"}
_CHILDREN_WHAT = {k: f"SubAST {k.name} children" for k in Kind}

_i32 = INT32.unpack_from
_i64 = INT64.unpack_from
_f64 = REAL64.unpack_from
_p_i32 = INT32.pack
_p_ii = struct.Struct(">ii").pack
_p_iii = struct.Struct(">iii").pack
_p_iiq = struct.Struct(">iiq").pack
_p_iid = struct.Struct(">iid").pack


# --------------------------------------------------------------------------
# encoding

def encode_subast_into(b: bytearray, node: PullFilter) -> None:
    """Append the federation wire form of ``node`` (or True/False) to ``b``."""
    if node is False:
        b += _p_i32(int(Kind.EMPTY))
        return
    if node is True:
        node = TRUE_FILTER_AST
    if not isinstance(node, Node):
        raise TypeError(f"a pull filter is a Node or a bool, not {type(node).__name__}")
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        kind = Kind(n.kind)
        if kind is Kind.EMPTY:
            b += _p_i32(0)
        elif kind in LEAF_KINDS:
            value = n.value
            if kind is Kind.NAME or kind is Kind.STRING:
                b += _p_ii(int(kind), TC_STRING)
                put_string(b, value, f"SubAST {kind.name} value")
            elif kind is Kind.INT32:
                if isinstance(value, bool) or not isinstance(value, int) or \
                        not INT32_MIN <= value <= INT32_MAX:
                    raise ValueError(f"SubAST int32 value {value!r} out of range")
                b += _p_iii(int(kind), TC_INT32, value)
            elif kind is Kind.INT64:
                b += _p_iiq(int(kind), TC_INT64, int(value))
            else:
                b += _p_iid(int(kind), TC_REAL64, float(value))
        else:
            b += _p_iii(int(kind), 0, len(n.children))
            stack.extend(reversed(n.children))


def encode_subast(node: PullFilter) -> bytes:
    b = bytearray()
    try:
        encode_subast_into(b, node)
    except struct.error as exc:
        raise ValueError(f"cannot encode SubAST: {exc}") from None
    return bytes(b)


# --------------------------------------------------------------------------
# decoding

_EMPTY = object()   # marker for a decoded empty_tc (FALSE) below the root


def _finish(kind: Kind, children: list, o: int) -> object:
    if kind is Kind.OR:
        children = [c for c in children if c is not _EMPTY]
        if not children:
            return _EMPTY
        if len(children) == 1:
            return children[0]
    elif any(c is _EMPTY for c in children):
        raise ProtocolError(f"SubAST: empty_tc (FALSE) as an operand of {kind.name}", o)
    if kind is Kind.FUNC_EQUALS and len(children) == 2 and (
            children[0].kind is not Kind.NAME or children[1].kind not in LITERAL_KINDS):
        kind = Kind.EQUALS     # Avis's encoding of ``a == b`` (any two operands)
    return Node(kind, tuple(children))


def decode_subast(data: bytes, offset: int = 0, limits: Limits = DEFAULT_LIMITS,
                  end: int | None = None) -> tuple[PullFilter, int]:
    """Decode one SubAST at ``offset``: ``(Node | True | False, end_offset)``.

    The tree is only checked for its encoding here; ``elvin.subscription``'s
    ``validate``/``compile`` checks its meaning."""
    if end is None:
        end = len(data)
    try:
        return _decode(data, offset, end, limits)
    except struct.error:
        raise ProtocolError("truncated SubAST", end) from None


def _decode(data: bytes, o: int, end: int, limits: Limits) -> tuple[PullFilter, int]:
    stack: list[tuple[Kind, int, list]] = []
    max_depth = limits.max_ast_depth
    max_string = limits.max_string_length
    max_array = limits.max_array_length
    while True:
        (tc,) = _i32(data, o)
        start = o
        o += 4
        if tc == 0:
            node: object = _EMPTY
        else:
            kind = _KINDS.get(tc)
            if kind is None:
                raise ProtocolError(f"unknown SubAST typecode {tc}", start)
            (vtc,) = _i32(data, o)
            o += 4
            if kind in LEAF_KINDS:
                want = _LEAF_VALUE_TC[kind]
                if vtc != want:
                    raise ProtocolError(f"SubAST {kind.name} leaf with value typecode {vtc} "
                                        f"(expected {want})", start + 4)
                if want == TC_STRING:
                    text, o = read_string(data, o, end, _STRING_WHAT[kind],
                                          max_string, "max_string_length")
                    node = Node(kind, value=text)
                elif want == TC_INT32:
                    node = Node(kind, value=_i32(data, o)[0])
                    o += 4
                elif want == TC_INT64:
                    node = Node(kind, value=Int64(_i64(data, o)[0]))
                    o += 8
                else:
                    node = Node(kind, value=_f64(data, o)[0])
                    o += 8
            else:
                if vtc != 0:
                    raise ProtocolError(f"SubAST {kind.name} node with value typecode {vtc} "
                                        "(expected 0)", start + 4)
                # a child takes at least 4 bytes (a lone empty_tc)
                n, o = read_count(data, o, end, _CHILDREN_WHAT[kind], 4,
                                  max_array, "max_array_length")
                if n:
                    if len(stack) >= max_depth:
                        raise LimitError(f"SubAST nesting deeper than {max_depth}", start,
                                         "max_ast_depth")
                    stack.append((kind, n, []))
                    continue
                node = _finish(kind, [], start)
        if o > end:
            raise ProtocolError("truncated SubAST", end)
        root = add_child(stack, node, _finish, o)
        if root is not None:
            if root is _EMPTY:
                return False, o
            if root == TRUE_FILTER_AST:
                return True, o
            return root, o
