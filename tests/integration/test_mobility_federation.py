"""Mobility across federated routers (the paper's setting): a publisher at
one router, a subscriber moving between the other two, every notification
published while it was away delivered after the move-in, in order per
producer, with each synchronisation option and both download paths."""

from __future__ import annotations

import pytest

from elvin.client import connect
from elvin.mobility import MobileConnection
from tests.waiting import until

from .federation_util import federated_routers, stop_all, wait_linked
from .test_mobility import Received, buffered, publish


@pytest.fixture
def three_routers():
    # r1 in the middle: r0 <- r1 <- r2 (r1 dials r0, r2 dials r1)
    routers = federated_routers(3, router_settings={"mobility": True})
    try:
        wait_linked(routers)
        yield routers
    finally:
        stop_all(routers)


async def routed(pub, mc_got: Received, producer: str, start: int, timeout: float = 10.0):
    """Publish probes until one reaches the subscriber: its subscriptions
    have propagated through the federation. Returns the next sequence number."""
    seq = start
    while True:
        await publish(pub, producer, [seq])
        seq += 1
        try:
            await until(lambda last=seq - 1: last in mc_got.by_producer.get(producer, ()),
                        timeout=0.2)
            return seq
        except AssertionError:
            if seq - start > timeout / 0.2:
                raise


@pytest.mark.parametrize("sync, via", [("none", "direct"), ("ping", "direct"),
                                       ("delay", "direct"), ("ping", "bus")])
async def test_move_between_federated_routers(three_routers, sync, via):
    r0, r1, r2 = three_routers
    pub = await connect(r1.url)
    mc = await MobileConnection.open(r0.url)
    got = Received(mc)
    await mc.subscribe('Kind == "test"')
    try:
        next_seq = await routed(pub, got, "p", 0)
        await until(lambda: got.count() >= 1)
        await mc.move_out()
        away = list(range(next_seq, next_seq + 25))
        await publish(pub, "p", away)
        await until(lambda: buffered(r0, mc.client_id) >= len(away))
        report = await mc.move_in(r2.url, sync=sync, delay=0.3, via=via)
        assert not report.abbreviated
        if sync == "ping":
            assert report.ping_ok is True
        if sync == "none":
            # without synchronisation the old proxy may let go before the
            # new subscriptions have propagated (the paper's Siena losses):
            # only what was published while away is guaranteed
            await routed(pub, got, "p", away[-1] + 1)
            seqs = got.by_producer["p"]
            assert [s for s in seqs if away[0] <= s <= away[-1]] == away
            return
        # with ping or delay, nothing published right after the move-in is lost
        after = list(range(away[-1] + 1, away[-1] + 11))
        await publish(pub, "p", after)
        await until(lambda: after[-1] in got.by_producer["p"])
        seqs = [s for s in got.by_producer["p"] if s >= away[0]]   # not the probes
        everything = away + after
        # nothing lost, in order per producer (duplicates possible without dedup)
        assert sorted(set(seqs)) == everything
        firsts = [s for i, s in enumerate(seqs) if s not in seqs[:i]]
        assert firsts == everything
        await until(lambda: r0.router.mobility.handlers == {})
    finally:
        await mc.close()
        await pub.close()


async def test_dedup_suppresses_the_copies_of_a_move(three_routers):
    r0, r1, r2 = three_routers
    pub = await connect(r1.url)
    mc = await MobileConnection.open(r0.url, dedup=("Producer", "Seq"))
    got = Received(mc)
    await mc.subscribe('Kind == "test"')
    try:
        next_seq = await routed(pub, got, "p", 0)
        await mc.move_out()
        await publish(pub, "p", range(next_seq, next_seq + 10))
        report = await mc.move_in(r2.url, sync="ping")
        last = next_seq + 20
        await publish(pub, "p", range(next_seq + 10, last))
        await until(lambda: (last - 1) in got.by_producer["p"])
        seqs = [s for s in got.by_producer["p"] if s >= next_seq]
        assert seqs == list(range(next_seq, last))   # no copies, no gaps
        assert report.duplicates <= mc.duplicates
    finally:
        await mc.close()
        await pub.close()
