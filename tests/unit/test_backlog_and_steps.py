"""The pieces that make "accepted is owed" hold (issue 42): a backlog's
``leave`` keeps a delivering job and gives back what was held, and a stepped
job can wait for a future without costing turns."""

from __future__ import annotations

import asyncio

from elvin.protocol.backlog import Backlog, Violation
from elvin.router.steps import StepRunner


class _Job:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def test_leave_keeps_a_kept_job_and_gives_back_what_is_held():
    backlog = Backlog()
    job = _Job()
    backlog.start(job, keep=True)
    backlog.add([b"one", b"two"])
    backlog.violation("bad frame")
    backlog.add([b"after"])              # (dropped: it came after the violation)
    kept, owed = backlog.leave()
    assert kept is job and not job.cancelled
    assert owed == [b"one", b"two"]
    assert not backlog and not backlog.busy and backlog.released
    assert backlog.finish(job) is False  # its completion is not this backlog's


def test_leave_cancels_a_job_not_kept_and_release_cancels_a_kept_one():
    backlog = Backlog()
    compile_job = _Job()
    backlog.start(compile_job)
    kept, owed = backlog.leave()
    assert kept is None and compile_job.cancelled and owed == []
    other = Backlog()
    delivery = _Job()
    other.start(delivery, keep=True)
    other.release()                      # a violation or a stop: nothing owed
    assert delivery.cancelled


def test_a_kept_job_started_after_release_is_not_cancelled():
    backlog = Backlog()
    backlog.release()
    job = _Job()
    backlog.start(job, keep=True)
    assert not job.cancelled
    assert isinstance(Violation("x").reason, str)


def test_a_step_that_yields_a_future_parks_until_it_is_done():
    """The job leaves the round (no spinning through turns) and goes on once
    the future is done; jobs behind it are not held up meanwhile."""
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        runner = StepRunner(loop)
        gate = loop.create_future()
        order: list[str] = []

        def waiting():
            order.append("before")
            yield gate
            order.append("after")
            return "done"

        def other():
            for _ in range(3):
                yield
            order.append("other")

        first = runner.run(waiting())
        second = runner.run(other())
        await second
        assert order == ["before", "other"] and not first.done()
        steps = runner.steps
        for _ in range(5):               # turns pass: the parked job costs none
            await asyncio.sleep(0)
        assert runner.steps == steps and len(runner) == 0
        gate.set_result(None)
        assert await first == "done"
        assert order == ["before", "other", "after"]

    asyncio.run(scenario())


def test_a_step_that_yields_next_turn_runs_once_per_turn():
    """Work that may wait (letting go of a wide subscription's memory) runs
    one step per loop turn, not the turn's whole budget; the other jobs
    take the rest of it; and ``finish`` still runs it to its end."""
    from elvin.router.steps import NEXT_TURN

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        runner = StepRunner(loop)
        turns: list[int] = []
        busy: list[int] = []
        turn = [0]

        def patient():
            for _ in range(5):
                turns.append(turn[0])
                yield NEXT_TURN

        def eager():
            for _ in range(50):
                busy.append(turn[0])
                yield

        job = runner.run(patient())
        other = runner.run(eager())
        while not (job.done() and other.done()):
            await asyncio.sleep(0)
            turn[0] += 1
        assert len(turns) == 5 and len(set(turns)) == 5     # a step per turn
        assert len(busy) == 50 and len(set(busy)) < 5       # the rest of the budget
        runner.background(patient())
        runner.finish()
        assert len(turns) == 10 and len(runner) == 0

    asyncio.run(scenario())
