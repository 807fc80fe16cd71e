"""Mentions: spotting messages for the user and telling them on the desktop.

A message mentions the user when its text names them as a word (the part of
``user@host`` before the ``@``, any case) or when it is sent to the group
named after them (the usual way to message one person). The tray icon and
its balloon are used only when ``QSystemTrayIcon.isSystemTrayAvailable()``;
without a tray (headless, some desktops) the scroller's highlight and the
window alert are all there is, and nothing else changes.
"""

from __future__ import annotations

import re

from elvin_apps.tickertape.groups import fold
from elvin_apps.tickertape.message import Message
from elvin_apps.tickertape.qtcompat import emit
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QApplication, QMenu, QSystemTrayIcon, QWidget


class MentionMatcher:
    """Decides whether a message is addressed to ``user``."""

    def __init__(self, user: str) -> None:
        self.user = user
        local = user.split("@", 1)[0].strip()
        self.local = local
        self._pattern = (re.compile(r"(?<!\w)@?" + re.escape(local) + r"(?!\w)", re.IGNORECASE)
                         if len(local) >= 2 else None)

    def __call__(self, message: Message) -> bool:
        if message.sender == self.user:
            return False
        if self.local and fold(message.group) == fold(self.local):
            return True
        return bool(self._pattern and self._pattern.search(message.text))


def app_icon(colour: str = "#4fc3f7") -> QIcon:
    """A simple drawn icon (no image files to ship): a ticker band."""
    pixmap = QPixmap(64, 64)
    pixmap.fill(QColor(0, 0, 0, 0))
    p = QPainter(pixmap)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setBrush(QColor("#1d1f21"))
    p.setPen(QColor("#555"))
    p.drawRoundedRect(2, 14, 60, 36, 8, 8)
    p.setBrush(QColor(colour))
    p.setPen(QColor(0, 0, 0, 0))
    p.drawRoundedRect(8, 24, 18, 16, 6, 6)
    p.setBrush(QColor("#e6e6e6"))
    p.drawRect(30, 29, 26, 6)
    p.end()
    return QIcon(pixmap)


class Notifier(QObject):
    """Tray icon (when there is a tray) and mention notifications.

    Signals: ``activated()`` when the user clicks the tray icon or balloon.
    ``notified`` counts notifications for tests and status.
    """

    activated = Signal()

    def __init__(self, window: QWidget | None = None, *, enabled: bool = True,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.window = window
        self.enabled = enabled
        self.notified = 0
        self.tray: QSystemTrayIcon | None = None
        if QSystemTrayIcon.isSystemTrayAvailable():
            self.tray = QSystemTrayIcon(app_icon(), self)
            self.tray.setToolTip("Tickertape")
            self.tray.activated.connect(lambda _reason: emit(self.activated))
            self.tray.messageClicked.connect(lambda: emit(self.activated))
            self.menu = QMenu()
            quit_action = QAction("Quit", self.menu)
            quit_action.triggered.connect(QApplication.quit)
            self.menu.addAction(quit_action)
            self.tray.setContextMenu(self.menu)
            self.tray.show()

    @property
    def has_tray(self) -> bool:
        return self.tray is not None

    def notify(self, message: Message) -> None:
        """Tell the user about a message that mentions them."""
        if not self.enabled:
            return
        self.notified += 1
        if self.tray is not None and self.tray.supportsMessages():
            self.tray.showMessage(f"{message.sender} in {message.group}", message.text[:300],
                                  QSystemTrayIcon.MessageIcon.Information, 8000)
        if self.window is not None:
            QApplication.alert(self.window, 0)
