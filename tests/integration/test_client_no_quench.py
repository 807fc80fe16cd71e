"""The client library against a router without quench (``elvind --no-quench``,
as Avis): ``QuenchNotSupported``, ``supports_quench``, auto-quench sending
everything, and quench coming back after a reconnection or a redirect."""

from __future__ import annotations

import asyncio
import logging

import pytest

import elvin
from elvin.client import NackError, QuenchNotSupported, SubscriptionRemoved, connect
from elvin.errors import NackCode
from tests.waiting import until

TIMEOUT = 10.0


def auto_quench_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "elvin.client" and r.levelno == logging.WARNING
            and "auto-quench off" in r.getMessage()]


async def restart_with(router, **settings) -> None:
    """``router.restart(**settings)`` off the event loop (it blocks)."""
    await asyncio.to_thread(lambda: router.restart(**settings))


async def test_quench_raises_quench_not_supported(make_router):
    assert elvin.QuenchNotSupported is QuenchNotSupported
    plain = make_router(quench=False)
    async with connect(plain.url) as conn:
        assert conn.supports_quench is None           # nothing asked yet
        with pytest.raises(QuenchNotSupported) as info:
            await conn.quench(["Group"])
        exc = info.value
        assert isinstance(exc, NackError)
        assert (exc.code, exc.request, exc.message) == (
            NackCode.NOT_IMPL, "QnchAddRqst", "Quench not supported")
        assert conn.supports_quench is False
        assert conn.quenches == []
        # the session is unharmed
        sub = await conn.subscribe("require(X)")
        await conn.send({"X": 1})
        assert (await sub.get(timeout=TIMEOUT))["X"] == 1
    full = make_router()
    async with connect(full.url) as conn:
        await conn.quench(["Group"])
        assert conn.supports_quench is True


async def test_other_quench_nacks_are_plain_nack_errors(router):
    async with connect(router.url) as conn:
        quench = await conn.quench(["Group"])
        with pytest.raises(NackError) as info:
            await quench.modify(remove=["Group"])       # EMPTY_QUENCH
        assert info.value.code == NackCode.EMPTY_QUENCH
        assert not isinstance(info.value, QuenchNotSupported)
        assert conn.supports_quench is True


async def test_auto_quench_sends_everything_with_one_warning(make_router, caplog):
    caplog.set_level(logging.INFO, logger="elvin.client")
    plain = make_router(quench=False)
    async with connect(plain.url) as consumer, \
            connect(plain.url, auto_quench=True) as producer:
        sub = await consumer.subscribe("require(Tick)")
        results = await asyncio.gather(*(producer.send({"Tick": i}) for i in range(5)))
        assert results == [True] * 5                      # nothing dropped, nothing raised
        assert await producer.send({"Other": 1}) is True  # not even what nobody wants
        assert sorted([(await sub.get(timeout=TIMEOUT))["Tick"] for _ in range(5)]) \
            == [0, 1, 2, 3, 4]
        assert producer.supports_quench is False
        assert producer.auto_quench_stats == {"sent": 6, "dropped": 0, "terms": 0}
        assert len(auto_quench_warnings(caplog)) == 1
        assert f":{plain.port} does not support quench" in auto_quench_warnings(caplog)[0]


async def test_auto_quench_follows_the_router_across_restarts(make_router, caplog):
    """No quench -> quench -> no quench again, on the same port: filtering
    turns on, then off again, with one log line each time."""
    caplog.set_level(logging.INFO, logger="elvin.client")
    router = make_router(quench=False)
    consumer = await connect(router.url, reconnect=True, reconnect_delay=0.05)
    producer = await connect(router.url, auto_quench=True, reconnect=True,
                             reconnect_delay=0.05)
    try:
        sub = await consumer.subscribe("Phase == 2")
        assert await producer.send({"Phase": 1}) is True     # no quench: sent anyway
        assert producer.supports_quench is False

        back = [asyncio.Event(), asyncio.Event()]
        consumer.add_reconnect_listener(lambda c: back[0].set())
        producer.add_reconnect_listener(lambda c: back[1].set())
        await restart_with(router, quench=True)
        await asyncio.wait_for(asyncio.gather(back[0].wait(), back[1].wait()), TIMEOUT)
        assert producer.supports_quench is None   # a new session: not known yet
        # the consumer's subscription may come back after the producer's first
        # quench: wait until the producer's quench has heard of it
        assert await producer.send({"Phase": 2}) in (True, False)
        assert producer.supports_quench is True
        await until(lambda: producer.auto_quench_stats["terms"] == 1, what="the restored subscription in the quench")
        assert await producer.send({"Phase": 1}) is False    # filtering again
        assert await producer.send({"Phase": 2}) is True
        assert (await sub.get(timeout=TIMEOUT))["Phase"] == 2
        assert any("auto-quench on again" in r.getMessage() for r in caplog.records)

        for event in back:
            event.clear()
        await restart_with(router, quench=False)
        await asyncio.wait_for(asyncio.gather(back[0].wait(), back[1].wait()), TIMEOUT)
        # the internal quench was refused when restored: the router said so
        assert producer.supports_quench is False
        assert await producer.send({"Phase": 1}) is True
        assert len(auto_quench_warnings(caplog)) == 2
    finally:
        await producer.close()
        await consumer.close()


async def test_restored_quench_ends_at_a_router_without_quench(make_router, caplog):
    """A redirect to a router without quench ends the application's quench
    (iteration stops) and says so once; the session itself carries on."""
    full, plain = make_router(), make_router(quench=False)
    conn = await connect(full.url)
    try:
        quench = await conn.quench(["Group"])
        sub = await conn.subscribe("require(Group)")
        assert conn.supports_quench is True
        moved = asyncio.Event()
        conn.add_reconnect_listener(lambda c: moved.set())
        await asyncio.to_thread(full.call, full.router.redirect, plain.url)
        await asyncio.wait_for(moved.wait(), TIMEOUT)
        assert conn.uri.port == plain.port
        assert conn.supports_quench is False
        assert quench.closed and conn.quenches == []
        events = [event async for event in quench]     # ends rather than hangs
        assert isinstance(events[-1], SubscriptionRemoved)   # the old session's term
        warnings = [r.getMessage() for r in caplog.records
                    if r.levelno == logging.WARNING and "does not support quench" in
                    r.getMessage()]
        assert len(warnings) == 1 and f":{plain.port} does not" in warnings[0]
        await conn.send({"Group": "g"})
        assert (await sub.get(timeout=TIMEOUT))["Group"] == "g"
    finally:
        await conn.close()


def test_sync_api_raises_quench_not_supported(make_router):
    import elvin.sync

    plain = make_router(quench=False)
    with elvin.sync.connect(plain.url) as conn:
        with pytest.raises(QuenchNotSupported):
            conn.quench(["Group"])
        assert conn.supports_quench is False


async def test_optional_quench_falls_back_and_returns_with_the_router(make_router, caplog):
    """The one piece the quench-driven tools share: refused -> on_change(False)
    and one warning; after a reconnection to a router with quench ->
    on_change(True) and the quench reports subscriptions; and back again."""
    from elvin.client import OptionalQuench

    caplog.set_level(logging.INFO, logger="elvin.client")
    router = make_router(quench=False)
    changes: list[bool] = []
    async with connect(router.url, reconnect=True, reconnect_delay=0.05) as conn, \
            connect(router.url, reconnect=True, reconnect_delay=0.05) as other:
        await other.subscribe("Group == 'g'")
        follower = OptionalQuench(conn, ["Group"], listener=lambda _e: None,
                                  on_change=changes.append, fallback="doing without",
                                  resumed="using it")
        await follower.ask()
        assert (changes, follower.refused, follower.quench) == ([False], True, None)
        await restart_with(router, quench=True)
        await until(lambda: changes[-1:] == [True], what="quench after the restart")
        assert not follower.refused
        await until(lambda: len(follower.quench.subscriptions) == 1, what="the subscription")
        await restart_with(router, quench=False)
        await until(lambda: changes[-1:] == [False], what="no quench after the second restart")
        await follower.close()
    said = [r.getMessage() for r in caplog.records if "doing without" in r.getMessage()
            or "using it" in r.getMessage()]
    url = conn.url
    assert said == [f"{url}: doing without", f"{url} supports quench again: "
                    "using it", f"{url}: doing without"], said


async def test_early_avis_protocol_error_to_quench_is_no_quench():
    """Avis releases before 1.1 answered a quench request with Nack PROT_ERROR
    "Quench not supported" (later ones with NOT_IMPL) and kept the session.
    No such router runs here, so a small server speaking the real codec
    answers as they did; the client must read it as "no quench", not fail."""
    import elvin.protocol as wire

    async def early_avis(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = wire.FrameDecoder()
        while data := await reader.read(65536):
            for packet in decoder.feed(data):
                if isinstance(packet, wire.ConnRqst):
                    writer.write(wire.frame_packet(wire.ConnRply(packet.xid, {})))
                elif isinstance(packet, wire.QnchAddRqst):
                    refusal = wire.Nack(packet.xid, NackCode.PROT_ERROR, "Quench not supported")
                    writer.write(wire.frame_packet(refusal))
                elif isinstance(packet, wire.DisconnRqst):
                    writer.write(wire.frame_packet(wire.DisconnRply(packet.xid)))
        writer.close()

    server = await asyncio.start_server(early_avis, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with connect(f"elvin://127.0.0.1:{port}") as conn:
            with pytest.raises(QuenchNotSupported) as info:
                await conn.quench(["Group"])
            assert info.value.code == NackCode.PROT_ERROR
            assert conn.supports_quench is False
    finally:
        server.close()
        await server.wait_closed()
