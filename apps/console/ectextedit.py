"""Notifications typed or pasted as ec text, with the reader's error under them.

The producer's "Paste ec…" dialog and the explain dialog both take
notifications as ``ec``/``ep`` text ('Name: value' lines, '---' between
notifications). ``EcTextEdit`` is that editor: a fixed-pitch text box, and
a red line beneath it that says where the text stops being ec text (line
and column, as ``ep`` says it), so both read the text and report a
mistake the same way.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from elvin.qt import monospace_font
from elvin.text import TextFormatError, parse_notifications
from elvin.values import Value

__all__ = ["EcTextEdit"]


class EcTextEdit(QWidget):
    """``edit`` holds the text; ``read()`` gives its notifications, or None
    with the reason shown in ``error_label``, which also carries the
    owner's own notes (``say``)."""

    def __init__(self, placeholder: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edit = QPlainTextEdit()
        self.edit.setFont(monospace_font())
        self.edit.setPlaceholderText(placeholder)
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #c62828;")
        self.error_label.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.error_label)

    def read(self) -> list[dict[str, Value]] | None:
        """The notifications in the text (none for an empty one), or None
        when it is not ec text; the line under the text says why, or is
        cleared."""
        try:
            found = parse_notifications(self.edit.toPlainText())
        except TextFormatError as exc:
            self.say(str(exc))
            return None
        self.say("")
        return found

    def say(self, text: str) -> None:
        self.error_label.setText(text)
