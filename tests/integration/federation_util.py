"""Helpers for tests with several federated routers on loopback.

::

    from tests.integration.federation_util import federated_routers, wait_linked

    routers = federated_routers(3)              # r0 <- r1 <- r2, a chain
    try:
        wait_linked(routers)                     # every link up
        ... RawClient.connected(routers[2].port) ...
    finally:
        stop_all(routers)

``federated_routers(n, links=None, filters=None, **settings)`` starts ``n``
``EmbeddedRouter``s with router domains ``r0``..``r{n-1}``. ``links`` is a
list of ``(a, b)`` pairs: router ``a`` dials router ``b`` (default: the
chain ``(1, 0), (2, 1), ...``; with a pair ``a < b`` every router listens
on a port chosen beforehand, so that ``a`` knows where ``b`` will be). Every router accepts exactly
the routers that dial it. ``filters[(a, b)]`` may give ``a_out``, ``a_in``,
``b_out``, ``b_in`` (True, False or an expression) for that link; the
default lets everything through. ``fed_listen`` is the URL every router
listens on (``ewaf:1.0/ssl,none,xdr/127.0.0.1:0`` for TLS links, with
``router_settings`` giving ``tls_cert``/``tls_key``). ``per_router_routing``
gives some routers another ``routing`` (``{2: "flood"}``: r2 does not take
part in learning the topology). ``settings`` go to every router's
``FederationConfig`` (``debounce``, ``reconnect_min``...), so the tests run
with a small debounce and fast reconnects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from elvin.federation.config import AcceptSpec, ConnectSpec, FederationConfig
from elvin.router.config import RouterConfig
from elvin.router.embedded import EmbeddedRouter
from tests.integration.process_util import free_port
from tests.waiting import wait_until

__all__ = ["RawFederator", "RawListener", "agreed_topology", "fed_stats", "federated_routers",
           "link_stats", "linked_domains", "remote_pull", "single_router",
           "stop_all", "wait_agreed", "wait_linked"]

FAST = {"debounce": 0.01, "reconnect_min": 0.05, "reconnect_max": 0.5}


def federated_routers(n: int, links: Iterable[tuple[int, int]] | None = None,
                      filters: Mapping[tuple[int, int], Mapping[str, Any]] | None = None,
                      router_settings: Mapping[str, Any] | None = None,
                      fed_listen: str = "ewaf://127.0.0.1:0",
                      per_router_routing: Mapping[int, str] | None = None,
                      **settings: Any) -> list[EmbeddedRouter]:
    links = list(links) if links is not None else [(i, i - 1) for i in range(1, n)]
    filters = filters or {}
    fed_settings = {**FAST, **settings}
    for a, b in links:
        if a == b or not (0 <= a < n and 0 <= b < n):
            raise ValueError(f"link {(a, b)}: not a link between two of the {n} routers")
    # a router that dials one started after it needs that one's port now
    ports = ([free_port() for _ in range(n)] if any(a < b for a, b in links) else None)
    routers: list[EmbeddedRouter] = []

    def url(b: int) -> str:
        if ports is None:
            return routers[b].federation_urls[0]
        return fed_listen.replace(":0", f":{ports[b]}")

    try:
        for i in range(n):
            connect = []
            accept = []
            for a, b in links:
                f = filters.get((a, b), {})
                if a == i:
                    connect.append(ConnectSpec(url(b), router=f"r{b}",
                                               outgoing=f.get("a_out", True),
                                               incoming=f.get("a_in", True)))
                elif b == i:
                    accept.append(AcceptSpec(f"r{a}", outgoing=f.get("b_out", True),
                                             incoming=f.get("b_in", True)))
            listen = fed_listen if ports is None else fed_listen.replace(":0", f":{ports[i]}")
            mine = dict(fed_settings)
            if per_router_routing and i in per_router_routing:
                mine["routing"] = per_router_routing[i]
            fed = FederationConfig(router_domain=f"r{i}", listen=[listen],
                                   connect=connect, accept=accept, **mine)
            config = RouterConfig(federation=fed, discovery=False,
                                  **dict(router_settings or {}))
            routers.append(EmbeddedRouter(config=config).start())
    except BaseException:
        stop_all(routers)
        raise
    return routers


def stop_all(routers: Iterable[EmbeddedRouter]) -> None:
    for router in routers:
        router.stop()


def fed_stats(router: EmbeddedRouter) -> dict[str, int]:
    """The router's federation counters (FedNotify sent/received...)."""
    def get() -> dict[str, int]:
        service = router.router.federation  # type: ignore[union-attr]
        return service.stats.as_dict() if service is not None else {}
    return router.call(get)


def link_stats(router: EmbeddedRouter, domain: str) -> dict[str, int] | None:
    """Counters of the router's link with ``domain`` (None if not linked)."""
    def get() -> dict[str, int] | None:
        service = router.router.federation  # type: ignore[union-attr]
        link = service.link_for(domain) if service is not None else None
        return link.stats.as_dict() if link is not None else None
    return router.call(get)


def linked_domains(router: EmbeddedRouter) -> set[str]:
    def get() -> set[str]:
        service = router.router.federation  # type: ignore[union-attr]
        return set(service.linked) if service is not None else set()
    return router.call(get)


def remote_pull(router: EmbeddedRouter, domain: str) -> Any:
    """The pull filter ``domain`` registered at ``router`` (False if none)."""
    def get() -> Any:
        link = router.router.federation.link_for(domain)  # type: ignore[union-attr]
        return link.remote_pull if link is not None else None
    return router.call(get)


def pull_wants(router: EmbeddedRouter, domain: str, name: str) -> bool:
    """Whether the pull filter ``domain`` registered at ``router`` refers to
    attribute ``name`` (a subscription to it has reached that router: an
    earlier filter, for an earlier subscription, is not enough)."""
    from elvin.subscription.ast import Node, names_in

    pull = remote_pull(router, domain)
    return pull is True or (isinstance(pull, Node) and name in names_in(pull))


def expected_links(routers: list[EmbeddedRouter],
                   links: Iterable[tuple[int, int]] | None = None) -> dict[int, set[str]]:
    n = len(routers)
    links = list(links) if links is not None else [(i, i - 1) for i in range(1, n)]
    want: dict[int, set[str]] = {i: set() for i in range(n)}
    for a, b in links:
        want[a].add(f"r{b}")
        want[b].add(f"r{a}")
    return want


def wait_linked(routers: list[EmbeddedRouter], links: Iterable[tuple[int, int]] | None = None,
                timeout: float = 10.0) -> None:
    """Block until every router has exactly its configured links up and the
    routers that learn the topology agree on it (notifications published
    from then on follow the trees of all those links)."""
    links = list(links) if links is not None else None
    want = expected_links(routers, links)
    wait_until(lambda: all(linked_domains(r) == want[i] for i, r in enumerate(routers)),
               timeout, what=f"federation links {want}")
    wait_agreed(routers, links, timeout)


def agreed_topology(router: EmbeddedRouter) -> tuple[str, frozenset[tuple[str, str]]] | None:
    """``(digest, {(a, b), ...})`` of the graph the router routes its own
    notifications by (its undirected links); None when it floods."""
    graph = _confirmed(router)
    if graph is None:
        return None
    return graph.digest, frozenset(tuple(sorted((e.source, e.target)))  # type: ignore[misc]
                                   for e in graph.edges)


def _confirmed(router: EmbeddedRouter) -> Any:
    def get() -> Any:
        service = router.router.federation  # type: ignore[union-attr]
        view = service.topology if service is not None else None
        return view.confirmed if view is not None else None
    return router.call(get)


def wait_agreed(routers: list[EmbeddedRouter], links: Iterable[tuple[int, int]] | None = None,
                timeout: float = 10.0) -> None:
    """Block until every router that learns the topology routes by a graph
    with all of its own links, and routers that see each other in their
    graphs route by the same one."""
    n = len(routers)
    links = list(links) if links is not None else [(i, i - 1) for i in range(1, n)]
    want = expected_links(routers, links)
    learning = {f"r{i}": r for i, r in enumerate(routers)
                if r.router.config.federation.routing == "trees"}  # type: ignore[union-attr]

    def agreed() -> bool:
        graphs = {name: _confirmed(r) for name, r in learning.items()}
        for i in range(n):
            name = f"r{i}"
            graph = graphs.get(name)
            if name not in learning:
                continue
            if graph is None or not want[i] <= set(graph.nodes):
                return False
            if not {peer for peer in want[i] if peer in learning} <= graph.participants:
                return False
            for other in graph.participants:
                if other in graphs and (graphs[other] is None
                                        or graphs[other].digest != graph.digest):
                    return False
        return True

    if learning:
        wait_until(agreed, timeout, what="the routers agreeing on the topology "
                   f"({', '.join(learning)})")


class RawFederator:
    """A hand-driven federation peer over a raw socket (asyncio streams), to
    send a router exactly what a test wants, including nonsense."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from elvin.protocol.framing import FrameDecoder

        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder()
        self.pending: list[bytes] = []

    @classmethod
    async def open(cls, url: str, source: str | None = None) -> RawFederator:
        """Connect to ``url``, from the local address ``source`` if given
        (``127.0.0.2``: another loopback address, for host rules)."""
        from elvin.federation.config import parse_ewaf_uri

        uri = parse_ewaf_uri(url)
        reader, writer = await asyncio.open_connection(
            uri.host, uri.port, local_addr=(source, 0) if source else None)
        return cls(reader, writer)

    @classmethod
    async def linked(cls, url: str, domain: str, source: str | None = None) -> RawFederator:
        """Open and complete the handshake as router ``domain``."""
        from elvin.federation.packets import FedConnRply, FedConnRqst

        peer = await cls.open(url, source)
        peer.send(FedConnRqst(1, 1, 0, domain))
        reply = await peer.next()
        assert isinstance(reply, FedConnRply), reply
        peer.remote_domain = reply.router_domain
        return peer

    def send(self, packet: object) -> None:
        from elvin.federation.packets import frame_fed_packet

        self.writer.write(frame_fed_packet(packet))

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    async def next(self, timeout: float = 5.0) -> object:
        """The next packet; ``EOFError`` when the router closed the link."""
        from elvin.federation.packets import decode_fed_packet

        async def read() -> bytes:
            while not self.pending:
                try:
                    data = await self.reader.read(65536)
                except ConnectionResetError:   # closed with our data unread: a reset
                    data = b""
                if not data:
                    raise EOFError("the router closed the federation link")
                self.pending.extend(self.decoder.feed_frames(data))
            return self.pending.pop(0)

        return decode_fed_packet(await asyncio.wait_for(read(), timeout))

    async def expect(self, cls: type, timeout: float = 5.0) -> Any:
        """Skip packets until one of type ``cls`` (pull filters, keepalives)."""
        while True:
            packet = await self.next(timeout)
            if isinstance(packet, cls):
                return packet

    async def until_closed(self, timeout: float = 5.0) -> list[object]:
        got: list[object] = []
        try:
            while True:
                got.append(await self.next(timeout))
        except EOFError:
            return got

    async def close(self) -> None:
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 2)
        except Exception:  # noqa: BLE001, S110 - a test helper closing: any end will do
            pass


class RawListener:
    """A raw federation peer that routers dial: ``accept()`` gives the next
    incoming connection as a ``RawFederator``; ``accept_linked(domain)``
    also answers its FedConnRqst as router ``domain``. ``ssl`` is an
    ``ssl.SSLContext`` for a TLS listener."""

    def __init__(self) -> None:
        self.accepted: asyncio.Queue[RawFederator] = asyncio.Queue()
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.url = ""

    @classmethod
    async def start(cls, ssl: Any = None) -> RawListener:
        listener = cls()

        async def on_connection(reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
            await listener.accepted.put(RawFederator(reader, writer))

        listener.server = await asyncio.start_server(on_connection, "127.0.0.1", 0, ssl=ssl)
        listener.port = listener.server.sockets[0].getsockname()[1]
        scheme = "ewaf:1.0/ssl,none,xdr/" if ssl is not None else "ewaf://"
        listener.url = f"{scheme}127.0.0.1:{listener.port}"
        return listener

    async def accept(self, timeout: float = 10.0) -> RawFederator:
        return await asyncio.wait_for(self.accepted.get(), timeout)

    async def accept_linked(self, domain: str, timeout: float = 10.0) -> RawFederator:
        from elvin.federation.packets import FedConnRply, FedConnRqst

        peer = await self.accept(timeout)
        rqst = await peer.expect(FedConnRqst, timeout)
        peer.send(FedConnRply(rqst.xid, domain))
        peer.remote_domain = rqst.router_domain
        return peer

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            try:
                await asyncio.wait_for(self.server.wait_closed(), 2)
            except Exception:  # noqa: BLE001, S110 - a test helper closing: any end will do
                pass
        while not self.accepted.empty():
            await self.accepted.get_nowait().close()


def single_router(domain: str = "r0", connect: Iterable[str] = (),
                  accept: Iterable[str] = (), listen: bool = False,
                  router_settings: Mapping[str, Any] | None = None,
                  **settings: Any) -> EmbeddedRouter:
    """One router ``domain`` dialling the ``connect`` URLs (any router domain
    answering) and accepting the router domains in ``accept`` (listening on
    loopback when there are any, or with ``listen``)."""
    fed = FederationConfig(
        router_domain=domain,
        listen=["ewaf://127.0.0.1:0"] if (listen or accept) else [],
        connect=[ConnectSpec(url) for url in connect],
        accept=[AcceptSpec(name) for name in accept], **{**FAST, **settings})
    config = RouterConfig(federation=fed, discovery=False, **dict(router_settings or {}))
    return EmbeddedRouter(config=config).start()
