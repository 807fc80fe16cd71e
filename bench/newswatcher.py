"""Newswatcher: what quench saves. 200 feeds x 50 items served locally.

    .venv/bin/python bench/newswatcher.py [--feeds 200] [--items 50] [--steady 10]

Setup: a router (``python -m elvin.router``) and the feed server
(``tests/feedserver.py`` on 127.0.0.1) each run as a separate
process; the newswatcher and one consumer run in this process. All feeds are
on one host, so the per-host politeness limits are opened up for the bench
(``min_host_interval = 0``, 16 requests in flight) and every feed polls every
``--interval`` seconds.

Two runs, each with a fresh data dir (so every item is new):

* **narrow**: the consumer holds 5 narrow subscriptions: three on one feed
  each (``News-Feed == "feed-007"``...), one on title words within a feed,
  one a tickertape subscription to a group of 4 feeds;
* **scoop**: ``--scoop``, every feed polled and every item published (the
  consumer keeps the same 5 subscriptions).

Printed per run: the feeds polled, the time from start until every new item
of the polled feeds was published (handed to the router, or dropped by
auto-quench because no subscription could match), the HTTP requests the feed
server saw in that time, notifications sent / dropped / received by the
consumer, then the requests in a ``--steady`` second window afterwards
(nothing new: conditional GETs answered 304).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import free_port, start_elvind, wait_listening  # noqa: E402
from elvin_apps.newswatcher.config import from_mapping  # noqa: E402
from elvin_apps.newswatcher.daemon import NewsWatcher  # noqa: E402
from elvin_apps.tickertape.groups import groups_expression  # noqa: E402

from elvin.client import connect  # noqa: E402
from tests.feedserver import FeedServer, Item, rss  # noqa: E402

GROUPS = 50
T0 = 1_714_564_800


def feed_name(i: int) -> str:
    return f"feed-{i:03d}"


def feed_group(i: int) -> str:
    return f"group-{i % GROUPS:02d}"


def document(i: int, items: int) -> str:
    return rss(feed_name(i), [
        Item(f"tag:bench,{i}:{j}", f"{feed_name(i)} item {j}",
             f"https://news.example/{i}/{j}", f"Author {j % 7}",
             f"<p>Summary of item {j} in feed {i}, with <b>markup</b> to strip.</p>" * 3,
             ("bench", f"topic{j % 5}"), T0 + j * 60)
        for j in reversed(range(items))])


def serve_feeds(count: int, items: int) -> None:
    """The feed server process: prints its port, answers "stats" lines on
    stdin with the request counts, exits when stdin closes."""
    server = FeedServer().start()
    for i in range(count):
        server.set(f"/{feed_name(i)}.rss", document(i, items))
    print(server.port, flush=True)
    for line in sys.stdin:
        if line.strip() == "stats":
            log = server.requests()
            print(json.dumps({"requests": len(log),
                              "not_modified": sum(1 for e in log if e.status == 304),
                              "feeds": len({e.path for e in log})}), flush=True)
    server.stop()


def start_router() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = start_elvind("--listen", f"elvin://127.0.0.1:{port}", stderr=None)
    wait_listening(proc, port, time.monotonic() + 20)
    return proc, f"elvin://127.0.0.1:{port}"


class FeedProcess:
    def __init__(self, count: int, items: int) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(count),
                                      str(items)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=ROOT)
        self.port = int(self.proc.stdout.readline())

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stats(self) -> dict:
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


SUBSCRIPTIONS = [
    'News-Feed == "feed-007"',
    'News-Feed == "feed-042"',
    'News-Feed == "feed-123"',
    'News-Feed == "feed-100" && contains(fold-case(News-Title), "item 1")',
    groups_expression([feed_group(13)]),        # feeds 13, 63, 113, 163
]


async def one_run(mode: str, url: str, server: FeedProcess, count: int, items: int,
                  interval: float, steady: float) -> dict:
    cfg = from_mapping({
        "http": {"min_host_interval": 0.0, "max_per_host": 16, "max_concurrent": 16,
                 "timeout": 30.0},
        "feeds": [{"name": feed_name(i), "url": server.url(f"/{feed_name(i)}.rss"),
                   "interval": interval, "groups": [feed_group(i)]} for i in range(count)]})
    received = 0

    def on_note(_note) -> None:
        nonlocal received
        received += 1

    before = server.stats()
    async with connect(url) as consumer:
        for text in SUBSCRIPTIONS:
            await consumer.subscribe(text, listener=on_note, buffer_size=0)
        with tempfile.TemporaryDirectory() as data:
            watcher = NewsWatcher(cfg, url=url, data_dir=Path(data), scoop=(mode == "scoop"))
            start = time.perf_counter()
            await watcher.start()
            polled = watcher.selection.polled_names()
            while not all(watcher.feed_stats(n).ok >= 1 for n in polled):
                await asyncio.sleep(0.01)
            elapsed = time.perf_counter() - start
            first = server.stats()
            sent, dropped = watcher.published, watcher.dropped
            await asyncio.sleep(steady)
            later = server.stats()
            received_at_end = received
            await watcher.stop()
    return {
        "mode": mode, "polled": len(polled), "seconds": elapsed,
        "articles": sum(watcher.feed_stats(n).articles for n in polled),
        "sent": sent, "dropped": dropped, "received": received_at_end,
        "requests": first["requests"] - before["requests"],
        "steady_requests": later["requests"] - first["requests"],
        "steady_304": later["not_modified"] - first["not_modified"],
    }


def report(r: dict, steady: float) -> None:
    print(f"{r['mode']:>6}: {r['polled']:3d} feeds polled, {r['articles']:5d} new items "
          f"published in {r['seconds']:6.2f} s with {r['requests']:3d} HTTP requests; "
          f"notifications sent {r['sent']}, dropped by auto-quench {r['dropped']}, "
          f"received by the 5 subscriptions {r['received']}")
    print(f"        then {r['steady_requests']} requests in {steady:g} s of steady polling "
          f"({r['steady_304']} answered 304)")


async def main_async(args) -> None:
    router, url = start_router()
    server = FeedProcess(args.feeds, args.items)
    try:
        print(f"{args.feeds} feeds x {args.items} items on 127.0.0.1, interval "
              f"{args.interval:g} s; router {url} (separate process)")
        results = []
        for mode in ("narrow", "scoop"):
            results.append(await one_run(mode, url, server, args.feeds, args.items,
                                         args.interval, args.steady))
            report(results[-1], args.steady)
        narrow, scoop = results
        if narrow["requests"]:
            print(f"quench saves {1 - narrow['requests'] / scoop['requests']:.0%} of the "
                  f"first-pass requests and "
                  f"{1 - narrow['steady_requests'] / max(1, scoop['steady_requests']):.0%} "
                  f"of the steady ones")
    finally:
        server.close()
        router.terminate()
        router.wait(timeout=10)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        serve_feeds(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--feeds", type=int, default=200)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--steady", type=float, default=10.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    os.environ.pop("ELVIN_URL", None)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
