"""Round robin over the sessions that have packets waiting.

The router's loop is shared by every client, so no client's packets may
hold it for long: a session's packets wait in its backlog and this
scheduler handles them a few (``QUANTUM``) at a time per session, in turn,
for at most ``BUDGET`` seconds per loop turn; then the loop polls its
sockets again.

Two queues: a session woken with at most ``QUANTUM`` packets waiting (a
client with a request or a notification or two) joins the *short* queue,
first come first served, which every turn serves before the round robin of
the sessions working through bursts (one joins it at the back). So a client
with one packet waiting is served in the next turn however many bursts
arrived before or after it: when 1,000 clients re-subscribe at once after a
restart, a bystander's notification is not queued behind them. (Newly woken
sessions once all went to the *front* of one round robin: during such a
storm every new burst overtook the bystander again, 0.4-0.6 s in all.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("elvin.router")

__all__ = ["BUDGET", "BURST_QUANTUM", "QUANTUM", "Scheduler"]

#: seconds of packet handling per loop turn
BUDGET = 0.004
#: packets a session handles per turn from the short queue (and the most a
#: session may have waiting to join it)
QUANTUM = 8
#: packets a session handles per turn of the round robin: the sessions there
#: pipeline requests, so a bigger batch per turn costs no one a wait (the
#: short queue goes first) and saves a write per turn (a reply block each).
#: A write of replies costs the router about as much as a registration of
#: six subscriptions; 64 (not 32) halves those writes in a registration
#: burst, and a turn of 64 SubAddRqst is still ~1.3 ms, a third of ``BUDGET``
BURST_QUANTUM = 64


class Scheduler:
    """``wake(session, short)`` queues a session whose ``drain(quantum,
    deadline) -> bool`` (True: more packets wait) the scheduler calls in
    turn; a session stops early once ``time.perf_counter()`` passes
    ``deadline``."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 after_turn: Callable[[], None] | None = None) -> None:
        self.loop = loop
        #: called after each session's turn (the router writes what it queued)
        self.after_turn = after_turn
        self.short: deque[Any] = deque()    # at most a quantum waiting: served first
        self.ready: deque[Any] = deque()    # the round robin of bursts
        self._queued: set[Any] = set()
        self._scheduled = False

    @property
    def idle(self) -> bool:
        return not self.short and not self.ready

    def wake(self, session: Any, short: bool = True) -> None:
        """Queue ``session``: ``short`` if it has at most ``QUANTUM`` packets
        waiting (it goes before every burst), else at the back of the round
        robin; one already queued keeps its place."""
        if session not in self._queued:
            self._queued.add(session)
            (self.short if short else self.ready).append(session)
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_later(0, self._run)

    def _run(self) -> None:
        self._scheduled = False
        short = self.short
        ready = self.ready
        queued = self._queued
        clock = time.perf_counter
        deadline = clock() + BUDGET
        while (short or ready) and clock() < deadline:
            if short:
                session, quantum = short.popleft(), QUANTUM
            else:
                session, quantum = ready.popleft(), BURST_QUANTUM
            queued.discard(session)
            try:
                if session.drain(quantum, deadline):
                    queued.add(session)
                    ready.append(session)
                if self.after_turn is not None:
                    self.after_turn()
            except Exception:   # noqa: BLE001 - one session's failure must not strand the rest
                log.exception("a scheduler turn failed (session %r)", session)
        if (short or ready) and not self._scheduled:
            self._scheduled = True
            # a timer, not call_soon: due timers run after the I/O callbacks of
            # the loop's next turn, so a client whose packet arrived meanwhile
            # is woken (into the short queue) before the next turn starts
            self.loop.call_later(0, self._run)
