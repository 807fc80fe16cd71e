"""The smaller things issue #45's user met, each fixed: tooltips on a
docked bar that was never clicked, a settings file that keeps an integer
speed an integer, Return in a new Groups row, a short link-failure notice,
a restarted tickertape that shows what has not expired."""

from __future__ import annotations

import time

from elvin_apps.tickertape.config import Config, load, save
from elvin_apps.tickertape.controller import TickerController
from elvin_apps.tickertape.groups import Group, GroupList
from elvin_apps.tickertape.groupsdialog import GroupsDialog
from elvin_apps.tickertape.history import History
from elvin_apps.tickertape.model import ScrollerModel
from elvin_apps.tickertape.window import NOTICE_MAX, TickerWindow
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLineEdit, QToolTip, QWidget

from tests.gui.test_tickertape_widgets import msg, place_visible


def test_the_strip_shows_tooltips_without_being_active(qtbot, qapp):
    """Hovering a message of a bar whose window is not the active one (a
    docked bar nobody clicked) shows its tooltip: Qt shows tooltips only in
    the active window unless the window says otherwise."""
    model = ScrollerModel(GroupList([Group("Chat")]))
    window = TickerWindow(TickerController(Config(), model, None), save_config=False)
    qtbot.addWidget(window)
    window.resize(900, window.height())
    window.show()
    qtbot.waitExposed(window)
    entry = model.add(msg("hover me"))
    place_visible(window.scroller, entry.uid)
    other = QWidget()                 # the active window, elsewhere on the screen
    qtbot.addWidget(other)
    other.setGeometry(window.x(), window.y() + window.height() + 100, 300, 200)
    other.show()
    other.activateWindow()
    qtbot.waitUntil(lambda: other.isActiveWindow() and not window.isActiveWindow())
    if QApplication.mouseButtons() != Qt.MouseButton.NoButton:
        # an earlier test's press without a release: Qt shows no tooltip while
        # a button is held
        QTest.mouseRelease(other, QApplication.mouseButtons())
    item = window.scroller.lane.item(entry.uid)
    point = QPoint(int(item.x + 20), window.scroller.height() // 2)
    QTest.mouseMove(window.scroller, point)
    QTest.mouseMove(window.scroller, point + QPoint(1, 0))
    qtbot.waitUntil(lambda: "hover me" in QToolTip.text(), timeout=10_000)
    QToolTip.hideText()


def test_an_integer_speed_is_written_as_an_integer(tmp_path):
    path = tmp_path / "tickertape.toml"
    path.write_text("# mine\nspeed = 80\n")
    config = load(path)
    config.choose("speed", 100.0)                  # the dialog's spin box gives floats
    save(config, path)
    text = path.read_text()
    assert "speed = 100\n" in text and "100.0" not in text and "# mine" in text
    config.choose("speed", 92.5)
    save(config, path)
    assert "speed = 92.5\n" in path.read_text()


def test_return_in_a_new_groups_row_does_not_close_the_dialog(qtbot):
    dialog = GroupsDialog([Group("Chat")])
    qtbot.addWidget(dialog)
    dialog.show()
    dialog._add_new()
    editor = dialog.table.cellWidget(dialog.table.rowCount() - 1, 0)
    assert isinstance(editor, QLineEdit)
    qtbot.keyClicks(editor, "lunch")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    assert dialog.isVisible() and dialog.result() == 0
    assert [g.name for g in dialog.result_groups()][-1] == "lunch"


def test_a_link_that_fails_takes_a_short_notice(qtbot):
    window = TickerWindow(TickerController(Config(), ScrollerModel(), None), save_config=False)
    qtbot.addWidget(window)
    window.resize(1600, window.height())
    window.show()
    url = "https://very-long-host.example.org/" + "path/" * 40 + "minutes.pdf"
    window.scroller.urlFailed.emit(url, "no program on this computer opens PDF files")
    assert window.notice.width() <= NOTICE_MAX + 20
    assert "very-long-host.example.org" in window.notice.text()
    assert url in window.notice.toolTip()


def test_a_restarted_tickertape_shows_what_has_not_expired(qtbot, tmp_path):
    history = History(tmp_path / "h.sqlite3")
    now = time.time()
    history.add(msg("still fresh", message_id="a", timeout=600).with_received(now - 60))
    history.add(msg("long gone", message_id="b", timeout=60).with_received(now - 3600))
    history.flush()
    model = ScrollerModel(GroupList([Group("Chat")]))
    controller = TickerController(Config(groups=[Group("Chat")]), model, history)
    assert controller.restore_from_history() == 1
    (entry,) = model.entries()
    assert entry.message.text == "still fresh"
    assert 500 < entry.expires_at - model.clock() <= 540
    history.close()


def test_messages_put_back_from_the_history_are_no_backlog(qtbot, tmp_path):
    """A restart with many unexpired messages: they come round at the
    user's speed; none is hurried in, skipped or counted as waiting."""
    from elvin_apps.tickertape.scroller import ScrollerWidget

    history = History(tmp_path / "h.sqlite3")
    now = time.time()
    for n in range(30):
        history.add(msg(f"kept {n}", message_id=f"k{n}", timeout=600).with_received(now - 5))
    history.flush()
    model = ScrollerModel(GroupList([Group("Chat")]))
    TickerController(Config(groups=[Group("Chat")]), model, history).restore_from_history()
    scroller = ScrollerWidget(model, speed=80)
    qtbot.addWidget(scroller)
    scroller.resize(800, scroller.sizeHint().height())
    assert scroller.waiting == 0 and scroller.effective_speed == 80
    start = time.monotonic()
    for step in range(600):                          # 10 s of frames
        scroller.frame(1 / 60, start + step / 60)
    assert scroller.skipped == 0 and scroller.lane.visible
    history.close()
