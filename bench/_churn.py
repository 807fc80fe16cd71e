"""Memory under churn for ``bench/router.py --churn`` (not a bench itself).

Whatever the router replaces or forgets must be given back: a modified
subscription's code, an unsubscribed one, a closed client's, a session-less
(UNotify) channel, a federated peer's replaced pull filter. Each scenario
runs against a fresh ``elvind`` (its own process, its real GC policy) and
prints the router's RSS as the churn goes on, and the growth from the first
checkpoint to the last (a leak grows with the churn; a router that gives
memory back stays flat after warming up).

* ``modify``: 2,000 subscriptions with 6 literals each, then 40,000
  SubModRqst that change their constants (10,000 at each checkpoint);
* ``unsubscribe``: 40,000 subscriptions added and removed again, 2,000 at a
  time;
* ``reconnect``: 4,000 clients that connect, subscribe 10 times and hang up;
* ``unotify``: 20,000 session-less channels that each send one UNotify;
* ``fed-replace``: a federated peer replaces its pull filter (50 terms of 6
  literals) 400 times.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from _common import free_port, open_peer, stop_processes
from _registration import connect_counter, register, rss_bytes, start_router

from elvin.protocol import (
    SubAddRqst,
    SubDelRqst,
    SubModRqst,
    UNotify,
    frame,
)

CHECKPOINTS = 4


def six_literals(i: int, round_: int) -> str:
    return (f'Group == "g{i}-{round_}" && Seq > {round_} && Seq < {round_ + 1000} && '
            f'Host == "h{i}" && Size != {i} && User == "u{round_}"')


async def _pipelined(peer, packets: list, expected: int) -> None:
    """Write ``packets`` at once; wait for ``expected`` replies (SubRply/Nack)."""
    peer.done.clear()
    peer.expected += expected
    peer.transport.write(b"".join(frame(p) for p in packets))
    await asyncio.wait_for(peer.done.wait(), 600)
    if peer.nacks:
        raise SystemExit(f"the router refused requests: {peer.nack_sample}")


async def _modify(port: int, pid: int, checkpoint: Callable[[], None]) -> None:
    subs = 2000
    peer = await connect_counter(port, {"Subscription.Max-Count": subs + 16})
    await register([peer], [b"".join(frame(SubAddRqst(10 + i, six_literals(i, 0)))
                                     for i in range(subs))], [subs], 600)
    ids = list(range(1, subs + 1))      # a fresh router numbers them from 1
    xid = 100_000
    for _ in range(CHECKPOINTS):
        for round_ in range(5):         # 5 x 2,000 = 10,000 modifications
            packets = []
            for i, sub_id in enumerate(ids):
                xid += 1
                packets.append(SubModRqst(xid, sub_id, six_literals(i, xid)))
            await _pipelined(peer, packets, len(packets))
            del round_
        checkpoint()
    peer.transport.close()


async def _unsubscribe(port: int, pid: int, checkpoint: Callable[[], None]) -> None:
    batch = 2000
    peer = await connect_counter(port, {"Subscription.Max-Count": batch + 16})
    xid = 10
    next_id = 1
    for _ in range(CHECKPOINTS):
        for _round in range(5):         # 5 x 2,000 = 10,000 added and removed
            adds = []
            for i in range(batch):
                xid += 1
                adds.append(SubAddRqst(xid, six_literals(i, xid)))
            await _pipelined(peer, adds, batch)
            dels = []
            for sub_id in range(next_id, next_id + batch):
                xid += 1
                dels.append(SubDelRqst(xid, sub_id))
            next_id += batch
            await _pipelined(peer, dels, batch)
        checkpoint()
    peer.transport.close()


async def _reconnect(port: int, pid: int, checkpoint: Callable[[], None]) -> None:
    per_round = 1000
    for c in range(CHECKPOINTS):
        for i in range(per_round):
            peer = await connect_counter(port)
            await _pipelined(peer, [SubAddRqst(10 + j, six_literals(j, c * per_round + i))
                                    for j in range(10)], 10)
            peer.transport.close()
        await _settled(port)
        checkpoint()


async def _unotify(port: int, pid: int, checkpoint: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    note = frame(UNotify(4, 0, {"Probe": 1, "Text": "x" * 100}))
    for _ in range(CHECKPOINTS):
        for _i in range(5000):
            transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
            transport.write(note)
            transport.close()
        await _settled(port)
        checkpoint()


async def _fed_replace(port: int, pid: int, checkpoint: Callable[[], None]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from integration.federation_util import RawFederator  # type: ignore[import-not-found]

    from elvin.federation.packets import Ack, FedSubReplace
    from elvin.protocol import Nack
    from elvin.subscription import parse

    peer = await RawFederator.linked(f"ewaf://127.0.0.1:{_FED_PORT}", "churn-peer")
    xid = 100
    for _ in range(CHECKPOINTS):
        for _i in range(100):
            xid += 1
            pull = parse(" || ".join(f"({six_literals(t, xid)})" for t in range(50)))
            peer.send(FedSubReplace(xid, pull))
            while True:
                answer = await peer.next(300)
                if isinstance(answer, FedSubReplace):    # the router's own: answer it,
                    peer.send(Ack(answer.xid))          # or it closes the link
                elif isinstance(answer, (Ack, Nack)) and answer.xid == xid:
                    break
        checkpoint()
    await peer.close()


async def _settled(port: int) -> None:
    """A round trip on a fresh connection: what was sent before is handled."""
    probe = await open_peer(port)
    await probe.request(SubAddRqst(2, "require(Settled)"))
    probe.transport.close()


_FED_PORT = 0

SCENARIOS: dict[str, Callable[[int, int, Callable[[], None]], Awaitable[None]]] = {
    "modify": _modify, "unsubscribe": _unsubscribe, "reconnect": _reconnect,
    "unotify": _unotify, "fed-replace": _fed_replace,
}


def run_churn(names: list[str]) -> None:
    global _FED_PORT
    print(f"== memory under churn (elvind RSS at each quarter of the churn); "
          f"load {os.getloadavg()[0]:.2f}")
    for name in names:
        port = free_port()
        if name == "fed-replace":
            _FED_PORT = free_port()
            proc = start_router(port, "--federation-listen", f"ewaf://127.0.0.1:{_FED_PORT}",
                                "--federation-domain", "bench", "--federation-accept-any")
        else:
            proc = start_router(port)
        figures: list[int] = []

        def checkpoint(pid: int = proc.pid, figures: list[int] = figures) -> None:
            figures.append(rss_bytes(pid))

        try:
            start = rss_bytes(proc.pid)
            asyncio.run(SCENARIOS[name](port, proc.pid, checkpoint))
        finally:
            stop_processes([proc])
        shown = "  ".join(f"{f / 2**20:6.0f}" for f in figures)
        growth = (figures[-1] - figures[0]) / figures[0] * 100 if figures else float("nan")
        print(f"{name:<12} RSS MB: start {start / 2**20:4.0f}  {shown}   "
              f"last vs first checkpoint {growth:+.0f}%")
