"""The routers panel: every saved router with its own live status.

One row per router: its name, the ``elvin.qt.StatusWidget`` of its
connection (green / amber / red dot, URL, last error as tooltip), and
buttons to edit, reconnect or remove it. Adding and editing go through
``ConnectionDialog``; the registry does the connecting.
"""

from __future__ import annotations

from elvin_apps.console.connectiondialog import ConnectionDialog
from elvin_apps.console.routers import RouterEntry, RouterError, RouterRegistry
from elvin_apps.console.tasks import spawn
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from elvin.qt import StatusWidget

__all__ = ["RoutersPanel"]


class RouterRow(QFrame):
    editRequested = Signal(str)
    removeRequested = Signal(str)
    reconnectRequested = Signal(str)

    def __init__(self, entry: RouterEntry, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.entry = entry
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.name_label = QLabel(f"<b>{_html(entry.name)}</b>")
        self.status = StatusWidget(entry.manager, self)
        self.status.label.setWordWrap(True)
        self.keys_label = QLabel()
        self.keys_label.setStyleSheet("color: palette(mid);")
        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #8a8a8a;")
        edit = _tool("Edit…", "Edit this router's URL, keys and options")
        edit.clicked.connect(lambda: self.editRequested.emit(self.entry.name))
        again = _tool("Reconnect", "Close the connection and connect again")
        again.clicked.connect(lambda: self.reconnectRequested.emit(self.entry.name))
        remove = _tool("Remove", "Forget this router (its panes stay, unconnected)")
        remove.clicked.connect(lambda: self.removeRequested.emit(self.entry.name))
        top = QHBoxLayout()
        top.addWidget(self.name_label, 1)
        top.addWidget(edit)
        top.addWidget(again)
        top.addWidget(remove)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.status)
        layout.addWidget(self.keys_label)
        layout.addWidget(self.error_label)
        entry.changed.connect(self.refresh)
        entry.manager.stateChanged.connect(self._state)
        entry.manager.error.connect(self._error)   # a method: disconnected with the row
        self.refresh()
        self._state(entry.manager.state)

    def _error(self, _message: str) -> None:
        self._state(self.entry.manager.state)

    def _state(self, state: str) -> None:
        """Say why a router is not connected, without hovering for a tooltip."""
        error = self.entry.manager.last_error if state != "connected" else ""
        self.error_label.setText(error)
        self.error_label.setVisible(bool(error))

    def refresh(self) -> None:
        spec = self.entry.spec
        self.name_label.setText(f"<b>{_html(spec.name)}</b>")
        keys = spec.keys.describe()
        extra = [f"keys: {keys}"] if keys != "none" else []
        if spec.options:
            extra.append(f"{len(spec.options)} option(s)")
        self.keys_label.setText(", ".join(extra))
        self.keys_label.setVisible(bool(extra))


def _tool(text: str, tip: str) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setToolTip(tip)
    button.setAutoRaise(True)
    return button


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class RoutersPanel(QWidget):
    """The list of routers (a dock in the main window)."""

    def __init__(self, registry: RouterRegistry, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.registry = registry
        self.rows: dict[str, RouterRow] = {}
        self._list = QVBoxLayout()
        self._list.setContentsMargins(0, 0, 0, 0)
        self._list.setSpacing(4)
        self._list.addStretch(1)
        holder = QWidget()
        holder.setLayout(self._list)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(holder)
        self.add_button = QPushButton("Add router…")
        self.add_button.setToolTip("Save another router to connect to (several at once)")
        self.add_button.clicked.connect(self.add_router)
        self.setMinimumWidth(220)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(scroll, 1)
        layout.addWidget(self.add_button)
        registry.routersChanged.connect(self.rebuild)
        self.rebuild()

    def rebuild(self) -> None:
        for row in self.rows.values():
            self._list.removeWidget(row)
            row.deleteLater()
        self.rows = {}
        for entry in self.registry.entries():
            row = RouterRow(entry, self)
            row.editRequested.connect(self.edit_router)
            row.removeRequested.connect(self.remove_router)
            row.reconnectRequested.connect(
                lambda name: spawn(self.registry.get(name).reconnect(), f"reconnecting {name}",
                                   self._error) if self.registry.get(name) else None)
            self._list.insertWidget(self._list.count() - 1, row)
            self.rows[entry.name] = row

    def _error(self, message: str) -> None:
        QMessageBox.warning(self, "Router", message)

    def add_router(self) -> None:
        dialog = ConnectionDialog(None, lambda name: self.registry.get(name) is not None, self)
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return
        try:
            self.registry.add(dialog.spec())
        except RouterError as exc:
            self._error(str(exc))

    def edit_router(self, name: str) -> None:
        entry = self.registry.get(name)
        if entry is None:
            return
        dialog = ConnectionDialog(entry.spec, lambda other: other != name and
                                  self.registry.get(other) is not None, self)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return
        spawn(self.registry.update(name, dialog.spec()), f"updating router {name}", self._error)

    def remove_router(self, name: str) -> None:
        answer = QMessageBox.question(self, "Remove router",
                                      f"Forget the router {name!r}? Panes using it stop "
                                      "receiving until you choose another router.")
        if answer == QMessageBox.StandardButton.Yes:
            self.registry.remove_later(name)
