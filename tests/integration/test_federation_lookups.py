"""Routers not yet admitted cannot tie up the router with DNS (issue 31).

A FedConnRqst from an address outside a name-based ``hosts`` rule costs a
reverse lookup. The reverse zones here "never answer": ``socket.gethostbyaddr``
is replaced, in this process and for these tests only, by one that blocks
until the test releases it (a real resolver that hangs cannot be arranged on
this machine); every other part -- the router, its sockets, the peers on
127.0.0.x -- is real. Peers dial from distinct loopback addresses, so that
each costs a lookup of its own.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections import Counter

from elvin.federation.config import AcceptSpec, FederationConfig
from elvin.federation.link import AWAIT_RQST
from elvin.federation.lookups import MAX_LOOKUPS
from elvin.federation.packets import FedConnRqst
from elvin.federation.service import MAX_WAITING_PER_ADDRESS
from elvin.protocol import Nack
from elvin.router.config import RouterConfig
from elvin.router.embedded import EmbeddedRouter
from tests.waiting import until

from .federation_util import FAST, RawFederator

#: threads in the default executor of a loop on this machine (asyncio's rule)
DEFAULT_EXECUTOR_THREADS = min(32, (os.cpu_count() or 1) + 4)


class HangingReverseZone:
    """``socket.gethostbyaddr`` for 127.0.0.2 and up: counts the call, blocks
    until ``release`` is set, then says the address has no name. Other
    addresses go to the real resolver."""

    def __init__(self) -> None:
        self.real = socket.gethostbyaddr
        self.release = threading.Event()
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, address: str) -> tuple[str, list[str], list[str]]:
        if not address.startswith("127.0.0.") or address == "127.0.0.1":
            return self.real(address)
        with self._lock:
            self.calls[address] += 1
        self.release.wait(60)
        raise socket.herror(1, "Unknown host")

    def total(self) -> int:
        with self._lock:
            return sum(self.calls.values())


def start(accept, **fed) -> EmbeddedRouter:
    config = FederationConfig(router_domain="hub", listen=["ewaf://127.0.0.1:0"],
                              accept=list(accept), **{**FAST, **fed})
    return EmbeddedRouter(config=RouterConfig(federation=config, discovery=False)).start()


def messages(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


async def test_peers_whose_lookups_hang_neither_exhaust_the_loops_threads_nor_queue(
        monkeypatch, caplog):
    """More peers than the loop's default executor has threads, each from
    its own address, every lookup hanging: the router's loop can still use
    its default executor and getaddrinfo (what dials and the archive use);
    the peers beyond the lookup bound are refused at once, saying why; once
    the zone answers, the answer is remembered: a peer redialling from an
    address just looked up costs no second lookup."""
    caplog.set_level("WARNING", logger="elvin.federation")
    zone = HangingReverseZone()
    monkeypatch.setattr(socket, "gethostbyaddr", zone)
    hub = start([AcceptSpec("edge", hosts=["*.edge.test"])])
    # this test reads each refusal's line: no rate limit (elvin.ratelog) on them
    hub.router.federation.notes.burst = 1000
    peers: list[RawFederator] = []
    try:
        url = hub.federation_urls[0]
        sources = [f"127.0.0.{i}" for i in range(2, 2 + DEFAULT_EXECUTOR_THREADS + 4)]
        for source in sources:
            peer = await RawFederator.open(url, source)
            peer.send(FedConnRqst(1, 1, 0, "edge"))
            peers.append(peer)
        await until(lambda: zone.total() >= MAX_LOOKUPS, what="lookups under way")

        def probe():
            loop = asyncio.get_running_loop()
            return (asyncio.ensure_future(loop.run_in_executor(None, sum, [1, 2])),
                    asyncio.ensure_future(loop.getaddrinfo("127.0.0.1", 2916)))
        pool, resolve = hub.call(probe)
        await until(lambda: hub.call(lambda: pool.done() and resolve.done()),
                    what="the loop's executor and getaddrinfo while lookups hang")
        assert hub.call(pool.result) == 3 and hub.call(resolve.result)
        # every peer answered or looked up: those beyond the bound refused
        busy = "needs host-name lookups, and"
        await until(lambda: zone.total() + len(messages(caplog, busy)) >= len(sources),
                    what="every peer either looked up or refused")
        assert zone.total() == MAX_LOOKUPS
        refused = messages(caplog, busy)
        assert len(refused) == len(sources) - MAX_LOOKUPS
        assert "'edge'" in refused[0] and "federation.accept #1, hosts (*.edge.test)" in \
            refused[0] and "already under way" in refused[0]
        # the refused ones have their Nack while the lookups still hang
        for source, peer in zip(sources, peers, strict=True):
            if source not in zone.calls:
                got = await peer.until_closed()
                assert len(got) == 1 and isinstance(got[0], Nack), got
                assert "busy" in got[0].message
        zone.release.set()
        for source, peer in zip(sources, peers, strict=True):
            if source in zone.calls:
                got = await peer.until_closed()
                assert len(got) == 1 and isinstance(got[0], Nack), got
        looked_up = sorted(zone.calls)
        assert len(looked_up) == MAX_LOOKUPS
        # again from an address just looked up: the remembered "no name" answers
        again = await RawFederator.open(url, looked_up[0])
        again.send(FedConnRqst(1, 1, 0, "edge"))
        got = await again.until_closed()
        await again.close()
        assert len(got) == 1 and isinstance(got[0], Nack)
        assert zone.calls[looked_up[0]] == 1
        assert "matches none of" in messages(caplog, "refused federation link from")[-1]
    finally:
        zone.release.set()
        for peer in peers:
            await peer.close()
        hub.stop()


async def test_one_address_may_hold_only_so_many_connections_before_its_fedconnrqst(caplog):
    caplog.set_level("WARNING", logger="elvin.federation")
    hub = start([AcceptSpec("edge", hosts=["127.0.0.1"])])
    peers: list[RawFederator] = []

    def waiting(address: str) -> int:
        return hub.call(lambda: sum(1 for link in hub.router.federation.links
                                    if link.state == AWAIT_RQST and link.address == address))
    try:
        url = hub.federation_urls[0]
        for _ in range(MAX_WAITING_PER_ADDRESS):
            peers.append(await RawFederator.open(url, "127.0.0.2"))
        await until(lambda: waiting("127.0.0.2") == MAX_WAITING_PER_ADDRESS,
                    what="the connections waiting")
        extra = await RawFederator.open(url, "127.0.0.2")
        assert await extra.until_closed() == []          # closed at once, nothing said
        await extra.close()
        [line] = messages(caplog, "wait for their FedConnRqst")
        assert "refused a connection from 127.0.0.2" in line
        assert f"at most {MAX_WAITING_PER_ADDRESS} from one address" in line
        assert waiting("127.0.0.2") == MAX_WAITING_PER_ADDRESS   # the others stay
        # another address is not affected, and a waiting one may still link
        other = await RawFederator.linked(url, "edge", "127.0.0.1")
        await other.close()
        await peers[0].close()
        await until(lambda: waiting("127.0.0.2") < MAX_WAITING_PER_ADDRESS,
                    what="room again")
        peers[0] = await RawFederator.open(url, "127.0.0.2")
        await until(lambda: waiting("127.0.0.2") == MAX_WAITING_PER_ADDRESS,
                    what="the new one waiting")
    finally:
        for peer in peers:
            await peer.close()
        hub.stop()
