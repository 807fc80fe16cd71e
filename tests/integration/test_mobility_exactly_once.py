"""Moving out and in while a producer publishes without pause: every
notification reaches the client exactly once, counted (no timing).

Two windows used to deliver copies: at move-out, what the router routed
between the proxy's subscription and the client's detaching went live to the
client and into the buffer; at move-in, what it routed between the client's
new subscriptions and the end of the buffer came live and from the buffer.
The proxy's own copy of its move-out reply and the client's fence close them.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from elvin.client import connect
from elvin.mobility import MobileConnection
from tests.waiting import until

CYCLES = 12


class Producer:
    """Publishes numbered notifications until stopped, yielding to the loop
    between small bursts so that moves happen while it publishes."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self.sent = 0
        self._stop = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while not self._stop.is_set():
            await self.conn.send({"Producer": "p", "Seq": self.sent})
            self.sent += 1
            if self.sent % 4 == 0:
                await asyncio.sleep(0.001)

    async def stop(self) -> None:
        self._stop.set()
        await self._task
        await self.conn.set_keys()      # a round trip: the router has read them all


async def test_moves_under_traffic_deliver_every_notification_exactly_once(make_router):
    router = make_router(mobility=True)
    proxy = router.router.mobility
    mc = await MobileConnection.open(router.url)
    got: Counter[int] = Counter()
    mc.add_listener(lambda n: got.update([n["Seq"]]))
    # two subscriptions that both match: still one delivery each
    await mc.subscribe('Producer == "p"')
    await mc.subscribe("require(Seq)")
    producer = Producer(await connect(router.url))
    try:
        for _ in range(CYCLES):
            before = producer.sent
            await mc.move_out()
            # something is buffered, and the producer keeps going
            await until(lambda: sum(h.buffered for h in proxy.handlers.values()) > 5)
            report = await mc.move_in(router.url)
            assert report.abbreviated and report.caught_up > 0
            await until(lambda b=before: producer.sent > b + 20 and max(got) > b + 10)
        await producer.stop()
        last = producer.sent - 1
        await until(lambda: last in got, what=f"notification {last}")
        twice = {seq: n for seq, n in got.items() if n > 1}
        missing = [seq for seq in range(producer.sent) if seq not in got]
        assert not twice, f"delivered more than once: {sorted(twice)[:20]} of {producer.sent}"
        assert not missing, f"never delivered: {missing[:20]} of {producer.sent}"
        assert sum(got.values()) == producer.sent
        await until(lambda: proxy.handlers == {})      # every buffer released
    finally:
        await mc.close()
        await producer.conn.close()


async def test_a_client_that_moved_out_gets_nothing_live_after_the_reply(make_router):
    """Between the proxy's reply and the client closing its connection the
    router still delivers to it: those are in the buffer, so the client must
    not deliver them live as well."""
    router = make_router(mobility=True)
    mc = await MobileConnection.open(router.url)
    got: Counter[int] = Counter()
    mc.add_listener(lambda n: got.update([n["Seq"]]))
    await mc.subscribe("require(Seq)")
    producer = Producer(await connect(router.url))
    try:
        await until(lambda: len(got) > 10)
        await mc.move_out()
        away_from = producer.sent
        await until(lambda: producer.sent > away_from + 50)
        await producer.stop()
        report = await mc.move_in(router.url)
        assert report.duplicates == 0
        assert max(got.values()) == 1 and len(got) == producer.sent
    finally:
        await mc.close()
        await producer.conn.close()
