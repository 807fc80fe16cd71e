"""Subscription tree -> one generated Python function per question.

The checked, constant-folded tree is turned into Python source once and
``exec``-ed; evaluating a notification then runs straight-line Python with
no tree walk. Three-valued logic is compiled by *polarity*: for each
predicate P the generator writes two plain boolean expressions, ``T(P)``
("P is true") and ``F(P)`` ("P is false"); bottom is "neither". Then

    T(a && b) = T(a) and T(b)      F(a && b) = F(a) or F(b)
    T(a || b) = T(a) or T(b)       F(a || b) = F(a) and F(b)
    T(!a) = F(a)                   F(!a) = T(a)

so Python's own short-circuit ``and``/``or`` do the work. ``matches(n)`` is
``T(root)``; ``evaluate(n)`` is ``True if T(root) else False if F(root) else
None``. ``^^`` needs the exact value of both operands, which small helper
functions compute.

Attribute values are tested by exact type (``type(v) is str``...), as the
Elvin type of a Python value is defined in ``elvin.values``; comparisons
with a numeric literal are written out per type so that the common cases
cost a type test and a comparison. Everything less common (arithmetic,
comparisons of two attributes) calls the helpers of ``runtime.py``.
Regular expressions and wildcards are compiled once, here; each match runs
with a time limit (``patterns.MATCH_TIMEOUT``), and one that runs out of
time is bottom: neither ``T`` nor ``F`` holds.

``a || b || c`` (and ``&&``) compile to one flat Python ``or``/``and``, with
the ``name == literal`` operands on one attribute merged into one set
look-up (``equals(name, literals...)``, which is what that chain means), so
an ``||`` of ten thousand groups costs one hash look-up, not ten thousand
comparisons, and a small function to compile.

The generated functions catch every exception (there should be none; the
test-suite checks the evaluator against the reference interpreter without
this net) so that evaluation never raises: a notification holding values
of no Elvin type gives bottom, never an error.
"""

from __future__ import annotations

import textwrap
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from elvin.subscription import runtime as rt
from elvin.subscription.ast import Kind, Node, flatten, name_equals_literals
from elvin.subscription.cancel import checkpoint
from elvin.subscription.checker import (
    BINARY_VALUE_OPS,
    COMPARISONS,
    STRING_FUNCTIONS,
    STRING_PREDICATES,
    TYPE_PREDICATES,
    UNARY_VALUE_OPS,
)
from elvin.subscription.patterns import glob_matcher, literal_search, regex_matcher
from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64
from elvin.values import REAL64_EXACT as _EXACT

__all__ = ["PARAMETER_FORMS", "NotParameterisable", "Parameters", "build", "build_factory",
           "build_unguarded", "generate"]

_FLIP = {Kind.LESS_THAN: Kind.GREATER_THAN, Kind.GREATER_THAN: Kind.LESS_THAN,
         Kind.LESS_THAN_EQUALS: Kind.GREATER_THAN_EQUALS,
         Kind.GREATER_THAN_EQUALS: Kind.LESS_THAN_EQUALS,
         Kind.EQUALS: Kind.EQUALS, Kind.NOT_EQUALS: Kind.NOT_EQUALS}
_PYOP = {Kind.EQUALS: "==", Kind.LESS_THAN: "<", Kind.LESS_THAN_EQUALS: "<=",
         Kind.GREATER_THAN: ">", Kind.GREATER_THAN_EQUALS: ">="}
_RT_COMPARE = {Kind.EQUALS: "_eq", Kind.LESS_THAN: "_lt", Kind.LESS_THAN_EQUALS: "_le",
               Kind.GREATER_THAN: "_gt", Kind.GREATER_THAN_EQUALS: "_ge"}
_RT_BINARY = {Kind.ADD: "_add", Kind.SUBTRACT: "_sub", Kind.MULTIPLY: "_mul",
              Kind.DIVIDE: "_div", Kind.MODULO: "_mod", Kind.SHIFT_LEFT: "_shl",
              Kind.SHIFT_RIGHT: "_shr", Kind.LOGICAL_SHIFT_RIGHT: "_ushr",
              Kind.BIT_AND: "_band", Kind.BIT_OR: "_bor", Kind.BIT_XOR: "_bxor"}
_RT_UNARY = {Kind.UNARY_MINUS: "_neg", Kind.UNARY_PLUS: "_pos", Kind.BIT_NEGATE: "_inv"}
_NUMERIC_LITERALS = {Kind.INT32, Kind.INT64, Kind.REAL64}
#: nesting (in tree levels) after which a sub-expression moves to a helper
#: function, keeping generated expressions far from Python's parser limits
_HOIST_EVERY = 12
#: operands of one ``||`` / ``&&`` chain per generated function: a chain of
#: 20,000 is then a tree of small functions, which ``build`` compiles a few at
#: a time -- Python's ``compile`` holds the GIL throughout (2.8 s for the 7 MB
#: of one flat 256 KiB chain), and the router compiles long expressions on a
#: thread beside its loop
_CHAIN_PIECE = 32
#: characters of generated source ``build`` compiles in one ``compile`` call
_COMPILE_PIECE = 16_384


def _xor_values(values: Iterable[bool | None]) -> bool | None:
    result = False
    for v in values:
        if v is None:
            return None
        result = result is not v
    return result


_BASE_NAMESPACE = {
    "Int64": Int64,
    "_MIN32": INT32_MIN, "_MAX32": INT32_MAX, "_MIN64": INT64_MIN, "_MAX64": INT64_MAX,
    "_eq": rt.eq, "_lt": rt.lt, "_le": rt.le, "_gt": rt.gt, "_ge": rt.ge,
    "_add": rt.add, "_sub": rt.sub, "_mul": rt.mul, "_div": rt.div, "_mod": rt.mod,
    "_shl": rt.shl, "_shr": rt.shr, "_ushr": rt.ushr, "_band": rt.bit_and,
    "_bor": rt.bit_or, "_bxor": rt.bit_xor, "_neg": rt.neg, "_pos": rt.pos, "_inv": rt.inv,
    "_size": rt.size, "_fold": rt.fold_case, "_nfd": rt.decompose, "_nfkd": rt.decompose_compat,
    "_normalize": unicodedata.normalize, "_xor": _xor_values,
    "_rcmp": rt.real_compare, "_rkey": rt.real_key,
}


class NotParameterisable(Exception):
    """The code would hold an object built from a literal that no parameter
    form stands for (a set of numbers): compile each subscription alone."""


#: what a parameter of a shape's code holds, by form (see ``Parameters``)
PARAMETER_FORMS = {
    "v": "the literal's value",
    "f": "the literal's value as a real64 (float)",
    "q": "the literal's value as an int64 (Int64)",
    "T": "a tuple of the literals' values",
    "S": "a frozenset of the literals' values",
    "C": "a search function for any of the literals (contains)",
    "r": "a regex() matcher of the literals",
    "w": "a wildcard() matcher of the literals",
}


class Parameters:
    """Literals that become parameters of the generated functions instead of
    constants in their source (the subscription cache compiles a shape once
    and calls the result with each subscription's literals).

    ``slots`` maps ``id(literal node)`` to its slot; after generation,
    ``used`` maps each parameter's name to ``(form, slots)``: what a caller
    passes for it (``PARAMETER_FORMS``), from the literals of ``slots``.
    The generator's choices may depend on a literal's *value class* (its
    sign, zero, integral or not, beyond exact doubles: ``shapes.code``),
    never on its value."""

    __slots__ = ("slots", "used")

    def __init__(self, slots: dict[int, int]) -> None:
        self.slots = slots
        self.used: dict[str, tuple[str, tuple[int, ...]]] = {}

    def of(self, nodes: list[Node] | tuple[Node, ...]) -> tuple[int, ...] | None:
        """The slots of ``nodes``, or None if one of them is no parameter."""
        slots = self.slots
        found = tuple(slots.get(id(n), -1) for n in nodes)
        return None if -1 in found else found

    def name(self, form: str, slots: tuple[int, ...]) -> str:
        name = f"_p{form}{'_'.join(map(str, slots))}"
        self.used[name] = (form, slots)
        return name


class _Function:
    """A generated function: ``def NAME(a, <helpers it calls>, ...):`` and
    its ``body`` (indented source lines); ``calls``: the helpers it calls,
    as the generator recorded them (never read back from the source, where
    a string literal may look like a call)."""

    __slots__ = ("name", "body", "calls")

    def __init__(self, name: str, body: str, calls: set[str]) -> None:
        self.name = name
        self.body = body
        self.calls = calls


class _Gen:
    def __init__(self, params: Parameters | None = None) -> None:
        self.params = params
        self.namespace: dict[str, Any] = dict(_BASE_NAMESPACE)
        #: helper functions by number (``_hN``); None while reserved
        self.functions: list[_Function | None] = []
        #: the helpers called by each function being generated, innermost last
        self.calls: list[set[str]] = [set()]
        self.counter = 0
        self.const_ids: dict[tuple[Any, ...], str] = {}
        # one exact-value helper per node: T and F of an enclosing predicate
        # both need it, and nested ^^ would otherwise double the code per level
        self.exact_ids: dict[int, tuple[Node, str]] = {}
        #: global name -> (kind, patterns) of each regex() / wildcard() matcher
        self.matchers: dict[str, tuple[Kind, tuple[Any, ...]]] = {}
        self.matcher_names: dict[tuple[Kind, tuple[Any, ...]], str] = {}

    # -- names ----------------------------------------------------------------
    def temp(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def const(self, value: object) -> str:
        """Python source for a constant (repr when it round-trips, else a global)."""
        t = type(value)
        if t is str or (t is int and not isinstance(value, bool)):
            return repr(value)
        if t is float and value == value and value not in (float("inf"), float("-inf")):
            return repr(value)
        key = (t.__name__, repr(value))
        name = self.const_ids.get(key)
        if name is None:
            name = f"_k{len(self.const_ids)}"
            self.const_ids[key] = name
            self.namespace[name] = value
        return name

    def global_object(self, prefix: str, obj: object) -> str:
        name = f"_{prefix}{len(self.namespace)}"
        self.namespace[name] = obj
        return name

    def parameter(self, node: Node, form: str) -> str | None:
        """The name of the parameter standing for literal ``node`` in
        ``form``, or None when it is no parameter."""
        params = self.params
        if params is None:
            return None
        slot = params.slots.get(id(node))
        return None if slot is None else params.name(form, (slot,))

    def group_parameter(self, nodes: list[Node] | tuple[Node, ...], form: str) -> str | None:
        """A parameter built from several literals (a tuple, a set, a
        matcher); None when they are no parameters. Raises
        ``NotParameterisable`` when some are and others are not."""
        params = self.params
        if params is None:
            return None
        slots = params.of(nodes)
        if slots is None:
            if any(id(n) in params.slots for n in nodes):
                raise NotParameterisable
            return None
        return params.name(form, slots)

    def literal_text(self, node: Node, form: str = "v") -> str:
        """Source for a literal's value (``form`` "f": as a real64)."""
        name = self.parameter(node, form)
        if name is not None:
            return name
        if form == "f":
            return self.const(float(node.value))
        if node.kind is Kind.INT64:
            return self.const(rt.make_int64(int(node.value)))
        if node.kind is Kind.INT32:
            return self.const(int(node.value))
        if node.kind is Kind.REAL64:
            return self.const(float(node.value))
        return repr(node.value)

    def call(self, name: str) -> str:
        """A call of helper ``name`` from the function being generated."""
        self.calls[-1].add(name)
        return f"{name}(a)"

    def helper(self, body: str, calls: set[str]) -> str:
        """A new helper ``return body`` calling ``calls``; a call of it."""
        name = f"_h{len(self.functions)}"
        self.functions.append(_Function(name, f"    return {body}\n", calls))
        return self.call(name)

    def hoist(self, make: Callable[[], str]) -> str:
        """The expression ``make()`` generates, as a call of a new helper."""
        checkpoint()                # a long expression's code generation may be cancelled
        self.calls.append(set())
        body = make()
        return self.helper(body, self.calls.pop())

    # -- values ---------------------------------------------------------------
    def V(self, node: Node, depth: int = 0) -> str:
        """Expression for the value of ``node`` (``None`` or a non-Elvin object
        for bottom)."""
        if depth >= _HOIST_EVERY and node.children:
            return self.hoist(lambda: self.V(node, 0))
        k = node.kind
        if k is Kind.NAME:
            return f"a.get({node.value!r})"
        if k is Kind.INT64:
            return self.literal_text(node, "q")
        if k in _NUMERIC_LITERALS or k is Kind.STRING:
            return self.literal_text(node)
        if k in BINARY_VALUE_OPS:
            left = self.V(node.children[0], depth + 1)
            right = self.V(node.children[1], depth + 1)
            return f"{_RT_BINARY[k]}({left}, {right})"
        if k in UNARY_VALUE_OPS:
            return f"{_RT_UNARY[k]}({self.V(node.children[0], depth + 1)})"
        if k in STRING_FUNCTIONS:
            guard, value = self.S(node.children[0])
            return f"({self.string_transform(k, value)} if {guard} else None)"
        if k is Kind.FUNC_SIZE:
            return f"_size(a.get({node.children[0].value!r}))"
        raise AssertionError(f"not a value node: {k!r}")

    def string_transform(self, kind: Kind, value: str) -> str:
        if kind is Kind.FUNC_FOLD_CASE:
            return f"{value}.casefold()"
        if kind is Kind.FUNC_DECOMPOSE:
            return f"_normalize('NFD', {value})"
        return f"_normalize('NFKD', {value})"

    def S(self, node: Node) -> tuple[str, str]:
        """(guard, value) for a string-typed expression: ``guard`` is true iff
        the value is a string, and binds what ``value`` uses."""
        k = node.kind
        if k is Kind.NAME:
            t = self.temp()
            return f"type({t} := a.get({node.value!r})) is str", t
        if k is Kind.STRING:
            return "True", self.literal_text(node)
        if k in STRING_FUNCTIONS:
            guard, value = self.S(node.children[0])
            return guard, self.string_transform(k, value)
        # anything else: compute the value, then test it
        t = self.temp()
        return f"type({t} := {self.V(node)}) is str", t

    # -- predicates -------------------------------------------------------------
    def T(self, node: Node, depth: int = 0) -> str:
        return self.pred(node, True, depth)

    def F(self, node: Node, depth: int = 0) -> str:
        return self.pred(node, False, depth)

    def pred(self, node: Node, want: bool, depth: int) -> str:
        if depth >= _HOIST_EVERY:
            return self.hoist(lambda: self.pred(node, want, 0))
        k = node.kind
        if k is Kind.NOT:
            return self.pred(node.children[0], not want, depth + 1)
        if k in (Kind.AND, Kind.OR):
            operands = _merge_equalities(flatten(node), k)
            if len(operands) == 1:
                return self.pred(operands[0], want, depth)
            joiner = " and " if (k is Kind.AND) == want else " or "
            if len(operands) <= _CHAIN_PIECE:
                return "(" + joiner.join([self.pred(c, want, depth + 1) for c in operands]) + ")"
            # helpers of a few operands each, each calling what its operands call
            parts, calls = [], []
            for c in operands:
                self.calls.append(set())
                parts.append(self.pred(c, want, depth + 1))
                calls.append(self.calls.pop())
            while len(parts) > _CHAIN_PIECE:
                pieces, piece_calls = [], []
                for i in range(0, len(parts), _CHAIN_PIECE):
                    self.calls.append(set())
                    pieces.append(self.helper("(" + joiner.join(parts[i:i + _CHAIN_PIECE]) + ")",
                                              set().union(*calls[i:i + _CHAIN_PIECE])))
                    piece_calls.append(self.calls.pop())
                parts, calls = pieces, piece_calls
                checkpoint()
            self.calls[-1].update(*calls)
            return "(" + joiner.join(parts) + ")"
        if k is Kind.XOR:
            exact = ", ".join(self.exact(c) for c in flatten(node))
            return f"(_xor(({exact},)) is {want})"
        if k in COMPARISONS:
            return self.comparison(node, want)
        if k is Kind.FUNC_EQUALS:
            return self.equals(node, want)
        if k in TYPE_PREDICATES:
            return self.type_predicate(node, want)
        if k in STRING_PREDICATES:
            return self.string_predicate(node, want)
        raise AssertionError(f"not a predicate: {k!r}")

    def exact(self, node: Node) -> str:
        """A call computing the exact value (True/False/None) of a predicate."""
        known = self.exact_ids.get(id(node))
        if known is not None and known[0] is node:
            return self.call(known[1])
        number = len(self.functions)
        name = f"_h{number}"
        self.exact_ids[id(node)] = (node, name)
        self.functions.append(None)   # reserve the slot (nested helpers come after)
        self.calls.append(set())
        t, f = self.T(node), self.F(node)
        self.functions[number] = _Function(name, (
            f"    if {t}:\n        return True\n"
            f"    if {f}:\n        return False\n"
            f"    return None\n"), self.calls.pop())
        return self.call(name)

    def comparison(self, node: Node, want: bool) -> str:
        k = node.kind
        left, right = node.children
        if k is Kind.NOT_EQUALS:
            k, want = Kind.EQUALS, not want
        if left.kind in _NUMERIC_LITERALS or left.kind is Kind.STRING:
            left, right, k = right, left, _FLIP[k]
        if right.kind is Kind.STRING:
            guard, value = self.S(left)
            op = "==" if want else "!="
            return f"({guard} and {value} {op} {self.literal_text(right)})"
        if right.kind in _NUMERIC_LITERALS:
            return self.numeric_comparison(k, left, right, want)
        call = f"{_RT_COMPARE[k]}({self.V(left)}, {self.V(right)})"
        return f"({call} is {want})"

    def numeric_comparison(self, k: Kind, expr: Node, lit: Node, want: bool) -> str:
        """``expr OP literal``, written out for each numeric type of expr.

        Reals are ordered as Java's ``Double.compare``: NaN above +inf and
        equal to itself, -0.0 below 0.0. Python's IEEE comparison says the
        same except that a NaN is greater (``>`` and ``>=`` add ``or t !=
        t``) and that two zeros of different signs differ: against a zero
        literal, a zero value goes through ``runtime.real_compare``, and so
        does everything against a NaN literal (only folding makes one).
        """
        t = self.temp()
        op = _PYOP[k]
        c = lit.value
        is_real = lit.kind is Kind.REAL64
        if is_real:
            c_int = c_float = self.literal_text(lit, "f")
        else:
            c_int = self.parameter(lit, "v") or self.const(int(c))
            # an integer that converts to a double exactly compares as that
            # double (Python compares int and float exactly): one parameter
            c_float = (self.literal_text(lit, "f") if abs(int(c)) > _EXACT
                       or self.params is None else c_int)
        special = float(c) == 0.0 or c != c

        def test(x: str, y: str) -> str:
            return f"{x} {op} {y}" if want else f"not ({x} {op} {y})"

        def real_test(x: str, x_may_be_nan: bool) -> str:
            """``x OP c_float`` in Java's order, x a float expression."""
            if c != c:
                return test(f"_rcmp({x}, {c_float})", "0")
            inner = f"{x} {op} {c_float}"
            if x_may_be_nan and k in (Kind.GREATER_THAN, Kind.GREATER_THAN_EQUALS):
                inner = f"{inner} or {x} != {x}"
            if special:
                inner = f"({inner}) if {x} != 0.0 else _rcmp({x}, {c_float}) {op} 0"
            return f"({inner})" if want else f"not ({inner})"

        # int64 attribute vs real literal: Java converts the int64 to a double
        exact_real = is_real and float(c).is_integer() and abs(c) < _EXACT
        if is_real and not (exact_real and k is Kind.EQUALS and not special):
            int_test = real_test(f"float({t})", False)
        else:
            int_test = test(t, c_int)
        if not is_real and abs(int(c)) > _EXACT:
            float_test = real_test(t, True)   # the literal converts (inexactly) to real64
        elif is_real or special or k in (Kind.GREATER_THAN, Kind.GREATER_THAN_EQUALS):
            float_test = real_test(t, True)
        else:
            float_test = test(t, c_int)   # an exact int literal: Python compares exactly
        if k is Kind.EQUALS and want and not is_real:
            plain_int = f"type({t}) is int and {int_test}"   # equality implies the range
        else:
            plain_int = f"type({t}) is int and _MIN64 <= {t} <= _MAX64 and {int_test}"
        return (f"((type({t} := {self.V(expr)}) is float and {float_test}) or "
                f"({plain_int}) or "
                f"(type({t}) is Int64 and {int_test}))")

    def equals(self, node: Node, want: bool) -> str:
        first, *rest = node.children
        if all(r.kind is Kind.STRING for r in rest):
            guard, value = self.S(first)
            op = "in" if want else "not in"
            name = self.group_parameter(rest, "S")
            if name is not None:        # one set, whatever the literals
                return f"({guard} and {value} {op} {name})"
            values = frozenset(r.value for r in rest)
            if len(values) == 1:
                op = "==" if want else "!="
                return f"({guard} and {value} {op} {next(iter(values))!r})"
            name = self.global_object("set", values)
            return f"({guard} and {value} {op} {name})"
        if all(r.kind is Kind.STRING or r.kind in _NUMERIC_LITERALS for r in rest):
            if self.group_parameter(rest, "S") is not None:
                raise NotParameterisable     # sets of numbers: their keys depend on values
            return self.literal_membership(first, rest, want)
        # general case: (first == r1) || (first == r2) || ...
        alternatives = [Node(Kind.EQUALS, (first, r)) for r in rest]
        parts = [self.comparison(n, want) for n in alternatives]
        joiner = " or " if want else " and "
        return "(" + joiner.join(parts) + ")"

    def literal_membership(self, first: Node, rest: list[Node], want: bool) -> str:
        """``equals(e, literals...)``: set look-ups instead of a comparison each.

        ``e == c`` is bottom when e and c are of different kinds (string /
        number), so with both kinds of literal present ``equals`` is never
        false; int64 operands compare with real literals after conversion.
        A real attribute is looked up by ``runtime.real_key`` (Python's set
        would find -0.0 among 0.0 and miss a NaN that is not the literal's
        very object) unless the set holds neither a zero nor a NaN.
        """
        strings = frozenset(r.value for r in rest if r.kind is Kind.STRING)
        numbers = [r for r in rest if r.kind in _NUMERIC_LITERALS]
        as_real = frozenset(rt.real_key(float(r.value)) for r in numbers)
        plain_reals = all(type(x) is float and x != 0.0 for x in as_real)
        ints = frozenset(int(r.value) for r in numbers
                         if r.kind is not Kind.REAL64)
        # an integer converts to a real that is never NaN nor -0.0
        reals = frozenset(x for x in (rt.real_key(float(r.value)) for r in numbers
                                      if r.kind is Kind.REAL64) if type(x) is float)
        t = self.temp()
        first_test = f"type({t} := {self.V(first)})"
        parts = []
        if strings:
            member = f"{t} in {self.global_object('set', strings)}"
            if want:
                parts.append(f"({first_test} is str and {member})")
            elif not numbers:
                parts.append(f"({first_test} is str and not {member})")
        if numbers:
            real_set = self.global_object("set", as_real)
            float_member = f"{t} in {real_set}" if plain_reals else f"_rkey({t}) in {real_set}"
            int_members = []
            if ints:
                int_members.append(f"{t} in {self.global_object('set', ints)}")
            if reals:
                int_members.append(f"float({t}) in {self.global_object('set', reals)}")
            int_member = " or ".join(int_members) or "False"
            is_int = (f"(type({t}) is Int64 or (type({t}) is int and "
                      f"_MIN64 <= {t} <= _MAX64))")
            # bind t here unless the string test already did
            test = "" if parts else f"({t} := {self.V(first)}) is not None and "
            if want:
                parts.append(f"({test}((type({t}) is float and {float_member}) or "
                             f"({is_int} and ({int_member}))))")
            elif not strings:
                parts.append(f"({test}((type({t}) is float and not {float_member}) or "
                             f"({is_int} and not ({int_member}))))")
        if not parts:
            return "False"
        return "(" + " or ".join(parts) + ")"

    def type_predicate(self, node: Node, want: bool) -> str:
        k = node.kind
        name = node.children[0].value
        if k is Kind.FUNC_REQUIRE:
            return f"({name!r} in a)" if want else "False"
        t = self.temp()
        get = f"({t} := a.get({name!r}))"
        if k is Kind.FUNC_INT32:
            test = f"(type({get}) is int and _MIN32 <= {t} <= _MAX32)"
        elif k is Kind.FUNC_INT64:
            test = (f"(type({get}) is Int64 or (type({t}) is int and not (_MIN32 <= {t} <= "
                    f"_MAX32) and _MIN64 <= {t} <= _MAX64))")
        elif k is Kind.FUNC_REAL64:
            test = f"(type(a.get({name!r})) is float)"
        elif k is Kind.FUNC_STRING:
            test = f"(type(a.get({name!r})) is str)"
        elif k is Kind.FUNC_OPAQUE:
            test = f"(type(a.get({name!r})) is bytes)"
        else:  # nan
            test = f"(type({get}) is float and {t} != {t})"
        if want:
            return test
        return f"({name!r} in a and not {test})"

    def string_predicate(self, node: Node, want: bool) -> str:
        k = node.kind
        guard, value = self.S(node.children[0])
        nodes = node.children[1:]
        patterns = tuple(c.value for c in nodes)
        if k is Kind.FUNC_BEGINS_WITH or k is Kind.FUNC_ENDS_WITH:
            method = "startswith" if k is Kind.FUNC_BEGINS_WITH else "endswith"
            if len(patterns) == 1:
                arg = self.literal_text(nodes[0])
            else:
                arg = self.group_parameter(nodes, "T") or repr(patterns)
            test = f"{value}.{method}({arg})"
        elif k is Kind.FUNC_CONTAINS:
            if len(patterns) > 4:
                matcher = self.group_parameter(nodes, "C")
                if matcher is None:
                    matcher = self.global_object("re", literal_search(patterns))
                test = f"{matcher}({value}) is not None"
            elif len(patterns) == 1:
                test = f"{self.literal_text(nodes[0])} in {value}"
            else:
                s = self.temp()
                texts = [self.literal_text(n) for n in nodes]
                first = f"{texts[0]} in ({s} := {value})"
                test = "(" + " or ".join([first] + [f"{p} in {s}" for p in texts[1:]]) + ")"
        else:
            # True / False / None (out of time): bottom is neither outcome
            # one matcher for T and F (and any repeat) of the same patterns
            slots = self.params.of(nodes) if self.params is not None else None
            if self.params is not None and slots is None \
                    and any(id(n) in self.params.slots for n in nodes):
                raise NotParameterisable
            known = (k, slots) if slots is not None else (k, patterns)
            matcher = self.matcher_names.get(known, "")
            if not matcher:
                if slots is not None:
                    matcher = self.params.name("w" if k is Kind.FUNC_WILDCARD  # type: ignore[union-attr]  # params are set for a shape
                                               else "r", slots)
                else:
                    make = glob_matcher if k is Kind.FUNC_WILDCARD else regex_matcher
                    matcher = self.global_object("match", make(patterns))
                    self.matchers[matcher] = (k, patterns)
                self.matcher_names[known] = matcher
            return f"({guard} and {matcher}({value}) is {want})"
        if want:
            return f"({guard} and {test})"
        return f"({guard} and not ({test}))"


def _equality_operand(node: Node, chain: Kind) -> tuple[str, tuple[Node, ...]] | None:
    """(attribute, literals) when ``node``, as an operand of an ``||`` chain,
    is ``name == literal`` or ``equals(name, literals...)``; for an ``&&``
    chain the same under a ``!`` or as ``name != literal``. Else None."""
    if chain is Kind.AND:
        if node.kind is Kind.NOT_EQUALS:
            node = Node(Kind.EQUALS, node.children)
        elif node.kind is Kind.NOT and node.children[0].kind is not Kind.NOT_EQUALS:
            node = node.children[0]
        else:
            return None
    return name_equals_literals(node)


def _merge_equalities(operands: list[Node], chain: Kind) -> list[Node]:
    """Operands of an ``||`` chain with every group of ``name == literal``
    (and ``equals(name, ...)``) on one attribute merged into one
    ``equals(name, literals...)`` -- which is what ``equals`` means, and it
    compiles to a set look-up -- in the place of the group's first member.
    For ``&&`` the same with ``name != literal``, merged into
    ``!equals(...)``. Three-valued ``||`` and ``&&`` are commutative and the
    generated tests have no side effects, so the order does not matter.
    """
    if len(operands) < 2:
        return operands
    groups: dict[str, list[int]] = {}
    found: list[Any] = [None] * len(operands)
    for i, operand in enumerate(operands):
        eq = _equality_operand(operand, chain)
        if eq is not None:
            found[i] = eq
            groups.setdefault(eq[0], []).append(i)
    if all(len(members) < 2 for members in groups.values()):
        return operands
    out: list[Node] = []
    for i, operand in enumerate(operands):
        eq = found[i]
        if eq is None or len(groups[eq[0]]) < 2:
            out.append(operand)
            continue
        members = groups[eq[0]]
        if members[0] != i:
            continue   # merged into the first member
        literals = [lit for j in members for lit in found[j][1]]
        merged = Node(Kind.FUNC_EQUALS, (Node(Kind.NAME, value=eq[0]), *literals))
        out.append(merged if chain is Kind.OR else Node(Kind.NOT, (merged,)))
    return out


def generate(tree: Node, unguarded: bool = False,
             matchers: dict[str, tuple[Kind, tuple[Any, ...]]] | None = None
             ) -> tuple[str, dict[str, Any]]:
    """Python source defining ``_matches(a)`` and ``_evaluate(a)``, and the
    namespace it needs. ``tree`` must be checked and folded. ``unguarded``
    defines ``_evaluate_raw(a)`` instead: the same without the exception net.
    ``matchers``, when given, receives ``{name: (kind, patterns)}`` for the
    regex() and wildcard() matchers in the namespace. Each function takes
    the helpers it calls as defaults of parameters after ``a`` (see
    ``_bind_helpers``).
    """
    parts, namespace = _generate(tree, unguarded, matchers)
    return "".join(parts), namespace


def _roots(gen: _Gen, tree: Node, unguarded: bool) -> list[_Function]:
    """The generated functions: helpers, then ``_matches`` and ``_evaluate``
    (or ``_evaluate_raw``), which call what the root expressions call."""
    t = gen.T(tree)
    f = gen.F(tree)
    calls = gen.calls[0]
    helpers = [fn for fn in gen.functions if fn is not None]
    if unguarded:
        return [*helpers, _Function("_evaluate_raw", (
            f"    if {t}:\n"
            "        return True\n"
            f"    if {f}:\n"
            "        return False\n"
            "    return None\n"), calls)]
    return [*helpers, _Function("_matches", (
        "    try:\n"
        f"        return {t}\n"
        "    except Exception:\n"
        "        return False\n"), calls), _Function("_evaluate", (
            "    try:\n"
            f"        if {t}:\n"
            "            return True\n"
            f"        if {f}:\n"
            "            return False\n"
            "    except Exception:\n"
            "        pass\n"
            "    return None\n"), calls)]


def _generate(tree: Node, unguarded: bool = False,
              matchers: dict[str, tuple[Kind, tuple[Any, ...]]] | None = None
              ) -> tuple[list[str], dict[str, Any]]:
    """``generate``'s source as a list of function definitions, each after
    the helpers it calls."""
    gen = _Gen()
    if matchers is not None:
        gen.matchers = matchers
    return _bind_helpers(_roots(gen, tree, unguarded)), gen.namespace


def _bind_helpers(functions: list[_Function], extra: tuple[str, ...] = ()) -> list[str]:
    """The source of ``functions``, each taking the helpers it calls as
    parameter defaults (``def _h3(a, _h7=_h7):``) and placed after them;
    ``extra`` names more defaults every function takes (the parameters of
    a shape's code, see ``build_factory``).

    Why: a function found through its module's namespace (a global) lives in
    the dict that is its own ``__globals__``, a reference cycle that only the
    cyclic collector frees -- and elvind freezes what survives (gcpolicy), so
    each replaced subscription's code stayed in memory until a full pass.
    Bound as defaults, helpers are never looked up by name, so ``_define``
    removes every generated function from the namespace and a predicate is
    freed by its reference count the moment the engine drops it. (A default
    is also a local variable: a little faster to call than a global.)"""
    defs = {fn.name: fn for fn in functions}
    bound_extra = "".join(f", {p}={p}" for p in extra)
    out: list[str] = []
    placed: set[str] = set()
    for root in defs:
        # depth first, iteratively: a chain of helpers may be thousands deep
        stack: list[tuple[str, list[str] | None]] = [(root, None)]
        while stack:
            name, calls = stack.pop()
            if name in placed:
                continue
            if calls is None:
                calls = sorted(defs[name].calls - {name})
                stack.append((name, calls))
                stack.extend((c, None) for c in calls if c not in placed)
                continue
            placed.add(name)
            bound = "".join(f", {c}={c}" for c in calls)
            out.append(f"def {name}(a{bound}{bound_extra}):\n{defs[name].body}")
    return out


def _define(parts: list[str], namespace: dict[str, Any], filename: str) -> str:
    """Compile and run the definitions ``parts`` in ``namespace``, about
    ``_COMPILE_PIECE`` characters per ``compile`` call (each call holds the
    GIL; between them another thread may run); returns the whole source.
    The functions are then taken out of ``namespace`` into ``namespace
    ["__functions__"]`` (see ``_bind_helpers``): callers take theirs from there."""
    before = set(namespace)
    piece: list[str] = []
    size = 0
    for part in parts:
        piece.append(part)
        size += len(part)
        if size >= _COMPILE_PIECE:
            checkpoint()            # between pieces, a cancelled compile stops
            exec(compile("".join(piece), filename, "exec"), namespace)
            piece, size = [], 0
    if piece:
        exec(compile("".join(piece), filename, "exec"), namespace)
    functions = {name: namespace.pop(name) for name in set(namespace) - before
                 if name != "__builtins__"}
    namespace["__functions__"] = functions
    return "".join(parts)


def build_factory(tree: Node, params: Parameters,
                  filename: str = "<subscription shape>") -> Callable[..., tuple[Any, ...]]:
    """``make(*arguments) -> (matches, evaluate)``: the code of ``tree`` with
    the literals of ``params`` as parameters, one argument per name of
    ``params.used`` in its order (``PARAMETER_FORMS`` says what each holds).
    The parameters are defaults of the functions ``make`` defines, not
    closure cells (a cell per literal per subscription would cost 40
    bytes). Raises ``NotParameterisable``."""
    gen = _Gen(params)
    functions = _roots(gen, tree, False)
    names = tuple(params.used)
    body = "".join(textwrap.indent(part, "    ")
                   for part in _bind_helpers(functions, names))
    factory = f"def _make({', '.join(names)}):\n{body}    return _matches, _evaluate\n"
    namespace = gen.namespace
    exec(compile(factory, filename, "exec"), namespace)
    make: Callable[..., tuple[Any, ...]] = namespace.pop("_make")   # (just defined)
    return make


def build(tree: Node, filename: str = "<subscription>"
          ) -> tuple[Callable[[Mapping[str, Any]], bool],
                     Callable[[Mapping[str, Any]], bool | None], str]:
    """(matches, evaluate, source) for a checked, folded tree. The two
    functions hold no reference cycle (see ``_bind_helpers``)."""
    parts, namespace = _generate(tree)
    source = _define(parts, namespace, filename)
    functions: dict[str, Any] = namespace.pop("__functions__")
    return functions["_matches"], functions["_evaluate"], source


def build_unguarded(tree: Node) -> Callable[[Mapping[str, Any]], bool | None]:
    """``evaluate`` without the exception net: tests use it to prove that
    there is nothing to catch."""
    parts, namespace = _generate(tree, unguarded=True)
    _define(parts, namespace, "<subscription>")
    evaluate: Callable[[Mapping[str, Any]], bool | None] = \
        namespace.pop("__functions__")["_evaluate_raw"]
    return evaluate

