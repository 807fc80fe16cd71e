"""The ICCCM urgency hint, which Qt does not set.

``QApplication.alert`` asks an EWMH window manager for attention with
``_NET_WM_STATE_DEMANDS_ATTENTION``; window managers and task bars that go
by the ICCCM (and many that do both) look at the ``UrgencyHint`` flag of
``WM_HINTS`` instead (ICCCM 4.1.2.4). ``alert`` here does both, and
clears the flag when the window is activated, as the ICCCM asks of the
client. Only on X11 (Qt's xcb platform); elsewhere it is Qt's alert alone.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QWidget

from elvin.qt.dock import _x11

__all__ = ["URGENCY_HINT", "alert", "set_urgency"]

log = logging.getLogger("elvin.qt")

#: the ICCCM's XUrgencyHint bit of WM_HINTS' flags
URGENCY_HINT = 1 << 8
#: the predefined atom WM_HINTS, which is also the property's type
_WM_HINTS_TYPE = 35


def set_urgency(window: QWidget, urgent: bool) -> bool:
    """Set or clear the urgency flag of ``window``'s WM_HINTS; False where
    it cannot be (not X11, no native window)."""
    x11 = _x11()
    if x11 is None:
        return False
    try:
        window_id = int(window.winId())
        hints = x11.cardinals(window_id, "WM_HINTS")
        hints = (hints + [0] * 9)[:9]
        hints[0] = hints[0] | URGENCY_HINT if urgent else hints[0] & ~URGENCY_HINT
        x11.set(window_id, "WM_HINTS", _WM_HINTS_TYPE, hints)
        x11.flush()
    except Exception as exc:  # noqa: BLE001 - Qt's own alert still went out
        log.info("cannot set the urgency hint: %s", exc)
        return False
    return True


class _ClearOnActivate(QObject):
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.WindowActivate and isinstance(watched, QWidget):
            set_urgency(watched, False)
            watched.removeEventFilter(self)
            self.deleteLater()
        return False


def alert(window: QWidget) -> None:
    """Ask for the user's attention until ``window`` is activated."""
    QApplication.alert(window)
    if not window.isActiveWindow() and set_urgency(window, True):
        clearer = _ClearOnActivate(window)
        window.installEventFilter(clearer)
