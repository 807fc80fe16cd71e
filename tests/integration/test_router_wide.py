"""Issue 42 over the wire: wide requests are done in slices or off the loop,
and still take effect in the order sent."""

from __future__ import annotations

import asyncio
import struct

from elvin.protocol import NotifyDeliver, SubAddRqst, SubDelRqst, SubRply, decode_packet
from elvin.protocol.limits import Limits
from tests.waiting import until

from .rawclient import RawClient

BIG = {"Attribute.Max-Count": 65536, "Packet.Max-Length": 8 * 1024 * 1024,
       "Subscription.Max-Length": 256 * 1024}


async def test_a_wide_notification_is_delivered_in_order(router):
    consumer = await RawClient.connected(router.port, BIG)
    await consumer.subscribe("require(w5) || require(after)")
    producer = await RawClient.connected(router.port, BIG)
    producer.notify({f"w{i}": i for i in range(60000)})
    producer.notify({"after": 1})
    limits = Limits(max_packet_length=8 * 1024 * 1024, max_attributes=65536)
    got = []
    for _ in range(2):
        (length,) = struct.unpack(">I", await asyncio.wait_for(consumer.reader.readexactly(4),
                                                               60))
        body = await asyncio.wait_for(consumer.reader.readexactly(length), 60)
        got.append(decode_packet(body, limits))
    assert all(isinstance(p, NotifyDeliver) for p in got)
    assert len(got[0].attributes) == 60000 and got[1].attributes == {"after": 1}
    for client in (consumer, producer):
        await client.close()


async def test_a_wide_expression_is_linked_in_steps_and_unlinked(router):
    client = await RawClient.connected(router.port, BIG)
    steps = router.call(lambda: router.router.steps.steps)
    text = " || ".join(f"n{i} == {i}" for i in range(10000))
    sub_id = await client.subscribe(text)
    assert router.call(lambda: router.router.steps.steps) - steps >= 10
    producer = await RawClient.connected(router.port)
    producer.notify({"n9999": 9999})
    delivered = await client.expect(NotifyDeliver, timeout=30)
    assert delivered.attributes == {"n9999": 9999}
    reply = await client.request(SubDelRqst(client.xid(), sub_id))
    assert isinstance(reply, SubRply)
    await client.request(SubAddRqst(client.xid(), "require(sync)"))

    def gone():
        r = router.router
        return len(r.engine), r.engine.predicate_count, "n5" in r.engine._refs, len(r.steps)
    await until(lambda: router.call(gone) == (1, 1, False, 0), what="the wide one unlinked")
    for c in (client, producer):
        await c.close()
