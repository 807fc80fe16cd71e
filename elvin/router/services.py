"""The router's services: what runs beside its core, registered with it.

The core of a router (``elvin.router.server.Router``) is its sessions and
the delivery of notifications between them. Everything else a router may
do -- federate, keep a mobility proxy, archive the traffic, answer
discovery, publish its statistics, keep elvind's status file, serve
metrics -- is a ``Service``: a part with a
name that the core starts, stops and reconfigures, and that does nothing
while its setting is off. A new part of the router is a new service, not
new methods on the core.

Why two points per service rather than one order: a router's start and
stop are not mirror images. The archive must see every notification, so
it starts before anyone can connect and stops after the last session is
gone; the mobility proxy is a client of the router, so it needs the bound
listeners (their URLs name it) and must also outlive every other session;
federation says goodbye to its peers while the clients are still served;
discovery advertises only a router that accepts, and is withdrawn first;
what reports on the router (the status file, metrics) goes once it has
stopped, so that it shows the router until then.
So each service says where in the core's start it starts (``StartPoint``)
and where in its stop it stops (``StopPoint``); services of one point start
in the order they were registered and stop in the reverse order.

A reload (``elvin.router.reload``) goes through the registry too: each
reloadable setting (``RELOADABLE``) is applied by the one part that says it
``reloads`` it -- a service, or a part of the core registered with
``register_part`` (``elvin.router.core_settings``: the connection options,
the settings the core reads per request) -- so a reload knows no setting's
workings, only their order and how to say what changed.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from elvin.router.config import RouterConfig

__all__ = ["Reconfigurable", "Service", "ServiceRegistry", "StartPoint", "StopPoint"]

log = logging.getLogger("elvin.router")


class StartPoint(enum.Enum):
    """Where in ``Router.start`` a service starts."""

    #: before the listeners are bound: nothing published can go unseen
    BEFORE_LISTENING = "before listening"
    #: the listeners are bound (their URLs are known) but accept nobody yet
    BOUND = "bound"
    #: the listeners accept connections
    SERVING = "serving"


class StopPoint(enum.Enum):
    """Where in ``Router.stop`` a service stops."""

    #: first, before the listeners close
    BEFORE_CLOSING_LISTENERS = "before closing listeners"
    #: the listeners are closed; the client sessions are still open
    BEFORE_CLOSING_SESSIONS = "before closing sessions"
    #: every client session is gone: nobody can publish any more
    AFTER_LAST_SESSION = "after the last session"
    #: the router has stopped: every service of the points above is stopped
    STOPPED = "stopped"


class Reconfigurable(Protocol):
    """A part of the router that applies some reloadable settings."""

    #: how the part is named in logs and in ``ServiceRegistry[name]``
    name: str
    #: the reloadable settings (``RouterConfig`` field names, each in
    #: ``RELOADABLE``) that this part, and no other, applies on a reload
    reloads: frozenset[str]

    async def reconfigure(self, config: RouterConfig) -> str | None:
        """Apply this part's settings of ``config``: the problem, or None."""


class Service(Reconfigurable, Protocol):
    """A part of the router beside its core. A service whose setting is off
    starts as nothing and stops as nothing, so the core needs no test of its
    own for it."""

    starts: StartPoint
    stops: StopPoint

    async def start(self) -> None:
        """Start, if the service's setting is on. An exception stops the
        router's start (the router then stops what had started)."""

    async def stop(self) -> None:
        """Stop; what the service owes (rows, buffers, goodbyes) is written
        or sent first. Stopping a service that is not running does nothing."""

    async def reconfigure(self, config: RouterConfig) -> str | None:
        """Apply the service's settings of ``config`` (a reload) that can
        change while it runs, starting or stopping it when its setting is
        turned on or off. The problem (the service is then off), or None.
        Settings of the service that need a restart are not reloadable
        (``RELOADABLE``): the reload names them and does not call this for
        them."""


class ServiceRegistry:
    """The services of one router, in the order they were registered, and
    the parts of its core that a reload reconfigures."""

    def __init__(self) -> None:
        self._services: list[Service] = []
        self._parts: list[Reconfigurable] = []   # the services and the core's parts
        self._running: list[Service] = []      # started (or starting), in order

    def register(self, service: Service) -> None:
        self.register_part(service)
        self._services.append(service)

    def register_part(self, part: Reconfigurable) -> None:
        """A part of the core that a reload reconfigures but nothing starts."""
        if any(p.name == part.name for p in self._parts):
            raise ValueError(f"a part named {part.name!r} is registered already")
        claimed = [name for p in self._parts for name in p.reloads & part.reloads]
        if claimed:
            raise ValueError(f"{part.name!r} reloads {', '.join(sorted(claimed))}, "
                             "which another part reloads already")
        self._parts.append(part)

    def __iter__(self) -> Iterator[Service]:
        return iter(self._services)

    def parts(self) -> Iterator[Reconfigurable]:
        """Every part a reload reconfigures (the services among them)."""
        return iter(self._parts)

    def claimed(self) -> frozenset[str]:
        """The reloadable settings that a registered part reloads."""
        return frozenset(name for part in self._parts for name in part.reloads)

    def __getitem__(self, name: str) -> Service:
        for service in self._services:
            if service.name == name:
                return service
        raise KeyError(name)

    async def start(self, point: StartPoint) -> None:
        """Start the services of ``point``, in order. One that fails is
        counted as started, so that ``stop`` stops its half-started parts."""
        for service in self._services:
            if service.starts is point and service not in self._running:
                self._running.append(service)
                await service.start()

    async def stop(self, point: StopPoint) -> None:
        """Stop the started services of ``point``, last started first. A
        failure is logged and the others still stop: the router is stopping
        anyway."""
        for service in reversed(list(self._running)):
            if service.stops is not point:
                continue
            self._running.remove(service)
            try:
                await service.stop()
            except Exception:  # stopping anyway: logged, the others still stop
                log.exception("stopping the %s failed", service.name)
