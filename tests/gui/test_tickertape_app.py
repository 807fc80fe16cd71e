"""The tickertape app against a real router: ep sends, the ticker shows.

Each test runs the app's controller (subscriptions, quench, sending, history)
on a qasync loop, as the app does, with the bundled router in a thread on a
free loopback port; notifications come from the real ``ep`` tool in a
subprocess or from a plain ``elvin.client`` connection.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
from elvin_apps.tickertape.config import Config
from elvin_apps.tickertape.controller import TickerController
from elvin_apps.tickertape.groups import Group
from elvin_apps.tickertape.history import History
from elvin_apps.tickertape.historywindow import HistoryWindow
from elvin_apps.tickertape.model import ScrollerModel
from elvin_apps.tickertape.outgoing import Draft
from elvin_apps.tickertape.palette import hash_colour
from elvin_apps.tickertape.scroller import ScrollerWidget
from PySide6.QtCore import QUrl

import elvin.client
from elvin.qt import ConnectionManager
from elvin.text import format_notification
from tests.waiting import until

ROOT = Path(__file__).resolve().parents[2]

# cycles are collected on the main thread only, as the app does (tests/gui/conftest.py);
# router and qt_loop are shared fixtures too (tests/conftest.py, tests/gui/conftest.py)


class Apps:
    """Tickertape controllers made in a test, closed at its end."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url = url
        self.tmp_path = tmp_path
        self.made: list[TickerController] = []

    def make(self, groups: list[Group], user: str = "me@test", history: Path | None = None,
             extra: str = "") -> TickerController:
        config = Config(user=user, groups=groups, extra_subscription=extra)
        manager = ConnectionManager(self.url, retry_delay=0.05, max_retry_delay=0.2)
        store = History(history or self.tmp_path / f"{user}.sqlite3")
        controller = TickerController(config, ScrollerModel(), store, manager)
        manager.start()
        self.made.append(controller)
        return controller

    async def ready(self, *controllers: TickerController) -> None:
        for c in controllers:
            await c.manager.wait_connected(10)
            await c.wait_synced(10)

    async def close(self) -> None:
        for c in self.made:
            await c.close()
            await c.manager.stop()
            c.history.close()


def run(loop, coro, timeout: float = 40):
    return loop.run_until_complete(asyncio.wait_for(coro, timeout))


async def ep(url: str, *notifications: dict, keys: list[str] = ()) -> None:
    """Send notifications with the real ep tool (a subprocess).

    It runs to completion while the Qt loop waits (the router has its own
    thread, and our connection reads what it buffered afterwards): qasync's
    thread executor crashed Qt's timer dispatch under load in this setup."""
    text = "".join(format_notification(n) + "\n---\n" for n in notifications)
    cmd = [sys.executable, "-m", "elvin.tools.ep", "-e", url, *keys]
    result = subprocess.run(cmd, input=text.encode(), capture_output=True, timeout=30, cwd=ROOT)
    assert result.returncode == 0, result.stderr.decode()
    await asyncio.sleep(0)


def chat(text: str, **extra) -> dict:
    return {"Group": "Chat", "From": "bob@test", "Message": text,
            "Message-Id": f"id-{text}", "org.tickertape.message": 3001, **extra}


def stored(controller: TickerController) -> list[str]:
    """The texts in the controller's history file (read after it closed)."""
    history = History(controller.history.path)
    try:
        return [r.message.text for r in history.recent()]
    finally:
        history.close()


def texts(controller: TickerController) -> list[str]:
    return [e.message.text for e in controller.model.entries()]


def test_ep_message_appears_in_group_colour(qtbot, qt_loop, router, tmp_path):
    apps = Apps(router.url, tmp_path)
    app = apps.make([Group("Chat"), Group("News", colour="#00c000")])
    scroller = ScrollerWidget(app.model)
    qtbot.addWidget(scroller)

    async def scenario():
        await apps.ready(app)
        await ep(router.url, chat("hello from ep"),
                 {"TICKERTAPE": "news", "USER": "old@client", "TICKERTEXT": "legacy news",
                  "TIMEOUT": 1},
                 {"Group": "Elsewhere", "From": "x", "Message": "not for us", "Message-Id": "e"})
        await until(lambda: len(app.model) == 2)
        await apps.close()

    run(qt_loop, scenario())
    first, second = app.model.entries()
    assert (first.message.text, first.colour) == ("hello from ep", hash_colour("Chat"))
    assert (second.message.text, second.colour) == ("legacy news", "#00c000")
    assert second.message.timeout == 60 and second.lifetime == pytest.approx(60)
    assert first.uid in scroller.lane  # the scroller follows the model


def test_replacement_and_timeout(qtbot, qt_loop, router, tmp_path):
    apps = Apps(router.url, tmp_path)
    app = apps.make([Group("Chat", min_time=0)])

    async def scenario():
        await apps.ready(app)
        await ep(router.url, chat("score 0-0", **{"Replacement-Id": "match-1"}),
                 chat("other news"))
        await until(lambda: len(app.model) == 2)
        await ep(router.url, chat("score 1-0", **{"Replacement-Id": "match-1"}))
        await until(lambda: "score 1-0" in texts(app))
        assert texts(app) == ["score 1-0", "other news"]  # replaced in place
        await ep(router.url, chat("short lived", Timeout=1))
        await until(lambda: "short lived" in texts(app))
        await until(lambda: "short lived" not in texts(app), timeout=5)
        await apps.close()

    run(qt_loop, scenario())
    assert texts(app) == ["score 1-0", "other news"]
    assert stored(app) == ["score 0-0", "other news", "score 1-0", "short lived"]


def test_reply_carries_in_reply_to_and_thread_id(qtbot, qt_loop, router, tmp_path):
    apps = Apps(router.url, tmp_path)
    app = apps.make([Group("Chat")])

    async def scenario():
        await apps.ready(app)
        async with elvin.client.connect(router.url) as other:
            sub = await other.subscribe('require(In-Reply-To) || require(Thread-Id)')
            await ep(router.url, chat("question?", **{"Thread-Id": "thread-42"}))
            await until(lambda: len(app.model) == 1)
            referent = app.model.entries()[0].message
            await sub.get(timeout=5)  # the question itself (it has a Thread-Id)
            sent = await app.send(Draft("", "answer!", reply_to=referent))
            got = await sub.get(timeout=5)
            # and a new message to a group we do not subscribe to starts a thread
            await app.send(Draft("Lunch", "anyone for lunch?"))
            lunch = await sub.get(timeout=5)
            await other.send({"Group": "Lunch", "From": "carol", "Message": "me!",
                              "Message-Id": "c1", "Thread-Id": lunch["Thread-Id"],
                              "In-Reply-To": lunch["Message-Id"]})
            await until(lambda: "me!" in texts(app))
        await apps.close()
        return sent, got, lunch

    sent, got, lunch = run(qt_loop, scenario())
    assert got["In-Reply-To"] == "id-question?" and got["Thread-Id"] == "thread-42"
    assert got["Group"] == "Chat" and got["Message"] == "answer!"
    assert got["Message-Id"] == sent["Message-Id"] != "id-question?"
    assert got["org.tickertape.message"] == 3001 and got["User-Agent"].startswith("elvin-suite")
    assert got["From"] == "me@test"
    assert lunch["Group"] == "Lunch" and len(lunch["Thread-Id"]) == 36
    assert "In-Reply-To" not in lunch


def test_private_group_needs_the_key(qtbot, qt_loop, router, tmp_path):
    apps = Apps(router.url, tmp_path)
    member = apps.make([Group("Chat"), Group("Secret", key="open sesame")], user="m@test")
    outsider = apps.make([Group("Chat"), Group("Secret")], user="o@test")
    snoop = apps.make([Group("Chat")], user="s@test", extra="require(Message)")

    async def scenario():
        await apps.ready(member, outsider, snoop)
        await member.send(Draft("Secret", "for members only"))
        # a forged message in the group without the key
        await ep(router.url, {"Group": "Secret", "From": "mallory", "Message": "forged",
                              "Message-Id": "f"})
        await ep(router.url, chat("public marker"))
        # the marker was sent after the rest: once it is shown, so is all else
        for c in (member, outsider, snoop):
            await until(lambda c=c: "public marker" in texts(c))
        await apps.close()

    run(qt_loop, scenario())
    assert texts(member) == ["for members only", "public marker"]
    assert member.model.entries()[0].message.secure
    assert "for members only" not in texts(outsider) and "forged" in texts(outsider)
    assert "for members only" not in texts(snoop)
    assert "forged" not in texts(member)


def test_history_survives_restart(qtbot, qt_loop, router, tmp_path):
    path = tmp_path / "history.sqlite3"
    apps = Apps(router.url, tmp_path)
    first = apps.make([Group("Chat")], history=path)

    async def scenario():
        await apps.ready(first)
        await ep(router.url, chat("remember me"), chat("forget me", **{"No-Archive": 1}))
        await until(lambda: len(first.model) == 2)
        await apps.close()

    run(qt_loop, scenario())
    again = History(path)  # the next run of the app opens the same file
    window = HistoryWindow(again)
    qtbot.addWidget(window)
    assert [m.text for m in window.messages()] == ["remember me"]
    again.close()


def test_bad_notifications_never_crash(qtbot, qt_loop, router, tmp_path):
    apps = Apps(router.url, tmp_path)
    app = apps.make([Group("Chat")], extra="require(Junk)")
    scroller = ScrollerWidget(app.model)
    qtbot.addWidget(scroller)
    scroller.show()
    base = {"From": "x", "Message-Id": "b"}
    bad = [
        {"Group": "Chat", "Message": 42, **base},
        {"Group": 7, "Message": "int group", **base, "Junk": 1},
        {"Group": "Chat", "Message": 3.25, "From": b"\x00\xff", "Message-Id": 9},
        {"Group": "Chat", "Message": "x" * 200_000, **base},
        {"Group": "Chat", "Message": "ctrl\x01\x1b[31m\n\u202e\U0001f600", **base},
        {"Group": "Chat", "Message": "t", **base, "Timeout": "soon",
         "Attachment": "Content-Type: multipart/mixed; boundary=\r\n\r\n--\r\n"},
        {"Group": "Chat", "Message": "t", **base, "Timeout": 2**40 * 1000, "No-Archive": "x",
         "org.tickertape.message": "3001", "In-Reply-To": 5, "Replacement-Id": 1.5},
        {"Junk": 1},                                    # no group, no text
        {"Junk": 2, "Group": "Chat"},                   # no text
        {"Junk": 3, "Message": "no group"},
    ]

    async def scenario():
        await apps.ready(app)
        await ep(router.url, *bad)
        await ep(router.url, chat("still alive"))
        await until(lambda: "still alive" in texts(app))
        scroller.repaint()
        await apps.close()

    run(qt_loop, scenario())
    assert app.rejected == 3
    assert len(app.model) == 8
    shown = texts(app)
    assert shown[0] == "42" and shown[1] == "int group"
    assert all(len(t) <= 4001 for t in shown)
    assert stored(app)[-1] == "still alive"


def test_known_groups_from_quench(qtbot, qt_loop, router, tmp_path):
    apps = Apps(router.url, tmp_path)
    app = apps.make([Group("Chat")])
    other = apps.make([Group("Lunch"), Group("Coffee")], user="o@test")

    async def scenario():
        await apps.ready(app)
        async with elvin.client.connect(router.url) as plain:
            await apps.ready(other)
            await plain.subscribe('Group == "Sports" && require(Message)')
            await until(lambda: {"Lunch", "Coffee", "Sports"} <= set(app.known.counts()))
            counts = app.known.counts()
        await until(lambda: "Sports" not in app.known.counts())
        await apps.close()
        return counts

    counts = run(qt_loop, scenario())
    assert counts["Chat"] >= 1 and counts["Lunch"] == 1 and counts["Sports"] == 1


def test_known_groups_tab_at_a_router_without_quench(qtbot, qt_loop, make_router, tmp_path):
    """The tab says the router has no quench instead of staying empty, and
    fills again once the app reconnects to a router that has quench."""
    from elvin_apps.tickertape.window import TickerWindow

    router = make_router(quench=False)
    apps = Apps(router.url, tmp_path)
    app = apps.make([Group("Chat")])
    window = TickerWindow(app, save_config=False)
    qtbot.addWidget(window)
    seen = {}

    async def scenario():
        await apps.ready(app)
        dialog = window.open_groups()
        dialog.tabs.setCurrentIndex(1)
        await until(lambda: dialog.known_note_label.isVisible())
        seen["note"] = dialog.known_note_label.text()
        seen["list shown"] = dialog.known_list.isVisible()

        router.restart(quench=True)   # same port; the app reconnects by itself
        await until(lambda: "Chat" in app.known.counts(), timeout=20)
        await until(lambda: not dialog.known_note_label.isVisible())
        seen["after"] = [dialog.known_list.item(i).text()
                         for i in range(dialog.known_list.count())]
        dialog.close()
        await apps.close()

    run(qt_loop, scenario(), timeout=60)
    assert seen["note"].startswith("This router does not support quench")
    assert not seen["list shown"]
    assert seen["after"] == ["Chat  (1)"]


def test_group_changes_resubscribe(qtbot, qt_loop, router, tmp_path):
    apps = Apps(router.url, tmp_path)
    app = apps.make([Group("Chat")], extra="Message ==")  # a broken extra subscription
    problems = []
    app.problem.connect(problems.append)

    async def scenario():
        await apps.ready(app)
        assert problems and problems[0].startswith("Extra subscription ignored")
        from elvin_apps.tickertape.groups import GroupList
        app.set_groups(GroupList([Group("Chat"), Group("News")]))
        await app.wait_synced(10)
        await ep(router.url, chat("c"), {**chat("n"), "Group": "NEWS"})
        await until(lambda: len(app.model) == 2)
        app.set_groups(GroupList([Group("News", key="k")]))
        await app.wait_synced(10)
        # ep has said goodbye (DisconnRqst answered) before "keyed" is sent,
        # so c2 and n2 would be shown before it: "keyed" is the marker
        await ep(router.url, chat("c2"), {**chat("n2"), "Group": "News"})
        await app.send(Draft("News", "keyed"))
        await until(lambda: "keyed" in texts(app))
        await apps.close()

    run(qt_loop, scenario())
    assert texts(app) == ["c", "n", "keyed"]


# -- the command line ---------------------------------------------------------------

def tickertape(*args: str, env_extra: dict | None = None, timeout: float = 60):
    import os
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", **(env_extra or {})}
    env.pop("ELVIN_URL", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "elvin_apps.tickertape", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def test_cli_screenshot_and_errors(router, tmp_path):
    config = tmp_path / "tickertape.toml"
    config.write_text('user = "shot@test"\n[[groups]]\nname = "Chat"\n')
    png = tmp_path / "shot.png"
    result = tickertape("--elvin", router.url, "--config", str(config), "--data-dir",
                        str(tmp_path / "data"), "--screenshot", str(png))
    assert result.returncode == 0, result.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "data" / "history.sqlite3").exists()
    assert config.read_text().startswith('user = "shot@test"')  # a screenshot saves nothing

    version = tickertape("--version")
    assert version.returncode == 0 and version.stdout.startswith("tickertape ")
    bad_url = tickertape("--elvin", "elvin://host:notaport", "--screenshot", str(png))
    assert bad_url.returncode == 1 and "bad Elvin URL" in bad_url.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("speed = 'fast'\n")
    bad_config = tickertape("--config", str(broken), "--screenshot", str(png))
    assert bad_config.returncode == 1 and "speed must be a number" in bad_config.stderr
    missing = tickertape("--config", str(tmp_path / "none.toml"))
    assert missing.returncode == 1 and "no such file" in missing.stderr
    unreachable = tickertape("--elvin", "elvin://127.0.0.1:9", "--no-history", "--screenshot",
                             str(tmp_path / "down.png"))
    assert unreachable.returncode == 2 and (tmp_path / "down.png").exists()
    # the reason is said, not only painted (a script reads stderr, not pixels)
    assert "tickertape: not connected" in unreachable.stderr
    assert "Connection refused" in unreachable.stderr
    assert "propagateSizeHints" not in unreachable.stderr   # offscreen noise


def test_cli_keeps_history_across_restarts(router, tmp_path):
    """The real app: a message arrives, SIGTERM, and the log on disk has it;
    the next run opens the same log."""
    import os
    import signal

    from elvin_apps.tickertape.discovery import group_names

    import elvin.sync

    config = tmp_path / "tickertape.toml"
    config.write_text('user = "r@test"\n[[groups]]\nname = "Restart"\n')
    data = tmp_path / "data"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    env.pop("ELVIN_URL", None)
    watcher = elvin.sync.connect(router.url)
    quench = watcher.quench(["Group"])
    for run_number in (1, 2):
        app = subprocess.Popen([sys.executable, "-m", "elvin_apps.tickertape", "--elvin",
                                router.url, "--config", str(config), "--data-dir", str(data)],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not any("Restart" in group_names(ast)
                          for ast in quench.subscriptions.values()):
                assert time.monotonic() < deadline and app.poll() is None, app.stderr.read()
                time.sleep(0.05)
            watcher.send({"Group": "Restart", "From": "x", "Message": f"run {run_number}",
                          "Message-Id": f"run-{run_number}"})
            # stopped once the message is in its history (not after a guessed while)
            while not _history_has(data / "history.sqlite3", f"run {run_number}"):
                assert time.monotonic() < deadline and app.poll() is None, app.stderr.read()
                time.sleep(0.05)
        finally:
            app.send_signal(signal.SIGTERM)
            assert app.wait(30) == 0, app.stderr.read()
        while any("Restart" in group_names(ast) for ast in quench.subscriptions.values()):
            time.sleep(0.05)  # the app said goodbye: its subscription is gone
    watcher.close()
    history = History(data / "history.sqlite3")
    assert [r.message.text for r in history.recent()] == ["run 1", "run 2"]
    history.close()


def _history_has(path, text: str) -> bool:
    """Whether the app has written ``text`` to its history file (read as
    SQLite, read-only, while the app holds it open)."""
    import sqlite3

    if not path.exists():
        return False
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return any(text in str(row) for row in db.execute("SELECT * FROM messages"))
    except sqlite3.OperationalError:      # not created yet
        return False


def test_router_restart_keeps_the_ticker_going(qtbot, qt_loop, router, tmp_path):
    apps = Apps(router.url, tmp_path)
    app = apps.make([Group("Chat")])
    states = []
    app.manager.stateChanged.connect(states.append)

    async def scenario():
        await apps.ready(app)
        await ep(router.url, chat("before"))
        await until(lambda: "before" in texts(app))
        router.restart()  # same port; the router thread restarts while we wait
        await until(lambda: app.manager.state == "connected" and "reconnecting" in states,
                    timeout=20)
        await app.wait_synced(10)
        for attempt in range(50):  # until the restored subscription is in place
            await ep(router.url, chat(f"after {attempt}"))
            await asyncio.sleep(0.1)
            if any(t.startswith("after") for t in texts(app)):
                break
        await apps.close()

    run(qt_loop, scenario(), timeout=60)
    assert any(t.startswith("after") for t in texts(app))


def arrived(subscription):
    """The next notification an ``elvin.sync`` subscription holds, or None
    at once (for ``until``, which keeps the Qt loop running meanwhile)."""
    try:
        return subscription.get(timeout=0)
    except TimeoutError:
        return None


def test_message_typed_during_an_outage_is_sent_on_reconnection(qtbot, qt_loop, router,
                                                               tmp_path):
    """Compose while the router is down: the dialog's text is kept, the strip
    says it will send when connected and that we are not connected, and once a
    router is back on the same port a real subscriber gets the message."""
    from elvin_apps.tickertape.window import TickerWindow

    import elvin.sync
    from elvin.qt import StatusWidget

    apps = Apps(router.url, tmp_path)
    app = apps.make([Group("Chat")])
    window = TickerWindow(app, status=StatusWidget(app.manager), save_config=False)
    qtbot.addWidget(window)
    window.show()
    received = []

    async def scenario():
        await apps.ready(app)
        assert window.state_label.isHidden()
        router.stop()
        await until(lambda: app.manager.state != "connected")
        assert window.state_label.isVisible()
        assert window.state_label.text() in ("Reconnecting…", "Not connected", "Connecting…")
        dialog = window.open_compose(None)
        dialog.text_edit.setText("typed while the router was away")
        dialog.send_button.click()
        assert list(app.outbox) and "will send when connected" in window.notice.text()
        # The router comes back on the same port; a real subscriber is in place
        # before the app can reconnect (the app's loop is blocked until then).
        router.start()
        subscriber = elvin.sync.connect(router.url)
        sub = subscriber.subscribe('Group == "Chat"')
        try:
            # wait without blocking this loop: when the outbox empties, the
            # message may still be in the session's write buffer, which goes to
            # the socket on the loop's next turn (elvin.client.session)
            received.append(await until(lambda: arrived(sub), timeout=30,
                                        what="the message at the subscriber"))
            assert not app.outbox
        finally:
            subscriber.close()
        await until(lambda: window.state_label.isHidden())
        await apps.close()

    run(qt_loop, scenario(), timeout=60)
    message = received[0]
    assert message["Message"] == "typed while the router was away"
    assert message["From"] == "me@test"
    assert "will send" not in window.notice.text()


def test_history_detail_pane_and_mentions(qtbot, qt_loop, router, tmp_path):
    """Messages from ep, in the history window: the ones that mention the user
    stand out and can be shown alone; the detail pane has a selected reply in
    full, with its group, link, whom it answers and its thread."""
    from elvin_apps.tickertape.historywindow import MENTION_BACKGROUND
    from elvin_apps.tickertape.window import TickerWindow

    apps = Apps(router.url, tmp_path)
    app = apps.make([Group("Chat")], user="me@test")
    window = TickerWindow(app, save_config=False)
    qtbot.addWidget(window)
    long_text = "a long answer " + "with many words " * 40 + "THE END"

    async def scenario():
        await apps.ready(app)
        await ep(router.url, chat("where shall we eat?", From="bob@test"),
                 chat(long_text, From="carol@test", **{"In-Reply-To": "id-where shall we eat?",
                                                       "Thread-Id": "t1",
                                                       "Attachment": "Content-Type: text/uri-list"
                                                       "\r\n\r\nhttps://menu.example/\r\n"}),
                 chat("hey me, are you coming?", From="dave@test"))
        await until(lambda: len(app.model) == 3)
        app.flush_history()
        check_history_window()
        await apps.close()

    def check_history_window():
        history = window.open_history()
        qtbot.addWidget(history)
        assert len(history.messages()) == 3   # read from the history file
        rows = [history.tree.topLevelItem(i) for i in range(3)]
        highlighted = [row.background(3).color() == MENTION_BACKGROUND for row in rows]
        assert highlighted == [False, False, True]
        history.tree.setCurrentItem(rows[1])
        detail = history.detail.toPlainText()
        assert "THE END" in detail                       # the full text, not cut
        assert "Chat" in detail and "carol@test" in detail
        assert "In reply to" in detail and "bob@test: where shall we eat?" in detail
        assert "https://menu.example/" in detail
        assert "2 messages" in detail and "show the thread" in detail
        history.detail.anchorClicked.emit(QUrl("thread:show"))
        assert [m.text for m in history.messages()][0] == "where shall we eat?"
        history.tree.setCurrentItem(history.tree.topLevelItem(0))
        history.threads.setChecked(False)
        history.mentions_only.setChecked(True)
        assert [m.text for m in history.messages()] == ["hey me, are you coming?"]
        history.tree.setCurrentItem(history.tree.topLevelItem(0))
        assert "Mentions you" in history.detail.toPlainText()

    run(qt_loop, scenario())
