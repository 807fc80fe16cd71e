"""The tray icon: the cup with a badge counting the drinkers.

Only where a system tray exists (``QSystemTrayIcon.isSystemTrayAvailable()``);
headless or on desktops without one the window alone does the job, so
nothing here is required for the app to work.
"""

from __future__ import annotations

from elvin_apps.biff.cup import cup_icon
from elvin_apps.biff.qtbiff import QtBiff
from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon, QWidget

__all__ = ["CoffeeTray", "make_tray"]


class CoffeeTray(QObject):
    """Mirrors the biff: badge = count, tooltip = who; clicking shows the
    window; the menu toggles your coffee and quits."""

    def __init__(self, qbiff: QtBiff, window: QWidget, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.qbiff = qbiff
        self.window = window
        self.icon = QSystemTrayIcon(self)
        menu = QMenu(window)
        self.toggle = QAction("I'm having a coffee", menu, checkable=True)
        self.toggle.triggered.connect(lambda checked: qbiff.setActive(checked))
        menu.addAction(self.toggle)
        menu.addAction("Show window", self._show)
        menu.addSeparator()
        menu.addAction("Quit", window.close)
        self.icon.setContextMenu(menu)
        self.icon.activated.connect(self._activated)
        qbiff.changed.connect(self.refresh)
        self.refresh()
        self.icon.show()

    def refresh(self) -> None:
        biff = self.qbiff.biff
        self.icon.setIcon(cup_icon(full=biff.is_active, steam=biff.count > 0, count=biff.count))
        self.icon.setToolTip(biff.summary())
        self.toggle.setChecked(biff.is_active)

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger,
                      QSystemTrayIcon.ActivationReason.DoubleClick):
            self._show()

    def _show(self) -> None:
        self.window.showNormal()
        self.window.raise_()
        self.window.activateWindow()


def make_tray(qbiff: QtBiff, window: QWidget) -> CoffeeTray | None:
    """A tray icon if the desktop has a tray, else None."""
    if not QSystemTrayIcon.isSystemTrayAvailable():
        return None
    return CoffeeTray(qbiff, window, window)
