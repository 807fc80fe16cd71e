"""Subscription registration benches for ``bench/router.py`` (not a bench itself).

* ``run_registration``: N subscriptions sent pipelined (``per_conn`` SubAddRqst
  per connection, all connections at once) to a fresh ``elvind``; printed:
  subscriptions acknowledged per second, the router's RSS growth per
  subscription, and the worst publish -> deliver round trip of a *bystander*
  (its own process: the bench's own work must not be counted as the
  router's) while the registration ran.
* ``run_reconnect``: ``clients`` x ``per_client`` subscriptions registered,
  the router restarted, every client reconnects and re-subscribes at once;
  printed: time until the last subscription is acknowledged, and the
  bystander's worst round trip meanwhile.

The clients are raw-codec protocols that count replies without decoding them
(decoding 100,000 replies here would slow the bench, not the router).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _common import (
    free_port,
    open_peer,
    process_cpu,
    start_elvind,
    stop_processes,
    wait_listening,
)

from elvin.protocol import (
    ConnRqst,
    FrameDecoder,
    NotifyEmit,
    PacketId,
    SubAddRqst,
    decode_packet,
    frame,
)

SUB_RPLY = int(PacketId.SUB_RPLY)
NACK = int(PacketId.NACK)
CONN_RPLY = int(PacketId.CONN_RPLY)

#: subscription texts by workload: ``f(i)`` is the i-th subscription
WORKLOADS: dict[str, Callable[[int], str]] = {
    "tickertape": lambda i: f'Group == "g{i}" && require(Message)',
    # a mix of the language's common kinds of test, constants all different
    "mix": lambda i: (
        f'Group == "g{i}" && require(Message)',
        f'begins-with(Subject, "topic{i}") && From == "user{i % 977}"',
        f'regex(Message, "^alert-{i}[0-9]+$")',
        f'fold-case(User) == "person{i}" || Host == "host{i}"',
        f'Price * 2 > {i} && Volume - 10 <= {i * 3}',
    )[i % 5],
    # numeric windows and string prefixes (``bench/_scale.py``'s rangeprefix)
    "rangeprefix": lambda i: (f"Seq >= {20 * (i // 2) + 10} && Seq < {20 * (i // 2) + 20}"
                              if i % 2 == 0 else f'begins-with(Text, "p{i // 2}")'),
}


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def start_router(port: int, *extra: str) -> object:
    proc = start_elvind("--listen", f"elvin://127.0.0.1:{port}", *extra)
    wait_listening(proc, port, time.monotonic() + 20)
    return proc


class Counter(asyncio.Protocol):
    """Counts SubRply / Nack frames; ``done`` is set when ``expected`` arrived."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder()
        self.acks = 0
        self.nacks = 0
        self.expected = 0
        self.connected = asyncio.get_running_loop().create_future()
        self.done = asyncio.Event()
        self.transport = None
        self.nack_sample: object = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        for body in self.decoder.feed_frames(data):
            pid = body[3]
            if pid == SUB_RPLY:
                self.acks += 1
            elif pid == NACK:
                self.nacks += 1
                if self.nack_sample is None:
                    self.nack_sample = decode_packet(body)
            elif pid == CONN_RPLY and not self.connected.done():
                self.connected.set_result(True)
                continue
            else:
                continue
            if self.acks + self.nacks >= self.expected:
                self.done.set()

    def connection_lost(self, exc) -> None:
        if not self.connected.done():
            self.connected.set_exception(ConnectionError("closed before ConnRply"))
        self.done.set()


async def connect_counter(port: int, options: dict | None = None) -> Counter:
    """A connected ``Counter``; retried, as a client would, while the router
    refuses the socket (not listening yet, or its door closed it before
    ConnRply: a burst of connects from one address past
    ``max-pre-session-per-address``)."""
    loop = asyncio.get_running_loop()
    for attempt in range(50):
        try:
            _, peer = await loop.create_connection(Counter, "127.0.0.1", port)
            peer.transport.write(frame(ConnRqst(1, 4, 0, options or {})))
            await asyncio.wait_for(peer.connected, 60)
            return peer
        except (OSError, ConnectionError):
            if attempt == 49:
                raise
            await asyncio.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def request_block(texts: list[str], first_xid: int = 10) -> bytes:
    return b"".join(frame(SubAddRqst(first_xid + i, t)) for i, t in enumerate(texts))


async def register(peers: list[Counter], blocks: list[bytes], counts: list[int],
                   timeout: float) -> float:
    """Send every block at once; seconds until every reply arrived."""
    for peer, count in zip(peers, counts, strict=True):
        peer.expected += count
    start = time.perf_counter()
    for peer, block in zip(peers, blocks, strict=True):
        peer.transport.write(block)
    await asyncio.wait_for(asyncio.gather(*(p.done.wait() for p in peers)), timeout)
    return time.perf_counter() - start


# ------------------------------------------------------------------------------------
# the bystander: a publisher and a subscriber of its own, in its own process

def _bystander_main(port: int, conn, interval: float, nice: int | None) -> None:
    if nice is not None:
        # back to the router's priority: the bench driving the load may run
        # below it (``bench/loop.py --driver-nice``), the bystander must not
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError as exc:
            print(f"the bystander cannot run at niceness {nice} ({exc}): its round trips "
                  "count the driver's time too", file=sys.stderr)
    asyncio.run(_bystander(port, conn, interval))


async def _bystander(port: int, conn, interval: float) -> None:
    consumer = await open_peer(port)
    producer = await open_peer(port)
    await consumer.request(SubAddRqst(2, 'require(Bystander)'))
    arrived: asyncio.Queue = asyncio.Queue()
    consumer.on_deliver = lambda body: arrived.put_nowait(time.perf_counter())
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    loop.add_reader(conn.fileno(), lambda: stop.done() or stop.set_result(True))
    conn.send("ready")
    worst = 0.0
    rtts: list[float] = []
    seq = 0
    while not stop.done():
        seq += 1
        sent = time.perf_counter()
        producer.transport.write(frame(NotifyEmit({"Bystander": seq})))
        got = loop.create_task(arrived.get())
        await asyncio.wait([got, stop], return_when=asyncio.FIRST_COMPLETED)
        if not got.done():
            got.cancel()
            # the last one is still in flight: count how long it has waited
            worst = max(worst, time.perf_counter() - sent)
            break
        rtt = got.result() - sent
        rtts.append(rtt)
        worst = max(worst, rtt)
        await asyncio.sleep(interval)
    conn.recv()
    rtts.sort()
    conn.send({"worst": worst, "count": len(rtts),
               "p50": rtts[len(rtts) // 2] if rtts else float("nan")})


class Bystander:
    """``with Bystander(port) as b: ...``; then ``b.result``. ``nice``: the
    niceness the bystander's process sets itself to (that of the router, when
    the driver runs below it)."""

    def __init__(self, port: int, interval: float = 0.005, nice: int | None = None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_bystander_main, args=(port, child, interval, nice),
                                 daemon=True)
        self.result: dict = {}

    def __enter__(self) -> Bystander:
        self._proc.start()
        if not self._conn.poll(30):
            raise SystemExit("the bystander did not start")
        self._conn.recv()
        return self

    def __exit__(self, *exc) -> None:
        self._conn.send("stop")
        if self._conn.poll(30):
            self.result = self._conn.recv()
        self._proc.join(5)


# ------------------------------------------------------------------------------------

async def _registration(port: int, pid: int, n: int, per_conn: int, workload: str) -> dict:
    make = WORKLOADS[workload]
    conns = max(1, (n + per_conn - 1) // per_conn)
    options = {"Subscription.Max-Count": per_conn + 16}
    peers = [await connect_counter(port, options) for _ in range(conns)]
    texts = [make(i) for i in range(n)]
    chunks = [texts[i * per_conn:(i + 1) * per_conn] for i in range(conns)]
    blocks = [request_block(c) for c in chunks]
    rss_before = rss_bytes(pid)
    with Bystander(port) as bystander:
        cpu = process_cpu(pid)
        elapsed = await register(peers, blocks, [len(c) for c in chunks], 600)
        cpu = process_cpu(pid) - cpu
    rss_after = rss_bytes(pid)
    nacks = sum(p.nacks for p in peers)
    sample = next((p.nack_sample for p in peers if p.nack_sample is not None), None)
    for peer in peers:
        peer.transport.close()
    return {"elapsed": elapsed, "rate": n / elapsed, "nacks": nacks, "sample": sample,
            "cpu": cpu,
            "rss_per_sub": (rss_after - rss_before) / n, "rss_before": rss_before,
            "rss_after": rss_after, "bystander": bystander.result}


def run_registration(n: int, per_conn: int, workloads: list[str]) -> None:
    for workload in workloads:
        port = free_port()
        proc = start_router(port)
        try:
            r = asyncio.run(_registration(port, proc.pid, n, per_conn, workload))
        finally:
            stop_processes([proc])
        b = r["bystander"]
        print(f"== registration, {workload}: {n:,} subscriptions, {per_conn:,} SubAddRqst "
              f"pipelined per connection ({(n + per_conn - 1) // per_conn} connections); "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"subscriptions/s             {r['rate']:>12,.0f}   "
              f"(all acknowledged in {r['elapsed']:.2f} s)")
        print(f"router CPU per subscription {r['cpu'] / n * 1e6:>12.1f} us   "
              f"(about {n / r['cpu']:,.0f}/s on one free core)")
        print(f"router RSS per subscription {r['rss_per_sub']:>12,.0f} B   "
              f"({r['rss_before'] / 2**20:.0f} MB -> {r['rss_after'] / 2**20:.0f} MB)")
        print(f"bystander round trip        worst {b.get('worst', float('nan')) * 1e3:8.1f} ms"
              f"   p50 {b.get('p50', float('nan')) * 1e3:6.2f} ms   "
              f"({b.get('count', 0)} round trips during the registration)")
        if r["nacks"]:
            print(f"(Nacks: {r['nacks']}, e.g. {r['sample']})")


async def _reconnect(clients: int, per_client: int) -> dict:
    port = free_port()
    options = {"Subscription.Max-Count": per_client + 16}
    texts = [WORKLOADS["tickertape"](i) for i in range(clients * per_client)]
    blocks = [request_block(texts[c * per_client:(c + 1) * per_client])
              for c in range(clients)]
    counts = [per_client] * clients
    proc = start_router(port)
    try:
        peers = [await connect_counter(port, options) for _ in range(clients)]
        first = await register(peers, blocks, counts, 600)
        for peer in peers:
            peer.transport.close()
    finally:
        stop_processes([proc])          # the "restart"
    proc = start_router(port)
    try:
        with Bystander(port) as bystander:
            start = time.perf_counter()
            peers = list(await asyncio.gather(*(connect_counter(port, options)
                                                for _ in range(clients))))
            connected = time.perf_counter() - start
            await register(peers, blocks, counts, 600)
            total = time.perf_counter() - start
        nacks = sum(p.nacks for p in peers)
        for peer in peers:
            peer.transport.close()
    finally:
        stop_processes([proc])
    return {"first": first, "connected": connected, "total": total, "nacks": nacks,
            "bystander": bystander.result}


def run_reconnect(clients: int, per_client: int) -> None:
    r = asyncio.run(_reconnect(clients, per_client))
    b = r["bystander"]
    n = clients * per_client
    print(f"== mass reconnect: {clients:,} clients x {per_client} subscriptions "
          f"after a router restart; load {os.getloadavg()[0]:.2f}")
    print(f"all connected               {r['connected']:8.2f} s")
    print(f"all {n:,} acknowledged  {r['total']:8.2f} s   ({n / r['total']:,.0f}/s; "
          f"first registration took {r['first']:.2f} s)")
    print(f"bystander round trip        worst {b.get('worst', float('nan')) * 1e3:8.1f} ms"
          f"   p50 {b.get('p50', float('nan')) * 1e3:6.2f} ms")
    if r["nacks"]:
        print(f"(Nacks: {r['nacks']})")
