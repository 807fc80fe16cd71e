"""elvin.client against a real router: connect, send, subscribe, Nacks."""

from __future__ import annotations

import asyncio
import threading

import pytest

import elvin
from elvin.client import (
    ConnectError,
    ConnectionClosedError,
    NackError,
    Notification,
    OptionsRejectedError,
    SubscriptionClosedError,
    connect,
)
from elvin.client.errors import nack_exception
from elvin.errors import NackCode, SubscriptionError
from elvin.protocol import Nack, SubAddRqst
from elvin.values import Int64

from .rawclient import RawClient


async def next_n(sub, n=1, timeout=5.0):
    return [await sub.get(timeout=timeout) for _ in range(n)]


async def assert_nothing(sub, wait=0.3):
    with pytest.raises(TimeoutError):
        await sub.get(timeout=wait)


async def test_connect_options_and_close(router_url):
    conn = await elvin.connect(router_url)
    try:
        assert conn.is_open and conn.state == "open"
        assert isinstance(conn.options, dict)
        assert conn.url.startswith("elvin:4.0/tcp,none,xdr/127.0.0.1:")
    finally:
        reason = await conn.close()
    assert reason.kind == "closed"
    assert conn.state == "closed"
    assert (await conn.closed).kind == "closed"
    with pytest.raises(ConnectionClosedError):
        await conn.send({"a": 1})
    assert (await conn.close()).kind == "closed"   # idempotent


async def test_async_with_forms(router_url):
    async with elvin.connect(router_url) as conn:
        assert conn.is_open
    assert conn.state == "closed"
    async with await elvin.connect(router_url) as conn2:
        assert conn2.is_open
    assert conn2.state == "closed"


async def test_requested_options_are_answered(router_url):
    async with connect(router_url, options={"Subscription.Max-Count": 50}) as conn:
        # the router must answer each understood option (spec 7.4.4)
        assert "Subscription.Max-Count" in conn.options


async def test_options_check_can_reject(router_url):
    seen = []

    def check(options):
        seen.append(options)
        return False

    with pytest.raises(OptionsRejectedError) as info:
        await connect(router_url, options_check=check)
    assert seen and info.value.options == seen[0]


async def test_unreachable_router():
    with pytest.raises(ConnectError) as info:
        await connect("elvin://127.0.0.1:1", timeout=2)
    assert "127.0.0.1:1" in str(info.value)
    assert isinstance(info.value, OSError)


async def test_bad_url():
    with pytest.raises(ValueError, match="not-a-url"):
        await connect("not-a-url")


async def test_send_and_receive_every_type(router_url):
    async with connect(router_url) as consumer, connect(router_url) as producer:
        sub = await consumer.subscribe('require(Kind) && Kind == "types"')
        sent = {"Kind": "types", "i32": -42, "i64": Int64(7), "big": 2**40, "real": -1.5,
                "str": 'quote " backslash \\ ünï', "opaque": b"\x00\xffdata"}
        assert await producer.send(sent) is True
        (n,) = await next_n(sub)
        assert isinstance(n, Notification)
        assert dict(n) == sent and n.attributes == sent
        assert type(n["i64"]) is Int64 and type(n["big"]) is Int64 and type(n["i32"]) is int
        assert n.secure is False and n.subscription is sub
        assert n["Kind"] == "types" and len(n) == len(sent) and "real" in n


async def test_send_validates_locally(router_url):
    async with connect(router_url) as conn:
        with pytest.raises(TypeError, match="'flag'"):
            await conn.send({"ok": 1, "flag": True})
        with pytest.raises(ValueError, match="'huge'"):
            await conn.send({"huge": 2**70})
        with pytest.raises(ValueError):
            await conn.send({})
        with pytest.raises(TypeError, match="'x'"):
            await conn.send({"x": [1, 2]})
        assert conn.is_open


async def test_subscribe_parse_error_is_local(router_url):
    async with connect(router_url) as conn:
        with pytest.raises(SubscriptionError) as info:
            await conn.subscribe('Name == "unterminated')
        assert info.value.position is not None
        with pytest.raises(SubscriptionError) as info:
            await conn.subscribe("a == == 1")
        assert info.value.position == 5
        assert conn.subscriptions == []


async def test_own_notifications_and_multiple_subscriptions(router_url):
    async with connect(router_url) as conn:
        a = await conn.subscribe("n > 1")
        b = await conn.subscribe("n > 2")
        for n in range(4):
            await conn.send({"n": n})
        assert [x["n"] for x in await next_n(a, 2)] == [2, 3]
        assert [x["n"] for x in await next_n(b, 1)] == [3]
        await assert_nothing(b)


async def test_listeners_sync_and_async(router_url):
    async with connect(router_url) as conn:
        sub = await conn.subscribe("require(L)", buffer_size=0)
        got_sync, got_async = [], []
        done = asyncio.Event()

        async def alistener(n):
            await asyncio.sleep(0)
            got_async.append(n["L"])
            if len(got_async) == 2:
                done.set()

        sub.add_listener(lambda n: got_sync.append(n["L"]))
        sub.add_listener(alistener)
        await conn.send({"L": 1})
        await conn.send({"L": 2})
        await asyncio.wait_for(done.wait(), 5)
        assert got_sync == [1, 2] and got_async == [1, 2]
        with pytest.raises(RuntimeError):
            await sub.get(timeout=0.1)


async def test_async_iteration_ends_on_close(router_url):
    async with connect(router_url) as conn:
        sub = await conn.subscribe("require(it)")
        for i in range(3):
            await conn.send({"it": i})
        seen = []

        async def consume():
            async for n in sub:
                seen.append(n["it"])
                if len(seen) == 3:
                    await sub.close()
        await asyncio.wait_for(consume(), 5)
        assert seen == [0, 1, 2]
        assert sub.closed
        with pytest.raises(SubscriptionClosedError):
            await sub.get(timeout=0.1)
        await sub.close()   # idempotent


async def test_bounded_buffer_drops_oldest(router_url, caplog):
    async with connect(router_url) as conn:
        sub = await conn.subscribe("require(seq)", buffer_size=5)
        probe = await conn.subscribe("seq == 19")
        with caplog.at_level("WARNING", logger="elvin.client"):
            for i in range(20):
                await conn.send({"seq": i})
            await probe.get(timeout=5)       # everything has arrived by now
        assert sub.pending == 5 and sub.dropped == 15
        assert [n["seq"] for n in await next_n(sub, 5)] == [15, 16, 17, 18, 19]
        # the loss is said once, with the size to change
        full = [r for r in caplog.records if "buffer full" in r.getMessage()]
        assert len(full) == 1 and "buffer_size=5" in full[0].getMessage()


async def test_modify_subscription(router_url):
    async with connect(router_url) as conn:
        sub = await conn.subscribe("v == 1")
        await conn.send({"v": 1})
        await conn.send({"v": 2})
        assert [n["v"] for n in await next_n(sub)] == [1]
        await assert_nothing(sub)
        await sub.modify("v == 2")
        assert sub.expression == "v == 2"
        await conn.send({"v": 1})
        await conn.send({"v": 2})
        assert [n["v"] for n in await next_n(sub)] == [2]
        await assert_nothing(sub)
        with pytest.raises(SubscriptionError):
            await sub.modify("v ==")
        assert sub.expression == "v == 2"
        await sub.modify(accept_insecure=False)    # no keys: nothing matches now
        assert sub.accept_insecure is False
        await conn.send({"v": 2})
        await assert_nothing(sub)


async def test_closed_subscription_gets_nothing(router_url):
    async with connect(router_url) as conn:
        sub = await conn.subscribe("require(gone)")
        keep = await conn.subscribe("require(gone)")
        await sub.close()
        await conn.send({"gone": 1})
        await keep.get(timeout=5)
        assert sub.pending == 0 and sub.closed
        assert conn.subscriptions == [keep]


async def test_nack_becomes_nack_error(router_url):
    """A request the router refuses raises NackError: its code, name, the
    request it answers, and the router's template filled in."""
    async with connect(router_url) as conn:
        with pytest.raises(NackError) as info:
            await conn.set_keys(del_notification=elvin.Keys.producer(b"never added"))
        assert info.value.code == NackCode.NO_SUCH_KEY
        assert info.value.name == "NO_SUCH_KEY"
        assert info.value.request == "SecRqst"
        assert info.value.message and "%" not in info.value.message
        assert conn.is_open


async def test_subscription_nack_becomes_subscription_error(router):
    """A router's 21xx Nack is raised as SubscriptionError with its offset.
    The client never sends an expression it cannot parse, so a raw client
    sends one, and the router's own Nack goes through the client's reading."""
    text = "a == == 1"
    raw = await RawClient.connected(router.port)
    try:
        nack = await raw.request(SubAddRqst(raw.xid(), text, True, elvin.Keys()))
    finally:
        await raw.close()
    assert isinstance(nack, Nack)
    error = nack_exception(nack.error, nack.message, nack.args, "SubAddRqst", text)
    assert isinstance(error, SubscriptionError)
    assert 2101 <= error.nack_code <= 2112
    assert error.position == 5
    assert error.expression == text


async def test_local_address_names_the_session_at_the_router(router):
    conn = await connect(router.url)
    try:
        host, port = conn.local_address
        assert host == "127.0.0.1"
        peers = await asyncio.to_thread(
            router.call, lambda: [s.peer for s in router.router.sessions])
        assert peers == [(host, port)]
    finally:
        await conn.close()
    assert conn.local_address is None


async def test_unotify(router_url):
    async with connect(router_url) as conn:
        sub = await conn.subscribe("require(unotified)")
        await elvin.unotify(router_url, {"unotified": "yes", "n": Int64(5)})
        (n,) = await next_n(sub)
        assert n.attributes == {"unotified": "yes", "n": Int64(5)}


async def test_many_concurrent_requests(router_url):
    async with connect(router_url) as conn:
        subs = await asyncio.gather(*(conn.subscribe(f"k == {i}") for i in range(50)))
        assert len({s.id for s in subs}) == 50
        await conn.send({"k": 17})
        (n,) = await next_n(subs[17])
        assert n["k"] == 17
        await asyncio.gather(*(s.close() for s in subs))
        assert conn.subscriptions == []


async def test_set_options_renegotiates(router_url):
    async with connect(router_url) as conn:
        answer = await conn.set_options({"Subscription.Max-Count": 20})
        assert "Subscription.Max-Count" in answer
        assert conn.options["Subscription.Max-Count"] == answer["Subscription.Max-Count"]
        with pytest.raises(TypeError):
            await conn.set_options({"Bad": object()})


async def test_drop_warning_for_a_slow_consumer(router_url):
    """A consumer whose event loop is busy reads nothing: the router's queue
    for it overflows, it drops deliveries and says so with DropWarn."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="consumer loop", daemon=True)
    thread.start()
    busy = threading.Event()     # the consumer's loop does no work until it is set

    def on_consumer_loop(coro) -> asyncio.Future:
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    async def open_consumer() -> elvin.Connection:
        return await connect(router_url, options={"Send-Queue.Max-Length": 1024})

    async def until_last(sub) -> None:
        while (await sub.get(timeout=10))["flood"] != -1:
            pass

    consumer = await on_consumer_loop(open_consumer())
    try:
        sub = await on_consumer_loop(consumer.subscribe("require(flood)", buffer_size=10_000))
        loop.call_soon_threadsafe(busy.wait, 60)     # a consumer that stops reading
        async with connect(router_url) as producer:
            payload = "x" * 16_000       # 10 MB in all: more than the socket buffers hold
            for i in range(600):
                await producer.send({"flood": i, "payload": payload})
            # a reply to the producer proves the router handled every send before it
            await producer.set_keys()          # an empty SecRqst: a round trip
            busy.set()
            await producer.send({"flood": -1})
            await on_consumer_loop(until_last(sub))
        assert consumer.drop_warnings >= 1
        assert sub.delivered < 601
        assert consumer.is_open
    finally:
        busy.set()
        await on_consumer_loop(consumer.close())
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, 10)
        loop.close()
