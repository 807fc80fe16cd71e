"""The two chores the daemon's parts ask of each other: re-plan, re-scan.

Many things mean the watches must be planned again (a quench event, a
reconnection, a watched directory deleted) or that the snapshots must be
compared again (an inotify overflow, notifications that could not be sent,
the end of a reconnection). The parts that notice them are not the parts that
do them, so they leave a request here; the re-planning loop (``reconcile``)
and the re-scanning loop (``rescan``) wait for it. Requests made while one is
pending are merged: a burst of quench events costs one re-plan.

Because every request and every run passes through here, this is also where
"has the daemon settled?" is answered, without guessing from a quiet time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

__all__ = ["Chores"]


class Chores:
    def __init__(self) -> None:
        self.replan = asyncio.Event()
        self.rescan = asyncio.Event()
        self._reasons: list[str] = []
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def want_replan(self) -> None:
        self._idle.clear()
        self.replan.set()

    def want_rescan(self, reason: str) -> None:
        self._reasons.append(reason)
        self._idle.clear()
        self.rescan.set()

    def take_rescan(self) -> str:
        """Accept the pending re-scan request: its reasons, for the log."""
        self.rescan.clear()
        reasons = ", ".join(dict.fromkeys(self._reasons))
        self._reasons.clear()
        return reasons

    def drop_rescan(self) -> None:
        """Forget the pending re-scan request (another will be made)."""
        self.take_rescan()
        self._update()

    @contextlib.contextmanager
    def doing(self) -> Iterator[None]:
        """Around a re-plan or re-scan: the daemon is not settled meanwhile."""
        self._running += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._running -= 1
            self._update()

    def _update(self) -> None:
        if not (self._running or self.replan.is_set() or self.rescan.is_set()):
            self._idle.set()

    async def settled(self) -> None:
        """Wait until nothing is to be re-planned or re-scanned, nor being."""
        await self._idle.wait()
