"""Our ``elvind`` beside the Java Avis router (1.1.3), in one run, interleaved.

Run: .venv/bin/python bench/versus_avis.py [--rounds 3] [--quick] [--only ROW ...]

Every row of issue 48's table, each measured on both routers with the same
raw-codec load generator (``bench/_common.py``), ours and Avis's alternating
first from round to round, so that a change of the machine's load falls on
both. Avis is found or built from its public source (``bench/_avis.py``);
without it the bench prints ours alone and says so.

Rows (``--only`` takes their names):

* ``registration``: 100,000 subscriptions pipelined over 100 connections
  (1,000 SubAddRqst each), equality-anchored (``Group == "gN" &&
  require(Message)``) and ranges/prefixes (``Seq >= a && Seq < a+10``,
  ``begins-with(Text, "pK")``): subscriptions acknowledged per second;
* ``cpu``: router CPU (user + system, every thread) per delivered
  notification: 1 -> 1, 1 -> 100 (fan-out) and 10 -> 10 (many-to-many, every
  consumer subscribed to everything), the routers saturated with a window of
  notifications in flight;
* ``delivery``: delivered notifications/s, 1 -> 1 (the Python load generator
  is near its own limit here: the CPU row says more);
* ``federation``: delivered/s and the routers' CPU per notification across
  one federation link (ours with exactly-once routing on trees);
* ``clients``: 1,000 clients connect (each with a subscription), then 300
  notifications are delivered to each: the time of each;
* ``matching``: notifications/s and router CPU per notification with
  100,000 subscriptions registered (equality / ranges and prefixes), each
  notification matching one subscription.

The ratio is how many times better ours is: ours/Avis for rates, Avis/ours
for costs and times. The load average is printed: on a shared machine the
figures swing, the ratios less.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _avis import (  # noqa: E402
    Router,
    avis_available,
    start_avis,
    start_avis_pair,
    start_ours,
    start_ours_pair,
)
from _common import open_peer, process_cpu  # noqa: E402
from _registration import (  # noqa: E402
    _registration,
    connect_counter,
    register,
    request_block,
)
from _scale import WORKLOADS as SCALE_WORKLOADS  # noqa: E402
from _scale import _stream  # noqa: E402
from federation import throughput  # noqa: E402
from router import delivery_bench  # noqa: E402

from elvin.protocol import NotifyEmit, SubAddRqst, frame  # noqa: E402

ROWS = ("registration", "cpu", "delivery", "federation", "clients", "matching")
BASE = {"Kind": "bench", "Group": "elvin-dev", "From": "bench",
        "Message": "Has anyone seen the coffee biff today? The pot is empty again."}
BIG_QUEUE = {"Send-Queue.Max-Length": 64 * 1024 * 1024}
#: clients connecting at once (all from 127.0.0.1)
WAVE = 200


# -- measurements (each returns {figure: value}) ---------------------------------------------

async def _registration_row(router: Router, n: int) -> dict[str, float]:
    out = {}
    for workload in ("tickertape", "rangeprefix"):
        r = await _registration(router.port, router.pids[0], n, 1000, workload)
        if r["nacks"]:
            raise RuntimeError(f"{router.name}: {r['nacks']} Nacks, e.g. {r['sample']}")
        out[f"registered/s, {workload}"] = r["rate"]
    return out


async def spread(router: Router, producers: int, consumers: int, seconds: float,
                 window: int = 2000, warmup: float = 2.0) -> tuple[float, float]:
    """(delivered/s, router CPU seconds per delivered notification) with
    ``producers`` each keeping ``window / producers`` notifications in flight
    and ``consumers`` each subscribed to all of them, measured after
    ``warmup`` seconds of the same traffic (Avis's JIT warm: its figure is
    the warm one)."""
    subs = [await open_peer(router.port, BIG_QUEUE) for _ in range(consumers)]
    for peer in subs:
        await peer.request(SubAddRqst(2, 'require(Seq) && Kind == "bench"'))
    pubs = [await open_peer(router.port) for _ in range(producers)]
    received = 0
    arrived = asyncio.Event()

    def on_deliver(body: bytes) -> None:
        nonlocal received
        received += 1
        arrived.set()

    for peer in subs:
        peer.on_deliver = on_deliver
    clock = time.perf_counter
    per = max(1, window // producers)
    sent = 0
    note = frame(NotifyEmit({**BASE, "Seq": 1}))
    start = cpu = None
    counted = 0
    begin = clock()
    while True:
        if start is None and clock() - begin >= warmup and received >= 2000 * consumers:
            start, counted, cpu = clock(), received, sum(map(process_cpu, router.pids))
        if start is not None and clock() - start >= seconds:
            break
        in_flight = sent - received // consumers
        room = window - in_flight
        if room > 0:
            for peer in pubs:
                k = min(per, room)
                if k <= 0:
                    break
                peer.transport.write(note * k)
                sent += k
                room -= k
            for peer in pubs:
                await peer.can_write.wait()
        arrived.clear()
        try:
            await asyncio.wait_for(arrived.wait(), 30)
        except TimeoutError:
            raise RuntimeError(f"{router.name}: deliveries stopped") from None
    elapsed = clock() - start
    used = sum(map(process_cpu, router.pids)) - cpu
    delivered = received - counted
    for peer in subs + pubs:
        peer.transport.close()
    return delivered / elapsed, used / max(1, delivered)


async def _cpu_row(router: Router, seconds: float, warmup: float) -> dict[str, float]:
    out = {}
    for label, producers, consumers in (("1 -> 1", 1, 1), ("1 -> 100", 1, 100),
                                        ("10 -> 10", 10, 10)):
        _, cost = await spread(router, producers, consumers, seconds, warmup=warmup)
        out[f"router CPU us/delivered, {label}"] = cost * 1e6
    return out


async def _delivery_row(router: Router, seconds: float) -> dict[str, float]:
    r = await delivery_bench(router.port, seconds, 0, router.pids[0])
    return {"delivered/s, 1 -> 1": r["rate"]}


async def _federation_row(router: Router, seconds: float) -> dict[str, float]:
    r = await throughput(router.ports[0], router.ports[1], seconds, 0, router.pids)
    return {"delivered/s across a link": r["rate"],
            "routers' CPU us/notification across a link": r["cpu"] * 1e6}


async def _clients_row(router: Router, clients: int, each: int) -> dict[str, float]:
    clock = time.perf_counter
    start = clock()
    peers: list = []
    while len(peers) < clients:     # in waves: elvind refuses a 257th socket from one
        wave = min(WAVE, clients - len(peers))  # address still without a session (the door)
        peers += await asyncio.gather(*(open_peer(router.port, BIG_QUEUE) for _ in range(wave)))
    for peer in peers:
        peer.transport.write(frame(SubAddRqst(2, 'require(Seq) && Kind == "bench"')))
    await asyncio.gather(*(asyncio.wait_for(peer.replies.get(), 120) for peer in peers))
    connected = clock() - start
    received = 0
    done = asyncio.Event()
    want = clients * each

    def on_deliver(body: bytes) -> None:
        nonlocal received
        received += 1
        if received >= want:
            done.set()

    for peer in peers:
        peer.on_deliver = on_deliver
    producer = await open_peer(router.port)
    start = clock()
    cpu = sum(map(process_cpu, router.pids))
    client_cpu = time.process_time()
    producer.transport.write(b"".join(frame(NotifyEmit({**BASE, "Seq": i})) for i in range(each)))
    await asyncio.wait_for(done.wait(), 600)
    delivered = clock() - start
    cpu = sum(map(process_cpu, router.pids)) - cpu
    client_cpu = time.process_time() - client_cpu
    for peer in [*peers, producer]:
        peer.transport.close()
    return {f"{clients:,} clients: connect, s": connected,
            f"{clients:,} clients: deliver {each} each, s": delivered,
            f"{clients:,} clients: router CPU us/delivered": cpu / want * 1e6,
            f"{clients:,} clients: (the load generator's CPU, s)": client_cpu}


async def _matching_row(router: Router, n: int, seconds: float) -> dict[str, float]:
    out = {}
    for name in ("tickertape", "rangeprefix"):
        workload = SCALE_WORKLOADS[name]
        texts = workload.fillers(n)
        per_conn = 1000
        conns = (n + per_conn - 1) // per_conn
        peers = [await connect_counter(router.port, {"Subscription.Max-Count": per_conn + 16})
                 for _ in range(conns)]
        chunks = [texts[i * per_conn:(i + 1) * per_conn] for i in range(conns)]
        await register(peers, [request_block(c) for c in chunks], [len(c) for c in chunks], 1800)
        r = await _stream(router.port, workload, n, seconds, router.pids[0])
        for peer in peers:
            peer.transport.close()
        label = "equality" if name == "tickertape" else "ranges and prefixes"
        out[f"matching at {n:,}, {label}: notifications/s"] = r["rate"]
        out[f"matching at {n:,}, {label}: router CPU us/notification"] = r["cpu_per"] * 1e6
    return out


# -- the run ------------------------------------------------------------------------------

#: per row: (how to start a router of that kind, the measurement)
Starter = Callable[[], Router]


def _rows(args: argparse.Namespace) -> dict[str, tuple[str, Callable[[Router], Awaitable]]]:
    n = 10_000 if args.quick else 100_000
    seconds = 1.0 if args.quick else 3.0
    clients, each = (200, 100) if args.quick else (1000, 300)
    return {
        "registration": ("single", lambda r: _registration_row(r, n)),
        "cpu": ("single", lambda r: _cpu_row(r, seconds, seconds)),
        "delivery": ("single", lambda r: _delivery_row(r, seconds)),
        "federation": ("pair", lambda r: _federation_row(r, seconds)),
        "clients": ("single", lambda r: _clients_row(r, clients, each)),
        "matching": ("single", lambda r: _matching_row(r, n, seconds)),
    }


def _start(kind: str, shape: str) -> Router:
    if kind == "ours":
        return start_ours_pair() if shape == "pair" else start_ours(max_subscriptions=500_000)
    return start_avis_pair() if shape == "pair" else start_avis()


def _better(figure: str, ours: float, avis: float) -> float:
    """How many times better ours is (rates: more is better; the rest: less)."""
    if not ours or not avis or ours != ours or avis != avis:
        return float("nan")
    return ours / avis if "/s" in figure and "us/" not in figure else avis / ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one round")
    parser.add_argument("--only", nargs="+", choices=ROWS, default=list(ROWS))
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    have_avis, how = avis_available()
    kinds = ["ours", "Avis"] if have_avis else ["ours"]
    print(f"== ours beside Avis 1.1.3: {how if have_avis else how + ' (ours alone)'}; "
          f"{rounds} round(s), {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}", flush=True)
    try:
        import uvloop
        run = uvloop.run
    except ImportError:  # pragma: no cover
        run = asyncio.run
    rows = _rows(args)
    results: dict[str, dict[str, list[float]]] = {k: {} for k in kinds}
    for round_no in range(rounds):
        order = kinds if round_no % 2 == 0 else kinds[::-1]
        for row in args.only:
            shape, measure = rows[row]
            for kind in order:
                router = _start(kind, shape)
                try:
                    figures = run(measure(router))
                except Exception as exc:    # noqa: BLE001 - one row's failure is printed, the rest go on
                    print(f"  {row} on {kind}: failed: {exc}", flush=True)
                    figures = {}
                finally:
                    router.stop()
                for figure, value in figures.items():
                    results[kind].setdefault(figure, []).append(value)
                    print(f"  round {round_no + 1} {kind:<5} {figure:<52} {value:>12,.1f}",
                          flush=True)
    print(f"\n== medians over {rounds} round(s); load {os.getloadavg()[0]:.2f}")
    figures = list(results["ours"])
    for figure in results.get("Avis", {}):
        if figure not in figures:
            figures.append(figure)
    header = f"{'figure':<56} {'Avis':>12} {'ours':>12} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for figure in figures:
        ours = _median(results["ours"].get(figure))
        avis = _median(results.get("Avis", {}).get(figure))
        ratio = _better(figure, ours, avis)
        print(f"{figure:<56} {avis:>12,.1f} {ours:>12,.1f} "
              f"{ratio:>6.2f}x" if ratio == ratio else
              f"{figure:<56} {avis:>12,.1f} {ours:>12,.1f} {'':>7}")
    if not have_avis:
        print("(Avis was not available: ours alone; see bench/_avis.py)")


def _median(values: list[float] | None) -> float:
    return statistics.median(values) if values else float("nan")


if __name__ == "__main__":
    main()
