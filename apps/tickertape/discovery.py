"""Known groups: which Group values people on this router subscribe to.

A quench on ``Group`` and ``TICKERTAPE`` makes the router tell us about every
subscription that mentions them (SubAddNotify / SubModNotify / SubDelNotify
with the subscription ASTs). From each AST we take the group names it
compares with: plain ``Group == "Chat"`` (via :func:`elvin.quenching.wanted`)
and the protocol's folded form
``fold-case(decompose-compat(Group)) == fold-case(decompose-compat("Chat"))``,
which ``wanted`` leaves unbounded because its right side is not a bare
literal. The result lets a user find channels that others are listening to.
"""

from __future__ import annotations

from collections.abc import Iterable

from elvin_apps.tickertape.groups import fold

from elvin.quenching import Match, wanted
from elvin.subscription.ast import Kind, Node

GROUP_ATTRIBUTES = ("Group", "TICKERTAPE")
_TRANSFORMS = frozenset({Kind.FUNC_FOLD_CASE, Kind.FUNC_DECOMPOSE, Kind.FUNC_DECOMPOSE_COMPAT})
MAX_NAME = 256


def _strip(node: Node) -> Node:
    while node.kind in _TRANSFORMS and len(node.children) == 1:
        node = node.children[0]
    return node


def group_names(ast: Node, attributes: Iterable[str] = GROUP_ATTRIBUTES) -> set[str]:
    """The group names a subscription compares the group attributes with."""
    attrs = frozenset(attributes)
    names: set[str] = set()
    for attribute in attrs:
        try:
            result = wanted(ast, attribute)
        except Exception:  # noqa: BLE001, S112 - an AST the analysis does not know
            continue
        if not result.unbounded:
            names.update(c.value for c in result.constraints
                         if c.match is Match.EQUALS and isinstance(c.value, str))
    for node in ast.walk():
        if node.kind not in (Kind.EQUALS, Kind.FUNC_EQUALS) or len(node.children) < 2:
            continue
        sides = [_strip(child) for child in node.children]
        if node.kind is Kind.EQUALS:
            pairs = [(sides[0], sides[1]), (sides[1], sides[0])]
        else:
            pairs = [(sides[0], other) for other in sides[1:]]
        for subject, literal in pairs:
            if subject.kind is Kind.NAME and subject.value in attrs \
                    and literal.kind is Kind.STRING:
                names.add(literal.value)
    return {n for n in names if n and len(n) <= MAX_NAME and n.isprintable()}


class KnownGroups:
    """Group names by quench term; ``counts()`` says how many subscriptions
    mention each name (names equal after folding count as one)."""

    def __init__(self) -> None:
        self._terms: dict[int, set[str]] = {}

    def set_term(self, term_id: int, ast: Node) -> None:
        names = group_names(ast)
        if names:
            self._terms[term_id] = names
        else:
            self._terms.pop(term_id, None)

    def remove_term(self, term_id: int) -> None:
        self._terms.pop(term_id, None)

    def clear(self) -> None:
        self._terms.clear()

    def apply(self, event: object) -> None:
        """Apply a quench event from elvin.client (added/modified/removed)."""
        ast = getattr(event, "ast", None)
        term_id = getattr(event, "term_id", None)
        if term_id is None:
            return
        if ast is None:
            self.remove_term(term_id)
        else:
            self.set_term(term_id, ast)

    def counts(self) -> dict[str, int]:
        spelled: dict[str, str] = {}
        counts: dict[str, int] = {}
        for names in self._terms.values():
            for key in {fold(n): n for n in names}.items():
                folded, name = key
                spelled.setdefault(folded, name)
                counts[folded] = counts.get(folded, 0) + 1
        return {spelled[k]: v for k, v in counts.items()}

    def names(self) -> list[str]:
        return sorted(self.counts(), key=str.casefold)
