"""What the federation service needs from the router that owns it.

``FederationService`` sees its router only through this protocol, so that
the router's engine, sessions and statistics can change without federation
noticing, and so that everything federation asks of a router is listed in
one place. ``elvin.router.fedhost.RouterFederationHost`` adapts a ``Router``
to it.

The other direction is ``FederationService.forward``: the router calls it
with every notification it has matched (its own clients' and those that
came from links), and federation decides which links get it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol, TypeVar

from elvin.keys import Keys
from elvin.protocol.limits import Limits

__all__ = ["FederationHost", "SubscriptionListener"]

T = TypeVar("T")

#: Called with a subscription's predicate (an AST node: hashable, equal for
#: equal predicates) and True when a subscriber adds it, False when the last
#: one goes.
SubscriptionListener = Callable[[Hashable, bool], None]


class FederationHost(Protocol):
    """The router, as its federation service uses it."""

    @property
    def router_id(self) -> str:
        """Unique per router process: names the router domain when the
        configuration gives none."""
        ...

    @property
    def limits(self) -> Limits:
        """The packet limits links decode with (those of the router's clients)."""
        ...

    def server_tls(self, what: str) -> ssl.SSLContext:
        """The TLS context of a federation listener (the router's own
        certificate); RouterStartError naming ``what`` if there is none."""
        ...

    def client_certificate(self) -> tuple[str, str] | None:
        """The router's own certificate and key files (PEM), shown to a
        federation listener that asks the dialling router for one; None
        when the router has none."""
        ...

    def watch_subscriptions(self, listener: SubscriptionListener) -> Iterable[Hashable]:
        """Call ``listener`` on every later change of what local subscribers
        want, and return what they want now (the predicates of the current
        subscriptions). One listener at a time: a new one replaces the last."""
        ...

    def unwatch_subscriptions(self, listener: SubscriptionListener) -> None:
        """Stop calling ``listener`` (nothing if it is no longer the one watching)."""
        ...

    def run_off_loop(self, size: int, job: Callable[[], T]) -> asyncio.Future[T]:
        """Run ``job`` (compiling a peer's pull filter of ``size`` bytes:
        thread-safe, touching nothing of the router's) on the worker that
        compiles long subscription expressions, so that it never holds the
        loop the router's clients share; the future gives its result or
        raises what it raised."""
        ...

    def deliver(self, attrs: dict[str, Any], block: bytes | None, deliver_insecure: bool,
                keys: Keys, routing: tuple[str, ...], local: bool = True) -> None:
        """Deliver a notification that came from a link, as a local producer's
        would be (the router then calls ``forward`` with ``routing``); with
        ``local`` False, only forward it, in order with the link's others
        (a flooding router's copy by another path).
        ``block`` is its attributes' XDR when the link has it, ``keys`` the
        keys it came with. Raises ``elvin.errors.KeyRefused`` for keys the
        router refuses (nothing is delivered)."""
        ...
