"""Re-scans: finding, with the snapshots, the changes live events missed.

Asked for (``Chores.want_rescan``) after an inotify overflow, after
notifications that could not be sent, when the snapshot memory is full, and
at the end of a reconnection grace. The loop waits a little so that
requests gather, never scans while the router is away or the grace lasts
(the grace's end asks again), and lets a pending re-plan go first, so the
scan covers the watch set the subscriptions want. What it finds goes
through the intake like any live event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from elvin_apps.filewatcher.watches import RawEvent

if TYPE_CHECKING:
    from elvin_apps.filewatcher.chores import Chores
    from elvin_apps.filewatcher.grace import ReconnectGrace
    from elvin_apps.filewatcher.link import RouterLink
    from elvin_apps.filewatcher.snapshots import Snapshots
    from elvin_apps.filewatcher.watches import WatchManager

__all__ = ["Rescanner"]

log = logging.getLogger("elvin_apps.filewatcher")


class Rescanner:
    def __init__(self, link: RouterLink, manager: WatchManager, snapshots: Snapshots,
                 grace: ReconnectGrace, chores: Chores, counters: dict[str, int], *,
                 ingest: Callable[[Iterable[RawEvent]], None],
                 on_changed: Callable[[], None], delay: float) -> None:
        self.link = link
        self.manager = manager
        self.snapshots = snapshots
        self.grace = grace
        self.chores = chores
        self.counters = counters
        self.ingest = ingest
        self.on_changed = on_changed
        self.delay = delay

    def overflowed(self) -> None:
        """The kernel dropped events (what the inotify hook reports)."""
        self.counters["overflows"] += 1
        self.chores.want_rescan("inotify queue overflow")

    async def run(self) -> None:
        chores = self.chores
        while True:
            await chores.rescan.wait()
            await asyncio.sleep(self.delay)
            if not self.link.is_open or self.grace.active:
                chores.drop_rescan()     # the grace's end asks again
                continue
            while chores.replan.is_set():
                await asyncio.sleep(self.delay / 2)
            with chores.doing():
                reasons = chores.take_rescan()
                try:
                    await self.rescan(reasons)
                except asyncio.CancelledError:
                    raise
                except Exception:  # a failed re-scan must not stop the next; logged
                    log.exception("re-scan failed")

    async def rescan(self, reason: str = "requested") -> int:
        """Compare every watched directory with its snapshot and report what
        was missed. Returns the number of differences found."""
        keys = [k for k, w in self.manager.watches.items() if w.active]
        events = await self.snapshots.rescan(keys)
        self.counters["rescans"] += 1
        log.info("re-scan (%s): %d watched directories, %d changes not reported before",
                 reason, len(keys), len(events))
        self.ingest(events)
        self.on_changed()
        return len(events)
