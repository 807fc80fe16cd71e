"""One federation link (either end): the asyncio shell of its sans-IO core.

A ``FederationLink`` is the asyncio protocol of one router-to-router
connection. The protocol itself (the FedConnRqst/FedConnRply handshake, which
packet is legal when, the FedNotify routing checks, request retries and
keepalive decisions) is its ``LinkCore`` (``elvin.federation.link_core``),
which takes bytes and times and answers with events; this shell writes the
packets, runs the timers, admits the peer (which may take DNS lookups),
compiles large pull filters off the loop and tells its ``FederationService``,
to which everything that concerns more than one link (which domains may
link, pull filters, forwarding, local delivery) belongs. (It was called
``Link``, a name it shared with ``elvin.federation.domain.Link``, an edge of
an event-domain topology; ``Link`` stays as an alias.)

Keys: a FedNotify carries the notification's keys as they came from the
producer (its NotifyEmit keys plus its connection's notification keys) and
its ``deliver_insecure`` flag, exactly the fields the protocol has for them;
the receiving router applies the same secure-delivery rules as for a local
producer. (Avis forwards keys the same way since 1.2.2.)

Bad peers: anything that does not decode, a packet that is not allowed in
the link's state, a FedNotify whose routing list lacks the sender's domain
or is longer than ``max_routing``, a wrong protocol version or an unknown
domain get a Nack (for a request) or a Disconn (reason 4) and the link is
closed, with the reason logged; clients of the router never notice.

Admission: a FedConnRqst's domain must be accepted (``check_domain``), and
then the connection itself must satisfy the domain's rule (``check_peer``:
its address, its certificate). When that takes DNS lookups they run as the
link's one job (``elvin.protocol.backlog``): whatever the peer sends before
its answer waits behind it, and closing the link cancels it. A refused
peer gets the Nack and nothing else: it never learns a pull filter, an
announcement or a notification.

Dead peers: TestConn after ``keepalive`` seconds of silence, and the link
is closed when the peer says nothing for another ``keepalive``; a
FedSubReplace not acknowledged within ``request_timeout`` is resent
``request_retries`` times (as Avis does) and then the link is closed
("request timeout" in the log).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from elvin.errors import KeyRefused, NackCode, ProtocolError, SubscriptionError
from elvin.federation.config import ConnectSpec, Filter
from elvin.federation.link_core import (
    OFF_LOOP_BYTES,
    Acked,
    BadPullFilter,
    Close,
    ConnRplyReceived,
    ConnRqstReceived,
    DropWarned,
    Event,
    LinkCore,
    Linked,
    NotifyReceived,
    OffLoopSubReplace,
    Send,
    SubReplaceReceived,
)
from elvin.federation.packets import (
    Ack,
    FedConnRqst,
    FedNotify,
    FedSubReplace,
    decode_fed_notify,
    frame_fed_packet,
)
from elvin.federation.pullfilter import PullMatcher, build_pull_matcher
from elvin.federation.subast import PullFilter, encode_subast
from elvin.federation.subtrees import BehindMatchers, Groups, split_groups
from elvin.federation.topology import ANNOUNCEMENT_ATTR
from elvin.protocol import DisconnReason, Nack
from elvin.protocol.backlog import Backlog, Violation
from elvin.protocol.limits import Limits
from elvin.protocol.states import FederationLinkState

if TYPE_CHECKING:
    from elvin.federation.admission import Refusal
    from elvin.federation.config import FederationConfig
    from elvin.federation.host import FederationHost
    from elvin.ratelog import RateLimitedLog

log = logging.getLogger("elvin.federation")

__all__ = ["AWAIT_RPLY", "AWAIT_RQST", "CLOSED", "LINKED", "OFF_LOOP_BYTES",
           "FederationLink", "FederationStats", "Link", "LinkOwner", "NACK_INVALID_DOMAIN"]

#: Avis's implementation-specific Nack code for a refused router domain
#: (codes 2500-2599 are for implementations): we use the same.
NACK_INVALID_DOMAIN = 2500

#: the link's states (``elvin.protocol.states.FederationLinkState``; str values, as before)
AWAIT_RQST, AWAIT_RPLY = FederationLinkState.AWAIT_RQST, FederationLinkState.AWAIT_RPLY
LINKED, CLOSED = FederationLinkState.LINKED, FederationLinkState.CLOSED
_MAX_WRITE_BUFFER = 8 * 1024 * 1024   # FedNotify beyond this backlog are dropped


def _decode_and_build(body: bytes, limits: Limits, max_terms: int,
                      ) -> tuple[FedSubReplace, PullMatcher | Exception, PullFilter,
                                 Groups | None]:
    """The compile worker's job for a large FedSubReplace: the packet, its
    matcher or what building it raised, and its plain filter and groups
    (``subtrees.split_groups``: the matcher is the plain filter's).
    ``ProtocolError`` if the packet is malformed."""
    packet, _ = decode_fed_notify(body, limits)
    assert isinstance(packet, FedSubReplace)    # the core sends only FedSubReplace here
    plain, groups = split_groups(packet.pull_filter)
    try:
        return packet, build_pull_matcher(plain, max_terms), plain, groups
    except Exception as exc:  # noqa: BLE001 - the peer's filter: answered as an error
        return packet, exc, plain, groups


@dataclass
class FederationStats:
    fed_notify_sent: int = 0
    fed_notify_received: int = 0
    fed_notify_delivered: int = 0      # received and passed the incoming filter
    fed_notify_filtered: int = 0       # received, refused by the incoming filter
    fed_notify_looped: int = 0         # received with our own domain in the routing list
    fed_notify_off_tree: int = 0       # received from a peer that is not our parent in its tree
    fed_notify_passed_on: int = 0      # routing = "flood": a copy by another path, passed on only
    fed_notify_dropped: int = 0        # not sent: the peer's connection was backed up
    sub_replace_sent: int = 0
    sub_replace_received: int = 0
    announcements_sent: int = 0        # topology announcements (not notifications)
    announcements_received: int = 0
    links_established: int = 0
    links_refused: int = 0
    redials_failed: int = 0            # outgoing dials that did not give a link
    interest_gaps: int = 0             # subscriptions added before their interest could be announced (service.interest_unannounced)

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class LinkOwner(Protocol):
    """What a link needs of the federation service that owns it: the one
    contract between the two (``elvin.federation.service.FederationService``
    implements it). The link speaks the protocol of one connection; the
    service decides who may link, what each link is sent, and the topology."""

    domain: str
    config: FederationConfig
    limits: Limits
    host: FederationHost
    stats: FederationStats
    #: the service's rate-limited log, which the link's warnings go through
    notes: RateLimitedLog

    def link_opened(self, link: FederationLink) -> None: ...

    def link_established(self, link: FederationLink) -> None: ...

    def link_closed(self, link: FederationLink) -> None: ...

    def unlink(self, link: FederationLink) -> None: ...

    def check_domain(self, domain: str, spec: ConnectSpec | None,
                     relink: FederationLink | None = None) -> tuple[str, tuple[Filter, Filter] | None]:
        """(problem, (outgoing, incoming) filters): may ``domain`` link?"""

    def check_peer(self, link: FederationLink, domain: str) -> Refusal | None | asyncio.Task:
        """May this peer (its address, its certificate) link as ``domain``?"""

    def pull_acked(self, link: FederationLink) -> None: ...

    def remote_pull_changed(self, link: FederationLink) -> None: ...

    def announcement_received(self, link: FederationLink, attrs: Mapping[str, Any]) -> None: ...

    def hold_from(self, link: FederationLink, p: FedNotify, block: bytes | None) -> bool: ...

    def on_tree(self, link: FederationLink, routing: tuple[str, ...], attrs: Mapping[str, Any]) -> bool:
        """Whether a notification from ``link`` came along its tree (else dropped)."""

    def first_here(self, routing: tuple[str, ...], attrs: Mapping[str, Any]) -> bool:
        """routing = "flood": whether to deliver it here too, not only pass it on."""


class _Settings:
    """The core's view of the service's settings, read at each use (a
    reload swaps ``service.config``)."""

    __slots__ = ("_service",)

    def __init__(self, service: LinkOwner) -> None:
        self._service = service

    @property
    def max_routing(self) -> int:
        return self._service.config.max_routing

    @property
    def keepalive(self) -> float:
        return self._service.config.keepalive

    @property
    def request_timeout(self) -> float:
        return self._service.config.request_timeout

    @property
    def request_retries(self) -> int:
        return self._service.config.request_retries


class FederationLink(asyncio.Protocol):
    """One federation connection (either end): the asyncio shell of a
    ``LinkCore``, which holds its protocol state."""

    def __init__(self, service: LinkOwner, role: str,
                 spec: ConnectSpec | None = None) -> None:
        self.service = service
        self.role = role                      # "connect" or "accept"
        self.spec = spec
        self._loop = asyncio.get_running_loop()
        self.core = LinkCore("connect" if role == "connect" else "accept", service.domain,
                             service.limits, _Settings(service), self._loop.time())
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.address: str | None = None          # the peer's IP address
        self.outgoing: Filter = Filter(False)
        self.incoming: Filter = Filter(False)
        self.remote_pull: PullFilter = False          # the peer's last pull filter
        self.remote_match: Any = False                # PullMatcher, or True / False
        self.remote_matcher = PullMatcher()
        #: the peer's pull filter by the router each term is for (subtrees.py),
        #: None if it sent no groups; ``behind`` matches them per subtree
        self.remote_groups: Groups | None = None
        self.behind: BehindMatchers | None = None
        #: the peer takes part in learning the topology (its pull filter says so)
        self.participant = False
        #: packets not acted on yet: those that arrived while a FedSubReplace
        #: compiles off the loop (the backlog's job), acted on in order once
        #: it is applied; cancelled with the link (elvin.protocol.backlog)
        self._backlog = Backlog()
        self.sent_pull: bytes | None = None           # encoding of the last one we sent
        self.acked_pull = False
        self._request_timer: asyncio.TimerHandle | None = None
        self.stats = FederationStats()
        self.closed = self._loop.create_future()
        self._timer: asyncio.TimerHandle | None = None
        self._keepalive: asyncio.TimerHandle | None = None
        self._drop_warned = False

    # -- the core's state, read through ------------------------------------------------
    @property
    def state(self) -> FederationLinkState:
        return self.core.state

    @property
    def remote_domain(self) -> str | None:
        return self.core.remote_domain

    @property
    def established(self) -> bool:
        return self.core.established

    @property
    def answered(self) -> bool:
        """The peer answered our FedConnRqst (FedConnRply, Nack or Disconn)."""
        return self.core.answered

    @property
    def compiling(self) -> bool:
        """A pull filter of the peer's compiles off the loop (its later packets wait)."""
        return self._backlog.busy

    def __repr__(self) -> str:
        return f"<FederationLink {self.role} {self.peer} {self.remote_domain or '?'} {self.state}>"

    # -- asyncio -----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport: the loop's create_connection/server
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
            self.address = peer[0]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, AttributeError, ValueError):
                pass
        self.service.link_opened(self)
        self._run(self.core.start())
        self._timer = self._loop.call_later(self.service.config.request_timeout,
                                            self._handshake_timeout)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.core.lost()
        self._cancel_timers()
        if self.established:
            log.info("federation link with %r (%s) closed%s", self.remote_domain, self.peer,
                     f": {exc}" if exc else "")
        self.service.link_closed(self)
        if not self.closed.done():
            self.closed.set_result(self.established)

    def data_received(self, data: bytes) -> None:
        bodies, bad, answers = self.core.feed(data, self._loop.time())
        self._run(answers)
        backlog = self._backlog
        backlog.add(bodies)
        if bad is not None:
            backlog.violation(bad)
        self._act()

    def _act(self) -> None:
        """Act on what the backlog holds, in order, until a FedSubReplace
        goes off the loop (the rest waits for it) or nothing is left. While
        one compiles, reading goes on until too much is held."""
        backlog = self._backlog
        core = self.core
        while not core.closed:
            item = backlog.next()
            if item is None:
                break
            if type(item) is Violation:
                self.violation(item.reason)
                break
            self._run(core.handle(item))  # type: ignore[arg-type]  # not a Violation: a body
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if backlog.busy and backlog.full:
            transport.pause_reading()
        else:
            transport.resume_reading()

    # -- the core's events ---------------------------------------------------------------
    def _run(self, events: list[Event]) -> None:
        """Do what the core asks, in order."""
        for event in events:
            if isinstance(event, Send):
                self._send(event.packet)
            elif isinstance(event, NotifyReceived):
                self._fed_notify(event.packet, event.block)
            elif isinstance(event, SubReplaceReceived):
                self._fed_sub_replace(event.packet)
            elif isinstance(event, OffLoopSubReplace):
                self._sub_replace_off_loop(event.body)
            elif isinstance(event, Acked):
                self.acked_pull = True
                self.service.pull_acked(self)
            elif isinstance(event, Close):
                self._closed(event)
            elif isinstance(event, ConnRqstReceived):
                self._fed_conn_rqst(event.packet)
            elif isinstance(event, ConnRplyReceived):
                self._fed_conn_rply(event.packet.router_domain)
            elif isinstance(event, Linked):
                self._established(event.domain)
            elif isinstance(event, BadPullFilter):
                self.service.notes.log("bad pull filters from federation peers", logging.WARNING,
                                       "federation peer %r sent a bad pull filter: %s",
                                       self.remote_domain, event.detail)
            elif isinstance(event, DropWarned):
                self.service.notes.log("DropWarns from federation peers", logging.WARNING,
                                       "federation peer %r dropped packets (DropWarn)",
                                       self.remote_domain)

    def _closed(self, event: Close) -> None:
        """The core ended the link: say why, then close the channel."""
        service, kind, packet = self.service, event.kind, event.packet
        if kind == "violation":
            service.notes.log("federation protocol violations", logging.WARNING,
                              "federation peer %s (%s) violated the protocol: %s; "
                              "disconnecting", self.peer,
                              self.remote_domain or "unknown domain", event.detail)
        elif kind == "refused":
            service.notes.log("refused federation links", logging.WARNING,
                              "refused federation link from %s: %s", self.peer, event.detail)
            service.stats.links_refused += 1
            self._cancel_timers()       # never linked: nothing to unlink
            if self.transport is not None:
                self.transport.close()
            return
        elif kind == "peer-refused" and isinstance(packet, Nack):
            log.warning("federation router at %s refused our link: Nack %d %s",
                        self.peer, packet.error, packet.message)
            service.stats.links_refused += 1
        elif kind == "peer-disconnected" and self.established and packet is not None:
            log.info("federation peer %r disconnected (reason %d%s)", self.remote_domain,
                     packet.reason, f": {packet.args}" if packet.args else "")  # type: ignore[attr-defined]  # a Disconn
        elif kind == "rejected":
            log.warning("federation peer %r rejected our request (%s); closing",
                        self.remote_domain, event.detail)
        elif kind == "request-timeout":
            log.warning("federation peer %r (%s) did not answer FedSubReplace within %g s "
                        "(%s): request timeout; closing the link%s",
                        self.remote_domain, self.peer, service.config.request_timeout,
                        event.detail, " (will redial)" if self.role == "connect" else "")
        elif kind == "silent":
            log.warning("federation peer %r (%s) stopped responding; closing",
                        self.remote_domain, self.peer)
        elif kind == "handshake-timeout":
            service.notes.log("federation handshakes timed out", logging.WARNING,
                              "federation peer %s: no %s within %.0f s; closing", self.peer,
                              event.detail, service.config.request_timeout)
        self._cancel_timers()
        if self.transport is None or self.transport.is_closing():
            return
        service.unlink(self)     # the domain may link again at once
        self.transport.close()

    # -- sending ---------------------------------------------------------------------
    def _send(self, packet: object) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame_fed_packet(packet))

    def send_notify(self, frame: bytes) -> bool:
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        if transport.get_write_buffer_size() > _MAX_WRITE_BUFFER:
            self.stats.fed_notify_dropped += 1
            self.service.stats.fed_notify_dropped += 1
            if not self._drop_warned:
                self._drop_warned = True
                log.warning("federation link to %r is backed up: dropping notifications",
                            self.remote_domain)
            return False
        self._drop_warned = False
        transport.write(frame)
        self.stats.fed_notify_sent += 1
        self.service.stats.fed_notify_sent += 1
        return True

    def send_announcement(self, frame: bytes) -> None:
        """A topology announcement (a FedNotify that is not a notification:
        no filters apply, no notification counters move)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame)
            self.stats.announcements_sent += 1
            self.service.stats.announcements_sent += 1

    def send_pull_filter(self, pull: PullFilter, encoded: bytes | None = None) -> None:
        if encoded is None:
            encoded = encode_subast(pull)
        if encoded == self.sent_pull:
            return
        if self.sent_pull is None and pull is False:
            self.sent_pull = encoded        # the peer starts from FALSE (as Avis)
            return
        self.sent_pull = encoded
        self.acked_pull = False
        self._count_sub_replace()
        self._run(self.core.send_pull_filter(pull, self._loop.time()))
        self._arm_requests()

    def _count_sub_replace(self) -> None:
        self.stats.sub_replace_sent += 1
        self.service.stats.sub_replace_sent += 1

    # -- request timeouts (the core decides; see LinkCore.requests_due) ---------------
    def _arm_requests(self) -> None:
        """A timer for the core's first request deadline, if none is set."""
        deadline = self.core.next_request_deadline
        if self._request_timer is None and deadline is not None:
            self._request_timer = self._loop.call_at(deadline, self._requests_due)

    def _requests_due(self) -> None:
        self._request_timer = None
        now = self._loop.time() + 0.001     # asyncio may run a timer a clock tick early
        events = self.core.requests_due(now)
        for event in events:
            if type(event) is Send:
                log.warning("federation peer %r (%s) did not answer FedSubReplace within "
                            "%g s; sending it again (xid %d)", self.remote_domain, self.peer,
                            self.service.config.request_timeout,
                            event.packet.xid)  # type: ignore[attr-defined]  # a FedSubReplace
                self._count_sub_replace()
        self._run(events)
        if not self.core.closed:
            self._arm_requests()

    def close(self, reason: int = DisconnReason.SHUTDOWN, message: str = "") -> None:
        """Disconn (unless reason is 0) and close after the write buffer drains."""
        if self.transport is None or self.transport.is_closing():
            return
        self._run(self.core.close(reason, message))

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def violation(self, reason: str) -> None:
        """The peer broke the protocol: Disconn (reason 4) and close (the core's one path)."""
        if self.transport is None or self.transport.is_closing():
            return
        self._run(self.core.violate(reason))

    def _cancel_timers(self) -> None:
        for handle in (self._timer, self._keepalive, self._request_timer):
            if handle is not None:
                handle.cancel()
        self._timer = self._keepalive = self._request_timer = None
        self._backlog.release()         # a pull filter compiling is cancelled

    def _handshake_timeout(self) -> None:
        self._timer = None
        self._run(self.core.handshake_due())

    def _schedule_keepalive(self) -> None:
        self._keepalive = self._loop.call_later(self.service.config.keepalive,
                                                self._keepalive_due)

    def _keepalive_due(self) -> None:
        self._keepalive = None
        self._run(self.core.keepalive_due(self._loop.time()))
        if self.state is LINKED:
            self._schedule_keepalive()

    # -- the handshake ---------------------------------------------------------------
    def _malformed(self, exc: ProtocolError) -> None:
        self._run(self.core.malformed(exc))

    def _fed_conn_rqst(self, p: FedConnRqst) -> None:
        """A compatible FedConnRqst (the core checked the version): admit the peer."""
        problem, _classes = self.service.check_domain(p.router_domain, None)
        if problem:
            self._refuse(p.xid, NACK_INVALID_DOMAIN, problem)
            return
        self._check_peer(p)

    def _check_peer(self, p: FedConnRqst) -> None:
        """Check the peer against the rules in force now; ``_admit`` acts on
        the verdict (at once, or when the lookups it takes are done)."""
        config = self.service.config
        verdict = self.service.check_peer(self, p.router_domain)
        if isinstance(verdict, asyncio.Task):      # host names to look up first
            self._backlog.start(verdict)
            verdict.add_done_callback(functools.partial(self._checked, p, config))
            return
        self._admit(p, verdict, config)

    def _checked(self, p: FedConnRqst, config: FederationConfig, task: asyncio.Task) -> None:
        if not self._backlog.finish(task):
            return                      # the link closed meanwhile
        try:
            refusal = task.result()
        except Exception:               # never let a lookup hurt the router
            log.exception("federation: checking the peer at %s failed", self.peer)
            self.close(0)
            return
        self._admit(p, refusal, config)
        self._act()

    def _admit(self, p: FedConnRqst, refusal: Any, config: FederationConfig) -> None:
        """Link as ``p.router_domain`` unless ``refusal`` (a ``Refusal``)
        says no. The verdict is of the rules in ``config``: if the
        configuration was reloaded while the peer was being looked up, the
        peer is checked again under the new rules (a reload re-checks only
        the links already up). The domain is checked again too: another
        link may have taken it meanwhile."""
        if self.state != AWAIT_RQST:
            return
        service = self.service
        if service.config is not config:
            log.debug("federation: the configuration changed while the peer at %s was "
                      "checked; checking it again", self.peer)
            self._check_peer(p)
            return
        if refusal is not None:
            self._refuse(p.xid, NACK_INVALID_DOMAIN, refusal.log, refusal.nack)
            return
        problem, classes = service.check_domain(p.router_domain, None)
        if problem:
            self._refuse(p.xid, NACK_INVALID_DOMAIN, problem)
            return
        self.outgoing, self.incoming = classes  # type: ignore[misc]  # no problem: the filters
        self._run(self.core.establish(p.router_domain, p.xid))

    def _refuse(self, xid: int, code: int, reason: str, told: str | None = None) -> None:
        """Nack the FedConnRqst (with ``told``, else ``reason``) and close;
        the log says ``reason``."""
        self._run(self.core.refuse(xid, code, reason if told is None else told, reason))

    def _fed_conn_rply(self, domain: str) -> None:
        """The peer answered our FedConnRqst as ``domain``: may it link?"""
        problem, classes = self.service.check_domain(domain, self.spec)
        if problem:
            log.warning("federation link to %s: %s; closing", self.peer, problem)
            self.service.stats.links_refused += 1
            self.close(DisconnReason.PROTOCOL_ERRORS, problem[:200])
            return
        self.outgoing, self.incoming = classes  # type: ignore[misc]  # no problem: the filters
        self._run(self.core.establish(domain))

    def _established(self, domain: str) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._schedule_keepalive()
        log.info("federation link %s %r (%s) established: outgoing %s, incoming %s",
                 "to" if self.role == "connect" else "from", domain, self.peer,
                 self.outgoing.text, self.incoming.text)
        self.service.link_established(self)

    def _fed_sub_replace(self, p: FedSubReplace) -> None:
        """A small pull filter (``OFF_LOOP_BYTES``) is applied at once: it
        costs the loop a few milliseconds at most."""
        matcher = self.remote_matcher
        plain, groups = split_groups(p.pull_filter)
        try:
            matcher.update(plain, self.service.config.max_disjuncts * 2)
        except Exception as exc:  # noqa: BLE001 - the peer's filter: answered as an error
            self._answer_sub_replace(p, exc, plain, groups)
        else:
            self._answer_sub_replace(p, matcher, plain, groups)

    def _sub_replace_off_loop(self, body: bytes) -> None:
        """A larger FedSubReplace (one huge term, or many: decoding 2 MiB
        takes ~0.4 s, compiling it seconds) is decoded and compiled into a
        new matcher on the router's compile worker, never on the loop, then
        swapped in and answered. The link's later packets wait for it (the
        backlog's job), so that requests and notifications take effect in the
        order the peer sent them; closing the link cancels it."""
        job = functools.partial(_decode_and_build, body, self.service.limits,
                                self.service.config.max_disjuncts * 2)
        built = self.service.host.run_off_loop(len(body), job)
        self._backlog.start(built)
        built.add_done_callback(self._replaced)

    def _replaced(self, built: asyncio.Future) -> None:
        if not self._backlog.finish(built):
            return                      # the link closed meanwhile: dropped
        if self.state == LINKED:
            try:
                p, outcome, plain, groups = built.result()
            except ProtocolError as exc:
                self._malformed(exc)
            except Exception:           # never let a peer's filter hurt the router
                log.exception("federation peer %r: building its pull filter failed",
                              self.remote_domain)
                self.close(DisconnReason.SHUTDOWN, "internal router error")
                return
            else:
                self._answer_sub_replace(p, outcome, plain, groups)
        self._act()

    def _answer_sub_replace(self, p: FedSubReplace, outcome: PullMatcher | Exception,
                            plain: PullFilter, groups: Groups | None) -> None:
        """Ack and use the matcher ``outcome``, or Nack the exception that
        building it raised (the old filter stays)."""
        self.stats.sub_replace_received += 1
        self.service.stats.sub_replace_received += 1
        if isinstance(outcome, SubscriptionError):
            self.service.notes.log("bad pull filters from federation peers", logging.WARNING,
                                   "federation peer %r sent a pull filter we cannot use: %s",
                                   self.remote_domain, outcome)
            self._send(Nack(p.xid, int(outcome.nack_code), str(outcome)[:200]))
            return
        if isinstance(outcome, Exception):   # never let a peer's tree hurt the router
            self.service.notes.log("bad pull filters from federation peers", logging.WARNING,
                                   "federation peer %r sent an unusable pull filter: %s",
                                   self.remote_domain, outcome)
            self._send(Nack(p.xid, int(NackCode.PARSE_ERROR), "unusable pull filter"))
            return
        if outcome is not self.remote_matcher:
            self.remote_matcher.dismantle()     # freed now, not left to a full collection
        self.remote_matcher = outcome
        self.remote_pull = plain
        self.remote_groups = groups
        self.remote_match = outcome if outcome.constant is None else outcome.constant
        # the service first: a peer that says here it takes part gets this
        # router's topology announcements ahead of the Ack, so that it has
        # them before it can count this link into its trees
        self.service.remote_pull_changed(self)
        self._send(Ack(p.xid))

    def _fed_notify(self, p: FedNotify, block: bytes | None) -> None:
        """A FedNotify whose routing list the core has checked: an
        announcement, or a notification for the filters and the trees."""
        service = self.service
        routing = p.routing
        attrs = p.attributes
        if ANNOUNCEMENT_ATTR in attrs:
            self.stats.announcements_received += 1
            service.stats.announcements_received += 1
            service.announcement_received(self, attrs)
            return
        self.stats.fed_notify_received += 1
        service.stats.fed_notify_received += 1
        if service.domain in routing:
            self.stats.fed_notify_looped += 1
            service.stats.fed_notify_looped += 1
            return
        if not self.incoming.matches(attrs):
            self.stats.fed_notify_filtered += 1
            service.stats.fed_notify_filtered += 1
            return
        if not service.on_tree(self, routing, attrs):
            if service.hold_from(self, p, block):
                return        # its link is not in the agreed topology yet: later
            self.stats.fed_notify_off_tree += 1
            service.stats.fed_notify_off_tree += 1
            return
        self.deliver_notify(p, block, local=service.first_here(tuple(routing), attrs))

    def deliver_notify(self, p: FedNotify, block: bytes | None, local: bool = True) -> None:
        """Deliver (and so forward) a FedNotify this router takes; with
        ``local`` False only forward it (``FederationService.first_here``)."""
        service = self.service
        routing = p.routing
        attrs = p.attributes
        try:
            service.host.deliver(attrs, block, p.deliver_insecure, p.keys, tuple(routing),
                                 local=local)
        except KeyRefused as exc:
            self.service.notes.log("FedNotify with bad keys ignored", logging.WARNING,
                                   "federation peer %r: FedNotify with bad keys ignored (%s)",
                                   self.remote_domain, exc.message)
            return
        if local:
            self.stats.fed_notify_delivered += 1
            service.stats.fed_notify_delivered += 1
        else:
            self.stats.fed_notify_passed_on += 1
            service.stats.fed_notify_passed_on += 1


#: the name this class had (``elvin.federation.domain`` has a ``Link`` too)
Link = FederationLink
