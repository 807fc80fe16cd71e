"""Work written as generators, run a few milliseconds per loop turn.

Linking a subscription of 10,000 names into the index, or unlinking it, takes
50-100 ms (issue 42): the engine does it as a generator that yields between
steps (``Engine.add_steps``, ``Engine.deferred``), and ``StepRunner`` runs the
steps for at most ``BUDGET`` seconds per loop turn, the jobs in turn. A job
with a future is a session's (its later packets wait for it: the SubRply
goes once the subscription is linked); cancelling the future closes the
generator, which then gives up what it did (or leaves that to the engine's
deferred work).

A step may yield a future (anything with ``done`` and ``add_done_callback``,
as ``run_off_loop`` gives): the job is parked, costing no turns, until the
future is done, and then goes on. That is how work that must keep an order
waits for work done elsewhere (a gone producer's notifications wait for the
one being matched and for a wide one decoded off the loop).

A step may also yield ``NEXT_TURN``: the job runs no more steps this turn,
whatever is left of the budget, for work that may wait and need not take
the turn's budget from the others -- letting go of what a wide subscription
held (``Engine.let_go``): at most one of its steps per loop turn, not 2 ms.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Generator
from typing import Any

from elvin.router.turns import TurnLoop

#: a job's steps: each ``yield`` is a point where the runner may stop it for the turn
Step = Generator[Any, Any, Any]

log = logging.getLogger("elvin.router")

__all__ = ["BUDGET", "NEXT_TURN", "StepRunner"]

#: seconds of steps per loop turn, all jobs together
BUDGET = 0.002


class _NextTurn:
    """The type of ``NEXT_TURN`` (its repr names it in a debugger)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEXT_TURN"


#: yielded by a step: no more of this job's steps in this turn
NEXT_TURN = _NextTurn()
#: ``_step``'s answer for a job that yielded ``NEXT_TURN``
_LATER = "later"


class StepRunner(TurnLoop):
    """``run(generator)`` -> a future of its return value; ``background(generator)``:
    no one waits for it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop, BUDGET)
        self.jobs: deque[tuple[Step, asyncio.Future[Any] | None]] = deque()
        self.steps = 0          # steps run (statistics, tests)

    def __len__(self) -> int:
        return len(self.jobs)

    def run(self, generator: Step) -> asyncio.Future[Any]:
        future = self.loop.create_future()
        self.jobs.append((generator, future))
        self._kick()
        return future

    def background(self, generator: Step) -> None:
        self.jobs.append((generator, None))
        self._kick()

    def finish(self) -> None:
        """Run everything still queued to its end, now (the router is stopping;
        a job parked on a future still waits for it)."""
        while self.jobs:
            job = self.jobs.popleft()
            if self._step(*job, float("inf")) == _LATER:
                self.jobs.appendleft(job)

    def _step(self, generator: Step, future: asyncio.Future[Any] | None,
              deadline: float) -> bool | str | None:
        """Steps of one job until ``deadline``; True once it is over, None
        when it parked on a future (``_park``), ``_LATER`` when it yielded
        ``NEXT_TURN``."""
        if future is not None and future.done():    # cancelled: give up
            generator.close()
            return True
        clock = time.perf_counter
        try:
            while True:
                waits = next(generator)
                self.steps += 1
                if waits is NEXT_TURN:
                    return _LATER
                if waits is not None and hasattr(waits, "add_done_callback"):
                    if not waits.done():
                        self._park(generator, future, waits)
                        return None
                if clock() > deadline:
                    return False
        except StopIteration as stop:
            if future is not None:
                future.set_result(stop.value)
        except Exception as exc:   # one failure must not keep the rest
            log.exception("a stepped job failed")
            if future is not None:
                future.set_exception(exc)
        return True

    def _park(self, generator: Step, future: asyncio.Future[Any] | None,
              waits: Any) -> None:
        """The job waits for ``waits`` out of the round, then rejoins it."""
        def resume(_: Any) -> None:
            self.jobs.append((generator, future))
            self._kick()
        waits.add_done_callback(resume)

    # -- TurnLoop -------------------------------------------------------------------------
    def _has_work(self) -> bool:
        return bool(self.jobs)

    def _turn(self, deadline: float) -> None:
        jobs = self.jobs
        later = []              # jobs that yielded NEXT_TURN: back after this turn
        while jobs:
            generator, future = jobs[0]
            over = self._step(generator, future, deadline)
            if over is False:
                jobs.rotate(-1)
            elif over == _LATER:
                later.append(jobs.popleft())
            else:               # over, or parked (it rejoins when its future is done)
                jobs.popleft()
            if time.perf_counter() > deadline:
                break
        jobs.extend(later)


def drain(generator: Step) -> Any:
    """Run ``generator`` to its end now; its return value."""
    try:
        while True:
            next(generator)
    except StopIteration as stop:
        return stop.value
