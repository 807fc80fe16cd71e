"""Memory comes back: what the router replaces or forgets is freed.

(That a replaced pull filter, a modified subscription's code and a closed
session hold no reference cycle is checked exactly, object by object, in
``tests/unit/test_router_memory_cycles.py``; ``bench/router.py --churn``
prints the router's memory under every kind of churn.)

Each test runs a real ``elvind`` in a child process (with its own garbage-
collection policy, as in production) and reads its resident memory from
/proc after a warm-up and again after several times more of the same
churn: a router that gives memory back stays flat, one that keeps what it
replaced grows with the churn (about 12 KB per replaced predicate, a few KB
per closed channel, a whole engine per replaced pull filter)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from elvin.protocol import SubAddRqst, SubModRqst, SubRply, UNotify, frame

from .process_util import ELVIND, free_port, stop, wait_listening
from .rawclient import RawClient

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

#: growth allowed between the two readings: a share of the first, and a
#: little more for the allocator's arenas
SHARE, SLACK = 0.15, 3 * 2**20


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def many_literals(i: int, n: int) -> str:
    """More literals than the shape cache takes: compiled the ordinary way,
    each its own code (what leaked)."""
    return (f'Group == "g{i}-{n}" && Seq > {n} && Seq < {n + 100} && Host == "h{i}" && '
            f'Size != {i} && User == "u{n}" && (Kind == "k{n}" || Level >= {i}) && '
            f'!(Tag == "t{n}") && Zone == "z{i}" && Rack == "r{n}" && Slot < {n + 7} && '
            f'Port > {i}')


def elvind(*extra: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([*ELVIND, "--listen", f"elvin://127.0.0.1:{port}",
                             "--log-level", "warning", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_listening(port, proc)
    return proc, port


def assert_flat(first: int, last: int, what: str) -> None:
    assert last <= first * (1 + SHARE) + SLACK, (
        f"{what}: RSS {first / 2**20:.1f} MB -> {last / 2**20:.1f} MB")


@pytest.mark.timeout(240)        # 1,800 expressions to compile
async def test_modified_subscriptions_give_their_memory_back():
    proc, port = elvind()
    try:
        client = await RawClient.connected(port)
        subs = 200
        ids = [await client.subscribe(many_literals(i, 0)) for i in range(subs)]
        n = 0

        async def modify_all(rounds: int) -> None:
            nonlocal n
            for _ in range(rounds):
                xids = []
                for i, sub_id in enumerate(ids):
                    n += 1
                    xid = client.xid()
                    xids.append(xid)
                    client.send(SubModRqst(xid, sub_id, many_literals(i, n)))
                await client.drain()
                for xid in xids:
                    reply = await client.next(timeout=60)
                    assert isinstance(reply, SubRply) and reply.xid == xid, reply

        await modify_all(2)
        first = rss(proc.pid)
        await modify_all(6)             # three times the churn again
        assert_flat(first, rss(proc.pid), f"{n} modifications")
    finally:
        stop(proc)


async def test_sessionless_channels_give_their_memory_back():
    proc, port = elvind()
    note = frame(UNotify(4, 0, {"Probe": 1, "Text": "x" * 200}))

    async def channels(count: int) -> None:
        """``count`` channels, 500 open at a time (as long-lived as a health
        probe: alive while the router's collector runs), then closed."""
        for _ in range(count // 500):
            writers = []
            for _ in range(500):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(note)
                writers.append(writer)
            probe = await RawClient.connected(port)     # everything before it was read
            await probe.subscribe("require(Settled)")
            for writer in writers:
                writer.close()
            probe.writer.close()

    try:
        await channels(2000)
        first = rss(proc.pid)
        await channels(8000)
        assert_flat(first, rss(proc.pid), "10,000 UNotify channels")
    finally:
        stop(proc)


def test_the_churn_helpers_build_what_they_say():
    """(The expression really is beyond the shape cache's literal limit.)"""
    from elvin.subscription.shapes import MAX_LITERALS, tokenise

    tokens = tokenise(many_literals(1, 2))
    assert tokens is not None and len(tokens[3]) > MAX_LITERALS
    assert SubAddRqst(1, many_literals(1, 2)).expression
