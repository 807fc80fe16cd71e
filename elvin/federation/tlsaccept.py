"""The server side of a TLS federation connection, up to its handshake.

A TLS listener could hand asyncio the context (``create_server(ssl=...)``),
but then a handshake that fails -- a router showing a certificate from
another CA, or none that verifies -- is dropped without a word (asyncio logs
it in debug mode only), and an administrator is left wondering why two
routers never link. So the listener accepts plain TCP, and ``Handshaking``
puts the TLS layer in place itself, at once, in ``connection_made``: the
link becomes the TLS layer's application protocol (its ``connection_made``
comes once the handshake is done, as with ``create_server(ssl=...)``),
and the handshake's outcome reaches ``failed`` with the peer's address.

Why not ``loop.start_tls``: it runs a loop turn later, and uvloop may have
read the peer's first TLS record by then (pausing the transport in
``connection_made`` does not stop it), so the handshake would wait for a
ClientHello already swallowed. The TLS layer is asyncio's own
``SSLProtocol`` -- the one ``create_server(ssl=...)`` and ``start_tls`` use
-- which works over any transport, uvloop's included.
"""

from __future__ import annotations

import asyncio
import ssl
from asyncio.sslproto import SSLProtocol
from collections.abc import Callable

from elvin.federation.admission import Peer

__all__ = ["Handshaking"]


class Handshaking(asyncio.Protocol):
    """A TLS listener's protocol: hands the connection to the TLS layer
    with ``link()`` as its application protocol. ``pending`` (the owner's
    set) holds the transports whose handshake is under way, so that the
    owner can abort them when it stops; ``room(peer)`` says whether the
    owner takes another connection from that peer (else it is dropped
    before any TLS work)."""

    def __init__(self, link: Callable[[], asyncio.Protocol], context: ssl.SSLContext,
                 timeout: float, failed: Callable[[Peer, BaseException], None],
                 pending: set[asyncio.BaseTransport],
                 room: Callable[[Peer], bool] = lambda peer: True) -> None:
        self._link = link
        self._context = context
        self._timeout = timeout
        self._failed = failed
        self._pending = pending
        self._room = room

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        loop = asyncio.get_running_loop()
        peer = Peer.of(transport)
        if not self._room(peer):
            transport.abort()          # type: ignore[attr-defined]
            return
        waiter = loop.create_future()
        # typeshed has the private SSLProtocol's timeout as int; asyncio takes any
        # number of seconds (its own default is 60.0; create_server, which passes it
        # on, says float)
        tls = SSLProtocol(loop, self._link(), self._context, waiter, server_side=True,
                          ssl_handshake_timeout=self._timeout)  # type: ignore[arg-type]
        self._pending.add(transport)
        waiter.add_done_callback(lambda done: self._done(transport, peer, done))
        transport.set_protocol(tls)
        tls.connection_made(transport)

    def _done(self, transport: asyncio.BaseTransport, peer: Peer, waiter: asyncio.Future) -> None:
        self._pending.discard(transport)
        if waiter.cancelled():
            return
        exc = waiter.exception()
        if exc is not None:
            transport.abort()          # type: ignore[attr-defined]
            self._failed(peer, exc)

    def data_received(self, data: bytes) -> None:  # pragma: no cover - the TLS layer's
        pass
