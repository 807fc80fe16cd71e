"""Quench analysis: what do the subscriptions at the router want?

Sans-IO helpers over subscription ASTs (``elvin.subscription.ast.Node``), as
a quenching producer receives them in SubAddNotify / SubModNotify packets.
They are the "higher-order functions" of the Elvin 3 quenching paper: a
producer names an attribute it fills in (a file watcher's ``File-Path``, a
sensor's ``Temperature``) and learns which values of it any subscription can
match ("the range of values allowed"), so that it produces only those.

``wanted(asts, "File-Path")`` returns a :class:`Wanted`:

* ``UNBOUNDED`` when some subscription can match *any* value of the attribute
  (``require(File-Path)``, ``File-Path != "/a"``, or an ``||`` whose other
  branch does not constrain ``File-Path``, as in
  ``File-Path == "/a" || File-Size > 3``);
* else a set of :class:`Constraint` s: exact values (``==``, ``equals()``),
  prefixes (``begins-with``), suffixes (``ends-with``), substrings
  (``contains``), glob patterns (``wildcard``) and regular expressions
  (``regex``), each possibly applied through ``fold-case`` / ``decompose`` /
  ``decompose-compat`` (``Constraint.transforms``), and numeric
  :class:`Interval` s (``Match.RANGE``: ``<``, ``<=``, ``>``, ``>=``, ``!=``
  with a number, ``nan()``). An empty set means no subscription can match
  any value (nothing wanted).

Numbers are ordered as the language compares them (the reference evaluator,
``elvin.subscription.reference``): ints and reals after promotion, reals by
Java's ``Double.compare``, so -0.0 < 0.0 and NaN orders above +inf
(``X > 80`` is true of NaN, ``X < 80`` is not). ``!`` is pushed down to the
predicates (De Morgan holds in the three-valued logic; on numbers ``!(X <
80)`` is ``X >= 80``); ``||`` joins constraint sets; ``&&`` meets them pair by
pair (intervals intersect, a prefix and a longer one give the longer, an
exact value survives only the constraints it satisfies), falling back to the
tighter side where it cannot decide: ints beyond 2**53 compare with reals
after rounding (``2**53 + 1 == 2.0**53``), so bounds mixing those are never
called empty.

The analysis over-approximates, never under-approximates: a value the
subscriptions can match is always ``wanted(...).matches(value)``; the reverse
need not hold (arithmetic, ``^^`` and comparisons between two names leave the
attribute unbounded). ``Constraint.matches`` evaluates the predicate with the
real subscription evaluator (``elvin.subscription.compile``), so wildcard,
regex, fold-case and numeric semantics are the router's own. The tests check
the claim against the reference evaluator with random subscriptions.

``Quench.wanted(attribute)`` applies this to a quench's subscriptions, and
``Connection.wanted(attribute)`` to auto-quench's (``elvin.client.autoquench``).

``could_match(ast, attributes)`` answers a related question for a partial
notification: could the subscription be true for some notification that has
these attribute values (other attributes unknown)? It is False only when the
known values already rule the subscription out.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from elvin.census import BROWSE_MARKER
from elvin.subscription.ast import LEAF_KINDS, Kind, Node, names_in
from elvin.subscription.logic import and3, not3, or3, xor3
from elvin.subscription.runtime import real_key

__all__ = [
    "Constraint",
    "Interval",
    "Match",
    "NOTHING",
    "Wanted",
    "could_match",
    "could_match_any",
    "is_browsing",
    "wanted",
    "wanted_by",
]


class Match(enum.Enum):
    """The string (or value) operators a constraint can use."""

    EQUALS = "=="
    BEGINS_WITH = "begins-with"
    ENDS_WITH = "ends-with"
    CONTAINS = "contains"
    WILDCARD = "wildcard"
    REGEX = "regex"
    RANGE = "range"


_FUNC_MATCH = {
    Kind.FUNC_BEGINS_WITH: Match.BEGINS_WITH,
    Kind.FUNC_ENDS_WITH: Match.ENDS_WITH,
    Kind.FUNC_CONTAINS: Match.CONTAINS,
    Kind.FUNC_WILDCARD: Match.WILDCARD,
    Kind.FUNC_REGEX: Match.REGEX,
}
_MATCH_FUNC = {match: kind for kind, match in _FUNC_MATCH.items()}
_TRANSFORMS = {
    Kind.FUNC_FOLD_CASE: "fold-case",
    Kind.FUNC_DECOMPOSE: "decompose",
    Kind.FUNC_DECOMPOSE_COMPAT: "decompose-compat",
}
_TRANSFORM_KINDS = {label: kind for kind, label in _TRANSFORMS.items()}
_LITERAL_KIND = {str: Kind.STRING, float: Kind.REAL64}

_BOOLEAN_CONNECTIVES = frozenset({Kind.AND, Kind.OR, Kind.XOR, Kind.NOT})

_PLACEHOLDER = "x"


@dataclass(frozen=True)
class Constraint:
    """``match`` applied to the attribute (after ``transforms``, innermost
    first) with ``value``: e.g. ``Constraint(Match.BEGINS_WITH, "/home/")``
    is ``begins-with(X, "/home/")`` and ``Constraint(Match.EQUALS, "abc",
    ("fold-case",))`` is ``fold-case(X) == "abc"``."""

    match: Match
    value: int | float | str | Interval
    transforms: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        # by the language's equality of literals: Python's -0.0 == 0.0 would
        # merge ``X == -0.0 || X == 0.0`` into one constraint and lose a value
        if not isinstance(other, Constraint):
            return NotImplemented
        return (self.match, _value_key(self.value), self.transforms) == \
            (other.match, _value_key(other.value), other.transforms)

    def __hash__(self) -> int:
        return hash((self.match, _value_key(self.value), self.transforms))

    @property
    def fold_case(self) -> bool:
        """True when the value is compared with the attribute's case folded."""
        return "fold-case" in self.transforms

    def node(self, attribute: str = _PLACEHOLDER) -> Node:
        """This constraint as a subscription AST over ``attribute``."""
        if self.match is Match.RANGE:
            return self.value.node(attribute)  # type: ignore[union-attr]  # a RANGE constraint's value is an Interval
        subject = Node(Kind.NAME, value=attribute)
        for label in self.transforms:
            subject = Node(_TRANSFORM_KINDS[label], (subject,))
        literal = _literal(self.value)  # type: ignore[arg-type]  # not a RANGE: a literal
        if self.match is Match.EQUALS:
            return Node(Kind.EQUALS, (subject, literal))
        return Node(_MATCH_FUNC[self.match], (subject, literal))

    def matches(self, value: object) -> bool:
        """Whether an attribute value satisfies this constraint, by the
        subscription language's own evaluator."""
        compiled = self._compiled
        if compiled is None:
            return True                  # cannot be compiled: stay conservative
        outcome = compiled.evaluate({_PLACEHOLDER: value})
        return outcome is True

    @functools.cached_property
    def _compiled(self):
        """The compiled predicate (a producer tests many readings against
        one constraint); None if it cannot be compiled."""
        return _compiled(self.node())

    def __str__(self) -> str:
        from elvin.subscription import unparse
        return unparse(self.node("X"))


#: Ints of at most this magnitude convert to real64 exactly (and so do their
#: neighbours), so that comparing them with reals agrees with one total
#: order; beyond it ``int == real`` compares the rounded int (2**53 + 1 ==
#: 2.0**53) and two bounds cannot be ordered safely.
_EXACT_INT = 2 ** 53


def _exact(value: object) -> bool:
    return isinstance(value, float) or (isinstance(value, int) and -_EXACT_INT < value < _EXACT_INT)


def _order_key(value: int | float) -> tuple:
    """The position of a number in the language's order of numbers (Java's
    ``Double.compare`` after promotion): -inf < finite (with -0.0 < 0.0 ==
    int 0) < +inf < NaN. Consistent with the language's comparisons for
    every real and every int of magnitude below 2**53 (``_exact``)."""
    if isinstance(value, float):
        if value != value:
            return (3, 0, 0)
        if value in (math.inf, -math.inf):
            return (2 if value > 0 else 0, 0, 0)
        negative_zero = value == 0.0 and math.copysign(1.0, value) < 0
        return (1, value, 0 if negative_zero else 1)
    # an int below 2**53 is exactly a real; a larger one is placed where the
    # language puts it when it meets a real (its rounding): only ``_exact``
    # ends are relied on to be ordered exactly
    return (1, float(int(value)), 1)


def _value_key(value: object) -> object:
    if isinstance(value, float):
        return ("real", real_key(value))
    if isinstance(value, Interval):
        return ("range", value.key())
    if isinstance(value, int):
        return ("int", int(value))
    return ("string", value)


@dataclass(frozen=True, eq=False)
class Interval:
    """The numbers ``low < X < high`` (``<=`` at a closed end); an end of
    None is unbounded. Membership is the language's own comparison with the
    two ends, so int/real promotion, -0.0 < 0.0 and NaN (which orders above
    +inf: ``X > 80`` is true of NaN, ``X < 80`` is not) are as the router
    evaluates them. ``nan(X)`` is the interval [NaN, NaN]. Only numbers are
    in an interval (a string compared with a number is bottom)."""

    low: int | float | None = None
    low_closed: bool = False
    high: int | float | None = None
    high_closed: bool = False

    def key(self) -> tuple:
        """The ends keyed by type and exact value (``1`` and ``1.0``, ``0.0`` and
        ``-0.0`` stay apart, as Python's ``==`` would not keep them), for equality
        and hashing."""
        return (None if self.low is None else _value_key(self.low), self.low_closed,
                None if self.high is None else _value_key(self.high), self.high_closed)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Interval) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    @property
    def exact(self) -> bool:
        """Both ends order safely against any number (see ``_exact``)."""
        return all(end is None or _exact(end) for end in (self.low, self.high))

    def node(self, attribute: str = _PLACEHOLDER) -> Node:
        """The interval as a subscription tree on ``attribute`` (a conjunction of
        its ends), so that it can be evaluated or printed as the language would."""
        subject = Node(Kind.NAME, value=attribute)
        parts = []
        if self.low is not None:
            kind = Kind.GREATER_THAN_EQUALS if self.low_closed else Kind.GREATER_THAN
            parts.append(Node(kind, (subject, _literal(self.low))))
        if self.high is not None:
            kind = Kind.LESS_THAN_EQUALS if self.high_closed else Kind.LESS_THAN
            parts.append(Node(kind, (subject, _literal(self.high))))
        if self.low is not None and self.low != self.low and self.low_closed:
            return Node(Kind.FUNC_NAN, (subject,))       # [NaN, ...]: NaN is the top
        if not parts:   # every number: nothing orders below -inf
            parts.append(Node(Kind.GREATER_THAN_EQUALS, (subject, _literal(-math.inf))))
        return parts[0] if len(parts) == 1 else Node(Kind.AND, tuple(parts))

    def __contains__(self, value: object) -> bool:
        return Constraint(Match.RANGE, self).matches(value)

    def intersect(self, other: Interval) -> Interval | None:
        """The numbers in both (None: none), over-approximated when an end
        cannot be ordered safely (then the tighter-looking end is kept, which
        is sound whichever it is, and the result is never called empty)."""
        low, low_closed = _tighter(self.low, self.low_closed, other.low, other.low_closed, 1)
        high, high_closed = _tighter(self.high, self.high_closed, other.high,
                                     other.high_closed, -1)
        result = Interval(low, low_closed, high, high_closed)
        if low is not None and high is not None and result.exact:
            lo, hi = _order_key(low), _order_key(high)
            if lo > hi or (lo == hi and not (low_closed and high_closed)):
                return None
        return result

    def __str__(self) -> str:
        # the unbounded ends hold -inf and, above +inf, NaN
        low = "[-inf" if self.low is None else ("[" if self.low_closed else "(") + repr(self.low)
        high = "nan]" if self.high is None else repr(self.high) + (
            "]" if self.high_closed else ")")
        return f"{low}, {high}"


def _tighter(a, a_closed: bool, b, b_closed: bool, sign: int):
    """Of two lower (``sign`` 1) or upper (-1) ends, the one that admits less."""
    if a is None:
        return b, b_closed
    if b is None:
        return a, a_closed
    ka, kb = _order_key(a), _order_key(b)
    if ka == kb:
        return (a, a_closed) if not a_closed else (b, b_closed)
    return (a, a_closed) if (ka > kb) == (sign > 0) else (b, b_closed)


#: ``X OP literal`` as an interval of X (with the literal as ``v``)
_COMPARISON_INTERVAL = {
    Kind.LESS_THAN: lambda v: Interval(high=v),
    Kind.LESS_THAN_EQUALS: lambda v: Interval(high=v, high_closed=True),
    Kind.GREATER_THAN: lambda v: Interval(low=v),
    Kind.GREATER_THAN_EQUALS: lambda v: Interval(low=v, low_closed=True),
}
#: ``literal OP X`` is ``X FLIP[OP] literal``; ``!(X OP v)`` is ``X NEGATE[OP] v``
#: (on numbers a comparison is never bottom, so false is the other side)
_FLIP = {Kind.LESS_THAN: Kind.GREATER_THAN, Kind.LESS_THAN_EQUALS: Kind.GREATER_THAN_EQUALS,
         Kind.GREATER_THAN: Kind.LESS_THAN, Kind.GREATER_THAN_EQUALS: Kind.LESS_THAN_EQUALS,
         Kind.EQUALS: Kind.EQUALS, Kind.NOT_EQUALS: Kind.NOT_EQUALS}
_NEGATE = {Kind.LESS_THAN: Kind.GREATER_THAN_EQUALS, Kind.LESS_THAN_EQUALS: Kind.GREATER_THAN,
           Kind.GREATER_THAN: Kind.LESS_THAN_EQUALS, Kind.GREATER_THAN_EQUALS: Kind.LESS_THAN,
           Kind.EQUALS: Kind.NOT_EQUALS, Kind.NOT_EQUALS: Kind.EQUALS}


@dataclass(frozen=True)
class Wanted:
    """The values of one attribute that some subscription can match.

    ``unbounded`` means any value may be wanted; otherwise the wanted values
    are those matching at least one of ``constraints`` (none: nothing wanted).
    """

    unbounded: bool = False
    constraints: frozenset[Constraint] = field(default_factory=frozenset)

    # -- combining ----------------------------------------------------------
    def __or__(self, other: Wanted) -> Wanted:
        if self.unbounded or other.unbounded:
            return UNBOUNDED
        return Wanted(False, self.constraints | other.constraints)

    def __and__(self, other: Wanted) -> Wanted:
        """The values both allow (for ``&&``): constraints met pairwise, so
        ``X > 0 && X < 80`` is ``(0, 80)`` and ``begins-with(X, "/a") &&
        begins-with(X, "/a/b")`` is the longer prefix."""
        if self.unbounded:
            return other
        if other.unbounded:
            return self
        if len(self.constraints) * len(other.constraints) > _MAX_MEET:
            return self.narrower(other)
        met = (_meet(a, b) for a in self.constraints for b in other.constraints)
        result = Wanted(False, frozenset(c for c in met if c is not None))
        return min(result, self.narrower(other), key=_looseness)

    def narrower(self, other: Wanted) -> Wanted:
        """The tighter of two over-approximations of the same set (used for
        ``&&``: the true set is inside both, so either one is sound)."""
        if self.unbounded:
            return other
        if other.unbounded:
            return self
        return min(self, other, key=_looseness)

    # -- questions ----------------------------------------------------------
    @property
    def nothing(self) -> bool:
        """True when no value of the attribute can be matched."""
        return not self.unbounded and not self.constraints

    def __bool__(self) -> bool:
        return not self.nothing

    def matches(self, value: object) -> bool:
        """Could a notification with this attribute value be wanted?"""
        return self.unbounded or any(c.matches(value) for c in self.constraints)

    def by(self, match: Match, *, plain: bool = True) -> frozenset:
        """The values of the constraints that use ``match``; with ``plain``
        only those applied to the attribute itself (no fold-case etc.)."""
        return frozenset(c.value for c in self.constraints
                         if c.match is match and (not plain or not c.transforms))

    @property
    def exact(self) -> frozenset:
        """The exact values wanted (``==`` constraints on the attribute itself)."""
        return self.by(Match.EQUALS)

    @property
    def prefixes(self) -> frozenset:
        """The prefixes wanted (``begins-with``)."""
        return self.by(Match.BEGINS_WITH)

    @property
    def suffixes(self) -> frozenset:
        """The suffixes wanted (``ends-with``)."""
        return self.by(Match.ENDS_WITH)

    @property
    def substrings(self) -> frozenset:
        """The substrings wanted (``contains``)."""
        return self.by(Match.CONTAINS)

    @property
    def wildcards(self) -> frozenset:
        """The wildcard patterns wanted (``wildcard``)."""
        return self.by(Match.WILDCARD)

    @property
    def regexes(self) -> frozenset:
        """The regular expressions wanted (``regex``)."""
        return self.by(Match.REGEX)

    @property
    def intervals(self) -> frozenset[Interval]:
        """The numeric ranges (from ``<``, ``<=``, ``>``, ``>=``, ``!=`` on
        numbers and ``nan()``)."""
        return self.by(Match.RANGE)

    @property
    def only_exact(self) -> bool:
        """True when the wanted values are a finite set of exact values
        (``exact``), the easiest case for a producer."""
        return not self.unbounded and all(
            c.match is Match.EQUALS and not c.transforms for c in self.constraints)

    def __repr__(self) -> str:
        if self.unbounded:
            return "Wanted(UNBOUNDED)"
        return f"Wanted({sorted(str(c) for c in self.constraints)})"


UNBOUNDED = Wanted(True)
NOTHING = Wanted(False)


def _looseness(w: Wanted) -> tuple[int, int]:
    # exact values are the tightest; fewer constraints is tighter
    inexact = sum(1 for c in w.constraints if c.match is not Match.EQUALS or c.transforms)
    return (inexact, len(w.constraints))


# ---------------------------------------------------------------------------
# wanted()
# ---------------------------------------------------------------------------

def wanted(asts: Node | Iterable[Node] | Mapping[object, Node], attribute: str, *,
           operators: Iterable[Match] | None = None) -> Wanted:
    """The values of ``attribute`` that any of ``asts`` can match.

    ``asts`` is one AST, an iterable of ASTs or a mapping whose values are
    ASTs (such as ``Quench.subscriptions``). ``operators`` restricts the
    constraints the caller can handle (the paper's "operators it will
    accept"): a subscription that needs another operator makes the result
    ``UNBOUNDED``, so the caller stays conservative.
    """
    if isinstance(asts, Node):
        asts = [asts]
    elif isinstance(asts, Mapping):
        asts = asts.values()
    accepted = frozenset(operators) if operators is not None else None
    result = NOTHING
    for ast in asts:
        result = result | _wanted(ast, attribute)
        if result.unbounded:
            return UNBOUNDED
    if accepted is not None and any(c.match not in accepted for c in result.constraints):
        return UNBOUNDED
    return _merged(result)


def wanted_by(asts: Mapping[object, Node], attribute: str) -> dict[object, Wanted]:
    """``wanted`` for each entry of a mapping (term id -> AST) separately."""
    return {key: _merged(_wanted(ast, attribute)) for key, ast in asts.items()}


def _wanted(node: Node, x: str, negated: bool = False) -> Wanted:
    """The values of ``x`` for which ``node`` (or, ``negated``, ``!node``)
    can be true. Negation is pushed down to the predicates (De Morgan holds
    in the language's three-valued logic), where ``!(X < 80)`` is ``X >=
    80``: on two numbers a comparison is true or false, never bottom."""
    kind = node.kind
    if kind is Kind.NOT and len(node.children) == 1:
        return _wanted(node.children[0], x, not negated)
    if kind in (Kind.OR, Kind.AND):
        if (kind is Kind.OR) != negated:
            result = NOTHING
            for child in node.children:
                result = result | _wanted(child, x, negated)
                if result.unbounded:
                    break
            return result
        result = UNBOUNDED
        for child in node.children:
            result = result & _wanted(child, x, negated)
            if result.nothing:
                break
        return result
    if kind is Kind.XOR:
        return UNBOUNDED
    if not names_in(node):
        # a constant predicate (``1 == 2`` in ``x == "a" || 1 == 2``): one
        # that is never true adds nothing to an || and empties an &&
        outcome = _evaluate(node, {})
        if outcome is _UNKNOWN:
            return UNBOUNDED
        return UNBOUNDED if outcome is (not negated) else NOTHING
    comparison = _numeric_comparison(node, x)
    if comparison is not None:
        op, value = comparison
        return _compared(_NEGATE[op] if negated else op, value)
    if negated:
        return UNBOUNDED    # !(X == "a"), !begins-with(...): any other string
    if kind is Kind.EQUALS and len(node.children) == 2:
        a, b = node.children
        for subject, literal in ((a, b), (b, a)):
            transforms = _subject_transforms(subject, x)
            if transforms is not None and _is_literal(literal):
                return Wanted(False, frozenset({Constraint(Match.EQUALS, literal.value,
                                                           transforms)}))
        return UNBOUNDED
    if kind is Kind.FUNC_EQUALS and node.children:
        transforms = _subject_transforms(node.children[0], x)
        if transforms is not None and all(_is_literal(c) for c in node.children[1:]):
            return Wanted(False, frozenset(Constraint(Match.EQUALS, c.value, transforms)
                                           for c in node.children[1:]))
        return UNBOUNDED
    if kind in _FUNC_MATCH and node.children:
        transforms = _subject_transforms(node.children[0], x)
        if transforms is not None and all(c.kind is Kind.STRING for c in node.children[1:]):
            match = _FUNC_MATCH[kind]
            return Wanted(False, frozenset(Constraint(match, c.value, transforms)
                                           for c in node.children[1:]))
        return UNBOUNDED
    if kind is Kind.FUNC_NAN and _subject_transforms(node.children[0], x) == ():
        return Wanted(False, frozenset({Constraint(Match.RANGE, _NAN_ONLY)}))
    # Any other predicate (require, type tests, size, arithmetic...) or one
    # that does not mention x at all leaves x unconstrained.
    return UNBOUNDED


_NAN_ONLY = Interval(math.nan, True, math.nan, True)
_COMPARISONS = frozenset(_NEGATE)
_NUMERIC_LITERALS = frozenset({Kind.INT32, Kind.INT64, Kind.REAL64})


def _numeric_comparison(node: Node, x: str) -> tuple[Kind, int | float] | None:
    """``X OP number`` (or ``number OP X``) as (OP with X on the left,
    number); else None."""
    if node.kind not in _COMPARISONS or len(node.children) != 2:
        return None
    a, b = node.children
    for subject, literal, op in ((a, b, node.kind), (b, a, _FLIP[node.kind])):
        if subject.kind is not Kind.NAME or subject.value != x:
            continue
        number = _constant_number(literal)
        if number is not None:
            value = number.value
            if number.kind is Kind.INT64:
                from elvin.values import Int64
                value = Int64(int(value))
            return op, value
    return None


def _constant_number(node: Node) -> Node | None:
    """``node`` as a numeric literal, folding a constant expression as the
    router's compiler does (``0.0 / 0.0`` is a NaN, ``-(5)`` is -5); None
    when it is not a constant number."""
    if node.kind in _NUMERIC_LITERALS:
        return node
    if node.kind in LEAF_KINDS or names_in(node):
        return None
    from elvin.subscription.checker import fold
    try:
        folded = fold(node)
    except Exception:  # noqa: BLE001 - a tree the checker would refuse: not a constant here
        return None
    return folded if folded.kind in _NUMERIC_LITERALS else None


def _compared(op: Kind, value: int | float) -> Wanted:
    """The numbers ``X OP value`` is true of."""
    if op is Kind.EQUALS:
        constraints = {Constraint(Match.EQUALS, value)}
    elif op is Kind.NOT_EQUALS:
        constraints = {Constraint(Match.RANGE, Interval(high=value)),
                       Constraint(Match.RANGE, Interval(low=value))}
    else:
        constraints = {Constraint(Match.RANGE, _COMPARISON_INTERVAL[op](value))}
    return Wanted(False, frozenset(constraints))


#: an && of two unions meets them pairwise; beyond this many pairs it keeps
#: the tighter union instead (still sound, less precise)
_MAX_MEET = 256


def _meet(a: Constraint, b: Constraint) -> Constraint | None:
    """A constraint that holds of every value satisfying both (None: no
    value does): exact where the language's order allows, else one of the
    two (each alone is sound for an &&)."""
    for e, other in ((a, b), (b, a)):
        if e.match is Match.EQUALS and not e.transforms:
            value = e.value
            numbers = [value, *_numbers_in(other)]
            if isinstance(value, str) or all(_exact(n) for n in numbers):
                return e if other.matches(value) else None
            return e        # 2**53 + 1 == 2.0**53: no safe answer, keep the value
    if Match.RANGE in (a.match, b.match):
        if a.match is not b.match:
            return None     # a string test is bottom on a number, a range on a string
        met = a.value.intersect(b.value)  # type: ignore[union-attr, arg-type]  # both RANGE: Intervals
        return None if met is None else Constraint(Match.RANGE, met)
    if not a.transforms and not b.transforms and a.match is b.match is Match.BEGINS_WITH:
        p, q = str(a.value), str(b.value)
        if p.startswith(q):
            return a
        if q.startswith(p):
            return b
        return None
    return min(a, b, key=lambda c: _looseness(Wanted(False, frozenset({c}))))


def _merged(w: Wanted) -> Wanted:
    """``w`` with overlapping or touching intervals joined, and exact
    numbers inside an interval dropped: the same values, in the fewest
    disjoint ranges (what a producer wants to read, and quicker to test).
    Intervals with an end that cannot be ordered safely stay as they are."""
    if w.unbounded:
        return w
    ranges = [c.value for c in w.constraints      # (a RANGE's value is an Interval)
              if c.match is Match.RANGE and isinstance(c.value, Interval) and c.value.exact]
    if not ranges:
        return w
    def low_key(i: Interval) -> tuple:
        return ((0,),) if i.low is None else (_order_key(i.low), not i.low_closed)
    ranges.sort(key=low_key)
    joined: list[Interval] = [ranges[0]]
    for nxt in ranges[1:]:
        cur = joined[-1]
        if cur.high is None:
            continue                                  # cur reaches the top
        hi = _order_key(cur.high)
        lo = (0,) if nxt.low is None else _order_key(nxt.low)     # (0,): below -inf
        if lo < hi or (lo == hi and (cur.high_closed or nxt.low_closed)):
            if nxt.high is None:
                high, closed = None, False
            else:
                nhi = _order_key(nxt.high)
                if nhi > hi or (nhi == hi and nxt.high_closed):
                    high, closed = nxt.high, nxt.high_closed
                else:
                    high, closed = cur.high, cur.high_closed
            joined[-1] = Interval(cur.low, cur.low_closed, high, closed)
        else:
            joined.append(nxt)
    kept = {c for c in w.constraints
            if not (c.match is Match.RANGE and c.value.exact)}  # type: ignore[union-attr]  # as above
    kept = {c for c in kept if not (
        c.match is Match.EQUALS and not c.transforms and isinstance(c.value, (int, float))
        and _exact(c.value) and any(c.value in i for i in joined))}
    return Wanted(False, frozenset(kept | {Constraint(Match.RANGE, i) for i in joined}))


def _numbers_in(c: Constraint) -> list:
    if isinstance(c.value, Interval):
        return [end for end in (c.value.low, c.value.high) if end is not None]
    return [c.value] if isinstance(c.value, (int, float)) else []


def _subject_transforms(node: Node, x: str) -> tuple[str, ...] | None:
    """If ``node`` is ``x`` wrapped in string transforms, the transforms
    (innermost first); else None."""
    transforms: list[str] = []
    while node.kind in _TRANSFORMS and len(node.children) == 1:
        transforms.append(_TRANSFORMS[node.kind])
        node = node.children[0]
    if node.kind is Kind.NAME and node.value == x:
        return tuple(reversed(transforms))
    return None


def _is_literal(node: Node) -> bool:
    return node.kind in (Kind.STRING, Kind.INT32, Kind.INT64, Kind.REAL64)


def _literal(value: int | float | str) -> Node:
    from elvin.values import INT32_MAX, INT32_MIN, Int64
    if isinstance(value, str):
        return Node(Kind.STRING, value=value)
    if isinstance(value, float):
        if not math.isfinite(value):
            # no literal form: written as the division that folds to it
            numerator = 0.0 if value != value else math.copysign(1.0, value)
            return Node(Kind.DIVIDE, (Node(Kind.REAL64, value=numerator),
                                      Node(Kind.REAL64, value=0.0)))
        return Node(Kind.REAL64, value=value)
    if isinstance(value, Int64) or not INT32_MIN <= value <= INT32_MAX:
        return Node(Kind.INT64, value=int(value))
    return Node(Kind.INT32, value=int(value))


# ---------------------------------------------------------------------------
# could_match()
# ---------------------------------------------------------------------------

_T, _F, _B = True, False, None
_ALL = frozenset({_T, _F, _B})
_ONLY_TRUE = frozenset({_T})
_ONLY_FALSE = frozenset({_F})


def is_browsing(ast: Node) -> bool:
    """Whether ``ast`` is a browser's subscription (``require(Elvin-Browse)
    || ...``, ``elvin.census.BROWSE_MARKER``): someone looking at whatever
    flows, which is no reason for a quench-driven producer to produce."""
    return BROWSE_MARKER in names_in(ast)


def could_match(ast: Node, attributes: Mapping[str, object], *, complete: bool = False) -> bool:
    """Could ``ast`` be true for a notification with these attribute values?

    With ``complete=False`` (the default) names absent from ``attributes``
    are unknown: they may be present in the real notification with any value,
    so the answer is conservative (False only when the known values rule the
    subscription out, e.g. ``File-Path == "/a" && size(Body) > 3`` with
    ``File-Path = "/b"``). With ``complete=True`` the attributes are the whole
    notification and the answer is exact (absent names are bottom).
    """
    if complete:
        outcome = _evaluate(ast, attributes)
        return outcome is True or outcome is _UNKNOWN
    return _T in _possible(ast, attributes)


def could_match_any(asts: Iterable[Node] | Mapping[object, Node],
                    attributes: Mapping[str, object], *, complete: bool = False) -> bool:
    """Could any of ``asts`` (a quench's subscriptions, a list or a mapping of them) be
    true for a notification with these attributes? As :func:`could_match` for each: how
    a producer decides whether a notification is worth sending.
    """
    if isinstance(asts, Mapping):
        asts = asts.values()
    return any(could_match(ast, attributes, complete=complete) for ast in asts)


def _possible(node: Node, attrs: Mapping[str, object]) -> frozenset:
    kind = node.kind
    if kind in _BOOLEAN_CONNECTIVES:
        children = node.children
        if not children:
            return _ALL
        if kind is Kind.NOT:
            return frozenset(not3(v) for v in _possible(children[0], attrs))
        op = {Kind.AND: and3, Kind.OR: or3, Kind.XOR: xor3}[kind]
        # A long chain stops as soon as its outcome is settled: T || ... is T,
        # F && ... is F (a 10,000-term OR from a tickertape user stays cheap).
        settled = {Kind.OR: _ONLY_TRUE, Kind.AND: _ONLY_FALSE}.get(kind)
        result = _possible(children[0], attrs)
        for child in children[1:]:
            if result == settled:
                break
            part = _possible(child, attrs)
            result = frozenset(op(a, b) for a in result for b in part)
        return result
    # a predicate: decided if every name it uses is known
    if not names_in(node) <= attrs.keys():
        return _ALL
    outcome = _evaluate(node, attrs)
    return _ALL if outcome is _UNKNOWN else frozenset({outcome})


_UNKNOWN = object()


@functools.lru_cache(maxsize=4096)
def _compiled(node: Node):
    """A constraint's predicate is tested against many values: compile it once."""
    from elvin.subscription import compile as compile_subscription
    try:
        return compile_subscription(node)
    except Exception:  # noqa: BLE001 - e.g. a constant predicate the compiler calls trivial
        return None


def _evaluate(node: Node, attrs: Mapping[str, object]):
    """One predicate, once: the plain interpreter costs far less than compiling
    (a 10,000-term OR would otherwise compile 10,000 predicates per call)."""
    from elvin.subscription.reference import evaluate
    try:
        return evaluate(node, attrs)
    except Exception:  # noqa: BLE001 - a tree the interpreter cannot read: decide nothing
        return _UNKNOWN
