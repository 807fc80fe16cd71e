"""Every move can be finished or redone (#41): the router kills itself at
each named point of a move (``ELVIN_CRASH_AT``, a real SIGKILL), is started
again, and the client makes each possible next call (move out, move in,
collect). Whatever that call says, the client then gets back to a normal
move-out and move-in, and by counting: nothing twice, nothing lost that it
was not told about (``unknown-client``), never locked out."""

from __future__ import annotations

import os

import pytest

from elvin.client import connect
from elvin.mobility import MobilityError
from elvin.mobility.proxy import canonical
from tests.waiting import until

from .process_util import free_port
from .test_mobility_crash import elvind as elvind
from .test_mobility_crash import federated_pair, federation_config, mobile, publish
from .test_mobility_state import small_filesystem as small_filesystem

POINTS = ["mobility-move-out-received", "mobility-move-out-committed",
          "mobility-move-in-handed", "mobility-release-received", "mobility-released"]
CALLS = ["move_out", "move_in", "collect"]


async def _call(mc, name: str, url: str) -> str | None:
    """The client's next call; the error code it got, if any."""
    try:
        if name == "move_out":
            await mc.move_out()
        elif name == "move_in":
            await mc.move_in(url)
        else:
            await mc.collect()
    except MobilityError as exc:
        return exc.code
    return None


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("point", POINTS)
async def test_a_crash_at_any_point_then_any_call_is_recovered(elvind, point, call):
    a = elvind().start(crash_at=point)
    mc, got = await mobile(a.url)
    told_lost: set[int] = set()
    await publish(a.url, range(0, 20))                     # live
    batches = [range(0, 20)]
    try:
        await mc.move_out()
        await publish(a.url, range(20, 40))                # buffered
        batches.append(range(20, 40))
        await mc.move_in(a.url)
    except MobilityError:
        pass
    a.wait_killed()
    a.start()
    # buffered, if anything has it: moved out, or connected on a connection
    # that died (a restored buffer records them; the next move-out takes it over)
    await publish(a.url, range(40, 60))
    if mc.state == "connected" and point == "mobility-released":
        pass        # attached, nothing buffered for it: lost with its connection
    else:
        batches.append(range(40, 60))
    code = await _call(mc, call, a.url)
    if code == "unknown-client":
        told_lost.update(range(40, 60))      # the move-out was never written: told so
    assert code in (None, "state", "unknown-client", "unconfirmed"), code
    # back to normal: whatever state the call left, a move-out and a move-in
    for _ in range(3):
        if mc.state == "moved-out":
            if await _call(mc, "move_in", a.url) == "unknown-client":
                told_lost.update(range(40, 60))
            continue
        break
    assert mc.state == "connected"
    assert await _call(mc, "move_out", a.url) is None, "locked out"
    await publish(a.url, range(60, 80))
    batches.append(range(60, 80))
    assert await _call(mc, "move_in", a.url) is None
    await publish(a.url, range(80, 90))                    # live again
    batches.append(range(80, 90))
    await mc.connection.set_keys()
    expected = {s for b in batches for s in b}
    twice = sorted(s for s, n in got.seen.items() if n > 1)
    assert not twice, f"delivered twice: {twice[:20]}"
    missing = sorted(expected - set(got.seen) - told_lost)
    assert not missing, f"lost without a word: {missing[:20]} ({len(missing)})"
    await mc.close()


@pytest.mark.parametrize("then", ["collect", "move_out"])
async def test_collect_after_a_failed_move_in_gives_each_once(elvind, then):
    """The issue's case: the move-out router A is killed as the download of
    a move-in at federated router B reaches it; the client stays attached
    and live at B while A's buffer, restored and armed, records the same
    notifications. ``collect()`` gives what the buffer held before, once,
    and nothing the client already had live; so does a move-out at B
    first (its new ticket would otherwise replace the one owed at A)."""
    a, b = federated_pair(elvind)
    a.start(crash_at="mobility-download-received")
    b.start()
    mc, got = await mobile(a.url)
    try:
        await mc.move_out()
        await publish(a.url, range(100))                     # buffered at A
        with pytest.raises(MobilityError) as info:
            await mc.move_in(b.url)
        assert info.value.code == "unreachable" and mc.state == "connected"
        a.wait_killed()
        a.start()
        pub = await connect(a.url)
        try:
            for probe in range(400):   # until the link is back and A knows B wants them
                await pub.send({"Producer": "probe", "Seq": probe})
                try:
                    await until(lambda: got.probes > 0, timeout=0.1)
                    break
                except AssertionError:
                    continue
            for seq in range(100, 400):                      # live at B, recorded at A
                await pub.send({"Producer": "p", "Seq": seq})
            await pub.set_keys()
        finally:
            await pub.close()
        await until(lambda: 399 in got.seen, what="the live ones at B")
        if then == "move_out":
            await mc.move_out()
            assert mc.ticket is not None and canonical(mc.ticket.proxy) == canonical(b.url)
            await mc.move_in(b.url)
        else:
            report = await mc.collect()
            # and the probes A buffered before the link knew B wanted them
            assert report.caught_up >= 100 and report.duplicates >= 300, report
        got.exactly(range(400))
    finally:
        await mc.close()


async def test_collect_after_the_new_router_died_too(elvind):
    """After the failed move-in the new router B dies as well: the client
    is attached on a dead connection with a ticket. ``collect()`` opens a
    new connection and collects; what A buffered meanwhile comes once."""
    a, b = federated_pair(elvind)
    a.start(crash_at="mobility-download-received")
    b.start()
    mc, got = await mobile(a.url)
    try:
        await mc.move_out()
        await publish(a.url, range(100))
        with pytest.raises(MobilityError):
            await mc.move_in(b.url)
        a.wait_killed()
        b.kill()
        b.start()
        a.start()
        await publish(a.url, range(100, 400))    # only A's buffer has them
        report = await mc.collect()
        assert report.caught_up == 400, report
        got.exactly(range(400))
    finally:
        await mc.close()


async def test_a_move_in_done_again_gets_what_was_buffered_since_the_first_try(elvind):
    """The new router B dies after A handed it the buffer but before the
    client had it: the client is still moved out. What A buffers after that
    first download belongs to the second one (A used to repeat the first
    cut to any later download, and release the rest)."""
    a, b = federated_pair(elvind)
    a.start()
    b.start(crash_at="mobility-move-in-handed")
    mc, got = await mobile(a.url)
    try:
        await mc.move_out()
        await publish(a.url, range(100))
        with pytest.raises(MobilityError) as info:
            await mc.move_in(b.url)
        assert info.value.code == "unreachable" and mc.state == "moved-out"
        b.wait_killed()
        await publish(a.url, range(100, 200))      # buffered at A after its first cut
        b.start()
        report = await mc.move_in(b.url, sync="ping")
        assert report.caught_up == 200, report
        got.exactly(range(200))
    finally:
        await mc.close()


async def _restored_after_its_move_in(elvind, crash_at: str | None = None, *,
                                      a=None, while_down=None, body: str | None = None):
    """A router (``a``, default a new one) killed after a client's move-in,
    before it wrote the release, and started again (armed with
    ``crash_at``; ``while_down()`` called first): the client got 0-39 (live,
    then buffered) and its connection is dead; the buffer the router
    restored has recorded 40-59 since (with ``body``). Returns (router,
    client, got)."""
    a = (a or elvind()).start(crash_at="mobility-release-received")
    mc, got = await mobile(a.url)
    await publish(a.url, range(0, 20))                     # live
    await mc.move_out()
    await publish(a.url, range(20, 40))                    # buffered
    await mc.move_in(a.url)                                # killed at its release
    a.wait_killed()
    if while_down is not None:
        while_down()
    a.start(crash_at=crash_at)
    await publish(a.url, range(40, 60), body=body)         # the restored buffer has them
    return a, mc, got


@pytest.mark.parametrize("point", ["mobility-move-out-committed", "mobility-take-over"])
async def test_a_crash_while_a_restored_buffer_is_taken_over_loses_nothing(elvind, point):
    """The restored buffer of a client whose connection died (killed after
    its move-in, before the release) records what is published after the
    restart; the client's next move-out (``Resume``) takes it over. A
    second SIGKILL inside that take-over (its move-out written, or its
    reply back at the proxy while the old buffer's subscriptions still feed
    the new one) loses none of it: the new buffer was written with them."""
    a, mc, got = await _restored_after_its_move_in(elvind, crash_at=point)
    try:
        code = await _call(mc, "move_out", a.url)          # resumed: killed in the take-over
        assert code in (None, "unconfirmed"), code
        a.wait_killed()
        a.start()
        await publish(a.url, range(60, 70))                # buffered in the new one
        assert mc.state == "moved-out"
        assert await _call(mc, "move_in", a.url) is None
        await publish(a.url, range(70, 80))                # live
        await mc.connection.set_keys()
        got.exactly(range(80))
    finally:
        await mc.close()


async def test_a_resumed_move_out_on_a_full_disk_tells_what_it_loses(elvind, small_filesystem):
    """The take-over of a restored buffer needs room on disk. On a full one
    the resumed move-out is refused, saying how many notifications it lost
    (those the restored buffer recorded since the restart), or it goes
    through after dropping the oldest, counted in the move-in's ``dropped``:
    either way what the client misses is what it was told."""
    from .test_mobility_durability import fill, query

    a = elvind()
    a.state = small_filesystem / "state"
    a.args[a.args.index("--state-dir") + 1] = str(a.state)
    a, mc, got = await _restored_after_its_move_in(elvind, a=a, body="w" * 3000)
    try:
        query(a.state / "mobility.sqlite3", "PRAGMA wal_checkpoint(TRUNCATE)")
        fill(small_filesystem)
        told = 0
        try:
            await mc.move_out()                            # resumed
        except MobilityError as exc:
            assert exc.code == "storage", exc
            assert "20 notifications" in str(exc), exc
            told = 20
            assert mc.state == "connected"
        (small_filesystem / "filler").unlink()
        if mc.state == "connected":
            await mc.move_out()
        await publish(a.url, range(60, 70))
        report = await mc.move_in(a.url)
        told += report.dropped
        await publish(a.url, range(70, 80))                # live
        await mc.connection.set_keys()
        twice = [s for s, n in got.seen.items() if n > 1]
        assert not twice, twice
        missing = set(range(80)) - set(got.seen)
        assert len(missing) == told, (sorted(missing), told)
    finally:
        await mc.close()


async def test_a_move_out_retried_after_an_unfinished_take_over_tells_what_it_loses(
        router, tmp_path):
    """A resumed move-out takes a restored buffer over, but its reply never
    comes back (the send fails: the proxy's connection broke), so the new
    buffer is never armed; the client, attached live, tries again. What the
    unfinished take-over holds cannot be delivered without part of it
    coming twice: it used to be deleted with nothing said; now the retried
    move-out's buffer counts it, and the move-in tells the exact number."""
    from elvin.keys import EMPTY_KEYS
    from elvin.mobility import MobilityProxy, ProxyConfig
    from elvin.mobility import protocol as P
    from elvin.mobility.client import request_move_in, request_move_out
    from elvin.mobility.store import MobilityStore

    client = await connect(router.url)
    specs = [P.SubscriptionSpec(1, "require(Seq)", True, EMPTY_KEYS)]
    secrets = ["first-secret-0123456789", "second-secret-0123456789",
               "third-secret-0123456789"]
    try:
        async with MobilityProxy(router.url, ProxyConfig(id="p"),
                                 store=MobilityStore.open(tmp_path)):
            await request_move_out(client, specs, client_id="c", proxy="p", timeout=5,
                                   secret=secrets[0])
            await publish(router.url, range(0, 20))        # buffered, then a restart
        async with MobilityProxy(router.url, ProxyConfig(id="p"),
                                 store=MobilityStore.open(tmp_path)) as proxy:
            await publish(router.url, range(20, 30))       # the restored buffer has them
            send = proxy.connection.send

            async def reply_lost(attrs, **kwargs):
                if attrs.get(P.REPLY) == P.MOVE_OUT and attrs.get(P.STATUS) == "ok":
                    proxy.connection.send = send       # once
                    raise ConnectionResetError("the reply is lost")
                await send(attrs, **kwargs)

            proxy.connection.send = reply_lost
            with pytest.raises(MobilityError):
                await request_move_out(client, specs, client_id="c", proxy="p", timeout=5,
                                       secret=secrets[1], previous_secret=secrets[0],
                                       resume=True)
            taken = proxy.handlers["c"]
            assert taken.carry is not None and not taken.armed, "the take-over finished"
            await publish(router.url, range(30, 35))       # fed into the unfinished one
            await until(lambda: taken.buffered == 15, what="the unfinished take-over's 15")
            ticket = await request_move_out(client, specs, client_id="c", proxy="p",
                                            timeout=5, secret=secrets[2],
                                            previous_secret=secrets[1])
            await publish(router.url, range(35, 40))       # buffered in the new one
            await until(lambda: proxy.handlers["c"].buffered == 5, what="the new buffer's 5")
            entries, reply = await request_move_in(client, ticket, proxy="p", timeout=5)
            assert len(entries) == 5
            assert reply.attributes[P.DROPPED] == 15, reply.attributes
            assert proxy.stats["lost_in_take_over"] == 15
    finally:
        await client.close()


async def test_a_kill_after_a_refused_take_over_delivers_nothing_twice(elvind, small_filesystem):
    """A resumed move-out refused on a full disk (the client, told what it
    lost, is attached live again), then a SIGKILL before the disk has room:
    the restored buffer's removal was never written, so it comes back at the
    restart, armed, holding what was delivered at the move-in and what the
    refusal said was lost. The next resumed move-out takes over only what it
    recorded since this restart: nothing comes twice, and every notification
    the client misses is one it was told about (the refusal's count plus the
    move-in's ``dropped``)."""
    from .test_mobility_durability import fill, query

    a = elvind()
    a.state = small_filesystem / "state"
    a.args[a.args.index("--state-dir") + 1] = str(a.state)
    a, mc, got = await _restored_after_its_move_in(elvind, a=a, body="w" * 3000)
    try:
        query(a.state / "mobility.sqlite3", "PRAGMA wal_checkpoint(TRUNCATE)")
        fill(small_filesystem)
        with pytest.raises(MobilityError) as refused:
            await mc.move_out()                            # resumed: refused
        assert refused.value.code == "storage", refused.value
        assert "the 20 notifications" in str(refused.value), refused.value
        told = 20
        assert mc.state == "connected"
        await publish(a.url, range(60, 80))                # live again, on its new connection
        await until(lambda: 79 in got.seen, what="the live ones after the refusal")
        a.kill()                                           # the disk still full
        (small_filesystem / "filler").unlink()
        a.start()
        # the refused take-over's buffer is back: its removal never reached the disk
        assert a.logged().rsplit("--- run", 1)[1].count("1 moved-out clients restored"), \
            a.logged()
        await publish(a.url, range(80, 100))               # only the restored buffer has them
        await mc.move_out()                                # resumed: taken over
        await publish(a.url, range(100, 110))              # buffered in the new one
        report = await mc.move_in(a.url)
        told += report.dropped
        await publish(a.url, range(110, 120))              # live
        await mc.connection.set_keys()
        await until(lambda: 119 in got.seen, what="the live ones at the end")
        twice = sorted(s for s, n in got.seen.items() if n > 1)
        assert not twice, f"delivered twice: {twice}"
        assert set(got.seen) <= set(range(120)), sorted(got.seen)
        missing = sorted(set(range(120)) - set(got.seen))
        assert len(missing) == told, f"missing {missing}, told {told}"
        assert set(missing) <= set(range(40, 60)), f"lost unsaid: {missing}"
    finally:
        await mc.close()


async def test_a_retried_move_out_at_the_client_limit_replaces_its_own_buffer(router, tmp_path):
    """At the proxy's client limit, the client's own buffer is no other
    client: a resumed move-out that takes its restored buffer over, and a
    move-out retried after that take-over never finished (the reply was
    lost), replace it instead of being refused with ``limit``; another
    client still is refused."""
    from elvin.keys import EMPTY_KEYS
    from elvin.mobility import MobilityProxy, ProxyConfig
    from elvin.mobility import protocol as P
    from elvin.mobility.client import request_move_in, request_move_out
    from elvin.mobility.store import MobilityStore

    client = await connect(router.url)
    specs = [P.SubscriptionSpec(1, "require(Seq)", True, EMPTY_KEYS)]
    secrets = ["first-secret-0123456789", "second-secret-0123456789",
               "third-secret-0123456789"]
    config = ProxyConfig(id="p", max_clients=1)
    try:
        async with MobilityProxy(router.url, config, store=MobilityStore.open(tmp_path)):
            await request_move_out(client, specs, client_id="c", proxy="p", timeout=5,
                                   secret=secrets[0])
        async with MobilityProxy(router.url, config,
                                 store=MobilityStore.open(tmp_path)) as proxy:
            await publish(router.url, range(0, 10))        # the restored buffer has them
            send = proxy.connection.send

            async def reply_lost(attrs, **kwargs):
                if attrs.get(P.REPLY) == P.MOVE_OUT and attrs.get(P.STATUS) == "ok":
                    proxy.connection.send = send       # once
                    raise ConnectionResetError("the reply is lost")
                await send(attrs, **kwargs)

            proxy.connection.send = reply_lost
            with pytest.raises(MobilityError) as lost:     # resumed, at the limit
                await request_move_out(client, specs, client_id="c", proxy="p", timeout=5,
                                       secret=secrets[1], previous_secret=secrets[0],
                                       resume=True)
            assert lost.value.code != "limit", lost.value
            taken = proxy.handlers["c"]
            assert taken.carry is not None and not taken.armed, "the take-over finished"
            with pytest.raises(MobilityError) as other:
                await request_move_out(client, specs, client_id="d", proxy="p", timeout=5)
            assert other.value.code == "limit", other.value
            ticket = await request_move_out(client, specs, client_id="c", proxy="p",
                                            timeout=5, secret=secrets[2],
                                            previous_secret=secrets[1])   # at the limit
            await publish(router.url, range(10, 15))       # buffered in the new one
            await until(lambda: proxy.handlers["c"].buffered == 5, what="the new buffer's 5")
            entries, reply = await request_move_in(client, ticket, proxy="p", timeout=5)
            assert [attrs["Seq"] for attrs, _ids in entries] == list(range(10, 15))
            assert reply.attributes[P.DROPPED] == 10, reply.attributes
    finally:
        await client.close()


async def test_what_an_unfinished_take_over_receives_during_the_retry_is_counted(
        router, tmp_path):
    """A move-out retried (without ``Resume``) after a take-over that never
    finished: the restored buffer's subscriptions keep feeding the
    unfinished take-over while the retry makes its own subscriptions (and
    waits for them). What arrives then is dropped with it, so it is counted
    too, at the moment it goes (it used to be counted when the retry
    arrived: those went unsaid), and the move-in tells the exact number."""
    from elvin.keys import EMPTY_KEYS
    from elvin.mobility import MobilityProxy, ProxyConfig
    from elvin.mobility import protocol as P
    from elvin.mobility.client import request_move_in, request_move_out
    from elvin.mobility.store import MobilityStore

    client = await connect(router.url)
    specs = [P.SubscriptionSpec(1, "require(Seq)", True, EMPTY_KEYS)]
    secrets = ["first-secret-0123456789", "second-secret-0123456789",
               "third-secret-0123456789"]
    try:
        async with MobilityProxy(router.url, ProxyConfig(id="p"),
                                 store=MobilityStore.open(tmp_path)):
            await request_move_out(client, specs, client_id="c", proxy="p", timeout=5,
                                   secret=secrets[0])
        async with MobilityProxy(router.url, ProxyConfig(id="p"),
                                 store=MobilityStore.open(tmp_path)) as proxy:
            await publish(router.url, range(0, 10))        # the restored buffer has them
            send = proxy.connection.send

            async def reply_lost(attrs, **kwargs):
                if attrs.get(P.REPLY) == P.MOVE_OUT and attrs.get(P.STATUS) == "ok":
                    proxy.connection.send = send       # once
                    raise ConnectionResetError("the reply is lost")
                await send(attrs, **kwargs)

            proxy.connection.send = reply_lost
            with pytest.raises(MobilityError):
                await request_move_out(client, specs, client_id="c", proxy="p", timeout=5,
                                       secret=secrets[1], previous_secret=secrets[0],
                                       resume=True)
            taken = proxy.handlers["c"]
            assert taken.carry is not None and not taken.armed, "the take-over finished"
            subscribe = proxy.connection.subscribe
            during: list[int] = []

            async def published_meanwhile(*args, **kwargs):
                # the retry's subscriptions are on their way: traffic goes on
                if not during:
                    during.append(1)
                    await publish(router.url, range(10, 15))
                    await until(lambda: taken.buffered == 15,
                                what="fed into the unfinished take-over meanwhile")
                return await subscribe(*args, **kwargs)

            proxy.connection.subscribe = published_meanwhile
            ticket = await request_move_out(client, specs, client_id="c", proxy="p",
                                            timeout=10, secret=secrets[2],
                                            previous_secret=secrets[1])
            assert during, "the retry made no subscription"
            await publish(router.url, range(15, 20))       # buffered in the new one
            await until(lambda: proxy.handlers["c"].buffered == 5, what="the new buffer's 5")
            entries, reply = await request_move_in(client, ticket, proxy="p", timeout=5)
            assert [attrs["Seq"] for attrs, _ids in entries] == list(range(15, 20))
            assert reply.attributes[P.DROPPED] == 15, reply.attributes
            assert proxy.stats["lost_in_take_over"] == 15
    finally:
        await client.close()


async def test_a_resumed_move_out_refused_for_a_subscription_tells_what_it_loses(
        router, tmp_path):
    """A resumed move-out whose subscription the router refuses lets the
    restored buffer go (the client is attached again, live), as one refused
    for want of disk does: what that buffer recorded since the restart, which
    the client never had, is told in the refusal and counted, not dropped
    unsaid."""
    from elvin.keys import EMPTY_KEYS
    from elvin.mobility import MobilityProxy, ProxyConfig
    from elvin.mobility import protocol as P
    from elvin.mobility.client import request_move_out
    from elvin.mobility.store import MobilityStore

    client = await connect(router.url)
    specs = [P.SubscriptionSpec(1, "require(Seq)", True, EMPTY_KEYS)]
    bad = [*specs, P.SubscriptionSpec(2, "Seq ==", True, EMPTY_KEYS)]
    first, second = "first-secret-0123456789", "second-secret-0123456789"
    try:
        async with MobilityProxy(router.url, ProxyConfig(id="p"),
                                 store=MobilityStore.open(tmp_path)):
            await request_move_out(client, specs, client_id="c", proxy="p", timeout=5,
                                   secret=first)
            await publish(router.url, range(0, 5))         # buffered before the restart
        async with MobilityProxy(router.url, ProxyConfig(id="p"),
                                 store=MobilityStore.open(tmp_path)) as proxy:
            await publish(router.url, range(5, 15))        # the restored buffer has them
            await until(lambda: proxy.handlers["c"].buffered == 15, what="recorded")
            with pytest.raises(MobilityError) as refused:
                await request_move_out(client, bad, client_id="c", proxy="p", timeout=5,
                                       secret=second, previous_secret=first, resume=True)
            assert refused.value.code == "subscription", refused.value
            assert "the 10 notifications" in str(refused.value), refused.value
            assert proxy.stats["lost_in_take_over"] == 10
            assert "c" not in proxy.handlers
    finally:
        await client.close()


@pytest.mark.parametrize("call", ["collect", "move_out"])
async def test_a_resumed_move_out_that_timed_out_leaves_the_restored_buffer_to_collect(
        elvind, call):
    """The router is killed after a move-in, before it writes the release:
    restarted, it restores the buffer, which records what is published for
    the client, whose connection died. The client's resumed move-out then
    fails before any take-over starts (here the client holds a stale key of
    the proxy, so the router hands the request to nobody) and times out, and
    the client is attached live again. What the restored buffer recorded
    since the restart, which the client never had, comes once: by
    ``collect()``, or by the next move-out, which collects it first (the
    proxy would replace that buffer, and its content was lost unreported)."""
    a, mc, got = await _restored_after_its_move_in(elvind)
    try:
        url = canonical(a.url)
        real_key = mc.proxy_keys.get(url)
        mc.proxy_keys[url] = os.urandom(20)                    # stale: nobody reads it
        mc.timeout = 1.0
        with pytest.raises(MobilityError) as failed:
            await mc.move_out()
        assert failed.value.code == "timeout" and mc.state == "connected", failed.value
        if real_key is None:
            del mc.proxy_keys[url]
        else:
            mc.proxy_keys[url] = real_key
        mc.timeout = 5.0
        await publish(a.url, range(60, 80))                    # live, and recorded too
        await until(lambda: 79 in got.seen, what="the live ones")
        if call == "collect":
            report = await mc.collect()
            assert report.caught_up == 20 and report.duplicates == 20, report
            await publish(a.url, range(80, 90))                # live
        else:
            await mc.move_out()
            await publish(a.url, range(80, 90))                # buffered
            report = await mc.move_in(a.url)
            assert report.caught_up == 10, report
        await publish(a.url, range(90, 100))                   # live
        await until(lambda: 99 in got.seen, what="the last live ones")
        got.exactly(range(100))
    finally:
        await mc.close()


async def test_a_failed_resumed_move_out_keeps_a_ticket_already_owed(elvind):
    """A client attached with a buffer still owed at another proxy (after a
    failed move-in) whose resumed move-out then fails keeps that ticket and
    the count of what it had live since: replacing them lost the other
    buffer, or delivered its overlap twice."""
    from collections import Counter

    from elvin.mobility.client import Ticket

    a = elvind().start()
    mc, _got = await mobile(a.url)
    try:
        owed = Ticket(mc.client_id, "elvin://elsewhere", "elvin://elsewhere", "s" * 24, 10,
                      60.0, 0.0)
        mc.ticket, mc._overlap = owed, Counter({"seen live": 1})
        mc._owe_restored(mc.connection, a.url)
        assert mc.ticket is owed and mc._overlap == Counter({"seen live": 1})
        mc.ticket = mc._overlap = None
        mc._owe_restored(mc.connection, a.url)
        assert mc.ticket is not None and mc.ticket.since_restart and mc._overlap == Counter()
        mc.ticket = mc._overlap = None
    finally:
        await mc.close()


async def test_a_resumed_move_out_answered_after_the_client_gave_up_delivers_each_once(
        elvind):
    """The router is killed after a move-in, before it writes the release,
    and restarted while its federation peer is down: the restored buffer
    records what is published for the client, whose connection died. Its
    resumed move-out is taken over at the proxy, but the reply waits for the
    peer (``--mobility-announce-wait``) and comes after the client gave up:
    the client is attached live again, owing what the restart left, under
    the move-out's own secret (which names the new buffer now). ``collect()``
    delivers what the restored buffer recorded since the restart, once, and
    nothing the client had live."""
    fed_a, fed_b = free_port(), free_port()
    b = elvind("B", config=federation_config("B", fed_b, None, accept="A")).start()
    a = elvind("A", config=federation_config("A", fed_a, ("B", fed_b)),
               extra=["--mobility-announce-wait", "4"])
    a, mc, got = await _restored_after_its_move_in(elvind, a=a, while_down=b.kill)
    try:
        mc.timeout = 1.0
        with pytest.raises(MobilityError) as failed:
            await mc.move_out()           # resumed; its reply waits for B, up to 4 s
        assert failed.value.code == "timeout" and mc.state == "connected", failed.value
        assert mc.ticket is not None and mc.ticket.since_restart
        mc.timeout = 10.0
        await publish(a.url, range(60, 80))                    # live, and recorded too
        await until(lambda: 79 in got.seen, what="the live ones")
        report = await mc.collect()
        assert report.caught_up == 20, report
        await publish(a.url, range(80, 90))                    # live
        await until(lambda: 89 in got.seen, what="the last live ones")
        got.exactly(range(90))
        assert "reply waits until the federation's peers know" in a.logged()
    finally:
        await mc.close()
