"""The quench pane: which subscriptions at the router refer to some names.

The user lists attribute names; the pane registers a quench for them
(``Connection.quench``) and shows the router's matching subscription terms
as they appear, change and disappear, each as an expression
(``elvin.subscription.unparse`` of the AST the router sent). Removed terms
stay listed, greyed, until "Clear removed", so a subscription that came and
went quickly is not missed; a log underneath keeps every event with its time.

A router without quench (protocol subset C is optional; Avis lacks it)
refuses with ``QuenchNotSupported``: the table makes way for a note that
says so, and the pane asks again whenever the console (re)connects.
"""

from __future__ import annotations

import asyncio
import re
import time

from elvin_apps.console.completion import AttributeNames
from elvin_apps.console.pane import Pane
from elvin_apps.console.received import timestamp
from elvin_apps.console.routers import RouterRegistry
from elvin_apps.console.tasks import spawn
from elvin_apps.console.workspace import QuenchSpec
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from elvin.client import (
    Connection,
    Quench,
    QuenchEvent,
    QuenchNotSupported,
    SubscriptionAdded,
    SubscriptionRemoved,
)
from elvin.errors import ElvinError
from elvin.qt import monospace_font
from elvin.quenching import Wanted, wanted
from elvin.subscription import unparse

__all__ = ["QuenchPane", "parse_names"]

TERM, STATE, SECURE, EXPRESSION, CHANGED = range(5)
_STATE_COLOURS = {"added": QColor("#e8f5e9"), "modified": QColor("#fff3e0")}
_GONE = QBrush(QColor("#9e9e9e"))


def parse_names(text: str) -> list[str]:
    """Names separated by commas or whitespace (quote a name with spaces)."""
    names = []
    for match in re.finditer(r'"((?:[^"\\]|\\.)*)"|([^,\s]+)', text):
        name = match.group(1) if match.group(1) is not None else match.group(2)
        name = re.sub(r"\\(.)", r"\1", name) if match.group(1) is not None else name
        if name and name not in names:
            names.append(name)
    return names


def _expression(ast) -> str:
    try:
        return unparse(ast)
    except Exception as exc:  # noqa: BLE001 - show the term even if it cannot be printed
        return f"<cannot print: {exc}>"


def describe_wanted(name: str, values: Wanted) -> str:
    """One line for a producer: which values of ``name`` anyone can match."""
    if values.unbounded:
        return "any value (a subscription does not narrow it down)"
    if values.nothing:
        return "none (no subscription can match it)"
    return "  or  ".join(sorted(unparse(c.node(name)) for c in values.constraints))


class QuenchPane(Pane):
    kind = "quench"

    def __init__(self, registry: RouterRegistry, names: AttributeNames,
                 spec: QuenchSpec | None = None, parent: QWidget | None = None) -> None:
        spec = spec or QuenchSpec()
        super().__init__(registry, spec.title or "Quench", spec.router, parent)
        self.names = names
        self.quench: Quench | None = None
        self.wanted = False
        self.applied: list[str] = []
        self._lock = asyncio.Lock()
        self.rows: dict[int, int] = {}     # term id -> table row
        self.events: list[tuple[float, QuenchEvent]] = []

        self.names_edit = QLineEdit(", ".join(spec.names))
        self.names_edit.setPlaceholderText("Attribute names, e.g. Price, Symbol")
        self.names_edit.returnPressed.connect(self.start)
        self.start_button = QPushButton("Watch")
        self.start_button.setToolTip("Register a quench for these names (Enter)")
        self.start_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)
        clear = QPushButton("Clear removed")
        clear.clicked.connect(self.clear_removed)
        top = self.router_row()
        top.addWidget(QLabel("Names"))
        top.addWidget(self.names_edit, 1)
        top.addWidget(self.start_button)
        top.addWidget(self.stop_button)
        top.addWidget(clear)

        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["Term", "State", "Secure", "Subscription",
                                              "Changed"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        for column, width in ((TERM, 56), (STATE, 80), (SECURE, 60), (CHANGED, 96)):
            header.resizeSection(column, width)
        header.setSectionResizeMode(EXPRESSION, QHeaderView.ResizeMode.Stretch)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(2000)
        self._mono = monospace_font()
        self.log.setFont(self._mono)
        self.log.setPlaceholderText("Quench events appear here as subscriptions come and go.")
        # in the table's place when the router has no quench
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.note.setStyleSheet("QLabel { background: palette(base); border: 1px solid "
                                "palette(mid); padding: 24px; color: #5f6368; }")
        self.note.hide()
        # what a producer needs from the quench: the values subscribers want
        self.wanted_table = QTableWidget(0, 2)
        self.wanted_table.setHorizontalHeaderLabels(["Attribute", "Values subscribers want"])
        self.wanted_table.verticalHeader().hide()
        self.wanted_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.wanted_table.setWordWrap(False)
        self.wanted_table.horizontalHeader().resizeSection(0, 120)
        self.wanted_table.horizontalHeader().setSectionResizeMode(
            1, QHeaderView.ResizeMode.Stretch)
        self.wanted_table.setToolTip("Worked out from the subscriptions above "
                                     "(elvin.quenching.wanted): a producer need only "
                                     "send these values")
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(self.note)
        splitter.addWidget(self.wanted_table)
        splitter.addWidget(self.log)
        for index, stretch in enumerate((5, 5, 1, 2)):   # table, note, wanted, log
            splitter.setStretchFactor(index, stretch)
        self.wanted_table.setMinimumHeight(60)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addWidget(self.status_label)
        layout.addWidget(splitter, 1)
        self.set_status("Name the attributes to watch: every subscription at the router "
                        "that refers to them is shown here.")
        self._update_buttons()
        if spec.active and spec.names:
            self.wanted = True
            self.applied = list(spec.names)
        self.ready()

    # -- quench lifecycle ---------------------------------------------------------------
    def start(self) -> bool:
        names = parse_names(self.names_edit.text())
        if not names:
            self.set_status("Name at least one attribute to watch.", error=True)
            return False
        self.wanted = True
        self.applied = names
        spawn(self._start(names), "quench", lambda m: self.set_status(m, error=True))
        return True

    async def _start(self, names: list[str]) -> None:
        async with self._lock:
            await self._close()
            conn = self.connection()
            if conn is None:
                self.set_status(f"Waiting for router {self.router_name or '(none)'} to "
                                "connect; the quench is registered then.")
                return
            self._reset_table()
            try:
                self.quench = await conn.quench(names, listener=self._event, buffer_size=0)
            except QuenchNotSupported:
                self._show_note(
                    f"Router {self.router_name} does not support quench (Elvin protocol "
                    "subset C), so it cannot tell which of its subscriptions refer to "
                    f"{', '.join(names)}.\n\nThe view asks again when the console "
                    "reconnects.")
                self.set_status(f"Not watching: router {self.router_name} does not "
                                "support quench.")
                self._update_buttons()
                return
            except ElvinError as exc:
                self.set_status(f"The router refused the quench: {exc}", error=True)
                return
            self._show_note(None)
            self._refresh_wanted()
            self.names.add(names)
            self.set_status(f"Watching subscriptions on {self.router_name} that refer to "
                            f"{', '.join(names)}.")
            self._update_buttons()

    async def _close(self) -> None:
        quench, self.quench = self.quench, None
        if quench is not None and not quench.closed:
            try:
                await quench.close()
            except (ElvinError, OSError, TimeoutError):
                pass

    def stop(self) -> None:
        self.wanted = False
        spawn(self._stop(), "quench", lambda m: self.set_status(m, error=True))

    async def _stop(self) -> None:
        async with self._lock:
            await self._close()
        self._show_note(None)
        self.set_status("Stopped.")
        self._update_buttons()

    def on_connected(self, conn: Connection) -> None:
        quench = self.quench
        if self.wanted and self.applied and (quench is None or quench.closed or
                                             quench.connection is not conn):
            spawn(self._start(self.applied), "quench", lambda m: self.set_status(m, error=True))

    def on_router_changed(self) -> None:
        if self.wanted and self.applied:
            spawn(self._start(self.applied), "quench", lambda m: self.set_status(m, error=True))
        else:
            spawn(self._stop(), "quench")

    def _show_note(self, text: str | None) -> None:
        """A note in the table's place (None: the table again)."""
        self.note.setText(text or "")
        self.note.setVisible(text is not None)
        self.table.setVisible(text is None)

    @property
    def note_text(self) -> str | None:
        """The note shown instead of the table, if any (tests)."""
        return self.note.text() if not self.note.isHidden() else None

    def _update_buttons(self) -> None:
        active = self.quench is not None and not self.quench.closed
        self.start_button.setText("Change" if active else "Watch")
        self.stop_button.setEnabled(active or self.wanted)

    # -- events ------------------------------------------------------------------------
    def _event(self, event: QuenchEvent) -> None:
        now = time.time()
        self.events.append((now, event))
        if isinstance(event, SubscriptionRemoved):
            row = self.rows.get(event.term_id)
            if row is not None:
                self._set(row, STATE, "removed")
                self._set(row, CHANGED, timestamp(now))
                for column in range(5):
                    item = self.table.item(row, column)
                    item.setForeground(_GONE)
                    item.setBackground(QBrush())
                font = QFont(self._mono)
                font.setStrikeOut(True)
                self.table.item(row, EXPRESSION).setFont(font)
            self._log(now, f"removed  #{event.term_id}")
            self._refresh_wanted()
            return
        state = "added" if isinstance(event, SubscriptionAdded) else "modified"
        text = _expression(event.ast)
        row = self.rows.get(event.term_id)
        if row is None:
            row = self.table.rowCount()
            self.table.insertRow(row)
            self.rows[event.term_id] = row
            for column in range(5):
                self.table.setItem(row, column, QTableWidgetItem())
        self._set(row, TERM, str(event.term_id))
        self._set(row, STATE, state)
        self._set(row, SECURE, "yes" if event.secure else "no")
        self._set(row, EXPRESSION, text)
        self._set(row, CHANGED, timestamp(now))
        self.table.item(row, EXPRESSION).setFont(self._mono)
        self.table.item(row, EXPRESSION).setToolTip(text)
        for column in range(5):
            item = self.table.item(row, column)
            item.setForeground(QBrush())
            item.setBackground(QBrush(_STATE_COLOURS[state]))
        self._log(now, f"{state:<8} #{event.term_id}: {text}")
        self._refresh_wanted()

    def _refresh_wanted(self) -> None:
        quench = self.quench
        subscriptions = dict(quench.subscriptions) if quench is not None else {}
        names = sorted(quench.names) if quench is not None else []
        self.wanted_table.setRowCount(len(names))
        for row, name in enumerate(names):
            text = describe_wanted(name, wanted(subscriptions, name))
            for column, value in enumerate((name, text)):
                item = QTableWidgetItem(value)
                item.setToolTip(value)
                if column == 1:
                    item.setFont(self._mono)
                self.wanted_table.setItem(row, column, item)

    def wanted_values(self) -> dict[str, str]:
        """``{attribute: what subscribers want of it}`` as shown (tests)."""
        return {self.wanted_table.item(r, 0).text(): self.wanted_table.item(r, 1).text()
                for r in range(self.wanted_table.rowCount())}

    def _set(self, row: int, column: int, text: str) -> None:
        self.table.item(row, column).setText(text)

    def _log(self, now: float, text: str) -> None:
        self.log.appendPlainText(f"{timestamp(now)}  {text}")

    def _reset_table(self) -> None:
        self.table.setRowCount(0)
        self.rows.clear()
        self.wanted_table.setRowCount(0)

    def clear_removed(self) -> None:
        keep = [(term, row) for term, row in self.rows.items()
                if self.table.item(row, STATE).text() != "removed"]
        snapshot = [[self.table.item(row, c).text() for c in range(5)] for _t, row in keep]
        states = [self.table.item(row, STATE).text() for _t, row in keep]
        self._reset_table()
        for (term, _old), texts, state in zip(keep, snapshot, states, strict=True):
            row = self.table.rowCount()
            self.table.insertRow(row)
            self.rows[term] = row
            for column, text in enumerate(texts):
                item = QTableWidgetItem(text)
                item.setBackground(QBrush(_STATE_COLOURS.get(state, QColor("white"))))
                if column == EXPRESSION:
                    item.setFont(self._mono)
                    item.setToolTip(text)
                self.table.setItem(row, column, item)

    def active_expressions(self) -> dict[int, str]:
        """``{term id: expression}`` of the terms not removed (tests)."""
        return {term: self.table.item(row, EXPRESSION).text()
                for term, row in self.rows.items()
                if self.table.item(row, STATE).text() != "removed"}

    def state_of(self, term: int) -> str:
        row = self.rows.get(term)
        return self.table.item(row, STATE).text() if row is not None else ""

    # -- workspace ----------------------------------------------------------------------------
    def to_spec(self) -> QuenchSpec:
        return QuenchSpec(title=self.title(), router=self.router_name,
                          names=parse_names(self.names_edit.text()),
                          active=bool(self.wanted))

    async def shutdown(self) -> None:
        self.wanted = False
        async with self._lock:
            await self._close()
