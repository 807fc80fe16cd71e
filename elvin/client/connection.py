"""The asyncio Elvin client: one ``Connection`` per router session.

Layering: bytes from the socket go through ``elvin.protocol.FrameDecoder``
(sans-IO) in ``data_received``; each packet is dispatched synchronously, in
order: replies resolve the future of the request with the same xid (and
update client state before any later packet is looked at, so a delivery that
follows a SubRply in the same read already finds its subscription);
NotifyDeliver goes to subscriptions by id, quench notifications to quenches
by id. Requests are written with ``elvin.protocol.frame_packet``.

Assumption about quench (documented in the brief, guaranteed by the bundled
router): after a QnchAddRqst/QnchModRqst the router sends the SubAddNotify
packets for subscriptions that already exist *before* the QnchRply. Until a
quench's reply arrives its id is unknown here, so notifications addressed to
unknown quench ids are held while any quench request is outstanding and
applied when the QnchRply names that id. Auto-quench relies on this: once the
QnchRply for a name has arrived, every subscription referring to it is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl as ssl_module
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from elvin.client._stream import call_listener
from elvin.client.errors import (
    ConnectError,
    ConnectionClosedError,
    OptionsRejectedError,
    QuenchNotSupported,
    nack_exception,
)
from elvin.client.events import (
    CloseReason,
    SubscriptionAdded,
    SubscriptionModified,
    SubscriptionRemoved,
)
from elvin.client.quench import DEFAULT_BUFFER as QUENCH_BUFFER
from elvin.client.quench import Quench
from elvin.client.subscription import DEFAULT_BUFFER as SUB_BUFFER
from elvin.client.subscription import Subscription
from elvin.errors import ElvinError, ProtocolError
from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import (
    DEFAULT_LIMITS,
    ConfConn,
    ConnRply,
    ConnRqst,
    Disconn,
    DisconnReason,
    DisconnRply,
    DisconnRqst,
    DropWarn,
    ElvinURI,
    FrameDecoder,
    Limits,
    Nack,
    NotifyDeliver,
    NotifyEmit,
    QnchAddRqst,
    QnchDelRqst,
    QnchModRqst,
    QnchRply,
    QosRply,
    QosRqst,
    SecRply,
    SecRqst,
    SubAddNotify,
    SubAddRqst,
    SubDelNotify,
    SubDelRqst,
    SubModNotify,
    SubModRqst,
    SubRply,
    TestConn,
    UNotify,
    frame_packet,
    parse_uri,
)
from elvin.values import INT64_MAX, INT64_MIN, Int64, check_notification

log = logging.getLogger("elvin.client")

__all__ = ["Connection", "connect", "unotify", "DEFAULT_URL"]

DEFAULT_URL = "elvin://127.0.0.1:2917"
CLIENT_VERSION = (4, 0)
_XID_MAX = 0xFFFFFFFF
_MAX_REDIRECTS = 5
#: mid-session redirects: more than _MAX_REDIRECTS within this many seconds
#: is a loop between misconfigured routers (spec 7.4.7 allows detecting it)
_REDIRECT_WINDOW = 30.0
_TEST_CONN_FRAME = frame_packet(TestConn())
_CORK_LIMIT = 64 * 1024
_CONF_CONN_FRAME = frame_packet(ConfConn())


def _uri(url: str | ElvinURI) -> ElvinURI:
    uri = url if isinstance(url, ElvinURI) else parse_uri(url)
    if uri.protocol[0] not in ("tcp", "ssl") or uri.protocol[2] != "xdr":
        raise ValueError(f"unsupported protocol stack {','.join(uri.protocol)} in {url}")
    return uri


def _keys(keys: Keys | None, what: str) -> Keys:
    if keys is None:
        return EMPTY_KEYS
    if not isinstance(keys, Keys):
        raise TypeError(f"{what} must be elvin.Keys, not {type(keys).__name__}")
    return keys


def _names(names: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(names, str):
        names = [names]
    out = []
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{what}: attribute names are non-empty strings, not {name!r}")
        out.append(name)
    return tuple(dict.fromkeys(out))


class _Pending:
    __slots__ = ("future", "expect", "on_reply", "on_late", "request")

    def __init__(self, future, expect, on_reply, on_late, request) -> None:
        self.future = future
        self.expect = expect
        self.on_reply = on_reply
        self.on_late = on_late
        self.request = request


class _Session(asyncio.Protocol):
    """One transport (TCP or TLS) to a router, with its pending requests."""

    def __init__(self, conn: Connection, limits: Limits) -> None:
        self.conn = conn
        self.loop = asyncio.get_running_loop()
        self.decoder = FrameDecoder(limits)
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, _Pending] = {}
        self.paused = False
        self._drain_waiters: list[asyncio.Future] = []
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_scheduled = False
        self.last_received = self.loop.time()
        self.disconn: Disconn | None = None
        self.close_reason: CloseReason | None = None
        self.lost = self.loop.create_future()
        self.established = False
        self.keepalive_task: asyncio.Task | None = None

    # -- asyncio.Protocol ------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.last_received = self.loop.time()
        try:
            packets = self.decoder.feed(data)
        except ProtocolError as exc:
            self._bad_bytes(exc)
            return
        conn = self.conn
        dispatch = conn._dispatch
        deliver = conn._on_notify_deliver
        for packet in packets:
            # a subscriber's chunk is mostly NotifyDeliver: straight to the
            # subscriptions, without the handler table of _dispatch
            if type(packet) is NotifyDeliver:
                try:
                    deliver(self, packet)
                except Exception:
                    log.exception("error handling NotifyDeliver")
            else:
                dispatch(self, packet)

    def _bad_bytes(self, exc: ProtocolError) -> None:
        dispatch = self.conn._dispatch
        while True:
            for packet in getattr(exc, "packets", ()):
                dispatch(self, packet)
            if self.decoder.broken:
                log.error("router sent undecodable data: %s", exc)
                self.abort(CloseReason("protocol-violation", str(exc), error=exc))
                return
            # a bad packet body: the stream is still in sync, ignore the packet
            # (spec 7.3.2 allows a robust implementation to carry on)
            log.warning("ignoring a packet from the router that does not decode: %s", exc)
            try:
                packets = self.decoder.feed(b"")
            except ProtocolError as again:
                exc = again
                continue
            for packet in packets:
                dispatch(self, packet)
            return

    def connection_lost(self, exc: Exception | None) -> None:
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()
        if self.keepalive_task is not None:
            self.keepalive_task.cancel()
        if self.close_reason is None:
            if self.disconn is not None:
                self.close_reason = _disconn_reason(self.disconn)
            else:
                message = str(exc) if exc else "the router closed the connection"
                self.close_reason = CloseReason("lost", message, error=exc)
        error = ConnectionClosedError(f"connection lost ({self.close_reason})",
                                      self.close_reason)
        for pending in self.pending.values():
            if not pending.future.done():
                pending.future.set_exception(error)
                pending.future.exception()  # mark retrieved: the caller may be gone
        self.pending.clear()
        if not self.lost.done():
            self.lost.set_result(self.close_reason)
        self.conn._session_lost(self)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    # -- helpers ------------------------------------------------------------------
    @property
    def is_closing(self) -> bool:
        return self.transport is None or self.transport.is_closing() or self.lost.done()

    def write(self, data: bytes) -> None:
        """Queue a framed packet. Packets written in one turn of the event
        loop go to the socket in one write (far fewer system calls for a
        producer sending in a loop); 64 KiB or more is written at once, so
        the transport's flow control (pause_writing) still applies."""
        self._out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= _CORK_LIMIT:
            self.flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        out = self._out
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._out_bytes = 0
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    async def drain(self) -> None:
        while self.paused and not self.lost.done():
            waiter = self.loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def abort(self, reason: CloseReason) -> None:
        if self.close_reason is None:
            self.close_reason = reason
        self._out.clear()
        self._out_bytes = 0
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Write what is queued, then close the channel."""
        self.flush()
        if self.transport is not None:
            self.transport.close()


def _disconn_reason(packet: Disconn) -> CloseReason:
    if packet.reason == DisconnReason.SHUTDOWN:
        return CloseReason("shutdown", "the router is shutting down" +
                           (f" ({packet.args})" if packet.args else ""), packet.reason)
    if packet.reason == DisconnReason.REDIRECT:
        return CloseReason("redirect", f"redirected to {packet.args}", packet.reason,
                           redirect=packet.args or None)
    if packet.reason == DisconnReason.PROTOCOL_ERRORS:
        return CloseReason("protocol-errors",
                           "the router closed the connection for repeated protocol errors" +
                           (f" ({packet.args})" if packet.args else ""), packet.reason)
    return CloseReason("disconnected", f"Disconn reason {packet.reason}" +
                       (f" ({packet.args})" if packet.args else ""), packet.reason)


class _Redirected(Exception):
    def __init__(self, url: str) -> None:
        self.url = url
        super().__init__(f"redirected to {url}")


class Connection:
    """A session with an Elvin router. Create it with :func:`connect`.

    Attributes: ``url`` (the router's URI, canonical), ``options`` (the
    connection options the router accepted, from ConnRply/QosRply),
    ``notification_keys`` / ``subscription_keys`` (connection-level keys),
    ``closed`` (a future that resolves to a :class:`CloseReason` when the
    connection is finally closed), ``state`` (``"connecting"``, ``"open"``,
    ``"reconnecting"``, ``"closing"``, ``"closed"``).

    ``supports_quench``: whether the router of the current session
    implements quench (subset C, optional; Avis lacks it), as its answer to
    a quench request said: True after a QnchRply, False after Nack NOT_IMPL
    (``quench()`` raised :class:`QuenchNotSupported`), None while no quench
    request has been answered. Each new session (reconnection, redirect)
    starts at None, since the next router may differ: restoring quenches
    decides it again, and ``auto_quench`` turns itself back on there.
    """

    def __init__(self, url: str | ElvinURI = DEFAULT_URL, *,
                 options: Mapping[str, Any] | None = None,
                 notification_keys: Keys | None = None,
                 subscription_keys: Keys | None = None,
                 auto_quench: bool = False,
                 reconnect: bool = False,
                 keepalive: float | None = None,
                 keepalive_timeout: float | None = None,
                 timeout: float = 10,
                 options_check: Callable[[dict], bool] | None = None,
                 ssl_context: ssl_module.SSLContext | None = None,
                 reconnect_delay: float = 0.1,
                 reconnect_max_delay: float = 5.0,
                 reconnect_attempts: int | None = None,
                 limits: Limits | None = None) -> None:
        self._uri = _uri(url)
        self._home_uri = self._uri
        self.requested_options = dict(options or {})
        if self.requested_options:
            check_notification(self.requested_options)
        self.options: dict[str, Any] = {}
        self.notification_keys = _keys(notification_keys, "notification_keys")
        self.subscription_keys = _keys(subscription_keys, "subscription_keys")
        self.timeout = timeout
        self.keepalive = keepalive
        self.keepalive_timeout = keepalive_timeout
        self.options_check = options_check
        self.ssl_context = ssl_context
        self.reconnect = reconnect
        self.reconnect_delay = reconnect_delay
        self.reconnect_max_delay = reconnect_max_delay
        self.reconnect_attempts = reconnect_attempts
        self._base_limits = limits or DEFAULT_LIMITS
        self._send_limits = _send_limits({})
        self.state = "connecting"
        self.drop_warnings = 0
        self.reconnects = 0
        self._redirect_times: list[float] = []   # recent mid-session redirects
        self.test_conns_sent = 0
        self.supports_quench: bool | None = None

        self._session: _Session | None = None
        self._xid = 0
        self._subs: dict[int, Subscription] = {}
        self._subscriptions: list[Subscription] = []   # open ones, in creation order
        self._quenches: dict[int, Quench] = {}
        self._quench_list: list[Quench] = []
        self._quench_requests = 0
        self._early_quench: dict[int, list] = {}
        self._close_listeners: list[Callable] = []
        self._lost_listeners: list[Callable] = []
        self._reconnect_listeners: list[Callable] = []
        self._ready: asyncio.Event | None = None
        self._reconnect_task: asyncio.Task | None = None
        self._closed: asyncio.Future | None = None
        self._auto_quench = None
        if auto_quench:
            from elvin.client.autoquench import AutoQuench
            self._auto_quench = AutoQuench(self)

    # ======================================================================
    # public properties
    @property
    def url(self) -> str:
        return str(self._uri)

    @property
    def uri(self) -> ElvinURI:
        return self._uri

    @property
    def closed(self) -> asyncio.Future:
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
        return self._closed

    @property
    def is_open(self) -> bool:
        return self.state == "open"

    @property
    def subscriptions(self) -> list[Subscription]:
        return list(self._subscriptions)

    @property
    def quenches(self) -> list[Quench]:
        return [q for q in self._quench_list if not getattr(q, "_internal", False)]

    @property
    def auto_quench_stats(self) -> dict[str, int] | None:
        """``{"sent": n, "dropped": m}`` with auto-quench, else None."""
        return self._auto_quench.stats() if self._auto_quench else None

    def add_close_listener(self, fn: Callable[[CloseReason], object]) -> None:
        """``fn(reason)`` when the connection is finally closed."""
        self._close_listeners.append(fn)

    def add_connection_lost_listener(self, fn: Callable[[CloseReason], object]) -> None:
        """``fn(reason)`` each time a session ends other than by ``close()``,
        including when an automatic reconnection follows."""
        self._lost_listeners.append(fn)

    def add_reconnect_listener(self, fn: Callable[[Connection], object]) -> None:
        """``fn(connection)`` after a successful automatic reconnection
        (subscriptions and quenches restored; notifications sent while the
        connection was down are lost)."""
        self._reconnect_listeners.append(fn)

    def remove_listener(self, fn: Callable) -> None:
        for listeners in (self._close_listeners, self._lost_listeners,
                          self._reconnect_listeners):
            if fn in listeners:
                listeners.remove(fn)

    # ======================================================================
    # context manager
    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ======================================================================
    # opening
    async def open(self) -> Connection:
        """Connect (ConnRqst/ConnRply); :func:`connect` calls this."""
        if self.state != "connecting" or self._ready is not None:
            raise RuntimeError("Connection.open() may be called only once")
        self._ready = asyncio.Event()
        self._closed = asyncio.get_running_loop().create_future()
        try:
            await self._establish_any(self._uri)
        except BaseException as exc:
            self.state = "closed"
            if not self._closed.done():
                self._closed.set_result(CloseReason("lost", f"connection failed: {exc}",
                                                    error=exc))
            raise
        self.state = "open"
        self._ready.set()
        return self

    async def _establish_any(self, uri: ElvinURI) -> None:
        """Establish a session at ``uri``, following redirects."""
        seen = []
        while True:
            try:
                await self._establish(uri)
                return
            except _Redirected as redirect:
                seen.append(uri)
                if len(seen) > _MAX_REDIRECTS:
                    raise ConnectionClosedError(
                        f"too many redirections ({' -> '.join(map(str, seen))})") from None
                try:
                    uri = _uri(redirect.url)
                except ValueError as exc:
                    raise ConnectionClosedError(
                        f"router redirected to a bad URI {redirect.url!r}: {exc}") from None

    async def _establish(self, uri: ElvinURI) -> None:
        loop = asyncio.get_running_loop()
        ssl_ctx = None
        if uri.protocol[0] == "ssl":
            ssl_ctx = self.ssl_context or ssl_module.create_default_context()
        session = _Session(self, self._base_limits)
        try:
            async with asyncio.timeout(self.timeout):
                await loop.create_connection(lambda: session, uri.host, uri.port, ssl=ssl_ctx)
        except TimeoutError:
            raise ConnectError(f"cannot connect to {uri}: no answer within "
                               f"{self.timeout} s") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {uri}: {_os_error_text(exc)}") from None
        try:
            reply = await self._request(
                session, lambda xid: ConnRqst(xid, *CLIENT_VERSION, dict(self.requested_options),
                                              self.notification_keys, self.subscription_keys),
                (ConnRply,))
        except ConnectionClosedError as exc:
            session.abort(CloseReason("lost", "connection refused"))
            reason = exc.reason
            if reason is not None and reason.kind == "redirect" and reason.redirect:
                raise _Redirected(reason.redirect) from None
            raise
        except BaseException:
            session.abort(CloseReason("lost", "connection attempt failed"))
            raise
        options = dict(reply.options)
        if self.options_check is not None and not self.options_check(options):
            with contextlib.suppress(Exception):
                await self._request(session, DisconnRqst, (DisconnRply,),
                                    timeout=min(self.timeout, 2))
            session.abort(CloseReason("closed", "connection options rejected"))
            raise OptionsRejectedError(options)
        self.options = options
        self._send_limits = _send_limits(options)
        session.decoder.limits = Limits.from_options(options, self._base_limits) \
            if _widens(options, self._base_limits) else self._base_limits
        self._uri = uri
        session.established = True
        self._session = session
        self.supports_quench = None   # a new router: its first quench answer says
        if self.keepalive:
            session.keepalive_task = loop.create_task(self._keepalive_loop(session))

    # ======================================================================
    # requests
    def _next_xid(self, session: _Session) -> int:
        xid = self._xid
        pending = session.pending
        while True:
            xid = xid + 1 if xid < _XID_MAX else 1
            if xid not in pending:
                self._xid = xid
                return xid

    def _fire_and_forget(self, session: _Session, make: Callable[[int], Any],
                         expect: tuple) -> None:
        """Send a request whose reply nobody waits for (errors are logged)."""
        if session.is_closing:
            return
        xid = self._next_xid(session)
        packet = make(xid)
        future = session.loop.create_future()
        future.add_done_callback(_log_failure)
        session.pending[xid] = _Pending(future, expect, None, None, (packet, None))
        session.write(frame_packet(packet))

    async def _request(self, session: _Session, make: Callable[[int], Any], expect: tuple,
                       on_reply: Callable | None = None, on_late: Callable | None = None,
                       timeout: float | None = None, expression: str | None = None):
        if session.is_closing:
            raise ConnectionClosedError("connection closed", session.close_reason)
        xid = self._next_xid(session)
        packet = make(xid)
        future = session.loop.create_future()
        session.pending[xid] = _Pending(future, expect, on_reply, on_late, (packet, expression))
        data = frame_packet(packet)
        session.write(data)
        if session.paused:
            await session.drain()
        try:
            async with asyncio.timeout(self.timeout if timeout is None else timeout):
                return await future
        except TimeoutError:
            raise TimeoutError(f"no reply from the router to {type(packet).__name__} within "
                               f"{self.timeout if timeout is None else timeout} s") from None

    async def _live_session(self) -> _Session:
        """The current session; waits while reconnecting (up to ``timeout``)."""
        session = self._session
        if self.state == "open" and session is not None and not session.is_closing:
            return session
        if self.state in ("closing", "closed"):
            reason = self._closed.result() if self._closed and self._closed.done() else None
            raise ConnectionClosedError(
                "connection is closed" + (f" ({reason})" if reason else ""), reason)
        try:
            async with asyncio.timeout(self.timeout):
                while True:
                    await self._ready.wait()
                    session = self._session
                    if self.state == "open" and session is not None and not session.is_closing:
                        return session
                    if self.state in ("closing", "closed"):
                        raise ConnectionClosedError("connection is closed")
                    await asyncio.sleep(0.01)
        except TimeoutError:
            raise ConnectionClosedError(
                f"not connected (reconnecting to {self.url} for more than "
                f"{self.timeout} s)") from None

    # ======================================================================
    # dispatch of incoming packets
    def _dispatch(self, session: _Session, packet) -> None:
        try:
            handler = _HANDLERS.get(type(packet))
            if handler is None:
                log.warning("unexpected %s from the router; ignored", type(packet).__name__)
                return
            handler(self, session, packet)
        except Exception:
            log.exception("error handling %s", type(packet).__name__)

    def _on_reply(self, session: _Session, packet) -> None:
        pending = session.pending.pop(packet.xid, None)
        if pending is None:
            log.warning("%s for unknown xid %d; ignored", type(packet).__name__, packet.xid)
            return
        future = pending.future
        if isinstance(packet, Nack):
            request, expression = pending.request
            exc = nack_exception(packet.error, packet.message, packet.args,
                                 type(request).__name__, expression)
            if isinstance(exc, QuenchNotSupported) and session is self._session:
                self.supports_quench = False
            if not future.done():
                future.set_exception(exc)
            return
        if not isinstance(packet, pending.expect):
            exc = ProtocolError(f"router answered {type(pending.request[0]).__name__} with "
                                f"{type(packet).__name__}")
            if not future.done():
                future.set_exception(exc)
            return
        if future.done():
            if pending.on_late is not None:
                pending.on_late(packet)
            return
        if pending.on_reply is not None:
            pending.on_reply(packet)
        future.set_result(packet)

    def _on_notify_deliver(self, session: _Session, packet: NotifyDeliver) -> None:
        subs = self._subs
        attributes = packet.attributes
        secure = packet.secure_matches
        for sub_id in secure:
            sub = subs.get(sub_id)
            if sub is not None:
                sub._deliver(attributes, True)
        for sub_id in packet.insecure_matches:
            sub = subs.get(sub_id)
            if sub is not None and (not secure or sub_id not in secure):
                sub._deliver(attributes, False)

    def _on_test_conn(self, session: _Session, packet) -> None:
        session.write(_CONF_CONN_FRAME)

    def _on_conf_conn(self, session: _Session, packet) -> None:
        pass  # data_received already noted the traffic

    def _on_drop_warn(self, session: _Session, packet) -> None:
        self.drop_warnings += 1
        log.warning("the router dropped packets for this connection (DropWarn)")

    def _on_disconn(self, session: _Session, packet: Disconn) -> None:
        session.disconn = packet
        session.close_reason = _disconn_reason(packet)
        session.close()

    def _on_quench_notify(self, session: _Session, packet) -> None:
        if isinstance(packet, SubDelNotify):
            targets = [(qid, SubscriptionRemoved(packet.term_id)) for qid in packet.quench_ids]
        else:
            cls = SubscriptionAdded if isinstance(packet, SubAddNotify) else SubscriptionModified
            targets = [(qid, cls(packet.term_id, packet.sub_expr, True))
                       for qid in packet.secure_quench_ids]
            targets += [(qid, cls(packet.term_id, packet.sub_expr, False))
                        for qid in packet.insecure_quench_ids
                        if qid not in packet.secure_quench_ids]
        for qid, event in targets:
            quench = self._quenches.get(qid)
            if quench is not None:
                quench._apply(event)
            elif self._quench_requests:
                # the QnchRply that names this id has not arrived yet
                self._early_quench.setdefault(qid, []).append(event)
            else:
                log.debug("quench event for unknown quench %d ignored", qid)

    def _bind_quench(self, quench: Quench, quench_id: int, new: bool = False) -> None:
        self.supports_quench = True   # a QnchRply: this router has quench
        if new and quench not in self._quench_list:
            self._quench_list.append(quench)
        if quench.id is not None and self._quenches.get(quench.id) is quench:
            del self._quenches[quench.id]
        quench.id = quench_id
        self._quenches[quench_id] = quench
        for event in self._early_quench.pop(quench_id, ()):
            quench._apply(event)

    def _quench_request_done(self) -> None:
        self._quench_requests -= 1
        if not self._quench_requests:
            self._early_quench.clear()

    # ======================================================================
    # losing and closing
    def _session_lost(self, session: _Session) -> None:
        if session is not self._session:
            return
        self._session = None
        reason = session.close_reason or CloseReason("lost")
        if self.state != "open":
            return  # closing, closed, or a reconnection in progress handles it
        for fn in self._lost_listeners:
            call_listener(fn, reason)
        # a redirect is followed even without ``reconnect``: the spec says a
        # client receiving one MUST attempt to connect there (7.4.7)
        redirect = reason.kind == "redirect" and reason.redirect
        if redirect and self._redirect_loop():
            self._finalize(CloseReason(
                "redirect", f"too many redirections (more than {_MAX_REDIRECTS} within "
                f"{_REDIRECT_WINDOW:g} s), the last to {reason.redirect}",
                reason.disconn_reason, redirect=reason.redirect))
            return
        if self.reconnect or redirect:
            self.state = "reconnecting"
            self._ready.clear()
            self._reconnect_task = asyncio.get_running_loop().create_task(
                self._reconnect_loop(reason))
        else:
            self._finalize(reason)

    def _redirect_loop(self) -> bool:
        """Note a mid-session redirect; True when they come so often that the
        routers must be sending the client round in circles."""
        now = asyncio.get_running_loop().time()
        times = [t for t in self._redirect_times if now - t < _REDIRECT_WINDOW]
        times.append(now)
        self._redirect_times = times
        return len(times) > _MAX_REDIRECTS

    def _finalize(self, reason: CloseReason) -> None:
        if self.state == "closed":
            return
        self.state = "closed"
        if self._ready is not None:
            self._ready.set()   # wake waiters so they see "closed"
        for sub in self._subscriptions:
            sub._end()
        self._subscriptions.clear()
        self._subs.clear()
        for quench in self._quench_list:
            quench._end()
        self._quench_list.clear()
        self._quenches.clear()
        if self._closed is None:
            with contextlib.suppress(RuntimeError):
                self._closed = asyncio.get_running_loop().create_future()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(reason)
        for fn in self._close_listeners:
            call_listener(fn, reason)

    async def close(self, timeout: float | None = None) -> CloseReason:
        """Close cleanly: DisconnRqst, wait for DisconnRply (up to
        ``timeout``, default ``min(self.timeout, 5)``), close the channel.
        Idempotent; returns the close reason."""
        if self.state == "closed":
            if self._closed is not None and self._closed.done():
                return self._closed.result()
            return CloseReason("closed", "never opened")
        if self.state == "closing":
            return await asyncio.shield(self.closed)
        previous, self.state = self.state, "closing"
        if self._reconnect_task is not None and not self._reconnect_task.done():
            self._reconnect_task.cancel()
        session = self._session
        if session is not None and not session.is_closing and previous == "open":
            try:
                await self._request(session, DisconnRqst, (DisconnRply,),
                                    timeout=min(self.timeout, 5) if timeout is None else timeout)
            except (ElvinError, TimeoutError, OSError) as exc:
                log.debug("no clean disconnect: %s", exc)
            except asyncio.CancelledError:
                session.abort(CloseReason("closed", "closed by the application"))
                self._finalize(CloseReason("closed", "closed by the application"))
                raise
        if session is not None:
            session.close_reason = session.close_reason or CloseReason("closed")
            session.close()
        reason = CloseReason("closed", "closed by the application")
        self._finalize(reason)
        return reason

    # ======================================================================
    # reconnection
    async def _reconnect_loop(self, reason: CloseReason) -> None:
        delay = self.reconnect_delay
        attempts = 0
        redirect = reason.redirect if reason.kind == "redirect" else None
        last_error: BaseException | None = None
        while self.state == "reconnecting":
            candidates = []
            if redirect:
                with contextlib.suppress(ValueError):
                    candidates.append(_uri(redirect))
                redirect = None
            if self.reconnect:   # else only the redirect is followed (see _session_lost)
                candidates.append(self._uri)
                if self._home_uri != self._uri:
                    candidates.append(self._home_uri)
            for uri in candidates:
                try:
                    await self._establish_any(uri)
                    await self._restore(self._session)
                except asyncio.CancelledError:
                    raise
                except (OSError, ElvinError, TimeoutError) as exc:
                    last_error = exc
                    log.info("reconnect to %s failed: %s", uri, exc)
                    if self._session is not None and self._session.transport is not None:
                        self._session.abort(CloseReason("lost", "restore failed"))
                    self._session = None
                    continue
                self.state = "open"
                self.reconnects += 1
                self._ready.set()
                for fn in self._reconnect_listeners:
                    call_listener(fn, self)
                return
            attempts += 1
            if not self.reconnect:
                # the redirect could not be followed: closed, for that reason
                self._finalize(CloseReason(
                    "redirect", f"{reason.message}; cannot connect there: "
                    f"{last_error or 'not a usable URI'}",
                    reason.disconn_reason, redirect=reason.redirect, error=last_error))
                return
            if self.reconnect_attempts is not None and attempts >= self.reconnect_attempts:
                self._finalize(CloseReason("reconnect-failed",
                                           f"gave up after {attempts} attempts: {last_error}",
                                           error=last_error))
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.reconnect_max_delay)

    async def _restore(self, session: _Session) -> None:
        """Re-register subscriptions and quenches in a new session."""
        self._subs.clear()
        self._quenches.clear()
        objects: list[Subscription | Quench] = []
        requests = []
        for sub in list(self._subscriptions):
            sub.id = None
            objects.append(sub)
            requests.append(self._register_subscription(session, sub))
        for quench in list(self._quench_list):
            quench._reset()
            quench.id = None
            objects.append(quench)
            requests.append(self._register_quench(session, quench))
        if not requests:
            return
        results = await asyncio.gather(*requests, return_exceptions=True)
        for result in results:
            if isinstance(result, (ConnectionClosedError, OSError, TimeoutError)):
                raise result
        for obj, result in zip(objects, results, strict=True):
            if isinstance(result, BaseException):
                # the new router refuses it (e.g. a different language
                # version, or no quench at all): end it rather than leave it
                # silently dead. Auto-quench's own quench is its business.
                if isinstance(result, QuenchNotSupported):
                    if not getattr(obj, "_internal", False):
                        log.warning("%s does not support quench (%s): the quench on %s "
                                    "is ended", self.url, result.message,
                                    ", ".join(sorted(obj.names)))
                else:
                    log.error("could not restore %r after reconnecting: %s", obj, result)
                if obj in self._subscriptions:
                    self._subscriptions.remove(obj)
                if obj in self._quench_list:
                    self._quench_list.remove(obj)
                obj._end()

    # ======================================================================
    # keepalive
    async def _keepalive_loop(self, session: _Session) -> None:
        interval = self.keepalive
        wait_reply = self.keepalive_timeout or min(max(interval, 1.0), self.timeout)
        loop = session.loop
        try:
            while not session.lost.done():
                idle = loop.time() - session.last_received
                if idle < interval:
                    await asyncio.sleep(interval - idle)
                    continue
                sent_at = loop.time()
                session.write(_TEST_CONN_FRAME)
                self.test_conns_sent += 1
                await asyncio.sleep(wait_reply)
                if session.last_received < sent_at and not session.lost.done():
                    log.warning("no reply to TestConn from %s within %.1f s", self.url,
                                wait_reply)
                    session.abort(CloseReason(
                        "lost", f"no traffic from the router within {wait_reply:g} s of a "
                        "TestConn"))
                    return
        except asyncio.CancelledError:
            pass

    # ======================================================================
    # notifications
    async def send(self, notification: Mapping[str, Any], *, keys: Keys | None = None,
                   deliver_insecure: bool = True) -> bool:
        """Send a notification (NotifyEmit).

        Values are checked first (TypeError/ValueError naming the attribute).
        Returns True when sent, False when auto-quench dropped it because no
        subscription at the router can match it.
        """
        attributes = _fast_checked(notification, self._send_limits)
        if attributes is None:   # something to report: the slow path says what
            attributes = check_notification(notification)
            self._check_limits(attributes)
        keys = _keys(keys, "keys")
        if self._auto_quench is not None:
            attributes = dict(attributes)   # we may wait: keep what was given now
            if not await self._auto_quench.allow(attributes, keys, deliver_insecure):
                return False
        session = self._session
        if self.state != "open" or session is None or session.is_closing:
            session = await self._live_session()
        data = frame_packet(NotifyEmit(attributes, bool(deliver_insecure), keys))
        self._check_packet_length(data)
        session.write(data)
        if session.paused:
            await session.drain()
        return True

    def _check_limits(self, attributes: dict) -> None:
        options = self.options
        if not options:
            return
        count = options.get("Attribute.Max-Count")
        if type(count) is int and len(attributes) > count:
            raise ValueError(f"the notification has {len(attributes)} attributes; the "
                             f"router accepts at most {count}")
        max_string = options.get("Attribute.String.Max-Length")
        max_opaque = options.get("Attribute.Opaque.Max-Length")
        max_name = options.get("Attribute.Name.Max-Length")
        for name, value in attributes.items():
            if type(max_name) is int and len(name) * 4 > max_name \
                    and len(name.encode()) > max_name:
                raise ValueError(f"attribute name {name[:40]!r}... is longer than the "
                                 f"router's limit of {max_name} bytes")
            if type(value) is str:
                if type(max_string) is int and len(value) * 4 > max_string \
                        and len(value.encode()) > max_string:
                    raise ValueError(f"attribute {name!r}: string longer than the router's "
                                     f"limit of {max_string} bytes")
            elif type(value) is bytes:
                if type(max_opaque) is int and len(value) > max_opaque:
                    raise ValueError(f"attribute {name!r}: opaque longer than the router's "
                                     f"limit of {max_opaque} bytes")

    def _check_packet_length(self, data: bytes) -> None:
        limit = self.options.get("Packet.Max-Length")
        if type(limit) is int and len(data) - 4 > limit:
            raise ValueError(f"the notification encodes to {len(data) - 4} bytes; the router "
                             f"accepts packets of at most {limit} bytes")

    # ======================================================================
    # subscriptions
    async def subscribe(self, expression: str, *, keys: Keys | None = None,
                        accept_insecure: bool = True,
                        buffer_size: int = SUB_BUFFER,
                        listener: Callable | None = None) -> Subscription:
        """Subscribe (SubAddRqst). The expression is parsed locally first: a
        bad one raises ``elvin.SubscriptionError`` with its position and
        nothing is sent. ``listener`` is added before the request goes out;
        ``buffer_size`` bounds the iterator buffer (0: listeners only)."""
        from elvin.subscription import parse
        if not isinstance(expression, str):
            raise TypeError(f"a subscription expression is a str, not "
                            f"{type(expression).__name__}")
        ast = parse(expression)
        keys = _keys(keys, "keys")
        session = await self._live_session()
        sub = Subscription(self, expression, ast, keys, bool(accept_insecure), buffer_size)
        if listener is not None:
            sub.add_listener(listener)
        await self._register_subscription(session, sub)
        return sub

    async def _register_subscription(self, session: _Session, sub: Subscription) -> None:
        def on_reply(reply: SubRply) -> None:
            sub.id = reply.subscription_id
            self._subs[reply.subscription_id] = sub
            if sub not in self._subscriptions:
                self._subscriptions.append(sub)

        def on_late(reply: SubRply) -> None:
            # the caller gave up waiting: remove the orphan at the router
            self._fire_and_forget(session, lambda xid: SubDelRqst(xid, reply.subscription_id),
                                  (SubRply,))

        await self._request(session, lambda xid: SubAddRqst(xid, sub.expression,
                                                            sub.accept_insecure, sub.keys),
                            (SubRply,), on_reply, on_late, expression=sub.expression)

    async def _modify_subscription(self, sub: Subscription, expression: str | None,
                                   keys_add: Keys, keys_del: Keys,
                                   accept_insecure: bool | None) -> None:
        from elvin.subscription import parse
        if sub.closed:
            raise ConnectionClosedError("the subscription is closed")
        ast = parse(expression) if expression is not None else None
        keys_add, keys_del = _keys(keys_add, "keys_add"), _keys(keys_del, "keys_del")
        insecure = sub.accept_insecure if accept_insecure is None else bool(accept_insecure)
        session = await self._live_session()
        old_id = sub.id

        def on_reply(reply: SubRply) -> None:
            if self._subs.get(old_id) is sub:
                del self._subs[old_id]
            sub.id = reply.subscription_id
            self._subs[sub.id] = sub
            if expression is not None:
                sub.expression, sub.ast = expression, ast
            sub.keys = (sub.keys | keys_add) - keys_del
            sub.accept_insecure = insecure

        await self._request(session, lambda xid: SubModRqst(
            xid, old_id, expression or "", insecure, keys_add, keys_del),
            (SubRply,), on_reply, expression=expression)

    async def _close_subscription(self, sub: Subscription) -> None:
        if sub.closed:
            return
        if sub in self._subscriptions:
            self._subscriptions.remove(sub)
        if self.state == "open" and self._session is not None and sub.id is not None:
            session = self._session
            sub_id = sub.id

            def on_reply(reply) -> None:
                if self._subs.get(sub_id) is sub:
                    del self._subs[sub_id]

            try:
                await self._request(session, lambda xid: SubDelRqst(xid, sub_id), (SubRply,),
                                    on_reply)
            finally:
                sub._end()
        else:
            if sub.id is not None and self._subs.get(sub.id) is sub:
                del self._subs[sub.id]
            sub._end()

    # ======================================================================
    # quench
    async def quench(self, names: Iterable[str], *, keys: Keys | None = None,
                     deliver_insecure: bool = True,
                     buffer_size: int = QUENCH_BUFFER,
                     listener: Callable | None = None) -> Quench:
        """Ask to be told about subscriptions referring to ``names``
        (QnchAddRqst). Subscriptions that already exist are reported (as
        ``SubscriptionAdded`` events, present in ``q.subscriptions``) by the
        time this returns. ``listener`` is added before the request goes out,
        so it sees those events too.

        A router without quench (subset C is optional) makes this raise
        :class:`QuenchNotSupported` and sets ``supports_quench`` to False.
        A quench restored after a reconnection to such a router is ended
        (its iteration stops, ``closed`` is True); an application that falls
        back to producing everything tries ``quench()`` again from a
        reconnect listener, to recover when quench is back."""
        names = _names(names, "quench")
        if not names:
            raise ValueError("a quench needs at least one attribute name")
        keys = _keys(keys, "keys")
        session = await self._live_session()
        quench = Quench(self, names, keys, bool(deliver_insecure), buffer_size)
        if listener is not None:
            quench.add_listener(listener)
        await self._register_quench(session, quench)
        return quench

    async def _register_quench(self, session: _Session, quench: Quench) -> None:
        self._quench_requests += 1
        try:
            await self._request(session, lambda xid: QnchAddRqst(
                xid, tuple(sorted(quench.names)), quench.deliver_insecure, quench.keys),
                (QnchRply,), lambda reply: self._bind_quench(quench, reply.quench_id, True))
        finally:
            self._quench_request_done()

    async def _modify_quench(self, quench: Quench, add: tuple, remove: tuple, keys_add: Keys,
                             keys_del: Keys, deliver_insecure: bool | None) -> None:
        if quench.closed:
            raise ConnectionClosedError("the quench is closed")
        add = _names(add, "names to add")
        remove = _names(remove, "names to remove")
        keys_add, keys_del = _keys(keys_add, "keys_add"), _keys(keys_del, "keys_del")
        insecure = quench.deliver_insecure if deliver_insecure is None else bool(deliver_insecure)
        session = await self._live_session()
        old_id = quench.id

        def on_reply(reply: QnchRply) -> None:
            quench.names = (quench.names | frozenset(add)) - frozenset(remove)
            quench.keys = (quench.keys | keys_add) - keys_del
            quench.deliver_insecure = insecure
            self._bind_quench(quench, reply.quench_id)

        self._quench_requests += 1
        try:
            await self._request(session, lambda xid: QnchModRqst(
                xid, old_id, add, remove, insecure, keys_add, keys_del), (QnchRply,), on_reply)
        finally:
            self._quench_request_done()

    async def _close_quench(self, quench: Quench) -> None:
        if quench.closed:
            return
        if quench in self._quench_list:
            self._quench_list.remove(quench)
        if self.state == "open" and self._session is not None and quench.id is not None:
            qid = quench.id

            def on_reply(reply) -> None:
                if self._quenches.get(qid) is quench:
                    del self._quenches[qid]

            try:
                await self._request(self._session, lambda xid: QnchDelRqst(xid, qid),
                                    (QnchRply,), on_reply)
            finally:
                quench._end()
        else:
            if quench.id is not None and self._quenches.get(quench.id) is quench:
                del self._quenches[quench.id]
            quench._end()

    # ======================================================================
    # keys and options
    async def set_keys(self, *, add_notification: Keys | None = None,
                       del_notification: Keys | None = None,
                       add_subscription: Keys | None = None,
                       del_subscription: Keys | None = None) -> None:
        """Change the connection-level keys atomically (SecRqst). Adding a
        key already there or removing one that is not is a Nack (spec 7.4.8)."""
        add_n = _keys(add_notification, "add_notification")
        del_n = _keys(del_notification, "del_notification")
        add_s = _keys(add_subscription, "add_subscription")
        del_s = _keys(del_subscription, "del_subscription")
        session = await self._live_session()

        def on_reply(reply) -> None:
            self.notification_keys = (self.notification_keys | add_n) - del_n
            self.subscription_keys = (self.subscription_keys | add_s) - del_s

        await self._request(session, lambda xid: SecRqst(xid, add_n, del_n, add_s, del_s),
                            (SecRply,), on_reply)

    async def set_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Renegotiate connection options (QosRqst); returns and stores the
        options the router now applies."""
        options = check_notification(options)
        session = await self._live_session()

        def on_reply(reply: QosRply) -> None:
            self.options.update(reply.options)
            self._send_limits = _send_limits(self.options)
            self.requested_options.update(options)

        reply = await self._request(session, lambda xid: QosRqst(xid, dict(options)),
                                    (QosRply,), on_reply)
        return dict(reply.options)

    def __repr__(self) -> str:
        return f"<Connection {self.url} {self.state}>"


_UNLIMITED = 1 << 62


def _send_limits(options: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(attributes, name bytes, string bytes, opaque bytes) the router accepts."""
    def get(name: str) -> int:
        value = options.get(name)
        return value if type(value) is int and value > 0 else _UNLIMITED
    return (get("Attribute.Max-Count"), get("Attribute.Name.Max-Length"),
            get("Attribute.String.Max-Length"), get("Attribute.Opaque.Max-Length"))


def _fast_checked(notification: Any, limits: tuple[int, int, int, int]) -> dict | None:
    """The notification if it is a plain dict of plain values within the
    limits (the common case, checked in one pass); None means "take the slow
    path", which gives the precise error (or accepts an unusual but valid
    notification, e.g. a Mapping or a bytearray value)."""
    if type(notification) is not dict or not notification:
        return None
    max_count, max_name, max_string, max_opaque = limits
    if len(notification) > max_count:
        return None
    for name, value in notification.items():
        if type(name) is not str or not name or "\x00" in name or len(name) * 4 > max_name:
            return None
        kind = type(value)
        if kind is str:
            if "\x00" in value or len(value) * 4 > max_string:
                return None
        elif kind is int:
            if not INT64_MIN <= value <= INT64_MAX:
                return None
        elif kind is bytes:
            if len(value) > max_opaque:
                return None
        elif kind is not float and kind is not Int64:
            return None
    return notification


def _os_error_text(exc: OSError) -> str:
    if isinstance(exc, ssl_module.SSLCertVerificationError):
        return f"TLS certificate verification failed ({exc.verify_message})"
    if isinstance(exc, ssl_module.SSLError):
        return f"TLS error ({exc.reason or exc})"
    if exc.errno:
        return os.strerror(exc.errno)
    return exc.strerror or str(exc) or type(exc).__name__


def _log_failure(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.info("background request failed: %s", future.exception())


def _widens(options: Mapping[str, Any], base: Limits) -> bool:
    widened = Limits.from_options(options, base)
    return any(getattr(widened, f) > getattr(base, f) for f in
               ("max_packet_length", "max_attributes", "max_name_length",
                "max_string_length", "max_opaque_length"))


_HANDLERS: dict[type, Callable] = {
    ConnRply: Connection._on_reply,
    DisconnRply: Connection._on_reply,
    SecRply: Connection._on_reply,
    QosRply: Connection._on_reply,
    SubRply: Connection._on_reply,
    QnchRply: Connection._on_reply,
    Nack: Connection._on_reply,
    NotifyDeliver: Connection._on_notify_deliver,
    TestConn: Connection._on_test_conn,
    ConfConn: Connection._on_conf_conn,
    DropWarn: Connection._on_drop_warn,
    Disconn: Connection._on_disconn,
    SubAddNotify: Connection._on_quench_notify,
    SubModNotify: Connection._on_quench_notify,
    SubDelNotify: Connection._on_quench_notify,
}


# ==========================================================================
# connect() and unotify()

class _Connecting:
    """What :func:`connect` returns: awaitable and an async context manager."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def __await__(self):
        return self._conn.open().__await__()

    async def __aenter__(self) -> Connection:
        return await self._conn.open()

    async def __aexit__(self, *exc) -> None:
        await self._conn.close()


def connect(url: str | ElvinURI = DEFAULT_URL, *, options: Mapping[str, Any] | None = None,
            notification_keys: Keys | None = None, subscription_keys: Keys | None = None,
            auto_quench: bool = False, reconnect: bool = False,
            keepalive: float | None = None, timeout: float = 10,
            **kwargs: Any) -> _Connecting:
    """Connect to an Elvin router.

    ``await elvin.connect(url)`` gives an open :class:`Connection`;
    ``async with elvin.connect(url) as conn:`` closes it on exit. Keyword
    arguments: ``options`` (connection options to request; the router's
    answer is ``conn.options``), ``options_check(options) -> bool`` (refuse the
    router's offer: raises OptionsRejectedError), connection-level
    ``notification_keys``/``subscription_keys``, ``auto_quench``,
    ``reconnect`` (with ``reconnect_delay``, ``reconnect_max_delay``,
    ``reconnect_attempts``), ``keepalive`` (seconds idle before a TestConn;
    ``keepalive_timeout`` for the reply), ``timeout`` (connect and request
    timeout), ``ssl_context`` (for ``elvin:/ssl,none,xdr/...`` URIs),
    ``limits`` (decoder limits).
    """
    return _Connecting(Connection(url, options=options, notification_keys=notification_keys,
                                  subscription_keys=subscription_keys, auto_quench=auto_quench,
                                  reconnect=reconnect, keepalive=keepalive, timeout=timeout,
                                  **kwargs))


async def unotify(url: str | ElvinURI, notification: Mapping[str, Any], *,
                  keys: Keys | None = None, deliver_insecure: bool = True,
                  timeout: float = 10,
                  ssl_context: ssl_module.SSLContext | None = None) -> None:
    """Send one notification without a session (UNotify, protocol subset A).

    Delivery is unreliable by design: the router sends nothing back."""
    attributes = check_notification(notification)
    keys = _keys(keys, "keys")
    uri = _uri(url)
    ssl_ctx = None
    if uri.protocol[0] == "ssl":
        ssl_ctx = ssl_context or ssl_module.create_default_context()
    data = frame_packet(UNotify(*CLIENT_VERSION, attributes, bool(deliver_insecure), keys))
    async with asyncio.timeout(timeout):
        try:
            _reader, writer = await asyncio.open_connection(uri.host, uri.port, ssl=ssl_ctx)
        except OSError as exc:
            raise ConnectError(f"cannot connect to {uri}: {_os_error_text(exc)}") from None
        try:
            writer.write(data)
            await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
