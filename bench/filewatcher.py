"""filewatcher: OS watches, idle CPU and change-to-notification latency.

    .venv/bin/python bench/filewatcher.py [--files N] [--dirs D] [--samples S]
                                          [--idle SECONDS] [--tmp DIR]

Builds a tree of N small files (default 100,000, in D = 100 directories) in a
temporary directory, starts a router (in this process, on its own thread)
and the daemon as a separate process (``python -m elvin_apps.filewatcher``,
so its CPU time is its own), then makes 10 subscriptions, each
``File-Path == "<one file>"`` for a file in a different directory. Figures:

* OS watches held by the daemon: kernel inotify watches counted from
  ``/proc/PID/fdinfo`` (and the daemon's own count from its status file),
  with the number of files for comparison; then the same after one more
  subscription, ``begins-with`` on the whole tree (one watch per directory);
* idle CPU: the daemon's user+system CPU time over ``--idle`` seconds
  (default 20) with nothing changing, scaled to CPU seconds per minute;
* latency: S times (default 200), write one of the 10 files and wait for the
  notification at the subscriber; p50 / p99 / max from just before the
  write() to the notification's arrival. The daemon's debounce (default
  0.1 s) is part of it, by design.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from elvin_apps.filewatcher.status import StatusError, read_status
from elvin_apps.filewatcher.watches import inotify_watch_count

from elvin.client import connect
from elvin.router.embedded import EmbeddedRouter

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def build_tree(base: Path, files: int, dirs: int) -> list[Path]:
    per_dir = max(1, -(-files // dirs))
    made: list[Path] = []
    for d in range(dirs):
        directory = base / f"d{d:03d}"
        directory.mkdir()
        for i in range(min(per_dir, files - len(made))):
            path = directory / f"f{i:05d}.txt"
            with open(path, "wb") as f:
                f.write(b"x")
            made.append(path)
        if len(made) >= files:
            break
    return made


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])   # fields 14 and 15 of stat(5)
    return (utime + stime) / CLOCK_TICKS


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


async def wait_status(path: str, condition, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = read_status(path)
            if condition(data):
                return data
        except StatusError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit(f"the daemon did not reach the expected state in {timeout} s")


async def bench(args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix="fw-bench-", dir=args.tmp))
    tree = base / "tree"
    tree.mkdir()
    status_file = str(base / "status.json")
    t0 = time.perf_counter()
    files = build_tree(tree, args.files, args.dirs)
    dirs = len({p.parent for p in files})
    print(f"tree: {len(files)} files in {dirs} directories under {tree} "
          f"(built in {time.perf_counter() - t0:.1f} s)")

    router = EmbeddedRouter().start()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "elvin_apps.filewatcher", "--root", str(tree),
         "--elvin", router.url, "--status-file", status_file, "--log-level", "warning"])
    try:
        await wait_status(status_file, lambda s: s.get("connection") == "connected")
        consumer = await connect(router.url)
        step = max(1, len(files) // 10)
        targets = [files[i * step] for i in range(10)]
        subs = {}
        for path in targets:
            subs[str(path)] = await consumer.subscribe(f'File-Path == "{path}"')
        status = await wait_status(status_file, lambda s: len(s["watches"]) == 10
                                   and sum(len(w["interests"]) for w in s["watches"]) == 10)
        kernel = inotify_watch_count(daemon.pid)
        print(f"10 subscriptions on 10 files: daemon holds {kernel} inotify watches "
              f"(status: {status['os_watches']} OS watches in {len(status['watches'])} "
              f"directories; {threads(daemon.pid)} threads) for a tree of {len(files)} files")

        await asyncio.sleep(1.0)            # let start-up work finish
        before = cpu_seconds(daemon.pid)
        await asyncio.sleep(args.idle)
        used = cpu_seconds(daemon.pid) - before
        print(f"idle CPU: {used:.3f} s in {args.idle:g} s measured -> "
              f"{used / args.idle * 60:.3f} CPU s per minute (scaled from {args.idle:g} s; "
              f"clock tick {1 / CLOCK_TICKS:.3f} s)")

        latencies: list[float] = []
        for i in range(args.samples):
            path = targets[i % len(targets)]
            sub = subs[str(path)]
            start = time.perf_counter()
            with open(path, "ab") as f:
                f.write(b"y")
            while True:
                n = await sub.get(timeout=10)
                if n["File-Path"] == str(path):
                    break
            latencies.append(time.perf_counter() - start)
            await asyncio.sleep(args.gap)
        ms = [x * 1000 for x in latencies]
        print(f"latency write -> notification over {len(ms)} writes: "
              f"p50 {percentile(ms, 50):.1f} ms, p99 {percentile(ms, 99):.1f} ms, "
              f"max {max(ms):.1f} ms, mean {statistics.fmean(ms):.1f} ms "
              f"(debounce 100 ms included)")
        cpu_after = cpu_seconds(daemon.pid)

        tree_sub = await consumer.subscribe(f'begins-with(File-Path, "{tree}/")')
        status = await wait_status(status_file, lambda s: any(w["recursive"]
                                                              for w in s["watches"]))
        await asyncio.sleep(0.5)
        print(f"plus begins-with(File-Path, \"{tree}/\"): {inotify_watch_count(daemon.pid)} "
              f"inotify watches (one per directory: {dirs + 1}); watches folded into the "
              f"tree: {len(status['watches'])} OS watch entry")
        await tree_sub.close()
        await wait_status(status_file, lambda s: not any(w["recursive"] for w in s["watches"]))
        print(f"after removing it: {inotify_watch_count(daemon.pid)} inotify watches; daemon "
              f"CPU total {cpu_after:.2f} s before the tree subscription")
        await consumer.close()
    finally:
        daemon.terminate()
        try:
            code = daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            code = daemon.wait()
        router.stop()
        print(f"daemon exit code after SIGTERM: {code}")
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--dirs", type=int, default=100)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--idle", type=float, default=20.0,
                        help="seconds of idle CPU measurement (scaled to a minute)")
    parser.add_argument("--gap", type=float, default=0.05,
                        help="seconds between a notification and the next write")
    parser.add_argument("--tmp", default=None, help="where to build the tree")
    parser.add_argument("--keep", action="store_true", help="keep the tree afterwards")
    args = parser.parse_args()
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
