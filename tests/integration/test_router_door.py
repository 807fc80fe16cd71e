"""The door (elvin.router.door): what sockets may hold before and around a
session, against a real router over loopback. Each limit here is set small
so that a test reaches it with a handful of sockets; 127.0.0.2 and
127.0.0.3 stand for other addresses."""

from __future__ import annotations

import asyncio
import struct

import pytest

from elvin.errors import NackCode
from elvin.keys import Keys
from elvin.protocol import (
    ConfConn,
    ConnRply,
    ConnRqst,
    Nack,
    NotifyDeliver,
    NotifyEmit,
    PacketId,
    QnchAddRqst,
    SecRply,
    SecRqst,
    SubAddRqst,
    TestConn,
    UNotify,
    frame,
)
from elvin.router.status import router_status
from tests.waiting import until

from .rawclient import RawClient


def refused(router, kind: str) -> int:
    return router.router.stats.refused.get(kind, 0)


async def opened(port: int, source: str = "127.0.0.1") -> RawClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0),
                                                   limit=2**24)
    return RawClient(reader, writer)


async def closed_at_once(client: RawClient) -> None:
    """The router closed the socket without a word."""
    assert await client.closed_by_router(10) == []


# -- before a session ------------------------------------------------------------------

async def test_a_large_frame_before_conn_rqst_is_refused_on_its_header(make_router):
    router = make_router(connect_timeout=60, pre_session_max_length=1024)
    client = await opened(router.port)
    # a ConnRqst announced at 1 MiB: closed on its first 8 bytes, not after 1 MiB
    client.send_raw(struct.pack(">Ii", 1 << 20, PacketId.CONN_RQST) + bytes(1000))
    await closed_at_once(client)
    assert refused(router, "pre-session-frame") == 1
    # a ConnRqst of a normal size still connects
    async with await opened(router.port) as ok:
        assert isinstance(await ok.connect(), ConnRply)


async def test_a_first_unotify_may_be_as_long_as_any_packet(make_router):
    router = make_router(pre_session_max_length=1024)
    async with await RawClient.connected(router.port) as consumer:
        await consumer.subscribe("require(Big)")
        producer = await opened(router.port)
        producer.send(UNotify(4, 0, {"Big": "x" * 100_000}, True))
        delivered = await consumer.expect(NotifyDeliver)
        assert len(delivered.attributes["Big"]) == 100_000
        await producer.close()


async def test_sockets_without_a_session_are_capped_per_address(make_router):
    router = make_router(max_pre_session_per_address=3, connect_timeout=60)
    idle = [await opened(router.port) for _ in range(3)]
    await until(lambda: router.router.door.pre_session == 3)
    extra = await opened(router.port)
    await closed_at_once(extra)
    assert refused(router, "pre-session-per-address") == 1
    # another address is not held back by this one's idle sockets
    async with await opened(router.port, "127.0.0.2") as other:
        assert isinstance(await other.connect(), ConnRply)
    # one of the three sends ConnRqst: it has a session, and there is room again
    assert isinstance(await idle[0].connect(), ConnRply)
    async with await opened(router.port) as again:
        assert isinstance(await again.connect(), ConnRply)
    for client in idle:
        await client.close()


async def test_sockets_without_a_session_are_capped_in_all(make_router):
    router = make_router(max_pre_session=3, max_pre_session_per_address=0,
                         connect_timeout=60)
    idle = [await opened(router.port, source) for source in ("127.0.0.1", "127.0.0.2",
                                                              "127.0.0.2")]
    await until(lambda: router.router.door.pre_session == 3)
    extra = await opened(router.port, "127.0.0.3")
    await closed_at_once(extra)
    assert refused(router, "pre-session") == 1
    for client in idle:
        await client.close()


async def test_connections_are_capped_per_address(make_router):
    router = make_router(max_connections_per_address=3)
    clients = [await RawClient.connected(router.port) for _ in range(3)]
    extra = await opened(router.port)
    await closed_at_once(extra)
    assert refused(router, "connections-per-address") == 1
    async with await opened(router.port, "127.0.0.2") as other:
        assert isinstance(await other.connect(), ConnRply)
    # the count is in the status picture and the metrics
    status = router.call(lambda: router_status(router.router))
    assert status["counters"]["refused"]["connections-per-address"] == 1
    from elvin.router.metrics import exposition
    assert 'elvind_refused_total{kind="connections-per-address"} 1' in exposition(status)
    await clients[0].close()
    async with await RawClient.connected(router.port):   # room again
        pass
    for client in clients[1:]:
        await client.close()


# -- partial frames ---------------------------------------------------------------------

async def test_a_frame_slower_than_the_minimum_rate_is_closed(make_router):
    router = make_router(frame_timeout=0.5, frame_min_rate=1000)
    async with await RawClient.connected(router.port) as client:
        # 4,000 bytes at 1,000 bytes/s after 0.5 s of grace: 4.5 s, and only 100 come
        client.send_raw(struct.pack(">Ii", 4000, PacketId.NOTIFY_EMIT) + bytes(96))
        await client.closed_by_router(30)
    assert refused(router, "slow-frame") == 1


async def test_a_frame_that_arrives_in_time_is_kept(make_router):
    router = make_router(frame_timeout=1, frame_min_rate=1000)
    data = frame(NotifyEmit({"pad": "x" * 4000}))
    async with await RawClient.connected(router.port) as client:
        client.send_raw(data[:100])
        await until(lambda: router.router.door.partial_bytes == 100)
        client.send_raw(data[100:])
        await until(lambda: router.router.door.partial_bytes == 0)
        client.send(TestConn())
        assert isinstance(await client.expect(ConfConn), ConfConn)
    assert refused(router, "slow-frame") == 0


async def test_partial_frames_over_the_cap_close_the_largest_holder(make_router):
    router = make_router(max_partial_bytes=300_000)
    door = router.router.door
    big = await RawClient.connected(router.port)
    small = await RawClient.connected(router.port)
    big.send_raw(struct.pack(">Ii", 1 << 20, PacketId.NOTIFY_EMIT) + bytes(200_000))
    await until(lambda: door.partial_bytes >= 200_000)
    data = frame(NotifyEmit({"pad": "x" * 200_000}))
    small.send_raw(data[:150_000])
    await big.closed_by_router(10)
    assert refused(router, "partial-bytes") == 1
    # the smaller holder was not touched: it finishes its frame and is answered
    small.send_raw(data[150_000:])
    small.send(TestConn())
    assert isinstance(await small.expect(ConfConn), ConfConn)
    await small.close()
    await big.close()


# -- keys -------------------------------------------------------------------------------

def _keys(n: int, size: int = 8) -> Keys:
    return Keys.consumer_subscription(*(bytes([i]) * size for i in range(n)))


@pytest.fixture
def keyed_router(make_router):
    return make_router(max_keys_per_connection=4, max_key_bytes_per_connection=100,
                       max_keys_per_subscription=2, max_key_bytes_per_subscription=40)


async def test_conn_rqst_over_the_connection_key_limits_is_nacked(keyed_router):
    async with await opened(keyed_router.port) as client:
        reply = await client.connect(sub_keys=_keys(5))
        assert isinstance(reply, Nack) and reply.error == NackCode.IMPL_LIMIT
        assert "max-keys-per-connection" in reply.message
        reply = await client.connect(sub_keys=_keys(1, 200))
        assert isinstance(reply, Nack) and "max-key-bytes-per-connection" in reply.message
        assert isinstance(await client.connect(sub_keys=_keys(4)), ConnRply)
    assert refused(keyed_router, "keys") == 2


async def test_sec_rqst_over_the_connection_key_limits_changes_nothing(keyed_router):
    async with await RawClient.connected(keyed_router.port) as client:
        assert isinstance(await client.request(SecRqst(client.xid(), add_sub_keys=_keys(3))),
                          SecRply)
        more = Keys.producer_notification(b"a", b"b")
        reply = await client.request(SecRqst(client.xid(), add_nfn_keys=more))
        assert isinstance(reply, Nack) and reply.error == NackCode.IMPL_LIMIT
        assert "max-keys-per-connection" in reply.message
        # refused whole: one of the two still fits
        one = Keys.producer_notification(b"a")
        assert isinstance(await client.request(SecRqst(client.xid(), add_nfn_keys=one)),
                          SecRply)


async def test_subscription_and_quench_keys_over_their_limits_are_nacked(keyed_router):
    async with await RawClient.connected(keyed_router.port) as client:
        reply = await client.request(SubAddRqst(client.xid(), "require(x)", True, _keys(3)))
        assert isinstance(reply, Nack) and "max-keys-per-subscription" in reply.message
        reply = await client.request(SubAddRqst(client.xid(), "require(x)", True, _keys(1, 50)))
        assert isinstance(reply, Nack) and "max-key-bytes-per-subscription" in reply.message
        reply = await client.request(QnchAddRqst(client.xid(), ("x",), True, _keys(3)))
        assert isinstance(reply, Nack) and "max-keys-per-subscription" in reply.message
    assert refused(keyed_router, "keys") == 3


# -- warnings outsiders can trigger -----------------------------------------------------

async def test_protocol_violations_are_logged_a_few_at_a_time(router, caplog):
    caplog.set_level("INFO", logger="elvin.router.session")
    for _ in range(12):
        client = await opened(router.port)
        client.send(SubAddRqst(1, "require(x)"))        # before ConnRqst: a violation
        await client.closed_by_router(10)
    lines = [r for r in caplog.records if "protocol violation" in r.getMessage()]
    assert len(lines) == 5              # elvin.ratelog.BURST; the rest summed up later
    assert router.router.session_notes.pending("protocol violations") == 7


async def test_conn_rqst_frames_are_checked_only_before_a_session(make_router):
    """After ConnRqst the negotiated Packet.Max-Length applies, not the
    pre-session limit."""
    router = make_router(pre_session_max_length=1024)
    async with await RawClient.connected(router.port) as client:
        client.send_raw(frame(ConnRqst(client.xid(), 4, 0, {"x": "y" * 4000})))
        reply = await client.next()
        assert isinstance(reply, Nack)      # "Already connected", not a closed channel
