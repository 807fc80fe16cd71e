"""The router: listeners, sessions, delivery, statistics and lifecycle.

Async API::

    router = Router(RouterConfig(listen=["elvin://127.0.0.1:0"]))
    await router.start()          # binds every listen URI (RouterStartError if not)
    router.ports, router.urls     # what was bound (port 0 -> the real port)
    await router.serve_forever()  # until stop()
    await router.stop()           # Disconn (reason 1) to every client, close listeners

``Router.deliver`` is the notification hot path: the engine finds the
matching subscriptions, and each client gets *one* NotifyDeliver listing all
its matching subscription ids, built from the attributes' XDR (encoded once
per notification, or forwarded as received) with two small packs.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import ssl
import time
from collections.abc import Hashable
from typing import Any

from elvin.keys import Keys
from elvin.protocol import (
    DisconnReason,
    encode_attributes,
    frame_notify_deliver,
)
from elvin.router.config import RouterConfig, parse_listen_uri
from elvin.router.engine import Engine
from elvin.router.options import initial_options
from elvin.router.quench import QuenchManager
from elvin.router.security import NotificationKeys
from elvin.router.session import CLOSING, CONNECTED, Session
from elvin.router.stats import STATS_ATTRIBUTE, Stats
from elvin.subscription import compile as compile_subscription

log = logging.getLogger("elvin.router")

__all__ = ["Router", "RouterStartError"]


class RouterStartError(Exception):
    """The router could not start (e.g. an address in use); says which."""


class Router:
    def __init__(self, config: RouterConfig | None = None) -> None:
        self.config = config if config is not None else RouterConfig()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.engine = Engine()
        self.quench = QuenchManager(self.engine, self._send_quench_packet)
        self.stats = Stats()
        self.sessions: set[Session] = set()
        self.initial_options = initial_options(self.config.options)
        self.initial_limits = self.initial_options.limits()
        self.router_id = f"{socket.gethostname()}:{os.getpid()}:{int(time.time())}"
        self._servers: list[tuple[str, asyncio.AbstractServer]] = []
        self._stopped: asyncio.Event | None = None
        self._stats_handle: asyncio.TimerHandle | None = None
        self._stopping = False
        self.compile = functools.lru_cache(maxsize=4096)(compile_subscription)
        self.engine.watch(STATS_ATTRIBUTE, self._stats_watch)

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> Router:
        self.loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._stopping = False
        self.stats = Stats()
        try:
            for uri in self.config.listen:
                await self._listen(uri)
        except BaseException:
            await self._close_servers()
            raise
        for url in self.urls:
            log.info("listening on %s", url)
        return self

    async def _listen(self, uri: str) -> None:
        parsed = parse_listen_uri(uri)
        context = self._ssl_context() if parsed.secure else None
        host = None if parsed.host in ("", "*") else parsed.host
        try:
            server = await self.loop.create_server(  # type: ignore[union-attr]
                lambda: Session(self, str(parsed)), host, parsed.port, ssl=context,
                reuse_address=True, backlog=1024,
                ssl_handshake_timeout=self.config.connect_timeout if context else None)
        except OSError as exc:
            raise RouterStartError(f"cannot listen on {parsed.host}:{parsed.port} "
                                   f"({uri}): {exc.strerror or exc}") from None
        self._servers.append(("ssl" if parsed.secure else "tcp", server))

    def _ssl_context(self) -> ssl.SSLContext:
        cert, key = self.config.tls_cert, self.config.tls_key
        if not cert or not key:
            raise RouterStartError("a TLS (ssl) listen URI needs --tls-cert and --tls-key")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise RouterStartError(f"cannot load TLS certificate {cert!r} / key {key!r}: "
                                   f"{exc}") from None
        return context

    @property
    def ports(self) -> list[int]:
        out = []
        for _kind, server in self._servers:
            for sock in server.sockets:
                port = sock.getsockname()[1]
                if port not in out:
                    out.append(port)
        return out

    @property
    def urls(self) -> list[str]:
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

    async def serve_forever(self) -> None:
        if self._stopped is None:
            await self.start()
        await self._stopped.wait()  # type: ignore[union-attr]

    async def stop(self) -> None:
        """Disconn (reason 1) to every client, close the listeners, wait (up to
        ``close_timeout``) for the channels to close."""
        if self._stopping:
            if self._stopped is not None:
                await self._stopped.wait()
            return
        self._stopping = True
        if self._stats_handle is not None:
            self._stats_handle.cancel()
            self._stats_handle = None
        await self._close_servers()
        for session in list(self.sessions):
            try:
                if session.state == CONNECTED:
                    session.disconnect(DisconnReason.SHUTDOWN, "router shutting down")
                elif session.state != CLOSING:      # closing ones finish on their own
                    session.abort()
            except Exception:
                log.exception("closing %r failed", session)
        deadline = time.monotonic() + self.config.close_timeout
        while self.sessions and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for session in list(self.sessions):
            session.abort()
        await asyncio.sleep(0)
        if self._stopped is not None:
            self._stopped.set()
        log.info("router stopped")

    async def _close_servers(self) -> None:
        servers, self._servers = self._servers, []
        for _kind, server in servers:
            server.close()
        for _kind, server in servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 1.0)
            except Exception:
                pass

    # -- sessions ------------------------------------------------------------------------
    def session_opened(self, session: Session) -> None:
        self.sessions.add(session)
        if self._stopping:
            session.abort()

    def session_connected(self, session: Session) -> None:
        self.stats.connections_total += 1

    def session_closed(self, session: Session) -> None:
        self.sessions.discard(session)

    def release(self, session: Session) -> None:
        """Forget a session's subscriptions (SubDelNotify to quenchers) and quenches."""
        quench = self.quench
        quench.remove_owner(session)
        for sub in list(self.engine.owned(session).values()):
            before = quench.view(sub)
            self.engine.remove(sub)
            quench.subscription_removed(sub, before)

    def owner_sub_keys_changed(self, session: Session, keys: Keys) -> None:
        quench = self.quench
        subs = list(self.engine.owned(session).values())
        views = [quench.view(sub) for sub in subs]
        self.engine.set_owner_keys(session, keys)
        for sub, before in zip(subs, views, strict=True):
            quench.subscription_modified(sub, before, False)

    def _send_quench_packet(self, owner: Hashable, packet: Any) -> None:
        owner.send(packet, droppable=True)  # type: ignore[attr-defined]

    # -- delivery ------------------------------------------------------------------------
    def deliver(self, attrs: dict, block: bytes | None, deliver_insecure: bool,
                nkeys: NotificationKeys | None) -> int:
        """Deliver one notification; returns the number of NotifyDeliver packets."""
        insecure, secure = self.engine.match(attrs, nkeys, deliver_insecure)
        if not insecure and not secure:
            return 0
        if block is None:
            block = encode_attributes(attrs)
        count = 0
        if secure:
            for session, ids in secure.items():
                other = insecure.pop(session, ())
                session.send_bytes(frame_notify_deliver(block, ids, other), True)
                count += 1
        for session, ids in insecure.items():
            session.send_bytes(frame_notify_deliver(block, (), ids), True)
            count += 1
        self.stats.notifications_out += count
        return count

    # -- statistics ---------------------------------------------------------------------
    @property
    def connection_count(self) -> int:
        return sum(1 for s in self.sessions if s.state == CONNECTED)

    def _stats_watch(self, active: bool) -> None:
        if active:
            if self._stats_handle is None and self.loop is not None and not self._stopping:
                self._stats_handle = self.loop.call_later(self.config.stats_interval,
                                                          self._publish_stats)
        elif self._stats_handle is not None:
            self._stats_handle.cancel()
            self._stats_handle = None

    def _publish_stats(self) -> None:
        self._stats_handle = None
        if self._stopping or not self.engine.refers(STATS_ATTRIBUTE):
            return
        try:
            attrs = self.stats_notification()
            self.deliver(attrs, None, True, None)
        except Exception:
            log.exception("publishing statistics failed")
        self._stats_handle = self.loop.call_later(  # type: ignore[union-attr]
            self.config.stats_interval, self._publish_stats)

    def stats_notification(self) -> dict[str, object]:
        return self.stats.notification(self.router_id, self.connection_count,
                                       len(self.engine), len(self.quench))
