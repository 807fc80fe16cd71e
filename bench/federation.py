"""Federation benchmark: a chain of three routers, r0 <- r1 <- r2.

Run: .venv/bin/python bench/federation.py [--quick]

1. End to end over loopback TCP: three ``elvind`` processes federated in a
   chain (r1 dials r0, r2 dials r1, configured by ``[federation]`` TOML as
   ``elvin-domain apply`` writes it). A producer publishes at r0, a consumer
   subscribed at r2 receives two federation hops away. Printed: delivered
   notifications/s with at most WINDOW in flight (closed loop), latency
   p50/p99 under that load and at a paced 1,000/s; and, for comparison, the
   same with producer and consumer on one router (r0).
2. Forwarded traffic, selective versus broad subscriptions (the routers in
   this process, so their FedNotify counters can be read): 10,000
   notifications over 100 groups published at r0; at r2 either nothing, one
   client subscribed to 5 groups (selective), or one subscribed to
   ``require(Group)`` (broad). Printed: FedNotify packets on each link and
   notifications delivered at r2. Pull filters make the selective case cost
   5% of the broad one on every link.
2b. Crossings on a ring of four (r0-r1-r2-r3-r0), a subscriber at r2 only,
   notifications published at r0, ``routing = "trees"`` and ``"flood"``:
   FedNotify packets on each link each way and received at r3. With trees
   each notification crosses only r0->r1->r2 (pull filters follow the trees:
   nothing at or behind r3 wants it); flood sends it both ways round.
Part 1 runs the chain with trees and with flood, alternated, and also prints
the routers' CPU per notification: on a shared machine that, not the
throughput, says what the routing costs.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import (  # noqa: E402
    free_port,
    open_peer,
    percentile,
    process_cpu,
    start_elvind,
    stop_processes,
    wait_listening,
)

from elvin.protocol import NotifyEmit, SubAddRqst, decode_packet, frame  # noqa: E402

WINDOW = 2000


# ---------------------------------------------------------------------------------------
# 1. end to end through three elvind processes

def start_chain(tmp: Path, routing: str = "trees") -> tuple[list[subprocess.Popen], list[int]]:
    client_ports = [free_port() for _ in range(3)]
    fed_ports = [free_port() for _ in range(3)]
    procs = []
    for i in range(3):
        text = [f'listen = "elvin://127.0.0.1:{client_ports[i]}"', "discovery = false",
                "[federation]", f'router_domain = "r{i}"',
                f'listen = "ewaf://127.0.0.1:{fed_ports[i]}"', "debounce = 0.01",
                "reconnect_min = 0.1", f'routing = "{routing}"']
        if i > 0:
            text += ["[[federation.connect]]", f'router = "r{i - 1}"',
                     f'url = "ewaf://127.0.0.1:{fed_ports[i - 1]}"',
                     "outgoing = true", "incoming = true"]
        if i < 2:
            text += ["[[federation.accept]]", f'router = "r{i + 1}"',
                     "outgoing = true", "incoming = true"]
        path = tmp / f"r{i}.toml"
        path.write_text("\n".join(text) + "\n")
        procs.append(start_elvind("--config", str(path)))
    deadline = time.monotonic() + 30
    try:
        for proc, port in zip(procs, client_ports, strict=True):
            wait_listening(proc, port, deadline)
    except BaseException:
        stop_processes(procs)
        raise
    return procs, client_ports


async def throughput(producer_port: int, consumer_port: int, seconds: float,
                     paced: int, pids: tuple[int, ...] = ()) -> dict:
    consumer = await open_peer(consumer_port, {"Send-Queue.Max-Length": 64 * 1024 * 1024})
    producer = await open_peer(producer_port)
    await consumer.request(SubAddRqst(2, 'require(Seq) && Kind == "bench"'))
    clock = time.perf_counter
    received = 0
    latencies: list[float] = []
    arrived = asyncio.Event()

    def on_deliver(body: bytes) -> None:
        nonlocal received
        received += 1
        latencies.append(clock() - decode_packet(body).attributes["T"])
        arrived.set()

    consumer.on_deliver = on_deliver
    base = {"Kind": "bench", "Group": "elvin-dev", "From": "bench",
            "Message": "Has anyone seen the coffee biff today? The pot is empty again."}
    # wait until the subscription's pull filter has reached r0 (probe until one arrives)
    probe_deadline = clock() + 20
    while received == 0:
        if clock() > probe_deadline:
            raise SystemExit("no notification crossed the federation links")
        producer.transport.write(frame(NotifyEmit({**base, "Seq": -1, "T": clock()})))
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    received = 0
    sent = 0
    warmup = 2000
    start = deadline = None
    start_received = 0
    while True:
        if start is None and received >= warmup:
            start, start_received = clock(), received
            deadline = start + seconds
            latencies.clear()
            cpu_before = sum(process_cpu(pid) for pid in pids)
        if deadline is not None and clock() >= deadline:
            break
        room = WINDOW - (sent - received)
        if room > 0:
            chunk = []
            for _ in range(min(room, 500)):
                chunk.append(frame(NotifyEmit({**base, "Seq": sent, "T": clock()})))
                sent += 1
            producer.transport.write(b"".join(chunk))
            await producer.can_write.wait()
        arrived.clear()
        try:
            await asyncio.wait_for(arrived.wait(), 10)
        except TimeoutError:
            break
    elapsed = clock() - start if start is not None else float("nan")
    rate = (received - start_received) / elapsed
    # the routers' CPU per delivered notification: what the routing costs,
    # whatever else the machine is doing (throughput follows it when the
    # routers have the cores to themselves)
    cpu = ((sum(process_cpu(pid) for pid in pids) - cpu_before)
           / max(1, received - start_received)) if pids and start is not None else float("nan")
    loaded = (percentile(latencies, 0.5), percentile(latencies, 0.99))
    # drain, then paced
    drain_deadline = clock() + 10
    while received < sent and clock() < drain_deadline:
        await asyncio.sleep(0.01)
    latencies.clear()
    target = received + paced
    interval = 1 / 1000
    next_at = clock()
    for i in range(paced):
        producer.transport.write(frame(NotifyEmit({**base, "Seq": sent + i, "T": clock()})))
        next_at += interval
        delay = next_at - clock()
        if delay > 0:
            await asyncio.sleep(delay)
    end_deadline = clock() + 10
    while received < target and clock() < end_deadline:
        await asyncio.sleep(0.01)
    idle = (percentile(latencies, 0.5), percentile(latencies, 0.99))
    consumer.transport.close()
    producer.transport.close()
    return {"rate": rate, "loaded": loaded, "idle": idle, "cpu": cpu}


def print_throughput(label: str, result: dict) -> None:
    print(f"{label:<34} {result['rate']:>9,.0f} notifications/s (window {WINDOW})")
    p50, p99 = result["loaded"]
    print(f"{'  latency under that load':<34} p50 {p50 * 1e3:8.2f} ms   p99 {p99 * 1e3:8.2f} ms")
    p50, p99 = result["idle"]
    print(f"{'  latency at 1,000/s':<34} p50 {p50 * 1e3:8.3f} ms   p99 {p99 * 1e3:8.3f} ms")


def end_to_end(seconds: float, paced: int, rounds: int = 1) -> None:
    """Trees (the default) and flood on the same chain, alternated ``rounds``
    times so that a change in the machine's load hits both alike; the best
    round of each is printed, and trees as a share of flood."""
    print("== end to end: chain r0 <- r1 <- r2, three elvind processes, loopback TCP")
    best: dict[str, dict] = {}
    cpus: dict[str, list[float]] = {}
    local = None
    for _ in range(rounds):
        for routing in ("trees", "flood"):
            with tempfile.TemporaryDirectory() as tmp:
                procs, ports = start_chain(Path(tmp), routing)
                try:
                    result = asyncio.run(throughput(ports[0], ports[2], seconds, paced,
                                                    tuple(p.pid for p in procs)))
                    if local is None:
                        local = asyncio.run(throughput(ports[0], ports[0], seconds, paced))
                finally:
                    stop_processes(procs)
            print(f"  round: {routing:<5} {result['rate']:>9,.0f} notifications/s, routers' "
                  f"CPU {result['cpu'] * 1e6:6.1f} us per notification")
            if routing not in best or result["rate"] > best[routing]["rate"]:
                best[routing] = result
            cpus.setdefault(routing, []).append(result["cpu"])
    print_throughput('r0 -> r2, routing = "trees"', best["trees"])
    print_throughput('r0 -> r2, routing = "flood"', best["flood"])
    print(f"{'  trees / flood, best rounds':<34} "
          f"{best['trees']['rate'] / best['flood']['rate']:>9.1%}")
    trees_cpu, flood_cpu = min(cpus["trees"]), min(cpus["flood"])
    print(f"{'  routers CPU per notification':<34} trees {trees_cpu * 1e6:.1f} us, flood "
          f"{flood_cpu * 1e6:.1f} us: trees deliver {flood_cpu / trees_cpu:.1%} of flood's "
          "rate per CPU second")
    print_throughput("r0 -> r0 (same router, for scale)", local)
    print(f"machine: {os.cpu_count()} cores; producer and consumer share this process")


# ---------------------------------------------------------------------------------------
# 1b. the routing's cost on the chain: the routers' own CPU per notification

def chain_cpu(count: int, rounds: int) -> None:
    """The chain again, its three routers in this process (one thread each),
    with ``routing = "trees"`` and ``"flood"`` alternated: the CPU time of the
    three router threads per notification delivered at r2 (each thread's own
    clock, so what the machine's other processes do is not counted)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from integration.federation_util import (  # type: ignore[import-not-found]
        federated_routers,
        pull_wants,
        stop_all,
        wait_linked,
    )

    print(f"== routing cost on the chain: router threads' CPU per notification, {count:,} "
          f"notifications r0 -> r2, {rounds} rounds each")
    costs: dict[str, list[float]] = {"trees": [], "flood": []}
    for _ in range(rounds):
        for routing in costs:
            routers = federated_routers(3, routing=routing)
            try:
                wait_linked(routers)
                costs[routing].append(asyncio.run(_chain_cpu_case(routers, count, pull_wants)))
            finally:
                stop_all(routers)
    for routing, values in costs.items():
        values.sort()
        print(f"  {routing:<6} median {values[len(values) // 2] * 1e6:6.1f} us, best "
              f"{values[0] * 1e6:6.1f} us  ({' '.join(f'{v * 1e6:.1f}' for v in values)})")
    for label, pick in (("median", lambda v: v[len(v) // 2]), ("best", lambda v: v[0])):
        trees, flood = pick(costs["trees"]), pick(costs["flood"])
        print(f"  {label + ':':<7} trees cost {trees / flood - 1:+.1%} CPU per notification "
              f"against flood: {flood / trees:.1%} of flood's throughput when the routers "
              "are CPU bound")


async def _chain_cpu_case(routers, count: int, pull_wants) -> float:
    def thread_cpu() -> float:
        return sum(time.clock_gettime(time.pthread_getcpuclockid(r._thread.ident))
                   for r in routers)

    consumer = await open_peer(routers[2].port, {"Send-Queue.Max-Length": 64 * 1024 * 1024})
    received = 0

    def on_deliver(body: bytes) -> None:
        nonlocal received
        received += 1

    consumer.on_deliver = on_deliver
    await consumer.request(SubAddRqst(2, 'require(Seq) && Kind == "bench"'))
    deadline = time.monotonic() + 20
    while not pull_wants(routers[0], "r1", "Seq"):
        if time.monotonic() > deadline:
            raise SystemExit("the subscription never reached r0")
        await asyncio.sleep(0.01)
    producer = await open_peer(routers[0].port)
    base = {"Kind": "bench", "Group": "elvin-dev", "From": "bench",
            "Message": "Has anyone seen the coffee biff today? The pot is empty again."}

    async def publish(n: int, first: int) -> None:
        sent = 0
        while sent < n:
            if sent - (received - first_received) < WINDOW:
                chunk = min(500, n - sent)
                producer.transport.write(b"".join(
                    frame(NotifyEmit({**base, "Seq": first + sent + i})) for i in range(chunk)))
                sent += chunk
                await producer.can_write.wait()
            await asyncio.sleep(0.001)
        deadline = time.monotonic() + 60
        while received - first_received < n and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    first_received = 0
    await publish(2000, 0)                      # warm up
    first_received = received
    before = thread_cpu()
    await publish(count, 10_000)
    used = thread_cpu() - before
    delivered = received - first_received
    consumer.transport.close()
    producer.transport.close()
    return used / max(1, delivered)


# ---------------------------------------------------------------------------------------
# 2. forwarded traffic, selective versus broad

def traffic(count: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from integration.federation_util import (  # type: ignore[import-not-found]
        fed_stats,
        federated_routers,
        link_stats,
        remote_pull,
        stop_all,
        wait_linked,
        wait_until,
    )

    print(f"== forwarded traffic: {count:,} notifications over 100 groups published at r0")
    print(f"{'subscriptions at r2':<30} {'r0->r1':>8} {'r1->r2':>8} {'delivered':>10} "
          f"{'FedNotify/notification':>23}")
    cases = [("none", []),
             ("selective: 5 groups", [" || ".join(f'Group == "g{g}"' for g in range(5))]),
             ("broad: require(Group)", ["require(Group)"])]
    for label, subscriptions in cases:
        routers = federated_routers(3)
        try:
            wait_linked(routers)
            delivered = asyncio.run(_traffic_case(routers, subscriptions, count,
                                                  remote_pull, wait_until))
            # minus the end-of-stream sentinel, which crosses both links
            first = (link_stats(routers[0], "r1") or {}).get("fed_notify_sent", 0) - 1
            second = (link_stats(routers[1], "r2") or {}).get("fed_notify_sent", 0) - 1
            assert fed_stats(routers[2])["fed_notify_sent"] == 0
            print(f"{label:<30} {first:>8,} {second:>8,} {delivered:>10,} "
                  f"{(first + second) / count:>23.3f}")
        finally:
            stop_all(routers)


async def _traffic_case(routers, subscriptions, count, remote_pull, wait_until) -> int:
    r0, r1, r2 = routers
    consumer = await open_peer(r2.port, {"Send-Queue.Max-Length": 64 * 1024 * 1024})
    received = 0

    def on_deliver(body: bytes) -> None:
        nonlocal received
        received += 1

    consumer.on_deliver = on_deliver
    for i, expression in enumerate(subscriptions):
        await consumer.request(SubAddRqst(10 + i, expression))
    if subscriptions:
        deadline = time.monotonic() + 10
        while remote_pull(r0, "r1") in (False, None):
            if time.monotonic() > deadline:
                raise SystemExit("pull filter never reached r0")
            await asyncio.sleep(0.01)
    producer = await open_peer(r0.port)
    expected = 0
    chunk = []
    for n in range(count):
        group = n % 100
        if subscriptions and (group < 5 or "require" in subscriptions[0]):
            expected += 1
        chunk.append(frame(NotifyEmit({"Group": f"g{group}", "Seq": n,
                                       "Message": "status update " * 4})))
        if len(chunk) == 500:
            producer.transport.write(b"".join(chunk))
            chunk = []
            await producer.can_write.wait()
            await asyncio.sleep(0)
    producer.transport.write(b"".join(chunk))
    # a sentinel everyone wants marks the end of the stream
    await consumer.request(SubAddRqst(99, 'Group == "end"'))
    deadline = time.monotonic() + 10
    while 'end' not in repr(remote_pull(r0, "r1")) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    producer.transport.write(frame(NotifyEmit({"Group": "end"})))
    deadline = time.monotonic() + 60
    while received < expected + 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    consumer.transport.close()
    producer.transport.close()
    return received - 1


# ---------------------------------------------------------------------------------------
# 2b. crossings on a ring: what each link carries, trees versus flood

RING4 = [(1, 0), (2, 1), (3, 2), (3, 0)]


def crossings(count: int) -> None:
    """Ring r0-r1-r2-r3-r0, a subscriber at r2 only, ``count`` notifications
    published at r0: FedNotify packets on each link, each way, and at r3
    (nothing at or behind r3 on r0's tree wants them)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from integration.federation_util import (  # type: ignore[import-not-found]
        fed_stats,
        federated_routers,
        link_stats,
        pull_wants,
        stop_all,
        wait_linked,
    )

    print(f"== crossings: ring of 4, subscriber at r2 only, {count:,} notifications "
          "published at r0 (in-process routers)")
    directions = [(a, b) for x, y in RING4 for a, b in ((y, x), (x, y))]
    print(f"{'routing':<8} " + " ".join(f"{f'r{a}->r{b}':>7}" for a, b in directions)
          + f" {'at r3':>7} {'max per link (both ways)':>24}")
    for routing in ("trees", "flood"):
        routers = federated_routers(4, RING4, routing=routing)
        try:
            wait_linked(routers, RING4, timeout=60)
            asyncio.run(_crossing_case(routers, count, pull_wants))
            carried = [(link_stats(routers[a], f"r{b}") or {}).get("fed_notify_sent", 0)
                       for a, b in directions]
            at_r3 = fed_stats(routers[3])["fed_notify_received"]
            worst = max(carried[i] + carried[i + 1] for i in range(0, len(carried), 2))
            print(f"{routing:<8} " + " ".join(f"{c:>7,}" for c in carried)
                  + f" {at_r3:>7,} {worst / count:>24.2f}")
        finally:
            stop_all(routers)


async def _crossing_case(routers, count: int, pull_wants) -> None:
    consumer = await open_peer(routers[2].port, {"Send-Queue.Max-Length": 64 * 1024 * 1024})
    received = 0

    def on_deliver(body: bytes) -> None:
        nonlocal received
        received += 1

    consumer.on_deliver = on_deliver
    await consumer.request(SubAddRqst(10, "require(Seq)"))
    deadline = time.monotonic() + 20
    while not (pull_wants(routers[0], "r1", "Seq") and pull_wants(routers[0], "r3", "Seq")):
        if time.monotonic() > deadline:
            raise SystemExit("r2's subscription never reached r0 both ways")
        await asyncio.sleep(0.01)
    producer = await open_peer(routers[0].port)
    producer.transport.write(b"".join(frame(NotifyEmit({"Seq": n})) for n in range(count)))
    deadline = time.monotonic() + 60
    while received < count and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)              # a copy by another way would have come by now
    consumer.transport.close()
    producer.transport.close()


# ---------------------------------------------------------------------------------------
# 3. topologies with cycles: duplicates, loss, delivered/s; failover around a dead router

TOPOLOGIES: dict[str, tuple[int, list[tuple[int, int]]]] = {
    "ring of 3": (3, [(1, 0), (2, 1), (2, 0)]),
    "ring of 4": (4, [(1, 0), (2, 1), (3, 2), (3, 0)]),
    "full mesh of 4": (4, [(a, b) for a in range(4) for b in range(a)]),
}


class Routers:
    """``n`` elvind processes federated over ``links`` ((a, b): a dials b,
    everything both ways), each with its own ports; ``kill``/``restart`` one
    by index (SIGKILL, then the same configuration and ports again)."""

    def __init__(self, tmp: Path, n: int, links: list[tuple[int, int]]) -> None:
        self.tmp = tmp
        self.client_ports = [free_port() for _ in range(n)]
        self.fed_ports = [free_port() for _ in range(n)]
        self.configs = []
        for i in range(n):
            text = [f'listen = "elvin://127.0.0.1:{self.client_ports[i]}"',
                    "discovery = false", "[federation]", f'router_domain = "r{i}"',
                    f'listen = "ewaf://127.0.0.1:{self.fed_ports[i]}"', "debounce = 0.01",
                    "reconnect_min = 0.05", "reconnect_max = 0.2"]
            for a, b in links:
                if a == i:
                    text += ["[[federation.connect]]", f'router = "r{b}"',
                             f'url = "ewaf://127.0.0.1:{self.fed_ports[b]}"',
                             "outgoing = true", "incoming = true"]
                elif b == i:
                    text += ["[[federation.accept]]", f'router = "r{a}"',
                             "outgoing = true", "incoming = true"]
            path = tmp / f"r{i}.toml"
            path.write_text("\n".join(text) + "\n")
            self.configs.append(path)
        self.procs: list[subprocess.Popen | None] = [self._start(i) for i in range(n)]
        deadline = time.monotonic() + 30
        try:
            for proc, port in zip(self.procs, self.client_ports, strict=True):
                wait_listening(proc, port, deadline)
        except BaseException:
            self.stop()
            raise

    def _start(self, i: int) -> subprocess.Popen:
        return start_elvind("--config", str(self.configs[i]), stderr=subprocess.DEVNULL)

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.procs[i] = None

    def restart(self, i: int) -> None:
        self.procs[i] = self._start(i)
        wait_listening(self.procs[i], self.client_ports[i], time.monotonic() + 30)

    def stop(self) -> None:
        stop_processes([p for p in self.procs if p is not None])


class Tally:
    """Deliveries at one subscriber, counted per (origin, Seq)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: collections.Counter = collections.Counter()
        self.times: dict[tuple, float] = {}
        self.arrivals: list[tuple] = []
        self.total = 0

    def __call__(self, body: bytes) -> None:
        attrs = decode_packet(body).attributes
        key = (attrs.get("Origin"), attrs.get("Seq"))
        self.counts[key] += 1
        self.total += 1
        self.arrivals.append(key)
        self.times.setdefault(key, time.perf_counter())


async def subscribers(ports: list[int]) -> tuple[list, list[Tally]]:
    peers, tallies = [], []
    for i, port in enumerate(ports):
        peer = await open_peer(port, {"Send-Queue.Max-Length": 64 * 1024 * 1024})
        tally = Tally(f"r{i}")
        peer.on_deliver = tally
        await peer.request(SubAddRqst(2, "require(Seq)"))
        peers.append(peer)
        tallies.append(tally)
    return peers, tallies


async def wait_quiet(tallies: list[Tally], want: int, quiet: float = 1.0,
                     limit: float = 60.0) -> None:
    """Until every tally has ``want`` distinct keys and nothing arrived for ``quiet`` s."""
    deadline = time.monotonic() + limit
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        total = sum(t.total for t in tallies)
        if total != last:
            last, since = total, time.monotonic()
        elif time.monotonic() - since >= quiet and \
                all(len(t.counts) >= want for t in tallies):
            return
        await asyncio.sleep(0.05)


async def probe_all(producers: list, tallies: list[Tally], limit: float = 30.0) -> None:
    """Publish probes (Seq -1) at every router until every subscriber has had
    one from every router: the federation carries everything everywhere."""
    deadline = time.monotonic() + limit
    while not all(all((f"r{i}", -1) in t.counts for i in range(len(producers)))
                  for t in tallies):
        if time.monotonic() > deadline:
            raise SystemExit("the federation never carried a probe everywhere")
        for i, producer in enumerate(producers):
            producer.transport.write(frame(NotifyEmit({"Origin": f"r{i}", "Seq": -1})))
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)               # pull filters settle
    for t in tallies:
        t.counts.clear()
        t.times.clear()
        t.total = 0


async def topology_case(ports: list[int], per_router: int, burst: int) -> dict:
    n = len(ports)
    peers, tallies = await subscribers(ports)
    producers = [await open_peer(port) for port in ports]
    await probe_all(producers, tallies)
    for i, producer in enumerate(producers):
        producer.transport.write(b"".join(
            frame(NotifyEmit({"Origin": f"r{i}", "Seq": s})) for s in range(per_router)))
    await wait_quiet(tallies, n * per_router)
    expected = {(f"r{i}", s) for i in range(n) for s in range(per_router)}
    duplicates = sum(max(0, t.counts[k] - 1) for t in tallies for k in expected)
    lost = sum(1 for t in tallies for k in expected if t.counts[k] == 0)
    for t in tallies:
        t.counts.clear()
        t.total = 0
    # delivered/s: every router publishes `burst` at once
    start = time.perf_counter()
    for i, producer in enumerate(producers):
        chunk = b"".join(frame(NotifyEmit({"Origin": f"r{i}", "Seq": 1000 + s,
                                           "Message": "status update " * 4}))
                         for s in range(burst))
        producer.transport.write(chunk)
    want = n * n * burst
    deadline = time.monotonic() + 120
    while sum(len(t.counts) for t in tallies) < want and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - start
    unique = sum(len(t.counts) for t in tallies)
    await wait_quiet(tallies, n * burst, quiet=0.5)
    burst_dups = sum(t.total for t in tallies) - unique
    for peer in peers + producers:
        peer.transport.close()
    return {"duplicates": duplicates, "lost": lost, "rate": unique / elapsed,
            "burst_duplicates": burst_dups, "expected": n * n * per_router}


def topologies(per_router: int, burst: int) -> None:
    print(f"== cycles: a subscriber to everything at every router, {per_router} numbered "
          f"notifications published at every router (elvind processes, loopback)")
    print(f"{'topology':<16} {'deliveries':>10} {'duplicates':>10} {'lost':>5} "
          f"{'delivered/s':>12} {'burst dups':>10}")
    for name, (n, links) in TOPOLOGIES.items():
        with tempfile.TemporaryDirectory() as tmp:
            routers = Routers(Path(tmp), n, links)
            try:
                r = asyncio.run(topology_case(routers.client_ports, per_router, burst))
            finally:
                routers.stop()
        print(f"{name:<16} {r['expected']:>10} {r['duplicates']:>10} {r['lost']:>5} "
              f"{r['rate']:>12,.0f} {r['burst_duplicates']:>10}")
    print(f"  delivered/s: distinct notifications delivered per second with {burst} "
          "published at every router at once; burst dups: duplicates among them")


async def failover_case(routers: Routers, victim: int, publisher: int, listener: int,
                        interval: float) -> dict:
    ports = routers.client_ports
    peers, tallies = await subscribers(ports)
    producers = [await open_peer(port) for port in ports]
    await probe_all(producers, tallies)
    producer = producers[publisher]
    tally = tallies[listener]
    sent: dict[int, float] = {}
    seq = 0
    stop = asyncio.Event()

    async def publish() -> None:
        nonlocal seq
        while not stop.is_set():
            sent[seq] = time.perf_counter()
            producer.transport.write(frame(NotifyEmit({"Origin": f"r{publisher}",
                                                       "Seq": seq})))
            seq += 1
            await asyncio.sleep(interval)

    task = asyncio.create_task(publish())
    await asyncio.sleep(0.5)
    killed_at = time.perf_counter()
    killed_seq = seq
    await asyncio.get_running_loop().run_in_executor(None, routers.kill, victim)
    deadline = time.monotonic() + 20
    after = None
    while after is None and time.monotonic() < deadline:
        got = [tally.times[(f"r{publisher}", s)] for s in range(killed_seq, seq)
               if (f"r{publisher}", s) in tally.times]
        if got:
            after = min(got) - killed_at
        await asyncio.sleep(0.005)
    await asyncio.sleep(1.0)
    steady_from = seq                  # published once the survivors have noticed
    await asyncio.sleep(1.0)
    steady_to = seq
    # the router comes back: publishing goes on through the rejoin
    await asyncio.get_running_loop().run_in_executor(None, routers.restart, victim)
    rejoin_from = seq
    await asyncio.sleep(2.0)
    rejoin_to = seq
    stop.set()
    await task
    await asyncio.sleep(1.0)

    def check(first: int, last: int) -> tuple[int, int, int]:
        dup = lost = late = 0
        for t in (tallies[i] for i in range(len(ports)) if i != victim):
            for s in range(first, last):
                count = t.counts[(f"r{publisher}", s)]
                dup += max(0, count - 1)
                lost += count == 0
            seqs = [s for o, s in t.arrivals if o == f"r{publisher}" and first <= s < last]
            late += sum(1 for a, b in zip(seqs, seqs[1:], strict=False) if b < a)
        return dup, lost, late

    result = {"failover": after, "steady": check(steady_from, steady_to),
              "rejoin": check(rejoin_from, rejoin_to),
              "steady_n": steady_to - steady_from, "rejoin_n": rejoin_to - rejoin_from}
    for peer in peers + producers:
        peer.transport.close()
    return result


def failover(interval: float) -> None:
    n, links = TOPOLOGIES["ring of 4"]
    print(f"== failover: ring of 4, r0 publishes every {interval * 1e3:.0f} ms, "
          "r1 (on the path r0 -> r1 -> r2) is killed with SIGKILL, then restarted")
    with tempfile.TemporaryDirectory() as tmp:
        routers = Routers(Path(tmp), n, links)
        try:
            r = asyncio.run(failover_case(routers, victim=1, publisher=0, listener=2,
                                          interval=interval))
        finally:
            routers.stop()
    if r["failover"] is None:
        print("  nothing reached r2 after the kill")
    else:
        print(f"  kill -> first delivery at r2 on the new path: {r['failover'] * 1e3:.1f} ms")
    dup, lost, late = r["steady"]
    print(f"  after the survivors noticed: {r['steady_n']} published, at the 3 survivors "
          f"{dup} duplicates, {lost} lost, {late} out of order")
    dup, lost, late = r["rejoin"]
    print(f"  from the restart on (2 s, through the rejoin): {r['rejoin_n']} published, "
          f"{dup} duplicates, {lost} lost, {late} out of order")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--only", choices=("chain", "cost", "traffic", "crossings", "cycles",
                                           "failover"),
                        help="run one part only")
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.only in (None, "chain"):
        end_to_end(seconds=2.0 if args.quick else 5.0, paced=500 if args.quick else 2000,
                   rounds=1 if args.quick else 5)
    if args.only in (None, "cost"):
        chain_cpu(5000 if args.quick else 10000, rounds=3 if args.quick else 7)
    if args.only in (None, "traffic"):
        traffic(2000 if args.quick else 10000)
    if args.only in (None, "crossings"):
        crossings(1000 if args.quick else 5000)
    if args.only in (None, "cycles"):
        topologies(per_router=15, burst=500 if args.quick else 2000)
    if args.only in (None, "failover"):
        failover(interval=0.002)


if __name__ == "__main__":
    main()
