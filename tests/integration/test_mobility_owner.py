"""The owner proof (``Mobility.Owner``): a buffer its client lost track of
(its secret fell out of the ones the client keeps, a ticket it gave up, a
program restarted with the same client id) no longer locks that client out
of the proxy with ``in-use`` until the buffer expires (mobility chaos: one
client refused 3,076 times over 26 minutes). Only the client's own proof for
that proxy replaces it; what the replaced buffer held is counted and logged."""

from __future__ import annotations

import secrets
import sqlite3

import pytest

from elvin.client import connect
from elvin.mobility import MobileConnection, MobilityError
from elvin.mobility import protocol as P
from elvin.mobility.client import request_move_in, request_move_out
from elvin.mobility.exchange import exchange, hello
from elvin.mobility.store import FILE_NAME, MobilityStore, StoredClient
from tests.waiting import until

from .test_mobility import proxy_of
from .test_mobility_crash import Counted, publish
from .test_mobility_crash import elvind as elvind


async def test_only_the_clients_own_proof_replaces_a_buffer_it_lost_the_secret_of(
        make_router, caplog):
    router = make_router(mobility=True)
    proxy = proxy_of(router)
    owner, stranger = secrets.token_bytes(32), secrets.token_bytes(32)
    conn = await connect(router.url)
    try:
        wanted = [P.SubscriptionSpec(1, 'Producer == "p"')]
        first = await request_move_out(conn, wanted, client_id="c", owner_key=owner,
                                       secret="first-secret-0123456789")
        await publish(router.url, range(3))
        await until(lambda: proxy.handlers["c"].buffered == 3, what="three buffered")
        again = dict(client_id="c", secret="second-secret-0123456789")
        for key in (None, stranger):                       # no proof, or another's
            with pytest.raises(MobilityError) as info:
                await request_move_out(conn, [], owner_key=key, **again)
            assert info.value.code == "in-use"
        # the proof made for another proxy is worth nothing here
        request = {P.REQUEST: P.MOVE_OUT, P.PROXY: proxy.id, P.CLIENT: "c",
                   P.SUBSCRIPTIONS: "[]", P.SECRET: "third-secret-0123456789",
                   P.OWNER: P.owner_proof(owner, "elvin://127.0.0.1:1")}
        with pytest.raises(MobilityError) as info:
            await exchange(conn, request, 5, to_key=await hello(conn, proxy.id, 5))
        assert info.value.code == "in-use"
        assert proxy.handlers["c"].buffered == 3 and proxy.stats["replaced_unclaimed"] == 0
        second = await request_move_out(conn, [], owner_key=owner, **again)
        assert proxy.stats["replaced_unclaimed"] == 1
        assert proxy.stats["replaced_unclaimed_held"] == 3
        assert "3 notifications it held are gone" in caplog.text
        with pytest.raises(MobilityError) as info:       # the old ticket is void
            await request_move_in(conn, first, timeout=5)
        assert info.value.code == "bad-secret"
        entries, reply = await request_move_in(conn, second, timeout=5)
        assert entries == [] and reply.count == 0
    finally:
        await conn.close()


async def test_a_program_restarted_with_its_id_and_owner_key_moves_out_again(elvind):
    """The proof is on disk with the buffer: after the router's SIGKILL and
    restart, the restored buffer is replaced by the same client (a program
    that keeps its client id and owner key), not by another with that id."""
    a = elvind().start()
    owner = secrets.token_bytes(32)
    before = await MobileConnection.open(a.url, client_id="kept", owner_key=owner, timeout=5)
    await before.subscribe('Producer == "p"')
    await before.move_out()
    await before.close()                 # the program ends with its buffer left behind
    await publish(a.url, range(5))
    a.kill()
    a.start()
    impostor = await MobileConnection.open(a.url, client_id="kept", timeout=5)
    after = await MobileConnection.open(a.url, client_id="kept", owner_key=owner, timeout=5)
    got = Counted(after)
    try:
        await impostor.subscribe('Producer == "p"')
        with pytest.raises(MobilityError) as info:
            await impostor.move_out()
        assert info.value.code == "in-use"
        await after.subscribe('Producer == "p"')
        await after.move_out()
        await publish(a.url, range(5, 8))
        report = await after.move_in(a.url)
        assert report.caught_up == 3
        got.exactly(range(5, 8))
    finally:
        await impostor.close()
        await after.close()


def test_a_layout_3_state_file_is_upgraded_and_its_rows_still_check(tmp_path):
    store = MobilityStore.open(tmp_path)
    store.add_client(StoredClient(1, "c", "s" * 20, 10, 60.0, 0.0, 1e12, 0, b""))
    store.add_client(StoredClient(2, "d", "t" * 20, 10, 60.0, 0.0, 1e12, 0, b"",
                                  owner="proof"))
    assert store.commit()
    store.close()
    db = sqlite3.connect(tmp_path / FILE_NAME)
    db.execute("DELETE FROM clients WHERE handle = 2")      # layout 3 had no proof
    db.execute("ALTER TABLE clients DROP COLUMN owner")
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    store = MobilityStore.open(tmp_path)
    try:
        [row] = store.clients()
        assert (row.client_id, row.owner) == ("c", "")
        store.add_client(StoredClient(3, "d", "t" * 20, 10, 60.0, 0.0, 1e12, 0, b"",
                                      owner="proof"))
        assert store.commit()
    finally:
        store.close()
    store = MobilityStore.open(tmp_path)
    try:
        assert {(c.client_id, c.owner) for c in store.clients()} == {("c", ""), ("d", "proof")}
        assert sqlite3.connect(tmp_path / FILE_NAME).execute(
            "PRAGMA user_version").fetchone()[0] == 4
    finally:
        store.close()


def test_an_owner_key_too_short_is_refused_at_once():
    with pytest.raises(ValueError, match="owner_key"):
        MobileConnection(None, owner_key=b"short")


async def test_a_malformed_owner_proof_is_refused_naming_it(make_router):
    router = make_router(mobility=True)
    proxy = proxy_of(router)
    conn = await connect(router.url)
    try:
        key = await hello(conn, proxy.id, 5)
        for bad in (7, b"bytes", "x" * (P.MAX_OWNER_LENGTH + 1), "guessable"):
            request = {P.REQUEST: P.MOVE_OUT, P.PROXY: proxy.id, P.CLIENT: "c",
                       P.SUBSCRIPTIONS: "[]", P.OWNER: bad}
            with pytest.raises(MobilityError) as info:
                await exchange(conn, request, 5, to_key=key)
            assert info.value.code == "malformed" and P.OWNER in str(info.value), bad
        assert "c" not in proxy.handlers                  # nothing made
        await request_move_out(conn, [], client_id="c", owner_key=b"k" * 16)   # still works
    finally:
        await conn.close()
