"""elvin-console under a flood: event-loop stalls and memory of one consumer pane.

    .venv/bin/python bench/console.py [--rate 10000] [--seconds 10] [--buffer 10000]
                                      [--router process|embedded]

The console's main window runs (offscreen) with one consumer pane
subscribed to ``require(Seq)``, columns Seq/Symbol/Price, following the
newest row; a producer in another process sends ``--rate`` notifications
per second for ``--seconds`` through ``elvin.sync``; the router is
``elvind`` in a third process (or ``--router embedded``: a thread of this
process, which then competes with the GUI for the GIL). On a small machine
the three processes compete for the cores; ``--nice 10`` runs the router
and producer at a lower priority, as if they were elsewhere, and the
"CPU within one probe gap" figure separates the console's own work from
time the OS gave to other processes.

Figures printed:

* traffic: sent, received by the pane, rows kept, rows dropped by the
  bounded buffer, achieved rate;
* stalls: the longest gap of a 5 ms probe timer on the Qt/asyncio loop (the
  worst event-loop stall), its 99th percentile, and how many gaps exceeded
  100 ms;
* steps: how long the pane's flush and the client's packet handling take;
* memory (RSS): before the flood, once the buffer first filled, and at the
  end; the growth after the buffer filled is what "bounded" must keep flat.

Targets: no stall over 100 ms; memory bounded by the configured buffer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import free_port, start_elvind, wait_listening  # noqa: E402

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

PRODUCER = r"""
import sys, time
import elvin.sync
from elvin.values import Int64

url, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
symbols = ["ACME", "BETA", "GAMMA", "DELTA", "EPSILON"]
with elvin.sync.connect(url) as conn:
    print("ready", flush=True)
    sys.stdin.readline()                      # go
    start = time.monotonic()
    sent = 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds:
            break
        due = min(int(elapsed * rate), int(seconds * rate))
        while sent < due:
            conn.send({"Seq": sent, "Symbol": symbols[sent % 5], "Price": 100 + sent % 97 / 4,
                       "Volume": Int64(1000 + sent), "Exchange": "ASX"})
            sent += 1
        time.sleep(0.002)
    conn.flush()
    print(sent, flush=True)
"""


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _niced(nice: int):
    return (lambda: os.nice(nice)) if nice else None


def start_router_process(nice: int = 0) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = start_elvind("--listen", f"elvin://127.0.0.1:{port}", nice=nice)
    wait_listening(proc, port, time.monotonic() + 15)
    return proc, f"elvin://127.0.0.1:{port}"


async def flood(args: argparse.Namespace, url: str) -> dict:
    from elvin_apps.console.routers import RouterRegistry
    from elvin_apps.console.window import MainWindow
    from elvin_apps.console.workspace import ConsumerSpec, RouterSpec, Workspace
    from PySide6.QtCore import QTimer

    registry = RouterRegistry()
    window = MainWindow(registry)
    spec = ConsumerSpec(title="Flood", router="bench", subscription="require(Seq)",
                        subscribed=True, columns=["Seq", "Symbol", "Price"],
                        buffer=args.buffer)
    await window.apply_workspace(Workspace([RouterSpec("bench", url)], [spec]))
    window.resize(1280, 800)
    window.show()
    pane = window.panes[0]
    async with asyncio.timeout(15):
        while not pane.subscribed:
            await asyncio.sleep(0.02)

    gaps: list[float] = []
    cpu_gaps: list[float] = []
    last = [time.perf_counter(), time.thread_time()]

    def probe() -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        gaps.append(now - last[0])
        cpu_gaps.append(cpu - last[1])
        last[0], last[1] = now, cpu

    # how long the console's own steps take: the pane's flush and the
    # connection's packet handling (wall clock of each call)
    from elvin.client import session as client_session
    steps = {"flush": [], "receive": []}
    original_tick = pane.tick

    def timed_tick() -> int:
        begin = time.perf_counter()
        try:
            return original_tick()
        finally:
            steps["flush"].append(time.perf_counter() - begin)
    pane.timer.timeout.disconnect()
    pane.timer.timeout.connect(timed_tick)
    original_received = client_session.Session.data_received

    def timed_received(self, data: bytes) -> None:
        begin = time.perf_counter()
        try:
            original_received(self, data)
        finally:
            steps["receive"].append(time.perf_counter() - begin)
    client_session.Session.data_received = timed_received

    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(probe)

    # collect cycles on this thread, on a timer, as the app does (elvin.qt.run_app)
    gc.collect()
    gc.disable()
    gc_timer = QTimer()
    gc_timer.setInterval(500)
    gc_timer.timeout.connect(lambda: gc.collect(0))
    gc_timer.start()

    producer = subprocess.Popen([sys.executable, "-c", PRODUCER, url, str(args.rate),
                                 str(args.seconds)], cwd=ROOT, stdin=subprocess.PIPE,
                                preexec_fn=_niced(args.nice),
                                stdout=subprocess.PIPE, text=True)
    loop = asyncio.get_running_loop()
    line = await loop.run_in_executor(None, producer.stdout.readline)
    assert line.strip() == "ready", line
    await asyncio.sleep(0.5)
    rss_start = rss_mib()
    last[0], last[1] = time.perf_counter(), time.thread_time()
    timer.start()
    started = time.perf_counter()
    producer.stdin.write("go\n")
    producer.stdin.flush()
    rss_full = None
    full_at = None
    while producer.poll() is None:
        await asyncio.sleep(0.05)
        if rss_full is None and pane.model.rowCount() >= pane.model.capacity:
            full_at = time.perf_counter() - started
            await asyncio.sleep(0.5)
            rss_full = rss_mib()
    sent = int(producer.stdout.read().split()[-1])
    # let the last deliveries arrive
    deadline = time.monotonic() + 5
    while pane.model.received < sent and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    elapsed = time.perf_counter() - started
    timer.stop()
    gc_timer.stop()
    gc.enable()
    rss_end = rss_mib()
    result = {
        "sent": sent, "received": pane.model.received, "rows": pane.model.rowCount(),
        "dropped": pane.model.dropped, "elapsed": elapsed,
        "max_stall_ms": max(gaps) * 1000 if gaps else 0.0,
        "p99_stall_ms": statistics.quantiles(gaps, n=100)[98] * 1000 if len(gaps) > 100
        else 0.0,
        "stalls_over_100ms": sum(1 for g in gaps if g > 0.1),
        "max_cpu_stall_ms": max(cpu_gaps) * 1000 if cpu_gaps else 0.0,
        "flush_max_ms": max(steps["flush"], default=0) * 1000,
        "flush_median_ms": statistics.median(steps["flush"]) * 1000 if steps["flush"] else 0,
        "receive_max_ms": max(steps["receive"], default=0) * 1000,
        "receive_median_ms": statistics.median(steps["receive"]) * 1000
        if steps["receive"] else 0,
        "cpu_seconds": time.process_time(),
        "rss_start": rss_start, "rss_full": rss_full, "full_at": full_at, "rss_end": rss_end,
        "drop_warnings": registry.get("bench").connection.drop_warnings
        if registry.get("bench").connection else None,
    }
    client_session.Session.data_received = original_received
    await window.shutdown()
    await window.clear()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=10_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--buffer", type=int, default=10_000)
    parser.add_argument("--router", choices=["process", "embedded"], default="process")
    parser.add_argument("--nice", type=int, default=0,
                        help="run the router and producer processes at this nice level, as "
                             "if they were on other machines (default 0: compete equally)")
    args = parser.parse_args()

    import qasync
    from PySide6.QtWidgets import QApplication
    app = QApplication.instance() or QApplication([sys.argv[0]])
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    router_proc = embedded = None
    if args.router == "process":
        router_proc, url = start_router_process(args.nice)
    else:
        from elvin.router.embedded import EmbeddedRouter
        embedded = EmbeddedRouter().start()
        url = embedded.url
    print(f"console flood: {args.rate:,.0f} notifications/s for {args.seconds:g} s into one "
          f"consumer pane (buffer {args.buffer:,} rows), router {args.router}, "
          f"router/producer nice {args.nice}, "
          f"Python {sys.version.split()[0]}")
    try:
        with loop:
            r = loop.run_until_complete(flood(args, url))
    finally:
        if router_proc is not None:
            router_proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                router_proc.wait(10)
        if embedded is not None:
            embedded.stop()
    print(f"traffic: sent {r['sent']:,}, received {r['received']:,} "
          f"({r['received'] / max(r['elapsed'], 1e-9):,.0f}/s over {r['elapsed']:.1f} s), "
          f"rows kept {r['rows']:,}, dropped by the buffer {r['dropped']:,}, "
          f"DropWarn from the router {r['drop_warnings']}")
    print(f"stalls: longest {r['max_stall_ms']:.1f} ms, p99 {r['p99_stall_ms']:.1f} ms, "
          f"{r['stalls_over_100ms']} over 100 ms (5 ms probe timer); the most CPU this "
          f"thread used within one probe gap: {r['max_cpu_stall_ms']:.1f} ms (wall minus CPU "
          "is time the OS gave to other processes)")
    print(f"steps: pane flush median {r['flush_median_ms']:.1f} ms, max "
          f"{r['flush_max_ms']:.1f} ms; packet handling (decode + listener) per read median "
          f"{r['receive_median_ms']:.2f} ms, max {r['receive_max_ms']:.1f} ms; "
          f"process CPU {r['cpu_seconds']:.1f} s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    full = f"{r['rss_full']:.1f} MiB once the buffer filled (at {r['full_at']:.1f} s), " \
        if r["rss_full"] is not None else "buffer never filled, "
    print(f"memory (RSS): {r['rss_start']:.1f} MiB before, {full}{r['rss_end']:.1f} MiB at "
          f"the end; growth {r['rss_end'] - r['rss_start']:+.1f} MiB in all, "
          + (f"{r['rss_end'] - r['rss_full']:+.1f} MiB after the buffer filled"
             if r["rss_full"] is not None else ""))
    ok = r["max_stall_ms"] <= 100 and r["received"] == r["sent"]
    print("targets: " + ("met" if ok else "NOT met") +
          " (no stall over 100 ms, every notification received or counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
