"""Flow control: a stalled consumer's bounded queue, drop policies, DropWarn."""

from __future__ import annotations

import asyncio

import pytest

from elvin.protocol import ConfConn, DropWarn, NotifyDeliver, TestConn

from .rawclient import Closed, RawClient

QUEUE = 64 * 1024
COUNT = 1500
PAYLOAD = "x" * 4096


def queue_sizes(router):
    def sizes():
        out = []
        for session in router.router.sessions:
            if session.queue is not None:
                out.append((session.queue.bytes, session.transport.get_write_buffer_size()))
        return out
    return router.call(sizes)


async def flood(producer, count=COUNT):
    for i in range(count):
        producer.notify({"Payload": PAYLOAD, "Seq": i})
        if i % 50 == 0:
            await producer.drain()
    await producer.drain()


async def read_all(client, count, timeout=60):
    seqs = []

    async def run():
        while len(seqs) < count:
            packet = await client.next(timeout)
            if isinstance(packet, NotifyDeliver):
                seqs.append(packet.attributes["Seq"])
    await asyncio.wait_for(run(), timeout)
    return seqs


@pytest.mark.parametrize("policy", ["oldest", "newest", "largest"])
async def test_stalled_consumer_is_bounded_and_others_continue(router, policy):
    stalled = await RawClient.connected(router.port, {"Send-Queue.Max-Length": QUEUE,
                                                      "Send-Queue.Drop-Policy": policy})
    assert stalled.conn_reply.options["Send-Queue.Drop-Policy"] == policy
    await stalled.subscribe("require(Payload)")
    healthy = await RawClient.connected(router.port)
    await healthy.subscribe("require(Payload)")
    producer = await RawClient.connected(router.port)
    stalled.stop_reading()
    reader = asyncio.create_task(read_all(healthy, COUNT))
    await flood(producer)
    seqs = await reader
    assert seqs == list(range(COUNT))            # the healthy consumer got everything
    # the stalled consumer's queue never grew past its limit
    sizes = queue_sizes(router)
    assert max(q for q, _t in sizes) <= QUEUE + 64
    assert max(t for _q, t in sizes) <= 1024 * 1024
    drops = router.call(lambda: router.router.stats.drops)
    assert drops > 0
    # TestConn while packets are waiting: no ConfConn (7.4.14)
    stalled.send(TestConn())
    await stalled.drain()
    await asyncio.sleep(0.2)
    # when it reads again it finds a DropWarn and fewer notifications
    stalled.resume_reading()
    got = []
    try:
        while True:
            got.append(await stalled.next(1.0))
    except TimeoutError:
        pass
    assert any(isinstance(p, DropWarn) for p in got)
    assert not any(isinstance(p, ConfConn) for p in got)
    delivered = [p.attributes["Seq"] for p in got if isinstance(p, NotifyDeliver)]
    assert 0 < len(delivered) < COUNT
    assert delivered == sorted(delivered)
    if policy == "oldest":
        assert delivered[-1] == COUNT - 1        # the newest survive
    if policy == "newest":
        assert delivered[0] == 0                 # the oldest survive
    for c in (stalled, healthy, producer):
        await c.close()


async def test_drop_policy_none_disconnects_the_stalled_consumer(router):
    stalled = await RawClient.connected(router.port, {"Send-Queue.Max-Length": QUEUE,
                                                      "Send-Queue.Drop-Policy": "none"})
    await stalled.subscribe("require(Payload)")
    healthy = await RawClient.connected(router.port)
    await healthy.subscribe("require(Payload)")
    producer = await RawClient.connected(router.port)
    stalled.stop_reading()
    reader = asyncio.create_task(read_all(healthy, COUNT))
    await flood(producer)
    assert await reader == list(range(COUNT))
    stalled.resume_reading()
    with pytest.raises(Closed):
        while True:
            await stalled.next(5.0)
    for c in (stalled, healthy, producer):
        await c.close()
