"""A move-out or move-in reply promises that from then on everything reaches
the client (the buffer, or live). Between federated routers that holds only
once the peers know what the router's subscribers want: right after a
restart, until the links are up and the pull filters acknowledged, what is
published at a peer is not forwarded, and no router can count it (#41). So
the proxy's reply waits for it (``FederationService.interest_unannounced``),
a bounded time, and if the peers still may not know, the reply says which
(``Ticket.unannounced``, ``MoveInReport.unannounced``).

Router B (mobility, a state directory) dials router A through a gate in the
test that can keep the link down; the publisher is at A."""

from __future__ import annotations

import asyncio
import contextlib

from elvin.client import connect
from elvin.federation.config import ConnectSpec, FederationConfig
from elvin.keys import EMPTY_KEYS
from elvin.mobility import MobileConnection
from elvin.mobility import protocol as P
from elvin.mobility.client import request_move_in, request_move_out
from elvin.router.config import RouterConfig
from elvin.router.embedded import EmbeddedRouter
from tests.waiting import until

from .federation_util import FAST, single_router
from .process_util import free_port
from .test_mobility import Received, publish


class Gate:
    """A TCP relay in front of a router's federation port. Shut, it cuts
    every connection through it and closes each new one at once: a link
    through it cannot come up. Holding, it keeps what the dialling router
    sends until ``release`` (what comes back still passes)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.is_open = True
        self.holding = False
        self.held: list[tuple[asyncio.StreamWriter, bytes]] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._pair, "127.0.0.1", 0)
        return f"ewaf://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _pair(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.is_open:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writers += [writer, up_writer]
        await asyncio.gather(self._pipe(reader, up_writer, up=True),
                             self._pipe(up_reader, writer), return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    up: bool = False) -> None:
        while data := await reader.read(65536):
            if up and self.holding:
                self.held.append((writer, data))
            else:
                writer.write(data)
        writer.close()

    def release(self) -> None:
        self.holding = False
        held, self.held = self.held, []
        for writer, data in held:
            writer.write(data)

    def shut(self) -> None:
        self.is_open = False
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    def open(self) -> None:
        self.is_open = True

    async def close(self) -> None:
        self.shut()
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(TimeoutError):  # a test closing: any end will do
                await asyncio.wait_for(self.server.wait_closed(), 2)


def router_b(gate_url: str, state_dir, **settings) -> EmbeddedRouter:
    fed = FederationConfig(router_domain="B", connect=[ConnectSpec(gate_url, router="A")],
                           **FAST)
    return EmbeddedRouter(config=RouterConfig(federation=fed, discovery=False, mobility=True,
                                              state_dir=str(state_dir), **settings)).start()


def unannounced(b: EmbeddedRouter) -> list[str]:
    return b.call(lambda: b.router.federation.interest_pending())


def buffered_seqs(b: EmbeddedRouter, client_id: str) -> list[int]:
    """The ``Seq`` of each notification B's proxy buffered for the client."""
    def get() -> list[int]:
        handler = b.router.mobility.handlers.get(client_id)
        if handler is None:
            return []
        blobs = P.pack_batches(data for _seq, data in handler.entries)   # sealed ones
        return [attrs["Seq"] for blob in blobs for attrs, _ids in P.decode_batch(blob)]
    return b.call(get)


async def test_a_resumed_move_out_after_a_restart_waits_until_the_peers_know(tmp_path):
    """B restarts while its link to A cannot come up; a client's resumed
    move-out takes the restored buffer over. The reply waits until A knows
    what B's proxy subscribed to; without the wait it came at once, and
    what A published right after it was never forwarded: lost, told to
    nobody."""
    a = single_router("A", accept=["B"])
    gate = Gate(int(a.federation_urls[0].rsplit(":", 1)[1]))
    gate_url = await gate.start()
    b = router_b(gate_url, tmp_path / "b")
    specs = [P.SubscriptionSpec(1, 'Producer == "p"', True, EMPTY_KEYS)]
    first, second = "first-secret-0123456789", "second-secret-0123456789"
    pub = await connect(a.url)
    client = await connect(b.url)
    try:
        await until(lambda: unannounced(b) == [], what="B's interest known at A")
        await request_move_out(client, specs, client_id="c", timeout=5, secret=first)
        gate.shut()
        b.restart()                      # the buffer is restored; the link stays down
        assert unannounced(b), "the link came up through a shut gate"
        await client.close()
        client = await connect(b.url)    # the client's connection died: resumed
        move_out = asyncio.ensure_future(request_move_out(
            client, specs, client_id="c", timeout=20, secret=second, previous_secret=first,
            resume=True))
        waiting = lambda: b.call(  # noqa: E731
            lambda: getattr(b.router.mobility, "awaiting_interest", 0))
        await until(lambda: move_out.done() or waiting() > 0,
                    what="the move-out answered or waiting")
        gate.open()
        ticket = await move_out
        await publish(pub, "p", range(20))          # right after the reply
        await until(lambda: unannounced(b) == [], what="B's interest known at A again")
        await publish(pub, "p", [20])               # after them on the same link
        await until(lambda: 20 in buffered_seqs(b, "c"), what="the last one buffered")
        entries, reply = await request_move_in(client, ticket, timeout=10)
        seqs = [attrs["Seq"] for attrs, _ids in entries]
        lost = sorted(set(range(21)) - set(seqs))
        assert seqs == list(range(21)), f"lost, and nobody was told: {lost}"
        assert reply.dropped == 0
        assert ticket.unannounced == (), ticket.unannounced
    finally:
        await client.close()
        await pub.close()
        await gate.close()
        b.stop()
        a.stop()


async def test_a_move_out_with_a_new_interest_waits_for_its_acknowledgement(tmp_path):
    """The link is up and acknowledged, but nothing at B wants what the
    client's move-out subscribes to: the proxy's subscription changes B's
    pull filter, and until A acknowledges it, A forwards none of it. The
    reply waits for that acknowledgement (held on its way in the gate
    here); it used to come at once, and what A published right after it
    never reached the buffer, told to nobody (the chaos harness's seed 1)."""
    a = single_router("A", accept=["B"])
    gate = Gate(int(a.federation_urls[0].rsplit(":", 1)[1]))
    gate_url = await gate.start()
    b = router_b(gate_url, tmp_path / "b")
    specs = [P.SubscriptionSpec(1, 'Producer == "new"', True, EMPTY_KEYS)]
    pub = await connect(a.url)
    client = await connect(b.url)
    try:
        await until(lambda: unannounced(b) == [], what="B's interest known at A")
        gate.holding = True
        move_out = asyncio.ensure_future(request_move_out(client, specs, client_id="c",
                                                          timeout=20))
        waiting = lambda: b.call(  # noqa: E731
            lambda: getattr(b.router.mobility, "awaiting_interest", 0))
        await until(lambda: move_out.done() or waiting() > 0,
                    what="the move-out answered or waiting")
        if not move_out.done():
            gate.release()       # the proxy waits: let A have the new pull filter
        ticket = await move_out
        await publish(pub, "new", range(20))        # right after the reply
        await pub.set_keys()                        # a round trip: A has routed them
        gate.release()
        await until(lambda: unannounced(b) == [], what="A acknowledged")
        await publish(pub, "new", [20])             # after them on the same link
        await until(lambda: 20 in buffered_seqs(b, "c"), what="the last one buffered")
        entries, reply = await request_move_in(client, ticket, timeout=10)
        seqs = [attrs["Seq"] for attrs, _ids in entries]
        lost = sorted(set(range(21)) - set(seqs))
        assert seqs == list(range(21)), f"lost, and nobody was told: {lost}"
        assert ticket.unannounced == (), ticket.unannounced
    finally:
        await client.close()
        await pub.close()
        await gate.close()
        b.stop()
        a.stop()


async def test_a_reply_sent_before_the_peers_know_says_which_do_not(tmp_path):
    """The wait is bounded (``mobility-announce-wait``): when the link is
    still down after it, the move-out reply names the peers that may not
    know (what is published there meanwhile is missing from the buffer,
    and the client was told), and so does a move-in reply."""
    a = single_router("A", accept=["B"])
    gate = Gate(int(a.federation_urls[0].rsplit(":", 1)[1]))
    gate_url = await gate.start()
    gate.shut()
    b = router_b(gate_url, tmp_path / "b", mobility_announce_wait=0.3)
    pub = await connect(a.url)
    mc = await MobileConnection.open(b.url, timeout=10)
    got = Received(mc)
    try:
        await mc.subscribe('Producer == "p"')
        ticket = await mc.move_out()
        assert ticket.unannounced == ("A",), ticket
        await publish(pub, "p", range(10))          # not forwarded: the link is down
        gate.open()
        await until(lambda: unannounced(b) == [], what="B's interest known at A")
        await publish(pub, "p", range(10, 20))
        await until(lambda: 19 in buffered_seqs(b, mc.client_id), what="buffered")
        gate.shut()
        await until(lambda: unannounced(b) != [], what="the link down again")
        report = await mc.move_in(b.url)
        assert report.unannounced == ("A",), report
        assert got.by_producer["p"] == list(range(10, 20))
        assert b.call(lambda: b.router.mobility.stats["unannounced"]) == 2
    finally:
        await mc.close()
        await pub.close()
        await gate.close()
        b.stop()
        a.stop()


async def test_a_peer_that_is_off_costs_a_move_no_wait(tmp_path):
    """B dials A at a port where nothing listens (a configured peer that is
    off for a long time). Once the link has been down for the whole bound,
    waiting cannot help: a move-out and a move-in reply name A at once,
    without waiting (they used to wait the whole bound, each: a hang on
    every move)."""
    b = router_b(f"ewaf://127.0.0.1:{free_port()}", tmp_path / "b",
                 mobility_announce_wait=0.3)
    mc = await MobileConnection.open(b.url, timeout=10)
    stats = lambda: b.call(lambda: dict(b.router.mobility.stats))  # noqa: E731
    try:
        await mc.subscribe('Producer == "p"')
        await until(lambda: b.call(lambda: b.router.federation.interest_unreachable(0.3))
                    == ["A"], what="the link down for the whole bound")
        ticket = await mc.move_out()
        assert ticket.unannounced == ("A",), ticket
        report = await mc.move_in(b.url)
        assert report.unannounced == ("A",), report
        counters = stats()
        assert counters["interest_waits"] == 0, counters       # neither reply waited
        assert counters["unannounced_at_once"] == 2, counters
        assert counters["unannounced"] == 2, counters
    finally:
        await mc.close()
        b.stop()


async def test_a_link_just_down_is_still_waited_for(tmp_path):
    """A link that was up and has just gone down (its peer restarting, say)
    is not given up at once: a move-out right after the drop waits for it
    (within the bound), and names it only if it is still down."""
    a = single_router("A", accept=["B"])
    gate = Gate(int(a.federation_urls[0].rsplit(":", 1)[1]))
    gate_url = await gate.start()
    b = router_b(gate_url, tmp_path / "b", mobility_announce_wait=60)
    mc = await MobileConnection.open(b.url, timeout=10)
    try:
        await mc.subscribe('Producer == "p"')
        await until(lambda: unannounced(b) == [], what="B's interest known at A")
        gate.shut()
        await until(lambda: unannounced(b) != [], what="the link down")
        move_out = asyncio.ensure_future(mc.move_out())
        waiting = lambda: b.call(  # noqa: E731
            lambda: getattr(b.router.mobility, "awaiting_interest", 0))
        await until(lambda: move_out.done() or waiting() > 0,
                    what="the move-out answered or waiting")
        gate.open()
        ticket = await move_out
        assert ticket.unannounced == (), ticket
        counters = b.call(lambda: dict(b.router.mobility.stats))
        assert counters["interest_waits"] == 1, counters
        assert counters["unannounced_at_once"] == 0, counters
    finally:
        await mc.close()
        await gate.close()
        b.stop()
        a.stop()
