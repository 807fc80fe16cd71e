"""Tickertape: scroller frame time, event-loop stalls under a flood, memory.

    .venv/bin/python bench/tickertape.py [--rate 1000] [--seconds 10]
    .venv/bin/python bench/tickertape.py --screenshot /tmp/tickertape.png

Figures printed:

* frame: time to advance and repaint the scroller (1200 px wide) with 200
  queued messages in 7 groups: median, 95th percentile and worst, in ms,
  and the sustained frame rate of the real 60 Hz timer over 3 seconds;
* flood: the app (controller, model, history, scroller animating) on a real
  router while a producer in another process sends ``--rate`` Tickertape
  notifications per second for ``--seconds``: notifications received, the
  longest gap of a 5 ms probe timer (the worst event-loop stall), the
  scroller's worst frame gap, and how many messages the model holds;
* memory: resident set size at the start and at the end of the flood.

Targets: 60 fps sustained, no stall over 50 ms, memory flat.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

GROUPS = ["Chat", "News", "lunch", "elvin", "dstc", "Coffee", "sports"]

PRODUCER = r"""
import asyncio, sys, time
import elvin.client

async def main(url, rate, seconds):
    async with elvin.client.connect(url) as conn:
        groups = GROUPS
        start = time.monotonic()
        sent = 0
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= seconds:
                break
            due = int(elapsed * rate)
            while sent < due:
                await conn.send({"Group": groups[sent % len(groups)], "From": "flood@bench",
                                 "Message": f"flood message {sent} with some text in it",
                                 "Message-Id": f"flood-{sent}",
                                 "org.tickertape.message": 3001})
                sent += 1
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.5)
    print(sent)

asyncio.run(main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3])))
""".replace("GROUPS", repr(GROUPS))


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def sample_messages(count: int):
    from elvin_apps.tickertape.message import Message
    texts = ["anyone for coffee?", "build 4711 is green", "the router is back up",
             "lunch at the usual place at noon", "see the new release notes",
             "who broke the nightly tests?", "score: 2-1 with ten minutes to go"]
    return [Message(group=GROUPS[i % len(GROUPS)], sender=f"user{i % 11}@example.org",
                    text=f"{texts[i % len(texts)]} (#{i})", message_id=f"m{i}",
                    urls=("https://example.org/",) if i % 5 == 0 else (),
                    in_reply_to="m0" if i % 6 == 3 else None)
            for i in range(count)]


def bench_frames(app) -> None:
    from elvin_apps.tickertape.groups import Group, GroupList
    from elvin_apps.tickertape.model import ScrollerModel
    from elvin_apps.tickertape.scroller import ScrollerWidget

    model = ScrollerModel(GroupList([Group(g) for g in GROUPS]))
    widget = ScrollerWidget(model, speed=80)
    widget.resize(1200, widget.sizeHint().height())
    widget.show()
    for message in sample_messages(200):
        model.add(message)
    app.processEvents()
    costs = []
    for _ in range(600):
        started = time.perf_counter()
        widget.step(1 / 60)
        widget.repaint()
        costs.append(time.perf_counter() - started)
    costs.sort()
    print(f"frame (200 queued messages, 1200 px): median {statistics.median(costs) * 1e3:.2f} ms,"
          f" p95 {costs[int(len(costs) * 0.95)] * 1e3:.2f} ms, worst {costs[-1] * 1e3:.2f} ms "
          f"(budget 16.7 ms at 60 fps)")
    widget.tick_gaps.clear()
    end = time.monotonic() + 3
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.001)
    gaps = list(widget.tick_gaps)[1:]
    fps = len(gaps) / sum(gaps) if gaps else 0.0
    print(f"timer-driven animation over 3 s: {fps:.1f} fps, worst frame gap "
          f"{max(gaps) * 1e3:.1f} ms")
    widget.close()


async def bench_flood(rate: float, seconds: float) -> None:
    from elvin_apps.tickertape.config import Config
    from elvin_apps.tickertape.controller import TickerController
    from elvin_apps.tickertape.groups import Group
    from elvin_apps.tickertape.history import History
    from elvin_apps.tickertape.model import ScrollerModel
    from elvin_apps.tickertape.window import TickerWindow
    from PySide6.QtCore import QTimer

    from elvin.qt import ConnectionManager
    from elvin.router.embedded import EmbeddedRouter

    router = EmbeddedRouter().start()
    tmp = tempfile.TemporaryDirectory()
    config = Config(user="bench@example.org", groups=[Group(g) for g in GROUPS])
    manager = ConnectionManager(router.url)
    history = History(Path(tmp.name) / "history.sqlite3")
    controller = TickerController(config, ScrollerModel(), history, manager)
    window = TickerWindow(controller, save_config=False)
    window.resize(1200, window.height())
    window.show()
    manager.start()
    await manager.wait_connected(10)
    await controller.wait_synced(10)

    gaps: list[float] = []
    last = [time.monotonic()]

    def probe() -> None:
        now = time.monotonic()
        gaps.append(now - last[0])
        last[0] = now

    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(probe)
    await asyncio.sleep(0.5)
    rss_start = rss_mib()
    last[0] = time.monotonic()
    timer.start()
    window.scroller.tick_gaps.clear()
    producer = subprocess.Popen([sys.executable, "-c", PRODUCER, router.url, str(rate),
                                 str(seconds)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    while producer.poll() is None:
        await asyncio.sleep(0.05)
    sent = int(producer.stdout.read().strip() or 0)
    await asyncio.sleep(1.0)
    timer.stop()
    rss_end = rss_mib()
    frame_gaps = list(window.scroller.tick_gaps)[1:]
    print(f"flood: {sent} sent at {rate:g}/s for {seconds:g} s, {controller.received} received, "
          f"model holds {len(controller.model)}, history {history.count()} rows")
    print(f"longest event-loop stall (5 ms probe timer): {max(gaps) * 1e3:.1f} ms; "
          f"worst scroller frame gap {max(frame_gaps) * 1e3:.1f} ms "
          f"({len(frame_gaps) / sum(frame_gaps):.1f} fps during the flood)")
    print(f"memory (RSS): {rss_start:.1f} MiB at start, {rss_end:.1f} MiB at end "
          f"({rss_end - rss_start:+.1f} MiB)")
    await controller.close()
    await manager.stop()
    history.close()
    window.close()
    router.stop()
    tmp.cleanup()


async def screenshot(path: Path) -> None:
    """The main window with several groups' messages, as a user sees it."""
    from elvin_apps.tickertape.config import Config
    from elvin_apps.tickertape.controller import TickerController
    from elvin_apps.tickertape.groups import Group
    from elvin_apps.tickertape.model import ScrollerModel
    from elvin_apps.tickertape.outgoing import Draft, build_notification
    from elvin_apps.tickertape.window import TickerWindow

    from elvin.qt import ConnectionManager, StatusWidget
    from elvin.router.embedded import EmbeddedRouter

    router = EmbeddedRouter().start()
    config = Config(user="alice@example.org",
                    groups=[Group("Chat"), Group("News"), Group("lunch"), Group("builds"),
                            Group("ops", key="ops-secret")])
    manager = ConnectionManager(router.url)
    controller = TickerController(config, ScrollerModel(), None, manager)
    window = TickerWindow(controller, status=StatusWidget(manager), save_config=False)
    window.resize(int(os.environ.get("TICKERTAPE_SHOT_WIDTH", "1400")), window.height())
    window.show()
    manager.start()
    await manager.wait_connected(10)
    await controller.wait_synced(10)
    await controller.send(Draft("ops", "db failover done, all green"))
    import elvin.client
    async with elvin.client.connect(router.url) as conn:
        for group, sender, text, url in [
            ("Chat", "bob@example.org", "anyone seen the new router stats page?", ""),
            ("News", "newswatcher", "Elvin 4.1 released", "https://example.org/news"),
            ("lunch", "carol@example.org", "noodles at 12:30, alice?", ""),
            ("builds", "ci", "nightly build 4711 passed", ""),
        ]:
            attrs = build_notification(Draft(group, text, url=url), sender)
            await conn.send(attrs)
        await asyncio.sleep(0.2)
        first = controller.model.entries()[1].message
        await conn.send(build_notification(Draft("", "yes, it's great", reply_to=first),
                                           "dave@example.org"))
    await asyncio.sleep(0.5)
    window.scroller.user_paused = True
    # lay the messages out across the strip as if they had been scrolling
    lane = window.scroller.lane
    x = 8.0
    for entry in controller.model.entries():
        item = lane.item(entry.uid)
        if item.width is None:
            item.width = lane._measure(item)
        for queue in (lane.fresh, lane.recycled):
            if item in queue:
                queue.remove(item)
        if item not in lane.visible:
            lane.visible.append(item)
        item.x = x
        x = item.right + lane.gap
    lane.visible.sort(key=lambda i: i.x)
    window.repaint()
    window.grab().save(str(path), "PNG")
    print(f"screenshot saved to {path}")
    await manager.stop()
    window.close()
    router.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--screenshot", metavar="PNG")
    args = parser.parse_args()
    from elvin.qt import application
    app = application([sys.argv[0]])
    import qasync

    from elvin.qt import MainThreadGC
    MainThreadGC(parent=app)  # as the app does: cycles freed on the Qt thread only
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    with loop:
        if args.screenshot:
            loop.run_until_complete(screenshot(Path(args.screenshot)))
            return 0
        print(f"memory (RSS) before the app: {rss_mib():.1f} MiB")
        bench_frames(app)
        loop.run_until_complete(bench_flood(args.rate, args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
