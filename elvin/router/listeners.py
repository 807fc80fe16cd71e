"""The router's client listeners: bound, opened, named and closed.

The router binds every ``listen`` URI before it serves any (``bind``, then
``serve``): the mobility proxy needs the bound URLs to take its clients'
subscriptions back before anyone can publish. A TLS listener counts a
socket at the door from its accept, before any TLS work (``Door.admit``),
and the session that follows its handshake takes the count over
(``Door.transfer``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from elvin.cli_common import listen_error_reason, listen_error_status
from elvin.errors import RouterStartError
from elvin.federation.tlsaccept import Handshaking
from elvin.router.config import parse_listen_uri
from elvin.router.door import tls_key
from elvin.tls import listener_context

if TYPE_CHECKING:
    from elvin.federation.admission import Peer
    from elvin.router.config import RouterConfig
    from elvin.router.door import Door

__all__ = ["Listeners"]

log = logging.getLogger("elvin.router")


class Listeners:
    """The listening sockets of one router. ``session(listener)`` makes the
    protocol of an accepted connection (``listener``: the URI it came in
    by); ``door()`` is the router's door while it runs, else None."""

    def __init__(self, config: RouterConfig, session: Callable[[str], asyncio.Protocol],
                 door: Callable[[], Door | None]) -> None:
        self._config = config
        self._session = session
        self._door = door
        self._servers: list[tuple[str, asyncio.Server]] = []
        #: TLS sockets whose handshake is under way (aborted at close)
        self._pending: set[asyncio.BaseTransport] = set()

    async def bind(self, uri: str) -> None:
        """Bind ``uri`` (RouterStartError, saying why, if it cannot be), not
        accepting yet."""
        parsed = parse_listen_uri(uri)
        config = self._config
        context = listener_context(config.tls_cert, config.tls_key,
                                   f"listen URI {uri}") if parsed.secure else None
        host = None if parsed.host in ("", "*") else parsed.host
        listener = str(parsed)
        if context is None:
            def factory() -> asyncio.Protocol:
                return self._session(listener)
        else:
            # TLS over plain TCP (elvin.federation.tlsaccept): the door counts
            # the socket from its accept, not from the end of its handshake
            def factory() -> asyncio.Protocol:
                return Handshaking(lambda: self._session(listener), context,
                                   config.connect_timeout, self._tls_failed,
                                   self._pending, room=self._tls_room)
        try:
            server = await asyncio.get_running_loop().create_server(
                factory, host, parsed.port, reuse_address=True, backlog=1024,
                start_serving=False)
        except OSError as exc:
            raise RouterStartError(f"cannot listen on {parsed.host}:{parsed.port} "
                                   f"({uri}): {listen_error_reason(exc, parsed.port)}",
                                   listen_error_status(exc)) from None
        self._servers.append(("ssl" if parsed.secure else "tcp", server))

    async def serve(self) -> None:
        """Accept connections on every bound listener."""
        for _kind, server in self._servers:
            await server.start_serving()

    def _tls_room(self, peer: Peer) -> bool:
        """A TLS socket was accepted: the door admits it (or closes it) before
        any TLS work; its session takes the count over (``Door.transfer``)."""
        door = self._door()
        return door is None or door.admit(tls_key(peer), (peer.address, peer.port))

    def _tls_failed(self, peer: Peer, exc: BaseException) -> None:
        """A TLS handshake failed (or timed out): said rate-limited, uncounted."""
        door = self._door()
        if door is not None:
            door.closed(tls_key(peer))
            door.notes.log("failed TLS handshakes", logging.INFO,
                           "TLS handshake from %s:%s failed: %s", peer.address, peer.port,
                           exc or type(exc).__name__)

    @property
    def ports(self) -> list[int]:
        """The bound ports (port 0 in a URI: the one the system chose)."""
        out = []
        for _kind, server in self._servers:
            for sock in server.sockets:
                port = sock.getsockname()[1]
                if port not in out:
                    out.append(port)
        return out

    @property
    def urls(self) -> list[str]:
        """The bound listeners as the URLs clients use."""
        out = []
        for kind, server in self._servers:
            if not server.sockets:
                continue
            addr = server.sockets[0].getsockname()
            host, port = addr[0], addr[1]
            shown = f"[{host}]" if ":" in host else host
            if kind == "ssl":
                out.append(f"elvin:4.0/ssl,none,xdr/{shown}:{port}")
            else:
                out.append(f"elvin://{shown}:{port}")
        return out

    async def close(self) -> None:
        """Close every listener, and abort the TLS handshakes under way."""
        servers, self._servers = self._servers, []
        for _kind, server in servers:
            server.close()
        for _kind, server in servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 1.0)
            except Exception:  # stopping: closed anyway
                log.debug("a listener did not close cleanly", exc_info=True)
        for transport in list(self._pending):
            transport.abort()               # type: ignore[attr-defined]  # a pending TLS socket's transport
