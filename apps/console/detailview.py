"""The detail of one received notification, diffed against the previous.

Every attribute is listed with its Elvin type and its full value in the ec
notation (so ``1`` and ``1L`` are told apart), and with how it differs from
the previous notification shown in the table: added (green), changed
(amber, with the old value), unchanged (plain) and, at the end, removed
(grey, struck through). "Copy as ec" puts the notification on the
clipboard in a form ``ep`` sends as is.
"""

from __future__ import annotations

from elvin_apps.console.diff import ADDED, CHANGED, REMOVED, diff_notifications
from elvin_apps.console.received import Received, timestamp
from elvin_apps.console.typed import type_name
from PySide6.QtGui import QBrush, QColor, QFont, QGuiApplication
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from elvin.qt import flat_table, monospace_font
from elvin.text import format_notification, format_value

__all__ = ["DetailView"]

_COLOURS = {ADDED: QColor("#e8f5e9"), CHANGED: QColor("#fff3e0"), REMOVED: QColor("#f5f5f5")}
_LABELS = {ADDED: "added", CHANGED: "changed", REMOVED: "removed", "same": ""}


def _value_text(value) -> str:
    text = format_value(value)
    return text if len(text) <= 2000 else text[:1999] + "…"


class DetailView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.header = QLabel("Select a notification to see all its values.")
        self.header.setWordWrap(True)
        self.copy_button = QPushButton("Copy as ec")
        self.copy_button.setToolTip("Copy this notification in ec/ep text form")
        self.copy_button.setEnabled(False)
        self.copy_button.clicked.connect(self.copy)
        self.explain_button = QPushButton("Explain…")
        self.explain_button.setToolTip("Why does the pane's subscription match this "
                                       "notification (or would another not)? Clause by clause")
        self.explain_button.setEnabled(False)
        self.tree = QTreeWidget()
        fit, stretch = QHeaderView.ResizeMode.ResizeToContents, QHeaderView.ResizeMode.Stretch
        # Value and Previous share the width: a long previous value sized to
        # its contents pushed the column off to the right (a scroll bar in Browse)
        flat_table(self.tree, ["Attribute", "Type", "Value", "Previous"],
                   [fit, fit, stretch, stretch])
        self._mono = monospace_font()
        top = QHBoxLayout()
        top.addWidget(self.header, 1)
        top.addWidget(self.explain_button)
        top.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.tree, 1)
        self.tree.setMinimumHeight(40)     # room for the console on a 1024x768 screen
        self.record: Received | None = None
        self.previous: Received | None = None

    def show_record(self, record: Received | None, previous: Received | None,
                    same: str = "") -> None:
        """``same`` says what ``previous`` shares with ``record`` (e.g.
        ``Symbol ACME``) when it is not simply the row above."""
        self.record, self.previous = record, previous
        self.tree.clear()
        self.copy_button.setEnabled(record is not None)
        self.explain_button.setEnabled(record is not None)
        if record is None:
            self.header.setText("Select a notification to see all its values.")
            return
        secure = "secure match (keys)" if record.secure else "insecure match"
        if previous is not None:
            against = f"compared with #{previous.seq}" + \
                (f", the previous one of {same}" if same else "")
        else:
            against = f"the first of {same}" if same else \
                "no previous notification to compare with"
        self.header.setText(f"<b>#{record.seq}</b> at {timestamp(record.time, True)}, "
                            f"{len(record.attributes)} attributes, {secure}; {against}")
        items = []
        for change in diff_notifications(previous.attributes if previous else None,
                                         record.attributes):
            value = change.new if change.kind != REMOVED else change.old
            item = QTreeWidgetItem([
                change.name, type_name(value), _value_text(value),
                "" if change.kind == "same" or previous is None else
                (_LABELS[change.kind] if change.kind != CHANGED else
                 f"was {_value_text(change.old)}" +
                 (f" ({type_name(change.old)})"
                  if type_name(change.old) != type_name(change.new) else "")),
            ])
            item.setFont(2, self._mono)
            item.setFont(3, self._mono)
            item.setToolTip(2, _value_text(value))
            if previous is not None and change.kind in _COLOURS:
                for column in range(4):
                    item.setBackground(column, QBrush(_COLOURS[change.kind]))
            if change.kind == REMOVED:
                font = QFont(self._mono)
                font.setStrikeOut(True)
                item.setFont(2, font)
                for column in range(4):
                    item.setForeground(column, QBrush(QColor("#8a8a8a")))
            items.append(item)
        self.tree.addTopLevelItems(items)

    def changes(self) -> dict[str, str]:
        """``{name: "added"/"changed"/"removed"/""}`` as shown (tests)."""
        out = {}
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            text = item.text(3)
            out[item.text(0)] = "changed" if text.startswith("was ") else text
        return out

    def copy(self) -> None:
        if self.record is not None:
            QGuiApplication.clipboard().setText(format_notification(self.record.attributes)
                                                + "\n---\n")
