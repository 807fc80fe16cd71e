"""Editing raw keys: a widget for two lists of keys, and a dialog around it.

Keys are secrets a developer already has as text or bytes; the editor takes
them one per line in the ``ec``/``ep`` key-file notation and checks each
line as it is typed, so a typo is caught here and not as a silent
"insecure" delivery later. Which scheme hashes which key is done for the
user (``keytext.KeySpec``).
"""

from __future__ import annotations

from elvin_apps.console.keytext import KeySpec, KeyTextError
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from elvin.qt import dialog_buttons, monospace_font

__all__ = ["KeysButton", "KeysDialog", "KeysEditor"]

HELP = ("One raw key per line: plain text or \"quoted text\" (UTF-8), or [de ad be ef] "
        "for bytes. Producer keys prove who sent a notification, consumer keys who may "
        "receive it; the producer, consumer and dual schemes are all applied.")


def _key_edit(lines: list[str]) -> QPlainTextEdit:
    edit = QPlainTextEdit()
    edit.setPlainText("\n".join(lines))
    edit.setTabChangesFocus(True)
    edit.setFont(monospace_font())
    edit.setFixedHeight(70)
    return edit


class KeysEditor(QWidget):
    """Producer and consumer raw keys with a live check."""

    def __init__(self, spec: KeySpec | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        spec = spec or KeySpec()
        self.producer = _key_edit(spec.producer)
        self.producer.setPlaceholderText('e.g. "my producer secret"')
        self.consumer = _key_edit(spec.consumer)
        self.consumer.setPlaceholderText("e.g. [de ad be ef]")
        help_label = QLabel(HELP)
        help_label.setWordWrap(True)
        help_label.setStyleSheet("color: palette(mid);")
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #c62828;")
        self.error_label.setWordWrap(True)
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Producer keys", self.producer)
        form.addRow("Consumer keys", self.consumer)
        form.addRow(help_label)
        form.addRow(self.error_label)
        self.producer.textChanged.connect(self.check)
        self.consumer.textChanged.connect(self.check)
        self.check()

    def spec(self) -> KeySpec:
        def lines(edit: QPlainTextEdit) -> list[str]:
            return [line for line in edit.toPlainText().splitlines() if line.strip()]
        return KeySpec(lines(self.producer), lines(self.consumer))

    def error(self) -> str:
        try:
            self.spec().raw()
        except KeyTextError as exc:
            return str(exc)
        return ""

    def check(self) -> bool:
        message = self.error()
        self.error_label.setText(message)
        self.error_label.setVisible(bool(message))
        return not message


class KeysDialog(QDialog):
    """A modal editor for a pane's keys; OK only when every line reads."""

    def __init__(self, spec: KeySpec, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.editor = KeysEditor(spec, self)
        buttons, self.ok_button = dialog_buttons(self)
        layout = QVBoxLayout(self)
        layout.addWidget(self.editor)
        layout.addWidget(buttons)
        self.editor.producer.textChanged.connect(self._update)
        self.editor.consumer.textChanged.connect(self._update)
        self._update()
        self.resize(460, 320)

    def _update(self) -> None:
        self.ok_button.setEnabled(not self.editor.error())

    def spec(self) -> KeySpec:
        return self.editor.spec()


class KeysButton(QPushButton):
    """``Keys: none`` / ``Keys: 1 producer``; click to edit in a dialog."""

    changed = Signal()

    def __init__(self, spec: KeySpec, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._spec = spec
        self._title = title
        self.setToolTip(f"{title}: raw keys for secure delivery")
        self.clicked.connect(self.edit)
        self._refresh()

    def spec(self) -> KeySpec:
        return KeySpec(list(self._spec.producer), list(self._spec.consumer))

    def set_spec(self, spec: KeySpec) -> None:
        self._spec = spec
        self._refresh()
        self.changed.emit()

    def _refresh(self) -> None:
        self.setText(f"Keys: {self._spec.describe()}…")

    def edit(self) -> None:
        dialog = KeysDialog(self._spec, self._title, self)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.set_spec(dialog.spec())
