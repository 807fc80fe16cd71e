"""Round robin over the sessions that have packets waiting.

The router's loop is shared by every client, so no client's packets may
hold it for long: a session's packets wait in its backlog and this
scheduler handles them a few (``QUANTUM``) at a time per session, in turn,
for at most ``BUDGET`` seconds per loop turn; then the loop polls its
sockets again. A client with one packet waiting therefore waits at most one
turn: a newly woken session goes to the front of the round robin, and
never waits for a whole burst of another client's requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("elvin.router")

__all__ = ["BUDGET", "QUANTUM", "Scheduler"]

#: seconds of packet handling per loop turn
BUDGET = 0.004
#: packets a session handles per turn of the round robin
QUANTUM = 8


class Scheduler:
    """``wake(session)`` queues a session whose ``drain(quantum, deadline)
    -> bool`` (True: more packets wait) the scheduler calls in turn; a
    session stops early once ``time.perf_counter()`` passes ``deadline``."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 after_turn: Callable[[], None] | None = None) -> None:
        self.loop = loop
        #: called after each session's turn (the router writes what it queued)
        self.after_turn = after_turn
        self.ready: deque[Any] = deque()
        self._queued: set[Any] = set()
        self._scheduled = False

    @property
    def idle(self) -> bool:
        return not self.ready

    def wake(self, session: Any) -> None:
        """Queue ``session``; one that was not waiting goes first (a client
        with a packet or two overtakes the ones working through a burst)."""
        if session not in self._queued:
            self._queued.add(session)
            self.ready.appendleft(session)
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_later(0, self._run)

    def _run(self) -> None:
        self._scheduled = False
        ready = self.ready
        queued = self._queued
        clock = time.perf_counter
        deadline = clock() + BUDGET
        while ready and clock() < deadline:
            session = ready.popleft()
            queued.discard(session)
            try:
                if session.drain(QUANTUM, deadline):
                    queued.add(session)
                    ready.append(session)
                if self.after_turn is not None:
                    self.after_turn()
            except Exception:   # noqa: BLE001 - one session's failure must not strand the rest
                log.exception("a scheduler turn failed (session %r)", session)
        if ready and not self._scheduled:
            self._scheduled = True
            # a timer, not call_soon: due timers run after the I/O callbacks of
            # the loop's next turn, so a client whose packet arrived meanwhile
            # is woken (to the front) before the next turn starts
            self.loop.call_later(0, self._run)
