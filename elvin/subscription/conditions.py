"""Necessary conditions: what a notification must hold for an expression to be true.

The router's index (``index.py``) evaluates a subscription only for the
notifications that meet a *necessary* condition of it: one that must hold
whenever the expression is true. This module finds those conditions, in the
forms the index can look up, for every common kind of predicate:

=========  ==========================================  =========================
kind       from                                        holds when the value ...
=========  ==========================================  =========================
``EQ``     ``x == 5``, ``equals(x, "a", "b")``, an      has one of some index keys
           ``||`` of those on one attribute             (``analysis.index_value``)
``RANGE``  ``x < 5``, ``x >= a && x < b``, ``!(x > 3)``  is a number in [lo, hi]
``PREFIX`` ``begins-with(x, "p")``                      is a string with a prefix
``SUFFIX`` ``ends-with(x, ".c")``                       is a string with a suffix
``PRESENT`` anything else naming ``x`` (``regex``,      is present at all
           ``contains``, arithmetic, two attributes)
=========  ==========================================  =========================

``EQ``, ``PREFIX`` and ``SUFFIX`` also apply to a string transform of an
attribute (``fold-case(x) == "abc"``, ``begins-with(decompose(x), "e")``): the
condition's *dimension* is then ``(x, transforms)`` and the index transforms
the notification's value before looking it up.

A **plan** is a disjunction of *alternatives*, each a conjunction of
conditions (at most one per dimension): the expression can be true only if,
for some alternative, every condition holds. ``()`` is a plan that can never
hold (the expression is never true); ``((),)`` has one alternative with no
condition (nothing to look up: the expression must be evaluated for every
notification). Conditions are tuples (they cost little memory, a
subscription keeps its plan's filing in the index):

* ``(EQ, dim, keys)``: ``index_value(value) in keys`` (``keys`` a tuple);
* ``(RANGE, dim, lo, hi)``: the value is a number and ``lo <= position <= hi``;
* ``(PREFIX, dim, strings)`` / ``(SUFFIX, dim, strings)``: a string value
  starts (ends) with one of ``strings``;
* ``(PRESENT, name)``: the attribute is present.

**Exactness.** Every condition is *necessary*, never sufficient: the index
may let through a notification that does not match (the compiled expression
decides), never hold one back that could. Elvin's logic has three values;
the analysis is done for both outcomes of every predicate, because ``!``
turns "false" into "true": ``x < 5`` is false exactly when ``x`` is a number
at or above 5 in Java's total order of reals, so ``!(x < 5)`` needs
``RANGE [5, +inf]``. A missing attribute or a value of the wrong type makes a
comparison bottom -- neither true nor false -- so every condition also says
the attribute is present with a type that can compare. A number's
*position* is its value as a double (``real_position``), with NaN placed at
+infinity (Java orders NaN above every number) and -0.0 at 0.0; bounds are
inclusive, and an integer literal's bound is the double it rounds to, which
is sound because rounding to the nearest double never reverses an order
(``a < b`` implies ``double(a) <= double(b)``). ``x < NaN`` (only folding
makes a NaN literal) is therefore "any number", and ``x > NaN``, never true,
is "NaN or +inf".

**Analysis by shape.** ``analyse`` looks only at the tree's structure and the
*kinds* of its literals, never at their values: the values enter in
``finalise`` (the intersection of a conjunction's ranges, of its sets of
equality keys, the longest of its prefixes). The subscription cache
(``shapes``) analyses a shape once and finalises each subscription of it
with its own literals, in a few microseconds. The analysis does not fold
constants: callers pass the folded tree (shapes of the cache have nothing
to fold), and a predicate without attribute names (``1 == 2``) is evaluated
by the reference interpreter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from elvin.subscription.analysis import literal_key
from elvin.subscription.ast import LITERAL_KINDS, Kind, Node, flatten, names_in
from elvin.subscription.checker import COMPARISONS, STRING_PREDICATES, TYPE_PREDICATES
from elvin.subscription.reference import evaluate
from elvin.subscription.unparse import quote_name, quote_string
from elvin.values import REAL64_EXACT

__all__ = ["ANY", "EQ", "NEVER", "PREFIX", "PRESENT", "RANGE", "SUFFIX", "TRANSFORMS",
           "analyse", "describe_condition", "dimension_name", "finalise", "instantiator",
           "plan_of", "real_position"]

EQ, RANGE, PREFIX, SUFFIX, PRESENT = range(5)

#: plans that need no look-up: never true, and "evaluate for every notification"
NEVER: tuple[Any, ...] = ()
ANY: tuple[Any, ...] = ((),)

#: string functions that make a dimension of their attribute, by the name a
#: dimension's transform chain uses (``index.transform`` applies them)
TRANSFORMS = {Kind.FUNC_FOLD_CASE: "fold-case", Kind.FUNC_DECOMPOSE: "decompose",
              Kind.FUNC_DECOMPOSE_COMPAT: "decompose-compat"}

#: more alternatives than this in one ``||`` are reduced to one condition
#: each, merged per dimension: a subscription is filed in a bounded number
#: of places however long its ``||``
MAX_ALTERNATIVES = 64

#: steps (a predicate or ``&&``/``||`` node each) the analysis of a long
#: expression may take -- about a millisecond -- before it settles for less
#: (``plan_of``): a 4 KB expression of 350 terms took 3.6 ms to analyse in
#: full, as long as parsing it
ANALYSIS_STEPS = 128

_INF = math.inf
_FLIP = {Kind.LESS_THAN: Kind.GREATER_THAN, Kind.GREATER_THAN: Kind.LESS_THAN,
         Kind.LESS_THAN_EQUALS: Kind.GREATER_THAN_EQUALS,
         Kind.GREATER_THAN_EQUALS: Kind.LESS_THAN_EQUALS, Kind.EQUALS: Kind.EQUALS}
#: an ordering's outcome "false" is the complementary ordering's "true"
_COMPLEMENT = {Kind.LESS_THAN: Kind.GREATER_THAN_EQUALS,
               Kind.LESS_THAN_EQUALS: Kind.GREATER_THAN,
               Kind.GREATER_THAN: Kind.LESS_THAN_EQUALS,
               Kind.GREATER_THAN_EQUALS: Kind.LESS_THAN}
_UPPER = frozenset({Kind.LESS_THAN, Kind.LESS_THAN_EQUALS})


def real_position(value: Any) -> float:
    """A number literal's place on the index's line of doubles (NaN at +inf)."""
    position = float(value)
    return position if position == position else _INF


def dimension_name(dim: str | tuple[Any, ...]) -> str:
    """The attribute a dimension looks at."""
    return dim if type(dim) is str else dim[0]


# -- raw conditions: the analysis of a shape, literals not yet read ---------------------

class _Eq:
    """Equality keys: the intersection of ``groups``, each a union of literals."""

    __slots__ = ("groups",)
    rank = 0

    def __init__(self, groups: list[tuple[Node, ...]]) -> None:
        self.groups = groups


class _Range:
    """A numeric range: above every literal in ``lows``, below every one in ``highs``."""

    __slots__ = ("lows", "highs")

    def __init__(self, lows: list[Node], highs: list[Node]) -> None:
        self.lows = lows
        self.highs = highs

    @property
    def rank(self) -> int:
        return 2 if self.lows and self.highs else 3


class _Affix:
    """Prefixes (``kind`` PREFIX) or suffixes: one of the groups is kept
    (each is necessary; ``finalise`` keeps the one with the longest strings)."""

    __slots__ = ("kind", "groups")
    rank = 1

    def __init__(self, kind: int, groups: list[tuple[Node, ...]]) -> None:
        self.kind = kind
        self.groups = groups


class _Present:
    __slots__ = ()
    rank = 5


_PRESENT = _Present()
_NO_CONDITION_RANK = 9

#: one alternative: {dimension (a name, or a path into a tuple): its condition}. Any: the
#: conditions are told apart by ``type(c) is _Eq`` (fast), which mypy cannot follow
RawAlternative = dict[Any, Any]
RawPlan = list[RawAlternative]   # [] never, [{}] any


def _alternative_rank(alt: RawAlternative) -> int:
    return min((c.rank for c in alt.values()), default=_NO_CONDITION_RANK)


def _plan_rank(plan: RawPlan) -> float:
    return max(_alternative_rank(a) for a in plan) + 0.01 * len(plan)


def _meet(a: Any, b: Any) -> Any:
    """Both conditions on one dimension must hold: one condition (or None
    when they cannot both hold)."""
    if a is _PRESENT:
        return b
    if b is _PRESENT:
        return a
    ta, tb = type(a), type(b)
    if ta is _Eq:
        return _Eq(a.groups + b.groups) if tb is _Eq else a
    if tb is _Eq:
        return b
    if ta is _Range and tb is _Range:
        return _Range(a.lows + b.lows, a.highs + b.highs)
    if ta is _Affix and tb is _Affix:
        return _Affix(a.kind, a.groups + b.groups) if a.kind == b.kind else a
    return None     # a number and a string at once: never


def _conjunction(plans: list[RawPlan]) -> RawPlan:
    """Every plan must hold: their single alternatives merged, or the most
    selective of the others with that merge added to each of its alternatives."""
    merged: RawAlternative = {}
    multiple: list[RawPlan] = []
    for plan in plans:
        if not plan:
            return []
        if len(plan) == 1:
            for dim, cond in plan[0].items():
                old = merged.get(dim)
                if old is not None:
                    cond = _meet(old, cond)
                    if cond is None:
                        return []
                merged[dim] = cond
        else:
            multiple.append(plan)
    if multiple:
        best = min(multiple, key=_plan_rank)
        if _plan_rank(best) < _alternative_rank(merged):
            out = []
            for alt in best:
                combined = _conjunction([[merged], [alt]])
                out.extend(combined)
            return out if out else []
    return [merged]


def _disjunction(plans: list[RawPlan]) -> RawPlan:
    """One of the plans must hold: all their alternatives, with those of a
    single condition of one kind on one dimension merged (``a == 1 || a == 2``
    is one ``EQ`` of two keys)."""
    alts: list[RawAlternative] = []
    for plan in plans:
        for alt in plan:
            if not alt:
                return [{}]
            alts.append(alt)
    if len(alts) > MAX_ALTERNATIVES:
        alts = [dict([min(alt.items(), key=lambda item: item[1].rank)]) for alt in alts]
        alts = _merge_singles(alts)
        if len(alts) > MAX_ALTERNATIVES:
            # ranges on many dimensions: each becomes "the attribute is present"
            alts = _merge_singles([{dimension_name(dim): _PRESENT} if type(cond) is _Range
                                   else {dim: cond} for alt in alts for dim, cond in alt.items()])
        return alts
    return _merge_singles(alts)


def _merge_singles(alts: list[RawAlternative]) -> list[RawAlternative]:
    # "x is present" holds whenever any condition on x does: it absorbs them
    present = {dim for alt in alts if len(alt) == 1 for dim, cond in alt.items()
               if cond is _PRESENT}
    if present:
        alts = [alt for alt in alts
                if not any(dimension_name(dim) in present and cond is not _PRESENT
                           for dim, cond in alt.items())]
    out: list[RawAlternative] = []
    merged: dict[tuple[Any, ...], RawAlternative] = {}
    for alt in alts:
        if len(alt) == 1:
            ((dim, cond),) = alt.items()
            t = type(cond)
            if t is _Eq and len(cond.groups) == 1 or t is _Affix and len(cond.groups) == 1 \
                    or cond is _PRESENT:
                key = (dim, t, getattr(cond, "kind", None))
                into = merged.get(key)
                if into is None:
                    copy = {dim: _Eq(list(cond.groups)) if t is _Eq
                            else _Affix(cond.kind, list(cond.groups)) if t is _Affix else cond}
                    merged[key] = copy
                    out.append(copy)
                elif t is not _Present:
                    target = into[dim]
                    target.groups[0] = target.groups[0] + cond.groups[0]
                continue
        out.append(alt)
    return out


# -- the analysis ---------------------------------------------------------------------

def _dimension(node: Node) -> str | tuple[Any, ...] | None:
    """The dimension of a NAME or of string transforms of a NAME, else None."""
    transforms: list[str] = []
    while node.kind in TRANSFORMS:
        transforms.append(TRANSFORMS[node.kind])
        node = node.children[0]
    if node.kind is not Kind.NAME:
        return None
    attribute: str = node.value
    if not transforms:
        return attribute
    return (attribute, tuple(reversed(transforms)))


def _present(node: Node) -> RawPlan:
    return [dict.fromkeys(sorted(names_in(node)), _PRESENT)]


def _constant(node: Node, want: bool) -> RawPlan:
    return [{}] if evaluate(node, {}) is want else []


def _comparison(node: Node, want: bool) -> RawPlan:
    k = node.kind
    a, b = node.children
    if k is Kind.NOT_EQUALS:
        k, want = Kind.EQUALS, not want
    if a.kind in LITERAL_KINDS and b.kind not in LITERAL_KINDS:
        a, b, k = b, a, _FLIP[k]
    dim = _dimension(a) if b.kind in LITERAL_KINDS else None
    if dim is None:
        return _present(node)
    if k is Kind.EQUALS:
        return [{dim: _Eq([(b,)])}] if want else _present(node)
    if b.kind is Kind.STRING or type(dim) is tuple:
        return _present(node)       # strings do not order: bottom either way
    if not want:
        k = _COMPLEMENT[k]
    return [{dim: _Range([], [b]) if k in _UPPER else _Range([b], [])}]


def _equals(node: Node, want: bool) -> RawPlan:
    first, *rest = node.children
    if want:
        dim = _dimension(first)
        if dim is not None and all(r.kind in LITERAL_KINDS for r in rest):
            return [{dim: _Eq([tuple(rest)])}]
        needed = set(names_in(first))
        common = None
        for r in rest:
            names = names_in(r)
            common = set(names) if common is None else common & names
        return [dict.fromkeys(sorted(needed | (common or set())), _PRESENT)]
    return _present(node)


def _string_predicate(node: Node, want: bool) -> RawPlan:
    first = node.children[0]
    k = node.kind
    if want and k in (Kind.FUNC_BEGINS_WITH, Kind.FUNC_ENDS_WITH):
        dim = _dimension(first)
        if dim is not None and all(c.kind is Kind.STRING for c in node.children[1:]):
            return [{dim: _Affix(PREFIX if k is Kind.FUNC_BEGINS_WITH else SUFFIX,
                                 [tuple(node.children[1:])])}]
    return _present(first)


def _names_any(node: Node) -> bool:
    """Whether the tree names an attribute (the first child usually does)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind is Kind.NAME:
            return True
        stack.extend(n.children)
    return False


class _OverBudget(Exception):
    """The analysis of a sub-expression ran out of steps."""


class _Steps:
    """What is left of a long expression's analysis (``ANALYSIS_STEPS``)."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def _affordable(children: list[Node], want: bool, steps: _Steps) -> list[RawPlan]:
    """The plans of the conjuncts that fit in ``steps``. A conjunct that
    does not is left out (a necessary condition of one conjunct is one of
    the whole), and the rest share half of what was left before it, so the
    whole analysis takes at most twice the budget; none fits: over budget."""
    parts = []
    for child in children:
        before = steps.left
        try:
            parts.append(_raw(child, want, steps))
        except _OverBudget:
            steps.left = before // 2
    if not parts:
        raise _OverBudget
    return parts


def _raw(node: Node, want: bool, steps: _Steps | None = None) -> RawPlan:
    if steps is not None:
        steps.left -= 1
        if steps.left < 0:
            raise _OverBudget
    k = node.kind
    if k is Kind.NOT:
        return _raw(node.children[0], not want, steps)
    if k is Kind.AND or k is Kind.OR:
        children = flatten(node)
        if (k is Kind.AND) == want:
            return _conjunction([_raw(c, want) for c in children] if steps is None
                                else _affordable(children, want, steps))
        if steps is not None and len(children) > steps.left:
            # every operand takes a step at least: this cannot fit, so say
            # so now rather than after analysing as many as fit (the long
            # expression's ``a || b || ...`` of hundreds of operands)
            raise _OverBudget
        return _disjunction([_raw(c, want, steps) for c in children])
    if k is Kind.XOR:
        # true or false only when every operand is true or false
        children = flatten(node)
        if steps is not None and 2 * len(children) > steps.left:
            raise _OverBudget       # (two steps at least for each: see above)
        return _conjunction([_disjunction([_raw(c, True, steps), _raw(c, False, steps)])
                             for c in children])
    if k is Kind.FUNC_REQUIRE:
        return [{node.children[0].value: _PRESENT}] if want else []
    if k in COMPARISONS:
        a, b = node.children            # (an attribute operand: no walk for one)
        if a.kind is Kind.NAME or b.kind is Kind.NAME or _names_any(node):
            return _comparison(node, want)
        return _constant(node, want)
    if k is Kind.FUNC_EQUALS or k in STRING_PREDICATES or k in TYPE_PREDICATES:
        if not _names_any(node):
            return _constant(node, want)
        if k is Kind.FUNC_EQUALS:
            return _equals(node, want)
        if k in STRING_PREDICATES:
            return _string_predicate(node, want)
        return _present(node)
    return [{}]     # not a predicate the analysis knows: nothing is necessary


def analyse(tree: Node) -> RawPlan:
    """The raw plan of a checked, folded tree: conditions that still refer to
    the tree's literal nodes (``finalise`` reads their values)."""
    return _raw(tree, True)


# -- final conditions -------------------------------------------------------------------

def _identity(node: Node) -> Any:
    return node


def finalise(raw: RawPlan, literal: Callable[[Node], Node] = _identity) -> tuple[Any, ...]:
    """The plan (see the module docstring) of a raw plan, reading each
    literal node through ``literal`` (the subscription cache maps a shape's
    literals to a subscription's)."""
    out: list[tuple[Any, ...]] = []
    seen: set[tuple[Any, ...]] = set()
    for alt in raw:
        conditions: list[tuple[Any, ...]] = []
        for dim, cond in alt.items():
            made = _final(dim, cond, literal)
            if made is None:
                break           # cannot hold: the alternative is never true
            conditions.append(made)
        else:
            made_alt = tuple(conditions)
            if made_alt not in seen:
                seen.add(made_alt)
                out.append(made_alt)
    return tuple(out)


def _final(dim: Any, cond: Any, literal: Callable[[Node], Node]) -> tuple[Any, ...] | None:
    t = type(cond)
    if cond is _PRESENT:
        return (PRESENT, dim)
    if t is _Eq:
        strings_only = type(dim) is tuple     # a transform's value is a string
        keys: set[Any] | None = None
        for group in cond.groups:
            found = {literal_key(n) for n in map(literal, group)
                     if not strings_only or n.kind is Kind.STRING}
            keys = found if keys is None else keys & found
        if not keys:
            return None
        return (EQ, dim, tuple(sorted(keys, key=repr)) if len(keys) > 1 else tuple(keys))
    if t is _Range:
        lo = max((real_position(literal(n).value) for n in cond.lows), default=-_INF)
        hi = min((real_position(literal(n).value) for n in cond.highs), default=_INF)
        if lo > hi:
            return None
        return (RANGE, dim, lo, hi)
    # _Affix: the group whose shortest string is longest
    best = max((tuple(dict.fromkeys(literal(n).value for n in group)) for group in cond.groups),
               key=lambda strings: min(map(len, strings)))
    return (cond.kind, dim, best)


def instantiator(raw: RawPlan, slot_of: dict[int, int]) -> Callable[[list[Node]], tuple[Any, ...]] | None:
    """``finalise(raw, ...)`` as a function of a subscription's literal leaves
    (``slot_of``: literal node id -> slot), for the usual raw plans: one
    alternative whose conditions each read at most one literal per bound
    (``Group == "g1" && require(Message)``, ``Seq >= a && Seq < b``,
    ``begins-with(Path, "/srv")``). None for the others (``finalise`` then).
    "Present" conditions are made once and shared by every subscription."""
    if len(raw) != 1:
        return None
    parts: list[tuple[Callable[[list[Node], Any], tuple[Any, ...] | None], Any]] = []
    for dim, cond in raw[0].items():
        t = type(cond)
        if cond is _PRESENT:
            parts.append((_shared, (PRESENT, dim)))
        elif t is _Eq and len(cond.groups) == 1 and len(cond.groups[0]) == 1:
            (literal,) = cond.groups[0]
            if type(dim) is tuple and literal.kind is not Kind.STRING:
                return None
            parts.append((_eq_maker, (dim, slot_of[id(literal)])))
        elif t is _Range and len(cond.lows) <= 1 and len(cond.highs) <= 1:
            parts.append((_range_maker, (dim, slot_of[id(cond.lows[0])] if cond.lows else None,
                                         slot_of[id(cond.highs[0])] if cond.highs else None)))
        elif t is _Affix and len(cond.groups) == 1 and len(cond.groups[0]) == 1:
            parts.append((_affix_maker, (cond.kind, dim, slot_of[id(cond.groups[0][0])])))
        else:
            return None

    def make(leaves: list[Node]) -> tuple[Any, ...]:
        conditions = []
        for maker, arg in parts:
            made = maker(leaves, arg)
            if made is None:
                return NEVER
            conditions.append(made)
        return (tuple(conditions),)

    return make


def _shared(leaves: list[Node], cond: tuple[Any, ...]) -> tuple[Any, ...]:
    return cond


def _eq_maker(leaves: list[Node], arg: tuple[Any, ...]) -> tuple[Any, ...]:
    return (EQ, arg[0], (literal_key(leaves[arg[1]]),))


def _range_maker(leaves: list[Node], arg: tuple[Any, ...]) -> tuple[Any, ...] | None:
    dim, low, high = arg
    lo = -_INF if low is None else real_position(leaves[low].value)
    hi = _INF if high is None else real_position(leaves[high].value)
    return None if lo > hi else (RANGE, dim, lo, hi)


def _affix_maker(leaves: list[Node], arg: tuple[Any, ...]) -> tuple[Any, ...]:
    return (arg[0], arg[1], (leaves[arg[2]].value,))


def plan_of(folded: Node, evaluate: Callable[[Mapping[str, Any]], Any] | None = None,
            steps: int = ANALYSIS_STEPS, names: frozenset[str] | None = None) -> tuple[Any, ...]:
    """The plan of a checked, folded tree. With ``evaluate`` (the tree's
    compiled three-valued form) the analysis is a long expression's: at most
    ``steps`` (twice that with conjuncts left out), and if
    even that is not enough, the plan is that one of the tree's names is
    present. That is sound whenever the tree is not true of an empty
    notification: a notification with none of its names gives it the value
    it has for an empty one. ``names``: the tree's (``ast.names_in``), when
    the caller has them (a walk of a long tree saved)."""
    if evaluate is None:
        return finalise(analyse(folded))
    try:
        raw = _raw(folded, True, _Steps(steps))
    except _OverBudget:
        if evaluate(_EMPTY) is True:
            return ANY
        raw = [{name: _PRESENT} for name in sorted(names_in(folded) if names is None else names)]
    return finalise(raw)


_EMPTY: Mapping[str, Any] = {}


# -- words ----------------------------------------------------------------------------------

def _dim_text(dim: Any) -> str:
    if type(dim) is str:
        return quote_name(dim)
    name, transforms = dim
    text = quote_name(name)
    for t in transforms:
        text = f"{t}({text})"
    return text


def _number_text(x: float) -> str:
    return repr(int(x)) if x.is_integer() and abs(x) < REAL64_EXACT else repr(x)


def _key_text(key: Any) -> str:
    if type(key) is str:
        return quote_string(key)
    if type(key) is float:
        return _number_text(key)
    return str(key)


def describe_condition(cond: tuple[Any, ...]) -> str:
    """A condition in the language's words (``Seq from 10 to 20``); a
    range's bounds are the index's (inclusive: ``Price > 101.5`` is looked
    up from 101.5)."""
    kind, dim = cond[0], cond[1]
    what = _dim_text(dim)
    if kind == EQ:
        keys = [_key_text(k) for k in cond[2]]
        if len(keys) > 4:
            keys = [*keys[:4], f"... ({len(cond[2])} values)"]
        return f"{what} == {keys[0]}" if len(keys) == 1 else f"{what} one of {', '.join(keys)}"
    if kind == RANGE:
        lo, hi = cond[2], cond[3]
        if lo == -_INF and hi == _INF:
            return f"{what} is a number"
        if lo == -_INF:
            return f"{what} up to {_number_text(hi)}"
        if hi == _INF:
            return f"{what} from {_number_text(lo)}"
        return f"{what} from {_number_text(lo)} to {_number_text(hi)}"
    if kind in (PREFIX, SUFFIX):
        word = "begins with" if kind == PREFIX else "ends with"
        strings = " or ".join(quote_string(s) for s in cond[2][:4])
        if len(cond[2]) > 4:
            strings += f" or ... ({len(cond[2])} strings)"
        return f"{what} {word} {strings}"
    return f"{what} is present"
