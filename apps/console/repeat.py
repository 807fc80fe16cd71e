"""Sending at a steady rate, from 0.1 to 100,000 notifications a second.

A timer per notification cannot go faster than the loop's timer resolution
and drifts; the repeater instead wakes every ``tick`` seconds and sends as
many notifications as are due by the clock, so the average rate is exact
and high rates need few wake-ups. A bound on catch-up stops a stalled loop
from turning into a burst.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

__all__ = ["Repeater"]


class Repeater:
    """Calls ``send()`` ``rate`` times a second until stopped or until
    ``send`` raises (the exception is kept in ``error``)."""

    def __init__(self, send: Callable[[], Awaitable[object]], rate: float,
                 tick: float = 0.02, max_burst: int = 2000) -> None:
        if not rate > 0:
            raise ValueError("the rate must be above zero")
        self.send = send
        self.rate = float(rate)
        self.tick = tick
        self.max_burst = max_burst
        self.sent = 0
        self.error: BaseException | None = None
        self._task: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if not self.running:
            self.error = None
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        done = 0
        try:
            while True:
                due = int((loop.time() - start) * self.rate) + 1 - done
                if due > self.max_burst:          # the loop stalled: do not burst
                    start = loop.time() - (done + 1) / self.rate
                    due = 1
                for _ in range(max(due, 0)):
                    await self.send()
                    done += 1
                    self.sent += 1
                next_at = start + done / self.rate
                # fast rates: one wake-up per tick sends a batch; slow: wait for the next
                pause = self.tick if self.rate * self.tick > 1 else 0.0
                await asyncio.sleep(max(next_at - loop.time(), pause))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported by the pane
            self.error = exc
