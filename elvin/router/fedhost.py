"""The router as its federation service sees it.

``RouterFederationHost`` implements ``elvin.federation.host.FederationHost``
over a ``Router``: it is the one place where federation touches the
router's engine, statistics and configuration, so those can change without
federation following them.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from elvin.federation.host import SubscriptionListener
from elvin.keys import Keys
from elvin.protocol.limits import Limits
from elvin.router.security import check_keys, prepare_notification
from elvin.tls import listener_context

if TYPE_CHECKING:
    from elvin.router.engine import Engine

__all__ = ["RouterFederationHost"]


class _Router(Protocol):
    """The parts of ``elvin.router.server.Router`` that federation reaches
    through this adapter (and only through it)."""

    router_id: str
    initial_limits: Limits
    config: Any
    engine: Any
    stats: Any

    def run_off_loop(self, size: int, job: Callable[[], Any]) -> asyncio.Future[Any]: ...

    def deliver_ordered(self, key: Hashable, attrs: dict[str, Any], block: bytes | None,
                        deliver_insecure: bool, nkeys: Any, *, producer: Any = None,
                        routing: tuple[str, ...] = (), local: bool = True) -> None: ...


class RouterFederationHost:
    """A ``FederationHost`` for ``router``."""

    def __init__(self, router: _Router) -> None:
        self._router = router

    @property
    def router_id(self) -> str:
        return self._router.router_id

    @property
    def limits(self) -> Limits:
        return self._router.initial_limits

    def server_tls(self, what: str) -> ssl.SSLContext:
        config = self._router.config
        return listener_context(config.tls_cert, config.tls_key, what)

    def client_certificate(self) -> tuple[str, str] | None:
        config = self._router.config
        if config.tls_cert and config.tls_key:
            return config.tls_cert, config.tls_key
        return None

    def watch_subscriptions(self, listener: SubscriptionListener) -> Iterable[Hashable]:
        engine: Engine = self._router.engine
        engine.pred_listener = listener
        return engine.predicate_asts()

    def unwatch_subscriptions(self, listener: SubscriptionListener) -> None:
        engine = self._router.engine
        if engine.pred_listener == listener:
            engine.pred_listener = None

    def run_off_loop(self, size: int, job: Callable[[], Any]) -> asyncio.Future[Any]:
        return self._router.run_off_loop(size, job)

    def deliver(self, attrs: dict[str, Any], block: bytes | None, deliver_insecure: bool,
                keys: Keys, routing: tuple[str, ...], local: bool = True) -> None:
        check_keys(keys)          # KeyRefused: the link logs it, nothing is delivered
        router = self._router
        if local:
            router.stats.notifications_in += 1
        # matched in steps (thousands of candidates), one sender's in order
        origin = f"federation:{routing[-1]}" if routing else None
        router.deliver_ordered(origin, attrs, block, deliver_insecure, prepare_notification(keys),
                               routing=routing, producer=origin, local=local)
