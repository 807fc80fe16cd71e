"""Federation (``elvin.federation``) as a service of the router.

``elvin.federation.service.FederationService`` is the federation itself
(its links, listeners and routing); this is how the router starts, stops
and reconfigures it, and the one place that builds its host
(``elvin.router.fedhost``). It starts once the listeners are bound and
stops before the client sessions close, so that peers hear a Disconn
while the router still serves its clients.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from elvin.router.services import StartPoint, StopPoint

if TYPE_CHECKING:
    from elvin.federation.service import FederationService
    from elvin.router.config import RouterConfig
    from elvin.router.fedhost import _Router

__all__ = ["FederationAdapter"]

log = logging.getLogger("elvin.router")


class FederationAdapter:
    """The router's ``[federation]``: a ``FederationService`` while the
    section is set and enabled, else nothing."""

    name = "federation"
    starts = StartPoint.BOUND
    stops = StopPoint.BEFORE_CLOSING_SESSIONS
    reloads: frozenset[str] = frozenset({"federation"})

    def __init__(self, router: _Router, config: RouterConfig) -> None:
        self._router = router
        self._config = config
        #: the running federation, else None (``deliver`` tests only this)
        self.running: FederationService | None = None

    async def start(self) -> None:
        fed = self._config.federation
        if fed is None or not fed.enabled:
            return
        from elvin.federation.service import FederationService  # only when federating
        from elvin.router.fedhost import RouterFederationHost
        service = FederationService(RouterFederationHost(self._router), fed)
        try:
            await service.start()
        except BaseException:  # half-started: stopped; re-raised
            await service.stop()
            raise
        self.running = service

    async def stop(self) -> None:
        service, self.running = self.running, None
        if service is not None:
            await service.stop()

    async def reconfigure(self, config: RouterConfig) -> str | None:
        """Apply a new ``[federation]`` section (SIGHUP): starts, changes or
        stops the federation without touching client sessions."""
        fed = self._config.federation = config.federation
        if fed is None or not fed.enabled:
            await self.stop()
        elif self.running is None:
            try:
                await self.start()
            except Exception as exc:  # noqa: BLE001 - e.g. the port is taken: logged, keep serving
                log.error("cannot start federation: %s", exc)
                return f"cannot start: {exc}"
        else:
            await self.running.reconfigure(fed)
        return None
