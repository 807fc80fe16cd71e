"""Many clients at once."""

from __future__ import annotations

import asyncio

from elvin.protocol import NotifyDeliver

from .rawclient import RawClient

CLIENTS = 200


async def test_200_concurrent_clients(router):
    clients = await asyncio.gather(*(RawClient.connected(router.port) for _ in range(CLIENTS)))
    subs = await asyncio.gather(*(c.subscribe(f'To == "c{i}" || require(Everyone)')
                                  for i, c in enumerate(clients)))
    assert len(set(subs)) == CLIENTS
    producer = await RawClient.connected(router.port)
    for i in range(CLIENTS):
        producer.notify({"To": f"c{i}", "N": i})
    producer.notify({"Everyone": 1})
    await producer.drain()

    async def check(i, client):
        first = await client.expect(NotifyDeliver)
        assert first.attributes == {"To": f"c{i}", "N": i}
        second = await client.expect(NotifyDeliver)
        assert second.attributes == {"Everyone": 1}
        assert second.insecure_matches == (subs[i],)

    await asyncio.gather(*(check(i, c) for i, c in enumerate(clients)))
    count = router.call(lambda: router.router.connection_count)
    assert count == CLIENTS + 1
    await asyncio.gather(*(c.disconnect() for c in clients))
    await producer.close()
