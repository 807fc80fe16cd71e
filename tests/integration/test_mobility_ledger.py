"""A ledger (``mobility.ledger``) that cannot be written or is found
damaged, and damaged tombstones (#41): detected, said (the log and the
status name the file), and the proxy goes on serving from the database.
Real files: made read-only, truncated, bytes garbled; a seeded random
schedule of damage checks that nothing read back is ever a wrong value."""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import subprocess

import pytest

from elvin.mobility import MobileConnection, MobilityProxy, ProxyConfig
from elvin.mobility.ledger import LEDGER_NAME, Ledger
from elvin.mobility.store import FILE_NAME, MobilityStore, StoredClient, StoredTombstone
from elvin.router.metrics import exposition
from tests.waiting import until

from .test_mobility_crash import publish


@pytest.fixture
def read_only():
    """Make a file unwritable for this process: chmod, or (root ignores
    modes) a read-only bind mount of the file over itself."""
    mounted = []

    def make(path):
        if os.geteuid() != 0:
            path.chmod(0o400)
            return
        for args in (["mount", "--bind", str(path), str(path)],
                     ["mount", "-o", "remount,bind,ro", str(path)]):
            result = subprocess.run(args, capture_output=True, text=True)
            if result.returncode != 0:
                pytest.skip(f"cannot make a read-only bind mount: {result.stderr.strip()}")
            if not mounted:
                mounted.append(path)

    yield make
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


async def _move_out_and_publish(router, state, count):
    store = MobilityStore.open(state)
    async with MobilityProxy(router.url, ProxyConfig(id="p"), store=store):
        mc = await MobileConnection.open(router.url, proxy="p")
        got = []
        mc.add_listener(lambda n: got.append(n["Seq"]))
        await mc.subscribe("require(Seq)")
        await mc.move_out()
        await publish(router.url, range(count))
    return mc, got


async def test_an_unwritable_ledger_is_reported_and_the_proxy_serves(router, tmp_path,
                                                                     read_only, caplog):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    MobilityStore.open(state).close()
    read_only(state / LEDGER_NAME)
    caplog.set_level(logging.ERROR, "elvin.mobility")
    store = MobilityStore.open(state)            # no StateError: it starts
    assert not store.ledger.usable
    async with MobilityProxy(router.url, ProxyConfig(id="p"), store=store) as proxy:
        storage = proxy.storage()
        assert storage["state"] == "failing"
        assert str(state / LEDGER_NAME) in storage["error"]
        assert "elvind_mobility_storage_failing 1" in exposition(
            {"mobility": {"clients_moved_out": 0, "buffered": 0, "storage": storage}})
        mc = await MobileConnection.open(router.url, proxy="p")
        got = []
        mc.add_listener(lambda n: got.append(n["Seq"]))
        await mc.subscribe("require(Seq)")
        await mc.move_out()                      # served from the database
        await publish(router.url, range(30))
        report = await mc.move_in(router.url)
        assert sorted(got) == list(range(30)) and report.dropped == 0
        await mc.close()
    assert str(state / LEDGER_NAME) in caplog.text


DAMAGES = {
    "truncated": lambda path: os.truncate(path, 100),
    "header cut": lambda path: os.truncate(path, 5),
    "garbled slot": lambda path: _flip(path, 16 + 3),       # the first slot's handle
    "missing": lambda path: path.unlink(),
}


def _flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x5A]))


@pytest.mark.parametrize("damage", sorted(DAMAGES))
async def test_a_damaged_ledger_is_reported_and_the_buffer_still_served(router, tmp_path,
                                                                        damage, caplog):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    mc, got = await _move_out_and_publish(router, state, 40)
    DAMAGES[damage](state / LEDGER_NAME)
    caplog.set_level(logging.ERROR, "elvin.mobility")
    store = MobilityStore.open(state)
    async with MobilityProxy(router.url, ProxyConfig(id="p"), store=store) as proxy:
        [warning] = proxy.storage()["warnings"]
        assert str(state / LEDGER_NAME) in warning
        text = exposition({"mobility": {"storage": proxy.storage()}})
        assert "\nelvind_mobility_storage_damaged 1\n" in text, text
        assert proxy.storage()["state"] == "ok"      # written again from now on
        report = await mc.move_in(router.url)
        assert sorted(got) == list(range(40)) and report.dropped == 0
        await mc.close()
    assert str(state / LEDGER_NAME) in caplog.text
    (tmp_path / "clean").mkdir(mode=0o700)
    clean = MobilityStore.open(tmp_path / "clean")         # the same, undamaged: none
    try:
        text = exposition({"mobility": {
            "storage": MobilityProxy(router.url, ProxyConfig(id="q"), store=clean).storage()}})
        assert "\nelvind_mobility_storage_damaged 0\n" in text, text
    finally:
        clean.close()


def test_random_damage_to_the_ledger_never_reads_back_a_wrong_mark(tmp_path):
    """Property: whatever is done to the ledger's bytes (a seeded schedule
    of truncations and flipped bytes), opening it never fails, every mark
    it gives is the one written, and a mark it lost is said (``problem``)."""
    rng = random.Random(41)
    for trial in range(150):
        d = tmp_path / f"t{trial}"
        d.mkdir()
        ledger = Ledger.open(d)
        marks = {h: (rng.randrange(1, 10**6), rng.randrange(100))
                 for h in rng.sample(range(1, 5000), rng.randrange(1, 30))}
        for h, (seq, dropped) in marks.items():
            assert ledger.note(h, seq, dropped)
        ledger.close()
        path = d / LEDGER_NAME
        size = path.stat().st_size
        for _ in range(rng.randrange(1, 4)):
            if rng.random() < 0.2:
                os.truncate(path, rng.randrange(0, size))
                size = path.stat().st_size
            elif size:
                _flip(path, rng.randrange(0, min(size, 16 + 32 * 64)))
        again = Ledger.open(d)
        try:
            found = {h: again.mark(h) for h in marks}
            for h, mark in found.items():
                assert mark in (None, marks[h][0]), (trial, h)
            assert set(again.handles()) <= set(marks), trial
            if any(m is None for m in found.values()) and path.stat().st_size:
                assert again.problem is not None and str(path) in again.problem, trial
        finally:
            again.close()


def _stones(store):
    return {t.client_id: (t.secret, t.dropped, t.until) for t in store.tombstones()}


@pytest.mark.parametrize("change", [
    "UPDATE tombstones SET dropped = 99999 WHERE client = 'a'",
    "UPDATE tombstones SET secret = 'x' || substr(secret, 2) WHERE client = 'a'",
    "UPDATE tombstones SET until = until + 1 WHERE client = 'a'",
    "UPDATE tombstones SET dropped = 'seven' WHERE client = 'a'",
])
def test_a_damaged_tombstone_is_dropped_and_counted(tmp_path, change, caplog):
    store = MobilityStore.open(tmp_path)
    store.put_tombstone(StoredTombstone("a", "s" * 20, 7, 1e12))
    store.put_tombstone(StoredTombstone("b", "t" * 20, 3, 1e12))
    assert store.commit()
    store.close()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.execute(change)
    db.close()
    caplog.set_level(logging.ERROR, "elvin.mobility")
    store = MobilityStore.open(tmp_path)
    try:
        assert _stones(store) == {"b": ("t" * 20, 3, 1e12)}     # never a wrong count
        assert store.damaged_tombstones == 1
        assert "tombstone" in store.damaged_at_start and str(store.path) in caplog.text
        assert store.commit()                                  # and deleted
    finally:
        store.close()
    store = MobilityStore.open(tmp_path)
    try:
        assert _stones(store) == {"b": ("t" * 20, 3, 1e12)} and store.damaged_tombstones == 0
    finally:
        store.close()


def test_tombstones_of_a_layout_2_file_get_their_checksum(tmp_path):
    store = MobilityStore.open(tmp_path)
    store.add_client(StoredClient(1, "c", "s" * 20, 10, 60.0, 0.0, 1e12, 0, b""))
    store.put_tombstone(StoredTombstone("a", "s" * 20, 7, 1e12))
    assert store.commit()
    store.close()
    db = sqlite3.connect(tmp_path / FILE_NAME)
    db.execute("ALTER TABLE tombstones DROP COLUMN crc")
    db.execute("ALTER TABLE clients DROP COLUMN owner")        # layout 4's
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    store = MobilityStore.open(tmp_path)
    try:
        assert _stones(store) == {"a": ("s" * 20, 7, 1e12)} and store.damaged_tombstones == 0
        assert [c.client_id for c in store.clients()] == ["c"]
    finally:
        store.close()


async def test_a_ledger_that_can_be_opened_again_is_used_again(router, tmp_path, read_only):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    MobilityStore.open(state).close()
    read_only(state / LEDGER_NAME)
    store = MobilityStore.open(state)
    assert not store.ledger.usable
    if os.geteuid() == 0:
        subprocess.run(["umount", "-l", str(state / LEDGER_NAME)], check=True)
    else:
        (state / LEDGER_NAME).chmod(0o600)
    async with MobilityProxy(router.url, ProxyConfig(id="p"), store=store) as proxy:
        mc = await MobileConnection.open(router.url, proxy="p")
        await mc.subscribe("require(Seq)")
        await mc.move_out()                   # a commit: the ledger is tried again
        await publish(router.url, range(5))
        await until(lambda: proxy.storage()["state"] == "ok", what="the ledger used again")
        [handle] = [h.handle for h in proxy.handlers.values()]
        await until(lambda: store.ledger.mark(handle) == 5, what="the mark written")
        await mc.move_in(router.url)
        await mc.close()
