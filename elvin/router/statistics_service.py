"""The router's statistics notification (``Elvin-Router-Stats``), as a service.

Every ``stats-interval`` seconds the router publishes its figures -- but
only while someone subscribes to them: the engine tells the service when
the first such subscription comes and the last goes (``Engine.watch``), so
a router nobody asks costs no timer. It runs from before the listeners are
bound (the mobility proxy takes its subscriptions back once they are) and
stops first, with the other parts that speak to clients.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from elvin.router.services import StartPoint, StopPoint

if TYPE_CHECKING:
    from elvin.router.config import RouterConfig

__all__ = ["StatisticsService"]

log = logging.getLogger("elvin.router")


class StatisticsService:
    """Calls ``publish`` every ``config.stats_interval`` seconds while
    ``wanted()`` (someone subscribes to the statistics)."""

    name = "statistics"
    starts = StartPoint.BEFORE_LISTENING
    stops = StopPoint.BEFORE_CLOSING_LISTENERS
    reloads: frozenset[str] = frozenset({"stats_interval"})

    def __init__(self, config: RouterConfig, publish: Callable[[], None],
                 wanted: Callable[[], bool]) -> None:
        self._config = config
        self._publish = publish
        self._wanted = wanted
        self._loop: asyncio.AbstractEventLoop | None = None   # while running
        self._handle: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._wanted():
            self.watch(True)

    async def stop(self) -> None:
        self._loop = None
        self.watch(False)

    async def reconfigure(self, config: RouterConfig) -> str | None:
        """A new ``stats-interval``; a timer running now restarts with it."""
        self.set_interval(config.stats_interval)
        return None

    def set_interval(self, seconds: float) -> None:
        self._config.stats_interval = seconds
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
            self.watch(True)

    def watch(self, active: bool) -> None:
        """The engine's watch on the statistics attribute: ``active`` when
        the first subscription to it comes, not when the last goes."""
        if active:
            if self._handle is None and self._loop is not None:
                self._handle = self._loop.call_later(self._config.stats_interval, self._tick)
        elif self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        self._handle = None
        if self._loop is None or not self._wanted():
            return
        try:
            self._publish()
        except Exception:  # statistics must never hurt the router; logged
            log.exception("publishing statistics failed")
        self.watch(True)
