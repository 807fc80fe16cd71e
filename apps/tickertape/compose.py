"""The compose dialog: a new message or a reply.

It only collects a :class:`~elvin_apps.tickertape.outgoing.Draft` and checks
it with the same function that builds the notification, so what the dialog
accepts is exactly what can be sent; errors are shown in the dialog (naming
the field) and nothing the user typed is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from elvin_apps.tickertape.message import Message
from elvin_apps.tickertape.outgoing import ComposeError, Draft, build_notification
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from elvin.qt import dialog_buttons

#: Choices for the Timeout field: (label, seconds or None for "do not send").
TIMEOUTS: tuple[tuple[str, int | None], ...] = (
    ("Default", None),
    ("1 minute", 60),
    ("5 minutes", 300),
    ("10 minutes", 600),
    ("30 minutes", 1800),
    ("1 hour", 3600),
    ("1 day", 86400),
)


class ComposeDialog(QDialog):
    """Group, message, optional URL, timeout and no-archive; a reply shows
    what it answers and keeps the referent's group."""

    def __init__(self, groups: Sequence[str], *, sender: str,
                 reply_to: Message | None = None, group: str | None = None,
                 private_groups: Sequence[str] = (), legacy: bool = True,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.sender = sender
        self.reply_to = reply_to
        self.legacy = legacy
        self._private = {g.casefold() for g in private_groups}
        self.setWindowTitle("Reply" if reply_to else "New message")
        self.setMinimumWidth(460)

        self.group_box = QComboBox(self)
        self.group_box.setEditable(True)
        self.group_box.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.group_box.addItems(list(dict.fromkeys(groups)))
        self.text_edit = QLineEdit(self)
        self.text_edit.setPlaceholderText("Type a message and press Enter")
        self.text_edit.setMaxLength(4000)
        self.url_edit = QLineEdit(self)
        self.url_edit.setPlaceholderText("optional link, e.g. https://example.org/")
        self.timeout_box = QComboBox(self)
        for label, seconds in TIMEOUTS:
            self.timeout_box.addItem(label, seconds)
        self.no_archive = QCheckBox("Ask archivers not to keep this message", self)
        self.private_note = QLabel(self)
        self.private_note.setStyleSheet("color: #8a6d00")
        self.error_label = QLabel(self)
        self.error_label.setStyleSheet("color: #c62828")
        self.error_label.setWordWrap(True)
        self.error_label.hide()

        form = QFormLayout()
        if reply_to is not None:
            quoted = reply_to.text if len(reply_to.text) < 120 else reply_to.text[:117] + "…"
            context = QLabel(f"<b>{_escape(reply_to.sender)}</b>: {_escape(quoted)}", self)
            context.setWordWrap(True)
            context.setTextFormat(Qt.TextFormat.RichText)
            form.addRow("In reply to:", context)
            self.group_box.setCurrentText(reply_to.group)
            self.group_box.setEnabled(False)  # a reply goes to the referent's group
        elif group:
            self.group_box.setCurrentText(group)
        form.addRow("&Group:", self.group_box)
        form.addRow("&Message:", self.text_edit)
        form.addRow("&Link:", self.url_edit)
        form.addRow("&Timeout:", self.timeout_box)
        form.addRow("", self.no_archive)
        form.addRow("", self.private_note)

        buttons, self.send_button = dialog_buttons(self, "&Send")

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)
        self.group_box.currentTextChanged.connect(self._group_changed)
        self._group_changed(self.group_box.currentText())
        self.text_edit.setFocus()

    def _group_changed(self, name: str) -> None:
        private = name.strip().casefold() in self._private
        self.private_note.setText("Private group: sent with its key, only members see it"
                                  if private else "")
        self.private_note.setVisible(private)

    def draft(self) -> Draft:
        return Draft(
            group=self.group_box.currentText(),
            text=self.text_edit.text(),
            url=self.url_edit.text(),
            timeout=self.timeout_box.currentData(),
            no_archive=self.no_archive.isChecked(),
            reply_to=self.reply_to,
        )

    def check(self) -> str | None:
        """The error that stops sending, or None when the draft is fine."""
        try:
            build_notification(self.draft(), self.sender, legacy=self.legacy)
        except ComposeError as exc:
            return str(exc)
        return None

    def accept(self) -> None:
        problem = self.check()
        if problem:
            self.error_label.setText(problem)
            self.error_label.show()
            return
        super().accept()


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def ask_draft(groups: Sequence[str], *, sender: str, parent: QWidget | None = None,
              reply_to: Message | None = None, group: str | None = None,
              private_groups: Sequence[str] = (),
              on_done: Callable[[Draft], None] | None = None) -> ComposeDialog:
    """Open the dialog without blocking; ``on_done(draft)`` when sent."""
    dialog = ComposeDialog(groups, sender=sender, reply_to=reply_to, group=group,
                           private_groups=private_groups, parent=parent)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    if on_done is not None:
        dialog.accepted.connect(lambda: on_done(dialog.draft()))
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
