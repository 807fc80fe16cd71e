"""The outbox: notifications on their way to the router, and what became of them.

One loop sends them in order. Each is counted as ``sent``, ``quenched``
(auto-quench dropped it: no subscription could match it) or ``failed`` (no
connection, an error, or the outbox full), and the file states it carries are
noted in the snapshots as *handled* when it was sent or nobody wanted it, so
that a re-scan does not report it again. A quenched notification is not
handled during the reconnection grace: its subscriber may be on the way back.

A failure is not retried one by one: the notification is given up and, once
the outbox is empty and the connection open (after the grace, which re-scans
anyway), a re-scan reports every change that was not handled. The outbox is
bounded so that a router that cannot keep up costs memory only up to a limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import TYPE_CHECKING

from elvin_apps.filewatcher.attributes import describe

from elvin.client import ConnectionClosedError
from elvin.errors import ElvinError
from elvin.values import Value

if TYPE_CHECKING:
    from elvin_apps.filewatcher.chores import Chores
    from elvin_apps.filewatcher.grace import ReconnectGrace
    from elvin_apps.filewatcher.link import RouterLink
    from elvin_apps.filewatcher.snapshots import Snapshots

__all__ = ["Outbox"]

log = logging.getLogger("elvin_apps.filewatcher")

OUTBOX_SIZE = 10_000

#: (path, its lstat then or None) for each file state a notification reports
Notes = list[tuple[str, os.stat_result | None]]


class Outbox:
    def __init__(self, link: RouterLink, snapshots: Snapshots, grace: ReconnectGrace,
                 chores: Chores, counters: dict[str, int], size: int = OUTBOX_SIZE) -> None:
        self.link = link
        self.snapshots = snapshots
        self.grace = grace
        self.chores = chores
        self.counters = counters
        self._queue: asyncio.Queue[tuple[dict[str, Value], Notes]] = asyncio.Queue(size)
        self._missed = False

    def put(self, attrs: dict[str, Value], notes: Notes) -> None:
        for path, st in notes:      # known at once, for the next event's attrib check
            self.snapshots.note(path, st, False)
        try:
            self._queue.put_nowait((attrs, notes))
        except asyncio.QueueFull:
            self._failed()

    def _failed(self) -> None:
        self.counters["failed"] += 1
        self._missed = True

    async def run(self) -> None:
        queue = self._queue
        while True:
            attrs, notes = await queue.get()
            try:
                handled = await self._send(attrs)
                for path, st in notes:
                    self.snapshots.note(path, st, handled)
            finally:
                queue.task_done()
            if self._missed and queue.empty() and self.link.is_open and not self.grace.active:
                self._missed = False
                self.chores.want_rescan("notifications could not be sent")

    async def _send(self, attrs: dict[str, Value]) -> bool:
        """Send one notification; True when it is handled (see the module doc)."""
        if not self.link.is_open:
            # do not wait for the router per notification: the re-scan
            # after the reconnection reports what was not handled
            self._failed()
            return False
        try:
            sent = await self.link.conn.send(attrs)
        except (ConnectionClosedError, ElvinError, OSError) as exc:
            log.debug("could not send %s: %s", describe(attrs), exc)
            self._failed()
            return False
        if sent:
            self.counters["sent"] += 1
            log.debug("sent %s", describe(attrs))
            return True
        self.counters["quenched"] += 1
        return not self.grace.active

    async def drain(self, timeout: float) -> None:
        """Give what is queued up to ``timeout`` seconds to go out (at shutdown)."""
        if self._queue.empty() or not self.link.is_open:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._queue.join()
