"""Mobility against real routers on loopback: move out, publish while away,
move in (same router: abbreviated; another router: full), and nothing is
lost; quota, expiry, secrets and bad requests."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import defaultdict

import pytest

from elvin.client import connect
from elvin.mobility import MobileConnection, MobilityError, MobilityProxy, ProxyConfig
from elvin.mobility import protocol as P
from elvin.mobility.client import request_move_in, request_move_out
from elvin.mobility.exchange import exchange, hello
from elvin.protocol import ConnRply, ConnRqst, FrameDecoder, SubAddRqst, frame
from elvin.values import Int64
from tests.waiting import until


class Received:
    """Every notification a mobile client's application sees, per producer."""

    def __init__(self, mc: MobileConnection) -> None:
        self.by_producer: dict[str, list[int]] = defaultdict(list)
        self.all: list[dict] = []
        mc.add_listener(self)

    def __call__(self, notification) -> None:
        self.all.append(dict(notification))
        self.by_producer[notification["Producer"]].append(notification["Seq"])

    def count(self) -> int:
        return len(self.all)


async def publish(conn, producer: str, seqs, **extra) -> None:
    for seq in seqs:
        await conn.send({"Producer": producer, "Seq": seq, "Kind": "test", **extra})


def proxy_of(router) -> MobilityProxy:
    return router.router.mobility


def buffered(router, client_id: str) -> int:
    handler = proxy_of(router).handlers.get(client_id)
    return handler.buffered if handler is not None else -1


async def test_move_out_and_in_at_the_same_router(make_router):
    router = make_router(mobility=True)
    mc = await MobileConnection.open(router.url)
    got = Received(mc)
    sub = await mc.subscribe('Kind == "test"')
    other = await mc.subscribe('Producer == "b"')
    pub_a, pub_b = await connect(router.url), await connect(router.url)
    try:
        await publish(pub_a, "a", range(0, 5))
        await until(lambda: got.count() == 5)
        ticket = await mc.move_out()
        assert mc.state == "moved-out" and mc.connection is None
        assert ticket.secret and ticket.client_id == mc.client_id
        await publish(pub_a, "a", range(5, 15))
        await publish(pub_b, "b", range(0, 10))
        await until(lambda: buffered(router, mc.client_id) == 20)
        assert got.count() == 5                # nothing while away
        report = await mc.move_in(router.url)
        assert report.abbreviated and report.caught_up == 20 and report.dropped == 0
        assert not report.expired
        await publish(pub_a, "a", range(15, 20))
        await until(lambda: got.count() == 30)
        assert got.by_producer["a"] == list(range(20))
        assert got.by_producer["b"] == list(range(10))
        # the buffered notifications reached the right subscriptions: "b"
        # matched both, "a" only the first, each once per subscription
        b_seen = []
        while other.pending:
            b_seen.append(other.get_nowait()["Seq"])
        assert b_seen == list(range(10))
        assert sub.pending == 30
        # released once the client has the buffer (its release is not answered)
        await until(lambda: proxy_of(router).handlers == {})
    finally:
        await mc.close()
        await pub_a.close()
        await pub_b.close()


async def test_move_in_at_another_router_downloads_the_buffer(make_router):
    old, new = make_router(mobility=True), make_router(mobility=True)
    mc = await MobileConnection.open(old.url)
    got = Received(mc)
    await mc.subscribe("require(Seq)")
    pub_old, pub_new = await connect(old.url), await connect(new.url)
    try:
        await publish(pub_old, "old", range(3))
        await until(lambda: got.count() == 3)
        await mc.move_out()
        await publish(pub_old, "old", range(3, 40))
        await until(lambda: buffered(old, mc.client_id) == 37)
        report = await mc.move_in(new.url)
        assert not report.abbreviated
        assert report.caught_up == 37 and report.dropped == 0
        assert "127.0.0.1" in mc.connection.url and mc.connection.url != pub_old.url
        await publish(pub_new, "new", range(5))
        await until(lambda: got.count() == 45)
        assert got.by_producer["old"] == list(range(40))
        assert got.by_producer["new"] == list(range(5))
        await until(lambda: proxy_of(old).handlers == {})
        assert proxy_of(old).stats["download"] == 1
        assert proxy_of(new).stats["move_in"] == 1
        # and it can move again, back to the first router
        await mc.move_out()
        await publish(pub_new, "new", range(5, 9))
        await until(lambda: buffered(new, mc.client_id) == 4)
        report = await mc.move_in(old.url)
        assert report.caught_up == 4
        assert got.by_producer["new"] == list(range(9))
    finally:
        await mc.close()
        await pub_old.close()
        await pub_new.close()


async def test_full_move_in_over_the_bus_with_ping_and_delay(router):
    """Two proxies on one router (different ids) stand for the move-out and
    move-in proxies of a federation: the download request, the reply and the
    ping all travel through the publish/subscribe system."""
    pub = await connect(router.url)
    async with MobilityProxy(router.url, ProxyConfig(id="proxy-A")) as a, \
            MobilityProxy(router.url, ProxyConfig(id="proxy-B")):
        for sync in ("ping", "delay"):
            mc = await MobileConnection.open(router.url, proxy="proxy-A")
            got = Received(mc)
            await mc.subscribe(f'Run == "{sync}"')
            try:
                await mc.move_out()
                await publish(pub, "p", range(30), Run=sync)
                await until(lambda mc=mc: a.handlers[mc.client_id].buffered == 30)
                mc.proxy = "proxy-B"
                report = await mc.move_in(router.url, sync=sync, delay=0.05, via="bus")
                assert not report.abbreviated
                assert report.caught_up == 30
                if sync == "ping":
                    assert report.ping_ok is True
                    assert a.stats["pings"] >= 1
                await publish(pub, "p", range(30, 35), Run=sync)
                await until(lambda got=got: got.count() == 35)
                assert got.by_producer["p"] == list(range(35))
            finally:
                await mc.close()
    await pub.close()


async def test_ping_without_a_route_gives_up_and_still_moves_in(make_router):
    old, new = make_router(mobility=True), make_router(mobility=True)
    mc = await MobileConnection.open(old.url)
    got = Received(mc)
    await mc.subscribe("require(Seq)")
    pub = await connect(old.url)
    try:
        await mc.move_out()
        await publish(pub, "p", range(4))
        await until(lambda: buffered(old, mc.client_id) == 4)
        report = await mc.move_in(new.url, sync="ping", ping_timeout=0.3)
        assert report.ping_ok is False        # no federation: no route back
        assert report.caught_up == 4 and got.by_producer["p"] == [0, 1, 2, 3]
    finally:
        await mc.close()
        await pub.close()


async def test_values_of_every_type_survive_the_buffer(make_router):
    old, new = make_router(mobility=True), make_router(mobility=True)
    mc = await MobileConnection.open(old.url)
    sub = await mc.subscribe("require(Payload)")
    pub = await connect(old.url)
    value = {"Producer": "t", "Seq": 0, "Payload": "ü\u2603", "I32": -5,
             "I64": Int64(7), "Real": 2.5, "Blob": bytes(range(256)) * 10}
    try:
        await mc.move_out()
        await pub.send(value)
        await until(lambda: buffered(old, mc.client_id) == 1)
        await mc.move_in(new.url)
        got = await sub.get(timeout=5)
        assert dict(got) == value
        assert type(got["I64"]) is Int64 and type(got["I32"]) is int
    finally:
        await mc.close()
        await pub.close()


async def test_quota_keeps_the_newest_and_reports_the_dropped(make_router):
    router = make_router(mobility=True, mobility_quota=5)
    mc = await MobileConnection.open(router.url, quota=100)
    got = Received(mc)
    await mc.subscribe("require(Seq)")
    pub = await connect(router.url)
    try:
        ticket = await mc.move_out()
        assert ticket.quota == 5                  # the proxy grants at most its own
        await publish(pub, "p", range(20))
        await until(lambda: proxy_of(router).handlers[mc.client_id].dropped == 15)
        report = await mc.move_in(router.url)
        assert report.caught_up == 5 and report.dropped == 15 and not report.expired
        assert got.by_producer["p"] == list(range(15, 20))
    finally:
        await mc.close()
        await pub.close()


async def test_unclaimed_buffer_expires_and_the_client_hears_of_it(make_router):
    router = make_router(mobility=True)
    mc = await MobileConnection.open(router.url, expiry=0.3)
    got = Received(mc)
    await mc.subscribe("require(Seq)")
    pub = await connect(router.url)
    try:
        ticket = await mc.move_out()
        assert ticket.expiry == pytest.approx(0.3)
        await publish(pub, "p", range(6))
        await until(lambda: proxy_of(router).stats["expired"] == 1)
        assert mc.client_id not in proxy_of(router).handlers
        await publish(pub, "p", range(6, 8))   # nobody buffers these any more
        report = await mc.move_in(router.url)
        assert report.expired and report.caught_up == 0 and report.dropped == 6
        assert got.count() == 0
        await publish(pub, "p", range(8, 10))  # but the subscriptions are back
        await until(lambda: got.count() == 2)
        assert got.by_producer["p"] == [8, 9]
    finally:
        await mc.close()
        await pub.close()


async def test_a_wrong_secret_cannot_download(make_router):
    old, new = make_router(mobility=True), make_router(mobility=True)
    mc = await MobileConnection.open(old.url)
    got = Received(mc)
    await mc.subscribe("require(Seq)")
    pub = await connect(old.url)
    thief = await connect(new.url)
    thief_at_old = await connect(old.url)
    try:
        ticket = await mc.move_out()
        await publish(pub, "p", range(5))
        await until(lambda: buffered(old, mc.client_id) == 5)
        forged = dataclasses.replace(ticket, secret="not-the-secret")
        # through a proxy (full move-in) ...
        with pytest.raises(MobilityError) as info:
            await request_move_in(thief, forged, timeout=5)
        assert info.value.code == "bad-secret"
        # ... and straight at the move-out proxy (abbreviated / download),
        # privately with its public key (which is no secret: anyone may ask)
        key = await hello(thief_at_old, ticket.proxy, 5)
        assert key == ticket.proxy_key == proxy_of(old).public_key
        for kind in (P.MOVE_IN, P.DOWNLOAD):
            request = {P.REQUEST: kind, P.PROXY: ticket.proxy, P.CLIENT: ticket.client_id,
                       P.SECRET: "guess", P.FROM: ticket.proxy}
            with pytest.raises(MobilityError) as info:
                await exchange(thief_at_old, request, 5, to_key=key)
            assert info.value.code == "bad-secret"
            # a secret sent in the clear is refused whatever it is
            with pytest.raises(MobilityError) as info:
                await exchange(thief_at_old, {**request, P.SECRET: ticket.secret}, 5)
            assert info.value.code == "insecure"
        assert proxy_of(old).stats["bad_secret"] == 3
        assert proxy_of(old).stats["insecure"] == 2
        assert buffered(old, mc.client_id) == 5       # untouched
        report = await mc.move_in(new.url)
        assert report.caught_up == 5 and got.by_producer["p"] == list(range(5))
    finally:
        for conn in (pub, thief, thief_at_old):
            await conn.close()
        await mc.close()


async def test_unknown_clients_and_malformed_requests_get_clear_errors(make_router):
    router = make_router(mobility=True)
    proxy_id = proxy_of(router).id
    conn = await connect(router.url)
    watcher = await connect(router.url)
    plain_replies = await watcher.subscribe(f'{P.REPLY} == "move-out"')
    try:
        ticket = await request_move_out(conn, [], client_id="c1")
        with pytest.raises(MobilityError) as info:
            await request_move_in(conn, dataclasses.replace(ticket, client_id="nobody"),
                                  timeout=5)
        assert info.value.code == "unknown-client" and "nobody" in str(info.value)
        with pytest.raises(MobilityError) as info:
            await request_move_out(conn, [], client_id="c1")
        assert info.value.code == "in-use"
        bad = [
            ({P.SUBSCRIPTIONS: "not json"}, "malformed", "JSON"),
            ({P.SUBSCRIPTIONS: '[{"id": 1}]'}, "malformed", "expression"),
            ({P.SUBSCRIPTIONS: '[{"id": 1, "expression": "a =="}]'}, "subscription", "refused"),
            ({P.SUBSCRIPTIONS: 42}, "malformed", "JSON string"),
            ({P.SUBSCRIPTIONS: "[]", P.CLIENT: 7}, "malformed", P.CLIENT),
            ({P.SUBSCRIPTIONS: "[]", P.REQUEST: "fly"}, "malformed", "fly"),
        ]
        key = await hello(conn, proxy_id, 5)
        for extra, code, words in bad:
            request = {P.REQUEST: P.MOVE_OUT, P.PROXY: proxy_id, P.CLIENT: "c2", **extra}
            with pytest.raises(MobilityError) as info:
                await exchange(conn, request, 5, to_key=key)
            assert info.value.code == code and words in str(info.value), (extra, info.value)
        # a move-in that names a move-out proxy nobody can reach
        request = {P.REQUEST: P.MOVE_IN, P.PROXY: proxy_id, P.CLIENT: "c1", P.SECRET: "s",
                   P.FROM: "elvin://127.0.0.1:1"}
        with pytest.raises(MobilityError) as info:
            await exchange(conn, request, 10, to_key=key)
        assert info.value.code == "unreachable"
        # no reply key: the error comes back in the clear (it holds no secret)
        await conn.send({P.REQUEST: P.MOVE_OUT, P.PROXY: proxy_id, P.CLIENT: "c3",
                         P.REQUEST_ID: "r1", P.REPLY_KEY: b"short"})
        error = await plain_replies.get(timeout=5)
        assert error[P.STATUS] == "error" and error[P.ERROR_CODE] == "malformed"
        assert P.REPLY_KEY in error[P.ERROR]
        # the secret of a successful move-out never reaches an eavesdropper
        assert plain_replies.pending == 0
        # and the proxy still works
        ticket2 = await request_move_out(conn, [], client_id="c4")
        entries, reply = await request_move_in(conn, ticket2)
        assert entries == [] and reply.count == 0
        assert proxy_of(router).stats["malformed"] >= 6
    finally:
        await conn.close()
        await watcher.close()


async def test_proxy_limits_clients_and_subscriptions(router):
    config = ProxyConfig(id="tiny", max_clients=1, max_subscriptions=2)
    conn = await connect(router.url)
    async with MobilityProxy(router.url, config):
        specs = [P.SubscriptionSpec(i, "require(x)") for i in range(3)]
        with pytest.raises(MobilityError) as info:
            await request_move_out(conn, specs, client_id="a", proxy="tiny")
        assert info.value.code == "limit"
        await request_move_out(conn, specs[:2], client_id="a", proxy="tiny")
        with pytest.raises(MobilityError) as info:
            await request_move_out(conn, specs[:1], client_id="b", proxy="tiny")
        assert info.value.code == "limit"
    await conn.close()


async def test_no_proxy_is_a_clear_timeout(router):
    mc = await MobileConnection.open(router.url, timeout=0.5)
    await mc.subscribe("require(x)")
    try:
        with pytest.raises(MobilityError) as info:
            await mc.move_out()
        assert info.value.code == "timeout" and "proxy" in str(info.value)
        assert mc.state == "connected"   # still usable
    finally:
        await mc.close()


async def test_move_in_while_connected_is_refused(make_router):
    router = make_router(mobility=True)
    mc = await MobileConnection.open(router.url)
    try:
        with pytest.raises(MobilityError) as info:
            await mc.move_in(router.url)
        assert info.value.code == "state"
        with pytest.raises(ValueError):
            await mc.move_in(router.url, sync="teleport")
    finally:
        await mc.close()


async def test_a_failed_download_can_be_collected_later(make_router):
    old, new = make_router(mobility=True), make_router(mobility=True)
    mc = await MobileConnection.open(old.url, download_timeout=5)
    got = Received(mc)
    await mc.subscribe("require(Seq)")
    pub_old, pub_new = await connect(old.url), await connect(new.url)
    try:
        ticket = await mc.move_out()
        await publish(pub_old, "old", range(6))
        await until(lambda: buffered(old, mc.client_id) == 6)
        with pytest.raises(MobilityError) as info:     # a move-out proxy nobody can reach
            await mc.move_in(new.url, previous_proxy="elvin://127.0.0.1:1")
        assert info.value.code == "unreachable"
        assert mc.state == "connected" and mc.ticket == ticket
        await publish(pub_new, "new", range(2))        # the subscriptions here work
        await until(lambda: got.by_producer["new"] == [0, 1])
        report = await mc.collect()
        assert report.caught_up == 6 and got.by_producer["old"] == list(range(6))
        with pytest.raises(MobilityError):
            await mc.collect()                           # nothing left
    finally:
        await mc.close()
        await pub_old.close()
        await pub_new.close()


async def test_a_repeated_download_gets_the_same_buffer_only_with_the_secret(make_router):
    """A download whose reply was lost (across a federation) is repeated; the
    move-out proxy answers it again for a while, to the secret's holder only."""
    router = make_router(mobility=True)
    proxy_id = proxy_of(router).id
    conn = await connect(router.url)
    pub = await connect(router.url)
    try:
        ticket = await request_move_out(conn, [P.SubscriptionSpec(4, "require(Seq)")],
                                        client_id="again")
        await publish(pub, "p", range(3))
        await until(lambda: buffered(router, "again") == 3)
        request = {P.REQUEST: P.DOWNLOAD, P.PROXY: proxy_id, P.CLIENT: "again",
                   P.SECRET: ticket.secret}
        key = ticket.proxy_key
        first = await exchange(conn, request, 5, to_key=key)
        second = await exchange(conn, request, 5, to_key=key)
        assert first.count == second.count == 3 and first.blobs == second.blobs
        assert [ids for _a, ids in P.decode_batch(first.blobs[0])] == [[4]] * 3
        with pytest.raises(MobilityError) as info:
            await exchange(conn, {**request, P.SECRET: "wrong"}, 5, to_key=key)
        assert info.value.code == "bad-secret"
    finally:
        await conn.close()
        await pub.close()


async def test_a_mobile_subscription_iterates_and_ends_like_a_subscription(router):
    """Same buffer semantics as elvin.client.Subscription: bounded (oldest
    dropped and counted), iteration ends at close, get() then says closed."""
    from elvin.client import SubscriptionClosedError

    mc = await MobileConnection.open(router.url)
    try:
        sub = await mc.subscribe("Kind == 'iter'", buffer_size=3)
        async with connect(router.url) as producer:
            await publish(producer, "p", range(5), Kind="iter")
        await until(lambda: sub.delivered == 5)
        assert sub.pending == 3 and sub.dropped == 2
        assert sub.get_nowait()["Seq"] == 2
        await sub.close()
        assert [n["Seq"] async for n in sub] == [3, 4]   # drained, then ended
        with pytest.raises(SubscriptionClosedError):
            await sub.get(timeout=1)
    finally:
        await mc.close()


async def test_a_move_in_that_cannot_have_the_proxys_key_leaves_no_fence_behind(make_router):
    """An abbreviated move-in subscribes to its own fence; when the proxy's
    key cannot be had (nobody answers hello under that name) the move-in
    fails and the client stays attached here live, without the fence's
    subscription (it used to stay, one more for each failed try)."""
    router = make_router(mobility=True)
    mc = await MobileConnection.open(router.url, download_timeout=0.2)
    try:
        await mc.subscribe('Kind == "test"')
        ticket = await mc.move_out()
        nobody = "elvin://127.0.0.1:1"
        mc.ticket = dataclasses.replace(ticket, proxy=nobody, proxy_key=b"")
        before = len(router.router.engine)
        with pytest.raises(MobilityError):
            await mc.move_in(router.url, proxy=nobody)
        assert mc.state == "connected", mc.state
        # the client's one subscription, live again; nothing else of the move-in
        await until(lambda: len(router.router.engine) == before + 1,
                    what="only the client's own subscription added")
    finally:
        await mc.close()


class _DiesAtFirstSubscription(asyncio.Protocol):
    """A move-out router that accepts the connection, then dies as the
    move-in proxy subscribes for the hello's reply (a kill mid-request)."""

    def connection_made(self, transport) -> None:
        self.transport, self.decoder = transport, FrameDecoder()

    def data_received(self, data: bytes) -> None:
        for packet in self.decoder.feed(data):
            if isinstance(packet, ConnRqst):
                self.transport.write(frame(ConnRply(packet.xid, {})))
            elif isinstance(packet, SubAddRqst):
                self.transport.abort()


async def test_a_move_out_router_that_dies_mid_request_is_unreachable(make_router, caplog):
    """Not an internal error with a traceback in the log: the client keeps
    its ticket and collects once that router is back (mobility chaos)."""
    router = make_router(mobility=True)
    proxy_id = proxy_of(router).id
    server = await asyncio.get_running_loop().create_server(_DiesAtFirstSubscription,
                                                            "127.0.0.1", 0)
    dead = f"elvin://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    conn = await connect(router.url)
    try:
        key = await hello(conn, proxy_id, 5)
        request = {P.REQUEST: P.MOVE_IN, P.PROXY: proxy_id, P.CLIENT: "c1",
                   P.SECRET: "s" * 20, P.FROM: dead}
        with pytest.raises(MobilityError) as info:
            await exchange(conn, request, 10, to_key=key)
        assert info.value.code == "unreachable" and "was lost" in str(info.value)
        assert "request failed" not in caplog.text         # no traceback
    finally:
        await conn.close()
        server.close()
