"""Which feeds to poll: the quench's subscriptions against each feed.

The daemon registers a quench on every attribute name it can produce
(``articles.PRODUCED``); the router then reports each subscription that
refers to any of them. A feed is polled when at least one of those
subscriptions *could* be true for one of its notifications. Before fetching,
the daemon knows the feed-level values (``News-Feed``, ``News-Feed-URL``,
``Group`` for each of the feed's groups, ``From``, ``Timeout``,
``User-Agent``, ``org.tickertape.message``); the article values (title,
author...) are unknown.

Two analyses, both sound (they answer False only when no notification of
the feed can match), combined with "and":

* ``elvin.quenching.could_match(ast, known)``: names not in ``known`` are
  unknown, so ``News-Feed == "lwn"`` rules out every other feed while
  ``contains(News-Title, "python")`` keeps all of them;
* :func:`possible` refines it with what could_match cannot know: a name the
  newswatcher never produces is *absent* (bottom), not unknown. Without it
  the tickertape's own subscription (``... Group == "Chat" || (require(TICKERTEXT)
  && ... TICKERTAPE == "Chat")``, its pre-v3 branch) would keep every feed
  polled, because nothing is known about TICKERTAPE; likewise
  ``require(Message) && Thread-Id == "..."``.

Selection is incremental: a quench event re-evaluates one term against the
feeds (terms x feeds x groups evaluations of small predicates), never the
whole set.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from elvin_apps.newswatcher.articles import PRODUCED, feed_attributes
from elvin_apps.newswatcher.config import FeedConfig

from elvin.client import SubscriptionAdded, SubscriptionModified, SubscriptionRemoved
from elvin.quenching import could_match, is_browsing
from elvin.subscription.ast import Kind, Node, names_in
from elvin.subscription.logic import and3, not3, or3, xor3

log = logging.getLogger("elvin_apps.newswatcher.selection")

__all__ = ["Selection", "FeedChoice", "feed_could_match", "possible"]

_T, _F, _B = True, False, None
_ALL = frozenset({_T, _F, _B})
_CONNECTIVES = frozenset({Kind.AND, Kind.OR, Kind.XOR, Kind.NOT})


@functools.lru_cache(maxsize=8192)
def _compiled(node: Node):
    from elvin.subscription import compile as compile_subscription
    try:
        return compile_subscription(node)
    except Exception:  # noqa: BLE001 - e.g. a constant the compiler folds: stay unsure
        return None


def possible(node: Node, known: Mapping[str, object],
             produced: frozenset[str] = PRODUCED) -> frozenset:
    """The truth values ``node`` can take (of True, False, None=bottom) for a
    notification with the ``known`` values, other ``produced`` names unknown
    and every other name absent."""
    kind = node.kind
    if kind in _CONNECTIVES:
        parts = [possible(child, known, produced) for child in node.children]
        if not parts:
            return _ALL
        if kind is Kind.NOT:
            return frozenset(not3(v) for v in parts[0])
        combine = {Kind.AND: and3, Kind.OR: or3, Kind.XOR: xor3}[kind]
        result = parts[0]
        for part in parts[1:]:
            result = frozenset(combine(a, b) for a in result for b in part)
        return result
    names = names_in(node)
    if any(n in produced and n not in known for n in names):
        return _ALL                              # depends on an article value
    compiled = _compiled(node)
    if compiled is None:
        return _ALL
    try:
        outcome = compiled.evaluate({n: known[n] for n in names if n in known})
    except Exception:  # noqa: BLE001 - evaluation never raises, but be sure
        return _ALL
    return frozenset({outcome if outcome in (True, False) else _B})


def feed_could_match(ast: Node, feed: FeedConfig) -> bool:
    """Could ``ast`` be true for some notification of ``feed`` (in any of
    its groups)? Errors in the analysis answer True (poll rather than miss).
    A browser's subscription (the console's Browse) answers False: it looks
    at what flows and is no reason to fetch."""
    if is_browsing(ast):
        return False
    for group in feed.groups:
        known = feed_attributes(feed, group)
        try:
            if could_match(ast, known) and _T in possible(ast, known):
                return True
        except Exception:  # an analysis bug polls the feed (safe); logged
            log.exception("quench analysis failed; polling %s to be safe", feed.name)
            return True
    return False


@dataclass(frozen=True)
class FeedChoice:
    """Why a feed is (not) polled: the term ids that could match it."""

    name: str
    polled: bool
    terms: tuple[int, ...]
    scoop: bool = False


class Selection:
    """The polled feeds, kept up to date from quench events.

    ``on_change(names)`` is called with the feed names whose polled state
    flipped. In scoop mode every feed is polled whatever the quench says.
    """

    def __init__(self, feeds: Iterable[FeedConfig] = (), *, scoop: bool = False,
                 on_change: Callable[[set[str]], object] | None = None) -> None:
        self.scoop = scoop
        self.on_change = on_change
        self.feeds: dict[str, FeedConfig] = {f.name: f for f in feeds}
        self.terms: dict[int, Node] = {}
        self._matches: dict[int, frozenset[str]] = {}   # term -> feeds it could match
        self._by_feed: dict[str, set[int]] = {name: set() for name in self.feeds}

    # -- queries ------------------------------------------------------------------
    def polled(self, name: str) -> bool:
        return name in self.feeds and (self.scoop or bool(self._by_feed.get(name)))

    def polled_names(self) -> list[str]:
        return [name for name in self.feeds if self.polled(name)]

    def choice(self, name: str) -> FeedChoice:
        terms = tuple(sorted(self._by_feed.get(name, ())))
        return FeedChoice(name, self.polled(name), terms, self.scoop)

    def expression(self, term_id: int, limit: int = 200) -> str:
        node = self.terms.get(term_id)
        if node is None:
            return ""
        try:
            from elvin.subscription import unparse
            text = unparse(node)
        except Exception:  # noqa: BLE001
            text = repr(node)
        return text if len(text) <= limit else text[:limit - 1] + "\u2026"

    # -- updates --------------------------------------------------------------------
    def apply(self, event: SubscriptionAdded | SubscriptionModified | SubscriptionRemoved
              ) -> None:
        """A quench event from ``elvin.client``."""
        if isinstance(event, SubscriptionRemoved):
            self.remove_term(event.term_id)
        else:
            self.set_term(event.term_id, event.ast)

    def set_term(self, term_id: int, ast: Node) -> None:
        before = self._snapshot()
        self._drop(term_id)
        self.terms[term_id] = ast
        matched = frozenset(name for name, feed in self.feeds.items()
                            if feed_could_match(ast, feed))
        self._matches[term_id] = matched
        for name in matched:
            self._by_feed[name].add(term_id)
        self._notify(before)

    def remove_term(self, term_id: int) -> None:
        before = self._snapshot()
        self._drop(term_id)
        self._notify(before)

    def clear_terms(self) -> None:
        before = self._snapshot()
        for term_id in list(self.terms):
            self._drop(term_id)
        self._notify(before)

    def set_feeds(self, feeds: Iterable[FeedConfig]) -> None:
        """The config changed: re-evaluate every term against the new feeds."""
        before = self._snapshot()
        self.feeds = {f.name: f for f in feeds}
        self._by_feed = {name: set() for name in self.feeds}
        for term_id, ast in self.terms.items():
            matched = frozenset(name for name, feed in self.feeds.items()
                                if feed_could_match(ast, feed))
            self._matches[term_id] = matched
            for name in matched:
                self._by_feed[name].add(term_id)
        self._notify(before, also=set(before) ^ set(self.feeds))

    def set_scoop(self, scoop: bool) -> None:
        before = self._snapshot()
        self.scoop = scoop
        self._notify(before)

    # -- internals ------------------------------------------------------------------
    def _drop(self, term_id: int) -> None:
        self.terms.pop(term_id, None)
        for name in self._matches.pop(term_id, frozenset()):
            terms = self._by_feed.get(name)
            if terms is not None:
                terms.discard(term_id)

    def _snapshot(self) -> dict[str, bool]:
        return {name: self.polled(name) for name in self.feeds}

    def _notify(self, before: dict[str, bool], also: set[str] | None = None) -> None:
        changed = {name for name in self.feeds if self.polled(name) != before.get(name, False)}
        if also:
            changed |= also
        if changed and self.on_change is not None:
            self.on_change(changed)
