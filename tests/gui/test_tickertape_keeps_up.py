"""The strip keeps up with moderate chat: at the default speed and one
~700 px message every 2 s, every message enters the line (is shown) within
5 s of its arrival unless the user paused; a flood that no line can show in
time is skipped to the history, and says so. The frames are driven with a
simulated clock (``ScrollerWidget.frame``), the widget and its layout are
real."""

from __future__ import annotations

import time

import pytest
from elvin_apps.tickertape.config import Config
from elvin_apps.tickertape.groups import Group, GroupList
from elvin_apps.tickertape.model import ScrollerModel
from elvin_apps.tickertape.scroller import SKIP_AFTER

from tests.gui.test_tickertape_widgets import msg

FRAME = 1 / 60


@pytest.fixture
def model(qapp):
    return ScrollerModel(GroupList([Group("Chat")]))


def long_text(scroller, model, width: float = 700.0) -> str:
    """A chat line that lays out ``width`` px wide or a little more."""
    words = []
    while True:
        words.append(f"word{len(words)}")
        entry = model.add(msg(" ".join(words), message_id="probe"))
        wide = scroller._item_width(entry)
        model.remove(entry.uid) if hasattr(model, "remove") else None
        if wide >= width:
            break
    model.clear()
    scroller.lane.clear()
    return " ".join(words)


def run_chat(scroller, model, text: str, every: float, seconds: float,
             paused: tuple[float, float] | None = None) -> dict[int, float]:
    """Messages every ``every`` s for ``seconds`` s of frames; returns each
    message's delay from arrival to entering the line (inf: never)."""
    start = time.monotonic()
    arrived: dict[int, float] = {}
    delays: dict[int, float] = {}
    t, next_at, n = 0.0, 0.0, 0
    while t < max(seconds, paused[1] if paused else 0) + 6:
        if t >= next_at and t < seconds:
            entry = model.add(msg(f"{n}: {text}", message_id=f"m{n}"))
            arrived[entry.uid] = t
            n += 1
            next_at += every
        scroller.user_paused = paused is not None and paused[0] <= t < paused[1]
        scroller.frame(FRAME, start + t)
        for uid, at in arrived.items():
            if uid not in delays and scroller.lane.is_visible(uid):
                delays[uid] = t - at
        t += FRAME
    return {uid: delays.get(uid, float("inf")) for uid in arrived}


def test_moderate_chat_is_shown_within_5_seconds(scroller, model):
    scroller.set_speed(Config().speed)             # the default speed
    assert scroller.speed == 80
    delays = run_chat(scroller, model, long_text(scroller, model), every=2.0, seconds=60)
    assert len(delays) == 30
    assert max(delays.values()) <= 5.0, sorted(delays.values())[-5:]
    assert scroller.skipped == 0                  # moderate chat: every one shown


def test_a_flood_is_skipped_to_the_history_and_says_so(scroller, model):
    scroller.set_speed(80)
    delays = run_chat(scroller, model, long_text(scroller, model), every=0.2, seconds=10)
    shown = [d for d in delays.values() if d != float("inf")]
    assert shown and max(shown) <= 5.0
    assert scroller.skipped > 0 and "skipped: in history" in scroller.status_text()
    assert len(model.entries()) == len(delays)     # skipped from the line, not the model


def test_time_paused_does_not_count(scroller, model):
    """Paused for 20 s with messages arriving: none is skipped for the
    wait, and they come in once the line runs again."""
    scroller.set_speed(80)
    delays = run_chat(scroller, model, long_text(scroller, model), every=2.0, seconds=8,
                      paused=(0.5, 20.5))
    assert scroller.skipped == 0
    assert all(d != float("inf") for d in delays.values())
    assert all(item.waited <= SKIP_AFTER for item in scroller.lane.fresh)


def test_a_burst_is_spread_over_its_deadlines(scroller, model):
    """Eight ~400 px messages at once (a conversation arriving together):
    the line speeds up for the last of them too, so none is late or
    skipped (bringing the first in just in time left the sixth late)."""
    scroller.set_speed(80)
    text = long_text(scroller, model, 400.0)
    delays = run_chat(scroller, model, text, every=0.0, seconds=7.5 * FRAME)
    assert len(delays) == 8
    assert max(delays.values()) <= 5.0 and scroller.skipped == 0, sorted(delays.values())
