"""What a client leaves behind never costs anyone else (real router, real
sockets): a compile whose client hung up is cancelled, queued or running; a
TestConn is answered while the client's own compile runs; a violation found
after good packets lets them take effect first."""

from __future__ import annotations

import asyncio
import itertools
import sys

import pytest

from elvin.protocol import (
    ConfConn,
    ConnRqst,
    Disconn,
    NotifyDeliver,
    SubAddRqst,
    SubRply,
    TestConn,
    frame,
)
from elvin.router.cli import SWITCH_INTERVAL
from elvin.router.options import DEFAULT_RANGES
from tests.waiting import until

from .compile_hold import hold_compiles
from .rawclient import RawClient

MAX_LENGTH = DEFAULT_RANGES.ints["Subscription.Max-Length"][2]
DEFAULT_LENGTH = DEFAULT_RANGES.ints["Subscription.Max-Length"][1]


@pytest.fixture(autouse=True)
def elvind_switch_interval():
    """The embedded router runs as elvind does: elvind sets Python's thread
    switch interval to 1 ms, so that the loop gets the interpreter back from
    a compiling worker within a millisecond. The tests that race a compile
    against a hang-up or a TestConn hold the compile on its worker
    (``compile_hold``), so their order does not depend on it."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    yield
    sys.setswitchinterval(before)


def costly_expression(limit: int, tag: str) -> str:
    """An OR of two-test terms, nearly ``limit`` characters: a real compile
    (milliseconds at 8 KiB, a tenth of a second or more at 256 KiB)."""
    terms = []
    size = 0
    for n in itertools.count():
        term = f'(Group == "{tag}-{n:05d}" && Seq > {n})'
        if size + len(term) + 4 > limit - 16:
            break
        terms.append(term)
        size += len(term) + 4
    return " || ".join(terms)


async def hang_up_after_subscribing(port: int, expression: str, options: dict) -> None:
    """ConnRqst and a SubAddRqst in one write, then close at once."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(ConnRqst(1, 4, 0, options)) + frame(SubAddRqst(2, expression)))
    await writer.drain()
    writer.close()


def counts(router) -> tuple[int, int, int]:
    """(submitted, finished, stopped while running) compile jobs."""
    c = router.call(lambda: router.router.compile_workers.counts)
    return c.submitted, c.finished, c.stopped


def workers_busy(router) -> bool:
    return router.call(lambda: router.router.compile_workers.busy)


def hold_costly_compiles(monkeypatch):
    """Hold the compiles of ``costly_expression``s (not the short ones) on
    their worker until the returned event is set."""
    return hold_compiles(monkeypatch, longer_than=1000)


async def _hung_up_compiles_are_cancelled(router, monkeypatch, limit: int,
                                          options: dict) -> None:
    release = hold_costly_compiles(monkeypatch)
    fresh = await RawClient.connected(router.port)
    clients = 20
    try:
        for i in range(clients):
            await hang_up_after_subscribing(router.port, costly_expression(limit, f"h{i}"),
                                            options)
        await until(lambda: counts(router)[0] >= 1, what="the first compile to start")
        # every session is gone (its compile cancelled, queued or held on the worker)
        await until(lambda: router.call(lambda: len(router.router.sessions)) == 1,
                    what="the hung-up sessions to be released", timeout=30)
    finally:
        release.set()
    reply = await fresh.request(SubAddRqst(fresh.xid(), 'Group == "fresh" && Seq > 1'))
    assert isinstance(reply, SubRply)
    await until(lambda: not workers_busy(router), what="the workers to settle", timeout=60)
    submitted, finished, stopped = counts(router)
    # none finishes: those queued never start (cancelled while queued), the
    # one held on each lane stops at its first checkpoint. Without
    # cancellation all of them finish.
    assert finished == 0, (submitted, finished, stopped)
    assert router.call(lambda: len(router.router.engine)) == 1     # the fresh one


async def test_compiles_of_clients_that_hung_up_are_cancelled(router, monkeypatch):
    await _hung_up_compiles_are_cancelled(router, monkeypatch, DEFAULT_LENGTH, {})


async def test_long_compiles_of_clients_that_hung_up_are_cancelled(router, monkeypatch):
    await _hung_up_compiles_are_cancelled(
        router, monkeypatch, MAX_LENGTH, {"Subscription.Max-Length": MAX_LENGTH})


async def test_a_running_compile_stops_when_its_client_hangs_up(router, monkeypatch):
    """The worker stops a 256 KiB compile at its next checkpoint, not after
    the time it takes (the job is held until the hang-up has been read, so
    that a fast machine cannot finish it first)."""
    release = hold_costly_compiles(monkeypatch)
    client = await RawClient.connected(router.port, {"Subscription.Max-Length": MAX_LENGTH})
    try:
        client.send(SubAddRqst(client.xid(), costly_expression(MAX_LENGTH, "run")))
        await client.drain()
        await until(lambda: counts(router)[0] == 1, what="the compile to start")
        client.writer.close()
        await until(lambda: router.call(lambda: len(router.router.sessions)) == 0,
                    what="the session to be released")
    finally:
        release.set()
    await until(lambda: counts(router)[2] == 1, what="the compile to stop", timeout=60)
    assert counts(router)[1] == 0
    assert router.call(lambda: len(router.router.engine)) == 0


async def test_testconn_is_answered_while_the_clients_own_compile_runs(router, monkeypatch):
    """ConfConn comes before the SubRply of the expression sent before the
    TestConn: liveness does not wait for work (a client with a short
    keepalive must not take the router for dead). The compile is held until
    the ConfConn is in, however fast this machine compiles."""
    release = hold_costly_compiles(monkeypatch)
    client = await RawClient.connected(router.port, {"Subscription.Max-Length": MAX_LENGTH})
    xid = client.xid()
    try:
        client.send(SubAddRqst(xid, costly_expression(200 * 1024, "live")))
        await client.drain()
        await until(lambda: counts(router)[0] == 1, what="the compile to start")
        client.send(TestConn())
        first = await client.next(timeout=60)
        assert isinstance(first, ConfConn), first
    finally:
        release.set()
    reply = await client.next(timeout=120)
    assert isinstance(reply, SubRply) and reply.xid == xid


async def test_packets_sent_during_a_compile_take_effect_in_order(router, monkeypatch):
    """Reading goes on while a compile runs (for TestConn), yet what the
    client sent after the expression still waits for it: a notification it
    sent after subscribing reaches that subscription."""
    release = hold_costly_compiles(monkeypatch)
    client = await RawClient.connected(router.port, {"Subscription.Max-Length": MAX_LENGTH})
    expression = costly_expression(64 * 1024, "order") + " || require(Probe)"
    xid = client.xid()
    try:
        client.send(SubAddRqst(xid, expression))
        client.notify({"Probe": 1})
        client.send(TestConn())
        await client.drain()
        got = [await client.next(timeout=60)]
    finally:
        release.set()
    got += [await client.next(timeout=60) for _ in range(2)]
    assert [type(p) for p in got] == [ConfConn, SubRply, NotifyDeliver], got
    assert got[1].xid == xid


async def test_a_bad_frame_after_good_packets_during_a_compile(router):
    """The packets before a framing error take effect (in order, after the
    compile) before the session is closed for the violation."""
    client = await RawClient.connected(router.port, {"Subscription.Max-Length": MAX_LENGTH})
    first, second = client.xid(), client.xid()
    client.send(SubAddRqst(first, costly_expression(64 * 1024, "bad")))
    client.send(SubAddRqst(second, "require(After)"))
    client.send_raw(b"\xff\xff\xff\xf0garbage")
    packets = await client.closed_by_router(timeout=60)
    replies = [p for p in packets if isinstance(p, SubRply)]
    assert [r.xid for r in replies] == [first, second], packets
    assert isinstance(packets[-1], Disconn)
