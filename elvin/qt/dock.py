"""Docking a window as a full-width bar at the top or bottom of its screen.

What xtickertape and Sticker users expect of a ticker: a borderless bar as
wide as the screen, at an edge, that other windows do not cover and that
maximised windows stop short of. ``EdgeDock`` places the window at the edge
of its screen's available area and keeps it there when the screen changes.

On X11 it also tells the window manager what the window is, with the
freedesktop window-manager hints (EWMH 1.5): ``_NET_WM_WINDOW_TYPE_DOCK``
(a panel: no frame, on every desktop, above normal windows) and
``_NET_WM_STRUT_PARTIAL`` / ``_NET_WM_STRUT`` (the strip of the screen it
reserves, so that the work area, and with it maximised windows and Qt's
``availableGeometry``, leave it free). The properties are set through Qt's
own xcb connection (``QNativeInterface.QX11Application``), so they reach the
X server in order with Qt's requests: the window type must be there before
the window is mapped. Elsewhere (Wayland, where a client may not place
itself; offscreen) the window is still a borderless full-width bar where
the platform allows, and ``reserves_space`` says no space is reserved.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from typing import Literal

from PySide6.QtCore import QEvent, QObject, QRect, Qt, Slot
from PySide6.QtGui import QGuiApplication, QScreen
from PySide6.QtWidgets import QWidget

__all__ = ["EDGES", "EdgeDock", "Edge", "strut_partial"]

log = logging.getLogger("elvin.qt")

Edge = Literal["top", "bottom"]
EDGES: tuple[Edge, ...] = ("top", "bottom")


def strut_partial(bar: QRect, edge: Edge, root: QRect, scale: float = 1.0) -> list[int]:
    """The twelve cardinals of ``_NET_WM_STRUT_PARTIAL`` for a bar at
    ``bar`` (device-independent pixels, as Qt gives them) docked at ``edge``
    of a root window (the whole X screen, every monitor) at ``root``:
    left, right, top, bottom, then the start and end of each along its
    edge, all in device pixels from the root window's edges."""
    def px(value: float) -> int:
        return round(value * scale)

    values = [0] * 12
    start, end = px(bar.left()), px(bar.left() + bar.width()) - 1
    if edge == "top":
        values[2] = px(bar.top() + bar.height()) - px(root.top())
        values[8], values[9] = start, end
    else:
        values[3] = px(root.top() + root.height()) - px(bar.top())
        values[10], values[11] = start, end
    return values


class _Xcb:
    """The few libxcb calls needed to set a window property, on Qt's own
    connection. None of it raises: a missing library means no hints."""

    ATOM = 4
    CARDINAL = 6

    class _Cookie(ctypes.Structure):
        _fields_ = [("sequence", ctypes.c_uint)]

    class _AtomReply(ctypes.Structure):
        _fields_ = [("response_type", ctypes.c_uint8), ("pad0", ctypes.c_uint8),
                    ("sequence", ctypes.c_uint16), ("length", ctypes.c_uint32),
                    ("atom", ctypes.c_uint32)]

    def __init__(self, connection: int) -> None:
        lib = ctypes.CDLL(ctypes.util.find_library("xcb") or "libxcb.so.1")
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        lib.xcb_intern_atom.restype = self._Cookie
        lib.xcb_intern_atom.argtypes = [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint16,
                                        ctypes.c_char_p]
        lib.xcb_intern_atom_reply.restype = ctypes.POINTER(self._AtomReply)
        lib.xcb_intern_atom_reply.argtypes = [ctypes.c_void_p, self._Cookie, ctypes.c_void_p]
        lib.xcb_change_property.restype = self._Cookie
        lib.xcb_change_property.argtypes = [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint32,
                                            ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint8,
                                            ctypes.c_uint32, ctypes.c_void_p]
        lib.xcb_delete_property.restype = self._Cookie
        lib.xcb_delete_property.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32]
        lib.xcb_flush.argtypes = [ctypes.c_void_p]
        libc.free.argtypes = [ctypes.c_void_p]
        self._lib, self._free = lib, libc.free
        self._conn = ctypes.c_void_p(connection)
        self._atoms: dict[str, int] = {}

    def atom(self, name: str) -> int:
        found = self._atoms.get(name)
        if found is None:
            raw = name.encode("ascii")
            reply = self._lib.xcb_intern_atom_reply(
                self._conn, self._lib.xcb_intern_atom(self._conn, 0, len(raw), raw), None)
            if not reply:
                raise OSError(f"the X server did not intern {name}")
            found = self._atoms[name] = reply.contents.atom
            self._free(reply)
        return found

    def set(self, window: int, name: str, kind: int, values: list[int]) -> None:
        data = (ctypes.c_uint32 * len(values))(*values)
        self._lib.xcb_change_property(self._conn, 0, window, self.atom(name), kind, 32,
                                      len(values), data)

    def delete(self, window: int, name: str) -> None:
        self._lib.xcb_delete_property(self._conn, window, self.atom(name))

    def flush(self) -> None:
        self._lib.xcb_flush(self._conn)


def _x11() -> _Xcb | None:
    app = QGuiApplication.instance()
    if app is None or QGuiApplication.platformName() != "xcb":
        return None
    try:
        native = app.nativeInterface()
        connection = int(native.connection()) if native is not None else 0
        return _Xcb(connection) if connection else None
    except Exception as exc:  # noqa: BLE001 - no hints is a smaller evil than no window
        log.info("cannot set X11 window hints: %s", exc)
        return None


class EdgeDock(QObject):
    """Keeps ``window`` docked at ``edge`` of ``screen`` (by default the
    window's): ``dock()`` before the window is first shown, ``undock()`` to
    make it an ordinary window again. The bar's height is the window's own
    (its size hint) unless ``height`` is given.

    The screen is remembered by name, not as a ``QScreen``: a monitor that
    is unplugged takes its ``QScreen`` with it, and the bar moves to a
    screen that is still there (and back when the monitor returns and the
    dock is asked again)."""

    def __init__(self, window: QWidget, edge: Edge = "top",
                 screen: QScreen | str | None = None, height: int | None = None) -> None:
        super().__init__(window)
        if edge not in EDGES:
            raise ValueError(f"dock edge must be top or bottom, not {edge!r}")
        self.window = window
        self.edge: Edge = edge
        self.screen_name: str | None = screen.name() if isinstance(screen, QScreen) else screen
        self.height = height
        self.docked = False
        self.reserves_space = False
        self.bar = QRect()
        self._watched: QScreen | None = None
        self._window_handle = None
        app = QGuiApplication.instance()
        if app is not None:
            app.screenRemoved.connect(self._screen_removed)
        window.installEventFilter(self)     # its native window comes when it is shown

    @property
    def screen(self) -> QScreen | None:
        """The screen asked for, while it is plugged in."""
        return _screen_named(self.screen_name)

    # -- the window ----------------------------------------------------------------------
    def dock(self) -> QRect:
        """Make the window a bar at the edge (a new place each call: after
        a screen or height change, call it again). Returns the bar."""
        return self._dock_on(self._target_screen())

    def _dock_on(self, screen: QScreen | None) -> QRect:
        if screen is None:              # no screen at all (all unplugged): wait for one
            return self.bar
        window = self.window
        if not self.docked:
            flags = (window.windowFlags() | Qt.WindowType.FramelessWindowHint
                     | Qt.WindowType.WindowStaysOnTopHint)
            window.setWindowFlags(flags)
        self.docked = True
        if screen is not self._watched:
            self.reserves_space = False  # a strip reserved elsewhere is no part of this area
        self._watch(screen)
        self._follow_window_screen()
        self.bar = self._bar_for(screen)
        window.setMinimumWidth(0)
        window.setGeometry(self.bar)
        self.reserves_space = self._hint(screen)
        return self.bar

    def undock(self) -> None:
        """An ordinary window again (frame and all), nothing reserved."""
        if not self.docked:
            return
        self.docked = False
        x11 = _x11()
        if x11 is not None and self.window.testAttribute(Qt.WidgetAttribute.WA_WState_Created):
            window_id = int(self.window.winId())
            for name in ("_NET_WM_STRUT_PARTIAL", "_NET_WM_STRUT"):
                x11.delete(window_id, name)
            x11.flush()
        self.reserves_space = False
        flags = self.window.windowFlags() & ~Qt.WindowType.FramelessWindowHint
        self.window.setWindowFlags(flags)
        self._watch(None)

    # -- placement -----------------------------------------------------------------------
    def _bar_for(self, screen: QScreen) -> QRect:
        """Where the bar goes on ``screen`` now."""
        area = self._area(screen)
        height = self.height or max(self.window.minimumSizeHint().height(),
                                    self.window.sizeHint().height())
        top = area.top() if self.edge == "top" else area.top() + area.height() - height
        return QRect(area.left(), top, area.width(), height)

    def _area(self, screen: QScreen) -> QRect:
        """The screen's available area, with our own reserved strip given
        back (the work area the window manager reports already leaves it out)."""
        area = QRect(screen.availableGeometry())
        full = screen.geometry()
        if self.reserves_space and not self.bar.isNull():
            if self.edge == "top" and area.top() == self.bar.bottom() + 1:
                area.setTop(max(self.bar.top(), full.top()))
            elif self.edge == "bottom" and area.bottom() == self.bar.top() - 1:
                area.setBottom(min(self.bar.bottom(), full.bottom()))
        return area

    def _hint(self, screen: QScreen) -> bool:
        """Tell an X11 window manager this is a dock that reserves its strip."""
        x11 = _x11()
        if x11 is None:
            return False
        try:
            window_id = int(self.window.winId())
            root = screen.virtualGeometry()
            partial = strut_partial(self.bar, self.edge, root, screen.devicePixelRatio())
            x11.set(window_id, "_NET_WM_WINDOW_TYPE", x11.ATOM,
                    [x11.atom("_NET_WM_WINDOW_TYPE_DOCK")])
            x11.set(window_id, "_NET_WM_STRUT_PARTIAL", x11.CARDINAL, partial)
            x11.set(window_id, "_NET_WM_STRUT", x11.CARDINAL, partial[:4])
            x11.flush()
        except Exception as exc:  # noqa: BLE001 - a bar that reserves nothing still works
            log.info("cannot reserve the dock's space: %s", exc)
            return False
        return True

    def _target_screen(self, gone: QScreen | None = None) -> QScreen | None:
        """The screen asked for if it is plugged in, else the window's, else
        the primary one, else any: never ``gone`` (a screen being removed)."""
        candidates = (self.screen, self.window.screen(), QGuiApplication.primaryScreen(),
                      *QGuiApplication.screens())
        return next((s for s in candidates if s is not None and s is not gone), None)

    def _watch(self, screen: QScreen | None) -> None:
        if screen is self._watched:
            return
        if self._watched is not None:
            for signal in (self._watched.geometryChanged,
                           self._watched.availableGeometryChanged):
                try:
                    signal.disconnect(self._screen_changed)
                except (RuntimeError, TypeError):   # the screen is already gone
                    pass
        self._watched = screen
        if screen is not None:
            screen.geometryChanged.connect(self._screen_changed)
            screen.availableGeometryChanged.connect(self._screen_changed)

    def _follow_window_screen(self) -> None:
        """Re-dock when the window system moves the window to another screen
        (its native window exists only once it is created or shown)."""
        handle = self.window.windowHandle()
        if handle is None or handle is self._window_handle:
            return
        self._window_handle = handle
        handle.screenChanged.connect(self._window_screen_changed)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if watched is self.window and event.type() in (QEvent.Type.Show,
                                                       QEvent.Type.WinIdChange):
            self._follow_window_screen()
        return False

    @Slot(QScreen)
    def _screen_removed(self, screen: QScreen) -> None:
        """A monitor was unplugged: forget its ``QScreen`` (never touch it
        again) and, if the bar was there, put it on a screen that remains."""
        if screen is not self._watched:
            return
        self._watched = None            # its signals go with it
        if self.docked:
            target = self._target_screen(gone=screen)
            log.info("screen %s went away: the bar moves to %s", screen.name(),
                     target.name() if target is not None else "no screen (none is left)")
            self._dock_on(target)

    def _window_screen_changed(self, *_args: object) -> None:
        if self.docked and self._target_screen() is not self._watched:
            self.dock()

    def _screen_changed(self, *_args: object) -> None:
        """The screen was resized or another panel came or went: follow."""
        if self.docked and self._watched is not None and \
                self._bar_for(self._watched) != self.bar:
            self.dock()


def _screen_named(name: str | None) -> QScreen | None:
    if not name:
        return None
    return next((s for s in QGuiApplication.screens() if s.name() == name), None)
