"""Tickertape: how late messages enter the strip under steady chat.

    .venv/bin/python bench/ticker_backlog.py [--speed 80] [--width 700] [--seconds 60]

For one message of about ``--width`` px every 4, 2, 1, 0.5 and 0.2 s (at the
user's ``--speed``, the default 80 px/s), the scroller's frames are run on a
simulated 60 Hz clock (``ScrollerWidget.frame``; real widget and layout,
offscreen) and it prints, per rate: messages, the median and worst delay from
arrival to entering the line, how many were skipped to the history, and the
fastest the line ran. Target (issue #45): worst delay at most 5 s, nothing
skipped at one message every 2 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

FRAME = 1 / 60


def run(speed: float, width: float, every: float, seconds: float) -> str:
    from elvin_apps.tickertape.groups import Group, GroupList
    from elvin_apps.tickertape.message import Message
    from elvin_apps.tickertape.model import ScrollerModel
    from elvin_apps.tickertape.scroller import ScrollerWidget

    model = ScrollerModel(GroupList([Group("Chat")]))
    scroller = ScrollerWidget(model, speed=speed)
    scroller.resize(1024, scroller.sizeHint().height())
    words: list[str] = []
    while True:
        words.append(f"word{len(words)}")
        probe = model.add(Message(group="Chat", sender="alice", text=" ".join(words),
                                  message_id="probe"))
        if scroller._item_width(probe) >= width:
            break
    model.clear()
    scroller.lane.clear()
    text = " ".join(words)
    start = time.monotonic()
    arrived: dict[int, float] = {}
    delays: dict[int, float] = {}
    top = 0.0
    t, next_at, n = 0.0, 0.0, 0
    while t < seconds + 10:
        if t >= next_at and t < seconds:
            entry = model.add(Message(group="Chat", sender="alice", text=f"{n}: {text}",
                                      message_id=f"m{n}"))
            arrived[entry.uid] = t
            n += 1
            next_at += every
        top = max(top, scroller.effective_speed)
        scroller.frame(FRAME, start + t)
        for uid, at in arrived.items():
            if uid not in delays and scroller.lane.is_visible(uid):
                delays[uid] = t - at
        t += FRAME
    shown = list(delays.values()) or [0.0]
    scroller.deleteLater()
    return (f"every {every:>4g} s: {len(arrived):4d} messages, delay median "
            f"{statistics.median(shown):4.1f} s, worst {max(shown):4.1f} s, "
            f"skipped {scroller.skipped:3d}, fastest {top:6.0f} px/s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", type=float, default=80.0)
    parser.add_argument("--width", type=float, default=700.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    from PySide6.QtWidgets import QApplication

    QApplication([])
    print(f"speed {args.speed:g} px/s, messages of {args.width:g} px, 1024 px line")
    for every in (4.0, 2.0, 1.0, 0.5, 0.2):
        print(run(args.speed, args.width, every, args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
