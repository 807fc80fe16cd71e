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

The announcer also sends the manager's ``outbox`` (the fan-out of a
subscription change to hundreds of quenchers, beyond what the change sent at
once), first in each turn; a quench told all is done once the outbox has sent
what was queued before (its ``mark``), so its QnchRply follows every
notification it caused.
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
    """``later(quench)`` -> a future done once ``quench`` is told all (a
    removed quench, or None: once the outbox sent what it holds now)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, manager: Any) -> None:
        super().__init__(loop, BUDGET)
        self.manager = manager
        #: [quench, future, mark]: mark, once told all, the outbox's ``queued``
        self.queue: deque[list[Any]] = deque()
        self.turns = 0          # turns that told or sent something (statistics, tests)
        manager.on_outbox = self._kick

    def __len__(self) -> int:
        return len(self.queue)

    def later(self, quench: Any) -> asyncio.Future[None]:
        future = self.loop.create_future()
        self.queue.append([quench, future, None])
        self._kick()
        return future

    def finish(self) -> None:
        """Tell and send everything still queued, now (the router is stopping)."""
        manager = self.manager
        manager.flush(float("inf"))
        while self.queue:
            quench, future, _ = self.queue.popleft()
            if not future.done():
                if quench is not None:
                    manager.advance(quench, float("inf"))
                manager.flush(float("inf"))
                future.set_result(None)

    # -- TurnLoop -------------------------------------------------------------------------
    def _has_work(self) -> bool:
        return bool(self.queue) or bool(self.manager.outbox)

    def _turn(self, deadline: float) -> None:
        manager = self.manager
        queue = self.queue
        clock = time.perf_counter
        self.turns += 1
        manager.flush(deadline)
        for _ in range(len(queue)):
            if clock() > deadline:
                break
            entry = queue[0]
            quench, future, mark = entry
            if future.done():               # cancelled: the session went
                queue.popleft()
                continue
            if mark is None:
                try:
                    done = quench is None or manager.advance(quench, deadline)
                except Exception:   # one failure must not keep the rest
                    log.exception("telling quench %r failed", quench)
                    done = True
                if done:
                    entry[2] = mark = manager.queued
            if mark is not None and manager.flushed >= mark:
                queue.popleft()
                future.set_result(None)
            else:
                queue.rotate(-1)            # the next quench's turn
