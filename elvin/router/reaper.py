"""Forgetting a closed session's subscriptions a few milliseconds at a time.

A client that goes away may leave tens of thousands of subscriptions
(``Subscription.Max-Count`` allows 65,536), and 100 clients closing at once
100,000: removing them took 0.3-0.4 s in one loop callback, a stall for
every other client. The router hands them to the ``Reaper``, which removes
them for at most ``BUDGET`` seconds per loop turn, with the sockets polled
between turns.

Until its turn comes a closed session's subscription is still matched, but
nothing reaches the session any more: ``Session.send_bytes`` drops
deliveries once the session is released (spec 7.4.5: a client that sent
DisconnRqst gets nothing after DisconnRply).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("elvin.router")

__all__ = ["BUDGET", "Reaper"]

#: seconds of removals per loop turn
BUDGET = 0.002


class Reaper:
    """``add(items)`` queues things to ``remove(item)`` in bounded turns."""

    def __init__(self, loop: asyncio.AbstractEventLoop, remove: Callable[[Any], None]) -> None:
        self.loop = loop
        self.remove = remove
        self.pending: deque[Any] = deque()
        self._scheduled = False

    def __len__(self) -> int:
        return len(self.pending)

    def add(self, items: Iterable[Any]) -> None:
        self.pending.extend(items)
        if self.pending and not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._run)

    def finish(self) -> None:
        """Remove everything still queued, now (the router is stopping)."""
        while self.pending:
            self._remove(self.pending.popleft())

    def _remove(self, item: Any) -> None:
        try:
            self.remove(item)
        except Exception:   # noqa: BLE001 - one failure must not keep the rest
            log.exception("removing %r failed", item)

    def _run(self) -> None:
        self._scheduled = False
        pending = self.pending
        clock = time.perf_counter
        deadline = clock() + BUDGET
        while pending:
            self._remove(pending.popleft())
            if clock() > deadline:
                break
        if pending:
            self._scheduled = True
            # a timer: due timers run after the next poll's I/O callbacks
            self.loop.call_later(0, self._run)
