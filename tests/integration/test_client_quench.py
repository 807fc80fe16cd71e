"""Quench and auto-quench against a real router."""

from __future__ import annotations

import asyncio

from elvin import Keys
from elvin.client import (
    SubscriptionAdded,
    SubscriptionModified,
    SubscriptionRemoved,
    connect,
)
from elvin.quenching import wanted
from elvin.subscription import parse
from tests.waiting import until


async def events(q, expect: int = 1, extra_wait: float = 0.3) -> list:
    """The ``expect`` next events (waiting up to 10 s for them), plus any
    that follow within ``extra_wait`` seconds."""
    out = [await q.get(timeout=10) for _ in range(expect)]
    while True:
        try:
            out.append(await q.get(timeout=extra_wait))
        except TimeoutError:
            return out


async def test_quench_reports_existing_and_new_subscriptions(router_url):
    async with connect(router_url) as consumer, connect(router_url) as producer:
        await consumer.subscribe('File-Path == "/etc/passwd"')
        await consumer.subscribe("require(Unrelated)")
        q = await producer.quench(["File-Path"])
        # the existing subscription is known by the time quench() returns
        assert list(q.subscriptions.values()) == [parse('File-Path == "/etc/passwd"')]
        (first,) = await events(q)
        assert isinstance(first, SubscriptionAdded)
        assert first.ast == parse('File-Path == "/etc/passwd"')
        assert first.secure is False

        sub = await consumer.subscribe('begins-with(File-Path, "/home/")')
        (added,) = await events(q)
        assert isinstance(added, SubscriptionAdded)
        assert q.subscriptions[added.term_id] == parse('begins-with(File-Path, "/home/")')

        result = wanted(q.subscriptions, "File-Path")
        assert result.exact == {"/etc/passwd"} and result.prefixes == {"/home/"}
        assert result.matches("/home/x/y") and not result.matches("/usr/bin")

        await sub.modify('ends-with(File-Path, ".txt")')
        evs = await events(q)
        assert evs, "no event after SubModRqst"
        if len(evs) == 1:   # a router that keeps the term id sends SubModNotify
            assert isinstance(evs[0], SubscriptionModified)
            assert evs[0].ast == parse('ends-with(File-Path, ".txt")')
        else:               # one that allocates a new id: delete + add
            assert {type(e) for e in evs} == {SubscriptionRemoved, SubscriptionAdded}
        assert parse('ends-with(File-Path, ".txt")') in q.subscriptions.values()

        await sub.close()
        evs = await events(q)
        assert [type(e) for e in evs] == [SubscriptionRemoved]
        assert list(q.subscriptions.values()) == [parse('File-Path == "/etc/passwd"')]

        await consumer.subscribe("require(File-Path)")
        await events(q)
        assert wanted(q.subscriptions, "File-Path").unbounded


async def test_quench_listener_and_modify_and_close(router_url):
    async with connect(router_url) as consumer, connect(router_url) as producer:
        seen = []
        await consumer.subscribe("Alpha > 1")
        q = await producer.quench(["Beta"], listener=seen.append, buffer_size=0)
        assert seen == [] and q.subscriptions == {}
        await q.modify(add=["Alpha"])
        assert q.names == {"Alpha", "Beta"}
        assert [type(e) for e in seen] == [SubscriptionAdded]
        await consumer.subscribe("Beta == 2")
        await until(lambda: len(q.subscriptions) == 2)
        await q.modify(remove=["Alpha"])
        await until(lambda: len(q.subscriptions) == 1)
        assert list(q.subscriptions.values()) == [parse("Beta == 2")]
        await q.close()
        assert q.closed and producer.quenches == []
        await consumer.subscribe("Beta == 3")
        # the subscription is in place (its reply came); a reply to the
        # producer comes after any quench event the router sent it before
        await producer.set_keys()          # an empty SecRqst: a round trip
        assert len(q.subscriptions) == 1   # closed: no more events


async def test_quench_secure_flag(router_url):
    secret = b"quench secret"
    async with connect(router_url) as consumer, connect(router_url) as producer:
        await consumer.subscribe("require(Q)", keys=Keys.producer_subscription(secret))
        await consumer.subscribe("Q == 1", keys=Keys.producer_subscription(secret),
                                 accept_insecure=False)
        await consumer.subscribe("Q == 2")
        plain = await producer.quench(["Q"])
        keyed = await producer.quench(["Q"], keys=Keys.producer(secret))
        secure_only = await producer.quench(["Q"], keys=Keys.producer(secret),
                                            deliver_insecure=False)
        flags = {str(t.ast): t.secure for t in plain.terms.values()}
        assert len(flags) == 2 and not any(flags.values())        # Q == 1 hidden
        flags = {t.ast: t.secure for t in keyed.terms.values()}
        assert flags == {parse("require(Q)"): True, parse("Q == 1"): True,
                         parse("Q == 2"): False}
        assert {t.ast for t in secure_only.terms.values()} == {parse("require(Q)"),
                                                               parse("Q == 1")}


async def test_auto_quench_drops_unwanted_and_sends_wanted(router_url):
    async with connect(router_url) as consumer, \
            connect(router_url, auto_quench=True) as producer:
        sub = await consumer.subscribe('Tick == "wanted" && N > 2')
        assert await producer.send({"Tick": "unwanted", "N": 5}) is False
        assert await producer.send({"Tick": "wanted", "N": 1}) is False
        assert await producer.send({"Tick": "wanted", "N": 3}) is True
        assert await producer.send({"Other": 1}) is False
        (n,) = [await sub.get(timeout=5)]
        assert n.attributes == {"Tick": "wanted", "N": 3}
        assert producer.auto_quench_stats["sent"] == 1
        assert producer.auto_quench_stats["dropped"] == 3

        # a new subscription is picked up by the internal quench
        other = await consumer.subscribe("require(Other)")
        await until(lambda: producer.auto_quench_stats["terms"] == 2)
        assert await producer.send({"Other": 2}) is True
        assert (await other.get(timeout=5))["Other"] == 2
        # and a removed one stops the flow again
        await other.close()
        await until(lambda: producer.auto_quench_stats["terms"] == 1)
        assert await producer.send({"Other": 3}) is False
        assert producer.quenches == []     # the internal quench is not listed


async def test_auto_quench_respects_secure_delivery(router_url):
    secret = b"auto"
    async with connect(router_url) as consumer, \
            connect(router_url, auto_quench=True) as producer:
        sub = await consumer.subscribe("require(S)", keys=Keys.producer_subscription(secret),
                                       accept_insecure=False)
        assert await producer.send({"S": 1}) is False               # no keys: unreachable
        assert await producer.send({"S": 2}, keys=Keys.producer(secret),
                                   deliver_insecure=False) is True
        assert (await sub.get(timeout=5))["S"] == 2


async def test_auto_quench_many_names(router_url):
    async with connect(router_url) as consumer, \
            connect(router_url, auto_quench=True) as producer:
        sub = await consumer.subscribe("A9 == 9")
        results = await asyncio.gather(*(producer.send({f"A{i}": i}) for i in range(10)))
        assert results == [False] * 9 + [True]
        assert (await sub.get(timeout=5))["A9"] == 9


async def test_auto_quench_survives_a_router_restart(router):
    consumer = await connect(router.url, reconnect=True, reconnect_delay=0.05)
    producer = await connect(router.url, auto_quench=True, reconnect=True,
                             reconnect_delay=0.05)
    try:
        sub = await consumer.subscribe("Restart == 2")
        assert await producer.send({"Restart": 1}) is False
        assert await producer.send({"Restart": 2}) is True
        assert (await sub.get(timeout=5))["Restart"] == 2
        back = [asyncio.Event(), asyncio.Event()]
        consumer.add_reconnect_listener(lambda c: back[0].set())
        producer.add_reconnect_listener(lambda c: back[1].set())
        await asyncio.get_running_loop().run_in_executor(None, router.restart)
        await asyncio.wait_for(asyncio.gather(back[0].wait(), back[1].wait()), 15)
        # the consumer's subscription may be restored after the producer's
        # quench: wait until the producer has heard of it again
        await until(lambda: producer.auto_quench_stats["terms"] == 1)
        assert await producer.send({"Restart": 1}) is False
        assert await producer.send({"Restart": 2}) is True
        assert (await sub.get(timeout=5))["Restart"] == 2
    finally:
        await producer.close()
        await consumer.close()


async def test_quenching_producer_learns_the_wanted_range(router_url):
    """A subscriber wants ``Temperature < 80``: a producer learns that 85 is
    unwanted and 70 wanted, through its own quench and through auto-quench,
    and the answer follows the subscriptions as they change."""
    async with connect(router_url) as consumer, \
            connect(router_url, auto_quench=True) as producer:
        sub = await consumer.subscribe("Temperature < 80")
        q = await producer.quench(["Temperature"])
        assert not q.wanted("Temperature").matches(85)
        assert q.wanted("Temperature").matches(70)

        readings = await producer.wanted("Temperature")
        assert not readings.matches(85) and readings.matches(70)
        assert not readings.matches(float("nan"))
        assert [str(i) for i in readings.intervals] == ["[-inf, 80)"]
        sent = [t for t in (85, 70, 95.5) if readings.matches(t)]
        for t in sent:
            assert await producer.send({"Temperature": t}) is True
        assert (await sub.get(timeout=5))["Temperature"] == 70

        hot = await consumer.subscribe("Temperature >= 90 && Alarm == 1")
        await until(lambda: producer.auto_quench_stats["terms"] == 2)
        readings = await producer.wanted("Temperature")
        assert readings.matches(95.5) and not readings.matches(85)
        await hot.close()
        await sub.close()
        await until(lambda: producer.auto_quench_stats["terms"] == 0)
        assert (await producer.wanted("Temperature")).nothing


async def test_wanted_needs_auto_quench(router_url):
    async with connect(router_url) as producer:
        try:
            await producer.wanted("Temperature")
        except ValueError as exc:
            assert "auto_quench=True" in str(exc)
        else:
            raise AssertionError("wanted() without auto-quench did not refuse")
