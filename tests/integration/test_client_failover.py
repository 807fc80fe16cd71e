"""Client failover across routers (issue 49, point 1): ``connect()`` takes
several router URLs; when its router goes, the connection moves to another
and restores its keys, subscriptions and quenches there."""

from __future__ import annotations

import asyncio

import pytest

import elvin.sync
from elvin import Keys
from elvin.client import ConnectError, SubscriptionAdded, connect
from elvin.client.session import client_uri
from tests.waiting import until, wait_until


def canonical(router) -> str:
    """A router's URL as a connection reports it (``conn.url``)."""
    return str(client_uri(router.url))


async def _stop(router) -> None:
    await asyncio.get_running_loop().run_in_executor(None, router.stop)


async def test_the_client_carries_on_at_the_second_router(make_router):
    first, second = make_router(), make_router()
    secret = b"failover"
    conn = await connect([first.url, second.url], reconnect_delay=0.05,
                         subscription_keys=Keys.producer_subscription(secret))
    try:
        assert conn.url == canonical(first)
        assert conn.urls == [canonical(first), canonical(second)]
        assert conn.reconnect                       # implied by several routers
        plain = await conn.subscribe("Failover == 1")
        secure = await conn.subscribe("Failover == 2", accept_insecure=False)   # connection keys
        quench = await conn.quench(["Temperature"])
        moved: list[str] = []
        conn.add_failover_listener(lambda c, previous: moved.append(previous))

        await _stop(first)
        await until(lambda: moved, what="the failover")
        assert moved == [canonical(first)] and conn.url == canonical(second)
        assert conn.failovers == 1
        await until(lambda: conn.state == "open", what="open at the second router")

        async with connect(second.url) as producer:
            await producer.send({"Failover": 1})
            assert (await plain.get(timeout=10))["Failover"] == 1
            await producer.send({"Failover": 2}, keys=Keys.producer(secret),
                                deliver_insecure=False)
            n = await secure.get(timeout=10)
            assert n["Failover"] == 2 and n.secure
            await producer.subscribe("Temperature < 80")
            event = await quench.get(timeout=10)
            while not isinstance(event, SubscriptionAdded):
                event = await quench.get(timeout=10)
            assert not quench.wanted("Temperature").matches(85)
    finally:
        await conn.close()


async def test_it_moves_back_when_the_second_goes_too(make_router):
    first, second = make_router(), make_router()
    conn = await connect([first.url, second.url], reconnect_delay=0.05)
    try:
        sub = await conn.subscribe("require(Back)")
        await _stop(first)
        await until(lambda: conn.url == canonical(second) and conn.state == "open",
                    what="at the second router")
        await asyncio.get_running_loop().run_in_executor(None, first.start)
        await _stop(second)
        await until(lambda: conn.url == canonical(first) and conn.state == "open",
                    what="back at the first router")
        assert conn.failovers == 2
        async with connect(first.url) as producer:
            await producer.send({"Back": 1})
            assert (await sub.get(timeout=10))["Back"] == 1
    finally:
        await conn.close()


async def test_connect_skips_a_router_that_is_down(make_router):
    down, up = make_router(), make_router()
    await _stop(down)
    async with connect([down.url, up.url]) as conn:
        assert conn.url == canonical(up)
    await _stop(up)
    with pytest.raises(ConnectError) as caught:
        await connect([down.url, up.url])
    assert "no router could be reached" in str(caught.value)
    assert canonical(down) in str(caught.value) and canonical(up) in str(caught.value)


async def test_bad_router_lists_are_refused_clearly():
    with pytest.raises(ValueError, match="at least one router URL"):
        await connect([])
    with pytest.raises(ValueError, match=r"router URL #2"):
        await connect(["elvin://127.0.0.1:1", "elvin:/udp,none,xdr/127.0.0.1:2"])
    with pytest.raises(TypeError, match=r"router URL #1 is a int"):
        await connect([5])


def test_sync_connection_fails_over(make_router):
    first, second = make_router(), make_router()
    with elvin.sync.connect([first.url, second.url], reconnect_delay=0.05) as conn:
        sub = conn.subscribe("Sync == 1")
        first.stop()
        wait_until(lambda: conn.url == canonical(second) and conn.state == "open",
                   what="the failover")
        assert conn.failovers == 1
        with elvin.sync.connect(second.url) as producer:
            producer.send({"Sync": 1})
        assert sub.get(timeout=10)["Sync"] == 1


async def test_auto_quench_follows_the_failover(make_router):
    """A quenching producer that fails over learns what is wanted at the new
    router: its internal quench is restored there."""
    first, second = make_router(), make_router()
    producer = await connect([first.url, second.url], auto_quench=True, reconnect_delay=0.05)
    try:
        async with connect(first.url) as here, connect(second.url) as there:
            await here.subscribe("Temperature < 80")
            await there.subscribe("Temperature > 90")
            readings = await producer.wanted("Temperature")
            assert readings.matches(70) and not readings.matches(95)
            await _stop(first)
            await until(lambda: producer.url == canonical(second) and producer.state == "open",
                        what="the failover")
            await until(lambda: producer.auto_quench_stats["terms"] == 1)
            readings = await producer.wanted("Temperature")
            assert readings.matches(95) and not readings.matches(70)
            assert await producer.send({"Temperature": 70}) is False
    finally:
        await producer.close()
