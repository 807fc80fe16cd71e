"""Log lines that outsiders can trigger, rate-limited and summarised.

A refused federation link, a socket that never sent ConnRqst, a connection
refused for its address: each is worth a line while they are few, and a
flood of them must not become a flood of lines (1,000 refused FedConnRqst
in 0.1 s used to write 205 KB). ``RateLimitedLog`` logs, per *kind*, the
first ``burst`` events of each ``window`` one by one and counts the rest;
when the window ends one line sums them up::

    ... and 994 more refused federation links in the last minute

The timer that ends a window runs only while something is counted, on the
running event loop (without one, the summary is written by the next event
after the window). ``close()`` cancels it and writes what is pending.
``elvin.router.connlog`` does the same for client connects, with a rate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

__all__ = ["RateLimitedLog"]

WINDOW = 60.0
BURST = 5


class _Kind:
    __slots__ = ("start", "logged", "suppressed", "timer")

    def __init__(self, start: float) -> None:
        self.start = start
        self.logged = 0
        self.suppressed = 0
        self.timer: asyncio.TimerHandle | None = None


class RateLimitedLog:
    """``log(kind, level, message, *args)``: ``message % args`` at ``level``
    unless ``burst`` lines of ``kind`` were written in this ``window``;
    ``kind`` is also the plural noun of the summary ("refused federation
    links")."""

    def __init__(self, logger: logging.Logger, *, window: float = WINDOW,
                 burst: int = BURST) -> None:
        self.logger = logger
        self.window = window
        self.burst = burst
        self._kinds: dict[str, _Kind] = {}
        self._levels: dict[str, int] = {}

    def log(self, kind: str, level: int, message: str, *args: Any) -> bool:
        """True when the line was written (False: counted for the summary)."""
        now = time.monotonic()
        state = self._kinds.get(kind)
        if state is None:
            state = self._kinds[kind] = _Kind(now)
        elif now - state.start >= self.window:
            self._summarise(kind)
            state.start, state.logged = now, 0
        self._levels[kind] = max(level, self._levels.get(kind, 0))
        if state.logged < self.burst:
            state.logged += 1
            self.logger.log(level, message, *args)
            return True
        state.suppressed += 1
        if state.timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return False
            state.timer = loop.call_later(max(0.0, state.start + self.window - now),
                                          self._window_over, kind)
        return False

    def _window_over(self, kind: str) -> None:
        state = self._kinds.get(kind)
        if state is None:
            return
        state.timer = None
        self._summarise(kind)
        state.start, state.logged = time.monotonic(), 0

    def _summarise(self, kind: str) -> None:
        state = self._kinds[kind]
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None
        if state.suppressed:
            span = "minute" if self.window == 60 else f"{self.window:g} s"
            self.logger.log(self._levels.get(kind, logging.INFO),
                            "... and %d more %s in the last %s", state.suppressed, kind,
                            span)
            state.suppressed = 0

    def pending(self, kind: str) -> int:
        """Events of ``kind`` counted but not yet summarised."""
        state = self._kinds.get(kind)
        return 0 if state is None else state.suppressed

    def close(self) -> None:
        """Write every pending summary and cancel the timers."""
        for kind in list(self._kinds):
            self._summarise(kind)
        self._kinds.clear()
