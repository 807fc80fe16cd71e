"""Pull filters that follow the trees: what each router behind a link wants (sans-IO).

Why: a pull filter says what a peer wants over a link, whatever the
notification's origin. With ``routing = "trees"`` a router forwards a
notification only to its children in the origin's tree, but a child's pull
filter also holds what routers reached *through other links of that child*
want: on a ring of four with a subscriber at r2, r3's pull filter to r0 holds
r2's subscription (r3 would pass it on to r2), so r0 sends r3 every
notification of r0's although on r0's tree r2 hangs below r1, not r3.

So a router that takes part also says, in its pull filter, *which router*
each term is for: the terms of router S are ANDed with a tag,
``Elvin-Federation-Topology == "@spt1:behind:S"``. A router forwarding a
notification to child C in the origin's tree then matches only the terms of
the routers in C's subtree (``BehindMatchers``): exactly "a subscriber at C
or behind it on the tree may want it".

The tagged terms are part of an ordinary pull filter (one more OR term
each): a router that does not take part (Avis, ``routing = "flood"``)
compiles them as they are, and they match nothing it would forward (no
notification carries that attribute: a router that takes part never
forwards a client's notification that does). The untagged terms are the
ordinary pull filter as before, which the routes that no graph places
(flooding) and routers that do not take part use.

Groups (``Groups``): ``{router: filter}``. A router's own group is its local
subscriptions; a peer that sent groups gives its groups (ANDed with this
router's outgoing filter for the link, as the plain pull filter does); a peer
that did not (it does not take part, or its filter was too big to tag) gives
its whole pull filter under ``WILDCARD``, which every subtree includes: its
terms may be for anyone. The group of the peer the filter is for is left
out (its own subscriptions, come back around a cycle: the peer is never
behind itself). ``GROUPED`` marks a filter that carries groups, so that "no
term for S" can be told from "nothing said".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from elvin.federation.config import STAMP_PREFIX
from elvin.federation.pullfilter import PullMatcher, compute_pull_filter
from elvin.federation.subast import TRUE_FILTER_AST, PullFilter
from elvin.subscription.ast import Kind, Node, const, name, op

__all__ = ["GROUPED", "WILDCARD", "BehindMatchers", "Groups", "compute_groups",
           "split_groups", "with_groups"]

#: the group of terms that may be for any router (a peer that sent no groups)
WILDCARD = "*"
_TAG = STAMP_PREFIX + "behind:"          # no router domain starts with STAMP_PREFIX
_GROUPED = STAMP_PREFIX + "grouped"
_ATTR = "Elvin-Federation-Topology"      # topology.ANNOUNCEMENT_ATTR (no import cycle)

Groups = dict[str, PullFilter]


def _tag(router: str) -> Node:
    return op(Kind.EQUALS, name(_ATTR), const(Kind.STRING, _TAG + router))


#: the term that says "this filter's terms are grouped by router"
GROUPED = op(Kind.EQUALS, name(_ATTR), const(Kind.STRING, _GROUPED))


def _tag_value(node: Node) -> str | None:
    """The string a ``_ATTR == "..."`` term compares with, else None."""
    if node.kind is Kind.EQUALS and len(node.children) == 2:
        left, right = node.children
        if left.kind is Kind.NAME and left.value == _ATTR and right.kind is Kind.STRING:
            return right.value
    return None


def _terms(pull: Node) -> tuple[Node, ...]:
    return pull.children if pull.kind is Kind.OR else (pull,)


def compute_groups(incoming: PullFilter, me: str, local: Iterable[Node],
                   others: Iterable[tuple[PullFilter, Groups | None, PullFilter]],
                   skip: str | None, max_disjuncts: int = 10000) -> Groups | None:
    """The groups of the pull filter for one link: ``incoming`` is the link's
    incoming filter, ``others`` (outgoing filter, the peer's groups or None,
    the peer's plain pull filter) of every other live link, ``skip`` the
    domain of the link's peer. None when they would not fit in
    ``max_disjuncts`` terms (the plain filter alone is then sent)."""
    if incoming is False:
        return {}
    parts: dict[str, list[tuple[PullFilter, PullFilter]]] = {}
    for outgoing, groups, plain in others:
        if outgoing is False:
            continue
        if groups is None:
            parts.setdefault(WILDCARD, []).append((outgoing, plain))
            continue
        for router, pull in groups.items():
            if router != skip and pull is not False:
                parts.setdefault(router, []).append((outgoing, pull))
    local = list(local)
    if local:
        parts.setdefault(me, [])
    result: Groups = {}
    count = 0
    for router, contributions in parts.items():
        pull = compute_pull_filter(incoming, local if router == me else (), contributions,
                                   max_disjuncts)
        if pull is False:
            continue
        result[router] = pull
        count += 1 if isinstance(pull, bool) else len(_terms(pull))
        if count > max_disjuncts:
            return None
    return result


def with_groups(pull: PullFilter, groups: Groups | None) -> PullFilter:
    """``pull`` OR ``GROUPED`` OR every group's terms ANDed with its tag
    (``pull`` alone for None, and for no groups when ``pull`` is FALSE:
    nothing is wanted, which the plain filter says as well). No groups with
    a plain filter that wants something (the peer's own subscriptions come
    back around a cycle) must still say ``GROUPED``: sent plain, the peer
    would take those terms as anyone's (``WILDCARD``) and pass them on round
    the cycle, where they would stay."""
    if groups is None or (not groups and pull is False):
        return pull
    if pull is True:
        head: list[Node] = [TRUE_FILTER_AST]
    elif pull is False:
        head = []
    else:
        head = list(_terms(pull))
    tagged: list[Node] = [GROUPED]
    for router in sorted(groups):
        group = groups[router]
        tag = _tag(router)
        if group is True:
            tagged.append(tag)
            continue
        for term in _terms(group):  # type: ignore[arg-type]
            conjuncts = term.children if term.kind is Kind.AND else (term,)
            tagged.append(Node(Kind.AND, (tag, *conjuncts)))
    return Node(Kind.OR, (*head, *tagged))


def split_groups(pull: PullFilter) -> tuple[PullFilter, Groups | None]:
    """``(pull without the grouped terms, the groups)``; groups None when
    ``pull`` carries none (a router that does not take part, or an older one)."""
    if pull is True or pull is False:
        return pull, None
    terms = _terms(pull)
    if GROUPED not in terms:
        return pull, None
    rest: list[Node] = []
    found: dict[str, list[Node]] = {}
    everything: set[str] = set()
    for term in terms:
        value = _tag_value(term)
        if value is not None and value.startswith(_TAG):
            everything.add(value[len(_TAG):])
            continue
        if value == _GROUPED:
            continue
        if term.kind is Kind.AND and term.children:
            value = _tag_value(term.children[0])
            if value is not None and value.startswith(_TAG):
                body = term.children[1:]
                found.setdefault(value[len(_TAG):], []).append(
                    body[0] if len(body) == 1 else Node(Kind.AND, body))
                continue
        rest.append(term)
    groups: Groups = {router: True for router in everything}
    for router, bodies in found.items():
        if router not in groups:
            groups[router] = bodies[0] if len(bodies) == 1 else Node(Kind.OR, tuple(bodies))
    if not rest:
        plain: PullFilter = False
    elif len(rest) == 1:
        plain = True if rest[0] == TRUE_FILTER_AST else rest[0]
    else:
        plain = Node(Kind.OR, tuple(rest))
    return plain, groups


class BehindMatchers:
    """A peer's groups, matched for one subtree at a time.

    ``for_subtree(behind, nodes)`` is the matcher of the terms of the routers
    in ``behind`` (the peer's subtree in a notification's tree), of the
    routers the graph (``nodes``) does not place (they may be anywhere), and
    of ``WILDCARD``: False when there are none, else a ``PullMatcher`` built
    once per subtree (its terms' code is shared with the plain matcher's,
    ``compile_term``). Not the plain filter even when every group is wanted:
    that also holds this router's own subscriptions come back around a cycle.
    Groups of more than ``BUILD_LIMIT`` terms in all are not split: ``plain``
    is used (more than the subtree wants, never less), so that building a
    matcher never holds the loop for long."""

    #: terms a per-subtree matcher may have: it is built on the loop, when a
    #: notification first needs it (index insertions of code already compiled
    #: for the plain filter, ~50 us a term on a loaded machine)
    BUILD_LIMIT = 100

    def __init__(self, groups: Groups, plain: Any, max_terms: int = 20000) -> None:
        self.groups = groups
        self.plain = plain
        self.max_terms = max_terms
        self.size = sum(1 if isinstance(g, bool) else len(_terms(g)) for g in groups.values())
        self._cache: dict[tuple[frozenset[str], frozenset[str]], Any] = {}

    def for_subtree(self, behind: frozenset[str], nodes: frozenset[str]) -> Any:
        key = (behind, nodes)
        try:
            return self._cache[key]
        except KeyError:
            pass
        wanted = [router for router in self.groups
                  if router in behind or router not in nodes or router == WILDCARD]
        if not wanted:
            matcher: Any = False
        elif self.size > self.BUILD_LIMIT:
            matcher = self.plain
        elif any(self.groups[router] is True for router in wanted):
            matcher = True
        else:
            terms: dict[Node, None] = {}
            for router in wanted:
                terms.update(dict.fromkeys(_terms(self.groups[router])))  # type: ignore[arg-type]
            built = PullMatcher()
            built.update(Node(Kind.OR, tuple(terms)) if len(terms) > 1 else next(iter(terms)),
                         self.max_terms)
            matcher = built if built.constant is None else built.constant
        if len(self._cache) > 256:
            self._cache.clear()
        self._cache[key] = matcher
        return matcher


def subtrees(tree: Mapping[str, str], router: str) -> dict[str, frozenset[str]]:
    """``{child: the routers at or below it}`` for ``router``'s children in
    ``tree`` (``{node: parent}``, the root its own parent)."""
    below: dict[str, list[str]] = {}
    for node, parent in tree.items():
        if node != parent:
            below.setdefault(parent, []).append(node)
    out: dict[str, frozenset[str]] = {}
    for child in below.get(router, ()):
        seen = [child]
        i = 0
        while i < len(seen):
            seen.extend(below.get(seen[i], ()))
            i += 1
        out[child] = frozenset(seen)
    return out
