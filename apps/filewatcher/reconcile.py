"""Reconciliation: what the subscriptions want -> what is watched.

The quench lists the subscriptions that mention the daemon's attributes.
Each is analysed (``pathset.analyse``, cached by expression) into the paths
it needs inside the roots; ``watches.plan`` turns them all into OS watches
and ``WatchManager.apply`` makes the watch set match, after which the new
watches get snapshot baselines. At a router without quench one pseudo
subscription, ``NO_QUENCH``, wants the roots, as ``unbounded = "roots"``
would.

Re-planning is asked for through ``Chores`` and done by one loop,
``delay`` seconds after the first request, so that a burst of quench events
costs one re-plan. Live events that change where watches must go (a
directory created under a pending watch, a watched directory deleted) ask
for it too (:meth:`Reconciler.notice`). When the directory of a pending
interest appears, what is already in it is reported as created: it was made
after the subscriber asked. During a reconnection nothing is re-planned,
and the interests kept by the grace (``grace``) stay watched.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import stat as stat_module
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from elvin_apps.filewatcher.pathset import FILE, Interest, TermPaths, analyse
from elvin_apps.filewatcher.status import NO_QUENCH_NOTE
from elvin_apps.filewatcher.watches import CREATED, DELETED, MOVED, Plan, RawEvent, plan

from elvin.subscription import parse
from elvin.subscription.ast import Node

if TYPE_CHECKING:
    from elvin_apps.filewatcher.chores import Chores
    from elvin_apps.filewatcher.config import Config
    from elvin_apps.filewatcher.grace import ReconnectGrace
    from elvin_apps.filewatcher.link import RouterLink
    from elvin_apps.filewatcher.snapshots import Snapshots
    from elvin_apps.filewatcher.watches import WatchManager

__all__ = ["BEFORE_RECONNECT", "NO_QUENCH", "Reconciler", "list_existing"]

log = logging.getLogger("elvin_apps.filewatcher")

#: the pseudo subscription that stands for "everything" at a router without quench
NO_QUENCH = "no-quench"
#: the pseudo subscription holding the interests the reconnection grace keeps
BEFORE_RECONNECT = "before-reconnect"
CATCH_UP_LIMIT = 10_000
ANALYSIS_CACHE_LIMIT = 10_000

_ANY_PATH = parse("require(File-Path)")


def list_existing(interests: Iterable[Interest], limit: int = CATCH_UP_LIMIT) -> list[RawEvent]:
    """``created`` events for what already exists of interests whose
    directory has just appeared (it was created after we started waiting for
    it, so everything in it is new)."""
    out: list[RawEvent] = []
    for interest in interests:
        if interest.kind == FILE:
            try:
                st = os.lstat(interest.path)
            except OSError:
                continue
            out.append(RawEvent(CREATED, interest.path, stat_module.S_ISDIR(st.st_mode)))
            continue
        for directory, dirs, files in os.walk(interest.path):
            for names, is_dir in ((dirs, True), (files, False)):
                for name in names:
                    path = os.path.join(directory, name)
                    if interest.covers(path):
                        out.append(RawEvent(CREATED, path, is_dir))
            if len(out) >= limit:
                log.warning("catch-up scan stopped after %d entries", limit)
                return out
    return out


class Reconciler:
    """Keeps the watch set in line with the subscriptions. ``terms`` (the
    analysis of each subscription), ``term_asts``, ``interest_terms`` (which
    subscriptions hold each interest) and ``plan`` describe the last
    re-plan, for the status report."""

    def __init__(self, config: Config, link: RouterLink, manager: WatchManager,
                 snapshots: Snapshots, grace: ReconnectGrace, chores: Chores, *,
                 ingest: Callable[[Iterable[RawEvent]], None],
                 on_changed: Callable[[], None], delay: float) -> None:
        self.config = config
        self.link = link
        self.manager = manager
        self.snapshots = snapshots
        self.grace = grace
        self.chores = chores
        self.ingest = ingest
        self.on_changed = on_changed
        self.delay = delay
        self.terms: dict[Any, TermPaths] = {}
        self.term_asts: dict[Any, Node] = {}
        self.interest_terms: dict[Interest, set[Any]] = {}
        self.plan = Plan()
        self._analyses: dict[Node, TermPaths] = {}
        self._warned: set[Any] = set()
        self._pending: set[Interest] = set()

    def notice(self, batch: Iterable[RawEvent]) -> None:
        """Ask for a re-plan when live events move where watches must go."""
        manager = self.manager
        replan = False
        for event in batch:
            if manager.needs_replan(event):
                if event.kind in (DELETED, MOVED):
                    manager.mark_dead(event.path)
                replan = True
        if replan:
            self._analyses.clear()    # symlinks may have changed too
            self.chores.want_replan()

    def reconfigure(self, config: Config) -> None:
        """New roots, unbounded policy or path limit (a reload): every
        subscription is analysed again at the next re-plan, asked for now."""
        self.config = config
        self._analyses.clear()
        self._warned.clear()
        self.chores.want_replan()

    async def run(self) -> None:
        chores = self.chores
        while True:
            await chores.replan.wait()
            await asyncio.sleep(self.delay)
            with chores.doing():
                chores.replan.clear()
                try:
                    await self.reconcile()
                except asyncio.CancelledError:
                    raise
                except Exception:  # keep the daemon alive, say why
                    log.exception("re-planning the watches failed")

    def _analyse(self, term_id: Any, ast: Node) -> TermPaths:
        cached = self._analyses.get(ast)
        if cached is None:
            cached = analyse(ast, self.config.roots, policy=self.config.unbounded,
                             max_paths=self.config.max_paths_per_subscription)
            if len(self._analyses) > ANALYSIS_CACHE_LIMIT:
                self._analyses.clear()
            self._analyses[ast] = cached
        if cached.unbounded and term_id not in self._warned:
            self._warned.add(term_id)
            log.warning("subscription #%s: %s", term_id, "; ".join(cached.notes))
        return cached

    def _roots(self) -> TermPaths:
        """The roots, as ``unbounded = "roots"`` watches them."""
        paths = analyse(_ANY_PATH, self.config.roots, policy="roots")
        return TermPaths(paths.interests, True, (NO_QUENCH_NOTE,))

    async def reconcile(self) -> None:
        """Plan the watches from the quench and apply the plan now."""
        link = self.link
        quench = link.quench
        if quench is None and not link.no_quench:
            return
        if not link.is_open or self.grace.in_outage:
            return      # the reconnection asks again once the quench is restored
        if quench is not None:
            asts = dict(quench.subscriptions)
            terms = {tid: self._analyse(tid, ast) for tid, ast in asts.items()}
        else:
            asts = {NO_QUENCH: _ANY_PATH}
            terms = {NO_QUENCH: self._roots()}
        self._warned &= set(asts)
        interest_terms: dict[Interest, set[Any]] = collections.defaultdict(set)
        for tid, paths in terms.items():
            for interest in paths.interests:
                interest_terms[interest].add(tid)
        self.grace.check(interest_terms)
        for interest in self.grace.kept:
            if interest not in interest_terms:
                interest_terms[interest].add(BEFORE_RECONNECT)
        new_plan = plan(interest_terms, self.config.roots)
        previously_pending = self._pending
        added, removed = await self.manager.apply(new_plan)
        self.snapshots.drop(removed)
        await self.snapshots.add(added)
        self._pending = set(new_plan.pending_interests)
        arrived = [i for i in previously_pending
                   if i in interest_terms and i not in new_plan.pending_interests
                   and i not in new_plan.unplaceable]
        self.terms, self.term_asts = terms, asts
        self.interest_terms = dict(interest_terms)
        self.plan = new_plan
        for key in added:
            watch = self.manager.watches.get(key)
            log.info("watching %s [%s]%s", key, watch.backend if watch else "?",
                     " (pending: waiting for a directory to appear)"
                     if watch and watch.pending else "")
        for key in removed:
            log.info("stopped watching %s", key)
        if arrived:
            self.ingest(await asyncio.to_thread(list_existing, arrived))
        self.on_changed()
