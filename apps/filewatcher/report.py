"""Status reporting: what the daemon tells ``filewatcher status``.

:func:`daemon_status` says what is watched and why (the format is in
``status``); :class:`StatusReporter` decides when the file is rewritten:
soon after anything the report shows changes (a burst of changes costs one
write), and every ``interval`` seconds while the counters move.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from elvin_apps.filewatcher import __version__
from elvin_apps.filewatcher.status import remove_status, write_status

from elvin.fileutil import read_problem
from elvin.subscription import unparse

if TYPE_CHECKING:
    from elvin_apps.filewatcher.config import Config
    from elvin_apps.filewatcher.link import RouterLink
    from elvin_apps.filewatcher.reconcile import Reconciler
    from elvin_apps.filewatcher.watches import WatchManager

__all__ = ["StatusReporter", "daemon_status"]

log = logging.getLogger("elvin_apps.filewatcher")

LIST_LIMIT = 50              # entries shown per list; the rest are counted
EXPRESSION_LIMIT = 200       # characters of a subscription shown
WRITE_DELAY = 0.05           # after a change, so that a burst costs one write


def _limit(items: list[str]) -> list[str]:
    if len(items) <= LIST_LIMIT:
        return items
    return items[:LIST_LIMIT] + [f"... {len(items) - LIST_LIMIT} more"]


def _expression(ast: Any) -> str:
    try:
        text = unparse(ast) if ast is not None else "?"
    except Exception:  # noqa: BLE001 - a report, not a reason to fail
        text = "?"
    if len(text) > EXPRESSION_LIMIT:
        text = text[:EXPRESSION_LIMIT - 3] + "..."
    return text


def daemon_status(config: Config, link: RouterLink, manager: WatchManager,
                  reconciler: Reconciler, counters: Mapping[str, int],
                  started: float) -> dict[str, Any]:
    """What is watched and why, as written to the status file."""
    interest_terms = reconciler.interest_terms
    watches = []
    for key, watch in sorted(manager.watches.items()):
        subs: set[Any] = set()
        for interest in watch.interests:
            subs |= interest_terms.get(interest, set())
        unreadable = manager.unreadable(watch)
        watches.append({
            "path": key.path, "recursive": key.recursive, "backend": watch.backend,
            "pending": watch.pending, "error": watch.error,
            "unreadable": _limit(unreadable),
            "os_watches": manager.watch_os_count(watch),
            "subscriptions": sorted(subs, key=str),
            "interests": _limit(sorted(i.describe() for i in watch.interests)),
        })
    unplaceable = reconciler.plan.unplaceable
    subscriptions = []
    for tid, paths in sorted(reconciler.terms.items(), key=lambda item: str(item[0])):
        notes = list(paths.notes)
        notes += [f"{i.describe()}: {unplaceable[i]}" for i in paths.interests
                  if i in unplaceable]
        notes += [f"{w.key}: {w.error}" for w in manager.watches.values()
                  if w.error and w.interests & paths.interests]
        notes += [f"{w.key}: not watched inside (permission denied): "
                  f"{', '.join(_limit(manager.unreadable(w)))}"
                  for w in manager.watches.values()
                  if w.interests & paths.interests and manager.unreadable(w)]
        subscriptions.append({
            "id": tid, "expression": _expression(reconciler.term_asts.get(tid)),
            "watching": _limit(sorted(i.describe() for i in paths.interests)),
            "unbounded": paths.unbounded, "notes": list(dict.fromkeys(notes)),
        })
    return {
        "version": __version__, "pid": os.getpid(), "started": started,
        "updated": time.time(), "router": link.shown_url, "config": config.path or None,
        "connection": link.connection_state(), "roots": list(config.roots),
        "unreadable_roots": unreadable_roots(config.roots),
        "unbounded": config.unbounded,
        "quench": link.quench_state(),
        "os_watches": manager.os_watch_count(),
        "watches": watches, "subscriptions": subscriptions,
        "counters": dict(counters),
    }


def unreadable_roots(roots: list[str]) -> dict[str, str]:
    """The roots this process cannot list, with the reason: subscriptions
    under them cannot be served (a root owned by another user, mode 700)."""
    found = {}
    for root in roots:
        problem = read_problem(root, directory=True)
        if problem:
            found[root] = problem
    return found


class StatusReporter:
    """Writes ``build()`` to ``path``; :meth:`changed` after any change."""

    def __init__(self, path: str, build: Callable[[], Mapping[str, Any]],
                 counters: Mapping[str, int], interval: float) -> None:
        self.path = path
        self.build = build
        self.counters = counters
        self.interval = interval
        self._timer: asyncio.TimerHandle | None = None
        self._written: dict[str, int] = {}

    def changed(self) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(WRITE_DELAY, self.write)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if self.counters != self._written:
                self.write()

    def write(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._written = dict(self.counters)
        try:
            write_status(self.path, self.build())
        except OSError as exc:
            log.warning("cannot write the status file %s: %s", self.path,
                        exc.strerror or exc)

    def close(self) -> None:
        """Stop writing and remove the file: the daemon is not running."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        remove_status(self.path)
