"""Faults that come together with a crash (#41): a SIGKILL while the disk is
full, a torn WAL that SQLite repairs by dropping frames, bytes changed
inside a stored notification. In each, what the client is told it lost
(``report.dropped``) is exactly what it did not get, and nothing it gets
has wrong values. Real ``elvind`` processes, real files, SIGKILL."""

from __future__ import annotations

import shutil
import sqlite3

from elvin.client import connect
from elvin.mobility import MobileConnection, MobilityProxy, ProxyConfig
from elvin.mobility.ledger import LEDGER_NAME
from elvin.mobility.store import FILE_NAME, MobilityStore, StoredClient, iter_entries
from elvin.router.metrics import exposition
from tests.waiting import until

from .test_mobility_crash import Elvind, mobile, publish
from .test_mobility_crash import elvind as elvind
from .test_mobility_state import small_filesystem as small_filesystem


def lost_and_reported(got, published: int, report) -> tuple[int, int]:
    twice = [s for s, n in got.seen.items() if n > 1]
    assert not twice, f"delivered twice: {twice[:10]}"
    assert set(got.seen) <= set(range(published))
    return published - len(got.seen), report.dropped


async def test_a_kill_on_a_full_disk_loses_only_what_is_reported(small_filesystem, tmp_path):
    """The state directory on a 512 KiB tmpfs, filled: the proxy keeps what
    it cannot write in memory, the router goes on answering producers, and
    then it is killed. What the restart cannot give back is counted."""
    a = Elvind(tmp_path, extra=[])
    a.state = small_filesystem / "state"
    a.args[a.args.index("--state-dir") + 1] = str(a.state)
    try:
        a.start()
        mc, got = await mobile(a.url)
        await mc.move_out()
        total = 1500
        pub = await connect(a.url)
        for seq in range(total):
            await pub.send({"Producer": "p", "Seq": seq, "Body": "y" * 1000})
            if seq % 100 == 99:
                await pub.set_keys()          # acknowledged: on disk or counted
        await pub.set_keys()
        await pub.close()
        await until(lambda: "the disk is full" in a.logged(), what="the full disk")
        a.kill()
        a.start()
        report = await mc.move_in(a.url)
        lost, reported = lost_and_reported(got, total, report)
        assert lost > 0, "the disk never filled: the test proves nothing"
        assert lost == reported, f"lost {lost}, reported {reported}"
        await mc.close()
    finally:
        a.stop()


def _store_with_commits(path, commits: int) -> MobilityStore:
    store = MobilityStore.open(path)
    store._checkpointer.stop()        # every commit stays in the WAL
    store.add_client(StoredClient(1, "c", "s" * 20, 1000, 60.0, 0.0, 1e12, 0, b""))
    assert store.commit()
    for k in range(commits):
        store.append(1, [(k, b"n%d" % k)])
        assert store.commit()
    return store


def test_a_torn_wal_is_counted_as_lost(tmp_path):
    """The files as a SIGKILL leaves them (copied while the store is open),
    then a byte of the WAL changed near its end: SQLite drops the frames
    from there on without a word; the ledger shows they existed."""
    live, torn = tmp_path / "live", tmp_path / "torn"
    live.mkdir()
    torn.mkdir(mode=0o700)
    store = _store_with_commits(live, 40)
    for name in (FILE_NAME, FILE_NAME + "-wal", LEDGER_NAME):
        shutil.copy(live / name, torn / name)
    store.close()
    wal = bytearray((torn / (FILE_NAME + "-wal")).read_bytes())
    wal[len(wal) * 3 // 4] ^= 0xFF
    (torn / (FILE_NAME + "-wal")).write_bytes(bytes(wal))
    again = MobilityStore.open(torn)
    try:
        [client] = again.clients()
        kept = [e for chunk in iter_entries(again, 1) for e in chunk]
        assert 0 < len(kept) < 40, "the tear dropped nothing: the test proves nothing"
        assert kept == [(k, b"n%d" % k) for k in range(len(kept))]
        next_seq, dropped, lost = again.account(client, len(kept), kept[-1][0])
        assert (next_seq, dropped, lost) == (40, 40 - len(kept), 40 - len(kept))
    finally:
        again.close()


async def test_changed_bytes_in_a_stored_notification_are_never_delivered(elvind):
    """The issue's case: a byte changed inside a stored notification, its
    length prefixes intact. The router starts; that row's notifications are
    not delivered (no wrong values) and are reported as dropped."""
    a = elvind().start()
    mc, got = await mobile(a.url)
    await mc.move_out()
    await publish(a.url, range(40), each=True)     # one row each
    a.stop()
    db = sqlite3.connect(a.state / FILE_NAME)
    with db:
        rowid, data = db.execute("SELECT rowid, data FROM entries ORDER BY seq "
                                 "LIMIT 1 OFFSET 10").fetchone()
        changed = bytearray(data)
        changed[-1] ^= 0x01                         # inside the last value
        db.execute("UPDATE entries SET data = ? WHERE rowid = ?", (bytes(changed), rowid))
    db.close()
    a.start()
    report = await mc.move_in(a.url)
    assert report.dropped == 1
    assert sorted(got.seen) == [s for s in range(40) if s != 10]
    assert all(n == 1 for n in got.seen.values())
    assert "damaged" in a.logged() and "seq 10" in a.logged()
    await mc.close()


async def test_a_full_disk_shows_in_the_status_and_the_metrics(router, tmp_path):
    store = MobilityStore.open(tmp_path, max_pages=40)
    async with MobilityProxy(router.url, ProxyConfig(id="p"), store=store) as proxy:
        assert proxy.storage()["state"] == "ok"
        mc = await MobileConnection.open(router.url, proxy="p")
        await mc.subscribe("require(Seq)")
        await mc.move_out()
        await publish(router.url, range(300), body="x" * 1000)
        await until(lambda: proxy.stats["disk_full"] > 0, what="the full disk")
        storage = proxy.storage()
        await until(lambda: proxy.storage()["dropped"] > 0, what="the oldest dropped")
        text = exposition({"mobility": {"clients_moved_out": 1, "buffered": 1,
                                        "storage": proxy.storage()}})
        assert "elvind_mobility_dropped" in text
        assert storage["state"] == "failing" and "full" in storage["error"]
        await mc.close()


async def test_the_status_counts_what_the_proxy_buffers(make_router):
    """The status (and the metrics' mobility_buffered) read an attribute
    the handlers never had: always 0."""
    from elvin.router.status import router_status

    router = make_router(mobility=True)
    mc = await MobileConnection.open(router.url)
    await mc.subscribe("require(Seq)")
    await mc.move_out()
    await publish(router.url, range(7))
    proxy = router.router.mobility
    await until(lambda: proxy.handlers[mc.client_id].buffered == 7)
    status = router.call(lambda: router_status(router.router))
    assert status["mobility"]["buffered"] == 7
    assert status["mobility"]["storage"] == {"state": "memory", "error": None, "dropped": 0}
    await mc.move_in(router.url)
    await mc.close()
