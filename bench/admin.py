"""What the admin's views cost the router: a ``/metrics`` scrape and the
status file, with many clients connected.

    python bench/admin.py [--clients 2000] [--scrapes 200]

Starts ``elvind --metrics`` in a process of its own, connects ``--clients``
raw-codec clients with one subscription each, then scrapes ``/metrics``
``--scrapes`` times, one after another. A scrape is answered on the router's
loop (a status snapshot and its exposition), so its round trip bounds how
long it holds the loop: the bench prints the median and the 99th percentile,
and the size of the page. Note the load average: other work on the machine
shows in the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (
    free_port,
    open_peer,
    percentile,
    start_elvind,
    stop_processes,
    wait_listening,  # noqa: E402
)

from elvin.protocol import SubAddRqst  # noqa: E402


def scrape(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as reply:
        body = reply.read()
    return time.perf_counter() - start, len(body)


async def run(clients: int, scrapes: int) -> None:
    port, metrics_port = free_port(), free_port()
    status = Path(tempfile.mkdtemp()) / "status.json"
    router = start_elvind("--listen", f"elvin://127.0.0.1:{port}", "--no-discovery",
                          "--metrics", f"127.0.0.1:{metrics_port}",
                          "--status-file", str(status))
    try:
        wait_listening(router, port, time.monotonic() + 30)
        peers = []
        for i in range(clients):
            peer = await open_peer(port)
            await peer.request(SubAddRqst(2, f"Bench-Key == {i}"))
            peers.append(peer)
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        times = []
        size = 0
        for _ in range(scrapes):
            elapsed, size = await asyncio.to_thread(scrape, url)
            times.append(elapsed)
        print(f"clients {clients}, subscriptions {clients}: /metrics scrape round trip "
              f"median {percentile(times, 0.5) * 1000:.2f} ms, p99 "
              f"{percentile(times, 0.99) * 1000:.2f} ms ({size} bytes); status file "
              f"{status.stat().st_size} bytes; load average {os.getloadavg()[0]:.2f}")
        for peer in peers:
            peer.transport.close()
    finally:
        stop_processes([router])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--scrapes", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.clients, args.scrapes))


if __name__ == "__main__":
    main()
