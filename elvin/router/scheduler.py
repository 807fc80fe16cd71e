"""Round robin over the sessions that have packets waiting.

The router's loop is shared by every client, so no client's packets may
hold it for long: a session's packets wait in its backlog and this
scheduler handles them a few (``QUANTUM``) at a time per session, in turn.

**One budget per loop turn.** All packet handling in one turn of the event
loop -- the sessions that handle a packet or two as it arrives (the fast
path of ``Session.data_received``, taken only while nobody waits here) and
this scheduler's own run -- shares one deadline, ``turn_deadline()``: at
most ``BUDGET`` seconds after the first packet of the turn. (Each fast path
once had its own 4 ms, so a turn in which many clients sent a packet could
last many times that.) Then the loop polls its sockets again.

Two queues: a session woken with at most ``QUANTUM`` packets waiting (a
client with a request or a notification or two) joins the *short* queue,
first come first served, which is served before the round robin of the
sessions working through bursts (one joins it at the back). So a client
with one packet waiting is served in the next turn however many bursts
arrived before or after it: when 1,000 clients re-subscribe at once after a
restart, a bystander's notification is not queued behind them. (Newly woken
sessions once all went to the *front* of one round robin: during such a
storm every new burst overtook the bystander again, 0.4-0.6 s in all.)

**Bursts age.** Served strictly first, a steady stream of light sessions
would starve the bursts for ever (their reading stays paused). So while
bursts wait, the short queue may use only ``SHORT_SHARE`` of a turn's
budget, and a burst that has waited ``AGE_TURNS`` turns without a turn of
its own is served right after it, even if the turn's budget is spent:
every burst is served within a bounded number of turns whatever arrives
meanwhile, and the short queue is served at the start of every turn
however many bursts have aged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from elvin.router.turns import TurnLoop

log = logging.getLogger("elvin.router")

__all__ = ["BUDGET", "BURST_QUANTUM", "QUANTUM", "Scheduler"]

#: seconds of packet handling per loop turn (every session's, in all)
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
#: the share of a turn's budget the short queue may use while bursts wait
SHORT_SHARE = 0.5
#: turns a burst may wait for its turn before it is served first
AGE_TURNS = 4


class Scheduler(TurnLoop):
    """``wake(session, short)`` queues a session whose ``drain(quantum,
    deadline) -> bool`` (True: more packets wait) the scheduler calls in
    turn; a session stops early once ``time.perf_counter()`` passes
    ``deadline``."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 after_turn: Callable[[], None] | None = None) -> None:
        super().__init__(loop, BUDGET)
        #: called after each session's turn (the router writes what it queued)
        self.after_turn = after_turn
        self.short: deque[Any] = deque()    # at most a quantum waiting: served first
        self.ready: deque[Any] = deque()    # the round robin of bursts
        self._queued: set[Any] = set()
        self._turn_end: float | None = None  # this loop turn's, once a packet was handled
        self._turns = 0                      # runs so far
        self._since: dict[Any, int] = {}     # burst -> the run it joined the round robin in

    @property
    def idle(self) -> bool:
        return not self.short and not self.ready

    def turn_deadline(self) -> float:
        """The ``time.perf_counter()`` by which this loop turn's packet
        handling must stop, shared by every session."""
        deadline = self._turn_end
        if deadline is None:
            deadline = self._turn_end = time.perf_counter() + BUDGET
            # runs first in the loop's next turn: before its I/O callbacks
            self.loop.call_soon(self._new_turn)
        return deadline

    def _new_turn(self) -> None:
        self._turn_end = None

    def wake(self, session: Any, short: bool = True) -> None:
        """Queue ``session``: ``short`` if it has at most ``QUANTUM`` packets
        waiting (it goes before the bursts), else at the back of the round
        robin; one already queued keeps its place."""
        if session not in self._queued:
            self._queued.add(session)
            if short:
                self.short.append(session)
            else:
                self.ready.append(session)
                self._since.setdefault(session, self._turns)
        self._kick()

    # -- TurnLoop -------------------------------------------------------------------------
    def _deadline(self) -> float:
        return self.turn_deadline()

    def _has_work(self) -> bool:
        return bool(self.short or self.ready)

    def _serve(self, session: Any, quantum: int, deadline: float) -> None:
        """One session's turn: back of the round robin if more waits."""
        self._queued.discard(session)
        try:
            if session.drain(quantum, deadline):
                self._queued.add(session)
                self.ready.append(session)
                self._since.setdefault(session, self._turns)
            if self.after_turn is not None:
                self.after_turn()
        except Exception:   # one session's failure must not strand the rest
            log.exception("a scheduler turn failed (session %r)", session)

    def _serve_burst(self, deadline: float) -> None:
        session = self.ready.popleft()
        self._since.pop(session, None)
        self._serve(session, BURST_QUANTUM, deadline)

    def _turn(self, deadline: float) -> None:
        self._turns += 1
        short = self.short
        ready = self.ready
        clock = time.perf_counter
        # the short queue first, within its share while bursts wait
        short_deadline = deadline - BUDGET * (1 - SHORT_SHARE) if ready else deadline
        while short and clock() < short_deadline:
            self._serve(short.popleft(), QUANTUM, short_deadline)
        # then the oldest burst, even past the deadline, once it has waited
        # too long. (Served before the short queue, an aged burst -- and
        # when a hundred clients pipeline, every turn has one -- often used
        # the short queue's whole share: a bystander's one notification
        # then waited 5-6 s behind a mass registration.)
        if ready and self._turns - self._since.get(ready[0], self._turns) >= AGE_TURNS:
            self._serve_burst(deadline)
        # the bursts, in turn, then whoever is short again if time is left
        while (short or ready) and clock() < deadline:
            if ready:
                self._serve_burst(deadline)
            else:
                self._serve(short.popleft(), QUANTUM, deadline)
