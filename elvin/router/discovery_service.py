"""Router discovery (``elvin.discovery``) as a service of the router.

A router that cannot answer (no multicast route, the port taken) still
routes: discovery is a convenience, so its failure is a warning, not a
start-up error. It starts once the listeners accept, so that it never
advertises a router that does not answer, and is withdrawn first at stop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from elvin.router.services import StartPoint, StopPoint

if TYPE_CHECKING:
    from elvin.discovery import DiscoveryResponder
    from elvin.router.config import RouterConfig

__all__ = ["DiscoveryService"]

log = logging.getLogger("elvin.router")


class DiscoveryService:
    """Answers router discovery for the router's listen URLs (``urls``)."""

    name = "discovery responder"
    starts = StartPoint.SERVING
    stops = StopPoint.BEFORE_CLOSING_LISTENERS
    reloads: frozenset[str] = frozenset()

    def __init__(self, config: RouterConfig, urls: Callable[[], list[str]]) -> None:
        self._config = config
        self._urls = urls
        #: the responder while answering, else None
        self.responder: DiscoveryResponder | None = None

    async def start(self) -> None:
        config = self._config
        if not config.discovery:
            return
        from elvin.discovery import DiscoveryResponder  # only when discovery is on

        responder = DiscoveryResponder(
            self._urls, scope=config.discovery_scope, default=config.discovery_default,
            address=config.discovery_address, port=config.discovery_port,
            interface=config.discovery_interface)
        try:
            self.responder = await responder.start()
        except OSError as exc:
            log.warning("router discovery is off: cannot answer on %s:%d (%s)",
                        config.discovery_address, config.discovery_port,
                        exc.strerror or exc)

    async def stop(self) -> None:
        responder, self.responder = self.responder, None
        if responder is not None:
            responder.close()

    async def reconfigure(self, config: RouterConfig) -> str | None:
        """Nothing: the discovery settings need a restart (none is reloadable),
        so a reload names them instead."""
        return None
