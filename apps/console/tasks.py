"""Running coroutines from Qt slots without losing them or their errors.

A button's slot is synchronous; the client API is asyncio. ``spawn`` starts
the coroutine as a task on the qasync loop, keeps a strong reference until
it ends (a bare ``ensure_future`` may be garbage-collected mid-flight), and
hands any exception to ``on_error`` as a message for the pane to show, so
no failure disappears into a log nobody reads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["spawn", "running", "wait_all"]

log = logging.getLogger("elvin_apps.console")

_tasks: set[asyncio.Task] = set()


def spawn(coro: Coroutine[Any, Any, Any], what: str = "",
          on_error: Callable[[str], object] | None = None) -> asyncio.Task:
    task = asyncio.ensure_future(coro)
    _tasks.add(task)

    def done(task: asyncio.Task) -> None:
        _tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        message = f"{what}: {exc}" if what else str(exc)
        if on_error is not None:
            try:
                on_error(message)
                return
            except RuntimeError:   # the widget is gone
                pass
        log.warning("%s", message, exc_info=exc if not isinstance(exc, Exception) else None)

    task.add_done_callback(done)
    return task


def running() -> int:
    return len(_tasks)


async def wait_all(timeout: float = 5.0) -> None:
    """Let the spawned tasks finish (shutdown, tests)."""
    if _tasks:
        await asyncio.wait(set(_tasks), timeout=timeout)
