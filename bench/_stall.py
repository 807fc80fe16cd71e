""""No client stalls the others" benches for ``bench/router.py --stall``.

Each scenario runs against a fresh ``elvind`` while a *bystander* (its own
process, see ``_registration.Bystander``) measures its publish -> deliver
round trips; printed: the bystander's worst and median round trip, and what
the scenario achieved.

* ``largest``: one client asks for ``Subscription.Max-Length`` beyond the
  router's maximum (granted the maximum) and sends three expressions of
  nearly that length (ORs of equality terms), one after the other.
* ``spread``: as ``largest``, but each term tests a different attribute
  (``A0x1 == 1 || A0x2 == 2 ...``: ~20,000 names to file and index).
* ``burst``: one client sends 10,000 SubAddRqst in one write.
* ``slow-regex``: 500 subscriptions whose regex backtracks until its time
  limit on the notifications a second client publishes (200 of them,
  pipelined): the per-notification evaluation budget must keep each such
  notification from costing 500 x the per-match limit.
* ``fed-huge``: a federated peer (a raw link) sends a FedSubReplace whose
  pull filter is one huge term (an AND holding an OR of 20,000 equality
  tests, ~1 MiB encoded), three times with different constants.
* ``fed-many``: a federated peer sends pull filters of 20,000 terms (the
  most a router compiles) of ~30 characters each, three times.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time
from pathlib import Path

from _common import free_port, open_peer, stop_processes
from _registration import Bystander, connect_counter, register, request_block, start_router

from elvin.protocol import NotifyEmit, SubAddRqst, frame
from elvin.subscription import parse

#: the federation listener of the router the ``fed-`` scenarios start
_FED_PORT = 0

#: what the client asks for; the router grants its maximum (options.py)
ASK_MAX_LENGTH = 1 << 20


def _or_of(limit: int, term) -> str:
    """An OR of ``term(0)``, ``term(1)``... as long as ``limit`` allows."""
    terms = []
    size = 0
    for n in itertools.count():
        text = term(n)
        if size + len(text) + 4 > limit:
            break
        terms.append(text)
        size += len(text) + 4
    return " || ".join(terms)


def _largest(limit: int, i: int) -> str:
    """An OR of equality terms on one attribute as long as the limit allows."""
    return _or_of(limit, lambda n: f'Group == "big{i}-{n:06d}"')


def _spread(limit: int, i: int) -> str:
    """An OR of equality terms on as many different attributes as fit: the
    index files it under one name per operand."""
    return _or_of(limit, lambda n: f"A{i}x{n} == {n}")


async def _scenario_largest(port: int) -> str:
    peer = await connect_counter(port, {"Subscription.Max-Length": ASK_MAX_LENGTH})
    granted = 256 * 1024            # options.py: the router's maximum
    texts = [_largest(granted, i) for i in range(3)]
    elapsed = await register([peer], [request_block(texts)], [3], 120)
    peer.transport.close()
    return (f"3 expressions of {len(texts[0]):,} characters acknowledged in "
            f"{elapsed:.2f} s (Nacks: {peer.nacks})")


async def _scenario_spread(port: int) -> str:
    peer = await connect_counter(port, {"Subscription.Max-Length": ASK_MAX_LENGTH})
    ordinary = await connect_counter(port)
    texts = [_spread(256 * 1024, i) for i in range(3)]
    huge = asyncio.ensure_future(register([peer], [request_block(texts)], [3], 120))
    await asyncio.sleep(0.2)
    # meanwhile an ordinary client's 400-character expression (off the loop too)
    medium = " || ".join(f'Group == "an ordinary group, number {i}"' for i in range(10))
    waited = await register([ordinary], [request_block([medium])], [1], 120)
    elapsed = await huge
    for each in (peer, ordinary):
        each.transport.close()
    return (f"3 expressions of {len(texts[0]):,} characters on distinct attributes "
            f"acknowledged in {elapsed:.2f} s (Nacks: {peer.nacks}); meanwhile one of "
            f"{len(medium)} characters in {waited * 1e3:.0f} ms")


async def _scenario_burst(port: int) -> str:
    n = 10_000
    peer = await connect_counter(port, {"Subscription.Max-Count": n + 16})
    texts = [f'Group == "burst{i}" && require(Message)' for i in range(n)]
    elapsed = await register([peer], [request_block(texts)], [n], 120)
    peer.transport.close()
    return f"{n:,} subscriptions in one write acknowledged in {elapsed:.2f} s ({n / elapsed:,.0f}/s)"


async def _scenario_slow_regex(port: int) -> str:
    subs = 500
    notes = 200
    peer = await connect_counter(port, {"Subscription.Max-Count": subs + 16})
    # backtracks exponentially on "aaa...ab" (no possessive help in the engine)
    texts = [f'regex(Message, "^(a|aa|a{i % 7 + 1})+$")' for i in range(subs)]
    await register([peer], [request_block(texts)], [subs], 120)
    consumer = await open_peer(port)
    await consumer.request(SubAddRqst(2, "require(Done)"))
    done = asyncio.Event()
    consumer.on_deliver = lambda body: done.set()
    producer = await open_peer(port)
    message = "a" * 40 + "b"
    start = time.perf_counter()
    producer.transport.write(b"".join(frame(NotifyEmit({"Message": message, "N": i}))
                                      for i in range(notes)))
    producer.transport.write(frame(NotifyEmit({"Done": 1})))
    await asyncio.wait_for(done.wait(), 300)
    elapsed = time.perf_counter() - start
    for p in (peer, consumer, producer):
        p.transport.close()
    return (f"{notes} notifications against {subs} slow-regex subscriptions: "
            f"{elapsed / notes * 1e3:.1f} ms each")


async def _replace_pulls(filters: list) -> str:
    """Link to the router as a raw peer and have it take each pull filter in
    turn (FedSubReplace, then wait for its Ack or Nack)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from integration.federation_util import RawFederator  # type: ignore[import-not-found]

    from elvin.federation.packets import Ack, FedSubReplace
    from elvin.protocol import Nack

    peer = await RawFederator.linked(f"ewaf://127.0.0.1:{_FED_PORT}", "bench-peer")
    answers = []
    start = time.perf_counter()
    for xid, pull in enumerate(filters, 100):
        peer.send(FedSubReplace(xid, pull))
        while True:
            answer = await peer.next(300)
            if isinstance(answer, (Ack, Nack)) and answer.xid == xid:
                answers.append(type(answer).__name__)
                break
    elapsed = time.perf_counter() - start
    await peer.close()
    return f"{len(filters)} pull filters answered in {elapsed:.2f} s ({', '.join(answers)})"


async def _scenario_fed_huge(port: int) -> str:
    filters = [parse(f"Kind == {i} && (" + " || ".join(
        f'Group == "huge{i}-{n:05d}"' for n in range(20_000)) + ")") for i in range(3)]
    return "one huge term: " + await _replace_pulls(filters)


async def _scenario_fed_many(port: int) -> str:
    filters = [parse(" || ".join(f'Group == "m{i}-{n:05d}" && Kind > {n}'
                                 for n in range(20_000)))
               for i in range(3)]
    return "20,000 terms each: " + await _replace_pulls(filters)


SCENARIOS = {"largest": _scenario_largest, "spread": _scenario_spread, "burst": _scenario_burst,
             "slow-regex": _scenario_slow_regex, "fed-huge": _scenario_fed_huge,
             "fed-many": _scenario_fed_many}


def run_stall(names: list[str]) -> None:
    print(f"== no client stalls the others (a bystander's publish -> deliver round trip); "
          f"load {os.getloadavg()[0]:.2f}")
    global _FED_PORT
    for name in names:
        port = free_port()
        if name.startswith("fed-"):
            _FED_PORT = free_port()
            proc = start_router(port, "--federation-listen", f"ewaf://127.0.0.1:{_FED_PORT}",
                                "--federation-domain", "bench", "--federation-accept-any")
        else:
            proc = start_router(port)
        try:
            with Bystander(port) as bystander:
                what = asyncio.run(SCENARIOS[name](port))
        finally:
            stop_processes([proc])
        b = bystander.result
        print(f"{name:<11} bystander worst {b.get('worst', float('nan')) * 1e3:8.1f} ms   "
              f"p50 {b.get('p50', float('nan')) * 1e3:6.2f} ms   "
              f"({b.get('count', 0)} round trips); {what}")
