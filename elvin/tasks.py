"""Stopping asyncio tasks: cancel, wait a bounded time, never swallow the caller's
cancellation. One home for what the daemons' shutdowns all need."""

from __future__ import annotations

import asyncio
import logging

__all__ = ["stop_task"]

log = logging.getLogger("elvin.tasks")


async def stop_task(task: asyncio.Task, timeout: float, what: str) -> None:
    """Cancel ``task`` and wait for it to end, at most ``timeout`` seconds.

    Why not ``with suppress(CancelledError): await task``: that also swallows
    a cancellation of the *caller*, so a stop that is itself cancelled (a
    second SIGTERM, a test's time limit) carried on, and it waited forever
    for a task that did not end. ``asyncio.wait`` lets the caller's
    cancellation through and bounds the wait; a task left behind is logged.
    """
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        log.error("%s did not stop within %g s after being cancelled", what, timeout)
    elif not task.cancelled() and task.exception() is not None:
        log.error("%s ended with an error: %s", what, task.exception())
