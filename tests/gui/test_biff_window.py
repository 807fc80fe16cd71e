"""The coffee biff window with pytest-qt, against a real router.

Two windows (two users, two connections) run on one qasync loop as the app
does; clicking the cup in one must show up in the list and the count of
the other.
"""

from __future__ import annotations

import asyncio
import time

from elvin_apps.biff import CoffeeBiff
from elvin_apps.biff.cup import badge_text, cup_pixmap
from elvin_apps.biff.marquee import Marquee
from elvin_apps.biff.qtbiff import QtBiff
from elvin_apps.biff.tray import make_tray
from elvin_apps.biff.window import ACTIVE_TEXT, IDLE_TEXT, CoffeeWindow
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

import elvin
from elvin.qt import ConnectionManager, StatusWidget


async def until(predicate, timeout: float = 5.0, what: str = "condition") -> None:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await asyncio.sleep(0.02)


class Desk:
    """One user's app: manager, QtBiff and window."""

    def __init__(self, qtbot, url: str, user: str) -> None:
        self.manager = ConnectionManager(url, retry_delay=0.05, max_retry_delay=0.2,
                                         reconnect_delay=0.05)
        self.biff = CoffeeBiff(user, heartbeat=5, reply_delay=0.05)
        self.qbiff = QtBiff(self.biff, self.manager)
        self.window = CoffeeWindow(self.qbiff, status=StatusWidget(self.manager))
        qtbot.addWidget(self.window)
        self.window.show()

    async def start(self) -> None:
        self.manager.start()
        await self.manager.wait_connected(10)
        await until(lambda: self.biff.started, 5, "biff started by the connected signal")

    async def close(self) -> None:
        await self.qbiff.close()
        await self.manager.stop()


def test_click_the_cup_and_the_other_window_updates(qtbot, qt_loop, router):
    alice = Desk(qtbot, router.url, "alice")
    bob = Desk(qtbot, router.url, "bob")
    counts = []
    bob.qbiff.countChanged.connect(counts.append)

    async def scenario():
        await alice.start()
        await bob.start()
        await until(lambda: len(alice.biff.members) == len(bob.biff.members) == 2, 3)
        assert bob.window.count() == 0 and not bob.window.count_label.isEnabled()
        assert bob.window.drinkers_text() == "Nobody is having a coffee right now"
        assert alice.window.cup.text() == IDLE_TEXT and not alice.window.cup.isChecked()

        qtbot.keyClicks(alice.window.where, "in 5 minutes at the kitchen")
        qtbot.mouseClick(alice.window.cup, Qt.MouseButton.LeftButton)
        await until(lambda: bob.window.count() == 1, 3, "bob's count shows alice")
        assert bob.window.drinkers_text() == "alice — in 5 minutes at the kitchen"
        assert bob.window.count_caption.text() == "person having a coffee"
        assert counts == [1]
        # alice's own window: the cup is pressed, she is in her list as "you"
        assert alice.biff.is_active and alice.window.cup.isChecked()
        assert alice.window.cup.text() == ACTIVE_TEXT
        assert alice.window.drinkers_text() == "alice — in 5 minutes at the kitchen (you)"

        # bob joins with Enter in the text field
        qtbot.keyClicks(bob.window.where, "me too")
        qtbot.keyClick(bob.window.where, Qt.Key.Key_Return)
        await until(lambda: alice.window.count() == 2, 3)
        assert alice.window.count_caption.text() == "people having a coffee"
        assert alice.window.marquee.items() == ["alice — in 5 minutes at the kitchen (you)",
                                               "bob — me too"]
        assert bob.window.cup.isChecked()

        # alice is done
        qtbot.mouseClick(alice.window.cup, Qt.MouseButton.LeftButton)
        await until(lambda: bob.window.count() == 1, 3)
        assert bob.window.drinkers_text() == "bob — me too (you)"
        assert not alice.window.cup.isChecked()

        # alice closes her biff: bob sees her leave at once
        await alice.close()
        await until(lambda: [m.user for m in bob.biff.members] == ["bob"], 2)
        await bob.close()

    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 30))


def test_biff_follows_the_manager_to_another_router(qtbot, qt_loop, router):
    from elvin.router.embedded import EmbeddedRouter
    other = EmbeddedRouter().start()
    desk = Desk(qtbot, router.url, "alice")

    async def scenario():
        await desk.start()
        first = desk.biff.connection
        async with elvin.connect(other.url) as conn:
            watcher = CoffeeBiff("watcher", heartbeat=5, reply_delay=0.05)
            await watcher.start(conn)
            await desk.manager.set_url(other.url)
            await until(lambda: desk.biff.connection is not None
                        and desk.biff.connection is not first and desk.biff.started, 5)
            await until(lambda: "alice" in {m.user for m in watcher.members}, 3)
            qtbot.mouseClick(desk.window.cup, Qt.MouseButton.LeftButton)
            await until(lambda: watcher.count == 1, 3)
            assert desk.window.count() == 1
            await watcher.stop()
        await desk.close()

    try:
        qt_loop.run_until_complete(asyncio.wait_for(scenario(), 30))
    finally:
        other.stop()


def test_marquee_stands_still_when_it_fits_and_scrolls_when_not(qtbot):
    marquee = Marquee(placeholder="Nobody")
    qtbot.addWidget(marquee)
    marquee.resize(300, marquee.sizeHint().height())
    marquee.move(400, 400)       # away from the (offscreen) mouse: hovering pauses it
    marquee.show()
    assert marquee.text() == "Nobody" and not marquee.isScrolling()
    assert marquee.toolTip() == "Nobody"
    marquee.setItems(["ann", "ben"])
    assert marquee.text() == "ann   •   ben" and not marquee.isScrolling()
    assert marquee.toolTip() == "ann\nben"
    marquee.setItems([f"drinker number {i}" for i in range(20)])
    assert marquee.isScrolling()
    qtbot.waitUntil(lambda: marquee.offset() > 0, timeout=4000)   # after the hold
    marquee.rewind()
    assert marquee.offset() == 0
    marquee.setItems([])
    assert not marquee.isScrolling() and marquee.offset() == 0


def test_cup_drawings_and_badge(qapp):
    empty = cup_pixmap(64).toImage()
    full = cup_pixmap(64, full=True, steam=True).toImage()
    assert empty != full
    # opaque pixels where the cup is, transparent in a corner
    assert empty.pixelColor(32, 60).alpha() > 0
    assert empty.pixelColor(1, 1).alpha() == 0
    badged = cup_pixmap(64, count=3).toImage()
    red = badged.pixelColor(64 - 6, 10)
    assert red.alpha() == 255 and red.red() > 150 and red.green() < 100
    assert cup_pixmap(64, count=0).toImage() == empty
    assert [badge_text(n) for n in (0, 7, 42, 100, 5000)] == ["0", "7", "42", "99+", "99+"]
    assert QColor(red).isValid()


def test_no_tray_headless_is_fine(qtbot, qt_loop, router):
    desk = Desk(qtbot, router.url, "alice")
    assert make_tray(desk.qbiff, desk.window) is None     # offscreen: no tray
    assert desk.window.windowTitle() == "Coffee biff — alice"
