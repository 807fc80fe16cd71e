"""The router's statistics notification (``Elvin-Router-Stats``), as a service.

Every ``stats-interval`` seconds the router publishes its figures -- but
only while someone subscribes to them: the engine tells the service when
the first such subscription comes and the last goes (``Engine.watch``), so
a router nobody asks costs no timer. It runs from before the listeners are
bound (the mobility proxy takes its subscriptions back once they are) and
stops first, with the other parts that speak to clients. The notification
is the router's figures (``Stats.notification``) delivered as any other;
it does not count itself among the notifications the router sent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from elvin.router.clientstats import top_clients_text
from elvin.router.services import StartPoint, StopPoint
from elvin.router.stats import STATS_ATTRIBUTE

if TYPE_CHECKING:
    from elvin.federation.service import FederationService
    from elvin.router.config import RouterConfig
    from elvin.router.engine import Engine
    from elvin.router.quench import QuenchManager
    from elvin.router.stats import Stats

__all__ = ["StatisticsService"]

log = logging.getLogger("elvin.router")


class _Router(Protocol):
    """What the statistics are of, and delivered by: ``elvin.router.server.Router``."""

    router_id: str
    engine: Engine
    quench: QuenchManager

    @property
    def stats(self) -> Stats: ...  # (renewed at each start: read at each tick)

    @property
    def connection_count(self) -> int: ...

    @property
    def federation(self) -> FederationService | None: ...

    def top_clients(self) -> list[dict[str, object]]: ...

    def deliver(self, attrs: dict[str, Any], block: None, deliver_insecure: bool,
                nkeys: None) -> int: ...


class StatisticsService:
    """Publishes ``router``'s figures every ``config.stats_interval`` seconds
    while someone subscribes to them."""

    name = "statistics"
    starts = StartPoint.BEFORE_LISTENING
    stops = StopPoint.BEFORE_CLOSING_LISTENERS
    reloads: frozenset[str] = frozenset({"stats_interval"})

    def __init__(self, config: RouterConfig, router: _Router) -> None:
        self._config = config
        self._router = router
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

    def _wanted(self) -> bool:
        return self._router.engine.refers(STATS_ATTRIBUTE)

    def notification(self) -> dict[str, object]:
        """The statistics notification's attributes, as of now."""
        router = self._router
        federation = router.federation
        links = federation.link_report() if federation is not None else []
        return router.stats.notification(
            router.router_id, router.connection_count, len(router.engine), len(router.quench),
            federation_links=links,
            redials_failed=federation.stats.redials_failed if federation else 0,
            top_clients=top_clients_text(router.top_clients()))

    def _publish(self) -> None:
        """One statistics notification."""
        router = self._router
        # the statistics count what clients send and get, not themselves
        delivered = router.deliver(self.notification(), None, True, None)
        router.stats.notifications_out -= delivered

    def _tick(self) -> None:
        self._handle = None
        if self._loop is None or not self._wanted():
            return
        try:
            self._publish()
        except Exception:  # statistics must never hurt the router; logged
            log.exception("publishing statistics failed")
        self.watch(True)
