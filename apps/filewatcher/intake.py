"""Intake: file-system events in, notifications into the outbox.

Live events (watchdog, in batches on the loop), catch-up events (a pending
directory appeared) and re-scan events all come through :meth:`Intake.ingest`.
They are coalesced (``coalesce``: one notification per change a person
would name); when one is due it is routed to the interests that want it,
``lstat``-ed, classified (a ``modified`` that changed neither size nor mtime
is an ``attrib``) and turned into one notification per spelling of its path
among the subscribers (a subscriber may reach the roots through a symlink).

Routing happens again at emission because the watch set may have changed
while the event waited; the common ``modified`` in a busy directory is
dropped at once when nothing routes it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat as stat_module
from collections.abc import Iterable
from typing import TYPE_CHECKING

from elvin_apps.filewatcher.attributes import ATTRIB, notification
from elvin_apps.filewatcher.coalesce import Coalescer
from elvin_apps.filewatcher.pathset import FILE, Interest
from elvin_apps.filewatcher.watches import DELETED, MODIFIED, MOVED, RawEvent

if TYPE_CHECKING:
    from elvin_apps.filewatcher.chores import Chores
    from elvin_apps.filewatcher.outbox import Outbox
    from elvin_apps.filewatcher.snapshots import Snapshots
    from elvin_apps.filewatcher.watches import WatchManager

__all__ = ["Intake"]

log = logging.getLogger("elvin_apps.filewatcher")

#: the timer's floor, so that a burst of due events is handled in one tick
MIN_TICK = 0.002


def _rebase(interest: Interest, real: str) -> str:
    """``real`` as the subscriber of ``interest`` spells it."""
    if interest.kind == FILE:
        base_real, base_shown = os.path.dirname(interest.path), os.path.dirname(interest.shown)
    else:
        base_real, base_shown = interest.path, interest.shown
    if base_real == base_shown:
        return real
    if real == base_real or real.startswith(base_real.rstrip("/") + "/"):
        return base_shown + real[len(base_real):]
    return real


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


class Intake:
    def __init__(self, manager: WatchManager, snapshots: Snapshots, outbox: Outbox,
                 chores: Chores, counters: dict[str, int], *, host: str,
                 debounce: float, max_delay: float) -> None:
        self.manager = manager
        self.snapshots = snapshots
        self.outbox = outbox
        self.chores = chores
        self.counters = counters
        self.host = host
        self.coalescer = Coalescer(debounce, max_delay, existed=self._existed)
        self._timer: asyncio.TimerHandle | None = None

    def _existed(self, path: str) -> bool | None:
        known = self.snapshots.known(path)
        return None if known is None else known.exists

    def ingest(self, events: Iterable[RawEvent]) -> None:
        manager = self.manager
        now = asyncio.get_running_loop().time()
        count = 0
        for event in events:
            count += 1
            # the commonest event in a busy directory: drop early when unwanted
            if event.kind == MODIFIED and not manager.route(event.path):
                continue
            self.coalescer.add(event, now)
        self.counters["events"] += count
        self._arm()

    def flush(self) -> None:
        """Report everything pending now, due or not (at shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for event in self.coalescer.flush_all():
            self.emit(event)

    def _arm(self) -> None:
        when = self.coalescer.next_due()
        if when is None:
            return
        timer = self._timer
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(max(when, loop.time() + MIN_TICK), self._tick)

    def _tick(self) -> None:
        self._timer = None
        for event in self.coalescer.due(asyncio.get_running_loop().time()):
            try:
                self.emit(event)
            except Exception:  # one odd event must not stop the rest
                log.exception("could not report %s", event)
        if self.snapshots.over_limit:
            self.chores.want_rescan("memory limit")
        self._arm()

    def emit(self, event: RawEvent) -> None:
        """Turn one coalesced event into notifications (one per spelling of
        the path among the subscriptions that want it) in the outbox."""
        manager = self.manager
        host = self.host
        if event.kind == MOVED and event.dest is not None:
            interests = manager.route(event.path) + manager.route(event.dest)
            if not interests:
                return
            st = _lstat(event.dest)
            pairs = {(_rebase(i, event.path), _rebase(i, event.dest)) for i in interests}
            notes = [(event.path, None), (event.dest, st)]
            for src, dest in sorted(pairs):
                self.outbox.put(notification(MOVED, src, dest=dest, host=host,
                                             is_dir=event.is_dir, st=st), notes)
            return
        interests = manager.route(event.path)
        if not interests:
            return
        kind = event.kind
        st = None if kind == DELETED else _lstat(event.path)
        if kind == MODIFIED and st is not None and not event.rescan \
                and not stat_module.S_ISDIR(st.st_mode):
            before = self.snapshots.known(event.path)
            if before is not None and before.exists and before.mtime_ns == st.st_mtime_ns \
                    and before.size == st.st_size:
                kind = ATTRIB
        notes = [(event.path, st)]
        for shown in sorted({_rebase(i, event.path) for i in interests}):
            self.outbox.put(notification(kind, shown, host=host, is_dir=event.is_dir, st=st),
                            notes)
