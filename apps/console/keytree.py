"""The per-key tree of a consumer pane (MQTT Explorer's topic tree, by key).

One row per value of the key attribute, in order of first appearance:
the value, how many notifications had it, and the latest one in brief
(when it came in the tooltip); expanding a row lists the latest value of
each attribute with its type. Rows are updated from ``KeyIndex`` after each flush of the
table, only for the key values that changed.
"""

from __future__ import annotations

from elvin_apps.console.keyindex import KeyIndex
from elvin_apps.console.received import Received, display_value, timestamp
from elvin_apps.console.typed import type_name
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

__all__ = ["KeyTree"]

KEY_ROLE = Qt.ItemDataRole.UserRole + 3
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


class KeyTree(QTreeWidget):
    """``keyActivated(value)`` when the user picks a key value."""

    keyActivated = Signal(str)

    def __init__(self, index: KeyIndex, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.index = index
        self.items: dict[str, QTreeWidgetItem] = {}
        self.setColumnCount(3)
        self.setHeaderLabels(["Key", "Count", "Latest values"])
        self.setUniformRowHeights(True)
        self.setAlternatingRowColors(True)
        header = self.header()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        for column, width in enumerate((110, 56)):
            header.resizeSection(column, width)
        self.itemExpanded.connect(self._fill_children)
        self.currentItemChanged.connect(self._current_changed)
        self.setMinimumWidth(220)

    def rebuild(self) -> None:
        self.clear()
        self.items.clear()
        self.update_keys(self.index.values())
        key = self.index.key
        self.headerItem().setText(0, key or "Key")

    def update_keys(self, values) -> None:
        """Refresh the rows of these key values (new ones are appended)."""
        stats = self.index.stats
        new = []
        for value in values:
            entry = stats.get(value)
            if entry is None:
                continue
            item = self.items.get(value)
            if item is None:
                item = QTreeWidgetItem([value])
                item.setData(0, KEY_ROLE, value)
                item.setTextAlignment(1, _RIGHT)
                item.setChildIndicatorPolicy(
                    QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator)
                self.items[value] = item
                new.append(item)
            latest = entry.latest
            item.setText(1, f"{entry.count:,}")
            item.setText(2, latest.summary(160))
            item.setToolTip(2, f"#{latest.seq} at {timestamp(latest.time)}\n{latest.text()}")
            if item.isExpanded():
                self._fill_children(item)
        if new:
            self.addTopLevelItems(new)
        if self.index.overflow:       # a key with too many values (a sequence number?)
            header = self.headerItem()
            header.setText(0, f"{self.index.key} (first {self.index.limit:,})")
            header.setToolTip(0, f"{self.index.overflow:,} notifications had other values "
                                 "of the key and are not in the tree")

    def _fill_children(self, item: QTreeWidgetItem) -> None:
        entry = self.index.stats.get(item.data(0, KEY_ROLE))
        if entry is None:
            return
        record: Received = entry.latest
        item.takeChildren()
        for name, value in record.attributes.items():
            child = QTreeWidgetItem([name, type_name(value), display_value(value)])
            child.setToolTip(2, display_value(value))
            item.addChild(child)

    def _current_changed(self, current: QTreeWidgetItem | None, _previous) -> None:
        if current is None:
            return
        while current.parent() is not None:
            current = current.parent()
        self.keyActivated.emit(current.data(0, KEY_ROLE))

    def row_texts(self) -> dict[str, tuple[str, str]]:
        """``{key value: (count, latest summary)}`` as shown (tests)."""
        return {value: (item.text(1), item.text(2)) for value, item in self.items.items()}
