"""The biff as a roster: colleagues and people who left stay listed, with
when they last had a coffee; an alert reaches the user even with no
notification service and no tray. Real router, real windows (offscreen),
a real (private) D-Bus with no notification service on it."""

from __future__ import annotations

import asyncio
import json

import pytest
from elvin_apps.biff.acquaintances import PeopleBook, ago
from elvin_apps.biff.config import ConfigError, load
from elvin_apps.biff.notify import CoffeeNotifier, alert_text
from elvin_apps.biff.people import people_rows
from elvin_apps.biff.roster import Member
from elvin_apps.biff.window import CoffeeWindow
from PySide6.QtCore import Qt

from tests.gui.test_biff_window import Desk, session_bus  # noqa: F401 - a fixture
from tests.waiting import until


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_roster_keeps_people_who_left(qtbot, qt_loop, router, tmp_path):
    """bob has a coffee, then quits his biff: alice still lists him, as
    seen just now, with his last coffee; carol, a colleague never seen, is
    listed too. After alice restarts, the book brings them back."""
    book = PeopleBook(["carol@lab", "Bob"], path=tmp_path / "people.json")
    alice = Desk(qtbot, router.url, "alice")
    alice.window.close()
    alice.window = CoffeeWindow(alice.qbiff, book=book)
    qtbot.addWidget(alice.window)
    bob = Desk(qtbot, router.url, "bob")

    async def scenario():
        await alice.start()
        await bob.start()
        await until(lambda: len(alice.biff.members) == 2, 5, "alice sees bob")
        bob.qbiff.setActive(True, "kitchen")
        await until(lambda: alice.biff.count == 1, 5, "bob's coffee reaches alice")
        alice.window.people.refresh()
        await bob.close()                        # bob's biff says goodbye
        await until(lambda: len(alice.biff.members) == 1, 5, "bob left the roster")
        alice.window.people.refresh()
        rows.extend(alice.window.people.rows())
        texts.extend(alice.window.people.texts())
        alice.window.close()                     # writes the book down
        await alice.close()

    rows, texts = [], []
    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 30))
    by_name = {row.name: row for row in rows}
    assert set(by_name) == {"alice", "bob", "carol"}
    assert by_name["bob"].away and by_name["bob"].note == "seen just now"
    assert by_name["bob"].duration == "last coffee just now"
    assert by_name["carol"].away and by_name["carol"].note == "not seen yet"
    assert by_name["carol"].duration == ""
    assert [t[0].strip() for t in texts][-2:] == ["bob", "carol"]   # away people last
    again = PeopleBook(["carol@lab"], path=tmp_path / "people.json")
    assert again.get("bob").coffee is not None and again.get("bob").seen is not None


def test_last_coffee_is_said_in_words_as_time_goes_by():
    wall, mono = Clock(), Clock(500.0)
    book = PeopleBook(["dave"])
    coffee = Member("k", "erin", "coffee", "lab", since=mono.now - 120)
    me = Member("m", "me", "online", local=True)
    book.observe([coffee, me], wall.now, mono.now)
    assert book.get("erin").coffee == pytest.approx(wall.now - 120)
    wall.now += 2 * 3600
    mono.now += 2 * 3600
    book.observe([Member("k", "erin", "online", since=mono.now - 60), me], wall.now, mono.now)
    assert book.last_coffee("erin", wall.now) == "last coffee 2 h ago"
    book.observe([me], wall.now + 60, mono.now + 60)            # erin's biff quits
    assert book.get("erin").left == wall.now + 60 and not book.get("erin").here
    assert [p.user for p in book.away()] == ["erin", "dave"]
    assert book.get("me") is None                                # ourselves: not in the book
    assert [ago(s) for s in (0, 59, 60, 3599, 7200, 3 * 86400)] == [
        "just now", "just now", "1 min ago", "59 min ago", "2 h ago", "3 days ago"]


def test_people_rows_put_the_away_after_the_around(qapp):
    class FakeBiff:          # the roster as people_rows reads it
        idle_status = "online"

        def __init__(self, members):
            self.members = members
            self.active_members = [m for m in members if m.status == "coffee"]

    wall = 10_000.0
    book = PeopleBook(["zoe"])
    book.observe([Member("a", "ann", "coffee", since=90.0)], wall - 3600, 100.0)
    book.observe([], wall - 1800, 1900.0)                          # ann left half an hour ago
    biff = FakeBiff([Member("b", "ben", "online", since=0.0)])
    rows = people_rows(biff, now=2000.0, book=book, wall=wall)
    assert [(r.name, r.note, r.duration, r.away) for r in rows] == [
        ("ben", "", "", False),
        ("ann", "seen 30 min ago", "last coffee 1 h ago", True),
        ("zoe", "not seen yet", "", True)]


def test_an_alert_reaches_the_user_without_a_service_or_a_tray(qtbot, qt_loop, router,
                                                               session_bus):  # noqa: F811
    """No notification service on the bus, no tray (offscreen): the window
    flashes a banner (and asks for attention); the body does not repeat
    the name."""
    notifier = CoffeeNotifier(bus_address=session_bus)
    alice = Desk(qtbot, router.url, "alice")
    alice.window.close()
    alice.window = CoffeeWindow(alice.qbiff, notifier=notifier)
    qtbot.addWidget(alice.window)
    alice.window.show()
    assert notifier.backend == "window"
    bob = Desk(qtbot, router.url, "bob")

    async def scenario():
        await alice.start()
        await bob.start()
        await until(lambda: len(alice.biff.members) == 2, 5)
        bob.qbiff.setActive(True, "at the kitchen")
        await until(lambda: alice.window.banner_text(), 5, "the banner")
        await alice.close()
        await bob.close()

    shown = []
    notifier.notified.connect(lambda title, body: shown.append((title, body)))
    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 30))
    assert shown == [("bob is having a coffee", "at the kitchen")]
    assert alice.window.banner_text() == "\N{HOT BEVERAGE} bob is having a coffee \N{EM DASH} " \
                                         "at the kitchen"
    assert notifier.shown == 1
    qtbot.mouseClick(alice.window.banner, Qt.MouseButton.LeftButton)
    assert alice.window.banner_text() == ""


def test_alert_text_names_each_person_once():
    one = Member("a", "ann", "coffee", "kitchen")
    assert alert_text([one]) == ("ann is having a coffee", "kitchen")
    assert alert_text([Member("a", "ann", "coffee")])[1] == "Just started. Click the cup to join."
    two = [one, Member("b", "ben", "coffee")]
    assert alert_text(two) == ("2 people are having a coffee", "ann: kitchen")
    assert alert_text([Member("a", "ann", "coffee"), Member("b", "ben", "coffee")]) == \
        ("2 people are having a coffee", "ann and ben")


def test_the_book_survives_garbage(tmp_path):
    path = tmp_path / "people.json"
    for garbage in ("{oops", "[]", json.dumps({"version": 1, "people": [
            {"user": 3}, "x", {"user": "ok", "seen": "yesterday", "coffee": float("inf")}]})):
        path.write_text(garbage)
        book = PeopleBook(path=path)
        assert all(p.seen is None and p.coffee is None for p in book.people.values())
    book = PeopleBook(path=tmp_path / "dir" / "people.json")
    book.observe([Member("a", "ann", "online")], 100.0, 1.0)
    book.save()
    assert PeopleBook(path=tmp_path / "dir" / "people.json").get("ann").seen == 100.0
    (tmp_path / "file").write_text("")
    blocked = PeopleBook(path=tmp_path / "file" / "people.json")
    blocked.observe([Member("a", "ann", "online")], 100.0, 1.0)
    blocked.save()                                   # logged, not raised


@pytest.mark.parametrize("value", ['"alice"', "[1, 2]", '["", "bob"]', '["a\\u0007b"]'])
def test_colleagues_must_be_a_list_of_names(tmp_path, value):
    path = tmp_path / "biff.toml"
    path.write_text(f"colleagues = {value}\n")
    with pytest.raises(ConfigError, match="colleagues must be a list of user names"):
        load(path)


def test_colleagues_are_read(tmp_path):
    path = tmp_path / "biff.toml"
    path.write_text('colleagues = ["alice@office", " bob "]\n')
    assert load(path).colleagues == ["alice@office", "bob"]


@pytest.mark.parametrize("garbage", [
    '{"version": 1, "people": 5}',
    '{"version": 1, "people": {"user": "ann"}}',
    '{"version": 1, "people": [{"user": "ann", "seen": 1' + "0" * 400 + '}]}',
    '{"version": 1, "people": [{"user": "ann", "seen": NaN, "coffee": -Infinity}]}',
    '{"version": 1, "people": [{"user": "ann", "seen": 1e400}]}',
    '{"version": 1, "people": [{"user": "ann", "seen": 17',
    "[" * 100_000,
    '{"version": "1", "people": []}',
], ids=["int", "object", "huge-int", "nan", "huge-float", "truncated", "deep", "version"])
def test_a_bad_people_file_is_ignored_and_named(tmp_path, caplog, garbage):
    path = tmp_path / "people.json"
    path.write_text(garbage)
    with caplog.at_level("INFO", logger="elvin_apps.biff"):
        book = PeopleBook(["carol"], path=path)
    assert all(p.seen is None and p.coffee is None for p in book.people.values())
    assert book.get("carol").colleague
    assert str(path) in caplog.text


def test_good_entries_beside_bad_ones_are_kept(tmp_path, caplog):
    path = tmp_path / "people.json"
    path.write_text('{"version": 1, "people": [{"user": "ann", "seen": 100, "coffee": 9'
                    + "9" * 400 + '}, {"user": "bob", "seen": 200.5}, 7]}')
    with caplog.at_level("INFO", logger="elvin_apps.biff"):
        book = PeopleBook(path=path)
    assert (book.get("ann").seen, book.get("ann").coffee) == (100.0, None)
    assert book.get("bob").seen == 200.5
    assert "2 bad entries or times ignored" in caplog.text and str(path) in caplog.text
