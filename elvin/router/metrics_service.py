"""The metrics endpoint (``--metrics HOST:PORT``, ``elvin.router.metrics``)
as a service of the router.

It starts first of all, before the listeners are bound: an address it
cannot have stops the router's start before anyone could connect, with the
one line and exit status of a listener that cannot listen. It stops last,
once the router has stopped (``StopPoint.STOPPED``), so that a scrape
during a stop still gets the figures. Its answers are the router's status
picture (``snapshot``), the same one the status file is written from, so
the two never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from elvin.cli_common import listen_error_reason, listen_error_status
from elvin.errors import RouterStartError
from elvin.router.metrics import MetricsServer, parse_metrics_address
from elvin.router.services import StartPoint, StopPoint

if TYPE_CHECKING:
    from elvin.router.config import RouterConfig

__all__ = ["MetricsService"]


class MetricsService:
    """Serves ``GET /metrics`` from ``snapshot()`` while ``config.metrics``
    names an address."""

    name = "metrics"
    starts = StartPoint.BEFORE_LISTENING
    stops = StopPoint.STOPPED
    reloads: frozenset[str] = frozenset()

    def __init__(self, config: RouterConfig,
                 snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self._config = config
        self._snapshot = snapshot
        #: the HTTP server while it listens, else None
        self.server: MetricsServer | None = None

    @property
    def url(self) -> str | None:
        """``http://HOST:PORT/metrics`` while serving, else None."""
        return self.server.url if self.server is not None else None

    async def start(self) -> None:
        """Listen at ``config.metrics``; ``RouterStartError`` when it cannot."""
        address = self._config.metrics
        if not address:
            return
        host, port = parse_metrics_address(address)
        server = MetricsServer(host, port, self._snapshot)
        try:
            await server.start()
        except OSError as exc:
            raise RouterStartError(f"cannot listen for metrics on {address}: "
                                   f"{listen_error_reason(exc, port)}",
                                   listen_error_status(exc)) from None
        self.server = server

    async def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await server.stop()

    async def reconfigure(self, config: RouterConfig) -> str | None:
        """Nothing: ``metrics`` needs a restart (it is not reloadable), so a
        reload names it instead."""
        return None
