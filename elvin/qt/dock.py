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

Several docks at one edge (two bars, a bar and a desktop panel) share it:
a bar goes by where the other docks *are* (their struts and window heights,
read from the window manager's ``_NET_CLIENT_LIST``: ``first_free``), not by
the work area, which also leaves out its own strip and the strip of any bar
stacked beyond it (a strut reaches from the screen's edge to the far side of
its dock) -- going by the work area, two bars pushed each other down the
screen. Two Elvin bars (marked ``_ELVIN_EDGE_DOCK``) agree which is nearer
the edge: the one that docked first. Changes of the client list and the work area (a
PropertyNotify on the root window) re-dock at once, so a panel or a bar
that quits leaves no gap.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time
from typing import Literal

from PySide6.QtCore import (
    QAbstractNativeEventFilter,
    QEvent,
    QObject,
    QRect,
    Qt,
    QTimer,
    Signal,
    Slot,
)
from PySide6.QtGui import QGuiApplication, QScreen, QWindow
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


#: milliseconds after docking that the bar's real place is checked, and how
#: many times it is asked for again when the window manager did not move it
PLACE_CHECK_MS = 250
PLACE_CHECKS = 5
#: the property that marks an Elvin bar, so that two of them agree which is
#: nearer the edge: its value is when the bar first docked (``docked_since``)
MARK = "_ELVIN_EDGE_DOCK"
#: the epoch of that value (2024-01-01), in tenths of a second: 32 bits last 13 years
_MARK_EPOCH = 1_704_067_200


def docked_since(now: float | None = None) -> int:
    """``MARK``'s value for a bar that docks now."""
    return int(((time.time() if now is None else now) - _MARK_EPOCH) * 10) & 0xFFFFFFFF


def first_free(bands: list[tuple[int, int, int, int]], span: tuple[int, int], base: int,
               length: int) -> int:
    """How far from the root window's edge a bar ``length`` deep goes, at
    ``base`` (its screen's edge) or further in: the first place where it
    overlaps none of ``bands``, the strips other docks occupy along the same
    edge, each ``(start, end, near, far)`` (``start``..``end`` along the
    edge, ``near``..``far`` its depth from the edge, far exclusive). Bands
    outside ``span`` (the bar's own extent along the edge) do not count.

    The bar goes by where the others *are*, not by the struts they reserve:
    a strut runs from the screen's edge to the far side of its dock, so a bar
    stacked below another reserves the other's strip too, and two bars that
    each took the work area less the other's strut would push each other
    down the screen for ever."""
    relevant = sorted((near, far) for start, end, near, far in bands
                      if start <= span[1] and end >= span[0] and far > base)
    offset = base
    for near, far in relevant:
        if near < offset + length and far > offset:   # overlaps where we would be
            offset = far
    return offset


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

    class _PropertyReply(ctypes.Structure):
        _fields_ = [("response_type", ctypes.c_uint8), ("format", ctypes.c_uint8),
                    ("sequence", ctypes.c_uint16), ("length", ctypes.c_uint32),
                    ("type", ctypes.c_uint32), ("bytes_after", ctypes.c_uint32),
                    ("value_len", ctypes.c_uint32), ("pad0", ctypes.c_uint8 * 12)]

    class _GeometryReply(ctypes.Structure):
        _fields_ = [("response_type", ctypes.c_uint8), ("depth", ctypes.c_uint8),
                    ("sequence", ctypes.c_uint16), ("length", ctypes.c_uint32),
                    ("root", ctypes.c_uint32), ("x", ctypes.c_int16), ("y", ctypes.c_int16),
                    ("width", ctypes.c_uint16), ("height", ctypes.c_uint16),
                    ("border_width", ctypes.c_uint16), ("pad0", ctypes.c_uint8 * 2)]

    class _TranslateReply(ctypes.Structure):
        _fields_ = [("response_type", ctypes.c_uint8), ("same_screen", ctypes.c_uint8),
                    ("sequence", ctypes.c_uint16), ("length", ctypes.c_uint32),
                    ("child", ctypes.c_uint32), ("dst_x", ctypes.c_int16),
                    ("dst_y", ctypes.c_int16)]

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
        error = ctypes.POINTER(ctypes.c_void_p)
        lib.xcb_get_property.restype = self._Cookie
        lib.xcb_get_property.argtypes = [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint32,
                                         ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                         ctypes.c_uint32]
        lib.xcb_get_property_reply.restype = ctypes.POINTER(self._PropertyReply)
        lib.xcb_get_property_reply.argtypes = [ctypes.c_void_p, self._Cookie, error]
        lib.xcb_get_property_value.restype = ctypes.c_void_p
        lib.xcb_get_property_value.argtypes = [ctypes.c_void_p]
        lib.xcb_get_geometry.restype = self._Cookie
        lib.xcb_get_geometry.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        lib.xcb_get_geometry_reply.restype = ctypes.POINTER(self._GeometryReply)
        lib.xcb_get_geometry_reply.argtypes = [ctypes.c_void_p, self._Cookie, error]
        lib.xcb_translate_coordinates.restype = self._Cookie
        lib.xcb_translate_coordinates.argtypes = [ctypes.c_void_p, ctypes.c_uint32,
                                                  ctypes.c_uint32, ctypes.c_int16,
                                                  ctypes.c_int16]
        lib.xcb_translate_coordinates_reply.restype = ctypes.POINTER(self._TranslateReply)
        lib.xcb_translate_coordinates_reply.argtypes = [ctypes.c_void_p, self._Cookie, error]
        lib.xcb_configure_window.restype = self._Cookie
        lib.xcb_configure_window.argtypes = [ctypes.c_void_p, ctypes.c_uint32,
                                             ctypes.c_uint16, ctypes.c_void_p]
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

    def _reply(self, request, cookie):
        """A reply, or None when the server answered with an error (a window
        that went away meanwhile): the error is taken here, not left for Qt
        to print."""
        error = ctypes.c_void_p()
        reply = request(self._conn, cookie, ctypes.byref(error))
        if error.value:
            self._free(error)
        return reply if reply else None

    def cardinals(self, window: int, name: str) -> list[int]:
        """A 32-bit property's values (CARDINAL, WINDOW, ATOM alike); [] if unset."""
        reply = self._reply(self._lib.xcb_get_property_reply, self._lib.xcb_get_property(
            self._conn, 0, window, self.atom(name), 0, 0, 4096))
        if reply is None:
            return []
        try:
            if reply.contents.format != 32:
                return []
            count = reply.contents.value_len
            data = ctypes.cast(self._lib.xcb_get_property_value(reply),
                               ctypes.POINTER(ctypes.c_uint32))
            return [data[i] for i in range(count)]
        finally:
            self._free(reply)

    def geometry(self, window: int) -> tuple[int, int, int, int, int] | None:
        """(root, x, y, width, height) of ``window``, or None if it is gone."""
        reply = self._reply(self._lib.xcb_get_geometry_reply,
                            self._lib.xcb_get_geometry(self._conn, window))
        if reply is None:
            return None
        try:
            g = reply.contents
            return g.root, g.x, g.y, g.width, g.height
        finally:
            self._free(reply)

    def position(self, window: int) -> tuple[int, int] | None:
        """Where ``window``'s top-left corner is on its root window (device
        pixels), as the X server has it, or None if it is gone."""
        found = self.geometry(window)
        if found is None:
            return None
        reply = self._reply(self._lib.xcb_translate_coordinates_reply,
                            self._lib.xcb_translate_coordinates(self._conn, window, found[0],
                                                                0, 0))
        if reply is None:
            return None
        try:
            return reply.contents.dst_x, reply.contents.dst_y
        finally:
            self._free(reply)

    def configure(self, window: int, x: int, y: int, width: int, height: int) -> None:
        """Ask for ``window`` at this place and size (x, y, width, height)."""
        values = (ctypes.c_uint32 * 4)(x & 0xFFFFFFFF, y & 0xFFFFFFFF, width, height)
        self._lib.xcb_configure_window(self._conn, window, 0x1 | 0x2 | 0x4 | 0x8, values)

    def bands(self, own: int, edge: Edge, since: int = 0
              ) -> list[tuple[int, int, int, int]] | None:
        """The strips other docks occupy along ``edge`` (see ``first_free``),
        from the struts of the windows the window manager lists, or None
        when there is no such list (no EWMH window manager, and so no work
        area to share). An Elvin bar that docked after this one (``since``,
        its ``MARK``; the window id breaks a tie) yields to it and is left
        out, so that two bars settle instead of swapping places."""
        found = self.geometry(own)
        if found is None:
            return None
        root = found[0]
        clients = self.cardinals(root, "_NET_CLIENT_LIST")
        if not clients and not self.cardinals(root, "_NET_SUPPORTING_WM_CHECK"):
            return None
        root_geometry = self.geometry(root)
        width = root_geometry[3] if root_geometry else 1 << 16
        side, start_at = (2, 8) if edge == "top" else (3, 10)
        bands = []
        for window in clients:
            if window == own:
                continue
            mark = self.cardinals(window, MARK)
            if mark and (mark[0], window) > (since, own):
                continue            # an Elvin bar that docked after this one yields

            strut = self.cardinals(window, "_NET_WM_STRUT_PARTIAL")
            if len(strut) < 12:
                strut = self.cardinals(window, "_NET_WM_STRUT")[:4] + [0, 0, 0, 0] + \
                    [0, width - 1] * 2
            if len(strut) < 12 or not strut[side]:
                continue
            shape = self.geometry(window)
            depth = min(shape[4], strut[side]) if shape is not None else strut[side]
            bands.append((strut[start_at], strut[start_at + 1], strut[side] - depth,
                          strut[side]))
        return bands


class _RootWatch(QObject):
    """Says when the window manager's list of windows or its work area
    changed (a PropertyNotify on the root window, which Qt selects for
    itself): a panel or another bar came or went. Qt reports a changed work
    area as ``availableGeometryChanged``, but a bar that leaves can leave the
    work area as it was (the bar below it still reserves both strips), so
    the client list is watched too. One for the application, shared by its
    docks; changes are coalesced into one ``changed`` a moment later."""

    PROPERTY_NOTIFY = 28
    changed = Signal()

    class _Event(ctypes.Structure):
        _fields_ = [("response_type", ctypes.c_uint8), ("pad0", ctypes.c_uint8),
                    ("sequence", ctypes.c_uint16), ("window", ctypes.c_uint32),
                    ("atom", ctypes.c_uint32), ("time", ctypes.c_uint32),
                    ("state", ctypes.c_uint8)]

    class _Filter(QAbstractNativeEventFilter):
        def __init__(self, owner: _RootWatch) -> None:
            super().__init__()
            self.owner = owner

        def nativeEventFilter(self, event_type, message):
            address = int(message)          # a VoidPtr of size 0: it is never true
            if address and bytes(event_type) == b"xcb_generic_event_t":
                event = _RootWatch._Event.from_address(address)
                if (event.response_type & 0x7F) == _RootWatch.PROPERTY_NOTIFY and \
                        event.atom in self.owner.atoms:
                    self.owner.timer.start()
            return False, 0

    _instance: _RootWatch | None = None

    def __init__(self, x11: _Xcb) -> None:
        super().__init__(QGuiApplication.instance())
        self.atoms = {x11.atom("_NET_CLIENT_LIST"), x11.atom("_NET_WORKAREA")}
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(50)
        self.timer.timeout.connect(self.changed)
        self._filter = self._Filter(self)
        QGuiApplication.instance().installNativeEventFilter(  # type: ignore[union-attr]  # running
            self._filter)

    @classmethod
    def get(cls, x11: _Xcb) -> _RootWatch:
        if cls._instance is None or cls._instance.parent() is not QGuiApplication.instance():
            cls._instance = cls(x11)
        return cls._instance


def _x11() -> _Xcb | None:
    app = QGuiApplication.instance()
    if app is None or QGuiApplication.platformName() != "xcb":
        return None
    try:
        native = app.nativeInterface()  # type: ignore[attr-defined]  # a QGuiApplication's
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
        self._window_handle: QWindow | None = None
        self._root_watch: _RootWatch | None = None
        self._check_timer = QTimer(self)
        self._check_timer.setSingleShot(True)
        self._check_timer.setInterval(PLACE_CHECK_MS)
        self._check_timer.timeout.connect(self._check_place)
        self._checks_left = 0
        #: when this bar first docked: of two Elvin bars at one edge, the
        #: earlier is nearer the edge (kept across undocking, so that
        #: toggling a bar does not swap it with the other)
        self.since = 0
        app = QGuiApplication.instance()
        if app is not None:
            app.screenRemoved.connect(  # type: ignore[attr-defined]  # a QGuiApplication's
                self._screen_removed)
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
        if not self.since:
            self.since = docked_since()
        if not self.docked:
            flags = (window.windowFlags() | Qt.WindowType.FramelessWindowHint
                     | Qt.WindowType.WindowStaysOnTopHint)
            window.setWindowFlags(flags)
        self.docked = True
        if screen is not self._watched:
            self.reserves_space = False  # a strip reserved elsewhere is no part of this area
        self._watch(screen)
        self._follow_window_screen()
        self._watch_root()
        self.bar = self._bar_for(screen)
        window.setMinimumWidth(0)
        window.setGeometry(self.bar)
        self.reserves_space = self._hint(screen)
        self._checks_left = PLACE_CHECKS
        self._check_timer.start()
        return self.bar

    def _check_place(self) -> None:
        """The window manager sometimes drops the move of a dock that it
        gets while docks come and go (openbox left a bar 30 px down, where
        Qt believed it at 0, after a panel quit): ask the X server where the
        window is, and ask again for the bar's place until it is there."""
        if not self.docked or not self.window.isVisible():
            return
        x11 = _x11()
        screen = self._watched
        if x11 is None or screen is None:
            return
        scale = screen.devicePixelRatio()
        want = (round(self.bar.x() * scale), round(self.bar.y() * scale))
        try:
            window_id = int(self.window.winId())
            if x11.position(window_id) in (want, None):
                return
            log.info("the bar is not where it was put: asking again for %s", self.bar)
            x11.configure(window_id, *want, round(self.bar.width() * scale),
                          round(self.bar.height() * scale))
            x11.flush()
        except Exception as exc:  # noqa: BLE001 - a bar a little off is no crash
            log.info("cannot check the bar's place: %s", exc)
            return
        self._checks_left -= 1
        if self._checks_left > 0:
            self._check_timer.start()

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
        shared = self._beside_others(screen, area, height)
        return QRect(area.left(), top if shared is None else shared, area.width(), height)

    def _beside_others(self, screen: QScreen, area: QRect, height: int) -> int | None:
        """The bar's top on an X11 desktop, where other docks (panels, other
        bars) are read from the window manager's client list: at the screen's
        edge, or next to the docks already there (``first_free``). None where
        that cannot be read (then the work area alone decides)."""
        x11 = _x11()
        if x11 is None:
            return None
        try:
            bands = x11.bands(int(self.window.winId()), self.edge, self.since)
        except Exception as exc:  # noqa: BLE001 - the work area is still a fair guess
            log.info("cannot read the other docks' struts: %s", exc)
            return None
        if bands is None:
            return None
        scale = screen.devicePixelRatio()
        root, full = screen.virtualGeometry(), screen.geometry()
        span = (round(area.left() * scale), round((area.left() + area.width()) * scale) - 1)
        depth = round(height * scale)
        if self.edge == "top":
            base = round((full.top() - root.top()) * scale)
            return round(first_free(bands, span, base, depth) / scale) + root.top()
        root_end = root.top() + root.height()
        base = round((root_end - full.top() - full.height()) * scale)
        return root_end - round((first_free(bands, span, base, depth) + depth) / scale)

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
            x11.set(window_id, MARK, x11.CARDINAL, [self.since])
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

    def _watch_root(self) -> None:
        """Follow panels and other bars that come and go (X11 only)."""
        if self._root_watch is not None:
            return
        x11 = _x11()
        if x11 is None:
            return
        try:
            self._root_watch = _RootWatch.get(x11)
        except Exception as exc:  # noqa: BLE001 - the work area's signal is still there
            log.info("cannot watch the window manager's client list: %s", exc)
            return
        self._root_watch.changed.connect(self._screen_changed)

    def _follow_window_screen(self) -> None:
        """Re-dock when the window system moves the window to another screen
        (its native window exists only once it is created or shown)."""
        handle = self.window.windowHandle()
        if handle is None or handle is self._window_handle:
            return
        self._window_handle = handle
        handle.screenChanged.connect(self._window_screen_changed)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
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
