"""Redirection (Disconn reason 2) between real routers on loopback.

A router hands clients over either on demand (``Router.redirect``) or when it
is full (``max-connections`` with ``redirect-to``: Disconn in answer to
ConnRqst, as spec 5.4.2 allows). The client library follows the redirect and
restores its session at the new router: subscriptions (with their keys),
quenches and connection-level keys.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

import elvin
from elvin import Keys
from elvin.client import ConnectionClosedError, NackError, SubscriptionAdded, connect
from elvin.subscription import parse
from tests.waiting import until

from .process_util import free_port, stop

SECRET = b"redirect secret"
TIMEOUT = 10.0


def port_of(conn) -> int:
    return conn.uri.port


async def test_redirect_all_restores_the_session(make_router):
    old, new = make_router(), make_router()
    consumer = await connect(old.url)
    try:
        await consumer.set_keys(add_subscription=Keys.producer_subscription(SECRET))
        plain = await consumer.subscribe("require(topic)")
        secure = await consumer.subscribe("topic == 'secret'", accept_insecure=False)
        quench = await consumer.quench(["topic"])
        redirects = []
        consumer.add_reconnect_listener(lambda c: redirects.append(c.url))

        count = await asyncio.to_thread(old.call, old.router.redirect, new.url)
        assert count == 1
        await until(lambda: consumer.state == "open" and port_of(consumer) == new.port,
                    what="the consumer at the new router")
        await until(lambda: redirects, what="the reconnect listener")
        assert old.call(lambda: old.router.connection_count) == 0
        assert new.call(lambda: new.router.connection_count) == 1

        # subscriptions and keys are back: a producer at the NEW router reaches them
        async with connect(new.url) as producer:
            await producer.send({"topic": "secret", "n": 1},
                                keys=Keys.producer_notification(SECRET))
            await producer.send({"topic": "open", "n": 2})
            got = [await plain.get(timeout=TIMEOUT) for _ in range(2)]
            assert [n["n"] for n in got] == [1, 2]
            assert (await secure.get(timeout=TIMEOUT))["n"] == 1   # keys were restored
            assert secure.pending == 0   # the unkeyed one is not delivered to it

            # the quench is back too: a new subscription there is reported
            async with connect(new.url) as other:
                await other.subscribe("topic == 'x'")
                while True:
                    event = await quench.get(timeout=TIMEOUT)
                    if isinstance(event, SubscriptionAdded) and event.ast == parse("topic == 'x'"):
                        break
    finally:
        await consumer.close()


async def test_redirect_some_sessions_only(make_router):
    old, new = make_router(), make_router()
    stay, move = await connect(old.url), await connect(new.url)
    await move.close()
    move = await connect(old.url)
    try:
        await until(lambda: old.call(lambda: old.router.connection_count) == 2)

        local = move.local_address

        def redirect_newest() -> int:
            # the session whose peer address is ``move``'s end of the socket
            chosen = [s for s in old.router.sessions if s.peer == local]
            return old.router.redirect(new.url, chosen)

        assert await asyncio.to_thread(old.call, redirect_newest) == 1
        await until(lambda: move.state == "open" and port_of(move) == new.port)
        assert stay.state == "open" and port_of(stay) == old.port
    finally:
        await stay.close()
        await move.close()


async def test_max_connections_redirects_new_clients(make_router):
    spare = make_router()
    full = make_router(max_connections=1, redirect_to=spare.url)
    first = await connect(full.url)
    try:
        second = await connect(full.url)   # answered by Disconn(2, spare) instead of ConnRply
        try:
            assert port_of(first) == full.port
            assert port_of(second) == spare.port
            sub = await second.subscribe("require(hello)")
            async with connect(spare.url) as producer:
                await producer.send({"hello": 1})
                assert (await sub.get(timeout=TIMEOUT))["hello"] == 1
        finally:
            await second.close()
        # room again at the full router: the next client stays there
        await first.close()
        await until(lambda: full.call(lambda: full.router.connection_count) == 0)
        async with connect(full.url) as third:
            assert port_of(third) == full.port
    finally:
        await first.close()


async def test_max_connections_without_redirect_refuses(make_router):
    full = make_router(max_connections=1)
    async with connect(full.url):
        with pytest.raises(NackError) as info:
            await connect(full.url)
        assert info.value.code == elvin.NackCode.IMPL_LIMIT


async def test_redirect_loops_are_bounded(make_router):
    a = make_router(max_connections=1)
    b = make_router(max_connections=1, redirect_to=a.url)
    a.call(lambda: setattr(a.router.config, "redirect_to", b.url))
    holders = [await connect(a.url), await connect(b.url)]
    try:
        with pytest.raises(ConnectionClosedError, match="too many redirections"):
            await connect(a.url)
    finally:
        for conn in holders:
            await conn.close()


async def test_redirect_to_a_dead_router_falls_back(make_router):
    """A reconnecting client whose redirect target cannot be reached goes back
    through the default selection (its router) and keeps its subscriptions."""
    home = make_router()
    dead = f"elvin://127.0.0.1:{free_port()}"
    conn = await connect(home.url, timeout=2, reconnect=True, reconnect_delay=0.05)
    try:
        sub = await conn.subscribe("require(back)")
        redirects = []
        conn.add_reconnect_listener(lambda c: redirects.append(c.url))
        await asyncio.to_thread(home.call, home.router.redirect, dead)
        await until(lambda: redirects and conn.state == "open")
        assert port_of(conn) == home.port
        async with connect(home.url) as producer:
            await producer.send({"back": 1})
            assert (await sub.get(timeout=TIMEOUT))["back"] == 1
    finally:
        await conn.close()


async def test_unfollowable_redirect_closes_a_plain_client(make_router):
    home = make_router()
    dead = f"elvin://127.0.0.1:{free_port()}"
    conn = await connect(home.url, timeout=2)
    await asyncio.to_thread(home.call, home.router.redirect, dead)
    reason = await asyncio.wait_for(conn.closed, TIMEOUT)
    assert reason.kind == "redirect" and reason.redirect == dead
    assert "cannot connect there" in reason.message


async def test_mid_session_redirect_loops_are_bounded(make_router):
    a, b = make_router(), make_router()
    conn = await connect(a.url)
    try:
        for n in range(10):
            here, there = (a, b) if n % 2 == 0 else (b, a)
            await until(lambda here=here: conn.state != "reconnecting" and (
                conn.state == "closed" or port_of(conn) == here.port))
            if conn.state == "closed":
                break
            await asyncio.to_thread(here.call, here.router.redirect, there.url)
        reason = await asyncio.wait_for(conn.closed, TIMEOUT)
        assert reason.kind == "redirect" and "too many redirections" in reason.message
        assert n == 6   # five redirects followed, the sixth refused
    finally:
        await conn.close()


def test_redirect_rejects_bad_urls(make_router):
    router = make_router()
    with pytest.raises(ValueError):
        router.call(router.router.redirect, "not a uri")


async def test_elvind_flags_redirect(make_router):
    spare = make_router()
    port = free_port()
    url = f"elvin://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "elvin.router", "--listen", url, "--no-discovery",
         "--max-connections", "1", "--redirect-to", spare.url, "--log-level", "warning"],
        stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                first = await connect(url, timeout=1)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("elvind did not start: "
                                         + proc.stderr.read().decode()) from None
                await asyncio.sleep(0.1)
        async with first, connect(url) as second:
            assert port_of(first) == port
            assert port_of(second) == spare.port
    finally:
        stop(proc, TIMEOUT)
