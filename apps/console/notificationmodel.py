"""The live table of a consumer pane: a bounded model fed in batches.

Deliveries arrive in the subscription listener, possibly 10,000 a second.
Each costs one small record appended to a bounded ``deque`` (``enqueue``);
a timer calls ``flush`` a few times a second, which moves the batch into
the ring of rows with one ``beginRemoveRows`` for the oldest rows that no
longer fit and one ``beginInsertRows`` for the new ones. The view is told
about changes ~10 times a second whatever the traffic, and memory is
bounded by ``capacity`` rows plus at most ``capacity`` waiting records.

Pausing simply stops the flushing: deliveries keep collecting in the
waiting queue (still bounded: the oldest are dropped and counted), and
resuming shows them. ``dropped`` counts every record lost to either bound.

``NotificationFilter`` is the text/regex filter over received rows: it
searches the ec text of each notification (names and values).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from elvin_apps.console.received import Received, display_value, timestamp
from elvin_apps.console.ringbuffer import RingBuffer
from elvin_apps.console.typed import type_name
from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QBrush, QColor, QFont

from elvin.values import Value

__all__ = ["NotificationTableModel", "NotificationFilter", "RECORD_ROLE"]

RECORD_ROLE = Qt.ItemDataRole.UserRole + 1
_SECURE_BRUSH = QBrush(QColor("#2e7d32"))
_DIM_BRUSH = QBrush(QColor("#8a8a8a"))
_MISSING_BRUSH = QBrush(QColor("#b0b0b0"))
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_LEFT = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
_BOLD = QFont()
_BOLD.setBold(True)
_DISPLAY = int(Qt.ItemDataRole.DisplayRole)
_FOREGROUND = int(Qt.ItemDataRole.ForegroundRole)
_ALIGNMENT = int(Qt.ItemDataRole.TextAlignmentRole)
_FONT = int(Qt.ItemDataRole.FontRole)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole)
_ROLES = frozenset({_DISPLAY, _FOREGROUND, _ALIGNMENT, _FONT, _TOOLTIP, int(RECORD_ROLE)})

Index = QModelIndex | QPersistentModelIndex


class NotificationTableModel(QAbstractTableModel):
    """Rows of :class:`Received`, oldest first. Columns: ``#``, time,
    secure flag, the attribute columns the user chose, then a summary of
    all attributes."""

    FIXED = ("#", "Time", "Secure")

    def __init__(self, capacity: int = 10_000, parent=None) -> None:
        super().__init__(parent)
        self._rows: RingBuffer[Received] = RingBuffer(capacity)
        self._waiting: deque[Received] = deque()
        self._columns: list[str] = []
        self.paused = False
        self.dropped = 0
        self.received = 0
        self.on_flush: Callable[[list[Received]], object] | None = None

    # -- feeding (hot path) ----------------------------------------------------------
    def enqueue(self, attributes: dict[str, Value], secure: bool) -> None:
        """Called for every delivery: O(1), no Qt signal."""
        self.received += 1
        waiting = self._waiting
        if len(waiting) >= self._rows.capacity:
            waiting.popleft()
            self.dropped += 1
        waiting.append(Received(self.received, time.time(), attributes, secure))

    def add_rows(self, rows: Iterable[Received]) -> None:
        """Queue ready-made rows (tests, imports) for the next flush."""
        for row in rows:
            self.received += 1
            if len(self._waiting) >= self._rows.capacity:
                self._waiting.popleft()
                self.dropped += 1
            self._waiting.append(row)

    def flush(self) -> int:
        """Show what arrived since the last flush (unless paused); returns
        the number of rows added."""
        if self.paused or not self._waiting:
            return 0
        batch = list(self._waiting)
        self._waiting.clear()
        rows = self._rows
        capacity = rows.capacity
        if len(batch) > capacity:
            self.dropped += len(batch) - capacity
            batch = batch[-capacity:]
        overflow = len(rows) + len(batch) - capacity
        if overflow > 0:
            self.beginRemoveRows(QModelIndex(), 0, overflow - 1)
            rows.drop_oldest(overflow)
            self.endRemoveRows()
            self.dropped += overflow
        first = len(rows)
        self.beginInsertRows(QModelIndex(), first, first + len(batch) - 1)
        rows.extend(batch)
        self.endInsertRows()
        if self.on_flush is not None:
            self.on_flush(batch)
        return len(batch)

    # -- state -------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return self._rows.capacity

    def set_capacity(self, capacity: int) -> None:
        """Keep at most ``capacity`` rows from now on (the newest are kept)."""
        if capacity == self._rows.capacity:
            return
        self.beginResetModel()
        self.dropped += self._rows.resize(capacity)
        while len(self._waiting) > capacity:
            self._waiting.popleft()
            self.dropped += 1
        self.endResetModel()

    @property
    def waiting(self) -> int:
        """Deliveries not yet shown (buffered while paused, or until the next flush)."""
        return len(self._waiting)

    def clear(self) -> None:
        self.beginResetModel()
        self._rows.clear()
        self._waiting.clear()
        self.dropped = 0
        self.endResetModel()

    def record(self, row: int) -> Received:
        return self._rows[row]

    def rows(self) -> Sequence[Received]:
        """The rows, oldest first, without a copy (indexable, sized)."""
        return self._rows

    def records(self) -> list[Received]:
        return list(self._rows)

    def columns(self) -> list[str]:
        return list(self._columns)

    def set_columns(self, names: Iterable[str]) -> None:
        names = list(dict.fromkeys(names))
        if names == self._columns:
            return
        self.beginResetModel()
        self._columns = names
        self.endResetModel()

    def column_name(self, column: int) -> str:
        """The attribute shown in ``column`` ("" for the fixed ones)."""
        index = column - len(self.FIXED)
        return self._columns[index] if 0 <= index < len(self._columns) else ""

    @property
    def summary_column(self) -> int:
        return len(self.FIXED) + len(self._columns)

    # -- QAbstractTableModel -----------------------------------------------------------
    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.FIXED) + len(self._columns) + 1

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            if section < len(self.FIXED):
                return self.FIXED[section]
            if section == self.summary_column:
                return "Attributes"
            return self.column_name(section)
        if role == Qt.ItemDataRole.ToolTipRole:
            if section == 2:
                return "yes: the notification matched with keys (a secure match)"
            if section == self.summary_column:
                return "every attribute, typed as ec prints it (\"text\", 42, 42L, 1.5, [hex])"
            if section >= len(self.FIXED):
                return f"attribute {self.column_name(section)!r}"
        return None

    def data(self, index: Index, role: int = _DISPLAY):
        # called for every role of every visible cell at each repaint: roles
        # this model does not use are answered before any other work
        if role not in _ROLES or not index.isValid():
            return None
        row = self._rows[index.row()]
        column = index.column()
        if role == _DISPLAY:
            if column == 0:
                return str(row.seq)
            if column == 1:
                return timestamp(row.time)
            if column == 2:
                return "yes" if row.secure else "no"
            if column == self.summary_column:
                return row.summary()
            value = row.attributes.get(self.column_name(column))
            return "—" if value is None else display_value(value)
        if role == RECORD_ROLE:
            return row
        fixed = len(self.FIXED)
        if role == _FOREGROUND:
            if column == 2:
                return _SECURE_BRUSH if row.secure else _DIM_BRUSH
            if column < 2:
                return _DIM_BRUSH
            if fixed <= column < self.summary_column and \
                    self.column_name(column) not in row.attributes:
                return _MISSING_BRUSH
            return None
        if role == _ALIGNMENT:
            if column == 0:
                return _RIGHT
            if fixed <= column < self.summary_column:
                value = row.attributes.get(self.column_name(column))
                if isinstance(value, (int, float)):
                    return _RIGHT
            return _LEFT
        if role == _FONT:
            return _BOLD if column == 2 and row.secure else None
        if role == _TOOLTIP and fixed <= column:
            if column == self.summary_column:
                return row.text()
            name = self.column_name(column)
            if name in row.attributes:
                value = row.attributes[name]
                return f"{name}: {type_name(value)}"
            return f"{name}: not in this notification"
        return None


class NotificationFilter(QSortFilterProxyModel):
    """Shows the rows whose ec text contains the filter text (case
    insensitive) or matches the regular expression."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._match: Callable[[str], object] | None = None
        self.pattern = ""
        self.regex = False
        self.setDynamicSortFilter(False)

    def set_filter(self, pattern: str, regex: bool = False) -> str:
        """Apply a filter; returns an error message ("" when fine). A bad
        regular expression leaves the previous filter in place."""
        if not pattern:
            match = None
        elif regex:
            try:
                match = re.compile(pattern, re.IGNORECASE).search
            except re.error as exc:
                where = f" at position {exc.pos + 1}" if exc.pos is not None else ""
                return f"bad regular expression{where}: {exc.msg}"
        else:
            needle = pattern.casefold()
            match = lambda text: needle in text.casefold()  # noqa: E731
        if hasattr(self, "beginFilterChange"):      # Qt >= 6.9: the non-deprecated way
            self.beginFilterChange()
            self.pattern, self.regex, self._match = pattern, regex, match
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self.pattern, self.regex, self._match = pattern, regex, match
            self.invalidateRowsFilter()
        return ""

    @property
    def active(self) -> bool:
        return self._match is not None

    def accepts(self, record: Received) -> bool:
        """Would this record be shown? (the plot follows the filter)"""
        match = self._match
        return match is None or bool(match(record.text()))

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        match = self._match
        if match is None:
            return True
        record = self.sourceModel().record(source_row)
        return bool(match(record.text()))
