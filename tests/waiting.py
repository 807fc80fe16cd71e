"""Waiting on a condition, never for a fixed time: the one copy for the tests.

``until`` is for async tests (the test's event loop runs between polls, so
the client, router or app under test makes progress); ``wait_until`` is for
synchronous tests and for threads (it blocks). Both poll ``predicate`` until
it returns something truthy and return that value. ``timeout`` only turns
a hang into a failure, never a timing assertion, so the default is generous
(a loaded machine may be slow): when it runs out the test fails with an
``AssertionError`` naming ``what`` was awaited.

Qt widget tests without an asyncio loop use pytest-qt's
``qtbot.waitUntil``, which runs the Qt event loop instead.

Imported as ``from tests.waiting import until`` (the tests run with the
project root on ``sys.path``; ``tests`` is not a package).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

__all__ = ["until", "wait_until"]


class _Poll:
    """One wait: ``done()`` asks the predicate once (keeping its ``value``)
    and raises once the time is up; the two waits differ only in how they
    sleep between polls."""

    def __init__(self, predicate: Callable[[], Any], timeout: float, what: str) -> None:
        self.predicate, self.timeout, self.what = predicate, timeout, what
        self.deadline = time.monotonic() + timeout
        self.value: Any = None

    def done(self) -> bool:
        self.value = self.predicate()
        if self.value:
            return True
        if time.monotonic() > self.deadline:
            raise AssertionError(f"timed out after {self.timeout:g} s waiting for {self.what}")
        return False


async def until(predicate: Callable[[], Any], timeout: float = 20.0,
                what: str = "the condition", interval: float = 0.02) -> Any:
    """Poll ``predicate`` (yielding to the event loop) until it is truthy."""
    poll = _Poll(predicate, timeout, what)
    while not poll.done():
        await asyncio.sleep(interval)
    return poll.value


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0,
               what: str = "the condition", interval: float = 0.02) -> Any:
    """Poll ``predicate`` (blocking) until it is truthy."""
    poll = _Poll(predicate, timeout, what)
    while not poll.done():
        time.sleep(interval)
    return poll.value
