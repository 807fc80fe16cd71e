"""Stopping the daemons' tasks (elvin.tasks) is bounded and never swallows the
caller's own cancellation (a stop that is itself cancelled must end)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from elvin.tasks import stop_task


async def _stubborn(started: asyncio.Event, released: asyncio.Event) -> None:
    started.set()
    while not released.is_set():     # ignores cancellation, as a buggy task could
        try:
            await released.wait()
        except asyncio.CancelledError:
            continue


async def test_a_task_that_ignores_cancellation_is_left_after_the_timeout(caplog):
    started, released = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(_stubborn(started, released))
    await started.wait()
    with caplog.at_level(logging.ERROR, logger="elvin.tasks"):
        await stop_task(task, 0.05, "feed stubborn")
    assert not task.done()
    assert "feed stubborn did not stop within 0.05 s" in caplog.text
    released.set()
    await task


async def test_the_callers_cancellation_is_not_swallowed():
    started, released = asyncio.Event(), asyncio.Event()
    stubborn = asyncio.create_task(_stubborn(started, released))
    await started.wait()
    stopper = asyncio.create_task(stop_task(stubborn, 3600, "feed stubborn"))
    await asyncio.sleep(0)
    stopper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopper
    assert stopper.cancelled()
    released.set()
    await stubborn


async def test_an_ordinary_task_stops_and_its_error_is_logged(caplog):
    async def failing() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            raise RuntimeError("broken on the way out")

    task = asyncio.create_task(failing())
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="elvin.tasks"):
        await stop_task(task, 5, "feed broken")
    assert task.done() and "feed broken ended with an error: broken on the way out" in caplog.text
