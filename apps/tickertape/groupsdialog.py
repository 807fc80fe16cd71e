"""The group editor: the user's groups, the known groups, the extra subscription.

Edits happen on a copy; ``result()`` gives the new list only when every row is
valid, and an invalid row is pointed out by name instead of being dropped, so
nothing the user typed is lost.
"""

from __future__ import annotations

from collections.abc import Callable

from elvin_apps.tickertape.groups import (
    DEFAULT_MAX_TIME,
    DEFAULT_MIN_TIME,
    Group,
    GroupError,
    GroupList,
    fold,
)
from elvin_apps.tickertape.palette import Palette, hash_colour
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QColorDialog,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from elvin.qt import dialog_buttons

COLUMNS = ("Group", "Subscribe", "Min s", "Max s", "Key (private)", "Colour")


class GroupsDialog(QDialog):
    """Tabs: "My groups" (editable table), "Known groups" (from quench),
    "Advanced" (extra subscription)."""

    def __init__(self, groups: GroupList, *, extra: str = "",
                 known: Callable[[], dict[str, int]] | None = None,
                 known_note: Callable[[], str | None] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Groups")
        self.resize(640, 380)
        self._known = known or (lambda: {})
        # why there is no list (e.g. the router has no quench), shown instead of it
        self._known_note = known_note or (lambda: None)
        self._palette = Palette(groups)  # "auto" shows the colour really in use

        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for group in groups:
            self.add_row(group)
        add = QPushButton("&Add", self)
        add.clicked.connect(lambda: self._add_new())
        remove = QPushButton("&Remove", self)
        remove.clicked.connect(self._remove_selected)
        row_buttons = QHBoxLayout()
        row_buttons.addWidget(add)
        row_buttons.addWidget(remove)
        row_buttons.addStretch(1)
        mine = QWidget(self)
        mine_layout = QVBoxLayout(mine)
        mine_layout.addWidget(self.table)
        mine_layout.addLayout(row_buttons)

        self.known_list = QListWidget(self)
        self.known_list.itemDoubleClicked.connect(lambda item: self._add_known(item))
        refresh = QPushButton("Re&fresh", self)
        refresh.clicked.connect(self.refresh_known)
        add_known = QPushButton("Add &selected", self)
        add_known.clicked.connect(lambda: [self._add_known(i)
                                           for i in self.known_list.selectedItems()])
        known_buttons = QHBoxLayout()
        known_buttons.addWidget(refresh)
        known_buttons.addWidget(add_known)
        known_buttons.addStretch(1)
        self.add_known_button = add_known
        known_tab = QWidget(self)
        known_layout = QVBoxLayout(known_tab)
        known_layout.addWidget(QLabel("Groups people on this router subscribe to "
                                      "(number of subscriptions):", known_tab))
        self.known_note_label = QLabel(known_tab)
        self.known_note_label.setWordWrap(True)
        self.known_note_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.known_note_label.setStyleSheet(
            "QLabel { background: palette(base); border: 1px solid palette(mid); "
            "padding: 24px; color: #5f6368; }")
        known_layout.addWidget(self.known_note_label, 1)
        known_layout.addWidget(self.known_list, 1)
        known_layout.addLayout(known_buttons)

        self.extra_edit = _subscription_editor(self, extra)
        advanced = QWidget(self)
        adv_layout = QVBoxLayout(advanced)
        adv_layout.addWidget(QLabel("Extra subscription (Elvin subscription language), "
                                    "e.g. <tt>From == \"alice@example.org\"</tt>:", advanced))
        adv_layout.addWidget(self.extra_edit)
        adv_layout.addStretch(1)

        tabs = QTabWidget(self)
        tabs.addTab(mine, "&My groups")
        tabs.addTab(known_tab, "&Known groups")
        tabs.addTab(advanced, "A&dvanced")
        self.tabs = tabs

        self.error_label = QLabel(self)
        self.error_label.setStyleSheet("color: #c62828")
        self.error_label.hide()
        buttons, _ok = dialog_buttons(self)
        layout = QVBoxLayout(self)
        layout.addWidget(tabs)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)
        self.refresh_known()

    # -- rows ------------------------------------------------------------------
    def add_row(self, group: Group) -> int:
        row = self.table.rowCount()
        self.table.insertRow(row)
        name = QLineEdit(group.name)
        self.table.setCellWidget(row, 0, name)
        check = QCheckBox()
        check.setChecked(group.subscribe)
        self.table.setCellWidget(row, 1, _centred(check))
        for col, value in ((2, group.min_time), (3, group.max_time)):
            spin = QSpinBox()
            spin.setRange(0, 7 * 86400)
            spin.setValue(value)
            self.table.setCellWidget(row, col, spin)
        key = QLineEdit(group.key or "")
        key.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        key.setPlaceholderText("none: public")
        self.table.setCellWidget(row, 4, key)
        colour = QPushButton()
        colour.setProperty("colour", group.colour or "")
        auto = self._palette.colour(group.name) if hasattr(self, "_palette") else \
            hash_colour(group.name)
        _paint_button(colour, group.colour or auto, bool(group.colour))
        colour.clicked.connect(lambda: self._pick_colour(colour, name.text()))
        self.table.setCellWidget(row, 5, colour)
        return row

    def _add_new(self, name: str = "") -> None:
        row = self.add_row(Group(name or "new group"))
        editor = self.table.cellWidget(row, 0)
        editor.setFocus()
        editor.selectAll()

    def _remove_selected(self) -> None:
        for row in sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True):
            self.table.removeRow(row)
        if not self.table.selectedIndexes() and self.table.currentRow() >= 0:
            self.table.removeRow(self.table.currentRow())

    def _pick_colour(self, button: QPushButton, name: str) -> None:
        current = button.property("colour") or hash_colour(name or "group")
        colour = QColorDialog.getColor(QColor(current), self, "Group colour")
        if colour.isValid():
            button.setProperty("colour", colour.name())
            _paint_button(button, colour.name(), True)

    def row_names(self) -> list[str]:
        return [self.table.cellWidget(r, 0).text().strip() for r in range(self.table.rowCount())]

    # -- known groups ----------------------------------------------------------------
    def refresh_known(self) -> None:
        note = self._known_note()
        self.known_note_label.setText(note or "")
        self.known_note_label.setVisible(bool(note))
        self.known_list.setVisible(not note)
        self.add_known_button.setEnabled(not note)
        self.known_list.clear()
        mine = {fold(n) for n in self.row_names()}
        for name, count in sorted(self._known().items(), key=lambda kv: (-kv[1], kv[0].lower())):
            item = QListWidgetItem(f"{name}  ({count})")
            item.setData(Qt.ItemDataRole.UserRole, name)
            if fold(name) in mine:
                item.setForeground(QColor("#808080"))
                item.setToolTip("already in your groups")
            self.known_list.addItem(item)

    def _add_known(self, item: QListWidgetItem) -> None:
        name = item.data(Qt.ItemDataRole.UserRole)
        if fold(name) not in {fold(n) for n in self.row_names()}:
            self.add_row(Group(name))
        self.refresh_known()

    # -- result ------------------------------------------------------------------------
    def result_groups(self) -> GroupList:
        """The edited list; raises GroupError naming the bad row."""
        groups: list[Group] = []
        seen: dict[str, int] = {}
        for row in range(self.table.rowCount()):
            name = self.table.cellWidget(row, 0).text()
            check = self.table.cellWidget(row, 1).findChild(QCheckBox)
            try:
                group = Group(
                    name=name,
                    subscribe=check.isChecked(),
                    min_time=self.table.cellWidget(row, 2).value(),
                    max_time=self.table.cellWidget(row, 3).value(),
                    key=self.table.cellWidget(row, 4).text() or None,
                    colour=self.table.cellWidget(row, 5).property("colour") or None,
                )
            except GroupError as exc:
                raise GroupError(f"row {row + 1}: {exc}") from None
            if group.folded in seen:
                raise GroupError(f"row {row + 1}: {group.name!r} is the same group as row "
                                 f"{seen[group.folded]} (names match ignoring case)")
            seen[group.folded] = row + 1
            groups.append(group)
        return GroupList(groups)

    def extra_subscription(self) -> str:
        return _editor_text(self.extra_edit)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Return in a row's field finishes that field (on to the next one),
        as in a spreadsheet; it does not close the dialog half-filled."""
        focus = self.focusWidget()
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and focus is not None \
                and self.table.isAncestorOf(focus):
            self.focusNextChild()
            return
        super().keyPressEvent(event)

    def accept(self) -> None:
        try:
            self.result_groups()
        except GroupError as exc:
            self.error_label.setText(str(exc))
            self.error_label.show()
            self.tabs.setCurrentIndex(0)
            return
        valid = getattr(self.extra_edit, "isValid", None)
        if valid is not None and self.extra_subscription().strip() and not valid():
            self.error_label.setText("Extra subscription: " + self.extra_edit.errorText())
            self.error_label.show()
            self.tabs.setCurrentIndex(2)
            return
        super().accept()


def _centred(widget: QWidget) -> QWidget:
    holder = QWidget()
    layout = QHBoxLayout(holder)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setAlignment(Qt.AlignmentFlag.AlignCenter)
    layout.addWidget(widget)
    return holder


def _paint_button(button: QPushButton, colour: str, custom: bool) -> None:
    button.setText("custom" if custom else "auto")
    button.setStyleSheet(f"background-color: {colour}; color: #111; border: 1px solid #555;"
                         "padding: 2px 6px")


def _subscription_editor(parent: QWidget, text: str) -> QWidget:
    """The library's highlighting editor when available, else a line edit."""
    try:
        from elvin.qt import SubscriptionEditor
        return SubscriptionEditor(parent, text)
    except Exception:  # noqa: BLE001 - the app still works without the editor
        edit = QLineEdit(text, parent)
        return edit


def _editor_text(editor: QWidget) -> str:
    if hasattr(editor, "expression"):
        return editor.expression()
    return editor.text()


__all__ = ["GroupsDialog", "DEFAULT_MIN_TIME", "DEFAULT_MAX_TIME"]
