"""Keepalive, clean close, router-initiated Disconn, reconnection, redirects."""

from __future__ import annotations

import asyncio

import pytest

from elvin import Keys
from elvin.client import CloseReason, ConnectionClosedError, connect
from elvin.protocol import (
    ConnRply,
    ConnRqst,
    Disconn,
    DisconnReason,
    FrameDecoder,
    SubAddRqst,
    SubRply,
    frame,
)


class ScriptedRouter(asyncio.Protocol):
    """A minimal peer for what the bundled router cannot be made to do:
    stay silent after ConnRply (keepalive timeout) or redirect (Disconn 2)."""

    def __init__(self, redirect_to: str | None = None,
                 disconn: tuple[int, str] | None = None, after_conn_rply: tuple = ()) -> None:
        self.redirect_to = redirect_to
        self.disconn = disconn       # sent 0.2 s after ConnRply
        self.after_conn_rply = after_conn_rply   # packets sent right after it
        self.received: list = []
        self.next_id = 100

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.decoder = FrameDecoder()

    def data_received(self, data: bytes) -> None:
        for packet in self.decoder.feed(data):
            self.received.append(packet)
            if isinstance(packet, ConnRqst):
                if self.redirect_to:
                    self.transport.write(frame(Disconn(DisconnReason.REDIRECT,
                                                       self.redirect_to)))
                    self.transport.close()
                else:
                    self.transport.write(frame(ConnRply(packet.xid, {})))
                    for extra in self.after_conn_rply:
                        self.transport.write(frame(extra))
                    if self.disconn:
                        asyncio.get_running_loop().call_later(0.2, self._disconnect)
            elif isinstance(packet, SubAddRqst):
                self.next_id += 1
                self.transport.write(frame(SubRply(packet.xid, self.next_id)))
            # everything else (TestConn included) gets no answer

    def _disconnect(self) -> None:
        self.transport.write(frame(Disconn(*self.disconn)))
        self.transport.close()


@pytest.fixture
async def scripted():
    """start(redirect_to=None) -> URL of a ScriptedRouter on a free port;
    ``start.redirects[url] = target`` changes where it redirects."""
    servers = []
    peers: list[ScriptedRouter] = []
    redirects: dict[str, str] = {}

    async def start(redirect_to: str | None = None,
                    disconn: tuple[int, str] | None = None, after_conn_rply: tuple = ()) -> str:
        loop = asyncio.get_running_loop()
        box: dict[str, str] = {}

        def factory():
            peer = ScriptedRouter(redirects.get(box["url"]), disconn, after_conn_rply)
            peers.append(peer)
            return peer
        server = await loop.create_server(factory, "127.0.0.1", 0)
        servers.append(server)
        box["url"] = f"elvin://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        if redirect_to:
            redirects[box["url"]] = redirect_to
        return box["url"]

    start.peers = peers
    start.redirects = redirects
    yield start
    for server in servers:
        server.close()


async def test_keepalive_keeps_an_idle_connection(router_url):
    # the router's answer may be slow on a loaded machine: only its absence
    # counts (the client sends the next TestConn once this wait is over)
    async with connect(router_url, keepalive=0.2, keepalive_timeout=2) as conn:
        sub = await conn.subscribe("require(alive)")
        async with asyncio.timeout(20):
            while conn.test_conns_sent < 2:          # two keepalives answered in time
                await asyncio.sleep(0.05)
        assert conn.is_open
        await conn.send({"alive": 1})
        assert (await sub.get(timeout=5))["alive"] == 1


async def test_keepalive_detects_a_silent_router(scripted):
    url = await scripted()
    conn = await connect(url, keepalive=0.2, keepalive_timeout=0.3)
    reason = await asyncio.wait_for(conn.closed, 5)
    assert reason.kind == "lost" and "TestConn" in reason.message
    assert conn.state == "closed"
    assert any(type(p).__name__ == "TestConn" for p in scripted.peers[0].received)


async def test_router_answers_test_conn_without_keepalive(router_url):
    async with connect(router_url) as conn:
        assert conn.keepalive is None
        await asyncio.sleep(0.2)
        assert conn.test_conns_sent == 0


async def test_clean_close_waits_for_disconn_rply(router_url):
    conn = await connect(router_url)
    sub = await conn.subscribe("require(x)")
    closes = []
    conn.add_close_listener(closes.append)
    reason = await conn.close()
    assert reason.kind == "closed" and closes == [reason]
    assert sub.closed
    with pytest.raises(ConnectionClosedError):
        await conn.subscribe("require(y)")


async def test_router_shutdown_is_surfaced(router):
    conn = await connect(router.url)
    sub = await conn.subscribe("require(x)")
    closes: list[CloseReason] = []
    conn.add_close_listener(closes.append)
    await asyncio.get_running_loop().run_in_executor(None, router.stop)
    reason = await asyncio.wait_for(conn.closed, 10)
    assert reason.kind == "shutdown" and reason.disconn_reason == 1
    assert closes == [reason]
    assert conn.state == "closed" and sub.closed
    with pytest.raises(ConnectionClosedError):
        await conn.send({"x": 1})


async def test_reconnect_after_restart_restores_everything(router):
    secret = b"reconnect"
    conn = await connect(router.url, reconnect=True, reconnect_delay=0.05,
                         subscription_keys=Keys.consumer_subscription(secret))
    producer = None
    try:
        sub = await conn.subscribe("require(r)")
        q = await conn.quench(["r"])
        assert len(q.terms) == 1
        old_id = sub.id
        lost, reconnected = [], asyncio.Event()
        conn.add_connection_lost_listener(lost.append)
        conn.add_reconnect_listener(lambda c: reconnected.set())

        await asyncio.get_running_loop().run_in_executor(None, router.restart)
        await asyncio.wait_for(reconnected.wait(), 15)
        assert lost and lost[0].kind == "shutdown"
        assert conn.is_open and conn.reconnects == 1
        assert not sub.closed and sub.id is not None
        del old_id  # the router may or may not reuse the id; the object is what counts

        producer = await connect(router.url)
        await producer.send({"r": 1})
        n = await sub.get(timeout=5)
        assert n["r"] == 1
        # connection keys were restored: a consumer-scheme notification is secure
        await producer.send({"r": 2}, keys=Keys.consumer_notification(secret),
                            deliver_insecure=False)
        n = await sub.get(timeout=5)
        assert n["r"] == 2 and n.secure
        # quench restored: own subscription re-reported, old term removed first
        assert len(q.terms) == 1
        assert list(q.subscriptions.values())[0] == sub.ast
    finally:
        if producer is not None:
            await producer.close()
        await conn.close()


async def test_requests_wait_while_reconnecting(router):
    conn = await connect(router.url, reconnect=True, reconnect_delay=0.05)
    try:
        loop = asyncio.get_running_loop()
        stop = loop.run_in_executor(None, router.stop)
        await stop
        async with asyncio.timeout(10):
            while conn.state != "reconnecting":      # the client has noticed
                await asyncio.sleep(0.01)
        start = loop.run_in_executor(None, router.start)
        sub = await conn.subscribe("require(w)")     # waits for the reconnection
        await start
        await conn.send({"w": 1})
        assert (await sub.get(timeout=5))["w"] == 1
    finally:
        await conn.close()
    assert conn.state == "closed"


async def test_reconnect_gives_up(router):
    conn = await connect(router.url, reconnect=True, reconnect_delay=0.05,
                         reconnect_attempts=3, timeout=1)
    await asyncio.get_running_loop().run_in_executor(None, router.stop)
    reason = await asyncio.wait_for(conn.closed, 10)
    assert reason.kind == "reconnect-failed"


async def test_redirect_on_connect(scripted, router_url):
    url = await scripted(redirect_to=router_url)
    async with connect(url) as conn:
        assert conn.url.endswith(router_url.rsplit(":", 1)[1])
        sub = await conn.subscribe("require(redirected)")
        await conn.send({"redirected": 1})
        assert (await sub.get(timeout=5))["redirected"] == 1


async def test_redirect_loop_and_bad_redirect_are_refused(scripted):
    url = await scripted()
    scripted.redirects[url] = url
    with pytest.raises(ConnectionClosedError, match="too many redirections"):
        await connect(url)
    bad = await scripted(redirect_to="not a uri")
    with pytest.raises(ConnectionClosedError, match="bad URI"):
        await connect(bad)


async def test_redirect_during_a_session_moves_the_connection(scripted, router_url):
    url = await scripted(disconn=(DisconnReason.REDIRECT, router_url))
    conn = await connect(url, reconnect=True, reconnect_delay=0.05)
    try:
        lost, moved = [], asyncio.Event()
        conn.add_connection_lost_listener(lost.append)
        conn.add_reconnect_listener(lambda c: moved.set())
        sub = await conn.subscribe("require(moved)")
        await asyncio.wait_for(moved.wait(), 10)
        assert lost[0].kind == "redirect" and lost[0].redirect == router_url
        assert conn.url.endswith(":" + router_url.rsplit(":", 1)[1])
        await conn.send({"moved": 1})
        assert (await sub.get(timeout=5))["moved"] == 1
    finally:
        await conn.close()


@pytest.mark.parametrize(("reason", "kind"), [(DisconnReason.PROTOCOL_ERRORS, "protocol-errors"),
                                              (DisconnReason.SHUTDOWN, "shutdown"),
                                              (DisconnReason.REDIRECT, "redirect")])
async def test_router_disconn_reasons_are_surfaced(scripted, reason, kind):
    url = await scripted(disconn=(reason, "elvin://127.0.0.1:9"))
    conn = await connect(url)
    closed = await asyncio.wait_for(conn.closed, 5)
    assert closed.kind == kind and closed.disconn_reason == reason
    if kind == "redirect":
        assert closed.redirect == "elvin://127.0.0.1:9"


async def test_a_packet_the_client_s_table_forbids_closes_the_connection_saying_which(scripted):
    # a second ConnRply in an open session: a protocol violation (spec 7.3.2),
    # decided by elvin.protocol.states.CLIENT, not by a handler
    url = await scripted(after_conn_rply=(ConnRply(99, {}),))
    conn = await connect(url)
    closed = await asyncio.wait_for(conn.closed, 5)
    assert closed.kind == "protocol-violation"
    assert "CONN_RPLY" in closed.message
    assert conn.state == "closed"
