"""The coffee biff window: a cup to click, who is drinking, how many.

Layout, top to bottom: the cup button beside the count and an optional
"where/when" field; the list of people (those having a coffee, with their
note and for how long, then those around, in grey); a line that says the
list may be out of date while not connected; the connection status (the
router's URL in its tooltip) and the notification settings. The cup is full and steaming while you are having a
coffee, so the button shows your own state at a glance.
"""

from __future__ import annotations

from elvin_apps.biff import protocol
from elvin_apps.biff.cup import cup_icon
from elvin_apps.biff.notify import CoffeeNotifier
from elvin_apps.biff.people import PeopleList
from elvin_apps.biff.qtbiff import QtBiff
from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QFont, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

__all__ = ["CoffeeWindow"]

IDLE_TEXT = "I'm having a coffee"
ACTIVE_TEXT = "Done with my coffee"
STALE_TEXT = "Not connected: this list may be out of date"


class CoffeeWindow(QWidget):
    """The main window. ``closed`` is emitted when the user closes it."""

    closed = Signal()

    def __init__(self, qbiff: QtBiff, status: QWidget | None = None,
                 default_text: str = "", parent: QWidget | None = None, *,
                 notifier: CoffeeNotifier | None = None) -> None:
        super().__init__(parent)
        self.qbiff = qbiff
        self.notifier = notifier
        biff = qbiff.biff
        self.setWindowTitle(f"Coffee biff — {biff.user}")
        self._icons = {full: cup_icon(full=full, steam=full) for full in (False, True)}

        self.cup = QToolButton(self)
        self.cup.setObjectName("cup")
        self.cup.setCheckable(True)
        self.cup.setIconSize(QSize(96, 96))
        self.cup.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextUnderIcon)
        self.cup.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.cup.clicked.connect(self._cup_clicked)

        self.count_label = QLabel(self)
        self.count_label.setObjectName("count")
        big = QFont(self.font())
        big.setPointSizeF(big.pointSizeF() * 2.6)
        big.setBold(True)
        self.count_label.setFont(big)
        self.count_caption = QLabel(self)
        self.count_caption.setObjectName("countCaption")

        self.where = QLineEdit(default_text, self)
        self.where.setObjectName("where")
        self.where.setPlaceholderText("Optional: in 5 minutes at the kitchen")
        self.where.setMaxLength(protocol.MAX_TEXT)
        self.where.setClearButtonEnabled(True)
        self.where.setToolTip("Said next to your name while you have your coffee; "
                              "press Enter to start (or to update it)")
        self.where.returnPressed.connect(self._where_entered)

        self.people = PeopleList(biff, self)
        self.people.setObjectName("people")
        self.people.setMinimumHeight(120)
        self.stale_label = QLabel(STALE_TEXT, self)
        self.stale_label.setObjectName("stale")
        self.stale_label.setStyleSheet("color: #9a6700")
        self.stale_label.hide()

        counts = QHBoxLayout()
        counts.setSpacing(8)
        counts.addWidget(self.count_label, 0, Qt.AlignmentFlag.AlignBaseline)
        counts.addWidget(self.count_caption, 1, Qt.AlignmentFlag.AlignBaseline)
        side = QVBoxLayout()
        side.addStretch(1)
        side.addLayout(counts)
        side.addWidget(self.where)
        side.addStretch(1)
        top = QHBoxLayout()
        top.addWidget(self.cup)
        top.addLayout(side, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.people, 1)
        layout.addWidget(self.stale_label)
        bottom = QHBoxLayout()
        self.status = status
        if status is not None:
            status.setParent(self)
            bottom.addWidget(status, 1)
        else:
            bottom.addStretch(1)
        self.settings_button = QToolButton(self)
        self.settings_button.setText("Notifications")
        self.settings_button.setAutoRaise(True)
        self.settings_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.settings_button)
        self.notify_action = QAction("Tell me when someone starts a coffee", menu,
                                     checkable=True)
        self.sound_action = QAction("With a sound", menu, checkable=True)
        menu.addAction(self.notify_action)
        menu.addAction(self.sound_action)
        self.settings_button.setMenu(menu)
        if notifier is not None:
            self.notify_action.setChecked(notifier.enabled)
            self.sound_action.setChecked(notifier.sound)
            self.notify_action.toggled.connect(self._notify_toggled)
            self.sound_action.toggled.connect(lambda on: setattr(notifier, "sound", on))
            qbiff.started.connect(lambda members: notifier.started(members, biff.render))
            self.sound_action.setEnabled(notifier.enabled)
        else:
            self.settings_button.hide()
        bottom.addWidget(self.settings_button)
        layout.addLayout(bottom)

        QShortcut(QKeySequence.StandardKey.Quit, self, self.close)
        qbiff.changed.connect(self.refresh)
        manager = getattr(qbiff, "manager", None)
        if manager is not None:
            manager.stateChanged.connect(self._connection_state)
            self._connection_state(manager.state)
        self.resize(460, 360)
        self.refresh()

    # -- what is shown ----------------------------------------------------------------
    def refresh(self) -> None:
        """Show the biff's state: own cup, count, list."""
        biff = self.qbiff.biff
        active = biff.is_active
        self.cup.setChecked(active)
        self.cup.setIcon(self._icons[active])
        self.cup.setText(ACTIVE_TEXT if active else IDLE_TEXT)
        self.cup.setToolTip("Click when you have finished" if active else
                            "Click to tell everybody you are having a coffee")
        drinkers = biff.active_members
        count = len(drinkers)
        self.count_label.setText(str(count))
        self.count_label.setEnabled(count > 0)      # a grey 0: nothing to see
        self.count_caption.setText("person having a coffee" if count == 1 else
                                   "people having a coffee")
        self.people.refresh()
        self.setWindowIcon(self._icons[active])

    def _connection_state(self, state: str) -> None:
        stale = state != "connected"
        self.stale_label.setVisible(stale)
        self.people.set_stale(stale)

    def _notify_toggled(self, on: bool) -> None:
        self.notifier.enabled = on
        self.sound_action.setEnabled(on)

    def drinkers_text(self) -> str:
        """The people having a coffee, as one line (tests, tray tooltip)."""
        biff = self.qbiff.biff
        drinkers = biff.active_members
        if not drinkers:
            return biff.empty_text or ""
        return ", ".join(biff.render(m) + (" (you)" if m.local else "") for m in drinkers)

    def count(self) -> int:
        return int(self.count_label.text())

    # -- actions ----------------------------------------------------------------------
    def _cup_clicked(self, checked: bool) -> None:
        self.qbiff.setActive(checked, self.where.text().strip())

    def _where_entered(self) -> None:
        # Enter starts a coffee, or while drinking updates where/when
        self.qbiff.setActive(True, self.where.text().strip())

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt API)
        self.closed.emit()
        super().closeEvent(event)
