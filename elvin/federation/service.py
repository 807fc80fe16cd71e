"""Federation links of a router (Elvin Federation Protocol 1.0), on asyncio.

``FederationService`` is owned by the ``Router`` when its configuration has
a ``federation`` section (``elvin.federation.config``). It

* listens on the ``ewaf://`` URLs and accepts routers listed in ``accept``
  (or any, with ``accept_any``), refusing the others with a Nack;
* dials every ``connect`` URL and keeps the link up: after a failure or a
  Disconn it redials with exponential backoff (``reconnect_min`` doubling up
  to ``reconnect_max``, with a little jitter), reset once a link is up;
* keeps every peer's pull filter up to date (``pullfilter.py``): local
  subscription changes reach it through the engine's predicate listener
  (one dict operation on the subscribe path), and a debounced task
  (``debounce`` seconds) recomputes the filters and sends a FedSubReplace to
  the peers whose filter changed;
* forwards: ``Router.deliver`` calls ``forward`` after matching; a
  notification goes to every link whose peer's pull filter and whose
  outgoing filter match it, unless the peer's domain is already in its
  routing list (which covers the link it came in on: a FedNotify must carry
  the sender's domain, 6.2.4). A FedNotify received passes the link's
  incoming filter, is delivered locally, and goes on with the routing list
  extended by this router's domain.

Keys: a FedNotify carries the notification's keys as they came from the
producer (its NotifyEmit keys plus its connection's notification keys) and
its ``deliver_insecure`` flag, exactly the fields the protocol has for them;
the receiving router applies the same secure-delivery rules as for a local
producer. A notification sent with ``deliver_insecure = false`` and no keys
can reach nobody and is not forwarded. (Avis forwards keys the same way
since 1.2.2.)

Bad peers: anything that does not decode, a packet that is not allowed in
the link's state, a FedNotify whose routing list lacks the sender's domain
or is longer than ``max_routing``, a wrong protocol version or an unknown
domain get a Nack (for a request) or a Disconn (reason 4) and the link is
closed, with the reason logged; clients of the router never notice.

Dead peers: TestConn after ``keepalive`` seconds of silence, and the link
is closed when the peer says nothing for another ``keepalive``; a
FedSubReplace not acknowledged within ``request_timeout`` is resent
``request_retries`` times (as Avis does) and then the link is closed
("request timeout" in the log). Outgoing links are redialled.

TLS: ``ewaf:1.0/ssl,none,xdr/host:port`` listeners serve the router's
``tls-cert``/``tls-key``; outgoing TLS links verify the peer against
``tls_ca`` (default: the system trust store; never unverified), and a failed
handshake is logged once per link with its URL.

Statistics (``FederationService.stats`` and each link's ``stats``) count
FedNotify packets sent and received, so tests can check where traffic went.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import random
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elvin.errors import NackCode, ProtocolError, SubscriptionError
from elvin.federation.config import (
    ConnectSpec,
    FederationConfig,
    Filter,
    parse_ewaf_uri,
)
from elvin.federation.packets import (
    VERSION_MAJOR,
    VERSION_MINOR,
    Ack,
    FedConnRply,
    FedConnRqst,
    FedNotify,
    FedSubReplace,
    decode_fed_notify,
    fed_notify_frame,
    frame_fed_packet,
    keys_block,
    routing_block,
)
from elvin.federation.pullfilter import PullMatcher, compile_term, compute_pull_filter
from elvin.federation.subast import PullFilter, encode_subast
from elvin.keys import Keys
from elvin.protocol import (
    ConfConn,
    Disconn,
    DisconnReason,
    DropWarn,
    Nack,
    TestConn,
    encode_attributes,
)
from elvin.protocol.framing import FrameDecoder
from elvin.protocol.limits import DEFAULT_LIMITS, Limits
from elvin.router.security import KeyError_, check_keys, prepare_notification

log = logging.getLogger("elvin.federation")

__all__ = ["FederationService", "FederationStats", "Link"]

#: Avis's implementation-specific Nack code for a refused router domain
#: (codes 2500-2599 are for implementations): we use the same.
NACK_INVALID_DOMAIN = 2500

AWAIT_RQST, AWAIT_RPLY, LINKED, CLOSED = "await-rqst", "await-rply", "linked", "closed"
_MAX_WRITE_BUFFER = 8 * 1024 * 1024   # FedNotify beyond this backlog are dropped


@dataclass
class FederationStats:
    fed_notify_sent: int = 0
    fed_notify_received: int = 0
    fed_notify_delivered: int = 0      # received and passed the incoming filter
    fed_notify_filtered: int = 0       # received, refused by the incoming filter
    fed_notify_looped: int = 0         # received with our own domain in the routing list
    fed_notify_dropped: int = 0        # not sent: the peer's connection was backed up
    sub_replace_sent: int = 0
    sub_replace_received: int = 0
    links_established: int = 0
    links_refused: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class Link(asyncio.Protocol):
    """One federation connection (either end), with its handshake state."""

    def __init__(self, service: FederationService, role: str,
                 spec: ConnectSpec | None = None) -> None:
        self.service = service
        self.role = role                      # "connect" or "accept"
        self.spec = spec
        self.state = AWAIT_RPLY if role == "connect" else AWAIT_RQST
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder(service.limits)
        self.peer = "?"
        self.remote_domain: str | None = None
        self.outgoing: Filter = Filter(False)
        self.incoming: Filter = Filter(False)
        self.remote_pull: PullFilter = False          # the peer's last pull filter
        self.remote_match: Any = False                # PullMatcher, or True / False
        self.remote_matcher = PullMatcher()
        self._replaces: collections.deque[FedSubReplace] = collections.deque()
        self._replace_task: asyncio.Task | None = None
        self.sent_pull: bytes | None = None           # encoding of the last one we sent
        self.acked_pull = False
        self._pull_sent: PullFilter = False           # ... and the filter itself (retries)
        self._pull_xid = 0                            # xid of the latest FedSubReplace
        #: requests awaiting an Ack/Nack: xid -> (deadline on the loop clock, attempt)
        self._requests: dict[int, tuple[float, int]] = {}
        self._request_timer: asyncio.TimerHandle | None = None
        self.established = False
        self.stats = FederationStats()
        self.closed = asyncio.get_running_loop().create_future()
        self._xids = itertools.count(1)
        self._rqst_xid = 0
        self._timer: asyncio.TimerHandle | None = None
        self._keepalive: asyncio.TimerHandle | None = None
        self._last_rx = time.monotonic()
        self._test_pending = False
        self._drop_warned = False

    def __repr__(self) -> str:
        return f"<Link {self.role} {self.peer} {self.remote_domain or '?'} {self.state}>"

    # -- asyncio -----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, AttributeError, ValueError):
                pass
        self.service._opened(self)
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
        self.service._closed(self)
        if not self.closed.done():
            self.closed.set_result(self.established)

    def data_received(self, data: bytes) -> None:
        self._last_rx = time.monotonic()
        try:
            bodies = self.decoder.feed_frames(data)
        except ProtocolError as exc:
            # the bodies that arrived whole before the bad header are good
            # packets of this peer's: act on them before closing the link
            for body in exc.frames:
                if self.state == CLOSED:
                    break
                self._body(body)
            self.violation(f"bad frame: {exc}")
            return
        for body in bodies:
            if self.state == CLOSED:
                return
            self._body(body)

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
        self.service._unlink(self)     # the domain may link again at once
        self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def violation(self, reason: str) -> None:
        log.warning("federation peer %s (%s) violated the protocol: %s; disconnecting",
                    self.peer, self.remote_domain or "unknown domain", reason)
        self.close(DisconnReason.PROTOCOL_ERRORS, reason[:200])

    def _cancel_timers(self) -> None:
        for handle in (self._timer, self._keepalive, self._request_timer):
            if handle is not None:
                handle.cancel()
        self._timer = self._keepalive = self._request_timer = None
        self._requests.clear()
        if self._replace_task is not None:
            self._replace_task.cancel()
            self._replace_task = None

    def _handshake_timeout(self) -> None:
        self._timer = None
        if self.state in (AWAIT_RQST, AWAIT_RPLY):
            log.warning("federation peer %s: no %s within %.0f s; closing", self.peer,
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
        try:
            packet, attrs_end = decode_fed_notify(body, self.service.limits)
        except ProtocolError as exc:
            pid, xid = exc.packet_id, exc.xid
            if pid == FedSubReplace.ID and xid and self.state == LINKED:
                log.warning("federation peer %r sent a bad pull filter: %s",
                            self.remote_domain, exc)
                self._send(Nack(xid, int(NackCode.PROT_ERROR), f"bad SubAST: {exc}"[:200]))
                return
            self.violation(f"malformed packet: {exc}")
            return
        if self.state == AWAIT_RQST:
            if isinstance(packet, FedConnRqst):
                self._fed_conn_rqst(packet)
            else:
                self.violation(f"{type(packet).__name__} before FedConnRqst")
        elif self.state == AWAIT_RPLY:
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

    def _fed_conn_rqst(self, p: FedConnRqst) -> None:
        service = self.service
        if p.major_version != VERSION_MAJOR or p.minor_version > VERSION_MINOR:
            reason = (f"incompatible federation protocol version {p.major_version}."
                      f"{p.minor_version} (this router speaks {VERSION_MAJOR}.{VERSION_MINOR})")
            self._refuse(p.xid, int(NackCode.PROT_INCOMPAT), reason)
            return
        problem, classes = service.check_domain(p.router_domain, None)
        if problem:
            self._refuse(p.xid, NACK_INVALID_DOMAIN, problem)
            return
        self._send(FedConnRply(p.xid, service.domain))
        self._established(p.router_domain, *classes)  # type: ignore[misc]

    def _refuse(self, xid: int, code: int, reason: str) -> None:
        log.warning("refused federation link from %s: %s", self.peer, reason)
        self.service.stats.links_refused += 1
        self._send(Nack(xid, code, reason[:200]))
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
        self.service._linked(self)

    def _linked_packet(self, packet: object) -> None:
        if isinstance(packet, FedNotify):
            self._fed_notify(packet, None)
        elif isinstance(packet, FedSubReplace):
            self._fed_sub_replace(packet)
        elif isinstance(packet, Ack):
            if self._requests.pop(packet.xid, None) is not None and \
                    packet.xid == self._pull_xid:
                self.acked_pull = True
        elif isinstance(packet, Nack):
            log.warning("federation peer %r rejected our request (Nack %d: %s); closing",
                        self.remote_domain, packet.error, packet.message)
            self.close(DisconnReason.SHUTDOWN, "request rejected")
        elif isinstance(packet, TestConn):
            self._send(ConfConn())
        elif isinstance(packet, ConfConn):
            self._test_pending = False
        elif isinstance(packet, DropWarn):
            log.warning("federation peer %r dropped packets (DropWarn)", self.remote_domain)
        elif isinstance(packet, Disconn):
            log.info("federation peer %r disconnected (reason %d%s)", self.remote_domain,
                     packet.reason, f": {packet.args}" if packet.args else "")
            self.close(0)
        else:
            self.violation(f"unexpected {type(packet).__name__} on a federation link")

    def _fed_sub_replace(self, p: FedSubReplace) -> None:
        """Small changes apply at once; a filter with many new terms is
        compiled by a task that yields to the event loop between batches
        (clients keep being served), then applied and acknowledged. Requests
        are applied in order either way."""
        self.stats.sub_replace_received += 1
        self.service.stats.sub_replace_received += 1
        max_terms = self.service.config.max_disjuncts * 2
        if self._replace_task is None and not self._replaces and \
                len(self.remote_matcher.missing(p.pull_filter, max_terms)) <= 64:
            self._apply_sub_replace(p)
            return
        self._replaces.append(p)
        if self._replace_task is None:
            self._replace_task = asyncio.get_running_loop().create_task(
                self._sub_replace_worker())

    async def _sub_replace_worker(self) -> None:
        max_terms = self.service.config.max_disjuncts * 2
        try:
            while self._replaces and self.state == LINKED:
                p = self._replaces.popleft()
                for i, term in enumerate(self.remote_matcher.missing(p.pull_filter,
                                                                     max_terms)):
                    try:
                        compile_term(term)       # cached: update() finds it compiled
                    except Exception:
                        break                    # update() reports it
                    if i % 32 == 31:
                        await asyncio.sleep(0)
                        if self.state != LINKED:
                            return
                self._apply_sub_replace(p)
        finally:
            self._replace_task = None

    def _apply_sub_replace(self, p: FedSubReplace) -> None:
        matcher = self.remote_matcher
        try:
            matcher.update(p.pull_filter, self.service.config.max_disjuncts * 2)
        except SubscriptionError as exc:
            log.warning("federation peer %r sent a pull filter we cannot use: %s",
                        self.remote_domain, exc)
            self._send(Nack(p.xid, int(exc.nack_code), str(exc)[:200]))
            return
        except Exception as exc:   # never let a peer's tree hurt the router
            log.warning("federation peer %r sent an unusable pull filter: %s",
                        self.remote_domain, exc)
            self._send(Nack(p.xid, int(NackCode.PARSE_ERROR), "unusable pull filter"))
            return
        self.remote_pull = p.pull_filter
        self.remote_match = matcher if matcher.constant is None else matcher.constant
        self._send(Ack(p.xid))
        self.service._remote_pull_changed(self)

    def _fed_notify(self, p: FedNotify, block: bytes | None) -> None:
        service = self.service
        self.stats.fed_notify_received += 1
        service.stats.fed_notify_received += 1
        routing = p.routing
        if self.remote_domain not in routing:
            self.violation(f"FedNotify routing list {list(routing)[:8]!r} lacks the "
                           f"sender's domain {self.remote_domain!r}")
            return
        if len(routing) > service.config.max_routing:
            self.violation(f"FedNotify routing list of {len(routing)} domains (limit "
                           f"{service.config.max_routing})")
            return
        if service.domain in routing:
            self.stats.fed_notify_looped += 1
            service.stats.fed_notify_looped += 1
            return
        attrs = p.attributes
        if not self.incoming.matches(attrs):
            self.stats.fed_notify_filtered += 1
            service.stats.fed_notify_filtered += 1
            return
        try:
            check_keys(p.keys)
        except KeyError_ as exc:
            log.warning("federation peer %r: FedNotify with bad keys ignored (%s)",
                        self.remote_domain, exc.message)
            return
        self.stats.fed_notify_delivered += 1
        service.stats.fed_notify_delivered += 1
        service.inject(attrs, block, p.deliver_insecure, p.keys, routing)


class _Connector:
    """Keeps one outgoing link up, redialling with exponential backoff."""

    def __init__(self, service: FederationService, spec: ConnectSpec) -> None:
        self.service = service
        self.spec = spec
        self.link: Link | None = None
        self._reported = ""          # the last failure logged as a warning
        self.task = asyncio.get_running_loop().create_task(self._run())

    def _failed(self, problem: str) -> None:
        """Log a TLS failure as a warning once (repeats at debug level)."""
        message = f"federation link to {self.spec.url}: {problem}"
        if message != self._reported:
            self._reported = message
            log.warning("%s; will retry", message)
        else:
            log.debug("%s", message)

    async def _run(self) -> None:
        service = self.service
        uri = parse_ewaf_uri(self.spec.url)
        host = uri.host.strip("[]")
        delay = service.config.reconnect_min
        loop = asyncio.get_running_loop()
        while not service.stopping:
            link = None
            tls: dict[str, Any] = {}
            try:
                if uri.secure:
                    tls = {"ssl": service.client_ssl(), "server_hostname": host,
                           "ssl_handshake_timeout": service.config.connect_timeout}
                _t, link = await asyncio.wait_for(
                    loop.create_connection(lambda: Link(service, "connect", self.spec),
                                           host, uri.port, **tls),
                    service.config.connect_timeout)
            except ssl.SSLError as exc:
                detail = exc.reason or str(exc)
                if isinstance(exc, ssl.SSLCertVerificationError):
                    detail = f"certificate verify failed: {exc.verify_message or detail}"
                self._failed(f"TLS handshake failed: {detail}")
            except (TimeoutError, OSError) as exc:
                log.debug("federation connect to %s failed: %s", self.spec.url, exc)
            except Exception as exc:       # RouterStartError: tls_ca cannot be loaded
                self._failed(str(exc))
            if link is not None:
                self.link = link
                was_linked = await link.closed
                self.link = None
                if was_linked:
                    self._reported = ""
                    delay = service.config.reconnect_min
            if service.stopping:
                return
            pause = delay * (1 + 0.1 * random.random())
            log.debug("federation: redialling %s in %.2f s", self.spec.url, pause)
            await asyncio.sleep(pause)
            delay = min(delay * 2, service.config.reconnect_max)

    async def stop(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):
            pass
        if self.link is not None:
            self.link.close(DisconnReason.SHUTDOWN, "router shutting down")


class FederationService:
    def __init__(self, router: Any, config: FederationConfig,
                 limits: Limits | None = None) -> None:
        self.router = router
        self.config = config
        self.domain: str = config.router_domain or f"{socket.getfqdn()}:{router.router_id}"
        self.limits = limits if limits is not None else _link_limits(router)
        self.stats = FederationStats()
        self.stopping = False
        self.links: set[Link] = set()              # every open connection
        self.linked: dict[str, Link] = {}          # established, by remote domain
        self._servers: list[asyncio.AbstractServer] = []
        self._tls_servers: set[asyncio.AbstractServer] = set()
        self._client_ssl: tuple[str | None, ssl.SSLContext] | None = None
        self._connectors: list[_Connector] = []
        self._local: dict[Any, None] = {}
        self._flush: asyncio.TimerHandle | None = None
        self._forwarders: tuple[Link, ...] = ()
        self._routing_cache: dict[tuple[str, ...], bytes] = {}

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> FederationService:
        engine = self.router.engine
        self._local = dict.fromkeys(engine.predicate_asts())
        engine.pred_listener = self._local_changed
        try:
            for uri in self.config.listen:
                await self._listen(uri)
            if any(parse_ewaf_uri(spec.url).secure for spec in self.config.connect):
                self.client_ssl()          # a bad tls_ca stops the start, clearly
        except BaseException:
            await self._close_servers()
            raise
        for url in self.urls:
            log.info("federation: router domain %r listening on %s", self.domain, url)
        for spec in self.config.connect:
            self._connectors.append(_Connector(self, spec))
        return self

    async def stop(self) -> None:
        """Disconn every link (reason 1), stop redialling, close the listeners."""
        self.stopping = True
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        if self.router.engine.pred_listener == self._local_changed:
            self.router.engine.pred_listener = None
        await self._close_servers()
        for connector in self._connectors:
            await connector.stop()
        self._connectors = []
        for link in list(self.links):
            link.close(DisconnReason.SHUTDOWN, "router shutting down")
        deadline = time.monotonic() + 2.0
        while self.links and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for link in list(self.links):
            link.abort()

    async def _listen(self, uri: str) -> None:
        """Listen on one ``federation.listen`` URL (RouterStartError if not)."""
        from elvin.router.server import RouterStartError

        parsed = parse_ewaf_uri(uri)
        host = None if parsed.host in ("", "*") else parsed.host.strip("[]")
        context = self._server_ssl(uri) if parsed.secure else None
        try:
            server = await asyncio.get_running_loop().create_server(
                lambda: Link(self, "accept"), host, parsed.port, reuse_address=True,
                ssl=context,
                ssl_handshake_timeout=self.config.connect_timeout if context else None)
        except OSError as exc:
            raise RouterStartError(f"cannot listen for federation on {uri}: "
                                   f"{exc.strerror or exc}") from None
        self._servers.append(server)
        if context is not None:
            self._tls_servers.add(server)

    def _server_ssl(self, uri: str) -> ssl.SSLContext:
        """The TLS context of a federation listener: the router's certificate
        and key (``tls-cert`` / ``tls-key``), as for client TLS listeners."""
        from elvin.router.server import RouterStartError

        config = self.router.config
        cert, key = getattr(config, "tls_cert", None), getattr(config, "tls_key", None)
        if not cert or not key:
            raise RouterStartError(f"federation listener {uri} uses TLS (ssl): give the "
                                   "router's --tls-cert and --tls-key")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise RouterStartError(f"federation listener {uri}: cannot load TLS certificate "
                                   f"{cert!r} / key {key!r}: {exc}") from None
        return context

    def client_ssl(self) -> ssl.SSLContext:
        """The TLS context for dialling ``ewaf:1.0/ssl,none,xdr/...`` links:
        the peer's certificate must chain to ``tls_ca`` (or, without it, to the
        system's trust store) and name the URL's host. There is deliberately
        no unverified mode: a self-signed peer needs ``tls_ca``.
        RouterStartError naming the file if it cannot be loaded."""
        ca = self.config.tls_ca
        if self._client_ssl is not None and self._client_ssl[0] == ca:
            return self._client_ssl[1]
        try:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            from elvin.router.server import RouterStartError
            links = ", ".join(spec.url for spec in self.config.connect
                              if parse_ewaf_uri(spec.url).secure)
            raise RouterStartError(f"federation.tls_ca {ca!r} (for {links}): cannot load "
                                   f"the CA certificate(s): {exc}") from None
        self._client_ssl = (ca, context)
        return context

    async def _close_servers(self) -> None:
        servers, self._servers = self._servers, []
        self._tls_servers.clear()
        for server in servers:
            server.close()
        for server in servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 1.0)
            except Exception:
                pass

    async def reconfigure(self, config: FederationConfig) -> None:
        """Apply a new ``[federation]`` section: listeners and outgoing links
        that changed are restarted, links whose peer is no longer allowed
        are closed, and every link's filters are replaced."""
        old = self.config
        self.config = config
        self._client_ssl = None          # tls_ca may have changed (file or contents)
        if config.router_domain and config.router_domain != self.domain:
            log.info("federation: router domain changes from %r to %r: relinking",
                     self.domain, config.router_domain)
            self.domain = config.router_domain
            self._routing_cache.clear()
            for link in list(self.links):
                link.close(DisconnReason.SHUTDOWN, "router domain changed")
        if list(config.listen) != list(old.listen):
            await self._close_servers()
            for uri in config.listen:
                try:
                    await self._listen(uri)
                except Exception as exc:        # RouterStartError
                    log.error("federation: %s", exc)
        keep: list[_Connector] = []
        wanted = list(config.connect)
        for connector in self._connectors:
            same = next((spec for spec in wanted if (spec.url, spec.router) ==
                         (connector.spec.url, connector.spec.router)), None)
            if same is not None:          # same peer: keep the link, new filters
                wanted.remove(same)
                connector.spec = same
                if connector.link is not None:
                    connector.link.spec = same
                keep.append(connector)
            else:
                await connector.stop()
        self._connectors = keep
        for spec in wanted:
            self._connectors.append(_Connector(self, spec))
        for link in list(self.linked.values()):
            problem, classes = self.check_domain(link.remote_domain, link.spec,  # type: ignore[arg-type]
                                                 relink=link)
            if problem:
                log.info("federation: closing link with %r: %s", link.remote_domain, problem)
                link.close(DisconnReason.SHUTDOWN, "no longer configured")
            else:
                link.outgoing, link.incoming = classes  # type: ignore[misc]
        self._refresh_forwarders()
        self._schedule(0.0)

    @property
    def urls(self) -> list[str]:
        out = []
        for server in self._servers:
            for sock in server.sockets or ():
                host, port = sock.getsockname()[:2]
                shown = f"[{host}]" if ":" in host else host
                url = (f"ewaf:1.0/ssl,none,xdr/{shown}:{port}" if server in self._tls_servers
                       else f"ewaf://{shown}:{port}")
                if url not in out:
                    out.append(url)
        return out

    # -- links ---------------------------------------------------------------------------
    def check_domain(self, domain: str, spec: ConnectSpec | None,
                     relink: Link | None = None) -> tuple[str, tuple[Filter, Filter] | None]:
        """(problem, None) to refuse ``domain``; ("", (outgoing, incoming)) to link."""
        if not domain:
            return "empty router domain", None
        if domain == self.domain:
            return f"router domain {domain!r} is this router's own", None
        existing = self.linked.get(domain)
        if existing is not None and existing is not relink:
            return f"router domain {domain!r} is already linked ({existing.peer})", None
        config = self.config
        if spec is not None:
            if spec.router is not None and spec.router != domain:
                return (f"{spec.url} answered as router domain {domain!r}, expected "
                        f"{spec.router!r}"), None
            return "", (Filter(spec.outgoing), Filter(spec.incoming))
        for accept in config.accept:
            if accept.router == domain:
                return "", (Filter(accept.outgoing), Filter(accept.incoming))
        if config.accept_any:
            return "", (Filter(config.accept_any_outgoing), Filter(config.accept_any_incoming))
        return f"router domain {domain!r} is not in this router's federation.accept", None

    def _opened(self, link: Link) -> None:
        self.links.add(link)
        if self.stopping:
            link.abort()

    def _linked(self, link: Link) -> None:
        self.linked[link.remote_domain] = link  # type: ignore[index]
        self.stats.links_established += 1
        link.send_pull_filter(*self._pull_for(link))
        self._refresh_forwarders()

    def _closed(self, link: Link) -> None:
        self.links.discard(link)
        self._unlink(link)

    def _unlink(self, link: Link) -> None:
        domain = link.remote_domain
        if domain is not None and self.linked.get(domain) is link:
            del self.linked[domain]
            self._refresh_forwarders()
            if link.remote_pull is not False and not self.stopping:
                self._schedule()

    def _refresh_forwarders(self) -> None:
        self._forwarders = tuple(
            link for link in self.linked.values()
            if link.state == LINKED and link.outgoing.ast is not False
            and link.remote_match is not False)

    def link_for(self, domain: str) -> Link | None:
        return self.linked.get(domain)

    # -- pull filters -------------------------------------------------------------------
    def _local_changed(self, ast: Any, added: bool) -> None:
        if added:
            self._local[ast] = None
        else:
            self._local.pop(ast, None)
        if self.linked:
            self._schedule()

    def _remote_pull_changed(self, link: Link) -> None:
        self._refresh_forwarders()
        if len(self.linked) > 1:
            self._schedule()

    def _schedule(self, delay: float | None = None) -> None:
        if self._flush is not None or self.stopping:
            return
        loop = asyncio.get_running_loop()
        self._flush = loop.call_later(self.config.debounce if delay is None else delay,
                                      self.flush_pull_filters)

    def _pull_for(self, link: Link) -> tuple[PullFilter, bytes]:
        """The pull filter for ``link`` and its encoding. One that would not
        fit comfortably in a packet is generalised to the link's incoming
        filter (the draft allows a more general pull filter, 6.2.3)."""
        others = [(other.outgoing.ast, other.remote_pull)
                  for other in self.linked.values() if other is not link]
        pull = compute_pull_filter(link.incoming.ast, self._local, others,
                                   self.config.max_disjuncts)
        encoded = encode_subast(pull)
        if len(encoded) > self.limits.max_packet_length // 2:
            pull = link.incoming.ast
            encoded = encode_subast(pull)
        return pull, encoded

    def flush_pull_filters(self) -> None:
        """Recompute every peer's pull filter and send the ones that changed."""
        self._flush = None
        for link in list(self.linked.values()):
            if link.state == LINKED:
                try:
                    link.send_pull_filter(*self._pull_for(link))
                except Exception:
                    log.exception("federation: computing the pull filter for %r failed",
                                  link.remote_domain)

    # -- forwarding ---------------------------------------------------------------------
    def forward(self, attrs: Mapping[str, Any], block: bytes | None, deliver_insecure: bool,
                nkeys: Any, routing: tuple[str, ...] = ()) -> int:
        """Send one notification on to every link that should have it; returns
        the number of FedNotify packets sent. Never raises."""
        forwarders = self._forwarders
        if not forwarders:
            return 0
        keys: Keys | None = getattr(nkeys, "raw", None) if nkeys is not None else None
        if not deliver_insecure and not keys:
            return 0          # secure-only without keys: nobody anywhere can receive it
        frame = None
        count = 0
        try:
            for link in forwarders:
                if link.remote_domain in routing:
                    continue
                match = link.remote_match
                if match is not True and not match(attrs):
                    continue
                if link.outgoing.ast is not True and not link.outgoing.matches(attrs):
                    continue
                if frame is None:
                    if block is None:
                        block = encode_attributes(attrs)
                    frame = fed_notify_frame(block, deliver_insecure,
                                             keys_block(keys) if keys else b"\0\0\0\0",
                                             self._routing_for(routing))
                if link.send_notify(frame):
                    count += 1
        except Exception:
            log.exception("federation: forwarding a notification failed")
        return count

    def _routing_for(self, routing: tuple[str, ...]) -> bytes:
        cached = self._routing_cache.get(routing)
        if cached is None:
            cached = routing_block((self.domain, *routing))
            if len(self._routing_cache) > 1024:
                self._routing_cache.clear()
            self._routing_cache[routing] = cached
        return cached

    def inject(self, attrs: dict, block: bytes | None, deliver_insecure: bool, keys: Keys,
               routing: tuple[str, ...]) -> None:
        """A FedNotify that passed its link's checks: deliver it locally and
        forward it (``Router.deliver`` calls ``forward`` with ``routing``)."""
        router = self.router
        router.stats.notifications_in += 1
        router.deliver(attrs, block, deliver_insecure, prepare_notification(keys),
                       routing=tuple(routing),
                       producer=f"federation:{routing[-1]}" if routing else None)


def _link_limits(router: Any) -> Limits:
    limits = getattr(router, "initial_limits", None)
    return limits if isinstance(limits, Limits) else DEFAULT_LIMITS
