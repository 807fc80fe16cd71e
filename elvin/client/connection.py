"""The asyncio Elvin client: one ``Connection`` per router session.

``Connection`` is the application's handle; it composes modules that each
do one job:

* ``session``: the channel of one session (output, flow control), the
  asyncio shell of ``session_core.ClientSessionCore``, the session's
  protocol (sans-IO: decoding, xids, replies matched to requests, which
  packet is legal when by the ``CLIENT`` table); each event of the core is
  dispatched synchronously, in order, by ``ConnectionCore.packet_received``;
* ``requests``: the futures of the requests waiting for their reply; a reply
  updates client state before any later packet is looked at, so a delivery
  that follows a SubRply in the same read already finds its subscription;
* ``subscription`` / ``quench``: the objects and the connection's tables of
  them (NotifyDeliver goes to subscriptions by id, quench notifications to
  quenches by id);
* ``restore`` (reconnecting and registering everything again),
  ``redirects``, ``liveness`` (keepalive), ``send_checks`` (the router's
  limits), ``autoquench``.

None of them imports this module or touches the connection's private
state: the tables, auto-quench and the reconnector are handed
``ConnectionCore`` (below), which owns the connection's state (where, the
session, the lifecycle by ``CLIENT_LIFECYCLE``, the tables, the listeners,
the ``closed`` future, the router's limits), opens sessions and acts on
their events, and implements the contract of ``core.py`` (``ClientCore``,
``ReconnectingCore``); a session is handed the same object as its
``session.SessionOwner``. ``Connection`` keeps only the application's
settings and counters (public attributes the core reads and counts) and
asks the core for the rest, so nothing reaches into it. What a part needs
that the contract lacks is added there, with its documentation, and
implemented here.

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
import ssl as ssl_module
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from elvin.client import send_checks
from elvin.client._stream import call_listener
from elvin.client.args import keys_arg, names_arg
from elvin.client.autoquench import AutoQuench
from elvin.client.core import ReconnectPolicy
from elvin.client.errors import (
    ConnectError,
    ConnectionClosedError,
    OptionsRejectedError,
    QuenchNotSupported,
)
from elvin.client.events import CloseReason
from elvin.client.liveness import answer_test_conn, start_keepalive
from elvin.client.quench import DEFAULT_BUFFER as QUENCH_BUFFER
from elvin.client.quench import Quench, QuenchTable
from elvin.client.redirects import Redirected, follow_redirects
from elvin.client.restore import Reconnector
from elvin.client.send_checks import check_packet_length, checked_notification
from elvin.client.session import CLIENT_VERSION, Session, client_uri, open_session
from elvin.client.session_core import Event, Reply
from elvin.client.subscription import DEFAULT_BUFFER as SUB_BUFFER
from elvin.client.subscription import Subscription, SubscriptionTable
from elvin.errors import ElvinError
from elvin.keys import Keys
from elvin.protocol import DEFAULT_LIMITS, ElvinURI, Limits
from elvin.protocol import packets as pk
from elvin.protocol.fastpath import notify_emit_frame
from elvin.protocol.states import CLIENT_LIFECYCLE, ClientLifecycle
from elvin.quenching import Wanted
from elvin.values import check_notification

log = logging.getLogger("elvin.client")

__all__ = ["Connection", "ConnectionCore", "connect", "DEFAULT_URL"]

DEFAULT_URL = "elvin://127.0.0.1:2917"


class Connection:
    """A session with an Elvin router. Create it with :func:`connect`.

    Attributes: ``url`` (the router's URI, canonical), ``options`` (the
    connection options the router accepted, from ConnRply/QosRply),
    ``notification_keys`` / ``subscription_keys`` (connection-level keys),
    ``closed`` (a future that resolves to a :class:`CloseReason` when the
    connection is finally closed), ``state`` (``"connecting"``, ``"open"``,
    ``"reconnecting"``, ``"closing"``, ``"closed"``: the lifecycle, which
    only the ``CLIENT_LIFECYCLE`` table of ``elvin.protocol.states`` moves).

    ``supports_quench``: whether the router of the current session
    implements quench (subset C, optional; Avis lacks it), as its answer to
    a quench request said: True after a QnchRply, False after Nack NOT_IMPL
    (``quench()`` raised :class:`QuenchNotSupported`), None while no quench
    request has been answered. Each new session (reconnection, redirect)
    starts at None, since the next router may differ: restoring quenches
    decides it again, and ``auto_quench`` turns itself back on there.
    """

    def __init__(self, url: str | ElvinURI | Sequence[str | ElvinURI] = DEFAULT_URL, *,
                 options: Mapping[str, Any] | None = None,
                 notification_keys: Keys | None = None,
                 subscription_keys: Keys | None = None,
                 auto_quench: bool = False,
                 reconnect: bool | None = None,
                 keepalive: float | None = None,
                 keepalive_timeout: float | None = None,
                 timeout: float = 10,
                 options_check: Callable[[dict], bool] | None = None,
                 ssl_context: ssl_module.SSLContext | None = None,
                 reconnect_delay: float = 0.1,
                 reconnect_max_delay: float = 5.0,
                 reconnect_attempts: int | None = None,
                 limits: Limits | None = None) -> None:
        uris = router_uris(url)
        #: the connection's state (where, which session, the lifecycle, the
        #: tables, the listeners): see ConnectionCore
        self._core = ConnectionCore(self, uris, limits or DEFAULT_LIMITS, auto_quench)
        self.requested_options = dict(options or {})
        if self.requested_options:
            check_notification(self.requested_options)
        self.options: dict[str, Any] = {}
        self.notification_keys = keys_arg(notification_keys, "notification_keys")
        self.subscription_keys = keys_arg(subscription_keys, "subscription_keys")
        self.timeout = timeout
        self.keepalive = keepalive
        self.keepalive_timeout = keepalive_timeout
        self.options_check = options_check
        self.ssl_context = ssl_context
        # several routers: failing over among them is the point of naming them
        self.reconnect = len(uris) > 1 if reconnect is None else bool(reconnect)
        self.reconnect_delay = reconnect_delay
        self.reconnect_max_delay = reconnect_max_delay
        self.reconnect_attempts = reconnect_attempts
        self.drop_warnings = 0
        self.reconnects = 0
        #: reconnections that ended at another router than the lost session's
        self.failovers = 0
        self.test_conns_sent = 0
        #: ``fn(protocol)`` connects a session to its router without a
        #: socket (``elvin.router.localchannel``: a router's own proxy); None
        #: for TCP/TLS to ``url``
        self.open_channel: Callable[[Any], None] | None = None

    # ======================================================================
    # public properties
    @property
    def state(self) -> str:
        """``"connecting"``, ``"open"``, ``"reconnecting"``, ``"closing"`` or
        ``"closed"`` (``elvin.protocol.states.ClientLifecycle``)."""
        return self._core.state

    @property
    def supports_quench(self) -> bool | None:
        """See the class's docstring."""
        return self._core.supports_quench

    @property
    def _session(self) -> Session | None:
        return self._core.session

    @property
    def url(self) -> str:
        """The router's URL as text: the one given, or where a redirect or reconnection
        led.
        """
        return self._core.url

    @property
    def uri(self) -> ElvinURI:
        """The router's address parsed (:class:`elvin.router_url.ElvinURI`: host, port,
        protocol stack), as ``url``.
        """
        return self._core.uri

    @property
    def urls(self) -> list[str]:
        """The routers this connection may use, in the order given (``url``
        is the one it is at now, or was at last)."""
        return [str(uri) for uri in self._core.uris]

    @property
    def closed(self) -> asyncio.Future:
        """A future that is resolved with the :class:`CloseReason` once the connection is
        closed for good; await it to wait for the end.
        """
        return self._core.closed

    @property
    def is_open(self) -> bool:
        """True while a session with the router is up (``state == "open"``)."""
        return self.state == "open"

    @property
    def subscriptions(self) -> list[Subscription]:
        """The live subscriptions made on this connection, a new list."""
        return list(self._core.subscriptions.live)

    @property
    def quenches(self) -> list[Quench]:
        """The live quenches made on this connection, a new list."""
        return self._core.quenches.public

    @property
    def auto_quench_stats(self) -> dict[str, int] | None:
        """``{"sent": n, "dropped": m, "terms": t}`` with auto-quench, else
        None: ``t`` is how many subscription terms at the router the internal
        quench knows of now (0: every notification would be dropped)."""
        auto_quench = self._core.auto_quench
        return auto_quench.stats() if auto_quench else None

    @property
    def local_address(self) -> tuple | None:
        """The address (``(host, port)`` for IPv4) of this end of the current
        session's socket: the peer address the router's logs and status name
        this connection by. None while the connection is not open
        (reconnecting, closing, closed) or over a channel without a socket
        (``open_channel``)."""
        session = self._session
        if self.state != "open" or session is None or session.is_closing:
            return None
        transport = session.transport
        return None if transport is None else transport.get_extra_info("sockname")

    def add_close_listener(self, fn: Callable[[CloseReason], object]) -> None:
        """``fn(reason)`` when the connection is finally closed."""
        self._core.close_listeners.append(fn)

    def add_connection_lost_listener(self, fn: Callable[[CloseReason], object]) -> None:
        """``fn(reason)`` each time a session ends other than by ``close()``,
        including when an automatic reconnection follows."""
        self._core.lost_listeners.append(fn)

    def add_reconnect_listener(self, fn: Callable[[Connection], object]) -> None:
        """``fn(connection)`` after a successful automatic reconnection
        (subscriptions and quenches restored; notifications sent while the
        connection was down are lost)."""
        self._core.reconnect_listeners.append(fn)

    def add_failover_listener(self, fn: Callable[[Connection, str], object]) -> None:
        """``fn(connection, previous_url)`` when a reconnection ends at
        another router than the session that was lost (``connection.url``
        is the new one); reconnect listeners are told after."""
        self._core.failover_listeners.append(fn)

    def remove_listener(self, fn: Callable) -> None:
        """Remove ``fn`` from the close, connection-lost and reconnect listeners, wherever
        it was added; unknown functions are ignored.
        """
        core = self._core
        for listeners in (core.close_listeners, core.lost_listeners,
                          core.reconnect_listeners, core.failover_listeners):
            if fn in listeners:
                listeners.remove(fn)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ======================================================================
    # opening
    async def open(self) -> Connection:
        """Connect (ConnRqst/ConnRply); :func:`connect` calls this. With
        several routers, each is tried in turn until one accepts."""
        if self.state != "connecting" or self._core.started:
            raise RuntimeError("Connection.open() may be called only once")
        self._core.start()
        try:
            await self._open_first()
            if self._core.lifecycle is not ClientLifecycle.CONNECTING:
                raise ConnectionClosedError("connection closed while it was opening")
        except BaseException as exc:  # closed however the open failed; re-raised
            if self._core.lifecycle is ClientLifecycle.CONNECTING:
                self._core.move("failed")
            self._core.resolve_closed(CloseReason("lost", f"connection failed: {exc}",
                                                  error=exc))
            raise
        self._core.move("opened")
        self._core.wake()
        return self

    async def _open_first(self) -> None:
        failures: list[str] = []
        uris = self._core.uris
        for uri in uris:
            try:
                await follow_redirects(self._core.establish, uri)
                return
            except (OSError, ElvinError, TimeoutError) as exc:
                if len(uris) == 1:
                    raise
                failures.append(f"{uri}: {exc}")
                log.info("cannot connect to %s (%s); trying the next router", uri, exc)
        raise ConnectError("no router could be reached: " + "; ".join(failures))

    # ======================================================================
    # closing
    async def close(self, timeout: float | None = None) -> CloseReason:
        """Close cleanly: DisconnRqst, wait for DisconnRply (up to
        ``timeout``, default ``min(self.timeout, 5)``), close the channel.
        Idempotent; returns the close reason."""
        if self.state == "closed":
            return self._core.close_reason or CloseReason("closed", "never opened")
        if self.state == "closing":
            return await asyncio.shield(self.closed)
        previous = self.state
        self._core.move("close")
        self._core.reconnector.cancel()
        session = self._session
        if session is not None and not session.is_closing and previous == "open":
            try:
                await self._core.request(
                    session, pk.DisconnRqst, (pk.DisconnRply,),
                    timeout=min(self.timeout, 5) if timeout is None else timeout)
            except (ElvinError, TimeoutError, OSError) as exc:
                log.debug("no clean disconnect: %s", exc)
            except asyncio.CancelledError:
                session.abort(CloseReason("closed", "closed by the application"))
                self._core.finalize(CloseReason("closed", "closed by the application"))
                raise
        if session is not None:
            session.close_reason = session.close_reason or CloseReason("closed")
            session.close()
        reason = CloseReason("closed", "closed by the application")
        self._core.finalize(reason)
        return reason

    # ======================================================================
    # notifications, subscriptions, quenches
    async def send(self, notification: Mapping[str, Any], *, keys: Keys | None = None,
                   deliver_insecure: bool = True) -> bool:
        """Send a notification (NotifyEmit).

        Values are checked first (TypeError/ValueError naming the attribute).
        Returns True when sent, False when auto-quench dropped it because no
        subscription at the router can match it.
        """
        core = self._core
        attributes = checked_notification(notification, core.send_limits)
        keys = keys_arg(keys, "keys")
        auto_quench = core.auto_quench
        if auto_quench is not None:
            attributes = dict(attributes)   # we may wait: keep what was given now
            if not await auto_quench.allow(attributes, keys, deliver_insecure):
                return False
        session = self._session
        if self.state != "open" or session is None or session.is_closing:
            session = await core.live_session()
        session.write(_emit_frame(attributes, keys, deliver_insecure, core.send_limits))
        if session.paused:
            await session.drain()
        return True

    def frame_notification(self, notification: Mapping[str, Any], *,
                           keys: Keys | None = None,
                           deliver_insecure: bool = True) -> bytes | None:
        """The first half of ``send``, for a caller that encodes in one
        thread and writes in batches with ``write_frames`` (``elvin.sync``
        does): ``notification`` checked (against the router's limits too)
        and framed as a NotifyEmit; TypeError or ValueError as ``send``
        raises them. None when it has to go through ``send`` instead:
        auto-quench decides what is sent, or the connection is not open."""
        core = self._core
        limits = core.send_limits
        attributes = checked_notification(notification, limits)
        keys = keys_arg(keys, "keys")
        if core.auto_quench is not None or self.state != "open":
            return None
        return _emit_frame(attributes, keys, deliver_insecure, limits)

    async def write_frames(self, data: bytes) -> None:
        """Write framed packets (``frame_notification``'s, back to back) in
        the current session, waiting while the connection reconnects (up to
        its timeout) and while the transport is full."""
        session = await self._core.live_session()
        session.write(data)
        if session.paused:
            await session.drain()

    async def wanted(self, attribute: str, *, keys: Keys | None = None) -> Wanted:
        """With ``auto_quench=True``: which values of ``attribute`` some
        subscription at the router can match (``elvin.quenching.Wanted``:
        exact values, string prefixes, numeric intervals), so that a
        producer can skip producing values nobody wants. ``UNBOUNDED`` (any
        value) at a router without quench. Over-approximates: a value it
        rules out can match no subscription; ``send()`` still checks each
        notification exactly."""
        auto_quench = self._core.auto_quench
        if auto_quench is None:
            raise ValueError("Connection.wanted() needs connect(..., auto_quench=True)")
        if not isinstance(attribute, str) or not attribute:
            raise TypeError(f"an attribute name is a non-empty str, not {attribute!r}")
        return await auto_quench.wanted(attribute, keys_arg(keys, "keys"))

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
        keys = keys_arg(keys, "keys")
        session = await self._core.live_session()
        table = self._core.subscriptions
        sub = Subscription(table, expression, ast, keys, bool(accept_insecure), buffer_size)
        if listener is not None:
            sub.add_listener(listener)
        await table.register(session, sub)
        return sub

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
        names = names_arg(names, "quench")
        if not names:
            raise ValueError("a quench needs at least one attribute name")
        keys = keys_arg(keys, "keys")
        session = await self._core.live_session()
        quenches = self._core.quenches
        quench = Quench(quenches, names, keys, bool(deliver_insecure), buffer_size)
        if listener is not None:
            quench.add_listener(listener)
        await quenches.register(session, quench)
        return quench

    # ======================================================================
    # keys and options
    async def set_keys(self, *, add_notification: Keys | None = None,
                       del_notification: Keys | None = None,
                       add_subscription: Keys | None = None,
                       del_subscription: Keys | None = None) -> None:
        """Change the connection-level keys atomically (SecRqst). Adding a
        key already there or removing one that is not is a Nack (spec 7.4.8)."""
        add_n = keys_arg(add_notification, "add_notification")
        del_n = keys_arg(del_notification, "del_notification")
        add_s = keys_arg(add_subscription, "add_subscription")
        del_s = keys_arg(del_subscription, "del_subscription")
        session = await self._core.live_session()

        def on_reply(reply) -> None:
            self.notification_keys = (self.notification_keys | add_n) - del_n
            self.subscription_keys = (self.subscription_keys | add_s) - del_s

        await self._core.request(session, lambda xid: pk.SecRqst(xid, add_n, del_n, add_s, del_s),
                            (pk.SecRply,), on_reply)

    async def set_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Renegotiate connection options (QosRqst); returns and stores the
        options the router now applies."""
        options = check_notification(options)
        session = await self._core.live_session()

        def on_reply(reply: pk.QosRply) -> None:
            self.options.update(reply.options)
            self._core.send_limits = send_checks.send_limits(self.options)
            self.requested_options.update(options)

        reply = await self._core.request(session, lambda xid: pk.QosRqst(xid, dict(options)),
                                    (pk.QosRply,), on_reply)
        return dict(reply.options)

    def __repr__(self) -> str:
        return f"<Connection {self.url} {self.state}>"


class ConnectionCore:
    """A ``Connection``'s state, and the connection as its parts see it.

    It owns what the connection's lifecycle is made of: where the connection
    is (``uri``, ``home_uri``, ``uris``), its current session, its lifecycle
    state (moved only through the ``CLIENT_LIFECYCLE`` table of
    ``elvin.protocol.states``) and ``supports_quench``; the tables of
    subscriptions and quenches, auto-quench and the reconnector; the
    listeners and the ``closed`` future; the router's limits on what is
    sent. The ``Connection`` shows them, read-only, to the application, and
    holds only the application's settings and counters, which this reads
    and counts. It is the one object that implements
    ``core.ReconnectingCore`` (for the reconnector, the tables and
    auto-quench) and ``session.SessionOwner`` (for its sessions): it opens
    sessions (``establish``), acts on what they receive (``packet_received``)
    and on their end (``session_lost``, ``finalize``). What a part may
    change, it changes through a method here, never by assignment
    (``supports_quench`` aside, which the quench table learns)."""

    __slots__ = ("_conn", "_lifecycle", "_session", "_uri", "_home_uri", "_uris", "_lost_at",
                 "_ready", "_closed", "supports_quench", "base_limits", "send_limits",
                 "subscriptions", "quenches", "auto_quench", "reconnector", "close_listeners",
                 "lost_listeners", "reconnect_listeners", "failover_listeners")

    def __init__(self, conn: Connection, uris: tuple[ElvinURI, ...], limits: Limits,
                 auto_quench: bool) -> None:
        self._conn = conn
        self._lifecycle: ClientLifecycle = ClientLifecycle.CONNECTING
        self._session: Session | None = None
        self._uris = uris
        self._uri = self._home_uri = uris[0]
        #: where the session that was lost last was (for telling a failover)
        self._lost_at = self._uri
        #: set while the connection has a usable session (or is closed), for
        #: ``live_session``'s waiters; None until ``start`` (Connection.open)
        self._ready: asyncio.Event | None = None
        #: resolved with the CloseReason at the end; made at ``start`` or when first asked
        self._closed: asyncio.Future | None = None
        self.supports_quench: bool | None = None
        #: the decoder's limits of every session (``connect(limits=...)``)
        self.base_limits = limits
        #: what the router of the current session accepts (``send_checks``)
        self.send_limits = send_checks.NO_LIMITS
        self.subscriptions = SubscriptionTable(self, conn)
        self.quenches = QuenchTable(self, conn)
        self.auto_quench = AutoQuench(self, self.quenches) if auto_quench else None
        self.reconnector = Reconnector(self, (self.subscriptions, self.quenches))
        #: the application's listeners (``Connection.add_*_listener``)
        self.close_listeners: list[Callable] = []
        self.lost_listeners: list[Callable] = []
        self.reconnect_listeners: list[Callable] = []
        self.failover_listeners: list[Callable] = []

    @property
    def started(self) -> bool:
        """``start`` was called (``Connection.open`` may be called once)."""
        return self._ready is not None

    def start(self) -> None:
        """The connection is opening: from now on callers may wait for a session."""
        self._ready = asyncio.Event()
        self._closed = asyncio.get_running_loop().create_future()

    def wake(self) -> None:
        """A session is usable, or the connection closed: waiters look again."""
        if self._ready is not None:
            self._ready.set()

    # -- the end -----------------------------------------------------------------------
    @property
    def closed(self) -> asyncio.Future:
        """``Connection.closed``: made here when asked before ``start``."""
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
        return self._closed

    @property
    def close_reason(self) -> CloseReason | None:
        """Why the connection closed, once ``closed`` is resolved; else None."""
        closed = self._closed
        return closed.result() if closed is not None and closed.done() else None

    def resolve_closed(self, reason: CloseReason) -> None:
        """``closed`` resolves with ``reason``, unless it already has one."""
        if self._closed is None:
            with contextlib.suppress(RuntimeError):  # no loop running: nobody can await it
                self._closed = asyncio.get_running_loop().create_future()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(reason)

    # -- the lifecycle -----------------------------------------------------------------
    @property
    def lifecycle(self) -> ClientLifecycle:
        return self._lifecycle

    def move(self, event: str) -> None:
        """The lifecycle after the connection's own ``event`` (the table's
        names: opened, failed, lost, reconnected, close, finalized);
        ``IllegalEvent`` if the table has no such move, a bug here."""
        self._lifecycle = CLIENT_LIFECYCLE.event(  # type: ignore[assignment]  # its states
            self._lifecycle, event)

    def adopt(self, session: Session, uri: ElvinURI) -> None:
        """``session``, just established at ``uri``, is the current one."""
        self._uri = uri
        self._session = session
        self.supports_quench = None   # a new router: its first quench answer says

    def drop(self, session: Session) -> bool:
        """``session`` is gone: no longer the current one. False if it was not."""
        if session is not self._session:
            return False
        self._session = None
        return True

    # -- ClientCore ---------------------------------------------------------------------
    @property
    def url(self) -> str:
        return str(self._uri)

    @property
    def state(self) -> str:
        return self._lifecycle.value

    @property
    def session(self) -> Session | None:
        return self._session

    @property
    def notification_keys(self) -> Keys:
        return self._conn.notification_keys

    async def live_session(self) -> Session:
        """The current session; waits while reconnecting (up to the connection's timeout)."""
        session = self._session
        state = self._lifecycle
        if state is ClientLifecycle.OPEN and session is not None and not session.is_closing:
            return session
        conn = self._conn
        if state in (ClientLifecycle.CLOSING, ClientLifecycle.CLOSED):
            closed = self.closed
            reason = closed.result() if closed.done() else None
            raise ConnectionClosedError(
                "connection is closed" + (f" ({reason})" if reason else ""), reason)
        ready = self._ready
        if ready is None:
            raise ConnectionClosedError("the connection is not open yet (await connect())")
        try:
            async with asyncio.timeout(conn.timeout):
                while True:
                    await ready.wait()
                    session = self._session
                    state = self._lifecycle
                    if (state is ClientLifecycle.OPEN and session is not None
                            and not session.is_closing):
                        return session
                    if state in (ClientLifecycle.CLOSING, ClientLifecycle.CLOSED):
                        raise ConnectionClosedError("connection is closed")
                    await asyncio.sleep(0.01)
        except TimeoutError:
            raise ConnectionClosedError(
                f"not connected (reconnecting to {self.url} for more than "
                f"{conn.timeout} s)") from None

    def request(self, session: Session, make: Callable[[int], Any], expect: tuple,
                on_reply: Callable[[Any], object] | None = None,
                on_late: Callable[[Any], object] | None = None, *,
                expression: str | None = None, timeout: float | None = None) -> Awaitable[Any]:
        """``make(xid)`` sent in ``session``, its reply awaited (``RequestTable.request``),
        within ``timeout`` (default: the connection's)."""
        return session.requests.request(
            make, expect, self._conn.timeout if timeout is None else timeout, on_reply,
            on_late, expression)

    # -- ReconnectingCore --------------------------------------------------------------
    @property
    def uri(self) -> ElvinURI:
        return self._uri

    @property
    def home_uri(self) -> ElvinURI:
        return self._home_uri

    @property
    def uris(self) -> tuple[ElvinURI, ...]:
        return self._uris

    @property
    def reconnect_policy(self) -> ReconnectPolicy:
        conn = self._conn
        return ReconnectPolicy(conn.reconnect, conn.reconnect_delay, conn.reconnect_max_delay,
                               conn.reconnect_attempts)

    async def establish(self, uri: ElvinURI) -> Session:
        """A new session at ``uri``: channel, ConnRqst, the options agreed
        (with the connection's settings); it becomes the current one."""
        conn = self._conn
        session = await open_session(self, uri, self.base_limits, conn.timeout,
                                     conn.ssl_context, conn.open_channel)
        try:
            reply = await self.request(
                session, lambda xid: pk.ConnRqst(xid, *CLIENT_VERSION,
                                                 dict(conn.requested_options),
                                                 conn.notification_keys,
                                                 conn.subscription_keys),
                (pk.ConnRply,))
        except ConnectionClosedError as exc:
            session.abort(CloseReason("lost", "connection refused"))
            Redirected.check(exc)
            raise
        except BaseException:  # the session is aborted however; re-raised
            session.abort(CloseReason("lost", "connection attempt failed"))
            raise
        options = dict(reply.options)
        if conn.options_check is not None and not conn.options_check(options):
            with contextlib.suppress(Exception):  # refusing anyway: a failed goodbye changes nothing
                await self.request(session, pk.DisconnRqst, (pk.DisconnRply,),
                                   timeout=min(conn.timeout, 2))
            session.abort(CloseReason("closed", "connection options rejected"))
            raise OptionsRejectedError(options)
        conn.options = options
        self.send_limits = send_checks.send_limits(options)
        session.accept_options(options)
        self.adopt(session, uri)
        if conn.keepalive:
            start_keepalive(session, conn.keepalive, conn.keepalive_timeout or
                            min(max(conn.keepalive, 1.0), conn.timeout), self.url,
                            self._probe_sent)
        return session

    def _probe_sent(self) -> None:
        self._conn.test_conns_sent += 1

    def abandon(self, session: Session, reason: CloseReason) -> None:
        session.abort(reason)
        self.drop(session)

    def reconnecting(self) -> None:
        self.move("lost")
        self._lost_at = self._uri
        if self._ready is not None:   # None only before open(), which cannot lose a session
            self._ready.clear()

    def reconnected(self) -> None:
        self.move("reconnected")
        conn = self._conn
        conn.reconnects += 1
        self.wake()
        previous = self._lost_at
        if self._uri != previous:
            conn.failovers += 1
            log.info("failed over from %s to %s: subscriptions, keys and quenches restored",
                     previous, self._uri)
            for fn in self.failover_listeners:
                call_listener(fn, conn, str(previous))
        for fn in self.reconnect_listeners:
            call_listener(fn, conn)

    def finalize(self, reason: CloseReason) -> None:
        if self._lifecycle is ClientLifecycle.CLOSED:
            return
        self.move("finalized")
        self.wake()   # waiters see "closed"
        self.subscriptions.end_all()
        self.quenches.end_all()
        self.resolve_closed(reason)
        for fn in self.close_listeners:
            call_listener(fn, reason)

    # -- SessionOwner ------------------------------------------------------------------
    @property
    def deliver(self) -> Callable[[pk.NotifyDeliver], None]:
        return self.subscriptions.deliver

    def packet_received(self, session: Session, event: Event) -> None:
        try:
            handler = _HANDLERS.get(type(event))
            if handler is None:
                log.warning("unexpected %s from the router; ignored", type(event).__name__)
                return
            handler(self, session, event)
        except Exception:  # one packet's failure must not end the connection; logged
            log.exception("error handling %s", type(event).__name__)

    def session_lost(self, session: Session) -> None:
        if not self.drop(session):
            return
        reason = session.close_reason or CloseReason("lost")
        if self._lifecycle is not ClientLifecycle.OPEN:
            return  # closing, closed, or a reconnection in progress handles it
        for fn in self.lost_listeners:
            call_listener(fn, reason)
        self.reconnector.after_loss(reason)

    def _on_reply(self, session: Session, reply: Reply) -> None:
        exc = session.requests.resolve(reply.packet)
        if isinstance(exc, QuenchNotSupported) and session is self._session:
            self.supports_quench = False

    def _on_drop_warn(self, _session: Session, _packet: pk.DropWarn) -> None:
        self._conn.drop_warnings += 1
        log.warning("the router dropped packets for this connection (DropWarn)")


def router_uris(url: str | ElvinURI | Sequence[str | ElvinURI]) -> tuple[ElvinURI, ...]:
    """One router URL or several (a list or tuple), parsed, duplicates
    dropped; ValueError naming a bad one, or saying the list is empty."""
    if isinstance(url, (str, ElvinURI)):
        return (client_uri(url),)
    if not isinstance(url, Sequence):
        raise TypeError(f"a router URL is a str or a list of them, not {type(url).__name__}")
    uris: list[ElvinURI] = []
    for i, one in enumerate(url):
        if not isinstance(one, (str, ElvinURI)):
            raise TypeError(f"router URL #{i + 1} is a {type(one).__name__}, not a str")
        try:
            uri = client_uri(one)
        except ValueError as exc:
            raise ValueError(f"router URL #{i + 1} ({one!r}): {exc}") from None
        if uri not in uris:
            uris.append(uri)
    if not uris:
        raise ValueError("connect() needs at least one router URL")
    return tuple(uris)


def _emit_frame(attributes: dict, keys: Keys, deliver_insecure: bool, limits: Limits) -> bytes:
    """The NotifyEmit of checked ``attributes``, framed; ValueError if it
    is longer than the router accepts."""
    data = notify_emit_frame(attributes, deliver_insecure, keys)
    check_packet_length(data, limits)
    return data


#: what each event of a session's core means: ``handler(core, session, event)``.
#: Which packet is legal when is not decided here but by the ``CLIENT`` table
#: (``elvin.protocol.states``), which the core consults before an event reaches this.
_HANDLERS: dict[type, Callable[[ConnectionCore, Session, Any], None]] = {
    Reply: ConnectionCore._on_reply,   # a reply or Nack, matched to its request by the core
    pk.NotifyDeliver: lambda core, _session, packet: core.subscriptions.deliver(packet),
    **dict.fromkeys((pk.SubAddNotify, pk.SubModNotify, pk.SubDelNotify),
                    lambda core, _session, packet: core.quenches.notify(packet)),
    pk.TestConn: lambda _conn, session, _packet: answer_test_conn(session),
    pk.ConfConn: lambda *_: None,   # data_received already noted the traffic
    pk.DropWarn: ConnectionCore._on_drop_warn,
    pk.Disconn: lambda _conn, session, packet: session.on_disconn(packet),
}


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


def connect(url: str | ElvinURI | Sequence[str | ElvinURI] = DEFAULT_URL, *,
            options: Mapping[str, Any] | None = None,
            notification_keys: Keys | None = None, subscription_keys: Keys | None = None,
            auto_quench: bool = False, reconnect: bool | None = None,
            keepalive: float | None = None, timeout: float = 10,
            **kwargs: Any) -> _Connecting:
    """Connect to an Elvin router.

    ``await elvin.connect(url)`` gives an open :class:`Connection`;
    ``async with elvin.connect(url) as conn:`` closes it on exit. ``url``
    may be a list of routers: the first that accepts is used, and when its
    session is lost the connection fails over to the others (the next in
    the list first, the lost one last, rounds apart by a growing delay with
    jitter), restoring its keys, subscriptions and quenches there;
    ``conn.url`` says where it is and ``add_failover_listener`` tells of
    each move. Notifications routed while it moves are not replayed. Keyword
    arguments: ``options`` (connection options to request; the router's
    answer is ``conn.options``), ``options_check(options) -> bool`` (refuse the
    router's offer: raises OptionsRejectedError), connection-level
    ``notification_keys``/``subscription_keys``, ``auto_quench``,
    ``reconnect`` (with ``reconnect_delay``, ``reconnect_max_delay``,
    ``reconnect_attempts``; on by default when ``url`` is a list), ``keepalive`` (seconds idle before a TestConn;
    ``keepalive_timeout`` for the reply), ``timeout`` (connect and request
    timeout), ``ssl_context`` (for ``elvin:/ssl,none,xdr/...`` URIs),
    ``limits`` (decoder limits).
    """
    return _Connecting(Connection(url, options=options, notification_keys=notification_keys,
                                  subscription_keys=subscription_keys, auto_quench=auto_quench,
                                  reconnect=reconnect, keepalive=keepalive, timeout=timeout,
                                  **kwargs))
