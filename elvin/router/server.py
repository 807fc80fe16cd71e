"""The router's core: its sessions, the delivery of notifications between
them, and its lifecycle. Everything beside (federation, mobility, the
archive, discovery, statistics, the state directory, elvind's status and
metrics) is a service registered with it (``elvin.router.services``); its
listeners are ``elvin.router.listeners``, and what a reload applies to the
core itself is ``elvin.router.core_settings``.

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
import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Generator, Hashable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from elvin.errors import RouterStartError
from elvin.keys import Keys
from elvin.protocol import (
    DisconnReason,
    encode_attributes,
    frame_notify_deliver,
)
from elvin.protocol.xdr import notify_deliver_head, one_insecure_id
from elvin.ratelog import RateLimitedLog
from elvin.router.announcer import QuenchAnnouncer
from elvin.router.archive_service import ArchiveService, Recorder
from elvin.router.census import CENSUS_ATTRIBUTE, AttributeCensus
from elvin.router.clientstats import PublishLimit, top_clients
from elvin.router.compiling import CompileWorkers
from elvin.router.config import RELOADABLE, RouterConfig
from elvin.router.connlog import ConnectionLog
from elvin.router.core_settings import LOG_SETTINGS, ConnectionDefaults, LiveSettings
from elvin.router.discovery_service import DiscoveryService
from elvin.router.door import Door, raise_nofile_limit
from elvin.router.engine import Engine, Subscription
from elvin.router.federation_service import FederationAdapter
from elvin.router.listeners import Listeners
from elvin.router.metrics_service import MetricsService
from elvin.router.mobility_service import MobilityService
from elvin.router.ordered import OrderedSteps
from elvin.router.overruns import OverrunLog
from elvin.router.quench import QuenchManager
from elvin.router.reaper import Reaper
from elvin.router.recent import RecentValues
from elvin.router.scheduler import Scheduler
from elvin.router.security import NotificationKeys
from elvin.router.sendqueue import FlushBatch
from elvin.router.services import ServiceRegistry, StartPoint, StopPoint
from elvin.router.session import CLOSING, CONNECTED, Session
from elvin.router.statedir_service import StateDirService
from elvin.router.statistics_service import StatisticsService
from elvin.router.stats import STATS_ATTRIBUTE, Stats
from elvin.router.status_service import DaemonReport, StatusService
from elvin.router.steps import StepRunner
from elvin.subscription.shapes import ShapeCompiler

if TYPE_CHECKING:
    from elvin.daemon.statedir import StateDir
    from elvin.discovery import DiscoveryResponder
    from elvin.federation.service import FederationService
    from elvin.mobility.proxy import MobilityProxy
    from elvin.pipeline.archive_process import ArchiveProcess
    from elvin.protocol.limits import Limits
    from elvin.router.options import SessionOptions
    from elvin.router.quench import Quench
    from elvin.subscription.shapes import Registered

log = logging.getLogger("elvin.router")

_T = TypeVar("_T")

__all__ = ["Router", "RouterStartError"]

#: numbers the routers this process starts (see Router.router_id)
_ROUTER_SEQUENCE = itertools.count(1)


class Router:
    #: what a new connection's options and limits start from (SessionHost),
    #: kept by ``core_settings.ConnectionDefaults``
    initial_options: SessionOptions
    initial_limits: Limits

    def __init__(self, config: RouterConfig | None = None,
                 daemon: DaemonReport | None = None) -> None:
        """``daemon``: what elvind tells in its status (``elvin.router.cli``);
        with it the router keeps a status file and serves ``config.metrics``
        (``status_service``, ``metrics_service``), without it neither."""
        self.config = config if config is not None else RouterConfig()
        self.loop: asyncio.AbstractEventLoop | None = None
        #: the clock of the sessions' deadlines (SessionHost.clock): the
        #: scheduler's, the engine's match steps' and the quench manager's too
        self.clock = time.perf_counter
        self.engine = Engine(clock=self.clock)
        self.quench = QuenchManager(self.engine, self._send_quench_packet, self.clock)
        self.quench.write_now = self._write_quench_packets
        self.stats = Stats()
        self.sessions: set[Session] = set()
        #: the publish limit's buckets, per client address (elvin.router.clientstats)
        self.publish_limit = PublishLimit()
        #: sets initial_options and initial_limits, and again on a reload
        self._connection_defaults = ConnectionDefaults(self)
        # host:pid:start time, and a sequence number: two routers started in one
        # process within one second (embedded routers, a quick restart) would
        # otherwise share an id, and federation takes a router's id as its
        # default domain (a repeat would look like a routing loop)
        self.router_id = (f"{socket.gethostname()}:{os.getpid()}:{int(time.time())}"
                          f":{next(_ROUTER_SEQUENCE)}")
        #: the client listeners (elvin.router.listeners); the door while running
        # once started, the Router is the ChannelHost (its typing: issue 46, point 2):
        # its release/session_connected/owner_sub_keys_changed take the Session, the
        # port's take any Hashable owner (the core does not know its owner's type)
        self.listeners = Listeners(
            self.config, lambda listener: Session(self, listener),  # type: ignore[arg-type]  # see above
            lambda: self.door)
        self._stopped: asyncio.Event | None = None
        self._stopping = False
        self._started = False           # start() completed (a stop then says so)
        #: text -> Registered (ast, matches) or SubscriptionError; parses, checks
        #: and compiles once per expression shape (elvin.subscription.shapes)
        self.compile = ShapeCompiler().compile
        #: the threads that compile long expressions and run what is given
        #: off the loop (``counts``: what they did; ``busy``)
        self.compile_workers = CompileWorkers()
        #: the statistics notification's timer (elvin.router.statistics_service)
        self._statistics = StatisticsService(self.config, self)
        self.engine.watch(STATS_ATTRIBUTE, self._statistics.watch)
        #: the attribute names seen, for browsers (elvin.router.census): counts
        #: only while someone subscribes to Elvin-Router-Attributes
        self.census = AttributeCensus(lambda attrs: self.deliver(attrs, None, True, None),
                                      lambda: self.router_id,
                                      lambda: self.config.stats_interval)
        #: the last notification of each shape, replayed to a browser that
        #: asks (elvin.router.recent); kept only with the census
        self.recent = RecentValues(self.engine.match) if self.config.attribute_names else None
        if self.recent is not None:
            self.engine.watch(CENSUS_ATTRIBUTE, self.recent.census_watch(self.census))
        #: the traffic archive (elvin.router.archive_service); while it writes,
        #: its ``record``, else None (``deliver`` tests only this attribute, so
        #: the archive costs nothing when off)
        self._archiving: Recorder | None = None
        self._archive = ArchiveService(self.config, self._set_archiving)
        #: admission and partial-frame accounting (elvin.router.door), while running
        self.door: Door | None = None
        #: what clients can make the sessions say, rate-limited (elvin.ratelog)
        self.session_notes = RateLimitedLog(logging.getLogger("elvin.router.session"))
        #: owner -> [when its last overrun line was logged, overruns not logged since]
        # once started, the Router is the ChannelHost (as for the listeners' sessions)
        self._mobility = MobilityService(self, self.config,  # type: ignore[arg-type]  # see above
                                         lambda: self.urls, lambda: self.state_dir,
                                         self._interest_pending, self._interest_unreachable)
        #: the parts beside the core (elvin.router.services), started and
        #: stopped at their points of ``start`` and ``stop``
        self.services = ServiceRegistry()
        # first of all: one router per state directory, kept until the last
        # part that writes in it (the mobility proxy) has stopped
        self._state = StateDirService(self.config)
        self.services.register(self._state)
        self._discovery = DiscoveryService(self.config, lambda: self.urls)
        self._federation = FederationAdapter(self, self.config)
        #: elvind's metrics endpoint and status file (one picture), or None
        self.metrics_service: MetricsService | None = None
        self.status_service: StatusService | None = None
        if daemon is not None:
            metrics = MetricsService(self.config, lambda: status.snapshot())
            status = StatusService(self, daemon, lambda: metrics.url)
            self.metrics_service, self.status_service = metrics, status
            # first: an address it cannot have stops the start before anything
            self.services.register(metrics)
        self.services.register(self._archive)
        self.services.register(self._mobility)
        self.services.register(self._federation)
        self.services.register(self._discovery)
        self.services.register(self._statistics)   # last of its point: the first to stop
        if self.status_service is not None:
            # last: its first picture shows every part started
            self.services.register(self.status_service)
        # what a reload applies to the core: the options, and the rest, which
        # the core reads from its configuration as it goes (the log is elvind's)
        self.services.register_part(self._connection_defaults)
        self.services.register_part(
            LiveSettings(self.config, RELOADABLE - LOG_SETTINGS - self.services.claimed()))
        #: counts and logs a pattern's overrun (elvin.router.overruns)
        self.engine.overrun_listener = OverrunLog(lambda: self.stats).overran

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> Router:
        self.loop = asyncio.get_running_loop()
        self.flush_batch = FlushBatch(self.loop)
        self.scheduler = Scheduler(self.loop, self.flush_batch.run)
        self._reaper = Reaper(self.loop, self._forget)
        self.announcer = QuenchAnnouncer(self.loop, self.quench)
        self.steps = StepRunner(self.loop)
        self.engine.on_deferred = self.steps.background
        self.ordered = OrderedSteps(self.steps.background)
        self.connection_log = ConnectionLog(self.loop)
        self._stopped = asyncio.Event()
        self._stopping = False
        self.stats = Stats()
        soft, hard = raise_nofile_limit()
        log.debug("open-files limit %d (hard %d), %d kept in reserve", soft, hard,
                  self.config.descriptor_reserve)
        self.door = Door(self.config, self.stats, self.loop, soft)
        # lark builds its parser on the first parse (~50-100 ms): do it now,
        # before any client can be kept waiting by it
        self.compile("require(Elvin-Router-Warm-Up)")
        try:
            await self.services.start(StartPoint.BEFORE_LISTENING)  # nothing unarchived
            # bound but not accepting until the mobility proxy has its
            # subscriptions back: nothing published after a restart is missed
            for uri in self.config.listen:
                await self.listeners.bind(uri)
            for url in self.urls:   # elvind says it once, on stderr (elvin.router.cli)
                log.debug("listening on %s", url)
            if not self.config.quench:
                log.info("quench (subset C) off: quench requests get Nack NOT_IMPL")
            await self.services.start(StartPoint.BOUND)
            await self.listeners.serve()
            await self.services.start(StartPoint.SERVING)
            self._started = True
        except BaseException:  # stopped the one way (below); re-raised
            # whatever started is stopped the one way a router stops (each
            # step of ``stop`` does nothing for a part that never started)
            await self.stop()
            raise
        return self

    @property
    def ports(self) -> list[int]:
        """The bound ports (``Listeners.ports``)."""
        return self.listeners.ports

    @property
    def urls(self) -> list[str]:
        """The bound listeners' URLs (``Listeners.urls``)."""
        return self.listeners.urls

    async def serve_forever(self) -> None:
        if self._stopped is None:
            await self.start()
        await self._stopped.wait()  # type: ignore[union-attr]  # running: set by start

    async def stop(self) -> None:
        """Disconn (reason 1) to every client, close the listeners, wait (up to
        ``close_timeout``) for the channels to close."""
        if self._stopping:
            if self._stopped is not None:
                await self._stopped.wait()
            return
        self._stopping = True
        # withdraw the advertisement first
        await self.services.stop(StopPoint.BEFORE_CLOSING_LISTENERS)  # statistics too
        self.census.stop()
        if self.recent is not None:
            self.recent.stop()
        await self.listeners.close()        # and the TLS handshakes under way
        # Disconn to every federated router
        await self.services.stop(StopPoint.BEFORE_CLOSING_SESSIONS)
        for session in list(self.sessions):
            try:
                if session.state == CONNECTED:
                    session.disconnect(DisconnReason.SHUTDOWN, "router shutting down")
                elif session.state != CLOSING:      # closing ones finish on their own
                    session.abort()
            except Exception:  # stopping anyway; logged
                log.exception("closing %r failed", session)
        deadline = time.monotonic() + self.config.close_timeout
        while self.sessions and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for session in list(self.sessions):
            session.abort()
        await asyncio.sleep(0)
        # last: it buffers for moved-out clients until nobody can publish
        # (its own session closed with the others), then writes its state
        await self.services.stop(StopPoint.AFTER_LAST_SESSION)  # the archive among them
        self._reaper.finish()
        self.steps.finish()
        self.compile_workers.close()
        self.connection_log.close()
        if self.door is not None:
            self.door.close()
        self.session_notes.close()
        # what reports on the router, once it has stopped (the status file goes)
        await self.services.stop(StopPoint.STOPPED)
        if self._stopped is not None:
            self._stopped.set()
        if self._started:               # (a failed start says why, in one line, instead)
            log.info("router stopped")

    # -- federation ----------------------------------------------------------------------
    @property
    def federation(self) -> FederationService | None:
        """The federation (elvin.router.federation_service) while
        ``config.federation`` is set and enabled, else None."""
        return self._federation.running

    # -- state directory -----------------------------------------------------------------
    @property
    def state_dir(self) -> StateDir | None:
        """The locked state directory (elvin.router.statedir_service) while
        running with ``state_dir``, else None."""
        return self._state.directory

    # -- mobility ------------------------------------------------------------------------
    @property
    def archive(self) -> ArchiveProcess | None:
        """The traffic archive's writer process while the archive is on
        (``archive``), else None."""
        return self._archive.writer

    def _set_archiving(self, record: Recorder | None) -> None:
        self._archiving = record

    def _interest_pending(self) -> list[str]:
        """The federation peers that may not know yet what this router's
        subscribers want now (none without federation): what the mobility
        proxy's replies wait for."""
        federation = self._federation.running
        return federation.interest_pending() if federation is not None else []

    def _interest_unreachable(self, down_for: float) -> list[str]:
        """Of those, the peers this router dials that have been down for
        ``down_for`` seconds at least: a reply waiting for them waits for
        nothing (``FederationService.interest_unreachable``)."""
        federation = self._federation.running
        return federation.interest_unreachable(down_for) if federation is not None else []

    @property
    def mobility(self) -> MobilityProxy | None:
        """The mobility proxy (elvin.router.mobility_service) while running
        with ``mobility`` on, else None."""
        return self._mobility.proxy

    # -- discovery and redirection -------------------------------------------------------
    @property
    def discovery(self) -> DiscoveryResponder | None:
        """The discovery responder (elvin.router.discovery_service) while
        answering, else None."""
        return self._discovery.responder

    def redirect(self, url: str, sessions: Iterable[Session] | None = None) -> int:
        """Hand clients over to the router at ``url``: each connected session
        (all, or those in ``sessions``) gets Disconn reason 2 with ``url`` and
        is closed; clients that follow redirects restore their session there.
        Returns the number of sessions redirected. Call on the router's loop."""
        from elvin.protocol import parse_uri

        parse_uri(url)   # URIError (a ValueError) for a URL clients could not use
        targets = list(self.sessions) if sessions is None else list(sessions)
        count = 0
        for session in targets:
            if session.state == CONNECTED:
                session.disconnect(DisconnReason.REDIRECT, url)
                count += 1
        if count:
            log.info("redirected %d client(s) to %s", count, url)
        return count

    def refuse_connection(self) -> str | None | bool:
        """Called for each ConnRqst: ``False`` to accept it, else where the
        client is sent (``redirect-to``) or ``None`` to refuse it outright,
        when ``max-connections`` sessions are already connected."""
        limit = self.config.max_connections
        if not limit or self.connection_count < limit:
            return False
        return self.config.redirect_to

    def compile_long(self, text: str) -> asyncio.Future[Registered]:
        """Compile a long expression on a worker thread (``elvin.router.compiling``);
        the future gives a ``Registered`` or raises ``SubscriptionError``."""
        return self.compile_workers.submit(self.loop, text)  # type: ignore[arg-type]  # running: loop set

    def run_off_loop(self, size: int, job: Callable[[], _T]) -> asyncio.Future[_T]:
        """``job()`` on the compile worker for an expression of ``size``
        characters (a federated peer's pull filter: ``FederationHost``)."""
        return self.compile_workers.run(self.loop, size, job)  # type: ignore[arg-type]  # running: loop set

    def link_later(self, steps: Generator[object, None, _T]) -> asyncio.Future[_T]:
        """Run the generator ``steps`` in later loop turns (``elvin.router.steps``)."""
        return self.steps.run(steps)

    def announce_later(self, quench: Quench) -> asyncio.Future[None]:
        """Tell ``quench`` what is pending in later loop turns (``announcer``)."""
        return self.announcer.later(quench)

    # -- sessions ------------------------------------------------------------------------
    def session_opened(self, session: Session) -> None:
        self.sessions.add(session)
        if self._stopping:
            session.abort()

    def session_connected(self, session: Session) -> None:
        self.stats.connections_total += 1
        self.connection_log.connected(session)

    def session_closed(self, session: Session) -> None:
        self.sessions.discard(session)
        self.connection_log.disconnected(session)

    def release(self, session: Session) -> None:
        """Forget a session's quenches, and its subscriptions (SubDelNotify to
        quenchers) a few milliseconds per loop turn (``elvin.router.reaper``)."""
        self.quench.remove_owner(session)
        if self.recent is not None:
            self.recent.forget(session)
        subs = self.engine.owned(session)
        if subs:
            self._reaper.add(list(subs.values()))

    def _forget(self, sub: Subscription) -> None:
        quench = self.quench
        before = quench.view(sub)
        self.engine.remove(sub)
        quench.subscription_removed(sub, before)

    def owner_sub_keys_changed(self, session: Session, keys: Keys) -> None:
        """A SecRqst changed the session's subscription keys: one store in the
        engine (``Engine.set_owner_keys``), whatever the session holds. Only
        its subscriptions that a quench can see (they refer to a quenched
        name) have their quench views compared, found through whichever is
        smaller: its subscriptions, or those referring to the quenched names."""
        quench = self.quench
        engine = self.engine
        if not len(quench):
            engine.set_owner_keys(session, keys)
            return
        owned = engine.owned(session)
        # a set: ``isdisjoint`` with a list of the 1,000 quenched names walked
        # the list for each of 2,000 subscriptions (19 ms, issue 42's bench)
        names = frozenset(quench.quenched_names())
        if sum(engine.referring_count(name) for name in names) < len(owned):
            subs = [sub for sub in engine.referring(names).values() if sub.owner is session]
        else:
            subs = [sub for sub in owned.values() if not sub.names.isdisjoint(names)]
        views = [quench.view(sub) for sub in subs]
        engine.set_owner_keys(session, keys)
        for sub, before in zip(subs, views, strict=True):
            quench.subscription_modified(sub, before, False)

    def _send_quench_packet(self, owner: Hashable, packet: object) -> None:
        cast(Session, owner).send(packet, droppable=True)   # owners that quench are sessions

    def _write_quench_packets(self, owner: Hashable) -> None:
        cast(Session, owner).write_now()

    # -- delivery ------------------------------------------------------------------------
    def deliver(self, attrs: dict[str, Any], block: bytes | None, deliver_insecure: bool,
                nkeys: NotificationKeys | None, *, producer: Any = None,
                routing: tuple[str, ...] = (), preds: list[Any] | None = None) -> int:
        """Deliver one notification; returns the number of NotifyDeliver packets.

        ``producer`` (the sending ``Session``, or an id string) only names the
        producer in the traffic archive. ``routing`` is the routing list of a
        notification that came from a federated router (else empty).
        ``preds``: the engine's candidates for it, when the caller has them.
        """
        if self._recent_request(attrs, block, deliver_insecure, nkeys, producer):
            return 0
        insecure, secure = self.engine.match(attrs, nkeys, deliver_insecure, preds)
        return self._deliver_matched(attrs, block, deliver_insecure, nkeys, producer, routing,
                                     insecure, secure)

    def deliver_steps(self, attrs: dict[str, Any], block: bytes | None, deliver_insecure: bool,
                      nkeys: NotificationKeys | None, *, producer: Any = None,
                      routing: tuple[str, ...] = (), local: bool = True) -> Any:
        """``deliver`` as a generator of steps of about a millisecond
        (``Engine.match_steps``): a client's notification is matched so, its
        first step at once and the rest, if any, by ``link_later``. With
        ``local`` False it is only forwarded (a copy a flooding router
        passes on but has delivered here already: not matched, archived or
        counted again)."""
        if not local:
            federation = self._federation.running
            if federation is not None:
                federation.forward(attrs, block, deliver_insecure, nkeys, routing)
            return 0
        if self._recent_request(attrs, block, deliver_insecure, nkeys, producer):
            return 0
        insecure, secure = yield from self.engine.match_steps(attrs, nkeys, deliver_insecure)
        return self._deliver_matched(attrs, block, deliver_insecure, nkeys, producer, routing,
                                     insecure, secure)

    def deliver_first(self, attrs: dict[str, Any], block: bytes | None, deliver_insecure: bool,
                      nkeys: NotificationKeys | None, *, producer: Any = None
                      ) -> Generator[None, None, int] | None:
        """``deliver_steps``'s first step run now (a client's NotifyEmit, the
        hot path): None when it was the only one (delivered), else a
        generator of the steps after it, for ``link_later``. Two generators
        fewer per notification than ``deliver_steps`` when, as usual, one
        step matches it."""
        if self._recent_request(attrs, block, deliver_insecure, nkeys, producer):
            return None
        first = self.engine.match_first(attrs, nkeys, deliver_insecure)
        if isinstance(first, tuple):
            self._deliver_matched(attrs, block, deliver_insecure, nkeys, producer, (), *first)
            return None
        return self._deliver_rest(first, attrs, block, deliver_insecure, nkeys, producer)

    def _deliver_rest(self, rest: Generator[None, None, tuple[dict[Any, Any], dict[Any, Any]]],
                      attrs: dict[str, Any], block: bytes | None, deliver_insecure: bool,
                      nkeys: NotificationKeys | None, producer: Any) -> Generator[None, None, int]:
        """(``deliver_first``'s later steps.)"""
        insecure, secure = yield from rest
        return self._deliver_matched(attrs, block, deliver_insecure, nkeys, producer, (),
                                     insecure, secure)

    def deliver_ordered(self, key: Hashable, attrs: dict[str, Any], block: bytes | None,
                        deliver_insecure: bool, nkeys: NotificationKeys | None, *,
                        producer: Any = None, routing: tuple[str, ...] = (),
                        local: bool = True) -> None:
        """``deliver`` in steps, after the earlier ones of the same ``key``
        (an origin with no session to wait: an UNotify's connection, a
        federated link; ``elvin.router.ordered``)."""
        self.ordered.submit(key, self.deliver_steps(attrs, block, deliver_insecure, nkeys,
                                                    producer=producer, routing=routing,
                                                    local=local))

    def _recent_request(self, attrs: dict[str, Any], block: bytes | None, deliver_insecure: bool,
                        nkeys: NotificationKeys | None, producer: Any) -> bool:
        """Keep ``attrs`` among the recent notifications (elvin.router.recent);
        True when it is a request for them, which is addressed to the router and
        delivered to no one."""
        recent = self.recent
        if recent is None:
            return False
        if recent.is_request(attrs):
            if producer is not None and not isinstance(producer, str):
                recent.request(producer, attrs)
            return True
        if block is not None:
            recent.note(attrs, block, deliver_insecure, nkeys)
        return False

    def _deliver_matched(self, attrs: dict[str, Any], block: bytes | None, deliver_insecure: bool,
                         nkeys: NotificationKeys | None, producer: Any,
                         routing: tuple[str, ...], insecure: dict[Any, Any],
                         secure: dict[Any, Any]) -> int:
        if deliver_insecure and self.census.counting:
            self.census.note(attrs)
        archiving = self._archiving
        if archiving is not None:
            archiving(attrs, block, insecure, secure, producer, deliver_insecure)
        federation = self._federation.running
        if not insecure and not secure:
            if federation is not None:
                federation.forward(attrs, block, deliver_insecure, nkeys, routing)
            return 0
        if block is None:
            block = encode_attributes(attrs)
        count = 0
        if secure:
            for session, ids in secure.items():
                other = insecure.pop(session, ())
                session.send_bytes(frame_notify_deliver(block, ids, other), True)
                count += 1
        head = None     # the frames' common start, once per notification
        for session, ids in insecure.items():
            if len(ids) == 1:
                if head is None:
                    head = notify_deliver_head(block)
                session.send_bytes(head + one_insecure_id(ids[0]), True)
            else:
                session.send_bytes(frame_notify_deliver(block, (), ids), True)
            count += 1
        self.stats.notifications_out += count
        if federation is not None:     # after local delivery, with the same XDR
            federation.forward(attrs, block, deliver_insecure, nkeys, routing)
        return count

    # -- statistics ---------------------------------------------------------------------
    @property
    def connection_count(self) -> int:
        return sum(1 for s in self.sessions if s.state == CONNECTED)

    def top_clients(self) -> list[dict[str, object]]:
        """The busiest client channels' figures (elvin.router.clientstats)."""
        return top_clients(self.sessions, self.engine, self.quench)
