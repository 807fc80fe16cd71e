"""Mobility for the ticker: move out before the laptop sleeps or the network
changes, move in when it is back, and catch up on what was said meanwhile.

It uses ``elvin.mobility``'s requests directly (not ``MobileConnection``):
the controller owns the subscriptions and the ``ConnectionManager`` owns the
connection, so this only has to hand the subscriptions to the router's
mobility proxy (``elvind --mobility``) at move-out, and feed the buffered
messages to the controller at move-in. Private groups move too: their
subscriptions go with their keys, in a move-out request that only the proxy
can receive (it is sent with the proxy's public key), and the proxy
subscribes with them, secure matches only, as the controller does. On
move-in the controller resubscribes with the keys from its own
configuration.

Triggers:

* the menu's "Move out" / "Move in";
* sleep: logind's ``PrepareForSleep`` over D-Bus when there is a system bus
  (move out before sleeping, move in on resume); and everywhere a wall-clock
  gap timer: when two ticks of a short timer are much further apart than
  they should be, the machine slept, and a client that had moved out moves
  back in;
* network change: ``QNetworkInformation`` when a backend loads: losing
  "online" moves out (if the router can still be reached, e.g. a local one),
  getting it back moves in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from elvin_apps.tickertape.controller import subscription_keys
from elvin_apps.tickertape.qtcompat import emit
from PySide6.QtCore import QObject, QTimer, Signal, Slot

from elvin.errors import ElvinError
from elvin.mobility import MobilityError, SubscriptionSpec, Ticket
from elvin.mobility.client import hello, request_move_in, request_move_out
from elvin.mobility.proxy import canonical

log = logging.getLogger("elvin_apps.tickertape")

#: Ticks of the sleep detector, and the extra wall-clock time between two
#: ticks that means the machine was asleep (a busy loop delays a tick by
#: milliseconds, a suspend by minutes).
TICK_MS = 5000
SLEEP_GAP = 30.0
#: seconds the router's mobility proxy has to answer the hello that tells
#: whether there is one
PROBE_TIMEOUT = 3.0
#: how often a buffer left at a router that could not be reached (it died,
#: the ticker failed over) is asked for again, until it comes or expires
COLLECT_MS = 10_000
#: Message-Ids shown since the standby buffer began, at most: then it is
#: begun again (a move-out that replaces it), so that it stays small
STANDBY_RENEW = 1000
#: the mobility errors after which asking again cannot help
FINAL_CODES = frozenset({"bad-secret", "unknown-client", "insecure", "malformed"})


class TickerMobility(QObject):
    """Moves the ticker's subscription out and in.

    ``state``: ``"connected"``, ``"moving-out"``, ``"moved-out"``,
    ``"moving-in"``. Signals: ``statusChanged(str)`` with a line for the
    user ("Caught up 3 messages"); ``movedOut()``; ``movedIn(int)`` with the
    number of messages caught up.
    """

    statusChanged = Signal(str)
    movedOut = Signal()
    movedIn = Signal(int)
    #: whether the router has a mobility proxy, once asked (``proxy_available``)
    proxyChecked = Signal(bool)

    def __init__(self, controller: Any, manager: Any, *, clock: Callable[[], float] = time.time,
                 tick_ms: int = TICK_MS, sleep_gap: float = SLEEP_GAP,
                 watch_system: bool = True, collect_ms: int = COLLECT_MS,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.manager = manager
        self.client_id = f"tickertape-{uuid.uuid4().hex}"
        self.state = "connected"
        self.ticket: Ticket | None = None
        self.status = ""
        self.caught_up = 0
        self.clock = clock
        self.sleep_gap = sleep_gap
        self._task: asyncio.Future | None = None
        self._recent_ids: deque[str] = deque(maxlen=2000)
        #: subscription ids (in the move-out request) of the private groups:
        #: a buffered message that matched one of them matched securely
        self._private_ids: set[int] = set()
        controller.messageReceived.connect(self._remember)
        if hasattr(controller, "subscriptionsChanged"):
            controller.subscriptionsChanged.connect(self._subscriptions_changed)
        self._last_tick = clock()
        self._timer = QTimer(self)
        self._timer.setInterval(tick_ms)
        self._timer.timeout.connect(self.tick)
        self._timer.start()
        self._network: Any = None
        #: whether the router's mobility proxy answered a hello (None: not
        #: asked yet); "Away" is offered only when it did
        self.proxy_available: bool | None = None
        self._proxy_key: bytes | None = None
        self._probe_task: asyncio.Task | None = None
        #: buffers not fetched yet (their router away), each with the
        #: Message-Ids already shown of what it holds and its private
        #: groups' subscription ids: tried again on this timer, and at once
        #: after each failover
        self.pending: list[tuple[Ticket, frozenset[str], frozenset[int]]] = []
        self._collect_timer = QTimer(self)
        self._collect_timer.setInterval(collect_ms)
        self._collect_timer.timeout.connect(self.request_collect)
        #: with several routers: a buffer the proxy here keeps while the
        #: ticker is here, collected after a failover (what this router
        #: routed that the ticker never got: ``docs/admins/mobility.md``)
        self.standby: Ticket | None = None
        self._standby_ids: set[str] = set()
        self._standby_task: asyncio.Task | None = None
        #: the subscriptions the standby buffer was made with
        self._standby_expressions: dict[str, str] = {}
        if manager is not None:
            manager.connected.connect(self._probe)
            if hasattr(manager, "routerChanged"):
                manager.routerChanged.connect(self._failed_over)
        if watch_system:
            self._watch_network()
            self._watch_logind()

    # -- what the user sees ------------------------------------------------------------
    def _set_status(self, text: str) -> None:
        self.status = text
        emit(self.statusChanged, text)

    def _remember(self, message: Any) -> None:
        message_id = getattr(message, "message_id", None)
        if message_id:
            self._recent_ids.append(message_id)
            if self.standby is not None:
                self._standby_ids.add(message_id)
                if len(self._standby_ids) > STANDBY_RENEW:
                    self._keep_standby()

    # -- is there a proxy? -------------------------------------------------------------
    def _probe(self, *_args: object) -> None:
        """Connected: ask the router's mobility proxy for its key (a public
        hello), so that "Away" is offered only on a router that has one (it
        used to fail after 5 s with "no complete hello reply")."""
        if self.state != "connected" or (self._probe_task and not self._probe_task.done()):
            return
        try:
            self._probe_task = asyncio.ensure_future(self._ask_proxy())
        except RuntimeError:             # no event loop (tests without one)
            self._probe_task = None

    async def _ask_proxy(self) -> None:
        conn = self.manager.connection if self.manager is not None else None
        if conn is None:
            return
        try:
            self._proxy_key = await hello(conn, conn.url, PROBE_TIMEOUT)
            available = True
        except (MobilityError, ElvinError, OSError, TimeoutError) as exc:
            log.info("no mobility proxy at %s: %s", conn.url, exc)
            self._proxy_key = None
            available = False
        self.proxy_available = available
        emit(self.proxyChecked, available)
        if available:
            self._keep_standby()

    # -- the standby buffer (failover) -------------------------------------------------
    def _keep_standby(self) -> None:
        """Given several routers, (re)start the standby buffer at the proxy
        of the router the ticker is on."""
        urls = getattr(self.manager, "urls", ())
        if self.state != "connected" or len(urls) < 2 or not self.proxy_available or \
                (self._standby_task is not None and not self._standby_task.done()):
            return
        try:
            self._standby_task = asyncio.ensure_future(self._start_standby())
        except RuntimeError:             # no event loop
            self._standby_task = None

    async def _start_standby(self) -> None:
        conn = self.manager.connection
        specs, private = self._specs()
        expressions = dict(self.controller.active_expressions)
        if conn is None or not specs:
            return
        old = self.standby
        # made again at the same proxy: with the same secret, so that the
        # ticket held meanwhile fetches the buffer whether or not this
        # request got there before a failover
        secret = old.secret if old is not None and \
            canonical(old.proxy) == canonical(conn.url) else None
        # shown from now on: the new buffer starts at its reply, a little later
        self._standby_ids = set()
        try:
            ticket = await request_move_out(
                conn, specs, client_id=self.client_id, timeout=5.0,
                proxy_key=self._proxy_key, secret=secret or secrets.token_hex(16),
                previous_secret=secret)
        except (MobilityError, ElvinError, OSError, TimeoutError) as exc:
            log.info("mobility: no standby buffer at %s: %s", conn.url, exc)
            return
        if self.manager.connection is not conn or conn.url != ticket.router_url \
                or self.state != "connected":
            # failed over (or moved out) meanwhile: one more buffer to fetch,
            # unless the old ticket (same secret) is already waiting for it
            if secret is None:
                self.pending.append((ticket, frozenset(self._standby_ids),
                                     frozenset(private)))
                self.request_collect()
            return
        self.standby, self._private_ids = ticket, private
        self._standby_expressions = expressions
        if expressions != self.controller.active_expressions:
            # changed while it was being made: again, once this task is done
            asyncio.get_running_loop().call_soon(self._keep_standby)

    def _subscriptions_changed(self) -> None:
        """Groups changed: the standby buffer is begun again with them."""
        if self.standby is not None and \
                self.controller.active_expressions != self._standby_expressions:
            self._keep_standby()

    def _failed_over(self, _url: str) -> None:
        """At another router: the standby buffer left behind holds what the
        old router routed after the ticker lost it; fetch it (what was
        shown from it already is skipped)."""
        standby, self.standby = self.standby, None
        if standby is not None:
            self.pending.append((standby, frozenset(self._standby_ids),
                                 frozenset(self._private_ids)))
        self.request_collect()

    # -- moving -------------------------------------------------------------------------
    def _run(self, coro) -> asyncio.Future | None:
        """Run a move in the background (one at a time); errors become status."""
        if self._task is not None and not self._task.done():
            coro.close()
            return None

        async def guarded() -> None:
            try:
                await coro
            except (MobilityError, ElvinError, OSError, TimeoutError) as exc:
                log.warning("mobility: %s", exc)
                self._set_status(f"Mobility: {exc}")
        try:
            self._task = asyncio.ensure_future(guarded())
        except RuntimeError:   # no event loop
            coro.close()
            return None
        return self._task

    def request_move_out(self) -> asyncio.Future | None:
        return self._run(self.move_out())

    def request_move_in(self) -> asyncio.Future | None:
        return self._run(self.move_in())

    async def move_out(self) -> Ticket | None:
        """Hand the public subscription to the router's mobility proxy, then
        disconnect. Returns the ticket (None if there was nothing to do)."""
        if self.state != "connected":
            return None
        conn = self.manager.connection
        if conn is None:
            self._set_status("Not moved out: not connected")
            return None
        if self._standby_task is not None and not self._standby_task.done():
            # one request at a time for our id there (_start_standby logs its
            # own failures: they are not this move-out's)
            with contextlib.suppress(Exception):  # the standby's: not this move-out's
                await self._standby_task
        specs, self._private_ids = self._specs()
        self.state = "moving-out"
        standby, self.standby = self.standby, None      # the move-out replaces it
        try:
            self.ticket = await request_move_out(
                conn, specs, client_id=self.client_id, timeout=5.0,
                proxy_key=self._proxy_key,
                previous_secret=standby.secret if standby is not None else None)
        except BaseException:  # the state is put back however; re-raised
            self.state = "connected"
            raise
        await self.manager.stop()
        self.state = "moved-out"
        self._set_status("Moved out: the router keeps your messages")
        emit(self.movedOut)
        return self.ticket

    def _specs(self) -> tuple[list[SubscriptionSpec], set[int]]:
        """The controller's active subscriptions as the proxy should make
        them: the public one (id 0), then one per private group with its keys
        and secure matches only (ids 1...)."""
        active = self.controller.active_expressions
        expression = active.get("public")
        specs = [SubscriptionSpec(0, expression)] if expression else []
        private: set[int] = set()
        for group in self.controller.groups.private():
            expression = active.get(group.folded)
            if expression and group.key:
                sid = len(private) + 1
                private.add(sid)
                specs.append(SubscriptionSpec(sid, expression, False,
                                              subscription_keys(group.key)))
        return specs, private

    async def move_in(self, url: str | None = None, timeout: float = 30.0) -> int:
        """Reconnect (to ``url`` or the same router, or, given several, the
        first that answers), restore the subscriptions, and show what was
        buffered. Returns how many messages were caught up. When the buffer's
        router cannot be reached (it died: the ticker failed over) the ticker
        carries on here and collects the buffer once that router is back
        (``pending``; a restarted ``elvind --state-dir`` still has it)."""
        if self.state != "moved-out" or self.ticket is None:
            return 0
        self.state = "moving-in"
        try:
            if url is not None and url != self.manager.url:
                await self.manager.set_url(url)
            else:
                self.manager.start()
            conn = await self.manager.wait_connected(timeout)
            # the controller resubscribes on "connected": wait for it, so that
            # anything sent from now on arrives live (the paper's step 2)
            await self.controller.wait_synced(timeout)
        except BaseException:  # as above
            self.state = "moved-out" if self.manager.connection is None else "connected"
            raise
        ticket, self.ticket = self.ticket, None
        self.state = "connected"
        return await self._collect(conn, ticket, timeout)

    def request_collect(self) -> asyncio.Future | None:
        """Ask again for the buffers not fetched yet (``pending``)."""
        if not self.pending or self.state != "connected":
            return None
        return self._run(self._collect_pending())

    async def _collect_pending(self) -> None:
        conn = self.manager.connection if self.manager is not None else None
        waiting, self.pending = self.pending, []
        for ticket, shown, private in waiting:
            if conn is None:
                self.pending.append((ticket, shown, private))
            else:
                await self._collect(conn, ticket, 30.0, shown, private)

    async def _collect(self, conn: Any, ticket: Ticket, timeout: float,
                       shown_ids: frozenset[str] = frozenset(),
                       private: frozenset[int] | None = None) -> int:
        """Fetch ``ticket``'s buffer through the proxy at ``conn``'s router
        and show it (what also came live, or was shown from it before,
        ``shown_ids``, is shown once; ``private``: the ids of its private
        groups' subscriptions, default the last move-out's). A router that
        cannot be reached leaves it ``pending``: asked again later."""
        private = frozenset(self._private_ids) if private is None else private
        try:
            entries, reply = await request_move_in(conn, ticket, timeout=timeout)
        except (MobilityError, ElvinError, OSError, TimeoutError) as exc:
            code = getattr(exc, "code", "")
            if code in FINAL_CODES:
                self._collect_timer.stop()
                self._set_status(f"The messages kept at {ticket.router_url} are lost: {exc}")
                return 0
            if ticket.expiry > 0 and time.time() > ticket.moved_out_at + ticket.expiry:
                # the proxy lets an unclaimed buffer go after its expiry: a
                # router that comes back later no longer has it
                self._collect_timer.stop()
                self._set_status(f"The messages kept at {ticket.router_url} are lost: it "
                                 f"was not back within {ticket.expiry:g} s")
                return 0
            self.pending.append((ticket, shown_ids, private))
            self._collect_timer.start()
            log.info("mobility: buffer at %s not collected yet: %s", ticket.router_url, exc)
            self._set_status(f"Messages kept at {ticket.router_url} will come when it is "
                             "back (it cannot be reached)")
            return 0
        if not self.pending:
            self._collect_timer.stop()
        shown = 0
        for attributes, ids in entries:
            message_id = attributes.get("Message-Id")
            if isinstance(message_id, str) and (message_id in self._recent_ids
                                                or message_id in shown_ids):
                continue    # it also came live (or was shown from here before)
            # a private group's subscription at the proxy took secure matches
            # only, so what it buffered came with the group's key
            secure = not private.isdisjoint(ids)
            if self.controller.handle(attributes, secure) is not None:
                shown += 1
        self.caught_up = shown
        text = f"Caught up {shown} message{'' if shown == 1 else 's'}"
        if reply.dropped:
            text += f" ({reply.dropped} lost: the router's buffer "
            text += "expired)" if reply.expired else "was full)"
        self._set_status(text)
        emit(self.movedIn, shown)
        return shown

    # -- triggers -----------------------------------------------------------------------
    def tick(self) -> None:
        """The sleep detector: a wall-clock gap far beyond the tick interval
        means the machine was suspended."""
        now = self.clock()
        gap = now - self._last_tick - self._timer.interval() / 1000.0
        self._last_tick = now
        if gap > self.sleep_gap:
            self.woke(gap)

    def woke(self, slept: float) -> None:
        log.info("mobility: woke after about %.0f s", slept)
        if self.state == "moved-out":
            self.request_move_in()
        else:
            # no move-out before the sleep (no warning came): nothing was buffered
            self._set_status(f"Woke after {slept:.0f} s; messages sent meanwhile were missed")

    def _watch_network(self) -> None:
        try:
            from PySide6.QtNetwork import QNetworkInformation
            if not QNetworkInformation.loadDefaultBackend():
                return
            info = QNetworkInformation.instance()
            if info is None or not info.supports(
                    QNetworkInformation.Feature.Reachability):
                return
        except Exception:  # noqa: BLE001 - an optional convenience
            return
        self._network = info
        self._online = info.reachability() == QNetworkInformation.Reachability.Online
        info.reachabilityChanged.connect(self._reachability)

    def _reachability(self, reachability: Any) -> None:
        from PySide6.QtNetwork import QNetworkInformation
        online = reachability == QNetworkInformation.Reachability.Online
        if online == self._online:
            return
        self._online = online
        if online:
            self.request_move_in()
        else:
            self.request_move_out()

    def _watch_logind(self) -> None:
        with contextlib.suppress(Exception):  # no QtDBus or no system bus: no suspend watch
            from PySide6.QtDBus import QDBusConnection
            bus = QDBusConnection.systemBus()
            if not bus.isConnected():
                return
            bus.connect("org.freedesktop.login1", "/org/freedesktop/login1",
                        "org.freedesktop.login1.Manager", "PrepareForSleep",
                        self, "1prepare_for_sleep(bool)")

    @Slot(bool)
    def prepare_for_sleep(self, going: bool) -> None:
        """logind's PrepareForSleep: True before suspending, False on resume."""
        if going:
            self.request_move_out()
        else:
            self.request_move_in()

    def close(self) -> None:
        self._timer.stop()
        self._collect_timer.stop()
        if self._probe_task is not None:
            self._probe_task.cancel()


__all__ = ["TickerMobility"]
