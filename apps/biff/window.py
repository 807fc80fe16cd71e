"""The coffee biff window: a cup to click, who is drinking, how many.

Layout, top to bottom: the cup button beside the count and an optional
"where/when" field; the one-line scrolling list of drinkers; the
connection status. The cup is full and steaming while you are having a
coffee, so the button shows your own state at a glance.
"""

from __future__ import annotations

from elvin_apps.biff import protocol
from elvin_apps.biff.cup import cup_icon
from elvin_apps.biff.marquee import Marquee
from elvin_apps.biff.qtbiff import QtBiff
from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent, QFont, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

__all__ = ["CoffeeWindow"]

IDLE_TEXT = "I'm having a coffee"
ACTIVE_TEXT = "Done with my coffee"


class CoffeeWindow(QWidget):
    """The main window. ``closed`` is emitted when the user closes it."""

    closed = Signal()

    def __init__(self, qbiff: QtBiff, status: QWidget | None = None,
                 default_text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.qbiff = qbiff
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

        self.marquee = Marquee(self, biff.empty_text or "")
        self.marquee.setObjectName("drinkers")
        frame = QFrame(self)
        frame.setFrameShape(QFrame.Shape.StyledPanel)
        frame.setFrameShadow(QFrame.Shadow.Sunken)
        frame_layout = QHBoxLayout(frame)
        frame_layout.setContentsMargins(2, 2, 2, 2)
        frame_layout.addWidget(self.marquee)

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
        layout.addWidget(frame)
        self.status = status
        if status is not None:
            status.setParent(self)
            layout.addWidget(status)

        QShortcut(QKeySequence.StandardKey.Quit, self, self.close)
        qbiff.changed.connect(self.refresh)
        self.resize(460, 0)
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
        self.marquee.setItems([biff.render(m) + (" (you)" if m.local else "")
                               for m in drinkers])
        self.setWindowIcon(self._icons[active])

    def drinkers_text(self) -> str:
        """The list line as shown (for tests and accessibility)."""
        return self.marquee.text()

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
