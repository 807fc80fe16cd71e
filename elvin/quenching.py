"""Quench analysis: what do the subscriptions at the router want?

Sans-IO helpers over subscription ASTs (``elvin.subscription.ast.Node``), as
a quenching producer receives them in SubAddNotify / SubModNotify packets.
They are the "higher-order functions" of the Elvin 3 quenching paper: a
producer names an attribute it fills in (a file watcher's ``File-Path``, a news
watcher's ``Feed-URL``) and learns which values of it any subscription can
match, so that it produces only those.

``wanted(asts, "File-Path")`` returns a :class:`Wanted`:

* ``UNBOUNDED`` when some subscription can match *any* value of the attribute
  (``require(File-Path)``, ``File-Path != "/a"``, or an ``||`` whose other
  branch does not constrain ``File-Path``, as in
  ``File-Path == "/a" || File-Size > 3``);
* else a set of :class:`Constraint` s: exact values (``==``, ``equals()``),
  prefixes (``begins-with``), suffixes (``ends-with``), substrings
  (``contains``), glob patterns (``wildcard``) and regular expressions
  (``regex``), each possibly applied through ``fold-case`` / ``decompose`` /
  ``decompose-compat`` (``Constraint.transforms``). An empty set means no
  subscription can match any value (nothing wanted).

The analysis over-approximates, never under-approximates: a value the
subscriptions can match is always ``wanted(...).matches(value)``; the reverse
need not hold (``&&`` keeps only the tighter side, negations and numeric
comparisons are unbounded). ``Constraint.matches`` evaluates the predicate
with the real subscription evaluator (``elvin.subscription.compile``), so
wildcard, regex and fold-case semantics are the router's own.

``could_match(ast, attributes)`` answers a related question for a partial
notification: could the subscription be true for some notification that has
these attribute values (other attributes unknown)? It is False only when the
known values already rule the subscription out.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from elvin.census import BROWSE_MARKER
from elvin.subscription.ast import Kind, Node, names_in
from elvin.subscription.logic import and3, not3, or3, xor3

__all__ = [
    "Constraint",
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
    value: int | float | str
    transforms: tuple[str, ...] = ()

    @property
    def fold_case(self) -> bool:
        return "fold-case" in self.transforms

    def node(self, attribute: str = _PLACEHOLDER) -> Node:
        """This constraint as a subscription AST over ``attribute``."""
        subject = Node(Kind.NAME, value=attribute)
        for label in self.transforms:
            subject = Node(_TRANSFORM_KINDS[label], (subject,))
        literal = _literal(self.value)
        if self.match is Match.EQUALS:
            return Node(Kind.EQUALS, (subject, literal))
        return Node(_MATCH_FUNC[self.match], (subject, literal))

    def matches(self, value: object) -> bool:
        """Whether an attribute value satisfies this constraint, by the
        subscription language's own evaluator."""
        outcome = _evaluate_compiled(self.node(), {_PLACEHOLDER: value})
        return outcome is True or outcome is _UNKNOWN  # unknown: stay conservative

    def __str__(self) -> str:
        from elvin.subscription import unparse
        return unparse(self.node("X"))


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
        return self.by(Match.EQUALS)

    @property
    def prefixes(self) -> frozenset:
        return self.by(Match.BEGINS_WITH)

    @property
    def suffixes(self) -> frozenset:
        return self.by(Match.ENDS_WITH)

    @property
    def substrings(self) -> frozenset:
        return self.by(Match.CONTAINS)

    @property
    def wildcards(self) -> frozenset:
        return self.by(Match.WILDCARD)

    @property
    def regexes(self) -> frozenset:
        return self.by(Match.REGEX)

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
    return result


def wanted_by(asts: Mapping[object, Node], attribute: str) -> dict[object, Wanted]:
    """``wanted`` for each entry of a mapping (term id -> AST) separately."""
    return {key: _wanted(ast, attribute) for key, ast in asts.items()}


def _wanted(node: Node, x: str) -> Wanted:
    kind = node.kind
    if kind is Kind.OR:
        result = NOTHING
        for child in node.children:
            result = result | _wanted(child, x)
            if result.unbounded:
                break
        return result
    if kind is Kind.AND:
        result = UNBOUNDED
        for child in node.children:
            result = result.narrower(_wanted(child, x))
        return result
    if kind in (Kind.NOT, Kind.XOR):
        return UNBOUNDED
    if not names_in(node):
        # a constant predicate (``1 == 2`` in ``x == "a" || 1 == 2``): one
        # that is never true adds nothing to an || and empties an &&
        outcome = _evaluate(node, {})
        return UNBOUNDED if outcome is True or outcome is _UNKNOWN else NOTHING
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
    # Any other predicate (require, !=, <, type tests, size...) or one that
    # does not mention x at all leaves x unconstrained.
    return UNBOUNDED


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
    except Exception:  # e.g. a constant predicate the compiler calls trivial
        return None


def _evaluate_compiled(node: Node, attrs: Mapping[str, object]):
    compiled = _compiled(node)
    if compiled is None:
        return _UNKNOWN
    return compiled.evaluate(attrs)


def _evaluate(node: Node, attrs: Mapping[str, object]):
    """One predicate, once: the plain interpreter costs far less than compiling
    (a 10,000-term OR would otherwise compile 10,000 predicates per call)."""
    from elvin.subscription.reference import evaluate
    try:
        return evaluate(node, attrs)
    except Exception:  # a tree the interpreter cannot read: decide nothing
        return _UNKNOWN
