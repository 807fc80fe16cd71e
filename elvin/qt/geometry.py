"""Window sizes that fit the screen, and positions remembered per screen.

Two jobs every app's main window shares:

* ``fit_to_screen``: open at the size the app would like, but never larger
  than the screen's available area less what the window manager adds (title
  bar, borders), so that on a 1024x768 screen the buttons at the bottom and
  the close button at the right are on the screen.
* ``WindowMemory``: remember where the user put a window and how large they
  made it, for each arrangement of screens (a laptop alone, the laptop with
  its external monitor), and restore it on the next start when a screen
  still shows it; otherwise the app's default placement stands. The record
  lives in ``$XDG_STATE_HOME/elvin/windows.json`` (state, not a setting).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, QSize, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QScreen
from PySide6.QtWidgets import QWidget

from elvin.daemon.xdg import state_home
from elvin.fileutil import atomic_write
from elvin.statefile import int_in, number_in, read_json_state

__all__ = ["FRAME_ALLOWANCE", "WindowMemory", "clamped", "fit_to_screen", "fitted",
           "keep_on_screen", "place_clear_of",
           "screen_setup", "visible_on"]

log = logging.getLogger("elvin.qt")

#: pixels a window manager adds around a window: borders and a title bar
FRAME_ALLOWANCE = QSize(16, 40)
#: the share of a remembered window that must be on one screen to restore it
VISIBLE_SHARE = 0.5
#: the file's format; a file of another version is ignored (and replaced)
VERSION = 1
SAVE_DELAY_MS = 600
#: coordinates and sizes beyond this are no screen's (and near Qt's 32-bit limit)
MAX_COORDINATE = 1 << 20


def fitted(preferred: QSize, available: QRect, frame: QSize = FRAME_ALLOWANCE) -> QSize:
    """``preferred``, shrunk where needed to fit ``available`` with the
    window manager's ``frame`` around it."""
    return QSize(max(1, min(preferred.width(), available.width() - frame.width())),
                 max(1, min(preferred.height(), available.height() - frame.height())))


def clamped(rect: QRect, available: QRect, frame: QSize = FRAME_ALLOWANCE) -> QRect:
    """``rect`` (the frame's corner and the contents' size, as ``move`` and
    ``resize`` take them) shrunk to fit ``available`` with the window
    manager's ``frame`` around it, and moved, as little as may be, so that
    the whole frame is inside: a window saved on a larger screen opens on a
    smaller one with its buttons and status bar on it."""
    size = fitted(rect.size(), available, frame)
    right = available.left() + available.width() - size.width() - frame.width()
    bottom = available.top() + available.height() - size.height() - frame.height()
    return QRect(max(available.left(), min(rect.x(), right)),
                 max(available.top(), min(rect.y(), bottom)), size.width(), size.height())


def keep_on_screen(window: QWidget, available: QRect | None = None) -> QRect:
    """Move and shrink ``window`` so that all of it is on ``available`` (by
    default its screen's available area). Returns its new place."""
    if available is None:
        screen = QGuiApplication.screenAt(window.pos()) or _screen(window)
        if screen is None:
            return QRect(window.pos(), window.size())
        available = screen.availableGeometry()
    place = clamped(QRect(window.pos(), window.size()), available)
    size = place.size().expandedTo(window.minimumSizeHint())
    window.resize(size)
    window.move(place.topLeft())
    return QRect(place.topLeft(), size)


def _screen(widget: QWidget) -> QScreen | None:
    return widget.screen() or QGuiApplication.primaryScreen()


def fit_to_screen(widget: QWidget, preferred: QSize, available: QRect | None = None) -> QSize:
    """Resize ``widget`` to ``preferred`` or less, to fit ``available`` (by
    default its screen's available area); returns the size chosen. The
    minimum size is kept: a window cannot be smaller than its contents
    allow (the apps keep theirs under 1024x768)."""
    if available is None:
        screen = _screen(widget)
        available = screen.availableGeometry() if screen is not None else \
            QRect(0, 0, preferred.width(), preferred.height())
    size = fitted(preferred, available).expandedTo(widget.minimumSizeHint())
    widget.resize(size)
    return size


def place_clear_of(window: QWidget, avoid: QRect, available: QRect | None = None,
                   gap: int = 8) -> QPoint:
    """Move ``window`` next to ``avoid`` (a strip at a screen edge) without
    covering it: below it when there is more room below, else above, and
    centred on it across; shrunk to the room there is. Qt centres a dialog
    over its parent, which for a one-line strip at the top of the screen
    puts the dialog over the strip (and an always-on-top strip over the
    dialog's search box). Returns the new top-left corner."""
    if available is None:
        screen = QGuiApplication.screenAt(avoid.center()) or _screen(window)
        available = screen.availableGeometry() if screen is not None else avoid
    room_below = available.bottom() - avoid.bottom() - gap
    room_above = avoid.top() - available.top() - gap
    height_room = max(room_below, room_above) - FRAME_ALLOWANCE.height()
    if height_room > 0 and window.height() > height_room:
        window.resize(window.width(), max(height_room, window.minimumSizeHint().height()))
    width = min(window.width(), available.width() - FRAME_ALLOWANCE.width())
    if width != window.width():
        window.resize(width, window.height())
    outer_w = window.width() + FRAME_ALLOWANCE.width()
    outer_h = window.height() + FRAME_ALLOWANCE.height()
    x = avoid.center().x() - outer_w // 2
    x = max(available.left(), min(x, available.right() + 1 - outer_w))
    if room_below >= room_above:
        y = max(avoid.bottom() + 1, available.top()) + gap
    else:
        y = min(avoid.top(), available.bottom() + 1) - gap - outer_h
    corner = QPoint(x, y)
    window.move(corner)
    return corner


def screen_setup(screens: list[QScreen] | None = None) -> str:
    """A key for the arrangement of screens now: each screen's name and
    geometry, sorted, so the same monitors in the same places give the same
    key whatever order the system lists them in."""
    screens = QGuiApplication.screens() if screens is None else screens
    parts = []
    for screen in screens:
        g = screen.geometry()
        parts.append(f"{screen.name() or 'screen'}={g.width()}x{g.height()}+{g.x()}+{g.y()}")
    return ",".join(sorted(parts)) or "none"


def visible_on(rect: QRect, areas: list[QRect], share: float = VISIBLE_SHARE) -> QRect | None:
    """The area (a screen's available geometry) that shows at least
    ``share`` of ``rect`` and its top-left corner (where the title bar is
    grabbed), else None."""
    if rect.width() <= 0 or rect.height() <= 0:
        return None
    whole = rect.width() * rect.height()
    for area in areas:
        overlap = area.intersected(rect)
        if overlap.isEmpty():
            continue
        if overlap.width() * overlap.height() >= share * whole and area.contains(rect.topLeft()):
            return area
    return None


class WindowMemory(QObject):
    """Remembers ``window``'s geometry as ``name`` (one record per screen
    arrangement) in ``path`` (default ``$XDG_STATE_HOME/elvin/windows.json``).

    ``restore()`` puts the window back where it was on this arrangement of
    screens (or, on a new arrangement, where it last was if a screen still
    shows that place) and returns True; else it leaves the window alone and
    returns False. After that, moves and resizes are written a moment after
    they stop, and once more when the window closes. A file that cannot be
    read is ignored (and replaced at the next write); one that cannot be
    written is logged, never shown: forgetting a position is no reason to
    interrupt anyone.
    """

    def __init__(self, window: QWidget, name: str, path: Path | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.name = name
        self.path = path if path is not None else state_home() / "elvin" / "windows.json"
        self.enabled = True
        #: a docked bar: only which screen it is on is worth remembering
        self.screen_only = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SAVE_DELAY_MS)
        self._timer.timeout.connect(self.save)
        window.installEventFilter(self)

    # -- the file ---------------------------------------------------------------------
    def _read(self) -> dict[str, Any]:
        data = read_json_state(self.path, VERSION, log, "window positions")
        if data is None:
            return {}
        if not isinstance(data.get("windows"), dict):
            log.info("window positions in %s ignored: windows is not an object", self.path)
            return {}
        return data

    def records(self) -> dict[str, dict[str, Any]]:
        """This window's records: screen arrangement -> geometry."""
        found = self._read().get("windows", {}).get(self.name, {})
        return found if isinstance(found, dict) else {}

    # -- restoring --------------------------------------------------------------------
    def restore(self) -> bool:
        records = self.records()
        setup = screen_setup()
        candidates = [records[setup]] if isinstance(records.get(setup), dict) else []
        others = sorted((r for k, r in records.items() if k != setup and isinstance(r, dict)),
                        key=_saved, reverse=True)
        areas = [screen.availableGeometry() for screen in QGuiApplication.screens()]
        for record in candidates + others:
            rect = _rect(record)
            if rect is None:
                log.info("a position of window %s in %s ignored: not a rectangle on a screen",
                         self.name, self.path)
                continue
            area = visible_on(rect, areas)
            if area is None:
                continue
            place = clamped(rect, area)
            self.window.resize(place.size().expandedTo(self.window.minimumSizeHint()))
            self.window.move(place.topLeft())
            if record.get("maximized") is True:
                self.window.setWindowState(self.window.windowState()
                                           | Qt.WindowState.WindowMaximized)
            return True
        return False

    def remembered_screen(self) -> QScreen | None:
        """The screen this window was last on in this arrangement (a docked
        window keeps only its screen), if it is still there."""
        record = self.records().get(screen_setup())
        name = record.get("screen") if isinstance(record, dict) else None
        return next((s for s in QGuiApplication.screens() if s.name() == name), None) \
            if isinstance(name, str) else None

    # -- saving -----------------------------------------------------------------------
    def save(self) -> None:
        self._timer.stop()
        if not self.enabled:
            return
        window = self.window
        # the frame's corner (what move() takes) and the contents' size (what
        # resize() takes): the window comes back exactly where it was
        maximized = window.isMaximized()
        normal = window.normalGeometry()
        if maximized and normal.isValid():
            frame = window.pos() - window.geometry().topLeft()
            rect = QRect(normal.topLeft() + frame, normal.size())
        else:
            rect = QRect(window.pos(), window.size())
        screen = window.screen()
        record = {"x": rect.x(), "y": rect.y(), "width": rect.width(),
                  "height": rect.height(), "maximized": maximized,
                  "screen": screen.name() if screen is not None else "",
                  "saved": time.time()}
        data = self._read() or {"version": VERSION, "windows": {}}
        mine = data["windows"].get(self.name)
        if not isinstance(mine, dict):
            mine = data["windows"][self.name] = {}
        if self.screen_only:          # the window's own place stays as it was
            kept = mine.get(screen_setup())
            record = {**(kept if isinstance(kept, dict) else {}),
                      "screen": record["screen"], "saved": record["saved"]}
        mine[screen_setup()] = record
        try:
            atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n",
                         mode=0o644)
        except OSError as exc:
            log.info("cannot remember the window's position in %s: %s", self.path, exc)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.window:
            kind = event.type()
            if kind in (QEvent.Type.Move, QEvent.Type.Resize) and self.window.isVisible():
                self._timer.start()
            elif kind == QEvent.Type.Close:
                self.save()
        return False


def _saved(record: dict[str, Any]) -> float:
    """When the record was written (0 when it does not say, or says nonsense)."""
    return number_in(record.get("saved"), 0, 1e11) or 0.0


def _rect(record: dict[str, Any]) -> QRect | None:
    """The record's rectangle, if it is one a screen could show (Qt's
    coordinates are 32-bit: a larger number would overflow QRect)."""
    x, y = (int_in(record.get(k), -MAX_COORDINATE, MAX_COORDINATE) for k in ("x", "y"))
    width, height = (int_in(record.get(k), 1, MAX_COORDINATE) for k in ("width", "height"))
    if x is None or y is None or width is None or height is None:
        return None
    return QRect(x, y, width, height)
