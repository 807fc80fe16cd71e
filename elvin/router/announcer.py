"""Telling quenches about subscriptions a few milliseconds per loop turn.

A QnchAddRqst is answered with a SubAddNotify for every subscription that
already concerns the quench, and a QnchModRqst with what its change did to
each of them: with 40,000 subscriptions on one attribute that walk held the
loop 0.4-0.6 s (issue 42). The session tells what fits in ``FIRST_STEP`` at
once; the rest waits here as the session's one job (its later packets wait
for it, so its QnchRply and everything after stay in request order) and is
told for at most ``BUDGET`` seconds per loop turn, quenches in turn. The
quench manager keeps the view consistent meanwhile
(``elvin.router.quench``: pending subscriptions, settled by any change).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

from elvin.router.turns import TurnLoop

log = logging.getLogger("elvin.router")

__all__ = ["BUDGET", "FIRST_STEP", "QuenchAnnouncer"]

#: seconds of telling per loop turn, all quenches together
BUDGET = 0.002
#: seconds a quench request may tell at once, before its reply is left to
#: the announcer (most quenches concern a few subscriptions: told at once)
FIRST_STEP = 0.001


class QuenchAnnouncer(TurnLoop):
    """``later(quench)`` -> a future done once ``quench`` is told all."""

    def __init__(self, loop: asyncio.AbstractEventLoop, manager: Any) -> None:
        super().__init__(loop, BUDGET)
        self.manager = manager
        self.queue: deque[tuple[Any, asyncio.Future[None]]] = deque()
        self.turns = 0          # turns that told something (statistics, tests)

    def __len__(self) -> int:
        return len(self.queue)

    def later(self, quench: Any) -> asyncio.Future[None]:
        future = self.loop.create_future()
        self.queue.append((quench, future))
        self._kick()
        return future

    def finish(self) -> None:
        """Tell everything still queued, now (the router is stopping)."""
        while self.queue:
            quench, future = self.queue.popleft()
            if not future.done():
                self.manager.advance(quench, float("inf"))
                future.set_result(None)

    # -- TurnLoop -------------------------------------------------------------------------
    def _has_work(self) -> bool:
        return bool(self.queue)

    def _turn(self, deadline: float) -> None:
        queue = self.queue
        clock = time.perf_counter
        self.turns += 1
        while queue:
            quench, future = queue[0]
            if future.done():               # cancelled: the session went
                queue.popleft()
                continue
            try:
                done = self.manager.advance(quench, deadline)
            except Exception:   # one failure must not keep the rest
                log.exception("telling quench %r failed", quench)
                done = True
            if done:
                queue.popleft()
                future.set_result(None)
            else:
                queue.rotate(-1)            # the next quench's turn
            if clock() > deadline:
                break
