"""The coffee biff window with pytest-qt, against a real router.

Two windows (two users, two connections) run on one qasync loop as the app
does; clicking the cup in one must show up in the list and the count of
the other.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from elvin_apps.biff import CoffeeBiff, protocol
from elvin_apps.biff.cup import badge_text, cup_pixmap
from elvin_apps.biff.notify import CoffeeNotifier, new_starters
from elvin_apps.biff.people import IDLE, for_how_long, short_name
from elvin_apps.biff.qtbiff import QtBiff
from elvin_apps.biff.roster import Member
from elvin_apps.biff.tray import make_tray
from elvin_apps.biff.window import ACTIVE_TEXT, IDLE_TEXT, CoffeeWindow
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

import elvin
from elvin.qt import ConnectionManager, StatusWidget
from tests.waiting import until


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
        assert alice.window.drinkers_text() == ("alice — in 5 minutes at the kitchen (you), "
                                                "bob — me too")
        assert [row[:2] for row in alice.window.people.texts()] == [
            ("\N{HOT BEVERAGE} alice (you)", "in 5 minutes at the kitchen"),
            ("\N{HOT BEVERAGE} bob", "me too")]
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


class NotificationService:
    """A freedesktop notification service on a private D-Bus (a real
    dbus-daemon), in its own process (``notification_service.py``), with the
    Notify calls it got."""

    def __init__(self, address: str) -> None:
        self.calls: list[tuple] = []
        script = Path(__file__).with_name("notification_service.py")
        self.process = subprocess.Popen([sys.executable, script, address], text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if self.process.stdout.readline().strip() != "ready":
            self.process.kill()
            raise AssertionError("the notification service did not start")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            app, summary, body, hints, timeout = json.loads(line)
            self.calls.append((app, summary, body, hints, timeout))

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(5)
        self._reader.join(5)


@pytest.fixture
def notification_service(session_bus):
    """The service on the private bus, closed before the bus stops."""
    service = NotificationService(session_bus)
    yield service
    service.close()


@pytest.fixture
def session_bus():
    """A private session bus (dbus-daemon), its address; skipped without one."""
    if shutil.which("dbus-daemon") is None or shutil.which("gdbus") is None:
        pytest.skip("dbus-daemon and gdbus are needed")
    daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        yield daemon.stdout.readline().strip()
    finally:
        daemon.terminate()
        daemon.wait(5)


def presence(user: str, status: str, text: str = "", duration: int = 0) -> dict:
    return protocol.encode("update", user=user, client_id=f"id-{user}", groups=("coffee",),
                           status=status, text=text, duration=duration)


def test_people_list_shows_notes_durations_and_idle_people(qtbot, qt_loop, router):
    """A fixed list: who has a coffee with their note and for how long (from
    the Status-Duration they announced), then who is around, in grey."""
    desk = Desk(qtbot, router.url, "bob@desk.example")

    async def scenario():
        await desk.start()
        async with elvin.connect(router.url) as other:
            await other.send(presence("carol@lab.example", "coffee", "kitchen", 4 * 60 + 10))
            await other.send(presence("dave@lab.example", "online"))
            await other.send(presence("erin@lab.example", "coffee", "", 5))
            await until(lambda: len(desk.window.people.texts()) == 4, 3, "four people listed")
        rows.extend(desk.window.people.texts())
        grey.extend(people.topLevelItem(i).foreground(0).color() == IDLE for i in range(4))
        tips.append(people.topLevelItem(0).toolTip(0))
        await desk.close()

    people = desk.window.people
    rows, grey, tips = [], [], []
    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 20))
    assert rows == [("\N{HOT BEVERAGE} carol", "kitchen", "for 4 min"),
                    ("\N{HOT BEVERAGE} erin", "", "just now"),
                    ("   bob (you)", "", ""),
                    ("   dave", "", "")]
    assert grey == [False, False, True, True]
    assert tips == ["carol@lab.example"]
    assert [for_how_long(s) for s in (0, 59, 60, 3599, 3600, 3960, 50 * 3600)] == [
        "just now", "just now", "for 1 min", "for 59 min", "for 1 h", "for 1 h 6 min",
        "for 2 days"]
    assert short_name("ann@a", {"ann@a", "Ann@b"}) == "ann@a"


def test_a_desktop_notification_when_someone_starts_a_coffee(qtbot, qt_loop, router,
                                                             session_bus, notification_service):
    service = notification_service
    alice = Desk(qtbot, router.url, "alice")
    alice.notifier = CoffeeNotifier(bus_address=session_bus, sound=True)
    alice.window = CoffeeWindow(alice.qbiff, notifier=alice.notifier)
    qtbot.addWidget(alice.window)
    bob = Desk(qtbot, router.url, "bob")
    assert alice.notifier.backend == "freedesktop"

    async def scenario():
        await alice.start()
        await bob.start()
        await until(lambda: len(alice.biff.members) == 2, 3)
        bob.qbiff.setActive(True, "kitchen")
        await until(lambda: service.calls, 5, "the service got a notification")
        # switched off in the window: bob's next coffee is not told
        alice.window.notify_action.setChecked(False)
        bob.qbiff.setActive(False)
        await until(lambda: alice.biff.count == 0, 3)
        bob.qbiff.setActive(True, "again")
        await until(lambda: alice.biff.count == 1, 3)
        # alice's own coffee is never news to her
        alice.window.notify_action.setChecked(True)
        alice.qbiff.setActive(True)
        await until(lambda: alice.biff.count == 2, 3)
        async with elvin.connect(router.url) as probe:   # a round trip, then count
            await probe.send(presence("zed", "online"))
            await until(lambda: "zed" in {m.user for m in alice.biff.members}, 3)
        await alice.close()
        await bob.close()

    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 30))
    alice.notifier.wait()
    assert len(service.calls) == 1
    app, summary, body, hints, timeout = service.calls[0]
    assert (app, summary, body) == ("Coffee biff", "bob is having a coffee", "kitchen")
    assert hints == {"category": "presence.online", "sound-name": "message-new-instant"}
    assert timeout == 8000


def test_notification_falls_back_quietly(qtbot, session_bus):
    """No service on the bus and no tray: nothing is shown, nothing breaks."""
    notifier = CoffeeNotifier(bus_address=session_bus)
    assert notifier.backend == "none"
    assert notifier.notify("x", "y") == "none" and notifier.shown == 0
    assert CoffeeNotifier(enabled=False).notify("x", "y") == "off"
    old = Member("k", "old", "coffee", since=0.0)
    new = Member("n", "new", "coffee", since=290.0)
    me = Member("m", "me", "coffee", since=295.0, local=True)
    assert new_starters([], [old, new, me], now=300.0) == [new]


def test_while_disconnected_the_list_may_be_out_of_date(qtbot, qt_loop, router):
    desk = Desk(qtbot, router.url, "alice")
    status = StatusWidget(desk.manager, show_url=False)
    desk.window.layout().addWidget(status)

    async def scenario():
        await desk.start()
        assert desk.window.stale_label.isHidden()
        port = router.url.rsplit(":", 1)[1]
        assert status.text() == "Connected" and port in status.toolTip()
        router.stop()
        await until(lambda: desk.manager.state != "connected", 5)
        assert desk.window.stale_label.isVisible()
        assert desk.window.people.stale
        assert status.text() in ("Reconnecting…", "Not connected", "Connecting…")
        assert port in status.toolTip() and port not in status.text()
        router.start()
        await until(lambda: desk.manager.state == "connected", 10)
        assert desk.window.stale_label.isHidden() and not desk.window.people.stale
        await desk.close()

    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 30))


def test_odd_names_reach_the_notification_service_as_text(qtbot, session_bus,
                                                          notification_service):
    """gdbus reads its arguments as GVariant text: a user called ``true`` or
    ``42``, quotes and backslashes arrive as the strings they are."""
    service = notification_service
    notifier = CoffeeNotifier(bus_address=session_bus)
    assert notifier.backend == "freedesktop"
    for title, body in (("true", "42"), ("it's", 'a "b" \\ c\nsecond line')):
        notifier.notify(title, body)
    qtbot.waitUntil(lambda: len(service.calls) == 2, timeout=20_000)
    assert sorted((c[1], c[2]) for c in service.calls) == [   # two gdbus calls: any order
        ("it's", 'a "b" \\ c\nsecond line'), ("true", "42")]
    notifier.wait()          # no gdbus QProcess is destroyed while it runs
    assert not notifier._calls
    # the notifier dropped, its processes' deleteLater runs: the handlers held
    # it strongly once, and it was then deleted from inside a process's own
    # destructor (a crash here, or in the next test, in about 1 run in 10)
    del notifier
    QApplication.processEvents()


def test_a_biff_on_two_routers_fails_over_and_says_where(qtbot, qt_loop, make_router):
    """Given two routers, the biff carries on at the second when the first
    stops: its title and its status tooltip name the router it is on, and
    a coffee started there reaches a colleague at that router."""
    from elvin.client.session import client_uri
    from elvin.qt.status import router_name

    first, second = make_router(), make_router()
    there = str(client_uri(second.url))
    alice = Desk(qtbot, [first.url, second.url], "alice")
    bob = Desk(qtbot, second.url, "bob")

    async def scenario():
        await alice.start()
        await bob.start()
        await asyncio.get_running_loop().run_in_executor(None, first.stop)
        await until(lambda: alice.manager.url == there and alice.manager.state == "connected",
                    what="alice at the second router")
        assert alice.window.windowTitle() == f"Coffee biff — alice at {router_name(there)}"
        status = alice.window.findChild(StatusWidget)
        assert status.toolTip().startswith(f"Connected to {there}")
        assert f"Moved here from {client_uri(first.url)}" in status.toolTip()
        alice.window.cup.click()
        await until(lambda: any(m.user == "alice" for m in bob.biff.active_members),
                    what="bob sees alice's coffee")
        await alice.close()
        await bob.close()

    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 40))
