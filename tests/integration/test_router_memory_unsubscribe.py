"""Nothing is left behind after unsubscribe: subscriptions of distinct
shapes, subscribed then all unsubscribed, leave only what the caches and the
collector's documented bound allow (issue 42).

A real router (embedded, with elvind's garbage-collection policy installed
on its loop, as ``elvind`` does) in a child interpreter of its own: the
collector and its frozen generation are process-wide, and the test process's
own allocations would set off the collector passes whose absence is the
point. After the last SubRply the client is silent and the child waits
without allocating containers, so no young pass comes: the router must
reclaim the dead subscriptions' frozen cycles by itself. The measure is
exact and does not depend on the machine: allocated blocks before and after
one full collection of everything, frozen included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_CHILD = r"""
import asyncio, gc, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from elvin.protocol import SubAddRqst, SubDelRqst, SubRply
from elvin.router.embedded import EmbeddedRouter
from elvin.router.gcpolicy import THAW_MIN_OBJECTS, THAW_SHARE, GcPolicy
from rawclient import EMPTY_KEYS, RawClient
from waiting import wait_until

N = int(sys.argv[3])

def text(i):
    # distinct shapes (names, operators, functions) and literals: each
    # learnt by the shape cache, compiled to code of its own
    return (f'A{i} == "v{i}" && require(M{i % 97})',
            f'begins-with(S{i}, "t{i}") || N{i} > {i}',
            f'Price{i} * 2 > {i} && Volume - 10 <= {i * 3}',
            f'fold-case(U{i}) == "p{i}" || H{i % 13} == "h{i}"')[i % 4]

router = EmbeddedRouter().start()
policy = GcPolicy(router.loop, lambda: router.router.engine.weight + len(router.router.sessions))
router.call(policy.install)

async def churn():
    client = await RawClient.connected(router.port, {"Subscription.Max-Count": N})
    for i in range(N):
        client.send(SubAddRqst(client.xid(), text(i), True, EMPTY_KEYS))
    await client.drain()
    ids = []
    for _ in range(N):
        reply = await client.next(timeout=120)
        assert isinstance(reply, SubRply), reply
        ids.append(reply.subscription_id)
    for sub_id in ids:
        client.send(SubDelRqst(client.xid(), sub_id))
    await client.drain()
    for _ in ids:
        reply = await client.next(timeout=120)
        assert isinstance(reply, SubRply), reply
    return client

loop = asyncio.new_event_loop()
client = loop.run_until_complete(churn())
assert router.call(lambda: router.router.engine.weight) == 0
checks = policy.checks

def settled():
    # a check since the last reply, and none pending: what the policy
    # reclaims by itself is reclaimed
    return policy.checks > checks and policy._suspect is None and policy._recheck is None

wait_until(settled, timeout=30, interval=0.1, what="the policy's pending checks")
held = sys.getallocatedblocks()
gc.unfreeze()
gc.collect()
live = sys.getallocatedblocks()
dead = held - live
bound = max(THAW_MIN_OBJECTS, int(live * THAW_SHARE))
print(f"blocks held {held}, live {live}, dead {dead}, bound {bound}, thaws {policy.thaws}")
assert dead <= bound, f"{dead} blocks of dead cycles left after unsubscribe (bound {bound})"
print("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="elvind's policy, as on Linux")
@pytest.mark.timeout(300)
def test_unsubscribed_subscriptions_leave_no_frozen_cycles_behind():
    here = Path(__file__).resolve().parent
    done = subprocess.run([sys.executable, "-c", _CHILD, str(here), str(here.parent), "3000"],
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok"), done.stdout
