"""Clients that misbehave never harm the router or the other clients."""

from __future__ import annotations

import asyncio
import random
import struct

import pytest

from elvin.protocol import ConnRqst, Disconn, NotifyDeliver, encode_packet, frame

from .rawclient import RawClient


async def assert_router_serves(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    sub = await consumer.subscribe("require(Alive)")
    producer.notify({"Alive": 1})
    deliver = await consumer.expect(NotifyDeliver)
    assert deliver.insecure_matches == (sub,)
    await consumer.close()
    await producer.close()


def conn_rqst() -> bytes:
    return frame(ConnRqst(1))


GARBAGE = {
    "random bytes": lambda rng: bytes(rng.randrange(256) for _ in range(4096)),
    "oversized frame header": lambda rng: struct.pack(">I", 0x7FFFFFF0) + b"\0" * 64,
    "frame length not a multiple of 4": lambda rng: struct.pack(">I", 7) + b"\0" * 7,
    "valid frame, unknown packet id": lambda rng: struct.pack(">Ii", 8, 999) + b"\0" * 4,
    "truncated packet then close": lambda rng: conn_rqst()[:-3],
    "connrqst then random bytes": lambda rng: conn_rqst() + bytes(
        rng.randrange(256) for _ in range(512)),
    "connrqst then unknown packet id": lambda rng: conn_rqst() + struct.pack(">Ii", 8, 4242)
    + b"\0" * 4,
    "connrqst then a router-only packet": lambda rng: conn_rqst() + frame(Disconn(1, "")),
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
async def test_garbage_closes_only_that_channel(router, name):
    rng = random.Random(name)
    observer = await RawClient.connected(router.port)
    await observer.subscribe("require(Alive)")
    bad = await RawClient.open(router.port)
    bad.send_raw(GARBAGE[name](rng))
    await bad.drain()
    if name == "truncated packet then close":
        await bad.close()
    else:
        got = await bad.closed_by_router()
        # an established session is told why (reason 4); a channel that never
        # connected is simply closed
        for packet in got:
            assert not isinstance(packet, NotifyDeliver)
    await assert_router_serves(router)
    # the observer's session is untouched: it saw the Alive notification too
    assert (await observer.expect(NotifyDeliver)).attributes == {"Alive": 1}
    sub = await observer.subscribe("require(Still)")
    observer.notify({"Still": 1})
    assert (await observer.expect(NotifyDeliver)).insecure_matches == (sub,)
    await observer.close()


async def test_many_bad_clients_at_once(router):
    rng = random.Random(7)
    bad = [await RawClient.open(router.port) for _ in range(30)]
    for i, client in enumerate(bad):
        client.send_raw(list(GARBAGE.values())[i % len(GARBAGE)](rng))
    await asyncio.gather(*(c.drain() for c in bad), return_exceptions=True)
    await assert_router_serves(router)
    for client in bad:
        await client.close()


async def test_malformed_body_in_session_gets_disconn_4(router):
    client = await RawClient.connected(router.port)
    body = encode_packet(ConnRqst(2))
    # a SubAddRqst whose string length runs past the end of the packet
    bad = struct.pack(">iII", 58, 5, 1000) + b"abcd"
    client.send_raw(struct.pack(">I", len(bad)) + bad)
    got = await client.closed_by_router()
    assert [p.reason for p in got if isinstance(p, Disconn)] == [4]
    assert body  # the codec itself is fine
    await assert_router_serves(router)
