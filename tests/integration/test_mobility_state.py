"""The mobility proxy's state on disk (``elvind --state-dir``): written
before the router tells anyone it read a notification, quota and expiry
across a restart, state files the router cannot use (one line, exit 1, the
file left where it is unless ``--state-reset`` moves it aside), and a disk
that fills up."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time

import pytest

from elvin.client import connect
from elvin.mobility import MobileConnection, MobilityProxy, ProxyConfig
from elvin.mobility.store import FILE_NAME, MobilityStore
from tests.waiting import until

from .process_util import ELVIND, free_port, stop, wait_listening
from .test_mobility_crash import Counted, mobile, publish
from .test_mobility_crash import elvind as elvind


# -- the commit comes before any reply ---------------------------------------------------
class _Watched:
    """A session's transport that checks, at every write, that nothing routed
    to the mobility proxy is still on its way to the disk."""

    def __init__(self, transport, proxy, violations: list[str]) -> None:
        self._transport = transport
        self._proxy = proxy
        self._violations = violations
        self.writes = 0

    def write(self, data) -> None:
        self.writes += 1
        proxy = self._proxy
        local = proxy.channel.session.queue
        if len(local) or proxy._dirty or proxy.store.dirty:
            self._violations.append(f"write {self.writes}: proxy queue {len(local)}, "
                                    f"unsealed {len(proxy._dirty)}, "
                                    f"uncommitted {proxy.store.dirty}")
        self._transport.write(data)

    def __getattr__(self, name):
        return getattr(self._transport, name)


async def test_buffers_are_on_disk_before_the_router_writes_to_any_client(make_router,
                                                                         tmp_path):
    router = make_router(mobility=True, state_dir=str(tmp_path / "state"))
    proxy = router.router.mobility
    mc = await MobileConnection.open(router.url)
    await mc.subscribe("require(Seq)")
    await mc.move_out()
    pub = await connect(router.url)
    await pub.set_keys()
    violations: list[str] = []
    watched: list[_Watched] = []

    def watch() -> None:
        for session in router.router.sessions:
            if session is not proxy.channel.session and session.queue is not None:
                session.queue.transport = _Watched(session.queue.transport, proxy,
                                                   violations)
                watched.append(session.queue.transport)

    router.call(watch)
    try:
        for burst in range(20):
            for seq in range(burst * 10, burst * 10 + 10):
                await pub.send({"Seq": seq})
            await pub.set_keys()      # its reply is a write to the producer
        assert sum(w.writes for w in watched) >= 20
        assert not violations, violations[:5]
        def stored() -> int:
            with sqlite3.connect(tmp_path / "state" / FILE_NAME) as db:
                return db.execute("SELECT coalesce(sum(count), 0) FROM entries").fetchone()[0]

        assert stored() == 200
        report = await mc.move_in(router.url)
        assert report.caught_up == 200
        await until(lambda: stored() == 0, what="the released buffer deleted")
        assert not violations, violations[:5]
    finally:
        await pub.close()
        await mc.close()


# -- quota and expiry across a restart ---------------------------------------------------
async def test_quota_survives_a_restart(elvind):
    a = elvind(extra=["--mobility-quota", "50"]).start()
    mc, got = await mobile(a.url)
    try:
        await mc.move_out()
        await publish(a.url, range(30))
        a.kill()
        a.start()
        await publish(a.url, range(30, 80))
        report = await mc.move_in(a.url)
        assert report.caught_up == 50 and report.dropped == 30
        got.exactly(range(30, 80))        # the newest survive
    finally:
        await mc.close()


async def test_expiry_survives_a_restart(elvind):
    a = elvind(extra=["--mobility-expiry", "1.5"]).start()
    mc, got = await mobile(a.url)
    try:
        await mc.move_out()
        await publish(a.url, range(12))
        a.kill()
        deadline = time.time() + 1.6
        await until(lambda: time.time() > deadline, what="the buffer's expiry")
        a.start()
        report = await mc.move_in(a.url)
        assert report.expired and report.dropped == 12 and report.caught_up == 0
        assert not got.seen
    finally:
        await mc.close()


# -- files the router cannot use -----------------------------------------------------------
def run_elvind(*args: str) -> subprocess.CompletedProcess:
    port = free_port()
    return subprocess.run([*ELVIND, "--listen", f"elvin://127.0.0.1:{port}",
                           "--log-level", "warning", *args],
                          capture_output=True, text=True, timeout=60)


def refused(result: subprocess.CompletedProcess, *words: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1, result.stderr           # one line, no traceback
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_a_damaged_state_file_is_refused_and_kept(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    damaged = state / FILE_NAME
    damaged.write_bytes(b"this is not an SQLite file, it was truncated or overwritten\n" * 50)
    line = refused(run_elvind("--mobility", "--state-dir", str(state)),
                   str(damaged), "damaged", "--state-reset")
    assert "Traceback" not in line
    assert damaged.read_bytes().startswith(b"this is not")     # untouched


def test_state_reset_moves_the_damaged_file_aside(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / FILE_NAME).write_bytes(b"garbage" * 100)
    port = free_port()
    proc = subprocess.Popen([*ELVIND, "--listen", f"elvin://127.0.0.1:{port}", "--mobility",
                             "--state-dir", str(state), "--state-reset"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(port, proc)
    finally:
        stop(proc)
    kept = [p for p in state.iterdir() if p.name.startswith(f"{FILE_NAME}.reset-")]
    assert len(kept) == 1 and kept[0].read_bytes() == b"garbage" * 100
    assert "moved aside to" in proc.stderr.read()
    MobilityStore.open(state).close()        # and the new one is a good state file


def test_a_state_file_from_a_newer_version_is_refused(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    MobilityStore.open(state).close()
    with sqlite3.connect(state / FILE_NAME) as db:
        db.execute("PRAGMA user_version = 99")
    refused(run_elvind("--mobility", "--state-dir", str(state)),
            str(state / FILE_NAME), "newer version", "upgrade")


def test_another_programs_database_is_not_taken_over(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    with sqlite3.connect(state / FILE_NAME) as db:
        db.execute("CREATE TABLE accounts (name TEXT)")
    refused(run_elvind("--mobility", "--state-dir", str(state)), "not a mobility state file")


def test_a_state_file_locked_by_another_program(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    MobilityStore.open(state).close()
    holder = sqlite3.connect(state / FILE_NAME, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        refused(run_elvind("--mobility", "--state-dir", str(state)), "locked by another program")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_one_router_per_state_directory(tmp_path):
    state = tmp_path / "state"
    port = free_port()
    first = subprocess.Popen([*ELVIND, "--listen", f"elvin://127.0.0.1:{port}", "--mobility",
                              "--state-dir", str(state)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, first)
        refused(run_elvind("--mobility", "--state-dir", str(state)),
                "in use by another elvind", f"pid {first.pid}")
    finally:
        stop(first)


def test_a_state_directory_that_cannot_be_written(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    if os.geteuid() == 0:
        # root writes anywhere a mode allows nothing: a read-only file system
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs",
                                 str(state)], capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a read-only tmpfs here: {result.stderr.strip()}")
        hint = "Read-only file system"
    else:
        state.chmod(0o500)
        hint = "user elvind runs as"
    try:
        line = refused(run_elvind("--mobility", "--state-dir", str(state)), str(state), hint)
        assert "cannot write" in line
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", "-l", str(state)], capture_output=True)
        state.chmod(0o700)


def test_a_state_dir_that_is_a_file_or_reset_without_a_dir(tmp_path):
    plain = tmp_path / "file"
    plain.write_text("x")
    refused(run_elvind("--state-dir", str(plain)), "not a directory")
    refused(run_elvind("--state-reset"), "state-reset", "state-dir")


def test_without_a_state_dir_the_log_says_buffers_are_in_memory(tmp_path):
    port = free_port()
    proc = subprocess.Popen([*ELVIND, "--listen", f"elvin://127.0.0.1:{port}", "--mobility"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(port, proc)
    finally:
        stop(proc)
    assert "mobility buffers are in memory only" in proc.stderr.read()


# -- a full disk ------------------------------------------------------------------------
async def test_a_full_state_file_drops_the_oldest_and_says_so(router, tmp_path, caplog):
    """SQLite's page limit gives the same SQLITE_FULL as a full filesystem."""
    store = MobilityStore.open(tmp_path, max_pages=40)    # 160 KiB
    async with MobilityProxy(router.url, ProxyConfig(id="p"), store=store) as proxy:
        mc = await MobileConnection.open(router.url, proxy="p")
        got = Counted(mc)
        await mc.subscribe("require(Seq)")
        pub = await connect(router.url)
        try:
            await mc.move_out()
            for seq in range(400):
                await pub.send({"Producer": "p", "Seq": seq, "Body": "x" * 1000})
            await pub.set_keys()
            await until(lambda: proxy.handlers[mc.client_id].next_seq == 400)
            # the WAL's room first (handed back off the loop), then the oldest go
            await until(lambda: proxy.stats["dropped_disk_full"] > 0 and not store.dirty,
                        what="the oldest dropped to make room")
            assert proxy.stats["disk_full"] > 0
            assert "the disk is full: dropped the" in caplog.text
            report = await mc.move_in(router.url)
            assert report.dropped == proxy.stats["dropped_disk_full"]
            assert report.caught_up + report.dropped == 400
            assert 399 in got.seen and max(got.seen.values()) == 1
            kept = sorted(got.seen)
            assert kept == list(range(400 - len(kept), 400))     # the newest survive
        finally:
            await pub.close()
            await mc.close()


@pytest.fixture
def small_filesystem(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


async def test_a_full_filesystem_never_stops_the_router(small_filesystem, tmp_path):
    port = free_port()
    url = f"elvin://127.0.0.1:{port}"
    log = tmp_path / "elvind.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([*ELVIND, "--listen", url, "--mobility", "--state-dir",
                                 str(small_filesystem / "state")],
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_listening(port, proc)
        mc, got = await mobile(url)
        await mc.move_out()
        pub = await connect(url)
        for seq in range(1500):
            await pub.send({"Producer": "p", "Seq": seq, "Body": "y" * 1000})
            if seq % 100 == 99:
                await pub.set_keys()
        await pub.set_keys()
        await pub.close()
        assert proc.poll() is None
        # the store finds the disk full, keeps the buffer in memory, and drops
        # the oldest when its retry fails too: on a fast machine the move-in
        # could otherwise come first, with all 1,500 still in memory
        await until(lambda: "the disk is full: dropped the" in log.read_text(),
                    what="the router to drop the oldest to make room")
        report = await mc.move_in(url)
        assert report.caught_up + report.dropped == 1500 and report.dropped > 0
        assert 1499 in got.seen and max(got.seen.values()) == 1
        await mc.close()
    finally:
        stop(proc)
    assert proc.returncode == 0


def test_rows_of_a_client_that_is_gone_are_deleted_a_slice_at_a_time(tmp_path):
    """A crash while a released buffer was being deleted leaves rows without
    a client: the next start deletes them, a slice per commit."""
    from elvin.mobility.store import PURGE_SLICE, StoredClient

    store = MobilityStore.open(tmp_path)
    store.add_client(StoredClient(7, "c", "s" * 20, 10, 60.0, 0.0, 1e12, 0, b""))
    for seq in range(PURGE_SLICE * 3):
        store.append(7, [(seq, b"entry")])
    assert store.commit()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:      # as if the crash came here
        db.execute("DELETE FROM clients")
    store.close()
    store = MobilityStore.open(tmp_path)
    assert store.purging == {7} and store.dirty
    commits = 0
    while store.purging:
        assert store.commit()
        commits += 1
    assert commits >= 3
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
    store.close()
