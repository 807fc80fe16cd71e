"""The scroller model (replacement, expiry, kill thread) and the lane geometry."""

from __future__ import annotations

import gc

import pytest
from elvin_apps.tickertape.groups import Group, GroupList
from elvin_apps.tickertape.lane import FADE_OUT, Lane
from elvin_apps.tickertape.message import Message
from elvin_apps.tickertape.model import BRIEF_SECONDS, ScrollerModel
from elvin_apps.tickertape.palette import hash_colour


@pytest.fixture(autouse=True)
def main_thread_gc():
    """Cycles are collected on the main thread only, as the app does
    (qtcompat.MainThreadGC): a Qt object collected in the router's or a
    resolver's thread would leave a dangling timer behind."""
    gc.collect()
    gc.disable()
    yield
    gc.collect()
    gc.enable()



class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def msg(text="hi", group="Chat", **kw) -> Message:
    kw.setdefault("message_id", f"id-{text}")
    return Message(group=group, sender="alice", text=text, **kw)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def model(qapp, clock):
    groups = GroupList([Group("Chat", min_time=0, max_time=3600), Group("News", colour="#123456")])
    return ScrollerModel(groups, clock=clock, default_lifetime=600)


def test_add_colours_and_lifetimes(model, clock):
    a = model.add(msg("a"))
    b = model.add(msg("b", group="news", timeout=5))  # News min_time 10 wins
    c = model.add(msg("c", group="Unknown", timeout=10**9))
    d = model.add(msg("d", timeout=0))
    assert a.colour == hash_colour("Chat") and b.colour == "#123456"
    assert a.lifetime == 600 and b.lifetime == 10 and c.lifetime == 3600
    assert d.lifetime == BRIEF_SECONDS
    assert [e.message.text for e in model.entries()] == ["a", "b", "c", "d"]


def test_log_only_is_not_shown(model):
    assert model.add(msg("quiet", timeout=-1)) is None
    assert len(model) == 0


def test_replacement_in_place(model, qtbot, clock):
    first = model.add(msg("score 1-0", replacement_id="match"))
    model.add(msg("other"))
    clock.now += 100
    with qtbot.waitSignal(model.replaced) as blocker:
        second = model.add(msg("score 2-0", replacement_id="match", message_id="id-2"))
    assert blocker.args == [first]
    assert second is first and first.version == 1
    assert [e.message.text for e in model.entries()] == ["score 2-0", "other"]
    assert first.shown_at == clock.now  # its lifetime starts again
    # same id in another group is a different message
    model.add(msg("elsewhere", group="News", replacement_id="match"))
    assert len(model) == 3


def test_expiry(model, clock):
    model.add(msg("short", timeout=30))
    model.add(msg("long", timeout=300))
    clock.now += 29
    assert model.expire() == []
    clock.now += 2
    gone = model.expire()
    assert [e.message.text for e in gone] == ["short"]
    assert [e.message.text for e in model.entries()] == ["long"]
    entry = model.entries()[0]
    assert 0.1 < entry.age_fraction(clock.now) < 0.2


def test_expiry_timer_runs(qtbot, qapp):
    model = ScrollerModel(GroupList([Group("Chat", min_time=0)]))
    model.add(msg("x", timeout=0.3))
    qtbot.waitUntil(lambda: len(model) == 0, timeout=3000)


def test_hide_and_kill_thread(model):
    root = model.add(msg("root", message_id="r"))
    model.add(msg("reply", message_id="r1", in_reply_to="r"))
    model.add(msg("reply2", message_id="r2", in_reply_to="r1"))
    model.add(msg("threaded", message_id="t1", thread_id="T"))
    keep = model.add(msg("unrelated", message_id="u"))
    assert model.kill_thread(root.message) == 3
    assert [e.message.text for e in model.entries()] == ["threaded", "unrelated"]
    # later replies in the thread stay away, and so do replies to them
    assert model.add(msg("late", message_id="r3", in_reply_to="r2")) is None
    assert model.add(msg("later", message_id="r4", in_reply_to="r3")) is None
    model.kill_thread(model.find("t1").message)
    assert model.add(msg("more", message_id="t2", thread_id="T")) is None
    model.hide(keep.uid)
    assert len(model) == 0


def test_flood_is_bounded(qapp, clock):
    model = ScrollerModel(clock=clock, max_entries=50)
    for i in range(200):
        model.add(msg(str(i), message_id=str(i)))
    assert len(model) == 50
    assert model.entries()[0].message.text == "150"


def test_set_groups_recolours(model, qtbot):
    entry = model.add(msg("x"))
    with qtbot.waitSignal(model.replaced):
        model.set_groups(GroupList([Group("Chat", colour="#abcdef")]))
    assert entry.colour == "#abcdef"


# -- lane ----------------------------------------------------------------------

def test_new_items_enter_from_the_right_and_scroll_left():
    lane = Lane(view_width=500, gap=10)
    lane.add(1, 100)
    assert lane.visible[0].x == 500
    lane.add(2, 100)  # waits: no room yet
    assert [i.uid for i in lane.visible] == [1]
    lane.advance(-120)
    assert [i.uid for i in lane.visible] == [1, 2]
    assert lane.item(2).x == pytest.approx(lane.item(1).right + 10) or lane.item(2).x == 500


def test_items_wrap_round_and_fresh_go_first():
    lane = Lane(view_width=300, gap=10)
    for uid in (1, 2, 3):
        lane.add(uid, 200)
    for _ in range(200):
        lane.advance(-10)
    seen_order = []
    for _ in range(400):
        lane.advance(-5)
        for item in lane.visible:
            if not seen_order or seen_order[-1] != item.uid:
                if item.uid not in seen_order[-3:]:
                    seen_order.append(item.uid)
    assert set(seen_order) == {1, 2, 3}  # all come round again
    lane.add(99, 50)
    assert lane.fresh[0].uid == 99       # a new message is next, ahead of recycled ones


def test_removed_visible_item_fades_then_goes():
    lane = Lane(view_width=300, gap=10)
    lane.add(1, 100)
    lane.advance(-50, now=0.0)
    lane.remove(1, now=1.0)
    assert lane.item(1).dying_since == 1.0 and 1 in lane
    assert lane.item_at(lane.item(1).x + 1) is None  # not clickable while fading
    lane.advance(-1, now=1.0 + FADE_OUT / 2)
    assert 1 in lane
    lane.advance(-1, now=1.0 + FADE_OUT)
    assert 1 not in lane and lane.idle
    lane.add(2, 100)
    lane.add(3, 100)       # queued, not visible
    lane.remove(3, now=0)  # gone at once
    assert 3 not in lane


def test_drag_back_brings_earlier_items():
    lane = Lane(view_width=300, gap=10)
    for uid in (1, 2, 3):
        lane.add(uid, 200)
    lane.advance(-310)   # 2 enters behind 1
    lane.advance(-400)   # 1 has left on the left, 3 has entered
    assert [i.uid for i in lane.visible] == [2, 3]
    lane.advance(+150)   # drag right: 3 goes back to wait, 1 comes back in front of 2
    assert [i.uid for i in lane.visible][:2] == [1, 2]
    assert lane.item(1).right + 10 == pytest.approx(lane.item(2).x)
    assert lane.item(3).x >= 300  # waiting at (or beyond) the right edge


def test_resize_pushes_followers():
    lane = Lane(view_width=1000, gap=10)
    lane.add(1, 100)
    lane.add(2, 100)
    lane.advance(-500)
    lane.advance(-300)
    assert [(i.uid, i.x) for i in lane.visible] == [(1, 200), (2, 700)]
    lane.resize_item(1, 600)  # replaced by a longer text
    assert lane.item(1).x == 200 and lane.item(2).x == 810
    lane.set_view_width(500)
    assert [i.uid for i in lane.visible] == [1] and lane.fresh[0].uid == 2


def test_items_are_measured_only_when_they_enter():
    measured = []

    def measure(uid):
        measured.append(uid)
        return 100.0

    lane = Lane(view_width=250, gap=10, measure=measure)
    for uid in range(1, 501):
        lane.add(uid)
    assert measured == [1]  # only the one that entered
    lane.advance(-260)
    assert measured == [1, 2]
    lane.resize_item(400, None)  # a queued message changed: measured when it enters
    assert measured == [1, 2] and lane.item(400).width is None
