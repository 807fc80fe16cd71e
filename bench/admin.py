"""What the admin's views cost the router: a ``/metrics`` scrape and the
status file, with many clients connected.

    python bench/admin.py [--clients 2000] [--scrapes 200] [--links 100]

Starts ``elvind --metrics`` in a process of its own, connects ``--clients``
raw-codec clients with one subscription each, then scrapes ``/metrics``
``--scrapes`` times, one after another. A scrape is answered on the router's
loop (a status snapshot and its exposition), so its round trip bounds how
long it holds the loop: the bench prints the median and the 99th percentile,
and the size of the page. Note the load average: other work on the machine
shows in the figures. Both formats are scraped (0.0.4 text, and OpenMetrics
as Prometheus asks for it). Then the status file's link watch (issue 44: a
link's new state is written within 0.25 s): what one look at the links'
states costs the loop, in-process, with ``--links`` federation links.
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
    wait_listening,
)

from elvin.protocol import SubAddRqst

#: what Prometheus 2.x asks for: the router answers OpenMetrics
OPENMETRICS_ACCEPT = ("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;"
                      "q=0.5,*/*;q=0.1")


def scrape(url: str, accept: str | None = None) -> tuple[float, int]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as reply:
        body = reply.read()
    return time.perf_counter() - start, len(body)


def link_watch_cost(links: int, rounds: int = 2000) -> float:
    """Microseconds of the router's loop per look at the federation links'
    states (the status file's watch, 4 times a second), with ``links``
    connect entries dialling dead ports, measured on the router's loop."""
    from elvin.federation.config import ConnectSpec, FederationConfig
    from elvin.router.config import RouterConfig
    from elvin.router.embedded import EmbeddedRouter
    from elvin.router.status import link_states

    dead = free_port()
    config = RouterConfig(listen=["elvin://127.0.0.1:0"], discovery=False,
                          federation=FederationConfig(
                              router_domain="bench", reconnect_min=5, reconnect_max=30,
                              connect=[ConnectSpec(f"ewaf://127.0.0.1:{dead}", f"p{i}")
                                       for i in range(links)]))
    router = EmbeddedRouter(config=config).start()
    try:
        def measure() -> float:
            start = time.perf_counter()
            for _ in range(rounds):
                link_states(router.router)
            return (time.perf_counter() - start) / rounds * 1e6
        return router.call(measure)
    finally:
        router.stop()


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
        for name, accept in (("text 0.0.4", None), ("OpenMetrics", OPENMETRICS_ACCEPT)):
            times = []
            size = 0
            for _ in range(scrapes):
                elapsed, size = await asyncio.to_thread(scrape, url, accept)
                times.append(elapsed)
            print(f"clients {clients}, subscriptions {clients}: /metrics ({name}) scrape "
                  f"round trip median {percentile(times, 0.5) * 1000:.2f} ms, p99 "
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
    parser.add_argument("--links", type=int, default=100,
                        help="federation connect entries for the status file's link watch")
    args = parser.parse_args()
    asyncio.run(run(args.clients, args.scrapes))
    cost = link_watch_cost(args.links)
    print(f"status file link watch: {cost:.1f} us of the loop per look with {args.links} "
          f"links (4 looks/s: {cost * 4 / 1e4:.3f}% of the loop); load average "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
