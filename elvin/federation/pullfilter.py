"""Pull filters: what a router asks a federated peer to send it (sans-IO).

The pull filter a router registers with the peer on link L (FedSubReplace)
is::

    incoming_L  AND  ( OR of the local subscriptions
                       OR  for every other link M:  outgoing_M AND pull_M )

where ``pull_M`` is what the peer on M asked us for: a notification is worth
importing over L if a local client wants it, or if we would pass it on over
M. The draft allows a pull filter to be more general than the subscription
database (6.2.3), which we use when it grows past ``max_disjuncts`` terms: it
is then sent as TRUE.

The OR is kept as a set of flattened terms and every AND as a sorted set of
conjuncts, so the same term reached along two paths is one term. That makes
the computation reach a fixed point when the links form a cycle (each router
adds the peers' terms, which already hold its own): without it the filters
would grow by one nesting level per round trip around the cycle.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from elvin.errors import SubscriptionError
from elvin.federation.subast import PullFilter, encode_subast
from elvin.subscription import compile as compile_subscription
from elvin.subscription.ast import Kind, Node
from elvin.subscription.index import TermIndex, plan_for
from elvin.subscription.patterns import overruns
from elvin.subscription.suspension import charge_overrun

log = logging.getLogger(__name__)

__all__ = ["PullMatcher", "build_pull_matcher", "compile_pull_filter", "compile_term",
           "compute_pull_filter"]


def _or_terms(node: Node) -> tuple[Node, ...]:
    return node.children if node.kind is Kind.OR else (node,)


def _conjuncts(node: Node) -> tuple[Node, ...]:
    return node.children if node.kind is Kind.AND else (node,)


def _and(parts: Iterable[Node]) -> Node:
    unique = sorted(dict.fromkeys(parts), key=encode_subast)
    return unique[0] if len(unique) == 1 else Node(Kind.AND, tuple(unique))


def compute_pull_filter(incoming: PullFilter, local: Iterable[Node],
                        others: Iterable[tuple[PullFilter, PullFilter]],
                        max_disjuncts: int = 10000) -> PullFilter:
    """``incoming`` is this link's incoming filter, ``local`` the local
    subscription trees, ``others`` (outgoing filter, peer's pull filter) of
    every other live link."""
    if incoming is False:
        return False
    terms: dict[Node, None] = {}
    everything = False
    for ast in local:
        for term in _or_terms(ast):
            terms[term] = None
    for outgoing, pull in others:
        if outgoing is False or pull is False:
            continue
        if pull is True:
            if outgoing is True:
                everything = True
                break
            terms[outgoing] = None
            continue
        for term in _or_terms(pull):
            if outgoing is True:
                terms[term] = None
            else:
                terms[_and(_conjuncts(outgoing) + _conjuncts(term))] = None
        if len(terms) > max_disjuncts:
            break
    if everything or len(terms) > max_disjuncts:
        return incoming
    if not terms:
        return False
    if incoming is not True:
        # distributed over the terms, so that the peer can index every term
        # (PullMatcher) instead of evaluating one big AND of an OR
        head = _conjuncts(incoming)
        terms = dict.fromkeys(_and(head + _conjuncts(term)) for term in terms)
    keys = list(terms)
    return keys[0] if len(keys) == 1 else Node(Kind.OR, tuple(keys))


#: compiled terms, shared by every matcher that holds them (in a star the
#: links ask for the same terms), and kept only while one does: a replaced
#: filter's code goes with it (an ``lru_cache`` of 32,768 terms once kept
#: every replaced term's code, 12 KB each, until it was pushed out)
_COMPILED_TERMS: weakref.WeakValueDictionary[Node, Callable[[Mapping], bool]] = \
    weakref.WeakValueDictionary()


def compile_term(term: Node) -> Callable[[Mapping], bool] | bool:
    """``compile_pull_filter(term)``, or the same code another matcher holds."""
    found = _COMPILED_TERMS.get(term)
    if found is not None:
        return found
    made = compile_pull_filter(term)
    if made is not True and made is not False:    # constants are not worth keeping
        _COMPILED_TERMS[term] = made
    return made


def _always(attrs: Mapping) -> bool:
    return True


class _Term:
    """One OR term of a pull filter, as the index files it."""

    __slots__ = ("evaluate", "place")

    def __init__(self, evaluate: Callable[[Mapping], bool]) -> None:
        self.evaluate = evaluate
        self.place: tuple = ()


class PullMatcher:
    """A peer's pull filter, matched the way the router matches subscriptions.

    Each OR term is filed in a private ``TermIndex`` (the router's index,
    ``elvin.subscription.index``: equality, ranges, prefixes, names), so a
    notification is evaluated only against the terms that can match it, and
    a FedSubReplace that changes a few terms of a large filter compiles only
    those (compiled terms are also cached across links and updates).
    ``matcher(attrs)`` answers whether the notification is wanted;
    ``constant`` is True/False for the filters TRUE and FALSE, else None."""

    def __init__(self) -> None:
        self.index = TermIndex()
        self.subs: dict[Node, _Term] = {}
        self.constant: bool | None = False
        #: term evaluations whose pattern ran out of its own time (statistics)
        self.overruns = 0

    def update(self, pull: PullFilter, max_terms: int = 20000) -> None:
        """Replace the filter. Raises ``SubscriptionError`` (the old filter
        stays) if a term is not a valid expression. A filter of more than
        ``max_terms`` terms is taken as TRUE (the peer gets more than it
        asked for; it filters again on delivery), so that no peer can make
        this router compile without end."""
        if pull is True or pull is False:
            self._clear()
            self.constant = pull
            return
        terms = _or_terms(pull)
        if len(terms) > max_terms:
            self._clear()
            self.constant = True
            return
        wanted = dict.fromkeys(terms)
        new = {term: compile_term(term) for term in wanted if term not in self.subs}
        for term in [t for t in self.subs if t not in wanted]:
            self.index.remove(self.subs.pop(term))
        for term, match in new.items():
            if match is False:
                continue
            entry = self.subs[term] = _Term(_always if match is True else match)
            self.index.add(entry, plan_for(term))
        self.constant = None if self.subs else False

    def missing(self, pull: PullFilter, max_terms: int = 20000) -> list[Node]:
        """The terms ``update(pull)`` would have to compile (none for the
        constants or an oversized filter)."""
        if pull is True or pull is False:
            return []
        terms = _or_terms(pull)
        if len(terms) > max_terms:
            return []
        return [term for term in dict.fromkeys(terms) if term not in self.subs]

    def _clear(self) -> None:
        self.index.clear()
        self.subs.clear()

    def dismantle(self) -> None:
        """This matcher was replaced: it matches nothing afterwards. (The
        index holds no reference cycle: dropped, it and its terms' code are
        freed at once.)"""
        self._clear()
        self.constant = False

    def __call__(self, attrs: Mapping[str, Any]) -> bool:
        constant = self.constant
        if constant is not None:
            return constant
        # the terms' patterns are the peer's to choose: a term whose pattern
        # overruns its own time limit is suspended (``suspension.charge_overrun``),
        # so it costs this router's loop one limit per suspension, not one
        # per notification, and no other term is cut short by it
        over = overruns()
        overran = []
        try:
            for term in self.index.candidates(attrs):
                seen = over[0]
                try:
                    result = term.evaluate(attrs)
                except Exception:       # evaluation never raises, by contract; be safe
                    log.exception("evaluating a pull filter term failed")
                    continue
                if over[0] != seen:
                    charge_overrun(term)
                    overran.append(term)
                    self.overruns += 1
                if result is True:
                    return True
            return False
        finally:
            for term in overran:        # suspended from the end of this match
                charge_overrun(term, again=False)

    def __len__(self) -> int:
        return len(self.subs)


def build_pull_matcher(pull: PullFilter, max_terms: int = 20000) -> PullMatcher:
    """A new ``PullMatcher`` for ``pull``, built where it is called: the
    compile worker's job for a large FedSubReplace (a matcher no one else
    sees yet is safe to build on another thread; the link swaps it in on the
    loop). Raises what ``update`` raises."""
    matcher = PullMatcher()
    matcher.update(pull, max_terms)
    return matcher


def compile_pull_filter(pull: PullFilter) -> Callable[[Mapping], bool] | bool:
    """A peer's pull filter as ``matches(attrs)``, or a constant.

    Raises ``SubscriptionError`` for a tree the language rejects (the
    FedSubReplace is then Nacked). A constant tree (``1 == 1``, which our
    checker calls trivial but other routers may send) is its value."""
    if pull is True or pull is False:
        return pull
    try:
        return compile_subscription(pull).matches
    except SubscriptionError as exc:
        if exc.code != "EXP_IS_TRIVIAL":
            raise
        from elvin.subscription.reference import evaluate
        return evaluate(pull, {}) is True
