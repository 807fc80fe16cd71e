"""Router: what is left after subscribing and at once unsubscribing (issue 42).

    .venv/bin/python bench/unsubscribe_memory.py [--count N] [--batch B]

Two runs per workload (``literals``: one shape, literals varying; ``shapes``:
names, operators and functions varying too, each text its own shape):

* a real ``elvind``: its RSS at start, at the peak (``--batch`` subscriptions
  held at once, then unsubscribed, until ``--count``), right after the last
  unsubscribe and once its garbage-collection policy had a few seconds;
* the same churn against an embedded router (``--where`` picks one) in this process with elvind's
  policy installed, to say what holds the rest: allocated blocks (pymalloc's
  count of live objects) left by the policy, then those a full collection
  of everything (frozen included) would still free (dead cycles the policy
  has not reclaimed), the shape cache's and compiled-pattern cache's
  estimated bytes and the blocks they hold (measured by clearing them), and
  what is left beyond the start. RSS beyond those is free memory the
  allocators keep (arenas pinned by a few live objects; ``malloc_trim``,
  which the policy calls after a large reclaim, gives back the rest).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import free_port, open_peer, start_elvind, stop_processes, wait_listening
from _registration import rss_bytes

from elvin.keys import EMPTY_KEYS
from elvin.protocol import SubAddRqst, SubDelRqst, SubRply, frame

MiB = 2**20


def text(workload: str, i: int) -> str:
    if workload == "literals":
        return f'Group == "g{i}" && require(Message)'
    return (f'A{i} == "v{i}" && require(M{i % 97})',
            f'begins-with(S{i}, "t{i}") || N{i} > {i}',
            f'Price{i} * 2 > {i} && Volume - 10 <= {i * 3}',
            f'fold-case(U{i}) == "p{i}" || H{i % 13} == "h{i}"',
            f'regex(M, "^alert-{i}[0-9]+$")',
            f'size(Z{i}) < {i}')[i % 6]


async def churn(port: int, workload: str, count: int, batch: int, peak: list[int],
                pid: int) -> None:
    """Subscribe ``batch`` texts, pipelined, then unsubscribe them, until ``count``."""
    peer = await open_peer(port, {"Subscription.Max-Count": max(batch, 16)})
    xid = 10
    for start in range(0, count, batch):
        n = min(count, start + batch) - start
        for i in range(start, start + n):
            xid += 1
            peer.transport.write(frame(SubAddRqst(xid, text(workload, i), True, EMPTY_KEYS)))
        ids = []
        for _ in range(n):
            reply = await asyncio.wait_for(peer.replies.get(), 600)
            assert isinstance(reply, SubRply), reply
            ids.append(reply.subscription_id)
        peak[0] = max(peak[0], rss_bytes(pid))
        for sub_id in ids:
            xid += 1
            peer.transport.write(frame(SubDelRqst(xid, sub_id)))
        for _ in ids:
            reply = await asyncio.wait_for(peer.replies.get(), 600)
            assert isinstance(reply, SubRply), reply


def run_elvind(workload: str, count: int, batch: int) -> None:
    port = free_port()
    proc = start_elvind("--listen", f"elvin://127.0.0.1:{port}")
    try:
        wait_listening(proc, port, time.monotonic() + 20)
        start = rss_bytes(proc.pid)
        peak = [start]
        asyncio.run(churn(port, workload, count, batch, peak, proc.pid))
        after = rss_bytes(proc.pid)
        time.sleep(5)           # a bench: the policy's timers have run
        settled = rss_bytes(proc.pid)
        print(f"  elvind RSS MiB: start {start / MiB:.0f}, peak {peak[0] / MiB:.0f}, "
              f"after unsubscribe {after / MiB:.0f}, 5 s later {settled / MiB:.0f}")
    finally:
        stop_processes([proc])


def run_embedded(workload: str, count: int, batch: int) -> None:
    from elvin.router.embedded import EmbeddedRouter
    from elvin.router.gcpolicy import GcPolicy, give_back
    from elvin.subscription import patterns

    router = EmbeddedRouter().start()
    try:
        inner = router.router
        assert inner is not None
        policy = GcPolicy(router.loop, lambda: inner.engine.weight + len(inner.sessions))  # type: ignore[arg-type]
        router.call(policy.install)
        gc.collect()
        blocks0, rss0 = sys.getallocatedblocks(), rss_bytes(os.getpid())
        peak = [rss0]
        asyncio.run(churn(router.port, workload, count, batch, peak, os.getpid()))  # type: ignore[arg-type]
        checks, done = policy.checks, time.monotonic()
        while not (policy.checks > checks and policy._suspect is None      # what the policy
                   and policy._recheck is None) and time.monotonic() < done + 120:  # reclaims itself
            time.sleep(0.1)
        done = time.monotonic() - done
        held, rss1 = sys.getallocatedblocks(), rss_bytes(os.getpid())
        router.call(policy.uninstall)           # unfreezes
        gc.collect()
        live = sys.getallocatedblocks()
        shapes = inner.compile.__self__         # type: ignore[attr-defined]
        n_shapes, shape_est = len(shapes), shapes.bytes
        n_patterns, pattern_est = patterns.compiled_cache()
        n_re = len(re._cache)                   # type: ignore[attr-defined]  # the stdlib's, layouts' patterns
        router.call(shapes._make_room, shapes.max_bytes + 1)    # forget every shape
        gc.collect()
        without_shapes = sys.getallocatedblocks()
        patterns._COMPILED.clear()
        patterns._COMPILED_COSTS.clear()
        patterns._COMPILED_TOTAL[0] = 0
        re.purge()
        gc.collect()
        rest = sys.getallocatedblocks()
        rss2 = rss_bytes(os.getpid())
        give_back()
        rss3 = rss_bytes(os.getpid())
        print(f"  embedded: RSS MiB start {rss0 / MiB:.0f}, peak {peak[0] / MiB:.0f}, "
              f"settled {rss1 / MiB:.0f} after {done:.1f} s (policy thaws {policy.thaws}, "
              f"trims {policy.trims})")
        print(f"    blocks: start {blocks0:,}; settled {held:,}; dead cycles left "
              f"{held - live:,}")
        print(f"    shape cache: {n_shapes} shapes, estimated {shape_est / MiB:.1f} MiB, "
              f"{live - without_shapes:,} blocks")
        print(f"    pattern caches: {n_patterns} regex patterns, estimated "
              f"{pattern_est / MiB:.1f} MiB, and {n_re} in re's own: "
              f"{without_shapes - rest:,} blocks")
        print(f"    beyond the start with the caches empty: {rest - blocks0:,} blocks; "
              f"RSS then {rss2 / MiB:.0f} MiB, after malloc_trim {rss3 / MiB:.0f} MiB")
    finally:
        router.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=16384)
    parser.add_argument("--batch", type=int, default=16384)
    parser.add_argument("--workload", choices=["literals", "shapes"], action="append")
    parser.add_argument("--where", choices=["elvind", "embedded"], action="append")
    args = parser.parse_args()
    for workload in args.workload or ["literals", "shapes"]:
        print(f"== {workload}: {args.count:,} texts, {args.batch:,} held at once")
        if "elvind" in (args.where or ["elvind"]):
            run_elvind(workload, args.count, args.batch)
        if "embedded" in (args.where or ["embedded"]):
            run_embedded(workload, args.count, args.batch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
