"""A bounded stream of events with listeners, shared by Subscription and Quench.

Items pushed while nobody reads accumulate up to ``maxlen``; then the oldest
is dropped and ``dropped`` counts it, so a slow reader never makes memory
grow without bound. Listeners are called for every item as it arrives (sync
functions directly, coroutine functions as tasks).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from elvin.client.errors import SubscriptionClosedError

log = logging.getLogger("elvin.client")

_tasks: set[asyncio.Task] = set()
_isawaitable = inspect.isawaitable


def call_listener(fn: Callable, *args: Any) -> None:
    """Call an application callback; a coroutine result runs as a task.
    Exceptions are logged, never propagated into the protocol machinery."""
    try:
        result = fn(*args)
    except Exception:  # a listener's bug must not stop delivery; logged
        log.exception("listener %r raised", fn)
        return
    if result is not None and _isawaitable(result):
        _spawn(result)


def _spawn(awaitable: Any) -> None:
    """Run an async listener's awaitable as a task kept alive until done."""
    task = asyncio.ensure_future(awaitable)
    _tasks.add(task)
    task.add_done_callback(_task_done)


def _task_done(task: asyncio.Task) -> None:
    _tasks.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("async listener failed", exc_info=task.exception())


class EventStream:
    __slots__ = ("_items", "_maxlen", "dropped", "_waiter", "_listeners", "_ended", "_what")

    def __init__(self, maxlen: int, what: str) -> None:
        if maxlen < 0:
            raise ValueError("buffer size must be >= 0")
        self._items: deque = deque()
        self._maxlen = maxlen
        self.dropped = 0
        self._waiter: asyncio.Future | None = None
        self._listeners: list[Callable] = []
        self._ended = False
        self._what = what

    # -- producer side (the connection) -------------------------------------
    def push(self, item: Any) -> None:
        # call_listener inlined: this runs once per delivered notification,
        # and a sync listener's None result needs no awaitable check
        for fn in self._listeners:
            try:
                result = fn(item)
            except Exception:  # as above
                log.exception("listener %r raised", fn)
                continue
            if result is not None and _isawaitable(result):
                _spawn(result)
        if self._maxlen:
            if len(self._items) >= self._maxlen:
                self._items.popleft()
                self.dropped += 1
                if self.dropped == 1 and not self._listeners:
                    # an iterator-only reader is losing items: say so once (with
                    # listeners, the buffer is usually just not being read)
                    log.warning("%s buffer full (buffer_size=%d): dropping the oldest; "
                                "read faster or ask for a larger buffer_size",
                                self._what, self._maxlen)
            self._items.append(item)
            waiter = self._waiter
            if waiter is not None:
                self._waiter = None
                if not waiter.done():
                    waiter.set_result(None)

    def end(self) -> None:
        self._ended = True
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    # -- consumer side -----------------------------------------------------
    def add_listener(self, fn: Callable) -> None:
        if not callable(fn):
            raise TypeError("a listener must be callable")
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable) -> None:
        """Stop calling ``fn`` for each event; ValueError when it was not added."""
        self._listeners.remove(fn)

    @property
    def pending(self) -> int:
        return len(self._items)

    def get_nowait(self) -> Any:
        if self._items:
            return self._items.popleft()
        if self._ended:
            raise SubscriptionClosedError(f"{self._what} is closed")
        raise asyncio.QueueEmpty

    async def get(self, timeout: float | None = None) -> Any:
        """The next item; waits up to ``timeout`` seconds (TimeoutError),
        raises SubscriptionClosedError once closed and drained."""
        if not self._maxlen:
            raise RuntimeError(f"{self._what} was created with buffer_size=0: "
                               "use listeners")
        while not self._items:
            if self._ended:
                raise SubscriptionClosedError(f"{self._what} is closed")
            if self._waiter is None or self._waiter.done():
                self._waiter = asyncio.get_running_loop().create_future()
            waiter = self._waiter
            if timeout is None:
                await asyncio.shield(waiter)
            else:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(waiter)
        return self._items.popleft()

    async def next(self) -> Any:
        try:
            return await self.get()
        except SubscriptionClosedError:
            raise StopAsyncIteration from None
