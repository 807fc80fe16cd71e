"""Client failover: how long a client given two routers takes to carry on at
the second when the first is killed (SIGKILL), with the library's default
reconnection settings.

    .venv/bin/python bench/failover.py [--rounds N] [--reconnect-delay S]

Two ``elvind`` processes on loopback; a client ``connect([A, B])`` with one
subscription; each round SIGKILLs the router it is on and measures, from
the kill: the failover listener (a session at the other router, with the
subscription, keys and quench restored), and the first notification from a
producer at the new router that publishes every millisecond (what the user
would see). The killed router is started again before the next round, so
the client moves back and forth. Figures: median and worst of each.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from elvin.client import connect
from tests.integration.process_util import ELVIND, free_port, stop, wait_listening


class Router:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"elvin://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([*ELVIND, "--listen", self.url],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(self.port, self.proc)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


async def one_round(conn, routers: list[Router]) -> tuple[float, float]:
    here = next(r for r in routers if conn.url.endswith(f":{r.port}"))
    there = next(r for r in routers if r is not here)
    moved = asyncio.Event()
    seen = asyncio.Event()
    def on_failover(*_args) -> None:
        moved.set()
    conn.add_failover_listener(on_failover)
    sub = await conn.subscribe("require(Bench)", listener=lambda _n: seen.set())
    async with connect(there.url) as producer:
        started = time.perf_counter()
        here.kill()

        async def publish() -> None:
            while not seen.is_set():
                await producer.send({"Bench": 1})
                await asyncio.sleep(0.001)
        pub = asyncio.ensure_future(publish())
        await asyncio.wait_for(moved.wait(), 30)
        failed_over = time.perf_counter() - started
        await asyncio.wait_for(seen.wait(), 30)
        first = time.perf_counter() - started
        pub.cancel()
    conn.remove_listener(on_failover)
    await sub.close()
    await asyncio.get_running_loop().run_in_executor(None, here.start)
    return failed_over, first


async def main(rounds: int, reconnect_delay: float) -> None:
    routers = [Router(), Router()]
    for router in routers:
        router.start()
    try:
        conn = await connect([r.url for r in routers], reconnect_delay=reconnect_delay)
        moves, firsts = [], []
        for _ in range(rounds):
            failed_over, first = await one_round(conn, routers)
            moves.append(failed_over)
            firsts.append(first)
        await conn.close()
    finally:
        for router in routers:
            if router.proc is not None and router.proc.poll() is None:
                stop(router.proc)
    ms = 1e3
    print(f"== client failover, {rounds} SIGKILLs, reconnect_delay {reconnect_delay:g} s")
    print(f"  kill -> restored at the other router: median {statistics.median(moves) * ms:.1f} ms, "
          f"worst {max(moves) * ms:.1f} ms")
    print(f"  kill -> first notification there:    median {statistics.median(firsts) * ms:.1f} ms, "
          f"worst {max(firsts) * ms:.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--reconnect-delay", type=float, default=0.1)
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.reconnect_delay))
