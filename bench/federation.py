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
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
    start_elvind,
    stop_processes,
    wait_listening,
)

from elvin.protocol import NotifyEmit, SubAddRqst, decode_packet, frame  # noqa: E402

WINDOW = 2000


# ---------------------------------------------------------------------------------------
# 1. end to end through three elvind processes

def start_chain(tmp: Path) -> tuple[list[subprocess.Popen], list[int]]:
    client_ports = [free_port() for _ in range(3)]
    fed_ports = [free_port() for _ in range(3)]
    procs = []
    for i in range(3):
        text = [f'listen = "elvin://127.0.0.1:{client_ports[i]}"', "discovery = false",
                "[federation]", f'router_domain = "r{i}"',
                f'listen = "ewaf://127.0.0.1:{fed_ports[i]}"', "debounce = 0.01",
                "reconnect_min = 0.1"]
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
                     paced: int) -> dict:
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
    return {"rate": rate, "loaded": loaded, "idle": idle}


def print_throughput(label: str, result: dict) -> None:
    print(f"{label:<34} {result['rate']:>9,.0f} notifications/s (window {WINDOW})")
    p50, p99 = result["loaded"]
    print(f"{'  latency under that load':<34} p50 {p50 * 1e3:8.2f} ms   p99 {p99 * 1e3:8.2f} ms")
    p50, p99 = result["idle"]
    print(f"{'  latency at 1,000/s':<34} p50 {p50 * 1e3:8.3f} ms   p99 {p99 * 1e3:8.3f} ms")


def end_to_end(seconds: float, paced: int) -> None:
    print("== end to end: chain r0 <- r1 <- r2, three elvind processes, loopback TCP")
    with tempfile.TemporaryDirectory() as tmp:
        procs, ports = start_chain(Path(tmp))
        try:
            remote = asyncio.run(throughput(ports[0], ports[2], seconds, paced))
            local = asyncio.run(throughput(ports[0], ports[0], seconds, paced))
        finally:
            stop_processes(procs)
    print_throughput("r0 -> r2 (two federation hops)", remote)
    print_throughput("r0 -> r0 (same router, for scale)", local)
    print(f"machine: {os.cpu_count()} cores; producer and consumer share this process")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    args = parser.parse_args()
    end_to_end(seconds=2.0 if args.quick else 5.0, paced=500 if args.quick else 2000)
    traffic(2000 if args.quick else 10000)


if __name__ == "__main__":
    main()
