"""The client side of discovery: solicit advertisements, return router URLs.

``await discover(scope)`` does the draft's *active discovery* (5.2.1): an
expanding search that sends SvrRqst with locality 0, 1, 2, 4, ... 64, each
after its pre-request interval (0, 0.4 +/- 0.2, 2 +/- 1 ... seconds, the
random part drawn afresh each time), until routers answer or ``timeout``
passes. While waiting it listens:

* a SvrRqst from another client with an equal or greater locality
  suppresses ours (its answer is multicast, so we hear it too);
* an advertisement we can use ends the search at the end of that interval
  (so that routers answering together are all collected).

Which advertisements are usable (5.1): with a scope name, only routers
advertising that scope; without one (``scope=""``), only routers that set
the default flag. We count only usable advertisements as "answers": a
router of another scope must not stop a client from finding its own.

The result is every URI of every usable router, without duplicates: routers
in the order they answered (the nearest first), each router's URIs in the
order it gave them (a router orders them to steer clients, 5.3). A router
that re-advertises with a new revision replaces its URIs in place; repeats
of the same revision are ignored. SvrAdvtClose is ignored, as the draft
allows for clients that keep no cache.

With unicast addresses (tests, or known responders behind a network that
blocks multicast) the same search is sent to each of them, and the repeated
requests double as retries.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import random
import socket
from collections.abc import Mapping, Sequence

from elvin.discovery.codec import SvrAdvt, SvrRqst, check_scope, encode
from elvin.discovery.transport import (
    DEFAULT_ADDRESS,
    DEFAULT_PORT,
    is_multicast,
    listening_socket,
    multicast_socket,
    read_datagram,
    set_ttl,
    unicast_socket,
)

log = logging.getLogger("elvin.discovery")

__all__ = [
    "APP_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "SCHEDULE",
    "discover",
    "discover_adverts",
    "discover_router_urls",
    "discover_sync",
    "discover_url",
    "settings_from_env",
]

#: (locality, base pre-request interval, +/- variation), draft 5.2.1.
SCHEDULE: tuple[tuple[int, float, float], ...] = (
    (0, 0.0, 0.0), (1, 0.4, 0.2), (2, 2.0, 1.0), (4, 2.0, 1.0), (8, 2.0, 1.0),
    (16, 4.0, 2.0), (32, 4.0, 2.0), (64, 8.0, 4.0),
)
DEFAULT_TIMEOUT = 3.0
#: What applications wait before falling back to the bundled router: long
#: enough for the locality-1 (LAN) request at about 0.4 s to be answered.
APP_TIMEOUT = 1.0
#: After the first usable answer, how long to keep collecting the answers of
#: routers that reply together (at most until the interval ends).
SETTLE = 0.5


class _Collector(asyncio.DatagramProtocol):
    def __init__(self, scope: str, own_port: int | None) -> None:
        self.scope = scope
        self.own_port = own_port
        self.routers: dict[str, SvrAdvt] = {}     # insertion order = answer order
        self.answered = asyncio.Event()
        self.other_request = -1                   # highest locality seen from others

    def usable(self, advert: SvrAdvt) -> bool:
        return advert.scope == self.scope if self.scope else advert.default

    def datagram_received(self, data: bytes, addr: tuple) -> None:
        packet = read_datagram(data, addr)
        if isinstance(packet, SvrRqst):
            if addr[1] != self.own_port:
                self.other_request = max(self.other_request, packet.locality)
            return
        if not isinstance(packet, SvrAdvt) or not self.usable(packet):
            return
        known = self.routers.get(packet.server_name)
        if known is not None and known.revision == packet.revision:
            return
        self.routers[packet.server_name] = packet
        self.answered.set()

    def error_received(self, exc: Exception) -> None:
        log.debug("discovery: socket error %s", exc)

    def urls(self) -> list[str]:
        out: list[str] = []
        for advert in self.routers.values():
            for uri in advert.uris:
                if uri not in out:
                    out.append(uri)
        return out


def _targets(address: str | Sequence[str], port: int) -> list[tuple[str, int]]:
    """``"host"``, ``"host:port"`` or a list of them -> ``[(host, port)]``."""
    items = [address] if isinstance(address, str) else list(address)
    if not items:
        raise ValueError("no discovery address")
    out = []
    for item in items:
        host, sep, port_text = item.rpartition(":")
        if sep and "." in host and port_text.isdigit():   # IPv4 host:port
            out.append((host, int(port_text)))
        else:
            out.append((item, port))
    return out


async def _search(scope: str, timeout: float, address: str | Sequence[str], port: int,
                  interface: str, max_locality: int) -> _Collector:
    check_scope(scope)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    targets = _targets(address, port)
    address, port = targets[0]
    multicast = len(targets) == 1 and is_multicast(address)
    transports = []
    try:
        if multicast:
            # listen on the group port (advertisements are multicast to it);
            # send from an ephemeral port so that our own requests, looped
            # back, can be told from other clients'
            send_sock = multicast_socket(address, port, interface, bind_port=0)
            collector = _Collector(scope, send_sock.getsockname()[1])
            send, _ = await loop.create_datagram_endpoint(lambda: collector, sock=send_sock)
            transports.append(send)
            listen_sock = listening_socket(address, port, interface)
            listen, _ = await loop.create_datagram_endpoint(lambda: collector,
                                                            sock=listen_sock)
            transports.append(listen)
        else:
            collector = _Collector(scope, None)
            send_sock = unicast_socket("::" if ":" in address else "", 0)
            send, _ = await loop.create_datagram_endpoint(lambda: collector, sock=send_sock)
            transports.append(send)
        for locality, base, spread in SCHEDULE:
            if locality > max_locality:
                break
            interval = max(0.0, base + random.uniform(-spread, spread))
            start = loop.time()
            collector.other_request = -1
            if collector.routers:
                break   # answered during the previous interval: stop here
            with _suppress_timeout():
                async with asyncio.timeout_at(min(start + interval, deadline)):
                    await collector.answered.wait()
            if collector.routers:
                # let the others that answer together arrive, then stop
                settle = min(start + interval, loop.time() + SETTLE, deadline)
                await asyncio.sleep(max(0.0, settle - loop.time()))
                break
            if loop.time() >= deadline:
                break
            if collector.other_request >= locality:
                log.debug("discovery: SvrRqst at locality %d suppressed by another client's",
                          locality)
                continue
            if multicast:
                set_ttl(send_sock, locality)
            request = encode(SvrRqst(locality))
            for target in targets:
                try:
                    send.sendto(request, target)
                except OSError as exc:
                    log.debug("discovery: cannot send SvrRqst to %s:%d: %s", *target, exc)
        else:
            # the last request has gone out: wait for its answers
            with _suppress_timeout():
                async with asyncio.timeout_at(deadline):
                    await collector.answered.wait()
            if collector.routers:
                await asyncio.sleep(max(0.0, min(loop.time() + SETTLE, deadline) - loop.time()))
        if not collector.routers and loop.time() < deadline:
            with _suppress_timeout():
                async with asyncio.timeout_at(deadline):
                    await collector.answered.wait()
        return collector
    finally:
        for transport in transports:
            transport.close()


class _suppress_timeout:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, value, tb) -> bool:
        return kind is TimeoutError


async def discover_adverts(scope: str = "", *, timeout: float = DEFAULT_TIMEOUT,
                           address: str | Sequence[str] = DEFAULT_ADDRESS,
                           port: int = DEFAULT_PORT,
                           interface: str = "", max_locality: int = 64) -> list[SvrAdvt]:
    """Like :func:`discover`, but the usable advertisements themselves
    (router name, scope, default flag, revision, URIs), in answer order."""
    collector = await _search(scope, timeout, address, port, interface, max_locality)
    return list(collector.routers.values())


async def discover(scope: str = "", *, timeout: float = DEFAULT_TIMEOUT,
                   address: str | Sequence[str] = DEFAULT_ADDRESS, port: int = DEFAULT_PORT,
                   interface: str = "", max_locality: int = 64) -> list[str]:
    """Find Elvin routers: the URLs they advertise for ``scope`` ("" = the
    default routers), nearest router first; ``[]`` if none answered within
    ``timeout`` seconds.

    ``address``/``port``: the ERDP multicast group and port (224.4.0.1:2917),
    or a responder's unicast address, or a list of unicast ``"host[:port]"``
    (each is asked; ``port`` is the default). ``interface``: the local IPv4 address
    to multicast on ("" = the system's choice). ``max_locality`` bounds the
    expanding search (the IP TTL). Raises ``OSError`` only when no socket can
    be opened, ``ValueError`` for a scope with a colon.
    """
    collector = await _search(scope, timeout, address, port, interface, max_locality)
    return collector.urls()


def discover_sync(scope: str = "", **kwargs) -> list[str]:
    """:func:`discover` for code without an event loop (or inside one that
    must not be re-entered, such as a Qt app's: then it runs in a thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(discover(scope, **kwargs))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="elvin-discover") as pool:
        return pool.submit(asyncio.run, discover(scope, **kwargs)).result()


# --------------------------------------------------------------------------
# applications: the environment, and "discovered URL or the default"

_OFF = ("off", "no", "none", "false", "0", "disable", "disabled")


def settings_from_env(environ: Mapping[str, str] | None = None) -> dict | None:
    """Discovery settings for applications, from the environment:

    * ``ELVIN_DISCOVERY``: ``off`` disables discovery; ``ADDRESS[:PORT]``
      uses another group, or unicast responders (comma-separated); the
      default is the draft's 224.4.0.1:2917;
    * ``ELVIN_SCOPE``: the scope name (default: none, i.e. default routers).

    Returns keyword arguments for :func:`discover`, or ``None`` when off.
    Raises ``ValueError`` for a malformed value, naming the variable.
    """
    env = os.environ if environ is None else environ
    settings: dict = {"scope": check_scope(env.get("ELVIN_SCOPE", ""))}
    raw = env.get("ELVIN_DISCOVERY", "").strip()
    if raw.lower() in _OFF and raw:
        return None
    if raw:
        addresses = []
        for item in raw.split(","):
            host, sep, port_text = item.strip().rpartition(":")
            if not sep:
                host, port_text = item.strip(), str(DEFAULT_PORT)
            try:
                port = int(port_text)
                socket.inet_aton(host)
                if host.count(".") != 3:
                    raise ValueError(host)
            except (ValueError, OSError):
                raise ValueError(f"ELVIN_DISCOVERY={raw!r}: expected 'off' or IPv4 "
                                 "ADDRESS[:PORT] (comma-separated)") from None
            if not 0 < port < 65536:
                raise ValueError(f"ELVIN_DISCOVERY={raw!r}: port {port} out of range")
            addresses.append(f"{host}:{port}")
        settings["address"] = addresses[0] if len(addresses) == 1 else addresses
    return settings


def _first_usable(urls: list[str]) -> str | None:
    """The first URL the client library can connect to (TCP or TLS, XDR)."""
    from elvin.protocol import parse_uri

    for url in urls:
        try:
            uri = parse_uri(url)
        except Exception:  # noqa: BLE001, S112 - an advertised URL we cannot read
            continue
        if uri.protocol[0] in ("tcp", "ssl") and uri.protocol[-1] == "xdr":
            return url
    return None


def discover_url(timeout: float = APP_TIMEOUT,
                 environ: Mapping[str, str] | None = None) -> str | None:
    """For applications with no router URL configured: the first usable URL
    discovery finds (settings from :func:`settings_from_env`), or ``None``
    when discovery is off, finds nothing, or cannot run (no network)."""
    urls = discover_router_urls(timeout, environ)
    return urls[0] if urls else None


def discover_router_urls(timeout: float = APP_TIMEOUT,
                         environ: Mapping[str, str] | None = None, *,
                         scope: str | None = None) -> list[str]:
    """Every router discovery finds, one usable URL each, nearest first: an
    application's failover list (``elvin.connect`` takes it). ``scope``
    (an app's config) in place of ``$ELVIN_SCOPE``; ``[]`` when discovery is
    off, finds nothing, or cannot run (no network)."""
    try:
        settings = settings_from_env(environ)
        if settings is not None and scope is not None:
            settings["scope"] = check_scope(scope)
    except ValueError as exc:
        log.warning("discovery: %s", exc)
        return []
    if settings is None:
        return []

    async def search() -> list[SvrAdvt]:
        return await discover_adverts(timeout=timeout, **settings)
    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            adverts = asyncio.run(search())
        else:
            with concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix="elvin-discover") as pool:
                adverts = pool.submit(asyncio.run, search()).result()
    except OSError as exc:
        log.info("discovery: cannot search (%s)", exc)
        return []
    urls = [url for url in (_first_usable(list(advert.uris)) for advert in adverts) if url]
    if urls:
        log.info("discovery: found %s", ", ".join(urls))
    return urls
