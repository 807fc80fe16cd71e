"""The scroller widget, the compose and group dialogs, the history window and
the main window, without a router."""

from __future__ import annotations

import gc
import time

import pytest
from elvin_apps.tickertape.compose import ComposeDialog
from elvin_apps.tickertape.config import Config
from elvin_apps.tickertape.controller import TickerController
from elvin_apps.tickertape.groups import Group, GroupError, GroupList
from elvin_apps.tickertape.groupsdialog import GroupsDialog
from elvin_apps.tickertape.history import History
from elvin_apps.tickertape.historywindow import HistoryWindow
from elvin_apps.tickertape.lane import Lane
from elvin_apps.tickertape.message import Message, from_notification
from elvin_apps.tickertape.model import ScrollerModel
from elvin_apps.tickertape.palette import hash_colour
from elvin_apps.tickertape.scroller import (
    CATCH_UP_STEP,
    MAX_CATCH_UP,
    ScrollerWidget,
    tooltip_text,
)
from elvin_apps.tickertape.window import TickerWindow
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt, QTimer
from PySide6.QtGui import QColor, QEnterEvent, QGuiApplication, QHelpEvent
from PySide6.QtWidgets import QApplication, QToolTip, QWidget

from elvin.subscription import parse
from tests.gui.conftest import leave


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



def msg(text="hello", group="Chat", **kw) -> Message:
    kw.setdefault("message_id", f"id-{text}")
    return Message(group=group, sender=kw.pop("sender", "alice"), text=text, **kw)


@pytest.fixture
def model(qapp):
    return ScrollerModel(GroupList([Group("Chat"), Group("News", colour="#00c000")]))




def colour_pixels(image, colour: str) -> int:
    target = QColor(colour)
    count = 0
    for x in range(0, image.width(), 2):
        for y in range(0, image.height(), 2):
            c = image.pixelColor(x, y)
            if abs(c.red() - target.red()) + abs(c.green() - target.green()) \
                    + abs(c.blue() - target.blue()) < 12:
                count += 1
    return count


def place_visible(scroller, *uids):
    """Move the line so the given entries are on screen, left to right."""
    x = 10.0
    for uid in uids:
        item = scroller.lane.item(uid)
        if item.width is None:
            item.width = scroller.lane._measure(item)
        if item not in scroller.lane.visible:
            scroller.lane.visible.append(item)
            for queue in (scroller.lane.fresh, scroller.lane.recycled):
                if item in queue:
                    queue.remove(item)
        item.x = x
        x = item.right + scroller.lane.gap
    scroller.lane.visible.sort(key=lambda i: i.x)


def test_paints_group_colours(scroller, model, qtbot):
    a = model.add(msg("hello chat"))
    b = model.add(msg("news flash", group="News"))
    scroller.user_paused = True
    place_visible(scroller, a.uid, b.uid)
    image = scroller.grab().toImage()
    assert colour_pixels(image, hash_colour("Chat")) > 20
    assert colour_pixels(image, "#00c000") > 20


def test_scrolls_left_and_stops_when_idle(scroller, model, qtbot):
    entry = model.add(msg("moving"))
    assert scroller.animating
    start, began = scroller.lane.item(entry.uid).x, time.monotonic()
    qtbot.waitUntil(lambda: start - scroller.lane.item(entry.uid).x > 20, timeout=10_000)
    moved = start - scroller.lane.item(entry.uid).x
    assert moved <= 200 * (time.monotonic() - began) + 20   # never faster than 200 px/s
    model.hide(entry.uid)
    qtbot.waitUntil(lambda: not scroller.animating, timeout=3000)


def test_hover_pauses(scroller, model, qtbot):
    entry = model.add(msg("pause me"))
    QApplication.sendEvent(scroller, QEnterEvent(QPointF(5, 5), QPointF(5, 5), QPointF(5, 5)))
    assert scroller.paused
    x = scroller.lane.item(entry.uid).x
    qtbot.wait(200)
    assert scroller.lane.item(entry.uid).x == x
    leave(scroller)
    assert not scroller.paused
    qtbot.waitUntil(lambda: scroller.lane.item(entry.uid).x < x, timeout=10_000)


def test_drag_scrolls_and_click_opens_link(scroller, model, qtbot):
    entry = model.add(msg("see this", urls=("https://example.org/",)))
    scroller.user_paused = True
    place_visible(scroller, entry.uid)
    item = scroller.lane.item(entry.uid)
    x0 = item.x
    y = scroller.height() // 2
    qtbot.mousePress(scroller, Qt.MouseButton.LeftButton, pos=QPoint(int(x0 + 20), y))
    qtbot.mouseMove(scroller, QPoint(int(x0 + 60), y))
    qtbot.mouseMove(scroller, QPoint(int(x0 + 100), y))
    qtbot.mouseRelease(scroller, Qt.MouseButton.LeftButton, pos=QPoint(int(x0 + 100), y))
    assert item.x == pytest.approx(x0 + 80)  # dragged, and a drag is not a click
    with qtbot.waitSignal(scroller.urlOpened, timeout=2000) as blocker:
        qtbot.mouseClick(scroller, Qt.MouseButton.LeftButton, pos=QPoint(int(item.x + 20), y))
    assert blocker.args == ["https://example.org/"]


def test_double_click_replies_or_composes(scroller, model, qtbot):
    entry = model.add(msg("answer me"))
    scroller.user_paused = True
    place_visible(scroller, entry.uid)
    y = scroller.height() // 2
    with qtbot.waitSignal(scroller.replyRequested) as blocker:
        qtbot.mouseDClick(scroller, Qt.MouseButton.LeftButton,
                          pos=QPoint(int(scroller.lane.item(entry.uid).x + 10), y))
    assert blocker.args == [entry.message]
    with qtbot.waitSignal(scroller.composeRequested):
        qtbot.mouseDClick(scroller, Qt.MouseButton.LeftButton, pos=QPoint(790, y))


def test_context_menu_actions(scroller, model, qtbot):
    root = model.add(msg("root", message_id="r", urls=("https://x.example/",)))
    reply = model.add(msg("reply", message_id="r1", in_reply_to="r"))
    other = model.add(msg("other", message_id="o"))
    scroller.user_paused = True
    place_visible(scroller, root.uid, reply.uid, other.uid)
    menu = scroller.context_menu(scroller.lane.item(root.uid).x + 5)
    actions = {a.text(): a for a in menu.actions() if a.text()}
    assert list(actions) == ["Reply…", "Open link", "Copy text", "Copy link", "Hide",
                             "Kill thread", "Mute"]
    actions["Copy text"].trigger()
    assert QGuiApplication.clipboard().text() == "alice: root"
    actions["Kill thread"].trigger()
    assert [e.message.text for e in model.entries()] == ["other"]
    menu = scroller.context_menu(scroller.lane.item(other.uid).x + 5)
    [a for a in menu.actions() if a.text() == "Hide"][0].trigger()
    assert len(model) == 0
    empty = scroller.context_menu(5000)
    assert [a.text() for a in empty.actions()] == ["New message…"]


def submenu_actions(menu, title: str) -> dict:
    sub = next(a.menu() for a in menu.actions() if a.text() == title)
    return {a.text(): a for a in sub.actions()}


def test_mute_sender_and_group_for_a_while(qtbot, qapp):
    """Right-click > Mute: the sender's (or group's) messages go at once and
    new ones are not shown until the while is over; others carry on."""
    now = [1000.0]
    model = ScrollerModel(GroupList([Group("Chat"), Group("News")]), clock=lambda: now[0])
    scroller = ScrollerWidget(model)
    qtbot.addWidget(scroller)
    scroller.resize(800, 40)
    a = model.add(msg("from alice", sender="alice@example.org"))
    model.add(msg("from bob", sender="bob"))
    scroller.user_paused = True
    place_visible(scroller, a.uid)
    mute = submenu_actions(scroller.context_menu(scroller.lane.item(a.uid).x + 5), "Mute")
    assert list(mute) == ["alice for 1 hour", "alice until Tickertape restarts",
                          "group Chat for 1 hour", "group Chat until Tickertape restarts"]
    mute["alice for 1 hour"].trigger()
    assert [e.message.text for e in model.entries()] == ["from bob"]
    assert model.add(msg("again", message_id="a2", sender="Alice@example.org")) is None
    assert model.add(msg("bob again", message_id="b2", sender="bob")) is not None
    now[0] += 3601
    assert model.add(msg("an hour later", message_id="a3", sender="alice@example.org"))
    model.mute("group", "news")
    assert model.add(msg("quiet", message_id="n1", group="NEWS")) is None
    empty = scroller.context_menu(5000)
    assert [a.text() for a in empty.actions()] == ["New message…", "Unmute all (1)"]
    empty.actions()[1].trigger()
    assert model.add(msg("loud", message_id="n2", group="News")) is not None


def test_reply_says_whom_it_answers(scroller, model, tmp_path):
    root = model.add(msg("lunch?", message_id="r", sender="alice@example.org"))
    reply = model.add(msg("yes!", message_id="r1", in_reply_to="r", sender="bob"))
    assert reply.replied_to == "alice@example.org"
    assert "Reply to alice@example.org" in tooltip_text(reply.message, reply.replied_to)
    narrow = scroller._item_width(reply)
    model.hide(root.uid)
    unknown = model.add(msg("yes!", message_id="r2", in_reply_to="gone", sender="bob"))
    assert unknown.replied_to is None
    assert scroller._item_width(reply) > scroller._item_width(unknown)  # "↪ alice: " drawn
    assert narrow == scroller._item_width(reply)
    # the referent is no longer shown: the controller asks the history
    controller = TickerController(Config(user="me@host", groups=[Group("Chat")]),
                                  ScrollerModel(), History(tmp_path / "h.sqlite3"))
    controller.handle({"Group": "Chat", "From": "carol", "Message": "first",
                       "Message-Id": "c1", "Timeout": -1})   # logged, not shown
    controller.flush_history()
    answer = controller.handle({"Group": "Chat", "From": "dave", "Message": "re",
                                "Message-Id": "d1", "In-Reply-To": "c1"})
    assert controller.model.find(answer.message_id).replied_to == "carol"
    controller.history.close()


def test_backlog_is_shown_and_caught_up(scroller, model, qtbot):
    """A burst longer than the line: "+N waiting" says so, and the line runs
    faster until the backlog has entered (about twice as fast here)."""
    for i in range(11):
        model.add(msg(f"message number {i} with a few words in it", message_id=str(i)))
    waiting = scroller.waiting
    assert waiting >= 5 and scroller.status_text() == f"+{waiting} waiting"
    assert scroller.effective_speed > scroller.speed
    scroller.user_paused = True
    image = scroller.grab().toImage()          # grab() paints now
    assert colour_pixels(image, "#ffd166") > 5   # the badge is drawn

    def seconds_to_clear(catch_up: bool) -> float:
        lane = Lane(800, measure=lambda _uid: 330.0)
        for uid in range(11):
            lane.add(uid)
        elapsed = 0.0
        while lane.fresh:
            factor = min(MAX_CATCH_UP, 1 + CATCH_UP_STEP * len(lane.fresh)) if catch_up else 1
            lane.advance(-80 * factor * 0.05)
            elapsed += 0.05
        return elapsed

    assert seconds_to_clear(True) < 0.6 * seconds_to_clear(False)


def test_paused_is_said_while_the_pointer_holds_the_line(scroller, model, qtbot):
    model.add(msg("hold me"))
    assert scroller.status_text() == ""
    QApplication.sendEvent(scroller, QEnterEvent(QPointF(5, 5), QPointF(5, 5), QPointF(5, 5)))
    assert scroller.status_text() == "paused"
    assert colour_pixels(scroller.grab().toImage(), "#ffd166") > 5
    leave(scroller)
    assert scroller.status_text() == ""


@pytest.mark.parametrize("pointer", ["near its top", "in the middle"])
@pytest.mark.parametrize("where", ["top", "bottom"])
def test_tooltip_never_covers_its_message(scroller, model, qtbot, where, pointer):
    entry = model.add(msg("a message with a tooltip", urls=("https://example.org/",),
                          in_reply_to="x"))
    scroller.user_paused = True
    place_visible(scroller, entry.uid)
    screen = scroller.screen().availableGeometry()
    y = screen.top() + 10 if where == "top" else screen.bottom() - scroller.height() - 2
    scroller.move(screen.left() + 10, y)
    qtbot.waitUntil(lambda: scroller.pos() == QPoint(screen.left() + 10, y), timeout=5_000)
    x = int(scroller.lane.item(entry.uid).x + 20)
    local = QPoint(x, 4 if pointer == "near its top" else scroller.height() // 2)
    QApplication.sendEvent(scroller, QHelpEvent(QEvent.Type.ToolTip, local,
                                                scroller.mapToGlobal(local)))
    tips = []
    qtbot.waitUntil(lambda: tips.extend(w for w in QApplication.topLevelWidgets()
                                        if w.inherits("QTipLabel") and w.isVisible())
                    or bool(tips), timeout=2000)
    strip = scroller.rect().translated(scroller.mapToGlobal(QPoint(0, 0)))
    assert not tips[0].geometry().intersects(strip), (tips[0].geometry(), strip)
    QToolTip.hideText()


def test_replacement_keeps_place(scroller, model):
    first = model.add(msg("score 1-0", replacement_id="m"))
    scroller.user_paused = True
    place_visible(scroller, first.uid)
    x = scroller.lane.item(first.uid).x
    model.add(msg("score 2-0 after a long and exciting second half", message_id="x",
                  replacement_id="m"))
    assert len(model) == 1 and scroller.lane.item(first.uid).x == x
    assert scroller.lane.item(first.uid).width > 200


def test_tooltip_text():
    text = tooltip_text(msg("hi", urls=("https://a.example/",), in_reply_to="x", secure=True))
    assert "Chat — alice" in text and "https://a.example/" in text and "key" in text


def test_frame_cost_with_many_messages(scroller, model, qtbot):
    for i in range(200):
        model.add(msg(f"message number {i} " * 3, group=f"g{i % 7}", message_id=str(i)))
    scroller.repaint()
    costs = []
    for _ in range(30):
        started = time.perf_counter()
        scroller.step(1 / 60)
        scroller.repaint()
        costs.append(time.perf_counter() - started)
    costs.sort()
    assert costs[len(costs) // 2] < 1 / 60  # a frame fits the 60 fps budget


# -- dialogs ---------------------------------------------------------------------

def test_compose_dialog_validates_and_builds_draft(qtbot):
    dialog = ComposeDialog(["Chat", "Secret"], sender="me", private_groups=["Secret"])
    qtbot.addWidget(dialog)
    dialog.group_box.setCurrentText("Chat")
    dialog.accept()
    assert dialog.error_label.text().startswith("Message:") and not dialog.result()
    dialog.text_edit.setText("hello")
    dialog.url_edit.setText("javascript:alert(1)")
    dialog.accept()
    assert dialog.error_label.text().startswith("URL:")
    dialog.url_edit.setText("https://example.org/")
    dialog.timeout_box.setCurrentIndex(2)
    dialog.group_box.setCurrentText("secret")
    assert dialog.private_note.text()  # the user sees it is a private group
    with qtbot.waitSignal(dialog.accepted):
        dialog.accept()
    draft = dialog.draft()
    assert (draft.group, draft.text, draft.url, draft.timeout) == ("secret", "hello",
                                                                   "https://example.org/", 300)


def test_compose_reply_fixes_group(qtbot):
    referent = from_notification({"Group": "Wiki", "From": "bob", "Message": "<b>q</b>",
                                  "Message-Id": "m1", "Thread-Id": "T"})
    dialog = ComposeDialog(["Chat"], sender="me", reply_to=referent)
    qtbot.addWidget(dialog)
    assert dialog.group_box.currentText() == "Wiki" and not dialog.group_box.isEnabled()
    assert dialog.windowTitle() == "Reply"
    dialog.text_edit.setText("answer")
    assert dialog.check() is None and dialog.draft().reply_to is referent


def test_groups_dialog_edits(qtbot):
    dialog = GroupsDialog(GroupList([Group("Chat"), Group("News", subscribe=False)]),
                          extra="", known=lambda: {"Lunch": 3, "chat": 2})
    qtbot.addWidget(dialog)
    assert dialog.known_list.count() == 2
    lunch = [dialog.known_list.item(i) for i in range(2)
             if "Lunch" in dialog.known_list.item(i).text()][0]
    dialog._add_known(lunch)
    groups = dialog.result_groups()
    assert groups.names() == ["Chat", "News", "Lunch"]
    assert not groups.find("news").subscribe
    dialog.table.cellWidget(2, 4).setText("sesame")
    dialog.table.cellWidget(2, 2).setValue(50)
    dialog.table.cellWidget(2, 3).setValue(20)
    with pytest.raises(GroupError, match="row 3"):
        dialog.result_groups()
    dialog.accept()
    assert dialog.error_label.isVisibleTo(dialog) and "row 3" in dialog.error_label.text()
    dialog.table.cellWidget(2, 3).setValue(60)
    dialog.table.cellWidget(1, 0).setText("CHAT")
    with pytest.raises(GroupError, match="same group"):
        dialog.result_groups()
    dialog.table.cellWidget(1, 0).setText("News")
    assert dialog.result_groups().find("lunch").key == "sesame"


def test_history_window(qtbot, tmp_path):
    history = History(tmp_path / "h.sqlite3")
    history.add(msg("root", message_id="r", received=1))
    history.add(msg("reply", message_id="r1", in_reply_to="r", received=2, sender="bob"))
    history.add(msg("news item", group="News", message_id="n", received=3))
    window = HistoryWindow(history)
    qtbot.addWidget(window)
    window.show()
    assert [m.text for m in window.messages()] == ["root", "reply", "news item"]
    window.threads.setChecked(True)
    assert window.tree.topLevelItemCount() == 2 and window.tree.topLevelItem(0).childCount() == 1
    window.search.setText("BOB")
    qtbot.waitUntil(lambda: [m.text for m in window.messages()] == ["reply"], timeout=2000)
    window.search.setText("")
    qtbot.waitUntil(lambda: len(window.messages()) == 3, timeout=2000)
    window.add_message(msg("live", message_id="l"))
    qtbot.waitUntil(lambda: len(window.messages()) == 4, timeout=2000)
    window.show_thread(msg("reply", message_id="r1", in_reply_to="r"))
    assert [m.text for m in window.messages()] == ["root", "reply"]
    history.close()


def test_window_without_router(qtbot, tmp_path):
    config = Config(user="me@host", groups=[Group("Chat")])
    controller = TickerController(config, ScrollerModel(), History(tmp_path / "h.sqlite3"))
    window = TickerWindow(controller, save_config=False)
    qtbot.addWidget(window)
    window.show()
    assert window.windowFlags() & Qt.WindowType.WindowStaysOnTopHint
    assert window.height() < 60  # a slim strip
    controller.handle({"Group": "Chat", "From": "bob", "Message": "hi me", "Message-Id": "1"})
    assert len(controller.model) == 1 and controller.model.entries()[0].mention
    dialog = window.open_compose(None)
    assert dialog.isVisible() and dialog.group_box.currentText() == "Chat"
    dialog.close()
    history_window = window.open_history()
    qtbot.waitUntil(lambda: len(history_window.messages()) == 1, timeout=2000)
    shortcuts = {a.shortcut().toString() for a in window.actions()}
    assert {"Ctrl+N", "Ctrl+H", "Ctrl+G", "Ctrl+Q", "Ctrl+R"} <= shortcuts
    with qtbot.waitSignal(window.closed):
        window.close()


def test_bursts_are_shown_in_slices(qtbot, tmp_path):
    """A burst of deliveries from one socket read is shown in time-boxed
    slices, so the loop keeps running; nothing is lost up to the scroller's
    bound, and the history gets everything."""
    config = Config(user="me@host", groups=[Group("Chat")])
    controller = TickerController(config, ScrollerModel(max_entries=300),
                                  History(tmp_path / "h.sqlite3"))
    for i in range(3000):
        controller._listener({"Group": "Chat", "From": "f", "Message": f"m{i}",
                              "Message-Id": str(i)})
    assert controller.backlog == 3000 and len(controller.model) == 0
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start(1)
    qtbot.waitUntil(lambda: controller.backlog == 0, timeout=10_000)
    timer.stop()
    assert len(ticks) >= 2  # other timers ran while the burst was being shown
    assert len(controller.model) == 300 and controller.received == 3000
    assert controller.model.entries()[-1].message.text == "m2999"
    controller.flush_history()
    assert controller.history.count() == 3000
    controller.history.close()


def test_notifier_without_tray(qtbot):
    from elvin_apps.tickertape.notifier import MentionMatcher, Notifier
    window = QWidget()
    qtbot.addWidget(window)
    notifier = Notifier(window)
    assert notifier.has_tray is False  # headless: no tray, and nothing else changes
    notifier.notify(msg("hi alice"))
    assert notifier.notified == 1
    Notifier(window, enabled=False).notify(msg("x"))
    mentions = MentionMatcher("alice@example.org")
    assert mentions(msg("hey Alice, lunch?", sender="bob"))
    assert mentions(msg("ping @alice", sender="bob"))
    assert not mentions(msg("malice aforethought", sender="bob"))
    assert mentions(msg("direct", group="ALICE", sender="bob"))
    assert not mentions(msg("talking to myself, alice", sender="alice@example.org"))


def test_news_preset_adds_to_the_extra_subscription(qtbot, tmp_path):
    """The newswatcher preset, from the ticker's menu: the expression it builds
    joins the extra subscription, and the controller subscribes with it."""
    config = Config(user="me@host", groups=[Group("Chat")],
                    extra_subscription='From == "boss"')
    controller = TickerController(config, ScrollerModel(), History(tmp_path / "h.sqlite3"))
    window = TickerWindow(controller, save_config=False)
    qtbot.addWidget(window)
    assert window.news_action in window.menu.actions()
    dialog = window.open_news_preset()
    dialog.title_words.setText("python")
    expected = dialog.expression()
    assert "python" in expected
    dialog.accept()
    assert config.extra_subscription == f'(From == "boss") || ({expected})'
    parse(config.extra_subscription)  # still a valid subscription
