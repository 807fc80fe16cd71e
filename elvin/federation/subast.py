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
from elvin.subscription.ast import LEAF_KINDS, LITERAL_KINDS, Kind, Node, const, op
from elvin.values import INT32_MAX, INT32_MIN, Int64

__all__ = ["TRUE_FILTER_AST", "PullFilter", "decode_subast", "encode_subast"]

PullFilter = Node | bool

#: how TRUE ("everything") travels: ``1 == 1``
TRUE_FILTER_AST = op(Kind.EQUALS, const(Kind.INT32, 1), const(Kind.INT32, 1))

# value typecodes (client protocol 8.2.3.3)
_TC_INT32, _TC_INT64, _TC_REAL64, _TC_STRING = 1, 2, 3, 4
_LEAF_VALUE_TC = {Kind.NAME: _TC_STRING, Kind.STRING: _TC_STRING, Kind.INT32: _TC_INT32,
                  Kind.INT64: _TC_INT64, Kind.REAL64: _TC_REAL64}
_KINDS = {int(k): k for k in Kind}
_PAD = (b"", b"\0\0\0", b"\0\0", b"\0")

_i32 = struct.Struct(">i").unpack_from
_u32 = struct.Struct(">I").unpack_from
_i64 = struct.Struct(">q").unpack_from
_f64 = struct.Struct(">d").unpack_from
_p_i32 = struct.Struct(">i").pack
_p_ii = struct.Struct(">ii").pack
_p_iii = struct.Struct(">iii").pack
_p_iiq = struct.Struct(">iiq").pack
_p_iid = struct.Struct(">iid").pack


# --------------------------------------------------------------------------
# encoding

def _put_string(b: bytearray, text: str) -> None:
    if "\0" in text:
        raise ValueError("SubAST strings may not contain NUL")
    raw = text.encode("utf-8")
    b += _p_i32(len(raw))
    b += raw
    b += _PAD[len(raw) & 3]


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
                b += _p_ii(int(kind), _TC_STRING)
                _put_string(b, value)  # type: ignore[arg-type]
            elif kind is Kind.INT32:
                if isinstance(value, bool) or not isinstance(value, int) or \
                        not INT32_MIN <= value <= INT32_MAX:
                    raise ValueError(f"SubAST int32 value {value!r} out of range")
                b += _p_iii(int(kind), _TC_INT32, value)
            elif kind is Kind.INT64:
                b += _p_iiq(int(kind), _TC_INT64, int(value))  # type: ignore[arg-type]
            else:
                b += _p_iid(int(kind), _TC_REAL64, float(value))  # type: ignore[arg-type]
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


def _read_string(data: bytes, o: int, end: int, limit: int) -> tuple[str, int]:
    (n,) = _u32(data, o)
    s = o + 4
    if n > end - s:
        raise ProtocolError(f"SubAST string length {n} exceeds the {end - s} bytes remaining",
                            o)
    if n > limit:
        raise LimitError(f"SubAST string of {n} bytes exceeds the limit of {limit}", o,
                         "max_string_length")
    try:
        text = data[s:s + n].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"invalid UTF-8 in a SubAST string ({exc.reason})", s) from None
    if "\0" in text:
        raise ProtocolError("NUL character in a SubAST string", s)
    return text, s + n + (-n & 3)


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
                if want == _TC_STRING:
                    text, o = _read_string(data, o, end, max_string)
                    node = Node(kind, value=text)
                elif want == _TC_INT32:
                    node = Node(kind, value=_i32(data, o)[0])
                    o += 4
                elif want == _TC_INT64:
                    node = Node(kind, value=Int64(_i64(data, o)[0]))
                    o += 8
                else:
                    node = Node(kind, value=_f64(data, o)[0])
                    o += 8
            else:
                if vtc != 0:
                    raise ProtocolError(f"SubAST {kind.name} node with value typecode {vtc} "
                                        "(expected 0)", start + 4)
                (n,) = _i32(data, o)
                if n < 0:
                    raise ProtocolError(f"SubAST {kind.name}: negative child count {n}", o)
                if n * 4 > end - o - 4:
                    raise ProtocolError(f"SubAST {kind.name}: {n} children cannot fit in the "
                                        f"{end - o - 4} bytes remaining", o)
                o += 4
                if n:
                    if len(stack) >= max_depth:
                        raise LimitError(f"SubAST nesting deeper than {max_depth}", start,
                                         "max_ast_depth")
                    stack.append((kind, n, []))
                    continue
                node = _finish(kind, [], start)
        if o > end:
            raise ProtocolError("truncated SubAST", end)
        while stack:
            parent_kind, count, children = stack[-1]
            children.append(node)
            if len(children) < count:
                break
            stack.pop()
            node = _finish(parent_kind, children, o)
        else:
            if node is _EMPTY:
                return False, o
            if node == TRUE_FILTER_AST:
                return True, o
            return node, o  # type: ignore[return-value]
