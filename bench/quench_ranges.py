"""Quench value ranges and client failover (issue 49): what they cost.

    .venv/bin/python bench/quench_ranges.py [--subscriptions N] [--rounds R]

Figures printed:

* ``wanted()`` over N subscriptions on one numeric attribute (ranges joined
  with ``&&``/``||``/``!``, as a sensor's consumers write them), and over
  20 with two-ended ranges only: analyses per second, and the intervals it
  gives (overlapping ones joined);
* ``Wanted.matches(value)`` per second on that answer (a producer asks it
  per reading);
* ``Connection.wanted()`` with auto-quench, cached between subscription
  changes: calls per second against a real router (in-process thread);
* failover: R times, the router a client is on is stopped and the time until
  the client is open at the other router with its subscriptions restored
  (two in-process routers on loopback, reconnect_delay 0.05 s).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from elvin.client import connect
from elvin.quenching import wanted
from elvin.router.embedded import EmbeddedRouter
from elvin.subscription import parse


def expressions(n: int, seed: int = 49, bounded: bool = False) -> list[str]:
    """``bounded``: only ranges with two ends (so that some readings are
    unwanted); else also ``<`` and ``>`` rays, which soon cover everything."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a = rng.randint(-50, 150)
        b = a + rng.randint(1, 40)
        shape = rng.randrange(1, 3) if bounded else rng.randrange(4)
        if shape == 0:
            out.append(f"Temperature < {a}")
        elif shape == 1:
            out.append(f"Temperature >= {a} && Temperature < {b}.5 && Site == \"s{a % 7}\"")
        elif shape == 2:
            out.append(f"!(Temperature <= {a} || Temperature > {b})")
        else:
            out.append(f"Temperature == {a} || (Temperature > {b} && Alarm == 1)")
    return out


def analysis_figures(n: int, bounded: bool = False) -> None:
    asts = [parse(t) for t in expressions(n, bounded=bounded)]
    start = time.perf_counter()
    rounds = 0
    while time.perf_counter() - start < 2.0:
        result = wanted(asts, "Temperature")
        rounds += 1
    elapsed = time.perf_counter() - start
    print(f"wanted() over {n}{' bounded' if bounded else ''} subscriptions: {rounds / elapsed:,.1f} analyses/s "
          f"({elapsed / rounds * 1e3:.2f} ms each); {len(result.intervals)} intervals, "
          f"{len(result.exact)} exact values")
    values = [random.uniform(-100, 250) for _ in range(1000)]
    start = time.perf_counter()
    checks = 0
    while time.perf_counter() - start < 2.0:
        for v in values:
            result.matches(v)
        checks += len(values)
    elapsed = time.perf_counter() - start
    share = sum(result.matches(v) for v in values) / len(values)
    print(f"Wanted.matches(): {checks / elapsed:,.0f} values/s ({share:.0%} of uniform "
          f"readings in [-100, 250] wanted)")


async def connection_figures(n: int, rounds: int) -> None:
    first, second = EmbeddedRouter().start(), EmbeddedRouter().start()
    try:
        async with connect(first.url) as consumer, \
                connect(first.url, auto_quench=True) as producer:
            for text in expressions(min(n, 200)):
                await consumer.subscribe(text)
            await producer.wanted("Temperature")
            start = time.perf_counter()
            calls = 0
            while time.perf_counter() - start < 1.0:
                await producer.wanted("Temperature")
                calls += 1
            elapsed = time.perf_counter() - start
            print(f"Connection.wanted() (cached, {min(n, 200)} subscriptions): "
                  f"{calls / elapsed:,.0f} calls/s")
        times = []
        conn = await connect([first.url, second.url], reconnect_delay=0.05)
        try:
            for text in expressions(50):
                await conn.subscribe(text)
            routers = [first, second]
            for i in range(rounds):
                here, other = routers[i % 2], routers[(i + 1) % 2]
                loop = asyncio.get_running_loop()
                start = time.perf_counter()
                await loop.run_in_executor(None, here.stop)
                while not (conn.state == "open" and conn.uri.port == other.port):
                    await asyncio.sleep(0.001)
                times.append(time.perf_counter() - start)
                await loop.run_in_executor(None, here.start)
        finally:
            await conn.close()
        print(f"failover with 50 subscriptions, {rounds} moves: median "
              f"{statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms "
              f"(from stop() called to open at the other router, restored)")
    finally:
        first.stop()
        second.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscriptions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    analysis_figures(args.subscriptions)
    analysis_figures(20, bounded=True)
    asyncio.run(connection_figures(args.subscriptions, args.rounds))


if __name__ == "__main__":
    main()
