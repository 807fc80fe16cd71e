"""The mobility proxy's buffers on disk when things go wrong: a stop or a
crash in the middle of deleting a released buffer, a buffer emptied by a
full disk, writes that fail (a locked file, a full file system) and come
back, rows damaged inside a valid SQLite file, and a proxy that is stopped
while it still has work scheduled. Real routers, real SQLite files; the
crashes are SIGKILLs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elvin.daemon.statedir import StateError
from elvin.mobility import MobileConnection, MobilityError, MobilityProxy, ProxyConfig
from elvin.mobility.proxy import PURGE_PAUSE
from elvin.mobility.store import (
    FILE_NAME,
    PURGE_SLICE,
    MobilityStore,
    StoredClient,
    iter_entries,
)
from tests.waiting import until, wait_until

from .test_mobility_crash import Counted, mobile, publish
from .test_mobility_crash import elvind as elvind
from .test_mobility_state import refused, run_elvind
from .test_mobility_state import small_filesystem as small_filesystem


def query(path, sql: str, *args):
    """One query on the state file, from a connection of the test's own
    (WAL: it reads what the proxy committed, while the proxy runs)."""
    db = sqlite3.connect(path)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def stored_entries(store: MobilityStore, handle: int) -> list[tuple[int, bytes]]:
    return [entry for chunk in iter_entries(store, handle) for entry in chunk]


async def round_trips(url: str, seqs) -> None:
    await publish(url, seqs, each=True)


@contextlib.asynccontextmanager
async def buffering(url: str, store: MobilityStore):
    """A proxy ``p`` on ``store`` buffering for one moved-out client:
    ``(proxy, its handler)``."""
    async with MobilityProxy(url, ProxyConfig(id="p"), store=store) as proxy:
        mc = await MobileConnection.open(url, proxy="p")
        try:
            await mc.subscribe("require(Seq)")
            await mc.move_out()
            yield proxy, proxy.handlers[mc.client_id]
        finally:
            await mc.close()


async def timers_run_out(delay: float) -> None:
    """Until the loop has run every timer due within ``delay`` seconds from
    now: ours fires after them (timers run in deadline order)."""
    done = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(delay, done.set_result, None)
    await done


# -- 1. a released buffer's handle is not handed out again while its rows remain ------
async def test_a_buffer_being_deleted_is_never_handed_to_the_next_client(elvind):
    """The router is killed just after a client released its buffer, the
    deletion of its rows cut short; the next client to move out must not
    inherit the handle (it would get the old rows, then lose its own)."""
    a = elvind().start(crash_at="mobility-released")
    path = a.state / FILE_NAME
    first, _ = await mobile(a.url)
    try:
        await first.move_out()
        [(old_handle,)] = query(path, "SELECT handle FROM clients")
        await round_trips(a.url, range(2 * PURGE_SLICE + 10))
        assert query(path, "SELECT count(*) FROM entries") > [(PURGE_SLICE,)]
        await first.move_in(a.url)        # its release kills the router, once committed
        a.wait_killed()
    finally:
        await first.close()
    assert query(path, "SELECT count(*) FROM clients") == [(0,)]
    assert query(path, "SELECT count(*) FROM entries WHERE handle = ?", old_handle) > [(0,)]

    a.start()
    second, got = await mobile(a.url)
    try:
        await second.move_out()
        [(new_handle,)] = query(path, "SELECT handle FROM clients WHERE client = ?",
                                second.client_id)
        assert new_handle != old_handle
        await round_trips(a.url, range(1000, 1010))
        a.kill()
        a.start()
        report = await second.move_in(a.url)
        assert report.caught_up == 10 and report.dropped == 0
        got.exactly(range(1000, 1010))                 # its own, and nothing else
    finally:
        await second.close()


# -- 2. an emptied buffer goes on numbering from its floor -----------------------------
async def test_a_buffer_emptied_by_a_full_disk_keeps_what_comes_after_a_restart(router,
                                                                                tmp_path):
    config = ProxyConfig(id="p")
    mc = await MobileConnection.open(router.url, proxy="p")
    got = Counted(mc)
    await mc.subscribe("require(Seq)")
    try:
        async with MobilityProxy(router.url, config,
                                 store=MobilityStore.open(tmp_path)) as proxy:
            await mc.move_out()
            await round_trips(router.url, range(3))
            handler = proxy.handlers[mc.client_id]
            await until(lambda: handler.next_seq == 3 and not proxy.store.dirty)
            while handler.entries:         # what the store asks of a full disk
                assert proxy._disk_full()
            assert proxy.flush()
        async with MobilityProxy(router.url, config,
                                 store=MobilityStore.open(tmp_path)) as proxy:
            handler = proxy.handlers[mc.client_id]
            assert not handler.entries and handler.next_seq == 3
            await round_trips(router.url, range(3, 6))
            await until(lambda: handler.next_seq == 6 and not proxy.store.dirty)
        async with MobilityProxy(router.url, config, store=MobilityStore.open(tmp_path)):
            report = await mc.move_in(router.url)
            assert report.caught_up == 3 and report.dropped == 3
            got.exactly(range(3, 6))
    finally:
        await mc.close()


# -- 3. nothing runs after stop ---------------------------------------------------------
def released_buffer(path, rows: int) -> None:
    """A state file with a released buffer of ``rows`` rows still to delete."""
    store = MobilityStore.open(path)
    store.add_client(StoredClient(1, "gone", "s" * 20, 10, 60.0, 0.0, 1e12, 0, b""))
    for seq in range(rows):
        store.append(1, [(seq, b"x")])
    assert store.commit()
    store.remove_client(1)
    store.close()                # one slice deleted: the rest is for the next start


async def test_a_stopped_proxy_schedules_nothing_and_writes_nothing(router, tmp_path, caplog):
    released_buffer(tmp_path, PURGE_SLICE * 2000)
    store = MobilityStore.open(tmp_path)
    proxy = await MobilityProxy(router.url, ProxyConfig(id="p"), store=store).start()
    assert store.purging                     # deleted a slice per turn: far from done
    await proxy.stop()
    assert store.purging and proxy._flush_timer is None and proxy._flush_soon is None
    await timers_run_out(PURGE_PAUSE * 10)
    loop = asyncio.get_running_loop()
    assert not [timer for timer in loop._scheduled        # what the loop still has to run
                if not timer.cancelled() and timer._callback == proxy.flush]
    assert store.failures == 0 and proxy.stats["store_failures"] == 0
    assert not store.commit()                # closed: a no-op, no error
    assert "cannot write" not in caplog.text
    left = query(tmp_path / FILE_NAME, "SELECT count(*) FROM entries")[0][0]
    assert 0 < left < PURGE_SLICE * 2000     # the next start deletes the rest


# -- 4, 5. a write that fails is kept and tried again ----------------------------------
class Lock:
    """Another program holding the state file's write lock."""

    def __init__(self, path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("BEGIN EXCLUSIVE")

    def release(self) -> None:
        if self.db is not None:
            self.db.execute("ROLLBACK")
            self.db.close()
            self.db = None


def test_a_failed_write_keeps_the_queue_and_is_done_later(tmp_path, caplog):
    store = MobilityStore.open(tmp_path)
    store.add_client(StoredClient(1, "c", "s" * 20, 10, 60.0, 0.0, 1e12, 0, b""))
    assert store.commit()
    lock = Lock(tmp_path / FILE_NAME)
    try:
        store.append(1, [(0, b"first")])
        assert not store.commit() and store.dirty
        store.append(1, [(1, b"second")])
        assert not store.commit() and store.dirty      # in its back-off: not even tried
    finally:
        lock.release()
    wait_until(store.commit, what="the write after the back-off")
    assert stored_entries(store, 1) == [(0, b"first"), (1, b"second")]
    assert caplog.text.count("cannot write") == 1 and "written again" in caplog.text
    store.close()


async def test_the_proxy_writes_again_by_itself_when_the_file_is_free(router, tmp_path):
    store = MobilityStore.open(tmp_path)
    async with buffering(router.url, store) as (_proxy, handler):
        lock = Lock(tmp_path / FILE_NAME)
        try:
            await round_trips(router.url, range(5))
            await until(lambda: handler.next_seq == 5 and store.failures > 0)
        finally:
            lock.release()
        # nothing more arrives: the proxy tries again on its own
        await until(lambda: not store.dirty, what="the kept buffer written")
        assert stored_entries(store, handler.handle) == list(handler.entries)
        assert len(handler.entries) == 5


async def test_a_move_out_that_cannot_be_written_is_refused(router, tmp_path):
    store = MobilityStore.open(tmp_path)
    async with MobilityProxy(router.url, ProxyConfig(id="p"), store=store) as proxy:
        mc = await MobileConnection.open(router.url, proxy="p")
        got = Counted(mc)
        await mc.subscribe("require(Seq)")
        try:
            lock = Lock(tmp_path / FILE_NAME)
            try:
                with pytest.raises(MobilityError) as caught:
                    await mc.move_out()
            finally:
                lock.release()
            assert caught.value.code == "storage" and "try again" in str(caught.value)
            assert mc.state == "connected" and not proxy.handlers
            await round_trips(router.url, [0])          # still delivered live
            await until(lambda: 0 in got.seen)
            await until(lambda: store.retry_at < time.monotonic(), what="the store's back-off")
            await mc.move_out()                        # and it can move out later
            assert query(tmp_path / FILE_NAME, "SELECT client FROM clients") == [(mc.client_id,)]
        finally:
            await mc.close()


def fill(directory) -> None:
    """Fill the file system ``directory`` is on to the last byte."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


async def test_after_a_full_disk_the_proxy_writes_again_once_there_is_room(
        router, small_filesystem):
    state = small_filesystem / "state"
    state.mkdir()
    store = MobilityStore.open(state)
    async with buffering(router.url, store) as (_proxy, handler):
        query(state / FILE_NAME, "PRAGMA wal_checkpoint(TRUNCATE)")   # no WAL room left
        fill(small_filesystem)
        await publish(router.url, range(20), body="z" * 2000)
        await until(lambda: handler.next_seq == 20 and store.full_events > 0)
        assert store.dirty
        os.remove(small_filesystem / "filler")
        # nothing more arrives: the proxy tries again when its back-off ends
        await until(lambda: not store.dirty, what="the kept buffer written")
        assert stored_entries(store, handler.handle) == list(handler.entries)
        assert handler.entries


# -- 7. a full disk never checkpoints on the loop --------------------------------------
async def test_a_full_disk_hands_the_wal_back_off_the_loop(router, tmp_path):
    store = MobilityStore.open(tmp_path, max_pages=40)    # 160 KiB
    on_loop: list[str] = []
    store._db.set_trace_callback(on_loop.append)          # what the loop's connection runs
    async with buffering(router.url, store) as (_proxy, handler):
        await publish(router.url, range(300), body="x" * 1000)
        await until(lambda: handler.next_seq == 300)
        assert store.full_events > 0
        assert not [s for s in on_loop if "checkpoint" in s.lower()]
        await until(lambda: store._checkpointer.truncations > 0,
                    what="the checkpoint thread's truncation")


# -- 6. rows damaged inside a valid file -------------------------------------------------
def damaged(path, update: str) -> MobilityStore:
    store = MobilityStore.open(path)
    store.add_client(StoredClient(5, "c", "s" * 20, 10, 60.0, 0.0, 1e12, 0, b""))
    store.append(5, [(0, b"abc"), (1, b"defg")])
    store.append(5, [(2, b"h")])
    assert store.commit()
    store.close()
    with sqlite3.connect(path / FILE_NAME) as db:
        db.execute(update)
    return MobilityStore.open(path)


@pytest.mark.parametrize("update", [
    "UPDATE entries SET count = 3 WHERE seq = 0",                        # one entry short
    "UPDATE entries SET data = x'000000ff41' WHERE seq = 0",             # length beyond data
    "UPDATE entries SET data = x'0000' WHERE seq = 0",                   # truncated prefix
    "UPDATE entries SET count = 1 WHERE seq = 0",                        # bytes left over
    "UPDATE entries SET data = 'text' WHERE seq = 0",                    # not a blob
    "UPDATE entries SET count = -1 WHERE seq = 0",
    # the prefixes still match: only the checksum can tell
    "UPDATE entries SET data = x'00000003616264000000046465666a' WHERE seq = 0",
    "UPDATE entries SET seq = 7 WHERE seq = 0",                          # its key
    "UPDATE entries SET crc = crc + 1 WHERE seq = 0",
])
def test_a_damaged_row_is_never_delivered_and_counted_as_lost(tmp_path, update, caplog):
    store = damaged(tmp_path, update)
    try:
        assert stored_entries(store, 5) == [(2, b"h")]
        [client] = store.clients()
        assert store.account(client, 1, 2) == (3, 2, 2)      # next seq, dropped, lost
        assert "handle 5, buffered row at seq" in caplog.text and "damaged" in caplog.text
        assert store.commit()               # the row is deleted, the loss written
    finally:
        store.close()
    again = MobilityStore.open(tmp_path)
    try:
        assert stored_entries(again, 5) == [(2, b"h")]
        [client] = again.clients()
        assert again.account(client, 1, 2) == (3, 2, 0)      # counted once, not twice
    finally:
        again.close()


@pytest.mark.parametrize("update", [
    "UPDATE clients SET subscriptions = 'text'",
    "UPDATE clients SET quota = 'lots'",
    "UPDATE clients SET secret = x'00'",
    "UPDATE clients SET quota = 11",                # the right type: only the checksum
    "UPDATE clients SET secret = 't' || substr(secret, 2)",
    "UPDATE clients SET dropped = 1",
])
def test_a_damaged_client_row_is_refused_naming_the_file_and_the_row(tmp_path, update):
    store = damaged(tmp_path, update)
    try:
        with pytest.raises(StateError) as caught:
            store.clients()
        message = str(caught.value)
        for word in (str(tmp_path / FILE_NAME), "damaged", "handle 5", "--state-reset"):
            assert word in message, message
    finally:
        store.close()


def test_an_intact_file_reads_back_what_was_written(tmp_path):
    store = damaged(tmp_path, "UPDATE entries SET count = count")
    try:
        assert stored_entries(store, 5) == [(0, b"abc"), (1, b"defg"), (2, b"h")]
        assert [c.handle for c in store.clients()] == [5]
    finally:
        store.close()


def test_elvind_refuses_a_damaged_row_in_one_line(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    damaged(state, "UPDATE clients SET quota = 11").close()
    line = refused(run_elvind("--mobility", "--state-dir", str(state)),
                   str(state / FILE_NAME), "damaged", "handle 5", "checksum", "--state-reset")
    assert "Traceback" not in line


# -- 8. requests are answered only once everything is taken back ------------------------
async def test_requests_are_subscribed_to_after_the_buffers_are_restored(router, tmp_path):
    config = ProxyConfig(id="p")
    mc = await MobileConnection.open(router.url, proxy="p")
    await mc.subscribe("require(Seq)")
    try:
        async with MobilityProxy(router.url, config, store=MobilityStore.open(tmp_path)):
            await mc.move_out()
        async with MobilityProxy(router.url, config,
                                 store=MobilityStore.open(tmp_path)) as proxy:
            assert proxy.handlers and proxy._routes
            # the router numbers subscriptions in the order it takes them
            assert min(sub.id for sub in proxy._subs) > max(proxy._routes)
            await mc.move_in(router.url)
    finally:
        await mc.close()



def test_a_full_disk_keeps_the_newest_of_a_big_queued_row(tmp_path):
    """Dropping the oldest must shrink what is queued, not only what is in
    memory: one turn's row bigger than the room left keeps its newest."""
    store = MobilityStore.open(tmp_path, max_pages=40)     # 160 KiB
    store.add_client(StoredClient(1, "c", "s" * 20, 1000, 60.0, 0.0, 1e12, 0, b""))
    assert store.commit()
    kept = [(seq, b"x" * 1000) for seq in range(400)]    # one row of 400 KiB
    store.append(1, kept)

    def drop_oldest_quarter() -> bool:       # what the proxy does for it
        del kept[:max(1, len(kept) // 4)]
        store.trim(1, kept[0][0] if kept else 400, 400 - len(kept))
        return True

    store.on_full = drop_oldest_quarter
    wait_until(store.commit, what="the write once the oldest are dropped")
    assert kept and kept[-1][0] == 399
    assert stored_entries(store, 1) == kept
    store.close()


def test_the_standalone_proxy_refuses_a_damaged_row_in_one_line(router, tmp_path):
    damaged(tmp_path, "UPDATE clients SET expiry = 61.0").close()
    proxy = Path(sys.executable).with_name("elvin-mobility-proxy")
    result = subprocess.run([str(proxy), "-e", router.url, "--state-dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    line = refused(result, str(tmp_path / FILE_NAME), "damaged", "handle 5", "--state-reset")
    assert line.startswith("elvin-mobility-proxy: mobility state file"), line
