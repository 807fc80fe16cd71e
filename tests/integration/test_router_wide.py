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


async def _receive(consumer: RawClient, count: int, limits: Limits | None = None) -> list:
    """The next ``count`` NotifyDelivers' attributes, in the order they came."""
    got = []
    while len(got) < count:
        (length,) = struct.unpack(">I", await asyncio.wait_for(consumer.reader.readexactly(4),
                                                               60))
        body = await asyncio.wait_for(consumer.reader.readexactly(length), 60)
        packet = decode_packet(body, limits or Limits())
        if isinstance(packet, NotifyDeliver):
            got.append(packet.attributes)
    return got


async def _many_candidates(consumer: RawClient, count: int = 300) -> None:
    """Subscriptions every notification with ``x`` must be evaluated against,
    so that its match takes steps (``MATCH_SLICE`` nil: a step per 16)."""
    for i in range(count):
        await consumer.subscribe(f'regex(x, "^a+b*{i}$")')
    await consumer.subscribe("require(seq)")


async def test_a_producer_that_hangs_up_mid_match_loses_nothing(router, monkeypatch):
    """Accepted is owed: a producer that writes its notifications and closes
    its socket at once (no DisconnRqst) has every one delivered, in order,
    although the first is still being matched in steps and the rest wait
    behind it when the router sees the close (they were once all dropped)."""
    import elvin.router.engine as engine_module

    monkeypatch.setattr(engine_module, "MATCH_SLICE", 0.0)
    consumer = await RawClient.connected(router.port)
    await _many_candidates(consumer)
    producer = await RawClient.connected(router.port)
    steps = router.call(lambda: router.router.steps.steps)
    for seq in range(20):
        producer.notify({"x": "ab7", "seq": seq})
    producer.writer.close()             # hang up, at once
    got = await _receive(consumer, 20)
    assert [a["seq"] for a in got] == list(range(20))
    assert router.call(lambda: router.router.steps.steps) - steps > 20   # it was stepped
    await consumer.close()


async def test_a_producer_that_hangs_up_while_a_wide_one_is_decoded_loses_nothing(router):
    """The same while a wide NotifyEmit is decoded off the loop: it and the
    one behind it are both delivered, in order."""
    consumer = await RawClient.connected(router.port, BIG)
    await consumer.subscribe("require(w5) || require(after)")
    producer = await RawClient.connected(router.port, BIG)
    producer.notify({f"w{i}": i for i in range(60000)})
    producer.notify({"after": 1})
    producer.writer.close()
    got = await _receive(consumer, 2, Limits(max_packet_length=8 * 1024 * 1024,
                                             max_attributes=65536))
    assert len(got[0]) == 60000 and got[1] == {"after": 1}
    await consumer.close()


async def test_unotifies_behind_a_notification_being_matched_are_delivered(router, monkeypatch):
    """UNotify packets (a session may send them too) held behind a
    notification that is being matched in steps when the producer hangs up:
    all delivered, in order."""
    import elvin.router.engine as engine_module
    from elvin.protocol import UNotify, frame

    monkeypatch.setattr(engine_module, "MATCH_SLICE", 0.0)
    consumer = await RawClient.connected(router.port)
    await _many_candidates(consumer)
    producer = await RawClient.connected(router.port)
    producer.notify({"x": "ab7", "seq": 0})
    producer.writer.write(b"".join(frame(UNotify(4, 0, {"x": "ab7", "seq": seq}))
                                   for seq in range(1, 30)))
    producer.writer.close()
    got = await _receive(consumer, 30)
    assert [a["seq"] for a in got] == list(range(30))
    await consumer.close()
