"""Router benchmarks: delivery over loopback TCP, and in-process matching.

Run: .venv/bin/python bench/router.py [--quick] [--only delivery|matching|registration]
     .venv/bin/python bench/router.py --only registration [--subs N] [--workload mix]
     .venv/bin/python bench/router.py --reconnect [--clients 1000] [--per-client 100]
     .venv/bin/python bench/router.py --stall [largest spread burst slow-regex fed-huge fed-many
                                              hangup hangup-long testconn]
     .venv/bin/python bench/router.py --churn [modify unsubscribe reconnect unotify fed-replace]
     .venv/bin/python bench/router.py --scale [rangeprefix mix tickertape] [--sizes 1000,10000]
     .venv/bin/python bench/router.py --scale-tcp [rangeprefix mix tickertape] [--sizes ...]
     .venv/bin/python bench/router.py --long-compile [N]

1. Delivery: ``elvind`` runs in its own process (so it has a core of its
   own); one producer and one consumer (asyncio protocols on uvloop, in this
   process, speaking the raw codec; not the client library) connect over
   loopback TCP. The consumer has one subscription that matches every
   notification. Printed:
   * delivered notifications/s with the producer keeping at most WINDOW
     notifications in flight (closed loop: nothing is dropped), with the
     latency p50/p99 under that load;
   * latency p50/p99 at a paced 1,000 notifications/s (an unloaded router).
2. Matching: the engine alone (no network, no codec) with 1,000, 10,000 and
   100,000 subscriptions of the tickertape-like form
   ``Group == "gN" && contains(Message, "wordM")``, owned by clients with 10
   subscriptions each, in two layouts:
   * A "1% match": 10 groups x 10 words; each notification matches 1% of all
     subscriptions (10, 100, 1,000 of them), so the *output* grows 100x;
   * B "10 match": n/100 groups x 10 words; each notification matches 10
     subscriptions whatever n is (the index must keep the cost flat).
   Printed: notifications/s and microseconds per notification (median of
   passes over 1,000 notifications), predicates evaluated per notification,
   and the cost ratio 100,000 / 1,000. In layout B the notifications are
   spread uniformly over all n/100 groups, so at 100,000 subscriptions every
   notification runs a different, cold compiled predicate (CPU caches, not the
   index, make most of the growth: the same engine hitting 10 groups costs
   what it costs with 1,000 subscriptions; see "B, hot").
3. Registration (``bench/_registration.py``): ``--subs`` (100,000) subscriptions
   ``Group == "gN" && require(Message)`` (and a mix of equality, begins-with,
   regex, fold-case and arithmetic), 1,000 SubAddRqst pipelined per connection
   over 100 connections: subscriptions/s, router RSS per subscription, and a
   bystander's worst publish -> deliver round trip meanwhile.
4. ``--reconnect``: 1,000 clients x 100 subscriptions re-subscribe at once after
   a router restart: time until all are acknowledged, the bystander's worst
   round trip.
5. ``--stall [largest spread burst slow-regex fed-huge fed-many]`` (``bench/_stall.py``): the bystander's
   worst round trip while one client sends the largest expressions the router
   accepts, 10,000 SubAddRqst in one write, or notifications that 500
   slow-regex subscriptions must be evaluated against; ``hangup``/``hangup-long``:
   a fresh client's subscription after 40 clients sent long expressions and
   hung up; ``testconn``: a TestConn behind the client's own 200 KB compile.
6. ``--churn [modify unsubscribe reconnect unotify fed-replace]`` (``bench/_churn.py``):
   the router's RSS while subscriptions are modified, removed, clients come
   and go, session-less channels open and close, a peer replaces its pull
   filter: what is replaced must be given back.
7. ``--scale`` / ``--scale-tcp`` (``bench/_scale.py``): matching at 1,000 to
   1,000,000 subscriptions of every kind of predicate -- numeric windows and
   string prefixes, and a realistic mix of stock thresholds, geographic
   boxes, directory prefixes, plain thresholds and 500 regex/contains --
   engine only and against elvind over TCP: notifications/s, predicates
   evaluated, registrations/s, bytes per subscription, cost growth.
8. ``--long-compile [N]``: the worker's time for a 4 KB expression of 350
   random terms (parse, check, compile, index analysis).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _churn import SCENARIOS as CHURN_SCENARIOS  # noqa: E402
from _churn import run_churn  # noqa: E402
from _common import (  # noqa: E402
    free_port,
    open_peer,
    percentile,
    process_cpu,
    start_elvind,
    stop_processes,
    wait_listening,
)
from _registration import run_reconnect, run_registration  # noqa: E402
from _scale import (  # noqa: E402
    WORKLOADS,
    median_pass,
    run_long_compile,
    run_scale,
    run_scale_tcp,
)
from _stall import SCENARIOS, run_stall  # noqa: E402

from elvin.protocol import NotifyEmit, SubAddRqst, decode_packet, frame  # noqa: E402

WINDOW = 2000
CHUNK = int(os.environ.get("BENCH_CHUNK", "1000"))  # notifications written per wake-up


# ---------------------------------------------------------------------------------------
# delivery over TCP

def start_router(port: int, archive: str | None = None) -> subprocess.Popen:
    extra = ["--archive", archive] if archive else []
    proc = start_elvind("--listen", f"elvin://127.0.0.1:{port}", *extra)
    wait_listening(proc, port, time.monotonic() + 20)
    return proc


async def delivery_bench(port: int, seconds: float, paced_count: int,
                         router_pid: int | None = None) -> dict:
    consumer = await open_peer(port, {"Send-Queue.Max-Length": 64 * 1024 * 1024})
    producer = await open_peer(port)
    await consumer.request(SubAddRqst(2, "require(Seq) && Kind == \"bench\""))
    received = 0
    latencies: list[float] = []
    done = asyncio.Event()
    target = [0]
    clock = time.perf_counter

    def on_deliver(body: bytes) -> None:
        nonlocal received
        packet = decode_packet(body)
        received += 1
        latencies.append(clock() - packet.attributes["T"])
        if received >= target[0]:
            done.set()

    consumer.on_deliver = on_deliver
    base = {"Kind": "bench", "Group": "elvin-dev", "From": "bench",
            "Message": "Has anyone seen the coffee biff today? The pot is empty again."}

    # -- saturated (windowed) throughput
    sent = 0
    warmup = 2000
    start = None
    start_received = 0
    deadline = None
    loop = asyncio.get_running_loop()
    while True:
        if start is None and received >= warmup:
            start, start_received = clock(), received
            cpu_router = process_cpu(router_pid) if router_pid else float("nan")
            cpu_self = time.process_time()
            deadline = start + seconds
            latencies.clear()
        if deadline is not None and clock() >= deadline:
            break
        room = WINDOW - (sent - received)
        if room > 0:
            chunk = []
            for _ in range(min(room, CHUNK)):
                chunk.append(frame(NotifyEmit({**base, "Seq": sent, "T": clock()})))
                sent += 1
            producer.transport.write(b"".join(chunk))
            await producer.can_write.wait()
        target[0] = received + 1
        done.clear()
        try:
            await asyncio.wait_for(done.wait(), 5)
        except TimeoutError:
            break
        await asyncio.sleep(0)
    elapsed = clock() - start
    rate = (received - start_received) / elapsed
    router_load = ((process_cpu(router_pid) - cpu_router) / elapsed if router_pid
                   else float("nan"))
    client_load = (time.process_time() - cpu_self) / elapsed
    loaded = (percentile(latencies, 0.5), percentile(latencies, 0.99))
    # let the window drain
    target[0] = sent
    if received < sent:
        done.clear()
        try:
            await asyncio.wait_for(done.wait(), 10)
        except TimeoutError:
            pass

    # -- paced latency
    latencies.clear()
    interval = 1 / 1000
    next_time = clock()
    for _ in range(paced_count):
        producer.transport.write(frame(NotifyEmit({**base, "Seq": sent, "T": clock()})))
        sent += 1
        next_time += interval
        delay = next_time - clock()
        if delay > 0:
            await asyncio.sleep(delay)
    target[0] = sent
    done.clear()
    if received < sent:
        try:
            await asyncio.wait_for(done.wait(), 10)
        except TimeoutError:
            pass
    paced = (percentile(latencies, 0.5), percentile(latencies, 0.99))
    for peer in (consumer, producer):
        peer.transport.close()
    await asyncio.sleep(0.05)
    del loop
    return {"rate": rate, "loaded": loaded, "paced": paced, "lost": sent - received,
            "router_cpu": router_load, "client_cpu": client_load}


def run_delivery(seconds: float, paced_count: int, archive: str | None = None) -> None:
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    port = free_port()
    proc = start_router(port, archive)
    if archive:
        print(f"router archives every notification to {archive} (--archive)")
    try:
        result = runner(delivery_bench(port, seconds, paced_count, proc.pid))
    finally:
        stop_processes([proc])
    print("== delivery over loopback TCP (router in its own process, 1 producer, "
          "1 consumer, 1 matching subscription)")
    print(f"delivered notifications/s   {result['rate']:>12,.0f}   "
          f"(window {WINDOW} in flight)")
    print(f"CPU used during that run    router {result['router_cpu']:.0%} of a core, "
          f"producer+consumer {result['client_cpu']:.0%} of a core "
          f"({os.cpu_count()} cores on this machine)")
    if result["router_cpu"] == result["router_cpu"]:
        per = result["router_cpu"] / result["rate"] * 1e6
        print(f"router CPU per notification {per:8.1f} us   (about {1e6 / per:,.0f}/s on one "
              "free core)")
    lp50, lp99 = result["loaded"]
    print(f"latency under that load     p50 {lp50 * 1e3:8.2f} ms   p99 {lp99 * 1e3:8.2f} ms")
    pp50, pp99 = result["paced"]
    print(f"latency at 1,000/s          p50 {pp50 * 1e3:8.3f} ms   p99 {pp99 * 1e3:8.3f} ms")
    if result["lost"]:
        print(f"(notifications not delivered: {result['lost']})")


# ---------------------------------------------------------------------------------------
# matching in-process

def build_engine(n: int, layout: str):
    from elvin.router.engine import Engine
    from elvin.router.server import Router

    engine = Engine()
    compile = Router().compile      # what the router registers subscriptions with
    cache: dict[str, object] = {}
    groups = 10 if layout == "A" else max(n // 100, 1)
    for i in range(n):
        g = i % groups
        w = (i // groups) % 10
        text = f'Group == "g{g}" && contains(Message, "word{w}")'
        compiled = cache.get(text)
        if compiled is None:
            compiled = cache[text] = compile(text)
        engine.add(f"client{i // 10}", text, compiled.ast, compiled.matches)  # type: ignore[attr-defined]
    return engine, groups


def run_matching(sizes: list[int], seconds: float) -> None:
    print("== matching (engine only, in-process): "
          "Group == \"gN\" && contains(Message, \"wordM\")")
    for layout, title in (("A", "1% of subscriptions match each notification"),
                          ("B", "10 subscriptions match each notification"),
                          ("B, hot", "as B, notifications over 10 groups only")):
        print(f"-- layout {layout}: {title}")
        print(f"{'subscriptions':>14} {'matching':>9} {'notifications/s':>16} "
              f"{'us/notification':>16} {'evaluated':>10}")
        costs = {}
        for n in sizes:
            t0 = time.perf_counter()
            engine, groups = build_engine(n, layout[0])
            if layout == "B, hot":
                groups = min(groups, 10)
            build = time.perf_counter() - t0
            rng = random.Random(1)
            notes = []
            for _ in range(1000):
                g, w = rng.randrange(groups), rng.randrange(10)
                notes.append({"Group": f"g{g}", "From": "someone", "Timeout": 10,
                              "Message": f"something about word{w} and more words"})
            matched = sum(sum(len(ids) for part in engine.match(a) for ids in part.values())
                          for a in notes[:100]) / 100
            per, evaluated = median_pass(engine, notes, seconds)
            costs[n] = per
            print(f"{n:>14,} {matched:>9.0f} {1 / per:>16,.0f} {per * 1e6:>16.1f} "
                  f"{evaluated:>10.1f}   (built in {build:.1f} s)")
        if len(costs) > 1:
            lo, hi = min(costs), max(costs)
            print(f"cost ratio {hi:,} / {lo:,} subscriptions: {costs[hi] / costs[lo]:.2f}x")


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of counts: {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"counts must be positive: {text!r}")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--only", choices=("delivery", "matching", "registration"))
    parser.add_argument("--subs", type=int, default=100_000,
                        help="subscriptions for the registration bench (default 100,000)")
    parser.add_argument("--per-conn", type=int, default=1000,
                        help="SubAddRqst pipelined per connection (default 1,000)")
    parser.add_argument("--workload", choices=("tickertape", "mix", "both"), default="both",
                        help="registration workload (default both)")
    parser.add_argument("--reconnect", action="store_true",
                        help="only the mass-reconnect bench")
    parser.add_argument("--stall", nargs="*", choices=sorted(SCENARIOS), metavar="SCENARIO",
                        help="only the no-stall benches (default: all of "
                             f"{', '.join(SCENARIOS)})")
    parser.add_argument("--churn", nargs="*", choices=sorted(CHURN_SCENARIOS),
                        metavar="SCENARIO",
                        help="only the memory-under-churn benches (default: all of "
                             f"{', '.join(CHURN_SCENARIOS)})")
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--per-client", type=int, default=100)
    parser.add_argument("--archive", metavar="DIR",
                        help="run the delivery bench with elvind --archive DIR")
    parser.add_argument("--scale", nargs="*", choices=sorted(WORKLOADS), metavar="WORKLOAD",
                        help="only matching at scale, engine only (default: all of "
                             f"{', '.join(WORKLOADS)})")
    parser.add_argument("--scale-tcp", nargs="*", choices=sorted(WORKLOADS),
                        metavar="WORKLOAD", help="only matching at scale over TCP")
    parser.add_argument("--sizes", type=_sizes, default=[1000, 10_000, 100_000, 1_000_000],
                        help="subscription counts for --scale/--scale-tcp "
                             "(default 1000,10000,100000,1000000)")
    parser.add_argument("--long-compile", nargs="?", type=int, const=50, metavar="N",
                        help="only the long-expression compile bench (N expressions, 50)")
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 5.0
    os.chdir(ROOT)
    if args.scale is not None:
        run_scale(args.scale or list(WORKLOADS), args.sizes, seconds / 2)
        return
    if args.scale_tcp is not None:
        run_scale_tcp(args.scale_tcp or list(WORKLOADS), args.sizes, seconds)
        return
    if args.long_compile is not None:
        run_long_compile(args.long_compile)
        return
    if args.reconnect:
        run_reconnect(args.clients, args.per_client)
        return
    if args.stall is not None:
        run_stall(args.stall or list(SCENARIOS))
        return
    if args.churn is not None:
        run_churn(args.churn or list(CHURN_SCENARIOS))
        return
    if args.only in (None, "registration"):
        workloads = ["tickertape", "mix"] if args.workload == "both" else [args.workload]
        run_registration(args.subs, args.per_conn, workloads)
    if args.only in (None, "delivery"):
        run_delivery(seconds, 1000 if args.quick else 3000, args.archive)
    if args.only in (None, "matching"):
        run_matching([1000, 10000, 100000], 0.5 if args.quick else 2.0)


if __name__ == "__main__":
    main()
