"""Windows that fit a 1024x768 screen, and positions remembered per screen
arrangement (``elvin.qt.geometry``). Real widgets; the screen's available
area is given explicitly, since the offscreen platform has one 800x800
screen (tests/gui/test_desktop_xcb.py runs the console on a real 1024x768
X server)."""

from __future__ import annotations

import json

import pytest
from elvin_apps.console.workspace import ConsumerSpec, ProducerSpec, RouterViewSpec
from PySide6.QtCore import QRect, QSize
from PySide6.QtWidgets import QWidget

from elvin.qt.geometry import (
    FRAME_ALLOWANCE,
    WindowMemory,
    clamped,
    fitted,
    screen_setup,
    visible_on,
)
from tests.gui.test_console_app import Console, basic, run
from tests.waiting import until

#: a 1024x768 screen less a 19 px panel: what the issue's user had
SMALL = QRect(0, 19, 1024, 749)


def room(available: QRect) -> QSize:
    return QSize(available.width() - FRAME_ALLOWANCE.width(),
                 available.height() - FRAME_ALLOWANCE.height())


def fits(size: QSize, available: QRect = SMALL) -> bool:
    space = room(available)
    return size.width() <= space.width() and size.height() <= space.height()


def test_fitted_keeps_what_fits_and_shrinks_the_rest():
    assert fitted(QSize(1280, 800), SMALL) == room(SMALL)
    assert fitted(QSize(460, 360), SMALL) == QSize(460, 360)
    assert fitted(QSize(1280, 800), QRect(0, 0, 1920, 1080)) == QSize(1280, 800)


def test_console_fits_a_1024x768_screen(qt_loop, qtbot, router):
    """Statistics, an unfolded producer, a consumer with its key tree and
    detail: the window's smallest size still fits, and it opens within the
    screen, as does "Explain a match"."""
    from elvin.qt.geometry import fit_to_screen

    async def scenario(console: Console):
        window = await console.open(basic(
            router.url,
            ConsumerSpec(title="C", router="local", key="Group", detail=True),
            ProducerSpec(title="P", router="local", expanded=True),
            RouterViewSpec(title="R", router="local")))
        window.show_pane(window.panes_of("router")[0])
        await until(lambda: window.panes_of("router")[0].isVisible())
        assert fits(window.minimumSizeHint()), window.minimumSizeHint()
        size = fit_to_screen(window, QSize(1280, 800), SMALL)
        assert fits(size) and window.size() == size
        dialog = window.explain(None, "require(Price)")
        assert fits(dialog.minimumSizeHint()), dialog.minimumSizeHint()
        assert fits(fit_to_screen(dialog, QSize(1080, 520), SMALL))
        dialog.close()

    run(qt_loop, qtbot, scenario)


def _window(qtbot) -> QWidget:
    widget = QWidget()
    widget.setWindowTitle("remembered")
    qtbot.addWidget(widget)
    return widget


def test_window_memory_restores_size_and_place(qtbot, tmp_path):
    path = tmp_path / "windows.json"
    first = _window(qtbot)
    first.setGeometry(60, 70, 420, 300)
    first.show()
    memory = WindowMemory(first, "tool", path)
    memory.save()
    record = json.loads(path.read_text())["windows"]["tool"][screen_setup()]
    assert (record["width"], record["height"]) == (420, 300)

    second = _window(qtbot)
    second.resize(200, 100)
    assert WindowMemory(second, "tool", path).restore()
    assert second.size() == QSize(420, 300)
    assert (second.x(), second.y()) == (first.x(), first.y())
    third = _window(qtbot)                      # another window's name: nothing known
    assert not WindowMemory(third, "other", path).restore()


def test_window_memory_ignores_places_no_screen_shows(qtbot, tmp_path):
    path = tmp_path / "windows.json"
    path.write_text(json.dumps({"version": 1, "windows": {"tool": {
        screen_setup(): {"x": 5000, "y": 40, "width": 400, "height": 300},
        "gone=1920x1080+0+0": {"x": 10, "y": 10, "width": 300, "height": 200, "saved": 1}}}}))
    widget = _window(qtbot)
    widget.resize(250, 150)
    # this arrangement's place is off every screen; the other arrangement's
    # place is on this screen too: that one is used
    assert WindowMemory(widget, "tool", path).restore()
    assert widget.size() == QSize(300, 200)
    path.write_text(json.dumps({"version": 1, "windows": {"tool": {
        screen_setup(): {"x": 5000, "y": 40, "width": 400, "height": 300}}}}))
    widget.resize(250, 150)
    assert not WindowMemory(widget, "tool", path).restore()
    assert widget.size() == QSize(250, 150)


def test_window_memory_survives_garbage(qtbot, tmp_path):
    path = tmp_path / "windows.json"
    widget = _window(qtbot)
    bad_record = {"x": "a", "y": True, "width": -5, "height": 0}
    for garbage in ("{not json", "[1, 2]", json.dumps(
            {"version": 1, "windows": {"tool": {screen_setup(): bad_record}}}),
            '{"version": 99, "windows": {}}'):
        path.write_text(garbage)
        assert not WindowMemory(widget, "tool", path).restore()
    widget.show()
    WindowMemory(widget, "tool", path).save()           # replaces the bad file
    assert json.loads(path.read_text())["version"] == 1
    blocked = tmp_path / "file"
    blocked.write_text("")
    WindowMemory(widget, "tool", blocked / "windows.json").save()   # logged, not raised


def test_visible_on_wants_the_corner_and_half_the_window():
    screen = QRect(0, 0, 1024, 768)
    assert visible_on(QRect(10, 10, 400, 300), [screen]) == screen
    assert visible_on(QRect(900, 10, 400, 300), [screen]) is None       # mostly off
    assert visible_on(QRect(-50, 10, 400, 300), [screen]) is None       # corner off
    assert visible_on(QRect(1100, 10, 400, 300), [screen, QRect(1024, 0, 800, 600)]) \
        == QRect(1024, 0, 800, 600)


def test_a_docked_bar_keeps_its_screen_and_the_windows_place(qtbot, tmp_path):
    path = tmp_path / "windows.json"
    window = _window(qtbot)
    window.setGeometry(40, 50, 300, 200)
    window.show()
    WindowMemory(window, "tool", path).save()              # as a window
    docked = WindowMemory(window, "tool", path)
    docked.screen_only = True
    window.setGeometry(0, 0, 800, 30)                       # now a bar
    docked.save()
    assert docked.remembered_screen() is window.screen()
    later = _window(qtbot)
    assert WindowMemory(later, "tool", path).restore()      # back to a window: its place
    assert later.size() == QSize(300, 200)


@pytest.mark.parametrize("record", [
    {"x": 10 ** 400, "y": 0, "width": 300, "height": 200},
    {"x": 0, "y": 0, "width": 2 ** 40, "height": 200},
    {"x": -(2 ** 33), "y": 0, "width": 300, "height": 200},
    {"x": 0, "y": 0, "width": 300, "height": 200, "saved": 10 ** 400},
    {"x": 0, "y": 0, "width": 300.5, "height": 200},
], ids=["huge-x", "huge-width", "beyond-int32", "huge-saved", "float-width"])
def test_out_of_range_window_records_are_skipped(qtbot, tmp_path, caplog, record):
    path = tmp_path / "windows.json"
    good = {"x": 30, "y": 40, "width": 310, "height": 210, "saved": 1}
    other = "an-older-arrangement"
    path.write_text(json.dumps({"version": 1, "windows": {"tool": {
        screen_setup(): record, other: good}}}))
    widget = _window(qtbot)
    with caplog.at_level("INFO", logger="elvin.qt"):
        restored = WindowMemory(widget, "tool", path).restore()
    if "saved" in record:                            # the rectangle is fine, the time is not
        assert restored and widget.size() == QSize(300, 200)
        return
    assert restored and widget.size() == QSize(310, 210)   # the good one of the others
    assert "window tool" in caplog.text and str(path) in caplog.text


@pytest.mark.parametrize("garbage", [
    '{"version": 1, "windows": {"tool": {"a": {"x": 1', "[" * 100_000,
    '{"version": 1, "windows": {"tool": {"a": {"x": NaN, "y": 0, "width": 1, "height": 1}}}}',
    '{"version": 1, "windows": 5}',
], ids=["truncated", "deep", "nan", "windows-int"])
def test_a_garbage_windows_file_is_ignored_and_named(qtbot, tmp_path, caplog, garbage):
    path = tmp_path / "windows.json"
    path.write_text(garbage)
    widget = _window(qtbot)
    with caplog.at_level("INFO", logger="elvin.qt"):
        assert not WindowMemory(widget, "tool", path).restore()
        assert WindowMemory(widget, "tool", path).remembered_screen() is None
    assert str(path) in caplog.text


def test_clamped_moves_and_shrinks_a_window_onto_a_smaller_screen():
    # the console: saved at (199,130) 1100x700 on 1600x1000
    place = clamped(QRect(199, 130, 1100, 700), SMALL)
    frame = QRect(place.x(), place.y(), place.width() + FRAME_ALLOWANCE.width(),
                  place.height() + FRAME_ALLOWANCE.height())
    assert SMALL.contains(frame), frame
    assert place.size() == QSize(SMALL.width() - FRAME_ALLOWANCE.width(), 700)
    assert clamped(QRect(60, 70, 420, 300), SMALL) == QRect(60, 70, 420, 300)   # fits: kept
    assert clamped(QRect(-30, 0, 420, 300), SMALL).topLeft() == SMALL.topLeft()


def test_a_window_saved_on_a_bigger_screen_opens_all_on_a_smaller_one(qtbot, tmp_path):
    """Saved on a 1600x1000 arrangement, restored on this one (the
    offscreen platform's 800x800): more than half of it shows, so it is
    restored, but shrunk and moved so that its frame is all on the screen."""
    path = tmp_path / "windows.json"
    path.write_text(json.dumps({"version": 1, "windows": {"console": {
        "big=1600x1000+0+0": {"x": 199, "y": 130, "width": 1100, "height": 700,
                              "saved": 1}}}}))
    widget = _window(qtbot)
    available = widget.screen().availableGeometry()
    assert available.width() < 1300                 # the record is wider than this screen
    assert WindowMemory(widget, "console", path).restore()
    frame = QRect(widget.pos(), widget.size() + FRAME_ALLOWANCE)
    assert available.contains(frame), (frame, available)


def test_a_bottom_bar_made_a_window_is_on_the_screen(qtbot, tmp_path):
    """The tickertape at the bottom edge switched to "a window I can move"
    (with no place remembered for it as a window): all of it on screen."""
    from elvin_apps.tickertape.config import Config
    from elvin_apps.tickertape.controller import TickerController
    from elvin_apps.tickertape.model import ScrollerModel
    from elvin_apps.tickertape.window import TickerWindow

    config = Config(dock="bottom")
    window = TickerWindow(TickerController(config, ScrollerModel(), None),
                          save_config=False)
    qtbot.addWidget(window)
    memory = WindowMemory(window, "tickertape", tmp_path / "windows.json")
    window.place(memory)
    window.show()
    available = window.screen().availableGeometry()
    assert window.geometry().bottom() == available.bottom()
    window.apply_settings({"dock": "window"})
    qtbot.waitUntil(window.isVisible, timeout=5000)
    assert not window.dock.docked
    frame = QRect(window.pos(), window.size() + FRAME_ALLOWANCE)
    assert available.contains(frame), (frame, available)
