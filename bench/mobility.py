"""The mobility experiment of Caporuscio, Carzaniga and Wolf (TSE 2003,
section 4), on loopback.

Run: .venv/bin/python bench/mobility.py [--quick] [--out DIR (default: TMP/elvin-mobility-traces)]
     [--disconnect SECONDS] [--rates 1,2,5,10] [--subs 1,10,50,100]
     [--supports none,basic,ping,delay]

Three routers (``elvind`` processes, each with ``mobility = true``) are
federated with the Elvin Federation Protocol: A in the middle, B and C dial
A. One publisher at A publishes ``p`` notifications per second; one
subscriber with ``s`` subscriptions (each matches every publication, as in
the paper) starts at B, moves out, stays away ``--disconnect`` seconds
(Delta, default 10), and moves in at C:

* ``none``:  no mobility support: close at B, reconnect and resubscribe at C;
* ``basic``: move_out at B, move_in at C (full move-in, direct download);
* ``ping``:  as basic, with the ping synchronisation (through the federation);
* ``delay``: as basic, waiting ``--delay-wait`` seconds before the download.

If federation is not available (``--topology flood``, or elvin.federation
cannot be imported) the routers are not linked and the publisher sends each
notification to all three routers (the paper found Elvin flooding
publications between access points); the download still works (the move-in
proxy connects to the old router), but ping has no route and times out.

Before that it measures the buffers themselves (``--buffering`` for only
this), in memory and on disk (``elvind --state-dir``): a client moves out
and a raw producer publishes ``--buffer-count`` notifications as fast as the
router reads them, then makes a round trip; with a state directory the
round trip's answer means all of them are committed to disk, so the rate is
the rate at which buffers are made safe. Then a move-in of
``--move-in-count`` buffered notifications (the abbreviated one, back at
the same router) is timed, with a bystander client's worst round trip
meanwhile (the router's loop must not stall while the download is built).

Every run writes a trace ``DIR/RUN.csv`` with the header
``run,support,rate,subscriptions,event,producer,seq,time``: ``departure``
(the publisher sends; every one is meant for the subscriber), ``arrival``
(the subscriber's application receives it), and ``move_out``,
``move_in_start``, ``move_in_done`` (no producer/seq); times are
``time.time()`` seconds. ``elvin-pipeline mobility DIR`` reads them. The
table printed at the end is the paper's Table 3: the move-in delay
(move_in_start to move_in_done, ms), losses (departures that never arrived)
and duplicates (arrivals beyond the first of a sequence number).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))
from _common import process_cpu  # noqa: E402

from elvin.client import connect  # noqa: E402
from elvin.mobility import MobileConnection  # noqa: E402

HEADER = ["run", "support", "rate", "subscriptions", "event", "producer", "seq", "time"]
SUPPORTS = ("none", "basic", "ping", "delay")
PRODUCER = "pub"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- routers ---------------------------------------------------------------------------
@dataclass
class Routers:
    urls: dict[str, str]
    federated: bool
    procs: list[subprocess.Popen] = field(default_factory=list)
    tmp: tempfile.TemporaryDirectory | None = None

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self.tmp is not None:
            self.tmp.cleanup()


def federation_available() -> bool:
    try:
        import elvin.federation.service  # noqa: F401
        from elvin.router.config import RouterConfig
        return "federation" in RouterConfig.__dataclass_fields__
    except Exception:  # noqa: BLE001 - whatever the cause, no federation to bench
        return False


def start_routers(federated: bool) -> Routers:
    tmp = tempfile.TemporaryDirectory(prefix="elvin-mobility-bench-")
    ports = {name: free_port() for name in "ABC"}
    fed_ports = {name: free_port() for name in "ABC"}
    routers = Routers({n: f"elvin://127.0.0.1:{p}" for n, p in ports.items()}, federated,
                      tmp=tmp)
    for name in "ABC":
        lines = [f'listen = "elvin://127.0.0.1:{ports[name]}"', "mobility = true",
                 "discovery = false", 'log-level = "warning"']
        if federated:
            lines += ["[federation]", f'router_domain = "{name}"',
                      f'listen = "ewaf://127.0.0.1:{fed_ports[name]}"', "debounce = 0.01"]
            if name == "A":
                for other in "BC":
                    lines += ["[[federation.accept]]", f'router = "{other}"']
            else:
                lines += ["[[federation.connect]]", 'router = "A"',
                          f'url = "ewaf://127.0.0.1:{fed_ports["A"]}"']
        path = Path(tmp.name) / f"{name}.toml"
        path.write_text("\n".join(lines) + "\n")
        proc = subprocess.Popen([sys.executable, "-m", "elvin.router", "--config", str(path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        routers.procs.append(proc)
    for name, port in ports.items():
        deadline = time.monotonic() + 15
        while True:
            proc = routers.procs["ABC".index(name)]
            if proc.poll() is not None:
                routers.stop()
                raise SystemExit(f"router {name} exited: {proc.stderr.read()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    routers.stop()
                    raise SystemExit(f"router {name} did not start") from None
                time.sleep(0.05)
    return routers


# -- the buffers: memory versus disk --------------------------------------------------------
async def _raw_publish(port: int, count: int) -> float:
    """Publish ``count`` numbered notifications on one raw connection, then a
    round trip; seconds from the first write to the answer."""
    from _common import open_peer

    from elvin.protocol import NotifyEmit, SecRqst, frame

    peer = await open_peer(port)
    frames = [frame(NotifyEmit({"Producer": "bench", "Seq": seq, "Body": "x" * 40}))
              for seq in range(count)]
    started = time.perf_counter()
    for start in range(0, count, 500):
        await peer.can_write.wait()
        peer.transport.write(b"".join(frames[start:start + 500]))
    await peer.request(SecRqst(2), timeout=120)   # behind everything published
    elapsed = time.perf_counter() - started
    peer.transport.close()
    return elapsed


async def _bystander(url: str, stop: asyncio.Event, worst: list[float]) -> None:
    conn = await connect(url)
    try:
        while not stop.is_set():
            t0 = time.perf_counter()
            await conn.set_keys()
            worst[0] = max(worst[0], time.perf_counter() - t0)
            await asyncio.sleep(0.001)
    finally:
        await conn.close()


async def buffering_figures(args) -> list[tuple[str, float, float, float, int]]:
    """(mode, notifications/s into a buffer, move-in seconds, bystander's
    worst round trip during it, notifications moved in) for memory and disk."""
    rows = []
    for mode in ("memory", "disk"):
        tmp = tempfile.TemporaryDirectory(prefix="elvin-mobility-buffers-")
        port = free_port()
        url = f"elvin://127.0.0.1:{port}"
        extra = ["--state-dir", str(Path(tmp.name) / "state")] if mode == "disk" else []
        proc = subprocess.Popen([sys.executable, "-m", "elvin.router", "--listen", url,
                                 "--mobility", "--mobility-quota", "1000000",
                                 "--no-discovery", "--log-level", "warning", *extra],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 15
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"elvind did not start: {proc.stderr.read()}") from None
                    time.sleep(0.05)
            mc = await MobileConnection.open(url, download_timeout=120)
            await mc.subscribe('Producer == "bench"', buffer_size=0)
            await mc.move_out()
            cpu0 = process_cpu(proc.pid)
            elapsed = await _raw_publish(port, args.buffer_count)
            cpu = (process_cpu(proc.pid) - cpu0) / args.buffer_count
            rate = args.buffer_count / elapsed
            await mc.move_in(url)           # empty the buffer for the next figure
            await mc.move_out()
            await _raw_publish(port, args.move_in_count)
            stop, worst = asyncio.Event(), [0.0]
            watcher = asyncio.ensure_future(_bystander(url, stop, worst))
            await asyncio.sleep(0.5)
            idle_worst = worst[0]       # the same client's worst without a move-in
            worst[0] = 0.0
            t0 = time.perf_counter()
            report = await mc.move_in(url)
            move_in = time.perf_counter() - t0
            stop.set()
            await watcher
            await mc.close()
            rows.append((mode, rate, cpu, move_in, worst[0], idle_worst, report.caught_up))
        finally:
            proc.terminate()
            proc.wait(10)
            tmp.cleanup()
    return rows


def print_buffering(rows, args) -> None:
    load = os.getloadavg()
    print(f"buffers ({args.buffer_count:,} notifications published into one moved-out "
          f"client's buffer; move-in of {args.move_in_count:,}), load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"  {'mode':<7} {'into buffer':>14} {'router CPU':>16} {'move-in':>9} "
          f"{'bystander worst (idle)':>24}")
    for mode, rate, cpu, move_in, worst, idle, moved in rows:
        print(f"  {mode:<7} {rate:>10,.0f} n/s {cpu * 1e6:>6.1f} us/n "
              f"(={1 / cpu:>6,.0f}/s) {move_in * 1000:>6.0f} ms {worst * 1000:>10.1f} ms "
              f"({idle * 1000:.1f} ms)   {moved:,} moved in")
    print("  (disk: elvind --state-dir, SQLite WAL, committed before the producer's round "
          "trip is answered; router CPU: the elvind process's CPU time per notification, "
          "and the rate one core would give)")


# -- one run -----------------------------------------------------------------------------
@dataclass
class Result:
    run: str
    support: str
    rate: float
    subs: int
    delay_ms: float
    losses: int
    duplicates: int
    departures: int
    ping_ok: bool | None = None


class Trace:
    def __init__(self, run: str, support: str, rate: float, subs: int) -> None:
        self.head = [run, support, rate, subs]
        self.rows: list[list] = []
        self.departed: list[int] = []
        self.arrived: list[int] = []
        self.moves: dict[str, float] = {}

    def departure(self, seq: int) -> None:
        self.departed.append(seq)
        self.rows.append([*self.head, "departure", PRODUCER, seq, time.time()])

    def arrival(self, notification) -> None:
        seq = notification.get("Seq")
        if notification.get("Producer") != PRODUCER or not isinstance(seq, int):
            return
        self.arrived.append(seq)
        self.rows.append([*self.head, "arrival", PRODUCER, seq, time.time()])

    def move(self, event: str) -> None:
        now = time.time()
        self.moves[event] = now
        self.rows.append([*self.head, event, "", "", now])

    def write(self, path: Path) -> None:
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(HEADER)
            for row in self.rows:
                writer.writerow([f"{v:.6f}" if isinstance(v, float) and k == 7 else v
                                 for k, v in enumerate(row)])


class PlainSubscriber:
    """No mobility support: subscribe; on the move close and resubscribe."""

    def __init__(self, on_arrival, expressions: list[str]) -> None:
        self.on_arrival = on_arrival
        self.expressions = expressions
        self.conn = None
        self._last = None

    def _listener(self, notification) -> None:
        # one call per matching subscription with the same attributes: once
        if notification.attributes is not self._last:
            self._last = notification.attributes
            self.on_arrival(notification)

    async def attach(self, url: str) -> None:
        self.conn = await connect(url)
        await asyncio.gather(*(self.conn.subscribe(e, buffer_size=0, listener=self._listener)
                               for e in self.expressions))

    async def detach(self) -> None:
        await self.conn.close()

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()


async def probe_route(pub_conns, arrived: list[int], run: str, timeout: float = 15) -> None:
    """Publish probes (not in the trace) until the subscriber gets one: its
    subscriptions have reached the publisher's router."""
    deadline = time.monotonic() + timeout
    n = 0
    while time.monotonic() < deadline:
        n += 1
        for conn in pub_conns:
            await conn.send({"Run": run, "Producer": "probe", "Seq": n})
        await asyncio.sleep(0.05)
        if arrived:
            return
    raise RuntimeError(f"{run}: the subscriber's subscriptions never reached the publisher")


async def one_run(routers: Routers, support: str, rate: float, subs: int, args,
                  out: Path, index: int) -> Result:
    run = f"{support}-p{rate:g}-s{subs}-{index}"
    trace = Trace(run, support, rate, subs)
    expressions = [f'Run == "{run}" && Seq > {-2 - i}' for i in range(subs)]
    a, b, c = routers.urls["A"], routers.urls["B"], routers.urls["C"]
    pub_urls = [a] if routers.federated else [a, b, c]
    pubs = [await connect(u) for u in pub_urls]
    probes: list[int] = []

    def on_arrival(notification) -> None:
        if notification.get("Producer") == "probe":
            probes.append(1)
        else:
            trace.arrival(notification)

    mobile: MobileConnection | None = None
    plain: PlainSubscriber | None = None
    if support == "none":
        plain = PlainSubscriber(on_arrival, expressions)
        await plain.attach(b)
    else:
        mobile = await MobileConnection.open(b, download_timeout=120)
        mobile.add_listener(on_arrival)
        for expr in expressions:
            await mobile.subscribe(expr, buffer_size=0)
    await probe_route(pubs, probes, run)

    stop = asyncio.Event()

    async def publisher() -> None:
        seq = 0
        period = 1.0 / rate
        next_at = time.monotonic()
        while not stop.is_set():
            trace.departure(seq)
            for conn in pubs:
                await conn.send({"Run": run, "Producer": PRODUCER, "Seq": seq})
            seq += 1
            next_at += period
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    task = asyncio.ensure_future(publisher())
    ping_ok = None
    try:
        await asyncio.sleep(args.warmup)
        trace.move("move_out")
        if plain is not None:
            await plain.detach()
        else:
            await mobile.move_out()
        await asyncio.sleep(args.disconnect)
        trace.move("move_in_start")
        if plain is not None:
            await plain.attach(c)
        else:
            sync = {"basic": "none", "ping": "ping", "delay": "delay"}[support]
            report = await mobile.move_in(c, sync=sync, delay=args.delay_wait,
                                          ping_timeout=args.ping_timeout)
            ping_ok = report.ping_ok
        trace.move("move_in_done")
        await asyncio.sleep(args.after)
    finally:
        stop.set()
        await task
    # drain: wait for the last departures to arrive (or give up)
    deadline = time.monotonic() + args.drain
    last = trace.departed[-1]
    while time.monotonic() < deadline and last not in trace.arrived:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    for conn in pubs:
        await conn.close()
    if plain is not None:
        await plain.close()
    if mobile is not None:
        await mobile.close()
    trace.write(out / f"{run}.csv")
    arrived = set(trace.arrived)
    losses = sum(1 for s in trace.departed if s not in arrived)
    duplicates = len(trace.arrived) - len(arrived)
    delay_ms = (trace.moves["move_in_done"] - trace.moves["move_in_start"]) * 1000
    return Result(run, support, rate, subs, delay_ms, losses, duplicates,
                  len(trace.departed), ping_ok)


# -- the table -------------------------------------------------------------------------------
def print_table(results: list[Result], supports: list[str], disconnect: float) -> None:
    by_key = {(r.rate, r.subs, r.support): r for r in results}
    settings = sorted({(r.rate, r.subs) for r in results})
    width = 8
    groups = ("delay (ms)", "losses", "duplicates")
    head1 = f"{'p/s':>5} {'s':>4} |" + "|".join(
        f"{g:^{width * len(supports)}}" for g in groups)
    head2 = f"{'':>5} {'':>4} |" + "|".join(
        "".join(f"{s:>{width}}" for s in supports) for _ in groups)
    print(head1)
    print(head2)
    print("-" * len(head2))
    for rate, subs in settings:
        cells = []
        for metric in ("delay_ms", "losses", "duplicates"):
            part = ""
            for support in supports:
                r = by_key.get((rate, subs, support))
                if r is None:
                    part += f"{'-':>{width}}"
                elif metric == "delay_ms":
                    part += f"{r.delay_ms:>{width}.0f}"
                else:
                    part += f"{getattr(r, metric):>{width}d}"
            cells.append(part)
        print(f"{rate:>5g} {subs:>4d} |" + "|".join(cells))
    print(f"(Delta = {disconnect:g} s; delay = move_in_start..move_in_done; losses and "
          "duplicates over the whole run)")
    failed_pings = [r.run for r in results if r.ping_ok is False]
    if failed_pings:
        print(f"ping got no response (gave up after --ping-timeout) in: "
              f"{', '.join(failed_pings)}")
    ping_losses = sum(r.losses for r in results if r.support == "ping")
    if any(r.support == "ping" for r in results):
        print(f"losses with ping, all settings: {ping_losses}")


def parse_list(text: str, kind):
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list: {text!r}") from None


async def main_async(args) -> int:
    print_buffering(await buffering_figures(args), args)
    print()
    if args.buffering:
        return 0
    federated = args.topology == "federated" or (args.topology == "auto"
                                                 and federation_available())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    routers = start_routers(federated)
    print(f"routers: A={routers.urls['A']} (publisher)  B={routers.urls['B']} (start)  "
          f"C={routers.urls['C']} (destination)")
    if federated:
        print("topology: federated (Elvin Federation Protocol, B -> A <- C); download: "
              "direct (the move-in proxy connects to the old router)")
    else:
        why = "--topology flood" if args.topology == "flood" else "federation unavailable"
        print(f"topology: NOT federated ({why}); the publisher floods every router, the "
              "download uses the direct connection, ping has no route")
    results: list[Result] = []
    try:
        await asyncio.sleep(1.0 if federated else 0.3)   # links up
        index = 0
        for rate in args.rates:
            for subs in args.subs:
                for support in args.supports:
                    index += 1
                    result = await one_run(routers, support, rate, subs, args, out, index)
                    results.append(result)
                    print(f"  {result.run:<24} delay {result.delay_ms:8.0f} ms  "
                          f"losses {result.losses:4d}  duplicates {result.duplicates:4d}  "
                          f"({result.departures} published)", flush=True)
    finally:
        routers.stop()
    print()
    print_table(results, args.supports, args.disconnect)
    print(f"traces: {out}/ ({len(results)} files)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) /
                                             "elvin-mobility-traces"),
                        help="directory for the trace files (default %(default)s)")
    parser.add_argument("--disconnect", type=float, default=10.0,
                        help="seconds away between move-out and move-in (default 10)")
    parser.add_argument("--rates", type=lambda t: parse_list(t, float),
                        default=[1.0, 2.0, 5.0, 10.0])
    parser.add_argument("--subs", type=lambda t: parse_list(t, int), default=[1, 10, 50, 100])
    parser.add_argument("--supports", type=lambda t: parse_list(t, str),
                        default=list(SUPPORTS))
    parser.add_argument("--quick", action="store_true",
                        help="a short preset: p = 2, 10; s = 1, 100; Delta = 2 s")
    parser.add_argument("--warmup", type=float, default=3.0,
                        help="seconds connected before the move-out (default 3)")
    parser.add_argument("--after", type=float, default=3.0,
                        help="seconds of publishing after the move-in (default 3)")
    parser.add_argument("--drain", type=float, default=3.0)
    parser.add_argument("--delay-wait", type=float, default=0.5,
                        help="the delay option's wait in seconds (default 0.5)")
    parser.add_argument("--ping-timeout", type=float, default=5.0)
    parser.add_argument("--topology", choices=("auto", "federated", "flood"), default="auto")
    parser.add_argument("--buffering", action="store_true",
                        help="only the buffer figures (memory versus disk), not the paper's "
                             "experiment")
    parser.add_argument("--buffer-count", type=int, default=50_000,
                        help="notifications published into a buffer (default 50000)")
    parser.add_argument("--move-in-count", type=int, default=10_000,
                        help="buffered notifications moved in (default 10000)")
    args = parser.parse_args(argv)
    bad = [s for s in args.supports if s not in SUPPORTS]
    if bad:
        parser.error(f"unknown support {bad[0]!r} (use {', '.join(SUPPORTS)})")
    if args.quick:
        args.rates, args.subs = [2.0, 10.0], [1, 100]
        args.disconnect, args.warmup, args.after, args.drain = 2.0, 1.0, 1.5, 2.0
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return runner(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
