"""Editing one saved router: name, URL, raw keys and connection options.

Every field is checked as it is typed (the URL by ``elvin.protocol``'s own
parser, the options in the ``ec`` text form ``Name: value``), and OK stays
disabled while something is wrong, with the reason shown: the router list
never holds a definition that cannot connect for a reason we could have
told the user about.
"""

from __future__ import annotations

from collections.abc import Callable

from elvin_apps.console.keyseditor import KeysEditor
from elvin_apps.console.keytext import KeySpec
from elvin_apps.console.workspace import RouterSpec
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from elvin.protocol import URIError, parse_uri
from elvin.qt import dialog_buttons, monospace_font
from elvin.router_url import split_router_urls
from elvin.text import TextFormatError, format_notification, parse_notifications

__all__ = ["ConnectionDialog", "parse_options"]


def parse_options(text: str) -> dict:
    """Connection options written as ``Name: value`` lines (ec format)."""
    if not text.strip():
        return {}
    notifications = parse_notifications(text)
    if len(notifications) > 1:
        raise TextFormatError("options are one block of 'Name: value' lines (no ---)", 1, 1)
    return notifications[0] if notifications else {}


class ConnectionDialog(QDialog):
    """Add or edit a router. ``taken(name) -> bool`` says whether a name is
    already used by another router."""

    def __init__(self, spec: RouterSpec | None = None,
                 taken: Callable[[str], bool] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Edit router" if spec else "Add router")
        self._taken = taken or (lambda _name: False)
        spec = spec or RouterSpec("", "elvin://127.0.0.1:2917")
        self.name_edit = QLineEdit(spec.name)
        self.name_edit.setPlaceholderText("e.g. local, staging")
        self.url_edit = QLineEdit(spec.url)
        self.url_edit.setPlaceholderText("elvin://host:2917 or elvin:4.0/tcp,none,xdr/host:2917 "
                                         "(several apart by spaces: failover)")
        self.options_edit = QPlainTextEdit(format_notification(spec.options)
                                           if spec.options else "")
        self.options_edit.setPlaceholderText('e.g.\nSubscription.Max-Count: 100\n'
                                             'Packet.Max-Length: 1048576')
        self.options_edit.setFont(monospace_font())
        self.options_edit.setFixedHeight(80)
        self.keys = KeysEditor(KeySpec(spec.producer_keys, spec.consumer_keys))
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #c62828;")
        self.error_label.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Name", self.name_edit)
        form.addRow("URL", self.url_edit)
        form.addRow("Options", self.options_edit)
        buttons, self.ok_button = dialog_buttons(self)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(QLabel("<b>Connection keys</b> (used for every send and "
                                "subscription on this router)"))
        layout.addWidget(self.keys)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)
        for signal in (self.name_edit.textChanged, self.url_edit.textChanged,
                       self.options_edit.textChanged, self.keys.producer.textChanged,
                       self.keys.consumer.textChanged):
            signal.connect(self.check)
        self.check()
        self.resize(520, 480)

    def error(self) -> str:
        name = self.name_edit.text().strip()
        if not name:
            return "The router needs a name."
        if self._taken(name):
            return f"There is already a router named {name!r}."
        urls = split_router_urls(self.url_edit.text())
        if not urls:
            return "The router needs a URL."
        try:
            for url in urls:            # several apart by spaces: failover
                parse_uri(url)
        except URIError as exc:
            return f"URL: {exc}"
        try:
            parse_options(self.options_edit.toPlainText())
        except (TextFormatError, ValueError, TypeError) as exc:
            return f"Options: {exc}"
        return self.keys.error()

    def check(self) -> bool:
        message = self.error()
        self.error_label.setText(message)
        self.error_label.setVisible(bool(message))
        self.ok_button.setEnabled(not message)
        return not message

    def spec(self) -> RouterSpec:
        keys = self.keys.spec()
        return RouterSpec(self.name_edit.text().strip(), self.url_edit.text().strip(),
                          keys.producer, keys.consumer,
                          parse_options(self.options_edit.toPlainText()))
