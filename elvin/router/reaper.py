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

from elvin.router.turns import TurnLoop

log = logging.getLogger("elvin.router")

__all__ = ["BUDGET", "Reaper"]

#: seconds of removals per loop turn
BUDGET = 0.002


class Reaper(TurnLoop):
    """``add(items)`` queues things to ``remove(item)`` in bounded turns."""

    def __init__(self, loop: asyncio.AbstractEventLoop, remove: Callable[[Any], None]) -> None:
        super().__init__(loop, BUDGET)
        self.remove = remove
        self.pending: deque[Any] = deque()

    def __len__(self) -> int:
        return len(self.pending)

    def add(self, items: Iterable[Any]) -> None:
        self.pending.extend(items)
        if self.pending:
            self._kick(soon=True)

    def finish(self) -> None:
        """Remove everything still queued, now (the router is stopping)."""
        while self.pending:
            self._remove(self.pending.popleft())

    def _remove(self, item: Any) -> None:
        try:
            self.remove(item)
        except Exception:   # one failure must not keep the rest
            log.exception("removing %r failed", item)

    # -- TurnLoop -------------------------------------------------------------------------
    def _has_work(self) -> bool:
        return bool(self.pending)

    def _turn(self, deadline: float) -> None:
        pending = self.pending
        clock = time.perf_counter
        while pending:
            self._remove(pending.popleft())
            if clock() > deadline:
                break
