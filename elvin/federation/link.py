"""One federation link (either end) and its protocol state machine.

A ``Link`` is the asyncio protocol of one router-to-router connection: the
FedConnRqst/FedConnRply handshake, then FedNotify, FedSubReplace, TestConn
and the rest of the Elvin Federation Protocol 1.0. Everything that concerns
more than one link (which domains may link, pull filters, forwarding, local
delivery) is its ``FederationService``'s business.

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
import itertools
import logging
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from elvin.errors import KeyRefused, NackCode, ProtocolError, SubscriptionError
from elvin.federation.config import ConnectSpec, Filter
from elvin.federation.packets import (
    VERSION_MAJOR,
    VERSION_MINOR,
    Ack,
    FedConnRply,
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
from elvin.protocol import ConfConn, Disconn, DisconnReason, DropWarn, Nack, TestConn
from elvin.protocol.backlog import TEST_CONN_BODY, Backlog, Violation
from elvin.protocol.framing import FrameDecoder
from elvin.protocol.limits import Limits

if TYPE_CHECKING:
    from elvin.federation.admission import Refusal
    from elvin.federation.config import FederationConfig
    from elvin.federation.host import FederationHost

log = logging.getLogger("elvin.federation")

__all__ = ["AWAIT_RPLY", "AWAIT_RQST", "CLOSED", "LINKED", "FederationStats", "Link",
           "LinkOwner", "NACK_INVALID_DOMAIN"]

#: Avis's implementation-specific Nack code for a refused router domain
#: (codes 2500-2599 are for implementations): we use the same.
NACK_INVALID_DOMAIN = 2500

AWAIT_RQST, AWAIT_RPLY, LINKED, CLOSED = "await-rqst", "await-rply", "linked", "closed"
_MAX_WRITE_BUFFER = 8 * 1024 * 1024   # FedNotify beyond this backlog are dropped
#: a FedSubReplace body longer than this is decoded and compiled on the
#: router's compile worker (FederationHost.run_off_loop); a shorter one
#: (~10 terms) costs the loop at most a few milliseconds
OFF_LOOP_BYTES = 1024
_FED_SUB_REPLACE = FedSubReplace.ID.to_bytes(4, "big")


def _decode_and_build(body: bytes, limits: Limits, max_terms: int,
                      ) -> tuple[FedSubReplace, PullMatcher | Exception, PullFilter,
                                 Groups | None]:
    """The compile worker's job for a large FedSubReplace: the packet, its
    matcher or what building it raised, and its plain filter and groups
    (``subtrees.split_groups``: the matcher is the plain filter's).
    ``ProtocolError`` if the packet is malformed."""
    packet, _ = decode_fed_notify(body, limits)
    plain, groups = split_groups(packet.pull_filter)  # type: ignore[attr-defined]
    try:
        return packet, build_pull_matcher(plain, max_terms), plain, groups
    except Exception as exc:  # noqa: BLE001 - the peer's filter: answered as an error
        return packet, exc, plain, groups  # type: ignore[return-value]


@dataclass
class FederationStats:
    fed_notify_sent: int = 0
    fed_notify_received: int = 0
    fed_notify_delivered: int = 0      # received and passed the incoming filter
    fed_notify_filtered: int = 0       # received, refused by the incoming filter
    fed_notify_looped: int = 0         # received with our own domain in the routing list
    fed_notify_off_tree: int = 0       # received from a peer that is not our parent in its tree
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

    def link_opened(self, link: Link) -> None: ...

    def link_established(self, link: Link) -> None: ...

    def link_closed(self, link: Link) -> None: ...

    def unlink(self, link: Link) -> None: ...

    def check_domain(self, domain: str, spec: ConnectSpec | None,
                     relink: Link | None = None) -> tuple[str, tuple[Filter, Filter] | None]:
        """(problem, (outgoing, incoming) filters): may ``domain`` link?"""

    def check_peer(self, link: Link, domain: str) -> Refusal | None | asyncio.Task:
        """May this peer (its address, its certificate) link as ``domain``?"""

    def pull_acked(self, link: Link) -> None: ...

    def remote_pull_changed(self, link: Link) -> None: ...

    def announcement_received(self, link: Link, attrs: Mapping[str, Any]) -> None: ...

    def hold_from(self, link: Link, p: FedNotify, block: bytes | None) -> bool: ...

    def on_tree(self, link: Link, routing: tuple[str, ...], attrs: Mapping[str, Any]) -> bool:
        """Whether a notification from ``link`` came along its tree (else dropped)."""


class Link(asyncio.Protocol):
    """One federation connection (either end), with its handshake state."""

    def __init__(self, service: LinkOwner, role: str,
                 spec: ConnectSpec | None = None) -> None:
        self.service = service
        self.role = role                      # "connect" or "accept"
        self.spec = spec
        self.state = AWAIT_RPLY if role == "connect" else AWAIT_RQST
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder(service.limits)
        self.peer = "?"
        self.address: str | None = None          # the peer's IP address
        self.remote_domain: str | None = None
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
        self._pull_sent: PullFilter = False           # ... and the filter itself (retries)
        self._pull_xid = 0                            # xid of the latest FedSubReplace
        #: requests awaiting an Ack/Nack: xid -> (deadline on the loop clock, attempt)
        self._requests: dict[int, tuple[float, int]] = {}
        self._request_timer: asyncio.TimerHandle | None = None
        self.established = False
        #: the peer answered our FedConnRqst (FedConnRply, Nack or Disconn)
        self.answered = False
        self.stats = FederationStats()
        self.closed = asyncio.get_running_loop().create_future()
        self._xids = itertools.count(1)
        self._rqst_xid = 0
        self._timer: asyncio.TimerHandle | None = None
        self._keepalive: asyncio.TimerHandle | None = None
        self._last_rx = time.monotonic()
        self._test_pending = False
        self._drop_warned = False

    @property
    def compiling(self) -> bool:
        """A pull filter of the peer's compiles off the loop (its later packets wait)."""
        return self._backlog.busy

    def __repr__(self) -> str:
        return f"<Link {self.role} {self.peer} {self.remote_domain or '?'} {self.state}>"

    # -- asyncio -----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
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
        config = self.service.config
        if self.role == "connect":
            self._rqst_xid = next(self._xids)
            self._send(FedConnRqst(self._rqst_xid, VERSION_MAJOR, VERSION_MINOR,
                                   self.service.domain))
        self._timer = asyncio.get_running_loop().call_later(
            config.request_timeout, self._handshake_timeout)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.state = CLOSED
        self._cancel_timers()
        if self.established:
            log.info("federation link with %r (%s) closed%s", self.remote_domain, self.peer,
                     f": {exc}" if exc else "")
        self.service.link_closed(self)
        if not self.closed.done():
            self.closed.set_result(self.established)

    def data_received(self, data: bytes) -> None:
        self._last_rx = time.monotonic()
        bad = None
        try:
            bodies = self.decoder.feed_frames(data)
        except ProtocolError as exc:
            # the bodies that arrived whole before the bad header are good
            # packets of this peer's: acted on (after any FedSubReplace still
            # compiling) before the link is closed for the violation
            bodies, bad = exc.frames, f"bad frame: {exc}"
        if self.state == LINKED and TEST_CONN_BODY in bodies:
            bodies = self._answer_liveness(bodies)
        backlog = self._backlog
        backlog.add(bodies)
        if bad is not None:
            backlog.violation(bad)
        self._act()

    def _answer_liveness(self, bodies: list[bytes]) -> list[bytes]:
        """A TestConn is answered as it arrives, even while a pull filter
        compiles: ConfConn has no xid to keep in order, and a peer whose
        keepalive is shorter than a big compile must not close the link."""
        kept = []
        for body in bodies:
            if body == TEST_CONN_BODY:
                self._send(ConfConn())
            else:
                kept.append(body)
        return kept

    def _act(self) -> None:
        """Act on what the backlog holds, in order, until a FedSubReplace
        goes off the loop (the rest waits for it) or nothing is left. While
        one compiles, reading goes on until too much is held."""
        backlog = self._backlog
        while self.state != CLOSED:
            item = backlog.next()
            if item is None:
                break
            if type(item) is Violation:
                self.violation(item.reason)
                break
            self._body(item)  # type: ignore[arg-type]
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if backlog.busy and backlog.full:
            transport.pause_reading()
        else:
            transport.resume_reading()

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
        self._pull_sent = pull
        self._send_sub_replace(0)

    def _send_sub_replace(self, attempt: int) -> None:
        xid = self._pull_xid = next(self._xids)
        self._send(FedSubReplace(xid, self._pull_sent))
        self.stats.sub_replace_sent += 1
        self.service.stats.sub_replace_sent += 1
        self._track_request(xid, attempt)

    # -- request timeouts ------------------------------------------------------------
    # FedSubReplace is the only request a linked router sends (the handshake's
    # FedConnRqst has its own deadline, TestConn is the keepalive's business).
    # Avis's Link answers a FedSubReplace timeout (Federation.Request-Timeout,
    # 20 s) by logging a warning and sending the subscription again, forever,
    # leaving dead peers to the liveness check. We retry the same way
    # (``request_retries`` times, default 1) and then give up: the link is
    # closed with a warning saying why, and an outgoing link is redialled by
    # its _Connector (a peer that keeps up TCP and TestConn but never answers
    # a request would otherwise never get our pull filter, silently).
    def _track_request(self, xid: int, attempt: int) -> None:
        loop = asyncio.get_running_loop()
        timeout = self.service.config.request_timeout
        self._requests[xid] = (loop.time() + timeout, attempt)
        if self._request_timer is None:
            self._request_timer = loop.call_later(timeout, self._requests_due)

    def _requests_due(self) -> None:
        self._request_timer = None
        if self.state != LINKED:
            return
        config = self.service.config
        loop = asyncio.get_running_loop()
        now = loop.time() + 0.001     # asyncio may run a timer a clock tick early
        for xid, (deadline, attempt) in list(self._requests.items()):
            if deadline > now:
                break
            del self._requests[xid]
            if xid != self._pull_xid:
                continue          # superseded by a later FedSubReplace, itself pending
            if attempt < config.request_retries:
                log.warning("federation peer %r (%s) did not answer FedSubReplace "
                            "(xid %d) within %g s; sending it again", self.remote_domain,
                            self.peer, xid, config.request_timeout)
                self._send_sub_replace(attempt + 1)
                continue
            log.warning("federation peer %r (%s) did not answer FedSubReplace within %g s "
                        "(%d attempts): request timeout; closing the link%s",
                        self.remote_domain, self.peer, config.request_timeout, attempt + 1,
                        " (will redial)" if self.role == "connect" else "")
            self.close(0)
            return
        if self._request_timer is not None:       # set by a resend above
            self._request_timer.cancel()
            self._request_timer = None
        if self._requests:
            first = next(iter(self._requests.values()))[0]
            self._request_timer = loop.call_at(first, self._requests_due)

    def close(self, reason: int = DisconnReason.SHUTDOWN, message: str = "") -> None:
        """Disconn (unless reason is 0) and close after the write buffer drains."""
        if self.transport is None or self.transport.is_closing():
            return
        if reason:
            self._send(Disconn(int(reason), message))
        self.state = CLOSED
        self._cancel_timers()
        self.service.unlink(self)     # the domain may link again at once
        self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def violation(self, reason: str) -> None:
        self.service.notes.log("federation protocol violations", logging.WARNING,
                               "federation peer %s (%s) violated the protocol: %s; "
                               "disconnecting", self.peer,
                               self.remote_domain or "unknown domain", reason)
        self.close(DisconnReason.PROTOCOL_ERRORS, reason[:200])

    def _cancel_timers(self) -> None:
        for handle in (self._timer, self._keepalive, self._request_timer):
            if handle is not None:
                handle.cancel()
        self._timer = self._keepalive = self._request_timer = None
        self._requests.clear()
        self._backlog.release()         # a pull filter compiling is cancelled

    def _handshake_timeout(self) -> None:
        self._timer = None
        if self.state in (AWAIT_RQST, AWAIT_RPLY):
            self.service.notes.log(
                "federation handshakes timed out", logging.WARNING,
                "federation peer %s: no %s within %.0f s; closing", self.peer,
                "FedConnRqst" if self.state == AWAIT_RQST else "FedConnRply",
                self.service.config.request_timeout)
            self.close(0)

    def _schedule_keepalive(self) -> None:
        loop = asyncio.get_running_loop()
        self._keepalive = loop.call_later(self.service.config.keepalive, self._keepalive_due)

    def _keepalive_due(self) -> None:
        self._keepalive = None
        if self.state != LINKED:
            return
        config = self.service.config
        idle = time.monotonic() - self._last_rx
        if self._test_pending and idle >= config.keepalive:
            log.warning("federation peer %r (%s) stopped responding; closing",
                        self.remote_domain, self.peer)
            self.close(0)
            return
        if idle >= config.keepalive:
            self._test_pending = True
            self._send(TestConn())
        else:
            self._test_pending = False
        self._schedule_keepalive()

    # -- receiving ---------------------------------------------------------------------
    def _body(self, body: bytes) -> None:
        if len(body) > OFF_LOOP_BYTES and body[:4] == _FED_SUB_REPLACE and \
                self.state == LINKED:
            self._sub_replace_off_loop(body)
            return
        try:
            packet, attrs_end = decode_fed_notify(body, self.service.limits)
        except ProtocolError as exc:
            self._malformed(exc)
            return
        if self.state == AWAIT_RQST:
            if isinstance(packet, FedConnRqst):
                self._fed_conn_rqst(packet)
            else:
                self.violation(f"{type(packet).__name__} before FedConnRqst")
        elif self.state == AWAIT_RPLY:
            self.answered = True
            if isinstance(packet, FedConnRply):
                self._fed_conn_rply(packet)
            elif isinstance(packet, Nack):
                log.warning("federation router at %s refused our link: Nack %d %s",
                            self.peer, packet.error, packet.message)
                self.service.stats.links_refused += 1
                self.close(0)
            elif isinstance(packet, Disconn):
                self.close(0)
            else:
                self.violation(f"{type(packet).__name__} before FedConnRply")
        elif self.state == LINKED:
            if attrs_end:
                self._fed_notify(packet, body[4:attrs_end])  # type: ignore[arg-type]
            else:
                self._linked_packet(packet)

    def _malformed(self, exc: ProtocolError) -> None:
        """A bad FedSubReplace is Nacked; any other bad packet ends the link."""
        pid, xid = exc.packet_id, exc.xid
        if pid == FedSubReplace.ID and xid and self.state == LINKED:
            self.service.notes.log("bad pull filters from federation peers", logging.WARNING,
                                   "federation peer %r sent a bad pull filter: %s",
                                   self.remote_domain, exc)
            self._send(Nack(xid, int(NackCode.PROT_ERROR), f"bad SubAST: {exc}"[:200]))
            return
        self.violation(f"malformed packet: {exc}")

    def _fed_conn_rqst(self, p: FedConnRqst) -> None:
        service = self.service
        if p.major_version != VERSION_MAJOR or p.minor_version > VERSION_MINOR:
            reason = (f"incompatible federation protocol version {p.major_version}."
                      f"{p.minor_version} (this router speaks {VERSION_MAJOR}.{VERSION_MINOR})")
            self._refuse(p.xid, int(NackCode.PROT_INCOMPAT), reason)
            return
        problem, _classes = service.check_domain(p.router_domain, None)
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
        self._send(FedConnRply(p.xid, service.domain))
        self._established(p.router_domain, *classes)  # type: ignore[misc]

    def _refuse(self, xid: int, code: int, reason: str, told: str | None = None) -> None:
        """Nack the FedConnRqst (with ``told``, else ``reason``) and close;
        the log says ``reason``."""
        self.service.notes.log("refused federation links", logging.WARNING,
                               "refused federation link from %s: %s", self.peer, reason)
        self.service.stats.links_refused += 1
        self._send(Nack(xid, code, (reason if told is None else told)[:200]))
        self.state = CLOSED
        self._cancel_timers()
        if self.transport is not None:
            self.transport.close()

    def _fed_conn_rply(self, p: FedConnRply) -> None:
        if p.xid != self._rqst_xid:
            self.violation(f"FedConnRply for xid {p.xid}, not {self._rqst_xid}")
            return
        problem, classes = self.service.check_domain(p.router_domain, self.spec)
        if problem:
            log.warning("federation link to %s: %s; closing", self.peer, problem)
            self.service.stats.links_refused += 1
            self.close(DisconnReason.PROTOCOL_ERRORS, problem[:200])
            return
        self._established(p.router_domain, *classes)  # type: ignore[misc]

    def _established(self, domain: str, outgoing: Filter, incoming: Filter) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.remote_domain = domain
        self.outgoing, self.incoming = outgoing, incoming
        self.state = LINKED
        self.established = True
        self._schedule_keepalive()
        log.info("federation link %s %r (%s) established: outgoing %s, incoming %s",
                 "to" if self.role == "connect" else "from", domain, self.peer,
                 outgoing.text, incoming.text)
        self.service.link_established(self)

    def _linked_packet(self, packet: object) -> None:
        if isinstance(packet, FedNotify):
            self._fed_notify(packet, None)
        elif isinstance(packet, FedSubReplace):
            self._fed_sub_replace(packet)
        elif isinstance(packet, Ack):
            if self._requests.pop(packet.xid, None) is not None and \
                    packet.xid == self._pull_xid:
                self.acked_pull = True
                self.service.pull_acked(self)
        elif isinstance(packet, Nack):
            log.warning("federation peer %r rejected our request (Nack %d: %s); closing",
                        self.remote_domain, packet.error, packet.message)
            self.close(DisconnReason.SHUTDOWN, "request rejected")
        elif isinstance(packet, TestConn):
            self._send(ConfConn())
        elif isinstance(packet, ConfConn):
            self._test_pending = False
        elif isinstance(packet, DropWarn):
            self.service.notes.log("DropWarns from federation peers", logging.WARNING,
                                   "federation peer %r dropped packets (DropWarn)",
                                   self.remote_domain)
        elif isinstance(packet, Disconn):
            log.info("federation peer %r disconnected (reason %d%s)", self.remote_domain,
                     packet.reason, f": {packet.args}" if packet.args else "")
            self.close(0)
        else:
            self.violation(f"unexpected {type(packet).__name__} on a federation link")

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
        service = self.service
        routing = p.routing
        if self.remote_domain not in routing:
            self.violation(f"FedNotify routing list {list(routing)[:8]!r} lacks the "
                           f"sender's domain {self.remote_domain!r}")
            return
        if len(routing) > service.config.max_routing:
            self.violation(f"FedNotify routing list of {len(routing)} domains (limit "
                           f"{service.config.max_routing})")
            return
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
        self.deliver_notify(p, block)

    def deliver_notify(self, p: FedNotify, block: bytes | None) -> None:
        """Deliver (and so forward) a FedNotify this router takes."""
        service = self.service
        routing = p.routing
        attrs = p.attributes
        try:
            service.host.deliver(attrs, block, p.deliver_insecure, p.keys, tuple(routing))
        except KeyRefused as exc:
            self.service.notes.log("FedNotify with bad keys ignored", logging.WARNING,
                                   "federation peer %r: FedNotify with bad keys ignored (%s)",
                                   self.remote_domain, exc.message)
            return
        self.stats.fed_notify_delivered += 1
        service.stats.fed_notify_delivered += 1


