"""Federation links of a router (Elvin Federation Protocol 1.0), on asyncio.

``FederationService`` is owned by the ``Router`` when its configuration has
a ``federation`` section (``elvin.federation.config``); it sees the router
only through ``elvin.federation.host.FederationHost``. It

* listens on the ``ewaf://`` URLs and accepts routers listed in ``accept``
  (or any, with ``accept_any``) from the addresses their ``hosts`` allow,
  with a certificate where ``require_authenticated`` says so, refusing the
  others with a Nack (``admission.py``);
* dials every ``connect`` URL and keeps the link up (``connector.py``);
* keeps every peer's pull filter up to date (``pullfilter.py``): the host
  reports local subscription changes (one dict operation on the subscribe
  path), and a debounced task (``debounce`` seconds) recomputes the filters
  and sends a FedSubReplace to the peers whose filter changed;
* forwards: the router calls ``forward`` after matching; a notification goes
  to every link whose peer's pull filter and whose outgoing filter match
  it, unless the peer's domain is already in its routing list (which covers
  the link it came in on: a FedNotify must carry the sender's domain,
  6.2.4). A FedNotify received passes the link's incoming filter, is
  delivered locally (``FederationHost.deliver``), and goes on with the
  routing list extended by this router's domain;
* with ``routing = "trees"`` (the default), learns the federation's topology
  from the routers that take part (``topology.py``: announcements carried as
  FedNotify between them, participation said by a term of the pull filter)
  and narrows both steps above to the notification's shortest-path tree: a
  FedNotify from anyone but this router's parent in the tree is dropped
  (``on_tree``), and ``forward`` sends only to its children. A
  notification that no graph this router holds places is dropped, never
  flooded (a cycle would duplicate it); one published here before any
  graph is agreed is held until one is (at most about
  ``agreement_timeout``: the view stops waiting for silent peers then).

The protocol of one link, and what happens to peers that break it or go
silent, is ``link.py``. A notification sent with ``deliver_insecure =
false`` and no keys can reach nobody and is not forwarded.

TLS: ``ewaf:1.0/ssl,none,xdr/host:port`` listeners serve the router's
``tls-cert``/``tls-key`` and run the handshake themselves (``tlsaccept.py``:
a failure is logged with the peer's address); when an accept entry requires
authentication they ask the dialling router for a certificate chaining to
``tls_ca``. Outgoing TLS links verify the peer against ``tls_ca`` (default:
the system trust store; never unverified) and show the router's own
certificate, or the connect entry's ``client_cert``.

Statistics (``FederationService.stats`` and each link's ``stats``) count
FedNotify packets sent and received, so tests can check where traffic went.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections.abc import Mapping
from typing import Any

from elvin.cli_common import listen_error_reason, listen_error_status
from elvin.errors import RouterStartError
from elvin.federation.admission import (
    NEEDS_DNS,
    Peer,
    Refusal,
    accept_rule,
    admission_warnings,
    check_peer,
    check_peer_names,
    not_accepted,
    open_entries,
)
from elvin.federation.config import ConnectSpec, FederationConfig, Filter, parse_ewaf_uri
from elvin.federation.connector import Connector
from elvin.federation.dedup import Recent, content_key
from elvin.federation.host import FederationHost
from elvin.federation.link import AWAIT_RQST, LINKED, FederationStats, Link
from elvin.federation.lookups import HostLookups
from elvin.federation.packets import fed_notify_frame, keys_block, routing_block
from elvin.federation.pullfilter import compute_pull_filter
from elvin.federation.subast import TRUE_FILTER_AST, PullFilter, encode_subast
from elvin.federation.subtrees import BehindMatchers, compute_groups, subtrees, with_groups
from elvin.federation.tlsaccept import Handshaking
from elvin.federation.topology import (
    ANNOUNCEMENT_ATTR,
    DEDUP_WINDOW,
    STAMP_PREFIX,
    Announcement,
    BadAnnouncement,
    LinkState,
    Route,
    TopologyView,
    decode_announcement,
    encode_announcement,
    split_markers,
    split_routing,
    with_marker,
)
from elvin.keys import Keys
from elvin.protocol import DisconnReason, encode_attributes
from elvin.ratelog import RateLimitedLog
from elvin.tls import ask_for_client_certificates

log = logging.getLogger("elvin.federation")

#: connections from one address that may wait for their FedConnRqst at once
#: (TLS handshakes and host-name checks included): a peer cannot hold more
#: than this many of the router's sockets and lookups before it is admitted
MAX_WAITING_PER_ADDRESS = 8
#: notifications published while no topology is agreed that are held (sent
#: once one is; it takes at most about ``agreement_timeout``)
MAX_HELD = 10_000

__all__ = ["FederationService", "FederationStats", "Link"]


class FederationService:
    """The federation of one router: its listeners, links and pull filters."""

    def __init__(self, host: FederationHost, config: FederationConfig) -> None:
        self.host = host
        self.config = config
        self.domain: str = config.router_domain or f"{socket.getfqdn()}:{host.router_id}"
        self.limits = host.limits
        self.stats = FederationStats()
        #: what dialling strangers can make it say, rate-limited (elvin.ratelog):
        #: refused FedConnRqst, handshakes timed out, protocol violations
        self.notes = RateLimitedLog(log)
        self.stopping = False
        self.links: set[Link] = set()              # every open connection
        self.linked: dict[str, Link] = {}          # established, by remote domain
        self._servers: list[asyncio.Server] = []
        self._tls_servers: set[asyncio.AbstractServer] = set()
        #: client TLS contexts by (tls_ca, certificate, key)
        self._client_ssl: dict[tuple[str | None, str | None, str | None], ssl.SSLContext] = {}
        #: accepted connections whose TLS handshake is under way (tlsaccept.py)
        self._handshakes: set[asyncio.BaseTransport] = set()
        #: the last handshake failure logged as a warning, by peer address
        self._tls_reported: dict[str, str] = {}
        #: addresses told (once) that they have too many connections waiting
        self._crowded: set[str] = set()
        self._listen_key: tuple[Any, ...] = ()
        #: the DNS lookups host names in ``hosts`` take: bounded, cached (lookups.py)
        self.resolver = HostLookups(lambda: self.config.connect_timeout)
        self._connectors: list[Connector] = []
        self._local: dict[Any, None] = {}
        self._flush: asyncio.TimerHandle | None = None
        self._forwarders: tuple[Link, ...] = ()
        self._everyone: tuple[tuple[Link, Any], ...] = ()
        self._routing_cache: dict[tuple[str, ...], bytes] = {}
        #: what this router knows of the federation's topology (None: "flood")
        self.topology: TopologyView | None = self._new_view(config)
        #: routing = "flood": the copies taken here lately (``first_here``)
        self.flood_recent: Recent | None = self._new_flood_memory(config)
        self._topology_tick: asyncio.Handle | None = None
        self._deadline: asyncio.TimerHandle | None = None     # the view's next tick
        #: notifications published here while no graph is agreed (the view
        #: has not heard from every peer yet): sent, in order, once one is
        self._held: list[tuple[Mapping[str, Any], bytes | None, bool, Any]] = []
        self._held_dropped = 0
        #: FedNotify from peers whose link the agreed topology does not have
        #: yet (it just came up): taken or dropped once it does
        #: (link, packet, block, ``TopologyView.life_mark`` when first held)
        self._held_in: list[tuple[Link, Any, bytes | None, int]] = []
        self._route_memo: tuple[Any, Any, Route | None] = ((), None, None)
        #: routes that do not depend on the notification (no filtered link in
        #: their graph), by routing list: one dict lookup per hop on the hot path
        self._routes: dict[tuple[tuple[str, ...], str | None], Route] = {}
        #: per route (by id, the route kept alive beside it): the links it goes
        #: on to and their matchers (``_targets``); cleared when links, pull
        #: filters or graphs change
        self._plans: dict[int, tuple[Route, list[tuple[Link, Any]]]] = {}
        self._bad_announcers: set[str] = set()
        #: peers known to take part, announced as such once the pull filters
        #: that the new link changes have reached every peer (``_check_ready``)
        self._unready: set[Link] = set()
        #: links whose peer sent a FedNotify before any pull filter (it does
        #: not take part)
        self._plain: set[Link] = set()
        #: links whose peer has acknowledged a pull filter of this router at
        #: least once (``interest_unannounced``)
        self._acked_once: set[Link] = set()

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> FederationService:
        self._local = dict.fromkeys(self.host.watch_subscriptions(self._local_changed))
        try:
            await self._listen_all()
            for spec in self.config.connect:
                if parse_ewaf_uri(spec.url).secure:
                    self.client_ssl(spec)  # a bad tls_ca or certificate stops the start
        except BaseException:
            await self._close_servers()
            raise
        for url in self.urls:
            log.info("federation: router domain %r listening on %s", self.domain, url)
        self._say_who_may_link(self.config)
        for spec in self.config.connect:
            self._connectors.append(Connector(self, spec))
        for _ in self._local:           # restored before any link is up
            self._note_interest_gap()
        return self

    async def stop(self) -> None:
        """Disconn every link (reason 1), stop redialling, close the listeners."""
        self.stopping = True
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        if self._topology_tick is not None:
            self._topology_tick.cancel()
            self._topology_tick = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._held.clear()
        self._held_in.clear()
        self.host.unwatch_subscriptions(self._local_changed)
        await self._close_servers()
        for transport in list(self._handshakes):
            transport.abort()           # type: ignore[attr-defined]
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
        self.resolver.close()
        self.notes.close()

    def _say_who_may_link(self, config: FederationConfig) -> None:
        """Once at start (and at a reload): the rules that admit any address
        -- a warning when a listener is reachable from other machines
        (``admission_warnings``), else a note."""
        warnings = admission_warnings(config, config.listen)
        for warning in warnings:
            log.warning("federation: %s", warning)
        if not warnings:
            for entry in open_entries(config):
                log.info("federation: %s (listening on loopback only)", entry)

    def _listen_settings(self, config: FederationConfig) -> tuple[Any, ...]:
        """What the listeners are built from: a change restarts them."""
        return (tuple(config.listen), config.asks_for_certificates,
                config.tls_ca if config.asks_for_certificates else None)

    async def _listen_all(self) -> None:
        self._listen_key = self._listen_settings(self.config)
        for uri in self.config.listen:
            await self._listen(uri)

    async def _listen(self, uri: str) -> None:
        """Listen on one ``federation.listen`` URL (RouterStartError if not)."""
        parsed = parse_ewaf_uri(uri)
        host = None if parsed.host in ("", "*") else parsed.host.strip("[]")
        what = f"federation listener {uri}"
        context = self.host.server_tls(what) if parsed.secure else None
        if context is not None and self.config.asks_for_certificates:
            ask_for_client_certificates(context, self.config.tls_ca, what)
        def link() -> asyncio.Protocol:
            return Link(self, "accept")      # aborted at once if the router is stopping

        if context is None:
            factory = link
        else:
            def factory() -> asyncio.Protocol:
                return Handshaking(link, context, self.config.connect_timeout,
                                   self._handshake_failed, self._handshakes,
                                   lambda peer: self._room_for(peer.address, 0))
        try:
            server = await asyncio.get_running_loop().create_server(
                factory, host, parsed.port, reuse_address=True)
        except OSError as exc:
            raise RouterStartError(f"cannot listen for federation on {uri}: "
                                   f"{listen_error_reason(exc, parsed.port)}",
                                   listen_error_status(exc)) from None
        self._servers.append(server)
        if context is not None:
            self._tls_servers.add(server)

    def _handshake_failed(self, peer: Peer, exc: BaseException) -> None:
        """One warning per peer address and reason (repeats at debug level)."""
        self.stats.links_refused += 1
        if isinstance(exc, ssl.SSLCertVerificationError):
            detail = f"its certificate does not verify ({exc.verify_message or exc.reason})"
        elif isinstance(exc, ssl.SSLError):
            detail = exc.reason or str(exc)
        elif isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
            detail = "it did not finish the handshake in time"
        else:
            detail = str(exc) or type(exc).__name__
        where = f"{peer.address}:{peer.port}" if peer.address else "an unknown address"
        message = f"TLS handshake with {where} failed: {detail}; refused"
        key = peer.address or "?"
        if self._tls_reported.get(key) == detail:
            log.debug("federation: %s", message)
            return
        if len(self._tls_reported) > 1024:
            self._tls_reported.clear()
        self._tls_reported[key] = detail
        log.warning("federation: %s", message)

    def client_ssl(self, spec: ConnectSpec | None = None) -> ssl.SSLContext:
        """The TLS context for dialling ``ewaf:1.0/ssl,none,xdr/...`` links:
        the peer's certificate must chain to ``tls_ca`` (or, without it, to the
        system's trust store) and name the URL's host. There is deliberately
        no unverified mode: a self-signed peer needs ``tls_ca``. It shows the
        connect entry's ``client_cert``, else the router's own certificate,
        to a listener that asks. RouterStartError naming the file if one
        cannot be loaded."""
        ca = self.config.tls_ca
        cert: str | None
        key: str | None
        if spec is not None and spec.client_cert:
            cert, key = spec.client_cert, spec.client_key
        else:
            cert, key = self.host.client_certificate() or (None, None)
        cached = self._client_ssl.get((ca, cert, key))
        if cached is not None:
            return cached
        try:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            links = ", ".join(spec.url for spec in self.config.connect
                              if parse_ewaf_uri(spec.url).secure)
            raise RouterStartError(f"federation.tls_ca {ca!r} (for {links}): cannot load "
                                   f"the CA certificate(s): {exc}") from None
        if cert:
            try:
                context.load_cert_chain(cert, key)
            except (OSError, ssl.SSLError) as exc:
                raise RouterStartError(f"federation link to {spec.url if spec else '?'}: "
                                       f"cannot load the client certificate {cert!r} / key "
                                       f"{key!r}: {exc}") from None
        self._client_ssl[(ca, cert, key)] = context
        return context

    async def _close_servers(self) -> None:
        servers, self._servers = self._servers, []
        self._tls_servers.clear()
        for server in servers:
            server.close()
        for server in servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 1.0)
            except Exception:  # stopping: closed anyway
                log.debug("federation: a listener did not close cleanly", exc_info=True)

    async def reconfigure(self, config: FederationConfig) -> None:
        """Apply a new ``[federation]`` section: listeners and outgoing links
        that changed are restarted, links whose peer is no longer allowed
        are closed, and every link's filters are replaced."""
        old = self.config
        self.config = config
        self._client_ssl.clear()         # tls_ca may have changed (file or contents)
        relink = ""
        if config.router_domain and config.router_domain != self.domain:
            log.info("federation: router domain changes from %r to %r: relinking",
                     self.domain, config.router_domain)
            self.domain = config.router_domain
            self._routing_cache.clear()
            relink = "router domain changed"
        if relink or config.routing != old.routing:
            if not relink:
                log.info("federation: routing changes from %r to %r: relinking",
                         old.routing, config.routing)
                relink = "routing changed"
            self.topology = self._new_view(config)
            self.flood_recent = self._new_flood_memory(config)
            self._routes_changed()
            self._release_held()
            for link in list(self.links):
                link.close(DisconnReason.SHUTDOWN, relink)
        if self._listen_settings(config) != self._listen_key:
            await self._close_servers()
            self._listen_key = self._listen_settings(config)
            for uri in config.listen:
                try:
                    await self._listen(uri)
                except Exception as exc:  # noqa: BLE001 - RouterStartError: logged, keep serving
                    log.error("federation: %s", exc)
        self._say_who_may_link(config)
        keep: list[Connector] = []
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
            self._connectors.append(Connector(self, spec))
        for link in list(self.linked.values()):
            problem, classes = self.check_domain(link.remote_domain, link.spec,  # type: ignore[arg-type]
                                                 relink=link)
            if not problem and link.role == "accept":
                refusal = await self.admit_peer(link, link.remote_domain)  # type: ignore[arg-type]
                problem = refusal.log if refusal is not None else ""
                if link.state != LINKED or self.config is not config:
                    continue          # closed, or reconfigured again, meanwhile
            if problem:
                log.info("federation: closing link with %r: %s", link.remote_domain, problem)
                link.close(DisconnReason.SHUTDOWN, "no longer configured")
            else:
                link.outgoing, link.incoming = classes  # type: ignore[misc]
        self._refresh_forwarders()
        self._schedule(0.0)
        self._topology_soon()          # the links' filters are part of the announcement

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

    def link_report(self) -> list[dict[str, Any]]:
        """Every link this router dials or accepts, with its state (``linked``,
        ``connecting``, ``down``), for ``elvind status`` and the metrics."""
        rows: list[dict[str, Any]] = []
        dialled = set()
        for connector in self._connectors:
            link = connector.link
            if link is not None:
                dialled.add(id(link))
            rows.append({"peer": connector.spec.router or (link.remote_domain if link else None),
                         "url": connector.spec.url, "direction": "connect",
                         "state": connector.state, "failed_dials": connector.failed_dials,
                         "last_error": connector.last_error})
        accepted = {link.remote_domain: link for link in self.linked.values()
                    if link.role == "accept" and id(link) not in dialled
                    and link.remote_domain is not None}
        for domain in [a.router for a in self.config.accept] + sorted(
                set(accepted) - {a.router for a in self.config.accept}):
            link = accepted.get(domain)
            rows.append({"peer": domain, "url": link.peer if link else None,
                         "direction": "accept", "state": "linked" if link else "down",
                         "failed_dials": 0, "last_error": None})
        return rows

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
        if spec is not None:
            if spec.router is not None and spec.router != domain:
                return (f"{spec.url} answered as router domain {domain!r}, expected "
                        f"{spec.router!r}"), None
            return "", (Filter(spec.outgoing), Filter(spec.incoming))
        rule = accept_rule(self.config, domain)
        if rule is None:
            return not_accepted(self.config, domain), None
        return "", (Filter(rule.outgoing), Filter(rule.incoming))

    def check_peer(self, link: Link, domain: str) -> Refusal | None | asyncio.Task:
        """Whether the router at the other end of an accepted ``link`` may
        link as ``domain`` (``check_domain`` said the domain may): None, a
        ``Refusal``, or a task that answers the same after DNS lookups."""
        rule = accept_rule(self.config, domain)
        if rule is None:
            return Refusal(f"router domain {domain!r} is no longer accepted",
                           f"router domain {domain!r} is not accepted")
        peer = Peer.of(link.transport)
        verdict = check_peer(rule, domain, peer)
        if verdict is not NEEDS_DNS:
            return verdict
        return asyncio.get_running_loop().create_task(
            check_peer_names(rule, domain, peer, self.resolver))

    async def admit_peer(self, link: Link, domain: str) -> Refusal | None:
        """``check_peer``, waited for."""
        verdict = self.check_peer(link, domain)
        if isinstance(verdict, asyncio.Task):
            return await verdict
        return verdict

    def link_opened(self, link: Link) -> None:
        self.links.add(link)
        if self.stopping:
            link.abort()
        elif link.role == "accept" and link.transport is not None and \
                link.transport.get_extra_info("ssl_object") is None and \
                not self._room_for(link.address, 1):
            link.close(0)      # (a TLS link had its room checked before its handshake)

    def _room_for(self, address: str | None, counted: int) -> bool:
        """Whether a connection from ``address`` may wait for its
        FedConnRqst, with ``counted`` of it already among the waiting: at most
        ``MAX_WAITING_PER_ADDRESS`` do. Refusing says so once per address
        (until it has room again), then at debug level."""
        if address is None:
            return True
        waiting = sum(1 for link in self.links if link.role == "accept"
                      and link.state == AWAIT_RQST and link.address == address)
        waiting += sum(1 for transport in self._handshakes
                       if Peer.of(transport).address == address)
        if waiting - counted < MAX_WAITING_PER_ADDRESS:
            self._crowded.discard(address)
            return True
        self.stats.links_refused += 1
        message = (f"refused a connection from {address}: {waiting - counted} of its "
                   f"connections already wait for their FedConnRqst (at most "
                   f"{MAX_WAITING_PER_ADDRESS} from one address)")
        if address in self._crowded:
            log.debug("federation: %s", message)
        else:
            if len(self._crowded) > 1024:
                self._crowded.clear()
            self._crowded.add(address)
            log.warning("federation: %s", message)
        return False

    def link_established(self, link: Link) -> None:
        self.linked[link.remote_domain] = link  # type: ignore[index]
        self.stats.links_established += 1
        for connector in self._connectors:
            if connector.link is link:
                connector.linked()
        link.send_pull_filter(*self._pull_for(link))
        self._refresh_forwarders()
        self._topology_soon()

    def link_closed(self, link: Link) -> None:
        self.links.discard(link)
        self.unlink(link)

    def unlink(self, link: Link) -> None:
        self._plain.discard(link)
        self._acked_once.discard(link)
        if link in self._unready:
            self._unready.discard(link)
        elif self._unready:
            self._check_ready()          # it may have been the one not acknowledging
        domain = link.remote_domain
        if domain is not None and self.linked.get(domain) is link:
            del self.linked[domain]
            self._refresh_forwarders()
            self._topology_soon()        # at once: the others route around the link
            if link.remote_pull is not False and not self.stopping:
                self._schedule()

    def _refresh_forwarders(self) -> None:
        self._plans.clear()
        self._forwarders = tuple(
            link for link in self.linked.values()
            if link.state == LINKED and link.outgoing.ast is not False
            and link.remote_match is not False)
        #: every forwarder with its whole pull filter: where routing lists
        #: alone decide (flood, or an origin no agreed graph places)
        self._everyone = tuple((link, link.remote_match) for link in self._forwarders)

    def link_for(self, domain: str) -> Link | None:
        return self.linked.get(domain)

    # -- pull filters -------------------------------------------------------------------
    def _local_changed(self, ast: Any, added: bool) -> None:
        if added:
            self._local[ast] = None
            self._note_interest_gap()
        else:
            self._local.pop(ast, None)
        if self.linked:
            self._schedule()

    def interest_unannounced(self) -> list[str]:
        """The peers that may not know yet what this router's subscribers
        want: each link this router dials that is not up, each link up whose
        peer has not yet acknowledged any pull filter of this router, and,
        taking part, no agreed topology (its peers have not heard from it).

        Why: interest travels only in pull filters, so right after a
        (re)start, until the links are up and acknowledged, notifications
        published elsewhere for a subscriber here are not forwarded to this
        router: lost, and no router can tell, since none knew it was
        wanted. That window cannot be closed (the interest is not
        announceable yet), so it is reported: a subscription added in it is
        counted (``FederationStats.interest_gaps``) and logged
        (``_note_interest_gap``), and a caller that must know (a mobility
        move-in) can ask before it acknowledges. Later pull filter changes
        (a new subscription while the links are up) are not counted: they
        take the one round trip every Elvin federation has always taken."""
        missing = []
        for connector in self._connectors:
            link = connector.link
            if link is None or link.state != LINKED:
                missing.append(connector.spec.router or connector.spec.url)
        for domain, link in sorted(self.linked.items()):
            if link.state == LINKED and link not in self._acked_once:
                missing.append(domain)
        if self.topology is not None and self.topology.confirmed is None and self.linked:
            missing.append("(no topology agreed yet)")
        return missing

    def interest_unreachable(self, down_for: float) -> list[str]:
        """The dialled peers of ``interest_unannounced`` that waiting cannot
        help soon: no connection to them (between dials, or one under way)
        and none up for ``down_for`` seconds at least, so a peer off or
        unreachable for a while, not a link still coming up after a
        (re)start. A caller that waits for the interest at most ``down_for``
        (a mobility reply) names them at once instead of waiting for nothing."""
        names: list[str] = []
        for connector in self._connectors:
            name = connector.spec.router or connector.spec.url
            if (connector.link is None and connector.down_for() >= down_for
                    and name not in self.linked):    # not up by a link the peer dialled
                names.append(name)
        return names

    def interest_pending(self) -> list[str]:
        """``interest_unannounced``, and each peer that has not yet
        acknowledged the pull filter holding what this router's subscribers
        want now: a change still waiting for the debounce (every peer), or
        sent and not acknowledged. Until then a subscription just added here
        (a mobility proxy's, at a move-out) draws nothing published at that
        peer: the one round trip of every Elvin federation, which a caller
        whose acknowledgement promises "from now on" (a mobility move-out or
        move-in) waits for. Empty: every peer has this router's interest."""
        missing = self.interest_unannounced()
        changing = self._flush is not None
        for domain, link in sorted(self.linked.items()):
            if link.state == LINKED and domain not in missing and (
                    changing or (link.sent_pull is not None and not link.acked_pull)):
                missing.append(domain)
        return missing

    def _note_interest_gap(self) -> None:
        missing = self.interest_unannounced()
        if not missing:
            return
        self.stats.interest_gaps += 1
        self.notes.log("interest-gap", logging.WARNING,
                       "federation: a subscription was added before its interest could be "
                       "announced to %s (links not up or pull filters not acknowledged yet, "
                       "as after a restart): notifications published elsewhere until then "
                       "do not reach it", ", ".join(missing[:8]))

    def remote_pull_changed(self, link: Link) -> None:
        if self.topology is not None:
            self._take_marker(link)
        groups = link.remote_groups
        link.behind = (BehindMatchers(groups, link.remote_match, self.config.max_disjuncts * 2)
                       if groups is not None and self.topology is not None else None)
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
        others = [other for other in self.linked.values() if other is not link]
        plain = compute_pull_filter(link.incoming.ast, self._local,
                                    [(o.outgoing.ast, o.remote_pull) for o in others],
                                    self.config.max_disjuncts)
        pull = plain
        if self.topology is not None:
            # which router each term is for (subtrees.py): the peer then
            # sends only what the routers below this one in a tree want
            groups = compute_groups(
                link.incoming.ast, self.domain, self._local,
                [(o.outgoing.ast, o.remote_groups if o.participant else None, o.remote_pull)
                 for o in others], link.remote_domain, self.config.max_disjuncts)
            pull = with_marker(with_groups(plain, groups), self.domain, TRUE_FILTER_AST)
        encoded = encode_subast(pull)
        if len(encoded) > self.limits.max_packet_length // 2 and pull is not plain:
            pull = with_marker(plain, self.domain, TRUE_FILTER_AST)   # without the groups
            encoded = encode_subast(pull)
        if len(encoded) > self.limits.max_packet_length // 2:
            pull = link.incoming.ast
            if self.topology is not None:
                pull = with_marker(pull, self.domain, TRUE_FILTER_AST)
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
        if not self._forwarders:
            return 0
        targets: Any = None       # (link, matcher) pairs, or None: every forwarder
        if self.topology is not None:
            if ANNOUNCEMENT_ATTR in attrs:
                return 0      # a client's: it would read as an announcement next door
            route = self._route(routing, attrs)
            if route.graph is None:
                if not routing:           # published here before any graph is agreed
                    self._hold(attrs, block, deliver_insecure, nkeys)
                return 0
            if self._held and not routing:
                self._hold(attrs, block, deliver_insecure, nkeys)    # after those, in order
                return 0
            if not route.children:
                return 0
            targets = self._targets(route, attrs)
            if not targets:
                return 0
            if not routing:
                routing = (route.stamp,)  # type: ignore[assignment]
        if targets is None:               # routing = "flood": every forwarder
            targets = self._everyone
        keys: Keys | None = getattr(nkeys, "raw", None) if nkeys is not None else None
        if not deliver_insecure and not keys:
            return 0          # secure-only without keys: nobody anywhere can receive it
        frame = None
        count = 0
        try:
            for link, match in targets:
                if link.remote_domain in routing:
                    continue
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

    # -- topology (routing = "trees") -----------------------------------------------------
    # Announcements travel only between routers that take part: a peer takes
    # part once its pull filter carries its marker (``_take_marker``); it then
    # gets every announcement this router holds, and later the new ones.
    # Changes are gathered until the loop's next turn (``_topology_soon``), so
    # that a burst of announcements costs one graph computation, and a closed
    # link is announced at once: that is what failover waits for.

    def _take_marker(self, link: Link) -> None:
        pull, domains = split_markers(link.remote_pull, TRUE_FILTER_AST)
        if domains:
            link.remote_pull = pull
            if pull is False or pull is True:
                link.remote_match = pull
        participant = link.remote_domain in domains
        if participant == link.participant:
            if link.stats.sub_replace_received == 1:
                self._topology_soon()      # its first: no longer pending (_participation)
            return
        link.participant = participant
        log.info("federation: %r %s in learning the topology", link.remote_domain,
                 "takes part" if participant else "does not take part")
        if participant and self.topology is not None:
            for ann in list(self.topology.announcements.values()):
                link.send_announcement(self._announcement_frame(ann))
            self._unready.add(link)
            asyncio.get_running_loop().call_later(
                self.config.agreement_timeout, self._ready_anyway, link)
            if self._flush is not None:
                self._flush.cancel()
            self.flush_pull_filters()     # now, not after the debounce
            self._check_ready()
        else:
            self._unready.discard(link)
        self._topology_soon()

    def pull_acked(self, link: Link) -> None:
        self._acked_once.add(link)
        if self._unready:
            self._check_ready()

    def _check_ready(self) -> None:
        """A new link becomes part of the trees (is announced) once every peer
        has acknowledged this router's pull filter as it is with the link:
        otherwise a tree through the link could be used before the routers
        upstream know what the routers beyond it want, and lose what they
        forward meanwhile."""
        self._unready = {link for link in self._unready if link.state == LINKED}
        if self._unready and all(link.acked_pull for link in self.linked.values()
                                 if link.state == LINKED and link.sent_pull is not None):
            self._unready.clear()
            self._topology_soon()

    def _ready_anyway(self, link: Link) -> None:
        """A peer that has not acknowledged the pull filters within the
        agreement bound is not waited for: it is treated as gone for
        routing by then (``TopologyView``), so the new link may be used."""
        if link in self._unready:
            self._unready.discard(link)
            self._topology_soon()

    def _hold(self, attrs: Mapping[str, Any], block: bytes | None, deliver_insecure: bool,
              nkeys: Any) -> None:
        if len(self._held) >= MAX_HELD:
            self._held_dropped += 1
            if self._held_dropped == 1:
                log.warning("federation: no topology agreed and %d notifications held; "
                            "dropping more until one is", MAX_HELD)
            return
        self._held.append((attrs, block, deliver_insecure, nkeys))

    def _release_held(self) -> None:
        held, self._held = self._held, []
        self._held_dropped = 0
        for i, (attrs, block, deliver_insecure, nkeys) in enumerate(held):
            self.forward(attrs, block, deliver_insecure, nkeys)
            if self._held:             # no graph again meanwhile: keep the rest, in order
                self._held.extend(held[i + 1:])
                return

    def hold_from(self, link: Link, p: Any, block: bytes | None,
                  mark: int | None = None) -> bool:
        """Whether to keep a FedNotify that has no route for now: one from a
        peer that the agreed topology does not have yet (its link just came
        up). Routed once the routers agree on a topology with it (every
        router then takes it from the same one), instead of lost; dropped
        if a router restarted meanwhile (``TopologyView.restarted_since``:
        its earlier life may have had it)."""
        view = self.topology
        if view is None or view.catching_up or len(self._held_in) >= MAX_HELD:
            return False
        graph = view.confirmed
        if graph is not None and link.remote_domain in graph.node_set:
            return False
        routing = tuple(p.routing)
        if routing[-1].startswith(STAMP_PREFIX):
            return False                 # stamped: routed now or never (TopologyView.route)
        if self._route(routing, p.attributes, link.remote_domain).graph is not None:
            return False                 # off the tree: dropped
        self._held_in.append((link, p, block, view.life_mark() if mark is None else mark))
        return True

    def _release_held_in(self) -> None:
        held, self._held_in = self._held_in, []
        view = self.topology
        for link, p, block, mark in held:
            if link.state != LINKED or link.remote_domain is None or \
                    self.linked.get(link.remote_domain) is not link:
                continue
            if view is not None and view.restarted_since(mark):
                link.stats.fed_notify_off_tree += 1       # a restart outlived its hold
                self.stats.fed_notify_off_tree += 1
                continue
            if self.on_tree(link, tuple(p.routing), p.attributes):
                link.deliver_notify(p, block)
            elif not self.hold_from(link, p, block, mark):
                link.stats.fed_notify_off_tree += 1
                self.stats.fed_notify_off_tree += 1

    def _new_flood_memory(self, config: FederationConfig) -> Recent | None:
        if config.routing != "flood":
            return None
        return Recent(DEDUP_WINDOW * config.agreement_timeout)

    def first_here(self, routing: tuple[str, ...], attrs: Mapping[str, Any]) -> bool:
        """With ``routing = "flood"``: whether a notification this router
        takes is the first copy of it here, to deliver to its own clients as
        well as pass on. Why: routers that take part route what a flooding
        router sends them by their own graphs, and while they switch to a
        new one two of them can both send it the same notification (the
        federation guide's "during a switch"); a flooding router passes every
        copy on as the protocol says (what it sends is unchanged, so nothing
        the others expect goes missing: dropping the copy instead lost
        notifications in the simulation), but delivers only the first here,
        by the same rule as a router that takes part (``dedup.Recent``: a
        copy of the same content from the same origin that came by another
        routing list within the window)."""
        recent = self.flood_recent
        if recent is None:
            return True
        origin, _ = split_routing(routing)
        return recent.first((origin, content_key(attrs)), routing, time.monotonic())

    def _new_view(self, config: FederationConfig) -> TopologyView | None:
        if config.routing != "trees":
            return None
        return TopologyView(self.domain, timeout=config.agreement_timeout)

    def announcement_received(self, link: Link, attrs: Mapping[str, Any]) -> None:
        """A FedNotify carrying a topology announcement (never a notification:
        it reaches no client and goes on only as an announcement)."""
        view = self.topology
        if view is None or not link.participant:
            if view is not None and _participation(link, False) is False:
                self._topology_soon()      # its FedNotify says it does not take part
            return        # one of ours we cannot use, or a client's relayed by a peer
        try:
            ann = decode_announcement(attrs)
        except BadAnnouncement as exc:
            if link.remote_domain not in self._bad_announcers:
                self._bad_announcers.add(link.remote_domain)  # type: ignore[arg-type]
                log.warning("federation peer %r sent a bad topology announcement (%s); "
                            "ignored", link.remote_domain, exc)
            return
        if view.receive(ann):
            self._send_announcement(ann, exclude=link)
        self._routes_changed()     # the graphs it holds may have changed: no stale route
        self._topology_soon()

    def _topology_soon(self) -> None:
        if self.topology is None or self._topology_tick is not None or self.stopping:
            return
        self._topology_tick = asyncio.get_running_loop().call_soon(self._topology_update)

    def _topology_update(self) -> None:
        self._topology_tick = None
        view = self.topology
        if view is None or self.stopping:
            return
        before = view.confirmed
        states = [LinkState(domain, _participation(link, link in self._unready),
                            _filter_text(link.outgoing), _filter_text(link.incoming))
                  for domain, link in self.linked.items() if link.state == LINKED]
        changed = view.set_links(states)
        if view.refresh() or changed:
            self._send_announcement(view.own)
        self._agreement_changed(before)

    def _view_tick(self) -> None:
        """The view's next deadline: a pending link or a router waited for
        past the agreement bound."""
        self._deadline = None
        view = self.topology
        if view is None or self.stopping:
            return
        before = view.confirmed
        if view.tick():
            self._send_announcement(view.own)
        self._agreement_changed(before)

    def _agreement_changed(self, before: Any) -> None:
        view = self.topology
        assert view is not None
        self._routes_changed()
        deadline = view.next_deadline()
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if deadline is not None:
            self._deadline = asyncio.get_running_loop().call_later(
                max(0.0, deadline - time.monotonic()), self._view_tick)
        after = view.confirmed
        if after is not None and self._held:
            self._release_held()
        if after is not None and self._held_in and after is not before:
            self._release_held_in()
        if after is not before:
            if after is None:
                log.info("federation: no topology agreed yet; holding what is published "
                         "here, dropping what no held topology routes")
            else:
                # a new set of routers is news; a link coming or going, debug
                news = before is None or before.nodes != after.nodes
                log.log(logging.INFO if news else logging.DEBUG,
                        "federation: topology %s agreed: %d routers (%s), %d links",
                        after.digest, len(after.nodes), " ".join(after.nodes[:16]) +
                        (" ..." if len(after.nodes) > 16 else ""), len(after.edges) // 2)

    def _announcement_frame(self, ann: Announcement) -> bytes:
        block = encode_attributes(encode_announcement(ann))
        return fed_notify_frame(block, True, b"\0\0\0\0", routing_block((self.domain,)))

    def _send_announcement(self, ann: Announcement, exclude: Link | None = None) -> None:
        frame = None
        for link in self.linked.values():
            if link.participant and link is not exclude and link.state == LINKED:
                if frame is None:
                    frame = self._announcement_frame(ann)
                link.send_announcement(frame)

    def _route(self, routing: tuple[str, ...], attrs: Mapping[str, Any],
               sender: str | None = None) -> Route:
        """The route of one notification; asked twice for one that came over a
        link (may it come from there? where does it go?), computed once."""
        memo_routing, memo_attrs, route = self._route_memo
        if memo_attrs is attrs and memo_routing == routing and route is not None:
            return route        # the same notification: as on_tree found it
        # a route that does not depend on the notification is kept by routing
        # list and sender (a stamp this router does not hold is dropped from a
        # router that takes part, routed from one that does not)
        key = (routing, sender)
        route = self._routes.get(key)
        if route is None:
            route = self.topology.route(routing, attrs, sender)  # type: ignore[union-attr]
            graph = route.graph
            if graph is None or not getattr(graph, "_filtered", True):
                if len(self._routes) > 4096:
                    self._routes.clear()
                self._routes[key] = route
        self._route_memo = (routing, attrs, route)
        return route

    def _routes_changed(self) -> None:
        """The view's graphs changed (or the view did): every route is recomputed."""
        self._route_memo = ((), None, None)
        self._routes.clear()
        self._plans.clear()

    def _targets(self, route: Route, attrs: Mapping[str, Any]) -> list[tuple[Link, Any]]:
        """The forwarders that are children in ``route``'s tree, each with the
        matcher of what the routers at and below it want (its grouped pull
        filter, ``subtrees.py``; its whole pull filter if it sent no
        groups); children that want nothing are left out. Kept per route
        until a link, a pull filter or the graphs change (``_plans``)."""
        memo = self._plans.get(id(route))
        if memo is not None and memo[0] is route:
            return memo[1]
        graph = route.graph
        tree = graph.tree(route.origin, attrs)  # type: ignore[union-attr]
        nodes = frozenset(graph.nodes)  # type: ignore[union-attr]
        behind = subtrees(tree, self.domain)
        targets = []
        for link in self._forwarders:
            if link.remote_domain not in route.children:
                continue
            match = link.remote_match
            below = behind.get(link.remote_domain)
            if link.behind is not None and below is not None:
                match = link.behind.for_subtree(below, nodes)
            if match is not False:
                targets.append((link, match))
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[id(route)] = (route, targets)
        return targets

    def on_tree(self, link: Link, routing: tuple[str, ...], attrs: Mapping[str, Any]) -> bool:
        """Whether a notification that came over ``link`` is this router's to
        take: from its parent in the notification's tree, and not a copy of
        one taken by another path (``TopologyView.first_copy``). One that no
        graph this router holds places is dropped: taking it from anyone and
        flooding it would duplicate it on a cycle."""
        if self.topology is None:
            return True
        if not link.participant and link not in self._plain and \
                not link.stats.sub_replace_received:
            self._plain.add(link)
            # its first FedNotify came before any pull filter: it does not take
            # part (one that does sends its pull filter first); known now,
            # not at the next turn, so that this notification has its route
            if self._topology_tick is not None:
                self._topology_tick.cancel()
            self._topology_update()
        route = self._route(routing, attrs, link.remote_domain)
        return route.graph is not None and route.parent == link.remote_domain and \
            self.topology.first_copy(routing, link.participant, attrs)


def _participation(link: Link, unready: bool) -> bool | None:
    """Whether the peer of ``link`` takes part, as the topology view gets
    it: None while that is not known yet or while this router's new pull
    filters are not acknowledged. A router that takes part sends its pull
    filter (with its marker) before anything else, so a pull filter without
    the marker, or any FedNotify before a pull filter, says it does not."""
    if link.participant:
        return None if unready else True
    stats = link.stats
    if stats.sub_replace_received or stats.fed_notify_received or \
            stats.announcements_received:
        return False
    return None


def _filter_text(f: Filter) -> bool | str:
    """A link filter as an announcement carries it."""
    return f.ast if isinstance(f.ast, bool) else f.text
