"""The typed attribute editor of the producer pane.

One row per attribute: name, type (int32, int64, real64, string, opaque)
and value. Every row is checked as it is edited, per type
(``typed.parse_typed``): a bad cell turns red with the reason as its
tooltip, and the first problem is spelt out under the table
("row 2, Price: 'abc' is not a number"), so the Send button is never the
place where a user learns about a typo. A blank row (no name, no value),
as "Add attribute" makes it, is not an error: it is left out until the
user types into it, and only a grey hint says what to do.
"""

from __future__ import annotations

from elvin_apps.console.typed import (
    TYPES,
    TypedValueError,
    check_attribute_name,
    parse_typed,
    type_name,
    value_text,
)
from elvin_apps.console.workspace import AttributeSpec
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from elvin.qt import monospace_font
from elvin.values import Value

__all__ = ["AttributeTable"]

_BAD = QBrush(QColor("#ffebee"))
_GOOD = QBrush()
NAME, TYPE, VALUE = 0, 1, 2


class AttributeTable(QWidget):
    """Edits a list of typed attributes. ``changed`` fires on every edit."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.table = QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["Name", "Type", "Value"])
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(
            QComboBox().sizeHint().height() + 2)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.AllEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(NAME, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(TYPE, QHeaderView.ResizeMode.Fixed)
        header.setSectionResizeMode(VALUE, QHeaderView.ResizeMode.Stretch)
        header.resizeSection(NAME, 160)
        header.resizeSection(TYPE, 90)
        self.table.itemChanged.connect(self._item_changed)
        self._mono = monospace_font()
        self.add_button = QPushButton("Add attribute")
        self.add_button.clicked.connect(lambda: self.add_row(focus=True))
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Remove the selected attribute(s)")
        self.remove_button.clicked.connect(self.remove_selected)
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #c62828;")
        self.error_label.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        self._buttons = buttons
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.error_label)
        layout.addLayout(buttons)
        self._updating = False
        self._errors: list[str] = []
        self.validate()

    @property
    def button_row(self) -> QHBoxLayout:
        """The row of buttons under the table (the pane adds its own)."""
        return self._buttons

    # -- rows --------------------------------------------------------------------------
    def add_row(self, name: str = "", kind: str = "string", value: str = "",
                focus: bool = False) -> int:
        self._updating = True
        row = self.table.rowCount()
        self.table.insertRow(row)
        self.table.setItem(row, NAME, QTableWidgetItem(name))
        combo = QComboBox()
        combo.addItems(TYPES)
        combo.setCurrentText(kind if kind in TYPES else "string")
        combo.currentTextChanged.connect(lambda _text: self.validate())
        holder = QTableWidgetItem()      # under the combo: never opens a text editor
        holder.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
        self.table.setItem(row, TYPE, holder)
        self.table.setCellWidget(row, TYPE, combo)
        item = QTableWidgetItem(value)
        item.setFont(self._mono)
        self.table.setItem(row, VALUE, item)
        self._updating = False
        self.validate()
        if focus:
            self.table.setFocus(Qt.FocusReason.OtherFocusReason)
            self.table.setCurrentCell(row, NAME)
            self.table.scrollToItem(self.table.item(row, NAME))
            self.table.editItem(self.table.item(row, NAME))
        return row

    def remove_selected(self) -> None:
        rows = sorted({index.row() for index in self.table.selectedIndexes()}, reverse=True)
        if not rows and self.table.currentRow() >= 0:
            rows = [self.table.currentRow()]
        for row in rows:
            self.table.removeRow(row)
        self.validate()

    def clear(self) -> None:
        self.table.setRowCount(0)
        self.validate()

    def row_count(self) -> int:
        return self.table.rowCount()

    def set_cell(self, row: int, name: str | None = None, kind: str | None = None,
                 value: str | None = None) -> None:
        """Change a row programmatically (tests, loading)."""
        if name is not None:
            self.table.item(row, NAME).setText(name)
        if kind is not None:
            self.table.cellWidget(row, TYPE).setCurrentText(kind)
        if value is not None:
            self.table.item(row, VALUE).setText(value)

    def _row(self, row: int) -> AttributeSpec:
        name_item = self.table.item(row, NAME)
        value_item = self.table.item(row, VALUE)
        combo = self.table.cellWidget(row, TYPE)
        return AttributeSpec(name_item.text() if name_item else "",
                             combo.currentText() if isinstance(combo, QComboBox)
                             else "string",
                             value_item.text() if value_item else "")

    # -- whole notification -----------------------------------------------------------
    def attributes(self) -> list[AttributeSpec]:
        """The rows, without blank ones (a row being added)."""
        return [spec for spec in (self._row(row) for row in range(self.table.rowCount()))
                if not _blank(spec)]

    def set_attributes(self, attributes: list[AttributeSpec]) -> None:
        self._updating = True
        self.table.setRowCount(0)
        self._updating = False
        for attribute in attributes:
            self.add_row(attribute.name, attribute.type, attribute.value)
        self.validate()

    def set_notification(self, notification: dict[str, Value]) -> None:
        self.set_attributes([AttributeSpec(name, type_name(value), value_text(value))
                             for name, value in notification.items()])

    def notification(self) -> dict[str, Value]:
        """The notification, or TypedValueError with the first problem."""
        if self._errors:
            raise TypedValueError(self._errors[0])
        return {spec.name: parse_typed(spec.type, spec.value) for spec in self.attributes()}

    def errors(self) -> list[str]:
        return list(self._errors)

    def is_valid(self) -> bool:
        return not self._errors

    # -- checking ------------------------------------------------------------------------
    def _item_changed(self, _item: QTableWidgetItem) -> None:
        if not self._updating:
            self.validate()

    def validate(self) -> bool:
        errors: list[str] = []
        seen: dict[str, int] = {}
        blank = filled = 0
        self._updating = True
        try:
            for row in range(self.table.rowCount()):
                spec = self._row(row)
                if _blank(spec):                 # being added: not an error yet
                    blank += 1
                    self._mark(row, NAME, "")
                    self._mark(row, VALUE, "")
                    continue
                filled += 1
                label = f"row {row + 1}" + (f", {spec.name}" if spec.name.strip() else "")
                name_error = value_error = ""
                try:
                    check_attribute_name(spec.name)
                    if spec.name in seen:
                        raise TypedValueError(f"{spec.name!r} is already used in row "
                                              f"{seen[spec.name] + 1}")
                    seen[spec.name] = row
                except TypedValueError as exc:
                    name_error = str(exc)
                    errors.append(f"{label}: {exc}")
                try:
                    parse_typed(spec.type, spec.value)
                except TypedValueError as exc:
                    value_error = str(exc)
                    errors.append(f"{label}: {exc}")
                self._mark(row, NAME, name_error)
                self._mark(row, VALUE, value_error)
        finally:
            self._updating = False
        hint = ""
        if not filled and blank:
            hint = "Type the new attribute's name, choose its type and give its value."
            errors.append("the new attribute has no name yet")
        elif not filled:
            errors.append("Add at least one attribute: a notification cannot be empty.")
        self._errors = errors
        shown = hint or (errors[0] if errors else "")
        if len(errors) > 1 and not hint:
            shown += f" (and {len(errors) - 1} more)"
        self.error_label.setText(shown)
        self.error_label.setStyleSheet("color: #757575;" if hint else "color: #c62828;")
        self.error_label.setVisible(bool(shown))
        self.changed.emit()
        return not errors

    def _mark(self, row: int, column: int, error: str) -> None:
        item = self.table.item(row, column)
        if item is None:
            return
        item.setBackground(_BAD if error else _GOOD)
        item.setToolTip(error)

    def focus_first_error(self) -> None:
        for row in range(self.table.rowCount()):
            for column in (NAME, VALUE):
                item = self.table.item(row, column)
                if item is not None and item.toolTip():
                    self.table.setCurrentCell(row, column)
                    return

    def names(self) -> list[str]:
        return [spec.name for spec in self.attributes() if spec.name.strip()]



def _blank(spec: AttributeSpec) -> bool:
    return not spec.name.strip() and not spec.value
