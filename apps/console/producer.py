"""The producer pane: build a typed notification and send it.

The attribute editor checks every value against its type; keys and the
deliver-insecure flag sit beside it. Send once (Ctrl+Enter) or repeat at a
rate; every send once, and every repeat run, lands in the history, where one
click (double-click or Resend) sends exactly the same notification again,
with the same keys and flag. Notifications load from and save to the ec/ep
text format, so definitions can be shared with ``ep`` scripts.

Folded (the default), the pane is a one-line publish bar: the router, the
notification in brief, Send, and "Edit" to unfold the full editor, so that
the consumer panes above get the height.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from elvin_apps.console.attributetable import AttributeTable
from elvin_apps.console.completion import AttributeNames
from elvin_apps.console.ectextedit import EcTextEdit
from elvin_apps.console.keyseditor import KeysButton
from elvin_apps.console.keytext import KeySpec, KeyTextError
from elvin_apps.console.pane import Pane
from elvin_apps.console.received import Received, timestamp
from elvin_apps.console.repeat import Repeater
from elvin_apps.console.routers import RouterRegistry
from elvin_apps.console.tasks import spawn
from elvin_apps.console.typed import TypedValueError
from elvin_apps.console.workspace import AttributeSpec, ProducerSpec
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from elvin.errors import ElvinError
from elvin.keys import Keys
from elvin.qt import dialog_buttons, push_button, split
from elvin.text import TextFormatError, format_notification, parse_notifications
from elvin.values import Value

__all__ = ["ProducerPane", "Sent"]

HISTORY_LIMIT = 200


@dataclass
class Sent:
    """One history entry: what was sent, how, and how often."""

    time: float
    notification: dict[str, Value]
    keys: Keys | None
    deliver_insecure: bool
    count: int = 1
    rate: float | None = None

    def label(self) -> str:
        summary = Received(0, self.time, self.notification, False).summary(200)
        how = f"×{self.count:,} at {self.rate:g}/s" if self.rate else \
            (f"×{self.count}" if self.count > 1 else "")
        flags = []
        if self.keys:
            flags.append("keys")
        if not self.deliver_insecure:
            flags.append("secure only")
        extra = f" [{', '.join(flags)}]" if flags else ""
        return f"{timestamp(self.time)}  {how + '  ' if how else ''}{summary}{extra}"


class EcTextDialog(QDialog):
    """Paste notifications in ec/ep text; parse errors shown with line and column."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Paste ec text")
        self.text = EcTextEdit('Greeting: "hello"\nCount: 42\nBig: 42L\n---')
        buttons, self.ok_button = dialog_buttons(self)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("One or more notifications in ec/ep text ('Name: value' "
                                "lines, '---' between them). The first goes into the "
                                "editor, the others into the history."))
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.text.edit.textChanged.connect(self._check)
        self._check()
        self.resize(480, 360)

    def notifications(self) -> list[dict[str, Value]]:
        return self.text.read() or []

    def _check(self) -> None:
        found = self.text.read()
        if found == []:
            self.text.say("No notification yet.")
        self.ok_button.setEnabled(bool(found))


class ProducerPane(Pane):
    kind = "producer"
    expandedChanged = Signal(bool)

    def __init__(self, registry: RouterRegistry, names: AttributeNames,
                 spec: ProducerSpec | None = None, parent: QWidget | None = None) -> None:
        spec = spec or ProducerSpec()
        super().__init__(registry, spec.title or "Producer", spec.router, parent)
        self.names = names
        self.history: list[Sent] = []
        self.sent_count = 0
        self.repeater: Repeater | None = None
        self._repeat_entry: Sent | None = None

        self.insecure_box = QCheckBox("Deliver insecure")
        self.insecure_box.setChecked(spec.deliver_insecure)
        self.insecure_box.setToolTip("Also deliver to subscribers without matching keys "
                                     "(off: secure subscribers only)")
        self.keys_button = KeysButton(KeySpec(spec.producer_keys, spec.consumer_keys),
                                      "Notification keys", self)
        self.summary_label = QLabel()
        self.summary_label.setTextFormat(Qt.TextFormat.PlainText)
        self.summary_label.setMinimumWidth(80)
        self.summary_label.setSizePolicy(QSizePolicy.Policy.Ignored,
                                         QSizePolicy.Policy.Preferred)
        self.bar_send = QPushButton("Send")
        self.bar_send.setToolTip("Send this notification once (Ctrl+Enter)")
        self.bar_send.clicked.connect(self.send_once)
        self.expand_button = QToolButton()
        self.expand_button.setCheckable(True)
        self.expand_button.toggled.connect(self.set_expanded)
        top = self.router_row()
        top.addWidget(self.insecure_box)
        top.addWidget(self.keys_button)
        top.addWidget(self.summary_label, 1)
        top.addWidget(self.bar_send)
        self.top_stretch = QWidget()
        self.top_stretch.setSizePolicy(QSizePolicy.Policy.Expanding,
                                       QSizePolicy.Policy.Preferred)
        top.addWidget(self.top_stretch)
        top.addWidget(self.expand_button)

        self.attributes = AttributeTable()
        for text, tip, action in (
                ("Paste ec…", "Fill the editor from notifications in ec/ep text",
                 self.paste_dialog),
                ("Load…", "Load notifications from an ec/ep text file", self.load_dialog),
                ("Save…", "Save this notification as ec/ep text (ep sends it as is)",
                 self.save_dialog),
                ("Explain…", "Would a subscription match this notification? Clause by clause",
                 self.explain_draft)):
            self.attributes.button_row.addWidget(push_button(text, tip, action))
        self.attributes.changed.connect(self._update_buttons)
        self.attributes.changed.connect(self._update_summary)

        self.send_button = QPushButton("Send")
        self.send_button.setToolTip("Send this notification once (Ctrl+Enter)")
        self.send_button.clicked.connect(self.send_once)
        for sequence in ("Ctrl+Return", "Ctrl+Enter"):
            shortcut = QShortcut(QKeySequence(sequence), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(self.send_once)
        self.rate_spin = QDoubleSpinBox()
        self.rate_spin.setRange(0.1, 100_000)
        self.rate_spin.setDecimals(1)
        self.rate_spin.setValue(spec.rate)
        self.rate_spin.setSuffix(" /s")
        self.rate_spin.setToolTip("Notifications per second when repeating")
        self.repeat_button = QPushButton("Repeat")
        self.repeat_button.setCheckable(True)
        self.repeat_button.setToolTip("Send this notification again and again at the rate")
        self.repeat_button.toggled.connect(self._repeat_toggled)
        self.sent_label = QLabel()
        send_row = QHBoxLayout()
        send_row.addWidget(self.send_button)
        send_row.addSpacing(12)
        send_row.addWidget(QLabel("Rate"))
        send_row.addWidget(self.rate_spin)
        send_row.addWidget(self.repeat_button)
        send_row.addStretch(1)
        send_row.addWidget(self.sent_label)

        self.history_list = QListWidget()
        self.history_list.setToolTip("Send (or double-click) sends the same notification "
                                     "again, with the same keys and flag")
        self.history_list.itemDoubleClicked.connect(
            lambda item: self.resend(self.history_list.row(item)))
        history_buttons = QHBoxLayout()
        history_buttons.addWidget(QLabel("<b>History</b>"))
        history_buttons.addStretch(1)
        for text, tip, action in (
                ("Resend", "Send the selected notification again, with the same keys and flag",
                 lambda: self.resend(self.history_list.currentRow())),
                ("Edit", "Put the selected notification into the editor",
                 lambda: self.edit_history(self.history_list.currentRow())),
                ("Save all…", "Save the history as ec/ep text", self.save_history_dialog),
                ("Clear", "Forget the history", self.clear_history)):
            history_buttons.addWidget(push_button(text, tip, action))
        history_box = QWidget()
        history_layout = QVBoxLayout(history_box)
        history_layout.setContentsMargins(0, 0, 0, 0)
        history_layout.addLayout(history_buttons)
        history_layout.addWidget(self.history_list, 1)

        editor_box = QWidget()
        editor_layout = QVBoxLayout(editor_box)
        editor_layout.setContentsMargins(0, 0, 0, 0)
        editor_layout.addWidget(self.attributes, 1)
        editor_layout.addLayout(send_row)
        splitter = split(Qt.Orientation.Vertical, (editor_box, 4), (history_box, 1))
        self.history_list.setMinimumHeight(32)
        # three whole rows (a row cut in half reads as a bug), and the
        # unfolded producer still fits 1024x768
        table = self.attributes.table
        table.setMinimumHeight(3 * table.verticalHeader().defaultSectionSize() +
                               table.horizontalHeader().sizeHint().height() +
                               2 * table.frameWidth())
        self.full = splitter

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.status_label)

        self.timer = QTimer(self)
        self.timer.setInterval(250)
        self.timer.timeout.connect(self._poll_repeater)
        if spec.attributes:
            self.attributes.set_attributes(spec.attributes)
        else:
            self.attributes.add_row("Message", "string", "hello")
        for text in spec.history:
            try:
                for notification in parse_notifications(text):
                    self._remember(Sent(time.time(), notification, None,
                                        spec.deliver_insecure))
            except (TextFormatError, ValueError):
                continue
        self._update_buttons()
        self._update_sent()
        self.set_status("")
        self._expanded = None
        self.set_expanded(spec.expanded)
        self.ready()

    # -- folding -------------------------------------------------------------------------
    @property
    def expanded(self) -> bool:
        return bool(self._expanded)

    def set_expanded(self, expanded: bool) -> None:
        """The full editor (True) or the one-line publish bar."""
        if expanded == self._expanded:
            return
        self._expanded = expanded
        for widget in (self.full, self.insecure_box, self.keys_button, self.top_stretch):
            widget.setVisible(expanded)
        for widget in (self.summary_label, self.bar_send):
            widget.setVisible(not expanded)
        self.expand_button.blockSignals(True)
        self.expand_button.setChecked(expanded)
        self.expand_button.blockSignals(False)
        self.expand_button.setText("Fold \N{BLACK UP-POINTING SMALL TRIANGLE}" if expanded
                                   else "Edit \N{BLACK DOWN-POINTING SMALL TRIANGLE}")
        self.expand_button.setToolTip("Fold back to the one-line publish bar" if expanded
                                      else "Unfold the editor: attributes, keys, repeat, "
                                      "history")
        self._update_summary()
        self.expandedChanged.emit(expanded)

    def _update_summary(self) -> None:
        try:
            notification = self.attributes.notification()
        except TypedValueError as exc:
            self.summary_label.setText(f"Not ready: {exc}")
            self.summary_label.setStyleSheet("color: #c62828;")
            self.summary_label.setToolTip("Edit to fix it")
            return
        text = Received(0, 0.0, notification, False).summary(400)
        self.summary_label.setText(text)
        self.summary_label.setStyleSheet("font-family: monospace;")
        self.summary_label.setToolTip(format_notification(notification))

    # -- sending --------------------------------------------------------------------------
    def _keys(self) -> Keys | None:
        try:
            return self.keys_button.spec().notification_keys()
        except KeyTextError as exc:
            raise TypedValueError(str(exc)) from None

    def current(self) -> tuple[dict[str, Value], Keys | None, bool]:
        """The notification to send now, or TypedValueError saying why not."""
        notification = self.attributes.notification()
        self.names.add(notification)
        return notification, self._keys(), self.insecure_box.isChecked()

    def draft(self) -> dict[str, Value] | None:
        """The notification being written, or None while it is not valid."""
        try:
            return self.attributes.notification()
        except TypedValueError:
            return None

    def explain_draft(self) -> None:
        draft = self.draft()
        if draft is None:
            self.set_status("Explain: fix the notification first "
                            f"({self.attributes.errors()[0]})", error=True)
            return
        self.explainRequested.emit(draft, "")

    def send_once(self) -> bool:
        """Send the editor's notification; False (nothing sent) if invalid."""
        try:
            notification, keys, insecure = self.current()
        except TypedValueError as exc:
            self.set_status(f"Not sent: {exc}", error=True)
            self.attributes.focus_first_error()
            return False
        entry = Sent(time.time(), notification, keys, insecure)
        spawn(self._send(entry, remember=True), "sending",
              lambda message: self.set_status(message, error=True))
        return True

    def resend(self, row: int) -> bool:
        if not 0 <= row < len(self.history):
            return False
        return self.resend_entry(self.history[row])

    def resend_entry(self, old: Sent) -> bool:
        """Send a history entry again: one click on its Send button."""
        entry = Sent(time.time(), old.notification, old.keys, old.deliver_insecure)
        spawn(self._send(entry, remember=True), "sending",
              lambda message: self.set_status(message, error=True))
        return True

    async def _send(self, entry: Sent, remember: bool) -> None:
        conn = self.connection()
        if conn is None:
            self.set_status(f"Not sent: router {self.router_name or '(none)'} is not "
                            "connected.", error=True)
            return
        try:
            await conn.send(entry.notification, keys=entry.keys,
                            deliver_insecure=entry.deliver_insecure)
        except (ElvinError, ValueError, TypeError, OSError) as exc:
            self.set_status(f"Not sent: {exc}", error=True)
            return
        self.sent_count += 1
        if remember:
            self._remember(entry)
        self._update_sent()
        self.set_status(f"Sent to {self.router_name} at {timestamp(entry.time)}.")

    def _remember(self, entry: Sent) -> None:
        self.history.insert(0, entry)
        item = QListWidgetItem()
        item.setData(Qt.ItemDataRole.UserRole, entry.label())
        row = QWidget()
        button = QToolButton()
        button.setText("Send")
        button.setToolTip("Send this notification again (same keys and flag)")
        button.clicked.connect(lambda: self.resend_entry(entry))
        label = QLabel(entry.label())
        label.setTextFormat(Qt.TextFormat.PlainText)
        row_layout = QHBoxLayout(row)
        row_layout.setContentsMargins(2, 0, 2, 0)
        row_layout.addWidget(button)
        row_layout.addWidget(label, 1)
        item.setSizeHint(row.sizeHint())
        self.history_list.insertItem(0, item)
        self.history_list.setItemWidget(item, row)
        while len(self.history) > HISTORY_LIMIT:
            self.history.pop()
            self.history_list.takeItem(self.history_list.count() - 1)

    def history_label(self, row: int) -> str:
        item = self.history_list.item(row)
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else ""

    def edit_history(self, row: int) -> None:
        if 0 <= row < len(self.history):
            entry = self.history[row]
            self.attributes.set_notification(entry.notification)
            self.insecure_box.setChecked(entry.deliver_insecure)

    def clear_history(self) -> None:
        self.history.clear()
        self.history_list.clear()

    # -- repeating ---------------------------------------------------------------------------
    def _repeat_toggled(self, on: bool) -> None:
        if on:
            self.start_repeat()
        else:
            spawn(self.stop_repeat(), "stopping")

    def start_repeat(self, rate: float | None = None) -> bool:
        try:
            notification, keys, insecure = self.current()
        except TypedValueError as exc:
            self.set_status(f"Not repeating: {exc}", error=True)
            self.repeat_button.setChecked(False)
            return False
        if self.connection() is None:
            self.set_status(f"Not repeating: router {self.router_name or '(none)'} is not "
                            "connected.", error=True)
            self.repeat_button.setChecked(False)
            return False
        if rate:
            self.rate_spin.setValue(rate)
        rate = self.rate_spin.value()
        entry = Sent(time.time(), notification, keys, insecure, 0, rate)

        async def send() -> None:
            conn = self.connection()
            if conn is None:
                raise ElvinError(f"router {self.router_name} disconnected")
            await conn.send(notification, keys=keys, deliver_insecure=insecure)
            entry.count += 1
            self.sent_count += 1

        self.repeater = Repeater(send, rate)
        self._repeat_entry = entry
        self.repeater.start()
        self.timer.start()
        if not self.repeat_button.isChecked():
            self.repeat_button.blockSignals(True)
            self.repeat_button.setChecked(True)
            self.repeat_button.blockSignals(False)
        self.repeat_button.setText("Stop")
        self.set_status(f"Repeating at {rate:g}/s…")
        return True

    async def stop_repeat(self) -> None:
        repeater, self.repeater = self.repeater, None
        if repeater is not None:
            await repeater.stop()
        self.timer.stop()
        entry, self._repeat_entry = self._repeat_entry, None
        if entry is not None and entry.count:
            self._remember(entry)
        if self.repeat_button.isChecked():
            self.repeat_button.blockSignals(True)
            self.repeat_button.setChecked(False)
            self.repeat_button.blockSignals(False)
        self.repeat_button.setText("Repeat")
        self._update_sent()
        if repeater is not None and repeater.error is not None:
            self.set_status(f"Repeat stopped: {repeater.error}", error=True)
        elif repeater is not None:
            self.set_status(f"Repeat stopped after {repeater.sent:,} notifications.")

    def _poll_repeater(self) -> None:
        self._update_sent()
        if self.repeater is not None and not self.repeater.running:
            spawn(self.stop_repeat(), "stopping")

    def _update_sent(self) -> None:
        text = f"{self.sent_count:,} sent"
        if self.repeater is not None and self._repeat_entry is not None:
            text = f"repeating: {self._repeat_entry.count:,} this run · " + text
        self.sent_label.setText(text)

    def _update_buttons(self) -> None:
        valid = self.attributes.is_valid()
        self.send_button.setEnabled(valid)
        self.bar_send.setEnabled(valid)
        self.repeat_button.setEnabled(valid or self.repeater is not None)

    # -- ec text files -------------------------------------------------------------------
    def load_notifications(self, notifications: list[dict[str, Value]]) -> None:
        """First into the editor, the others into the history (newest last)."""
        if not notifications:
            return
        self.attributes.set_notification(notifications[0])
        for notification in reversed(notifications[1:]):
            self._remember(Sent(time.time(), notification, None,
                                self.insecure_box.isChecked(), 0))

    def paste_dialog(self) -> None:
        dialog = EcTextDialog(self)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.load_notifications(dialog.notifications())

    def load_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Load notifications", "",
                                              "ec/ep text (*.ec *.ep *.txt);;All files (*)")
        if path:
            self.load_file(path)

    def load_file(self, path: str) -> int:
        try:
            with open(path, encoding="utf-8", newline="\n") as f:
                notifications = parse_notifications(f.read())
        except (OSError, UnicodeDecodeError, TextFormatError, ValueError) as exc:
            QMessageBox.warning(self, "Load notifications", f"{path}: {exc}")
            return 0
        self.load_notifications(notifications)
        self.set_status(f"Loaded {len(notifications)} notification(s) from {path}.")
        return len(notifications)

    def save_dialog(self) -> None:
        try:
            notification = self.attributes.notification()
        except TypedValueError as exc:
            self.set_status(f"Not saved: {exc}", error=True)
            return
        path, _ = QFileDialog.getSaveFileName(self, "Save notification", "notification.ec",
                                              "ec/ep text (*.ec *.ep *.txt)")
        if path:
            self.save_file(path, [notification])

    def save_history_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save history", "sent.ec",
                                              "ec/ep text (*.ec *.ep *.txt)")
        if path:
            self.save_file(path, [entry.notification for entry in reversed(self.history)])

    def save_file(self, path: str, notifications: list[dict[str, Value]]) -> bool:
        text = "".join(format_notification(n) + "\n---\n" for n in notifications)
        try:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
        except OSError as exc:
            QMessageBox.warning(self, "Save", f"cannot write {path}: {exc.strerror or exc}")
            return False
        self.set_status(f"Saved {len(notifications)} notification(s) to {path}.")
        return True

    # -- workspace ------------------------------------------------------------------------
    def to_spec(self) -> ProducerSpec:
        keys = self.keys_button.spec()
        history = [format_notification(entry.notification) for entry in
                   reversed(self.history[:50])]
        return ProducerSpec(
            title=self.title(), router=self.router_name,
            attributes=[AttributeSpec(a.name, a.type, a.value)
                        for a in self.attributes.attributes()],
            deliver_insecure=self.insecure_box.isChecked(),
            producer_keys=keys.producer, consumer_keys=keys.consumer,
            rate=self.rate_spin.value(), history=history, expanded=self.expanded)

    async def shutdown(self) -> None:
        await self.stop_repeat()
