"""The tickertape on a desktop: what the issue's user met, each fixed.

Mute never leaves the strip paused; the right-click menu holds the line
still; the "+N waiting" badge has its own slot; the history window opens
beside the strip (and is its child, so the window manager keeps it above);
a link no program can open says so; the menu leads to the other apps; the
settings dialog changes font, speed, colours and the dock edge and writes
them back with the user's comments. Real widgets, offscreen; the X11 dock
itself is tested on Xvfb + openbox (test_desktop_xcb.py).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from elvin_apps.tickertape.config import Config, ConfigError, from_mapping, load, save
from elvin_apps.tickertape.controller import TickerController
from elvin_apps.tickertape.groups import Group, GroupList
from elvin_apps.tickertape.history import History
from elvin_apps.tickertape.message import Message
from elvin_apps.tickertape.model import ScrollerModel
from elvin_apps.tickertape.window import TickerWindow
from PySide6.QtCore import QPoint, Qt, QTimer, QUrl
from PySide6.QtGui import QColor, QContextMenuEvent, QCursor
from PySide6.QtWidgets import QApplication, QMenu

from tests.gui.test_tickertape_widgets import colour_pixels, leave, msg, place_visible


@pytest.fixture(autouse=True)
def pointer_back(qapp):
    """The pointer goes back where it was: other tests hover with synthetic
    Enter events, which the strip believes only while the pointer is there."""
    where = QCursor.pos()
    yield
    QCursor.setPos(where)


@pytest.fixture
def model(qapp):
    return ScrollerModel(GroupList([Group("Chat"), Group("ops")]))


def far_away(widget) -> QPoint:
    """A point of the screen well away from ``widget``."""
    screen = widget.screen().geometry()
    strip = widget.rect().translated(widget.mapToGlobal(QPoint(0, 0)))
    y = screen.bottom() - 5 if strip.center().y() < screen.center().y() else screen.top() + 5
    return QPoint(screen.center().x(), y)


def right_click(scroller, x: float, then) -> None:
    """A right-click at ``x``; ``then(menu)`` runs while the menu is open
    (it must close it)."""
    def act() -> None:
        menu = QApplication.activePopupWidget()
        assert isinstance(menu, QMenu), "the context menu did not open"
        then(menu)

    QTimer.singleShot(50, act)
    local = QPoint(int(x), scroller.height() // 2)
    scroller.contextMenuEvent(QContextMenuEvent(QContextMenuEvent.Reason.Mouse, local,
                                                scroller.mapToGlobal(local)))


def test_mute_never_leaves_the_strip_paused(scroller, model, qtbot):
    """Right-click ▸ Mute ▸ group for 1 hour, the pointer then far away:
    Qt still believes the pointer is over the strip (the menu's grab ate
    the Leave), yet the strip runs on and what waited comes in."""
    ops = model.add(msg("deploy at 5", group="ops", message_id="o1"))
    place_visible(scroller, ops.uid)
    for i in range(4):
        model.add(msg(f"chat message {i} with enough words to queue up", message_id=f"c{i}"))
    seen: dict[str, bool] = {}

    def mute_ops(menu: QMenu) -> None:
        seen["paused while open"] = scroller.paused
        mute = next(a.menu() for a in menu.actions() if a.text() == "Mute")
        QCursor.setPos(far_away(scroller))           # the user moves away, clicking
        next(a for a in mute.actions() if a.text() == "group ops for 1 hour").trigger()
        menu.close()

    scroller.setAttribute(Qt.WidgetAttribute.WA_UnderMouse, True)   # Qt's stale belief
    right_click(scroller, scroller.lane.item(ops.uid).x + 5, mute_ops)
    assert seen["paused while open"]
    assert model.find("o1") is None                  # muted
    assert not scroller.paused, scroller.status_text()
    entered = [item for item in scroller.lane.visible]
    assert entered, "the waiting messages came in"
    x = entered[0].x
    qtbot.waitUntil(lambda: entered[0].x < x - 5, timeout=10_000)
    assert "paused" not in scroller.status_text()


def test_a_lost_leave_does_not_keep_the_strip_paused(scroller, model, qtbot):
    entry = model.add(msg("moving on"))
    scroller._hover = True                       # an Enter whose Leave never came
    QCursor.setPos(far_away(scroller))
    x = scroller.lane.item(entry.uid).x
    qtbot.waitUntil(lambda: scroller.lane.item(entry.uid).x < x - 5, timeout=10_000)
    assert not scroller.paused


def test_the_clicked_message_stays_put_while_its_menu_is_open(scroller, model, qtbot):
    entry = model.add(msg("hold still", urls=("https://example.org/",)))
    place_visible(scroller, entry.uid)
    QCursor.setPos(far_away(scroller))
    x = scroller.lane.item(entry.uid).x
    positions = []

    def watch(menu: QMenu) -> None:
        leave(scroller)              # the popup's grab: the strip is told the pointer left
        positions.append(scroller.lane.item(entry.uid).x)
        QTimer.singleShot(300, lambda: (positions.append(scroller.lane.item(entry.uid).x),
                                        menu.close()))

    right_click(scroller, x + 5, watch)
    assert positions == [x, x]
    assert not scroller.paused                   # the pointer is elsewhere now


def test_the_badge_has_a_slot_of_its_own(scroller, model, qtbot):
    """With "+N waiting" shown, messages enter at the badge's left edge: no
    text is ever drawn in the badge's slot, text does reach its edge, and a
    gap of background (BADGE_GAP) keeps the two apart."""
    QCursor.setPos(far_away(scroller))
    scroller.set_colours("#1d1f21", "#00ff00")       # text in a colour easy to count
    for i in range(12):
        model.add(msg("x" * 60, message_id=str(i)))
    assert scroller.waiting and "waiting" in scroller.status_text()
    right = scroller.message_area_right()
    assert right < scroller.width() - 20
    assert scroller.lane.view_width == pytest.approx(right, abs=1)
    qtbot.waitUntil(lambda: any(i.x < right - 250 and i.right > right
                                for i in scroller.lane.visible), timeout=10_000)
    scroller.user_paused = True
    image = scroller.grab().toImage()
    badge_slot = image.copy(int(right) + 1, 0, image.width() - int(right) - 1, image.height())
    assert colour_pixels(badge_slot, "#00ff00") == 0
    assert colour_pixels(image.copy(0, 0, int(right), image.height()), "#00ff00") > 0
    # between the last letter and the badge a strip of plain background: the
    # text never touches the badge (its anti-aliased edges left out)
    area_right = int(scroller.message_area_right())   # "paused" made the badge wider
    badge_left = int(scroller._badge()[2].left())
    gap = image.copy(area_right + 1, 0, badge_left - area_right - 2, image.height())
    assert gap.width() >= 3                           # a gap a reader can see
    background = QColor("#1d1f21")
    assert all(gap.pixelColor(x, y) == background
               for x in range(gap.width()) for y in range(gap.height()))


def fake_xdg_open(tmp_path: Path, status: int) -> str:
    """A PATH whose xdg-open fails as xdg-utils' does with ``status``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "xdg-open"
    tool.write_text(f"#!/bin/sh\necho 'xdg-open: no method available for opening' >&2\n"
                    f"exit {status}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def window_for(qtbot, tmp_path, **settings) -> TickerWindow:
    config = Config(user="me@host", groups=[Group("Chat")], **settings)
    config.path = tmp_path / "tickertape.toml"
    controller = TickerController(config, ScrollerModel(), History(tmp_path / "h.sqlite3"))
    window = TickerWindow(controller)
    qtbot.addWidget(window)
    window.scroller.open_urls = True
    return window


def test_a_link_nothing_can_open_is_said(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", fake_xdg_open(tmp_path, 3))
    window = window_for(qtbot, tmp_path)
    window.show()
    message = Message(group="Chat", sender="bob", text="see", message_id="1",
                      urls=("https://example.org/report",))
    window.scroller.open_attachment(message)
    qtbot.waitUntil(lambda: "Cannot open" in window.notice.toolTip(), timeout=10_000)
    assert "https://example.org/report" in window.notice.toolTip()
    assert "no program is set up to open it" in window.notice.toolTip()
    assert "ff8a80" in window.notice.styleSheet()          # said as an error
    history = window.open_history()                     # the history's links too
    history._link_clicked(QUrl("https://example.org/minutes"))
    qtbot.waitUntil(lambda: history.problem_label.isVisible(), timeout=10_000)
    assert history.problem_label.text().startswith("Cannot open https://example.org/minutes")
    window.close()


def test_history_opens_beside_the_strip_not_under_it(qtbot, tmp_path):
    window = window_for(qtbot, tmp_path)
    screen = window.screen().availableGeometry()
    window.setGeometry(screen.left(), screen.top(), screen.width(), 30)
    window.show()
    qtbot.waitUntil(lambda: window.y() == screen.top(), timeout=5000)
    history = window.open_history()
    assert history.parent() is window and history.isWindow()   # kept above by the WM
    strip = window.frameGeometry()
    assert not history.frameGeometry().intersects(strip)
    assert history.y() >= strip.bottom()
    assert history.search.isVisible()
    compose = window.open_compose(None)
    assert not compose.frameGeometry().intersects(strip)
    compose.close()
    window.close()


def test_menu_leads_to_the_other_apps_in_plain_words(qtbot, tmp_path):
    from elvin_apps.tickertape.mobility import TickerMobility

    window = window_for(qtbot, tmp_path)
    window.add_mobility(TickerMobility(window.controller, None, parent=window))
    texts = [a.text() for a in window.menu.actions()]
    assert "&Open" in texts and "&Settings…" in texts
    assert [a.text() for a in window.apps_menu.actions()] == ["Coffee biff", "Elvin console"]
    assert not any("Move" in t for t in texts)
    assert "&Away: keep my messages" in texts and "&Back: catch up" in texts


def test_settings_change_the_strip_and_keep_the_users_comments(qtbot, tmp_path):
    path = tmp_path / "tickertape.toml"
    path.write_text('# my ticker\nuser = "me@host"  # who I am\nspeed = 80.0\n\n'
                    '# the group everyone reads\n[[groups]]\nname = "Chat"  # all of us\n')
    config = load(path)
    controller = TickerController(config, ScrollerModel(), History(tmp_path / "h.sqlite3"))
    window = TickerWindow(controller)
    qtbot.addWidget(window)
    window.place(None)                               # docked at the top by default
    window.show()
    assert window.dock is not None and window.dock.docked
    assert window.windowFlags() & Qt.WindowType.FramelessWindowHint
    screen = window.screen().availableGeometry()
    assert window.geometry().width() == screen.width() and window.y() == screen.top()

    dialog = window.open_settings()
    assert not dialog.frameGeometry().intersects(window.frameGeometry())
    dialog.size_spin.setValue(15)
    dialog.speed_spin.setValue(120)
    dialog.background_button.set_colour("#102030")
    dialog.text_button.set_colour("#f0f0a0")
    dialog.set_dock_choice("bottom")
    dialog.accept()
    assert window.scroller.font().pointSizeF() == 15 and window.scroller.speed == 120
    assert window.scroller.background == QColor("#102030")
    qtbot.waitUntil(lambda: window.geometry().bottom() == screen.bottom(), timeout=5000)
    assert window.geometry().width() == screen.width()
    text = path.read_text()
    assert "# my ticker" in text and "# who I am" in text and "# all of us" in text
    assert "# the group everyone reads" in text
    again = load(path)
    assert (again.font_size, again.speed, again.background, again.text_colour, again.dock) \
        == (15.0, 120.0, "#102030", "#f0f0a0", "bottom")
    assert [g.name for g in again.groups] == ["Chat"]

    dialog = window.open_settings()                  # back to a window
    dialog.set_dock_choice("window")
    dialog.frameless_box.setChecked(False)
    dialog.accept()
    qtbot.waitUntil(window.isVisible, timeout=5000)
    assert not window.dock.docked
    assert not window.windowFlags() & Qt.WindowType.FramelessWindowHint
    assert load(path).dock == "window"
    window.close()


@pytest.mark.parametrize(("data", "words"), [
    ({"dock": "left"}, "dock must be one of top, bottom, window"),
    ({"background": "blue"}, "background must look like #1d1f21"),
    ({"text_colour": 3}, "text_colour must be a string"),
    ({"font_family": True}, "font_family must be a string"),
])
def test_bad_settings_are_named(data, words):
    with pytest.raises(ConfigError, match=words):
        from_mapping(data, "tickertape.toml")


def test_a_file_that_is_not_toml_is_never_overwritten(tmp_path):
    path = tmp_path / "tickertape.toml"
    path.write_text("speed = [unclosed\n")
    with pytest.raises(ConfigError, match="not overwritten"):
        save(Config(user="me@host"), path)
    assert path.read_text() == "speed = [unclosed\n"
