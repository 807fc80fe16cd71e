"""The router side of discovery: answer SvrRqst with SvrAdvt.

Rules from the draft (sections 5.3 and 5.3.1) and how they are kept here:

* Advertise on start-up (multicast only: with unicast nobody is listening yet)
  with a locality of at most 64 (``advertise_locality``, default 1: the LAN).
* Answer every version-compatible SvrRqst, but never send advertisements
  more often than once every two seconds (``min_interval``). A request that
  arrives sooner is not dropped: one advertisement is scheduled for the end
  of the two seconds, with the highest locality asked for meanwhile, so every
  client that asked still hears an answer. With a multicast group the limit
  is for the group (every client hears the one reply); with a unicast address
  each requester has its own limit, since only it hears the reply.
* Replies use the request's locality as the TTL, except that a router whose
  endpoints are all loopback addresses answers with TTL 0: only clients on
  its own host could use them.
* On close, send SvrAdvtClose with the highest locality ever used.
* The scope is a property of the advertisement: SvrRqst has no scope field,
  so the router answers every request and the *client* keeps only the
  advertisements for its scope (or the default routers).

Datagrams that are not ERDP packets, or are of an incompatible version, are
dropped with a debug log; nothing a datagram contains can stop the responder.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence

from elvin.discovery.codec import MAX_DATAGRAM, SvrAdvt, SvrAdvtClose, SvrRqst, check_scope, encode
from elvin.discovery.transport import (
    DEFAULT_ADDRESS,
    DEFAULT_PORT,
    is_multicast,
    listening_socket,
    read_datagram,
    set_ttl,
)

log = logging.getLogger("elvin.discovery")

__all__ = ["DiscoveryResponder", "advertised_urls", "local_addresses"]

#: The draft's limit: no more than one advertisement every two seconds (5.3).
MIN_INTERVAL = 2.0
#: The draft's cap on the locality of the start-up advertisement (5.3).
MAX_INITIAL_LOCALITY = 64

_names = itertools.count(1)


def _unique_name() -> str:
    """Host name, process id and start time, as the draft recommends (5.3),
    plus a counter so that two routers started in the same process in the
    same microsecond (tests) still differ. ``gethostname`` rather than
    ``getfqdn``: the latter may wait on DNS, and uniqueness does not need it."""
    return f"{socket.gethostname()}:{os.getpid()}:{time.time():.6f}:{next(_names)}"


_ADDRESS_CACHE: tuple[float, list[str]] | None = None
_ADDRESS_TTL = 60.0   # seconds; interfaces change rarely, DHCP renewals do happen


def local_addresses() -> list[str]:
    """This host's non-loopback IPv4 addresses for the multicast route and
    the default route (without DNS, so it never blocks the router's loop);
    empty when the host has only loopback. Cached for a minute."""
    global _ADDRESS_CACHE
    now = time.monotonic()
    if _ADDRESS_CACHE is not None and now - _ADDRESS_CACHE[0] < _ADDRESS_TTL:
        return list(_ADDRESS_CACHE[1])
    found: list[str] = []
    for probe in (DEFAULT_ADDRESS, "192.0.2.1"):
        # connect() on UDP sends nothing: it only asks the kernel for a route
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.connect((probe, 9))
                found.append(sock.getsockname()[0])
            except OSError:
                pass
    out: list[str] = []
    for address in found:
        try:
            ip = ipaddress.IPv4Address(address)
        except ValueError:
            continue
        if not (ip.is_loopback or ip.is_unspecified) and address not in out:
            out.append(address)
    _ADDRESS_CACHE = (now, out)
    return list(out)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def advertised_urls(urls: Sequence[str]) -> list[str]:
    """The router's listen URLs as clients can use them: an unspecified
    address (0.0.0.0, ::, empty) becomes each of this host's addresses, or
    127.0.0.1 when it has no other."""
    from elvin.protocol import parse_uri  # the URI codec, sans-IO

    out: list[str] = []
    hosts = None
    for url in urls:
        try:
            uri = parse_uri(url)
        except Exception:  # noqa: BLE001 - a URL we cannot read is not advertised
            log.debug("not advertising unparsable URL %r", url)
            continue
        if uri.host in ("", "*", "0.0.0.0", "::"):
            if hosts is None:
                hosts = local_addresses() or ["127.0.0.1"]
            for host in hosts:
                text = _with_host(url, uri, host)
                if text not in out:
                    out.append(text)
        elif url not in out:
            out.append(url)
    return out


def _with_host(url: str, uri, host: str) -> str:
    """``url`` with another host, in the short form when it was short."""
    import dataclasses

    if url.startswith("elvin://") and not uri.options:
        return f"elvin://{host}:{uri.port}"
    return str(dataclasses.replace(uri, host=host))


class DiscoveryResponder(asyncio.DatagramProtocol):
    """Answers router solicitations for one router.

    ``urls`` is called for every advertisement (the router's endpoints can
    change); its result goes through :func:`advertised_urls`.
    """

    def __init__(self, urls: Callable[[], Sequence[str]], *, scope: str = "",
                 default: bool = True, address: str = DEFAULT_ADDRESS,
                 port: int = DEFAULT_PORT, interface: str = "",
                 advertise_locality: int = 1, min_interval: float = MIN_INTERVAL,
                 server_name: str | None = None) -> None:
        self.urls = urls
        self.scope = check_scope(scope)
        self.default = default
        self.address = address
        self.port = port
        self.interface = interface
        self.multicast = is_multicast(address)
        self.advertise_locality = max(0, min(advertise_locality, MAX_INITIAL_LOCALITY))
        self.min_interval = min_interval
        self.server_name = server_name or _unique_name()
        self.revision = 0
        self.max_locality_sent: int | None = None
        self.requests = 0          # compatible SvrRqst received
        self.adverts_sent = 0
        self.ignored = 0           # garbage or incompatible datagrams
        self._signature: tuple | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._sock: socket.socket | None = None
        self._last_sent: dict[object, float] = {}
        self._pending: dict[object, tuple[asyncio.TimerHandle, int]] = {}

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> DiscoveryResponder:
        """Bind (and join the group), then send the start-up advertisement."""
        loop = asyncio.get_running_loop()
        sock = self._sock = listening_socket(self.address, self.port, self.interface)
        transport, _ = await loop.create_datagram_endpoint(lambda: self, sock=sock)
        self._transport = transport
        if not self.multicast:
            self.port = sock.getsockname()[1]   # port 0 -> the real one
        log.info("discovery: answering on %s:%d for scope %r%s", self.address, self.port,
                 self.scope, " (default router)" if self.default else "")
        if self.multicast:
            self._advertise((self.address, self.port), self.advertise_locality)
        return self

    @property
    def local_address(self) -> tuple[str, int]:
        """Where requests reach this responder (for unicast tests)."""
        return self.address, self.port

    def close(self) -> None:
        """Withdraw the advertisement (multicast) and stop answering."""
        for handle, _ in self._pending.values():
            handle.cancel()
        self._pending.clear()
        transport, self._transport = self._transport, None
        if transport is None:
            return
        if self.multicast and self.max_locality_sent is not None:
            try:
                set_ttl(self._sock, self.max_locality_sent)  # type: ignore[arg-type]  # the socket is there while multicasting
                transport.sendto(encode(SvrAdvtClose(self.server_name)),
                                 (self.address, self.port))
            except OSError as exc:
                log.debug("discovery: could not send SvrAdvtClose: %s", exc)
        transport.close()

    # -- asyncio.DatagramProtocol ---------------------------------------------------------
    def datagram_received(self, data: bytes, addr: tuple) -> None:
        packet = read_datagram(data, addr)
        if packet is None:
            self.ignored += 1
            return
        try:
            if not isinstance(packet, SvrRqst):
                return   # other routers' advertisements: a router keeps no cache
            self.requests += 1
            key = (self.address, self.port) if self.multicast else addr
            self._request(key, packet.locality)
        except Exception:  # never let one datagram stop the responder
            log.exception("discovery: failed to answer %s", addr)

    def error_received(self, exc: Exception) -> None:
        log.debug("discovery: socket error %s", exc)

    # -- answering ------------------------------------------------------------------------
    def _request(self, key: object, locality: int) -> None:
        pending = self._pending.get(key)
        if pending is not None:
            handle, asked = pending
            self._pending[key] = (handle, max(asked, locality))
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        last = self._last_sent.get(key)
        if last is None or now - last >= self.min_interval:
            self._advertise(key, locality)
            return
        handle = loop.call_at(last + self.min_interval, self._send_pending, key)
        self._pending[key] = (handle, locality)

    def _send_pending(self, key: object) -> None:
        pending = self._pending.pop(key, None)
        if pending is not None:
            self._advertise(key, pending[1])

    def _advertisement(self) -> SvrAdvt | None:
        urls = advertised_urls(list(self.urls()))
        if not urls:
            return None
        signature = (tuple(sorted(urls)), self.scope, self.default)
        if signature != self._signature:
            # endpoints, scope or default changed: a new revision flushes caches
            self._signature = signature
            self.revision = self.revision % 0xFFFFFFFF + 1
        return SvrAdvt(self.server_name, tuple(urls), self.scope, self.default, self.revision)

    def _advertise(self, key, locality: int) -> None:
        transport = self._transport
        if transport is None:
            return
        advert = self._advertisement()
        if advert is None:
            log.debug("discovery: no endpoint to advertise")
            return
        if self.multicast:
            if all(_is_loopback(_host_of(u)) for u in advert.uris):
                locality = 0   # loopback endpoints are of no use off this host
            set_ttl(self._sock, locality)  # type: ignore[arg-type]  # as above
            if self.max_locality_sent is None or locality > self.max_locality_sent:
                self.max_locality_sent = locality
        try:
            transport.sendto(encode(advert, MAX_DATAGRAM), key)
        except (OSError, ValueError) as exc:
            log.debug("discovery: could not send SvrAdvt to %s: %s", key, exc)
            return
        self.adverts_sent += 1
        self._last_sent[key] = asyncio.get_running_loop().time()
        if len(self._last_sent) > 1024:   # forget requesters whose limit has passed
            horizon = self._last_sent[key] - self.min_interval
            self._last_sent = {k: t for k, t in self._last_sent.items() if t > horizon}


def _host_of(url: str) -> str:
    from elvin.protocol import parse_uri

    try:
        return parse_uri(url).host
    except Exception:  # noqa: BLE001
        return ""
