"""ConnectionManager: an Elvin connection as a QObject with Qt signals."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QObject, Signal

from elvin.client import CloseReason, Connection, Notification, Subscription
from elvin.client.connection import DEFAULT_URL
from elvin.errors import ElvinError

__all__ = ["ConnectionManager"]

log = logging.getLogger("elvin.qt")

DISCONNECTED = "disconnected"
CONNECTING = "connecting"
CONNECTED = "connected"
RECONNECTING = "reconnecting"


class ConnectionManager(QObject):
    """Keeps a :class:`elvin.client.Connection` up and reports on it.

    ``start()`` connects in the background and retries with exponential
    backoff (``retry_delay`` doubling up to ``max_retry_delay``) until it
    succeeds; once connected the connection reconnects by itself and
    restores its subscriptions and quenches. Everything runs on the Qt loop
    through qasync (``elvin.qt.run_app``); there are no threads.

    Signals: ``stateChanged(str)`` with ``"disconnected"``, ``"connecting"``,
    ``"connected"`` or ``"reconnecting"``; ``connected()``;
    ``disconnected(str)`` with the reason; ``reconnected()``;
    ``notification(object)`` for each notification delivered to a
    subscription made through :meth:`subscribe` (a
    :class:`elvin.client.Notification`, whose ``subscription`` says which);
    ``error(str)`` for failed connection attempts; ``routerChanged(str)``
    with the new router's URL when the connection failed over to another
    router (``url`` may be a list of routers: ``elvin.client.connect``).
    """

    stateChanged = Signal(str)
    connected = Signal()
    disconnected = Signal(str)
    reconnected = Signal()
    notification = Signal(object)
    error = Signal(str)
    routerChanged = Signal(str)

    def __init__(self, url: str | Sequence[str] = DEFAULT_URL, parent: QObject | None = None, *,
                 retry_delay: float = 0.5, max_retry_delay: float = 10.0,
                 **connect_kwargs: Any) -> None:
        super().__init__(parent)
        self._url = url
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.connect_kwargs = connect_kwargs
        self._state = DISCONNECTED
        self._connection: Connection | None = None
        self._task: asyncio.Task | None = None
        #: the Connection the loop opened or is opening (closed if the loop is cancelled)
        self._opened: Connection | None = None
        self._wanted: list[tuple[str, dict]] = []
        self.last_error: str = ""
        #: the router the last failover left (lost), "" before any
        self.previous_url: str = ""

    # -- properties ------------------------------------------------------------
    @property
    def url(self) -> str:
        """The router connected to now (or, not connected, the first named)."""
        if self._connection is not None:
            return self._connection.url
        return self._url if isinstance(self._url, str) else str(next(iter(self._url), ""))

    @property
    def urls(self) -> list[str]:
        """Every router this manager may use, in failover order (one, unless
        it was given a list)."""
        if self._connection is not None:
            return self._connection.urls
        return [self._url] if isinstance(self._url, str) else [str(u) for u in self._url]

    @property
    def state(self) -> str:
        """``"disconnected"``, ``"connecting"``, ``"connected"`` or ``"reconnecting"``; the
        ``stateChanged`` signal says when it changes.
        """
        return self._state

    @property
    def connection(self) -> Connection | None:
        """The open Connection, or None while not connected."""
        return self._connection

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self.stateChanged.emit(state)

    # -- control -----------------------------------------------------------------
    def start(self) -> None:
        """Connect in the background (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def wait_connected(self, timeout: float | None = None) -> Connection:
        """Wait until connected and return the open Connection; TimeoutError after
        ``timeout`` seconds (None: no limit).
        """
        async with asyncio.timeout(timeout):
            while self._state != CONNECTED or self._connection is None:
                await asyncio.sleep(0.02)
        return self._connection

    async def stop(self) -> None:
        """Close the connection and stop retrying."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # closing anyway: how it fails changes nothing
                await task
        conn, self._connection = self._connection, None
        if conn is not None:
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await conn.close()
            self.disconnected.emit("closed")
        self._set_state(DISCONNECTED)

    async def set_url(self, url: str | Sequence[str]) -> None:
        """Switch to another router (subscriptions made through
        :meth:`subscribe` follow)."""
        await self.stop()
        self._url = url
        self.start()

    async def subscribe(self, expression: str, **kwargs: Any) -> Subscription:
        """Subscribe on the current connection; deliveries are also emitted
        as ``notification``. Remembered, and made again after
        :meth:`set_url` or a fresh connection."""
        conn = self._connection
        if conn is None:
            raise ElvinError(f"not connected to {self.url}")
        sub = await conn.subscribe(expression, listener=self._emit_notification, **kwargs)
        self._wanted.append((expression, kwargs))
        return sub

    def _emit_notification(self, notification: Notification) -> None:
        self.notification.emit(notification)

    # -- the connection loop -----------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self._keep_connected()
        except asyncio.CancelledError:
            # whoever cancels the loop (stop(), or the loop's owner closing
            # the loop: elvin.qt.cancel_pending) ends the connection it opened
            conn = self._opened
            if conn is not None and conn.state != "closed":
                with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                    await conn.close(timeout=1.0)
            raise

    async def _keep_connected(self) -> None:
        delay = self.retry_delay
        while True:
            self._set_state(CONNECTING)
            conn = self._opened = Connection(self._url, reconnect=True, **self.connect_kwargs)
            try:
                await conn.open()
            except (ElvinError, OSError, TimeoutError) as exc:
                self._opened = None
                self.last_error = str(exc)
                self.error.emit(self.last_error)
                self._set_state(DISCONNECTED)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_retry_delay)
                continue
            delay = self.retry_delay
            self._connection = conn
            conn.add_connection_lost_listener(self._on_lost)
            conn.add_reconnect_listener(self._on_reconnected)
            conn.add_failover_listener(self._on_failover)
            for expression, kwargs in self._wanted:
                try:
                    await conn.subscribe(expression, listener=self._emit_notification,
                                         **kwargs)
                except ElvinError as exc:
                    log.warning("could not subscribe to %r: %s", expression, exc)
            self._set_state(CONNECTED)
            self.connected.emit()
            # shielded: cancelling this loop must not cancel the connection's
            # own ``closed`` future, which others (and close()) read
            reason: CloseReason = await asyncio.shield(conn.closed)
            self._connection = self._opened = None
            if reason.kind == "closed":
                return
            self.disconnected.emit(str(reason))

    def _on_lost(self, reason: CloseReason) -> None:
        self.last_error = str(reason)
        self._set_state(RECONNECTING)
        self.disconnected.emit(str(reason))

    def _on_failover(self, conn: Connection, previous: str) -> None:
        self.previous_url = previous
        self.routerChanged.emit(conn.url)

    def _on_reconnected(self, conn: Connection) -> None:
        self._set_state(CONNECTED)
        self.reconnected.emit()
        self.connected.emit()
