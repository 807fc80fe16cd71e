"""Static checks and constant folding of subscription trees.

``check(tree)`` enforces what the spec asks of a subscription at
registration time -- every construct has operands of a usable type, every
function the right number and kind of arguments, literals fit their types,
regular expressions and wildcards compile, nothing nests deeper than
``MAX_DEPTH`` and the expression does not reduce to a constant -- and raises
``SubscriptionError`` with the spec's code and the position of the culprit.
``fold(tree)`` gives the same tree with constant value sub-expressions
replaced by literals, for the compiler and the analyses.

Static types: ``bool`` (a predicate), ``int32``, ``int64``, ``real64``,
``string``, and the partial knowledge ``int`` (int32 or int64), ``number``
(some numeric type) and ``any`` (an attribute: could be anything). A type
is only reported as a mismatch when it is certain: ``x + 1`` is fine
whatever ``x`` turns out to be at run time (bottom if it is not a number).

Rules beyond the spec's wording, following Avis where it has an opinion:

* Logical operators take predicates only: ``x > 3 || 42`` and ``x || y`` are
  TYPE_MISMATCH; so is a whole expression that is not a predicate (``2``,
  ``'a'``, ``name``). ``&&``, ``||`` and ``^^`` nodes take two or more
  operands (the parser makes one n-ary node of a chain).
* Comparisons take values, not predicates; ``==``/``!=`` between a string
  and a number, ordering (``<`` ...) of strings, arithmetic on strings,
  ``<< >> >>> & | ^ ~`` on reals are TYPE_MISMATCH. ``%`` takes reals (Java's
  remainder, as Avis; a FIXME in the spec).
* EXP_IS_TRIVIAL only when the WHOLE expression reduces to a constant
  (spec: "When compiled, the expression reduced to a constant value"):
  constants are folded with the three-valued logic, so ``1 == 1``,
  ``x > 5 || 1 == 1`` (always true), ``x > 5 && 1 == 2`` (always false)
  and ``x > 1 / 0`` (always bottom: a comparison with a bottom operand) are
  trivial, but ``x == 1 || 1 == 2``, ``1 == 1 ^^ x == 1`` (that is
  ``!(x == 1)`` where x exists) and ``1 / 0 == 1 || x == 1`` are not: they
  are accepted and evaluated as written.
* require/int32/int64/real64/string/opaque/nan/size take one attribute name.
  begins-with/ends-with/contains/wildcard/regex take a string-valued first
  argument (a name, or fold-case/decompose/decompose-compat of one) and
  one or more string literals. fold-case/decompose/decompose-compat take
  one string-valued argument. equals takes two or more values; it means
  ``(a == b) || (a == c) || ...`` (as in Avis).
"""

from __future__ import annotations

import math
from functools import reduce

from elvin.errors import SubscriptionError
from elvin.subscription import runtime as rt
from elvin.subscription.ast import (
    FUNCTION_NAMES,
    LEAF_KINDS,
    LITERAL_KINDS,
    Kind,
    Node,
    op_text,
    tree_depth,
)
from elvin.subscription.cancel import checkpoint
from elvin.subscription.logic import Truth, and3, or3
from elvin.subscription.parser import MAX_DEPTH
from elvin.subscription.patterns import PatternError, compile_glob, compile_regex
from elvin.subscription.unparse import unparse_brief
from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64

__all__ = ["check", "fold", "validate_tree", "tree_depth", "TYPE_NAMES"]

BOOL, I32, I64, R64, STR, INT, NUM, ANY = "bool", "int32", "int64", "real64", "string", \
    "int", "number", "any"
TYPE_NAMES = (BOOL, I32, I64, R64, STR, INT, NUM, ANY)

_NUMERIC = {I32, I64, R64, INT, NUM, ANY}
_INTEGRAL = {I32, I64, INT, NUM, ANY}
_KNOWN_NUMERIC = {I32, I64, R64, INT, NUM}
_STRINGY = {STR, ANY}
_COMPARABLE = _NUMERIC | {STR}

COMPARISONS = {Kind.EQUALS, Kind.NOT_EQUALS, Kind.LESS_THAN, Kind.LESS_THAN_EQUALS,
               Kind.GREATER_THAN, Kind.GREATER_THAN_EQUALS}
LOGICAL = {Kind.AND, Kind.OR, Kind.XOR}
ARITHMETIC = {Kind.ADD: rt.add, Kind.SUBTRACT: rt.sub, Kind.MULTIPLY: rt.mul,
              Kind.DIVIDE: rt.div, Kind.MODULO: rt.mod}
INTEGER_OPS = {Kind.SHIFT_LEFT: rt.shl, Kind.SHIFT_RIGHT: rt.shr,
               Kind.LOGICAL_SHIFT_RIGHT: rt.ushr, Kind.BIT_AND: rt.bit_and,
               Kind.BIT_OR: rt.bit_or, Kind.BIT_XOR: rt.bit_xor}
BINARY_VALUE_OPS = {**ARITHMETIC, **INTEGER_OPS}
UNARY_VALUE_OPS = {Kind.UNARY_MINUS: rt.neg, Kind.UNARY_PLUS: rt.pos, Kind.BIT_NEGATE: rt.inv}
COMPARE_FUNCS = {Kind.EQUALS: rt.eq, Kind.NOT_EQUALS: rt.ne, Kind.LESS_THAN: rt.lt,
                 Kind.LESS_THAN_EQUALS: rt.le, Kind.GREATER_THAN: rt.gt,
                 Kind.GREATER_THAN_EQUALS: rt.ge}
TYPE_PREDICATES = {Kind.FUNC_REQUIRE, Kind.FUNC_INT32, Kind.FUNC_INT64, Kind.FUNC_REAL64,
                   Kind.FUNC_STRING, Kind.FUNC_OPAQUE, Kind.FUNC_NAN}
STRING_PREDICATES = {Kind.FUNC_BEGINS_WITH, Kind.FUNC_CONTAINS, Kind.FUNC_ENDS_WITH,
                     Kind.FUNC_WILDCARD, Kind.FUNC_REGEX}
STRING_FUNCTIONS = {Kind.FUNC_FOLD_CASE: rt.fold_case, Kind.FUNC_DECOMPOSE: rt.decompose,
                    Kind.FUNC_DECOMPOSE_COMPAT: rt.decompose_compat}
_BOTTOM = object()   # a constant whose value is bottom

_DESCRIBE = {
    BOOL: "a predicate (true/false)", I32: "an int32", I64: "an int64", R64: "a real64",
    STR: "a string", INT: "an integer", NUM: "a number",
    ANY: "an attribute value (of unknown type)",
}


_WORDS = {True: "true", False: "false", None: "bottom"}
_TRUE: Truth = True       # (reduce's start, typed as the three-valued logic's)
_FALSE: Truth = False
_DIVISION_BY_ZERO = "bottom (an integer division or remainder by zero)"


_WHERE: dict[Kind, str] = {}


def _where(kind: Kind) -> str:
    """How messages name an operator's operands' place (``'&&'``)."""
    where = _WHERE.get(kind)
    if where is None:
        where = _WHERE[kind] = f"'{op_text(kind)}'"
    return where


class _Info:
    """What the checker knows of a sub-expression: its static type and, for
    a constant, its value (True / False / None for a predicate, the value
    or ``_BOTTOM`` for a value) and ``why``: ``(node, reason)``, the
    sub-expression that makes it constant, for the EXP_IS_TRIVIAL message
    and position."""

    __slots__ = ("type", "const", "value", "why")

    def __init__(self, type_: str, const: bool = False, value: object = None,
                 why: tuple[Node, str] | None = None) -> None:
        self.type = type_
        self.const = const
        self.value = value   # for constants: the value, or _BOTTOM
        self.why = why

    @property
    def bottom(self) -> bool:
        """A constant value that is always bottom."""
        return self.const and self.value is _BOTTOM


#: what is known of most sub-expressions: an attribute's value, a predicate
#: that is not constant (``_Info`` is never changed once made: shared)
_ATTRIBUTE = _Info(ANY)
_PREDICATE = _Info(BOOL)
_NUMBER_LEAVES = frozenset({Kind.INT32, Kind.INT64, Kind.REAL64})
_EQUALITIES = frozenset({Kind.EQUALS, Kind.NOT_EQUALS})


def _constant_predicate(node: Node, value: bool | None) -> _Info:
    return _Info(BOOL, True, value, (node, _WORDS[value]))


def _fold_logical(node: Node, kind: Kind, infos: list[_Info]) -> _Info:
    """Three-valued constant folding of ``&&``, ``||`` and ``^^``: constant
    when an operand decides it (false for ``&&``, true for ``||``, bottom
    for ``^^``) or when every operand is constant."""
    decisive = {Kind.AND: False, Kind.OR: True, Kind.XOR: None}[kind]
    for info in infos:
        if info.const and info.value is decisive:
            return _Info(BOOL, True, decisive, info.why)
    if not all(info.const for info in infos):
        return _PREDICATE
    # a constant predicate's value is a Truth (the _Info of a value holds any object)
    values: list[Truth] = [info.value for info in infos]  # type: ignore[misc]  # a constant predicate's value is a Truth
    if kind is Kind.AND:
        value: Truth = reduce(and3, values, _TRUE)
    elif kind is Kind.OR:
        value = reduce(or3, values, _FALSE)
    else:
        value = sum(1 for v in values if v) % 2 == 1
    if value is None:       # bottom comes from a bottom operand: name that one
        return next(info for info in infos if info.value is None)
    return _constant_predicate(node, value)


def _literal_type(value: object) -> str:
    r = rt.rank(value)
    if r == rt.I32:
        return I32
    if r == rt.I64:
        return I64
    if r == rt.R64:
        return R64
    if type(value) is str:
        return STR
    return ANY


class _Checker:
    def __init__(self, text: str | None) -> None:
        self.text = text

    # -- errors -----------------------------------------------------------
    def error(self, code: str, message: str, node: Node | None,
              *args: object) -> SubscriptionError:
        pos = node.pos if node is not None and node.pos >= 0 else None
        full_args = (pos, *args) if pos is not None else args
        return SubscriptionError(code, message, pos, self.text, full_args)

    def mismatch(self, node: Node, info: _Info, wanted: str, where: str) -> SubscriptionError:
        shown = unparse_brief(node)
        got = _DESCRIBE[info.type]
        hint = ""
        if node.kind is Kind.NAME and any(c in str(node.value) for c in "=<>!&|^+-*/%~"):
            hint = (" (operators must be separated from names by white space: "
                    f"{str(node.value)!r} is read as one attribute name)")
        return self.error("TYPE_MISMATCH", f"{where} needs {wanted}, but {shown} is {got}{hint}",
                          node, shown, info.type)

    # -- entry --------------------------------------------------------------
    def root(self, node: Node) -> _Info:
        info = self.visit(node)
        if info.type != BOOL:
            raise self.mismatch(node, info, "a predicate (a comparison or a test such as "
                                "require(name))", "a subscription")
        if info.const:
            raise self.trivial(node, info)
        return info

    def trivial(self, node: Node, info: _Info) -> SubscriptionError:
        """The whole expression is constant: say so, and where it comes from."""
        what = _WORDS.get(info.value, "bottom")  # type: ignore[call-overload]  # a Truth
        culprit, reason = info.why or (node, what)
        message = f"{unparse_brief(node)} is constant (always {what})"
        if culprit is not node:
            message += f": {unparse_brief(culprit)} is always {reason}"
        return self.error("EXP_IS_TRIVIAL", message + "; compare an attribute instead",
                          culprit)

    def predicate(self, node: Node, where: str) -> _Info:
        info = self.visit(node)
        if info.type != BOOL:
            raise self.mismatch(node, info, "predicates (comparisons or tests) as operands",
                                where)
        return info

    def value(self, node: Node, where: str, allowed: set[str], wanted: str) -> _Info:
        info = self.visit(node)
        if info.type not in allowed:
            raise self.mismatch(node, info, wanted, where)
        return info

    # -- dispatch -----------------------------------------------------------
    def visit(self, node: Node) -> _Info:
        k = node.kind
        if k in LEAF_KINDS:
            return self.leaf(node)
        if k in LOGICAL:
            checkpoint()            # a long chain's check may be cancelled
            where = _where(k)
            return _fold_logical(node, k, [self.predicate(child, where)
                                           for child in node.children])
        if k is Kind.NOT:
            info = self.predicate(node.children[0], "'!'")
            if info.const:
                return _Info(BOOL, True, None if info.value is None else not info.value,
                             info.why)
            return _PREDICATE
        if k in COMPARISONS:
            return self.comparison(node)    # (cheap: the chain it is in checkpoints)
        if k in BINARY_VALUE_OPS:
            return self.binary_value(node)
        if k in UNARY_VALUE_OPS:
            return self.unary_value(node)
        if k in TYPE_PREDICATES or k is Kind.FUNC_SIZE:
            return self.name_function(node)
        if k in STRING_PREDICATES:
            return self.string_predicate(node)
        if k in STRING_FUNCTIONS:
            return self.string_function(node)
        if k is Kind.FUNC_EQUALS:
            return self.equals_function(node)
        raise self.error("PARSE_ERROR", f"{k.name} is not an expression node", node, k.name)

    def leaf(self, node: Node) -> _Info:
        k, v = node.kind, node.value
        if k is Kind.NAME:
            return _ATTRIBUTE
        if k is Kind.INT32:
            if not INT32_MIN <= v <= INT32_MAX:
                raise self.error("OVERFLOW", f"{v} is too large for an int32 (add L for an "
                                 "int64)", node, str(v))
            return _Info(I32, True, int(v))
        if k is Kind.INT64:
            if not INT64_MIN <= v <= INT64_MAX:
                raise self.error("OVERFLOW", f"{v} is too large for an int64", node, f"{v}L")
            return _Info(I64, True, Int64(v))
        if k is Kind.REAL64:
            if not math.isfinite(v):
                raise self.error("OVERFLOW", f"real64 literal {v} is not finite", node, str(v))
            return _Info(R64, True, float(v))
        return _Info(STR, True, v)

    def comparison(self, node: Node) -> _Info:
        k = node.kind
        left, right = node.children
        # the commonest comparison, an attribute and a literal, can only fail
        # in the literal's own checks (an ordering of a string: the long way)
        lk, rk = left.kind, right.kind
        if lk is Kind.NAME:
            if rk in _NUMBER_LEAVES:
                self.leaf(right)
                return _PREDICATE
            if rk is Kind.STRING and k in _EQUALITIES:
                return _PREDICATE
        elif rk is Kind.NAME:
            if lk in _NUMBER_LEAVES:
                self.leaf(left)
                return _PREDICATE
            if lk is Kind.STRING and k in _EQUALITIES:
                return _PREDICATE
        where = _where(k)
        if k in (Kind.EQUALS, Kind.NOT_EQUALS):
            allowed, wanted = _COMPARABLE, "values (numbers or strings)"
        else:
            allowed, wanted = _NUMERIC, "numbers (strings cannot be ordered)"
        li = self.value(left, where, allowed, wanted)
        ri = self.value(right, where, allowed, wanted)
        if (li.type == STR or ri.type == STR) and (li.type in _KNOWN_NUMERIC
                                                   or ri.type in _KNOWN_NUMERIC):
            bad, info = right, ri
            raise self.mismatch(bad, info, "operands of the same kind (a string cannot "
                                "equal a number)", where)
        for info in (li, ri):
            if info.bottom:     # a comparison with a bottom operand is bottom
                return _Info(BOOL, True, None, info.why)
        if li.const and ri.const:
            return _constant_predicate(node, COMPARE_FUNCS[k](li.value, ri.value))
        return _PREDICATE

    def binary_value(self, node: Node) -> _Info:
        k = node.kind
        where = _where(k)
        integral = k in INTEGER_OPS
        allowed, wanted = (_INTEGRAL, "integers (int32 or int64)") if integral else \
            (_NUMERIC, "numbers")
        li = self.value(node.children[0], where, allowed, wanted)
        ri = self.value(node.children[1], where, allowed, wanted)
        types = {li.type, ri.type}
        if integral:
            result = I64 if I64 in types and types <= {I32, I64} else (
                I32 if types == {I32} else INT)
        elif R64 in types:
            result = R64
        elif types <= {I32, I64}:
            result = I64 if I64 in types else I32
        elif types <= {I32, I64, INT}:
            result = INT
        else:
            result = NUM
        for info in (li, ri):
            if info.bottom:     # so is every operation on one
                return _Info(result, True, _BOTTOM, info.why)
        if li.const and ri.const:
            value = BINARY_VALUE_OPS[k](li.value, ri.value)
            if value is None:
                return _Info(result, True, _BOTTOM, (node, _DIVISION_BY_ZERO))
            return _Info(result, True, value)
        return _Info(result)

    def unary_value(self, node: Node) -> _Info:
        k = node.kind
        where = _where(k)
        if k is Kind.BIT_NEGATE:
            info = self.value(node.children[0], where, _INTEGRAL, "an integer")
            result = info.type if info.type in (I32, I64) else INT
        else:
            info = self.value(node.children[0], where, _NUMERIC, "a number")
            result = info.type if info.type in _KNOWN_NUMERIC else NUM
        if info.bottom:
            return _Info(result, True, _BOTTOM, info.why)
        if info.const:
            return _Info(result, True, UNARY_VALUE_OPS[k](info.value))
        return _Info(result)

    def arity(self, node: Node, low: int, high: int | None) -> None:
        n = len(node.children)
        fname = FUNCTION_NAMES[node.kind]
        if n < low:
            need = "an attribute name" if low == 1 and high == 1 else f"at least {low} arguments"
            raise self.error("TOO_FEW_ARGS", f"{fname}() needs {need}", node, fname)
        if high is not None and n > high:
            culprit = node.children[high]
            many = "one argument" if high == 1 else f"{high} arguments"
            raise self.error("TOO_MANY_ARGS", f"{fname}() takes {many}, not {n}",
                             culprit if culprit.pos >= 0 else node, fname)

    def name_function(self, node: Node) -> _Info:
        self.arity(node, 1, 1)
        arg = node.children[0]
        fname = FUNCTION_NAMES[node.kind]
        if arg.kind is not Kind.NAME:
            info = self.visit(arg)
            raise self.mismatch(arg, info, "an attribute name", f"{fname}()")
        return _Info(I32 if node.kind is Kind.FUNC_SIZE else BOOL)

    def string_arg(self, node: Node, fname: str) -> _Info:
        return self.value(node, f"{fname}()", _STRINGY, "a string (an attribute name or "
                          "fold-case/decompose of one)")

    def string_function(self, node: Node) -> _Info:
        self.arity(node, 1, 1)
        fname = FUNCTION_NAMES[node.kind]
        info = self.string_arg(node.children[0], fname)
        if info.const:
            return _Info(STR, True, STRING_FUNCTIONS[node.kind](info.value))
        return _Info(STR)

    def string_predicate(self, node: Node) -> _Info:
        self.arity(node, 2, None)
        fname = FUNCTION_NAMES[node.kind]
        first = self.string_arg(node.children[0], fname)
        patterns = []
        for arg in node.children[1:]:
            if arg.kind is not Kind.STRING:
                info = self.visit(arg)
                raise self.mismatch(arg, info, "string literals after its first argument",
                                    f"{fname}()")
            patterns.append(arg)
        if node.kind in (Kind.FUNC_REGEX, Kind.FUNC_WILDCARD):
            compiler = compile_regex if node.kind is Kind.FUNC_REGEX else compile_glob
            for arg in patterns:
                try:
                    compiler([arg.value])
                except PatternError as exc:
                    code = "REGEXP_TOO_COMPLEX" if exc.too_complex else "INVALID_REGEXP"
                    what = "regular expression" if node.kind is Kind.FUNC_REGEX else "wildcard"
                    raise self.error(code, f"{what} {arg.value!r}: {exc.message} (at "
                                     f"character {exc.offset} of the pattern)", arg,
                                     arg.value) from None
        if first.const:
            from elvin.subscription.reference import evaluate as ref_eval
            return _constant_predicate(node, ref_eval(node, {}))
        return _PREDICATE

    def equals_function(self, node: Node) -> _Info:
        self.arity(node, 2, None)
        where = "equals()"
        infos = [self.value(arg, where, _COMPARABLE, "values (numbers or strings)")
                 for arg in node.children]
        first = infos[0]
        for arg, info in zip(node.children[1:], infos[1:], strict=True):
            types = {first.type, info.type}
            if STR in types and types & _KNOWN_NUMERIC:
                raise self.mismatch(arg, info, "values of the same kind as its first argument "
                                    f"({first.type})", where)
        # equals(a, b, c) is (a == b) || (a == c): fold it as that
        if first.bottom:
            return _Info(BOOL, True, None, first.why)
        outcomes = []
        for info in infos[1:]:
            if info.bottom:
                outcomes.append(_Info(BOOL, True, None, info.why))
            elif first.const and info.const:
                outcomes.append(_constant_predicate(node, rt.eq(first.value, info.value)))
            else:
                outcomes.append(_PREDICATE)
        return _fold_logical(node, Kind.OR, outcomes)


def check(node: Node, text: str | None = None) -> None:
    """Raise ``SubscriptionError`` unless ``node`` is a valid subscription."""
    _Checker(text).root(node)


# ---------------------------------------------------------------------------
# wire trees

_CHILD_COUNTS: dict[Kind, tuple[int, int | None]] = {
    **{k: (2, 2) for k in COMPARISONS},
    **{k: (2, None) for k in LOGICAL},
    Kind.NOT: (1, 1),
    **{k: (2, 2) for k in BINARY_VALUE_OPS},
    **{k: (1, 1) for k in UNARY_VALUE_OPS},
}

_LEAF_TYPES = {Kind.NAME: str, Kind.INT32: int, Kind.INT64: int, Kind.REAL64: float,
               Kind.STRING: str}


def validate_tree(node: Node) -> Node:
    """Structural checks for a tree built elsewhere (the wire, tests).

    Returns the tree, or a copy with ``kind`` made a ``Kind`` and
    ``children`` made tuples where the builder used plain ints or lists.
    """
    if not isinstance(node, Node):
        raise TypeError(f"validate() takes a Node, not {type(node).__name__}")
    if tree_depth(node) > MAX_DEPTH:
        raise SubscriptionError("NESTING_TOO_DEEP", f"expression nests more than {MAX_DEPTH} "
                                "levels deep", None)
    for n in node.walk():
        if not isinstance(n, Node):
            raise SubscriptionError("PARSE_ERROR", f"{n!r} is not a Node", None)
        try:
            kind = Kind(n.kind)
        except ValueError:
            raise SubscriptionError("PARSE_ERROR", f"unknown node kind {n.kind!r}", None) from None
        if kind is Kind.EMPTY:
            raise SubscriptionError("PARSE_ERROR", "EMPTY node in a subscription tree", None)
        if kind in LEAF_KINDS:
            want = _LEAF_TYPES[kind]
            if type(n.value) is not want and not (want is int and type(n.value) is Int64):
                raise SubscriptionError("PARSE_ERROR", f"{kind.name} leaf with a "
                                        f"{type(n.value).__name__} value", None)
            if n.children:
                raise SubscriptionError("PARSE_ERROR", f"{kind.name} leaf with children", None)
            if kind is Kind.NAME and not n.value:
                raise SubscriptionError("PARSE_ERROR", "empty attribute name", None)
            if kind in (Kind.NAME, Kind.STRING) and "\x00" in n.value:  # type: ignore[operator]  # NAME and STRING values are strs
                raise SubscriptionError("PARSE_ERROR", "NUL character in a name or string",
                                        None)
            continue
        if not isinstance(n.children, (tuple, list)):
            raise SubscriptionError("PARSE_ERROR", f"{kind.name} children are not a sequence",
                                    None)
        counts = _CHILD_COUNTS.get(kind)
        if counts is not None:
            low, high = counts
            m = len(n.children)
            if m < low or (high is not None and m > high):
                raise SubscriptionError("PARSE_ERROR", f"{kind.name} node with {m} children",
                                        None)
    return _normalise(node)


def _normalise(node: Node) -> Node:
    if node.kind.__class__ is Kind and type(node.children) is tuple:
        children = tuple(_normalise(c) for c in node.children)
        if all(a is b for a, b in zip(children, node.children, strict=True)):
            return node
    else:
        children = tuple(_normalise(c) for c in node.children)
    return Node(Kind(node.kind), children, node.value, node.pos)


# ---------------------------------------------------------------------------
# folding

def fold(node: Node) -> Node:
    """``node`` with constant value sub-expressions replaced by literals.

    Only for checked trees. Only value sub-expressions fold (a constant
    predicate inside a larger expression, such as ``1 == 2`` in
    ``x == 1 || 1 == 2``, stays as written: the tree has no node for a
    truth value, and its literals compare at run time). A value that is
    always bottom (``1 / 0``) stays as written too. The literals made
    here may hold values a parsed literal cannot (an int32 of -2**31, a
    real64 infinity or NaN); they are for the compiler and analyses, not
    unparse.
    """
    if not _foldable(node):
        return node                 # the usual case: nothing to fold, no new tree
    new, _ = _fold(node)
    return new


_FOLDING = frozenset(BINARY_VALUE_OPS) | frozenset(UNARY_VALUE_OPS) | frozenset(STRING_FUNCTIONS)


def _foldable(tree: Node) -> bool:
    """Whether ``fold`` changes anything: some value node has only literal
    operands (folding works bottom up, so a foldable tree has one). A walk
    without building anything, a few times cheaper than ``_fold``."""
    stack = [tree]
    pop, extend = stack.pop, stack.extend
    while stack:
        n = pop()
        children = n.children
        if children:
            if n.kind in _FOLDING and all(c.kind in LITERAL_KINDS for c in children):
                return True
            extend(children)
    return False


def _literal_node(value: object, pos: int) -> Node:
    r = rt.rank(value)
    if r == rt.I32:
        return Node(Kind.INT32, value=int(value), pos=pos)  # type: ignore[call-overload]  # rank: an int
    if r == rt.I64:
        return Node(Kind.INT64, value=int(value), pos=pos)  # type: ignore[call-overload]  # rank: an int
    if r == rt.R64:
        return Node(Kind.REAL64, value=float(value), pos=pos)  # type: ignore[arg-type]  # rank: a number
    return Node(Kind.STRING, value=value, pos=pos)


def _const_value(node: Node) -> object:
    k = node.kind
    if k is Kind.INT64:
        return Int64(node.value)
    return node.value


def _fold(node: Node) -> tuple[Node, bool]:
    """(folded node, is it a constant literal?)"""
    k = node.kind
    if k in LEAF_KINDS:
        return node, k is not Kind.NAME
    checkpoint()                    # a long expression's fold may be cancelled
    results = [_fold(c) for c in node.children]
    children = tuple(c for c, _ in results)
    consts = [is_const for _, is_const in results]
    if k in BINARY_VALUE_OPS and all(consts):
        value = BINARY_VALUE_OPS[k](_const_value(children[0]), _const_value(children[1]))
        if value is not None:
            return _literal_node(value, node.pos), True
    elif k in UNARY_VALUE_OPS and all(consts):
        value = UNARY_VALUE_OPS[k](_const_value(children[0]))
        if value is not None:
            return _literal_node(value, node.pos), True
    elif k in STRING_FUNCTIONS and all(consts):
        text = STRING_FUNCTIONS[k](children[0].value)
        if text is not None:
            return _literal_node(text, node.pos), True
    if children == node.children:
        return node, False
    return Node(k, children, node.value, node.pos), False
