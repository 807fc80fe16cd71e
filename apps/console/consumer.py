"""The consumer pane: write a subscription, watch what matches it.

Top: the router, the subscription editor (highlighting, live parse error at
its position, completion of attribute names seen so far), keys and the
insecure flag. An invalid expression is never sent: the Subscribe button is
disabled and ``apply`` refuses it. A valid one is sent with SubAddRqst, or
SubModRqst when the pane is already subscribed (the table keeps its rows).

Below: the live table (``NotificationTableModel`` behind a text/regex
filter), fed in batches by a timer, with pause/resume, a bounded buffer that
drops the oldest rows and says how many, a rate indicator, columns chosen
from the names received, and the detail of the selected notification
diffed against the row above it. With a key attribute chosen (``Group``,
``Symbol``), a tree of key values sits beside the table, the detail is
diffed against the previous notification of the same key and plots draw a
line per key value (``keyindex``, ``keytree``). "Explain…" asks the window
to explain the selected row against the pane's subscription.
"""

from __future__ import annotations

import asyncio
import time

from elvin_apps.console.backtest import BacktestDialog
from elvin_apps.console.completion import AttributeNames, NameCompleter
from elvin_apps.console.detailview import DetailView
from elvin_apps.console.export import FORMATS, ExportError, export, format_for_path
from elvin_apps.console.keyindex import KeyIndex, key_of, previous_of_key
from elvin_apps.console.keyseditor import KeysButton
from elvin_apps.console.keytext import KeySpec
from elvin_apps.console.keytree import KeyTree
from elvin_apps.console.notificationmodel import (
    RECORD_ROLE,
    NotificationFilter,
    NotificationTableModel,
)
from elvin_apps.console.pane import Pane
from elvin_apps.console.plot import MAX_PLOTTED, AttributePlot
from elvin_apps.console.rate import RateMeter
from elvin_apps.console.received import Received
from elvin_apps.console.routers import RouterRegistry
from elvin_apps.console.tasks import spawn
from elvin_apps.console.workspace import MAX_BUFFER, MIN_BUFFER, ConsumerSpec
from PySide6.QtCore import QItemSelection, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QSpinBox,
    QTableView,
    QToolButton,
    QWidget,
)

from elvin.client import Connection, Notification, Subscription
from elvin.errors import ElvinError
from elvin.keys import EMPTY_KEYS
from elvin.qt import SubscriptionEditor, split

__all__ = ["ConsumerPane"]

FLUSH_INTERVAL_MS = 100


def _count(n: int) -> str:
    return f"{n:,}"


class StayOpenMenu(QMenu):
    """A menu of check boxes that stays open while the user ticks several
    (a plain QMenu closes after each click)."""

    def mouseReleaseEvent(self, event) -> None:
        action = self.actionAt(event.position().toPoint())
        if action is not None and action.isCheckable() and action.isEnabled():
            action.trigger()
            return
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event) -> None:
        action = self.activeAction()
        if event.key() in (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter) and \
                action is not None and action.isCheckable() and action.isEnabled():
            action.trigger()
            return
        super().keyPressEvent(event)


class ConsumerPane(Pane):
    kind = "consumer"

    def __init__(self, registry: RouterRegistry, names: AttributeNames,
                 spec: ConsumerSpec | None = None, parent: QWidget | None = None,
                 flush_interval_ms: int = FLUSH_INTERVAL_MS) -> None:
        spec = spec or ConsumerSpec()
        super().__init__(registry, spec.title or "Consumer", spec.router, parent)
        self.names = names
        self.sub: Subscription | None = None
        self.wanted = False
        self.applied: tuple[str, KeySpec, bool] | None = None
        self._lock = asyncio.Lock()
        self._seen: set[str] = set()
        self._numeric: set[str] = set()
        self.rate = RateMeter()
        self._counted = 0

        # -- subscription row ------------------------------------------------------------
        self.editor = SubscriptionEditor(self, spec.subscription)
        self.editor.edit.setPlaceholderText('Subscription, e.g. require(Price) && Symbol == "ACME"'
                                            "  (Ctrl+Space completes attribute names)")
        self.editor.edit.setFixedHeight(self.editor.edit.fontMetrics().lineSpacing() * 3 + 14)
        self.completer = NameCompleter(self.editor, names, submit=self.apply)
        self.insecure_box = QCheckBox("Accept insecure")
        self.insecure_box.setChecked(spec.accept_insecure)
        self.insecure_box.setToolTip("Also receive notifications that match without keys")
        self.keys_button = KeysButton(KeySpec(spec.producer_keys, spec.consumer_keys),
                                      "Subscription keys", self)
        self.subscribe_button = QPushButton("Subscribe")
        self.subscribe_button.setToolTip("Send the subscription to the router (Ctrl+Enter)")
        self.subscribe_button.setDefault(True)
        self.subscribe_button.clicked.connect(self.apply)
        self.unsubscribe_button = QPushButton("Unsubscribe")
        self.unsubscribe_button.clicked.connect(self.unsubscribe)
        self.backtest_button = QPushButton("Back-test…")
        self.backtest_button.setToolTip("Run this subscription over a router's traffic "
                                        "archive (elvin-pipeline, on Spark)")
        self.backtest_button.clicked.connect(self.backtest_dialog)
        self.backtest: BacktestDialog | None = None
        self.backtest_archive = ""
        for sequence in ("Ctrl+Return", "Ctrl+Enter"):
            shortcut = QShortcut(QKeySequence(sequence), self.editor.edit)
            shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
            shortcut.activated.connect(self.apply)
        top = self.router_row()
        top.addWidget(self.insecure_box)
        top.addWidget(self.keys_button)
        top.addStretch(1)
        top.addWidget(self.subscribe_button)
        top.addWidget(self.unsubscribe_button)
        top.addWidget(self.backtest_button)

        # -- table toolbar ------------------------------------------------------------------
        self.model = NotificationTableModel(spec.buffer)
        self.model.on_flush = self._flushed
        self.proxy = NotificationFilter(self)
        self.proxy.setSourceModel(self.model)
        self.pause_button = QPushButton("Pause")
        self.pause_button.setCheckable(True)
        self.pause_button.setToolTip("Stop updating the table; what arrives meanwhile is kept "
                                     "(up to the buffer size) and shown on Resume")
        self.pause_button.toggled.connect(self.set_paused)
        self.clear_button = QPushButton("Clear")
        self.clear_button.clicked.connect(self.clear)
        self.filter_edit = QLineEdit(spec.filter)
        self.filter_edit.setPlaceholderText("Filter received: text in names or values")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.setMinimumWidth(140)
        self.regex_box = QCheckBox("Regex")
        self.regex_box.setChecked(spec.regex)
        self.filter_edit.textChanged.connect(self._filter_changed)
        self.regex_box.toggled.connect(self._filter_changed)
        self.columns_button = QToolButton()
        self.columns_button.setText("Columns")
        self.columns_button.setToolTip("Show chosen attributes as columns")
        self.columns_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.columns_menu = StayOpenMenu(self)
        self.columns_menu.aboutToShow.connect(self._fill_columns_menu)
        self.columns_button.setMenu(self.columns_menu)
        self.key_combo = QComboBox()
        self.key_combo.addItem("No key", "")
        self.key_combo.setToolTip("Key attribute (e.g. Group, Symbol): a tree with counts "
                                  "and latest values per key value, the detail compared "
                                  "with the previous notification of the same key, one "
                                  "plot line per key value")
        self.key_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.key_combo.activated.connect(
            lambda index: self.set_key(self.key_combo.itemData(index) or ""))
        self.buffer_spin = QSpinBox()
        self.buffer_spin.setRange(MIN_BUFFER, MAX_BUFFER)
        self.buffer_spin.setSingleStep(1000)
        self.buffer_spin.setGroupSeparatorShown(True)
        self.buffer_spin.setValue(spec.buffer)
        self.buffer_spin.setPrefix("Keep ")
        self.buffer_spin.setSuffix(" rows")
        self.buffer_spin.setToolTip("Rows kept; when more arrive the oldest are dropped "
                                    "(and counted) so memory stays bounded")
        self.buffer_spin.editingFinished.connect(
            lambda: self.set_capacity(self.buffer_spin.value()))
        self.follow_box = QCheckBox("Follow")
        self.follow_box.setChecked(True)
        self.follow_box.setToolTip("Keep the newest row in view")
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Save the rows shown (after the filter) as ec text, "
                                      "JSON lines or CSV")
        self.export_button.clicked.connect(self.export_dialog)
        self.detail_button = QToolButton()
        self.detail_button.setText("Detail")
        self.detail_button.setCheckable(True)
        self.detail_button.setChecked(spec.detail)
        self.detail_button.setToolTip("Show the selected notification's detail (and the plot) "
                                      "under the table; off: the table takes the room")
        tools = QHBoxLayout()
        tools.addWidget(self.pause_button)
        tools.addWidget(self.clear_button)
        tools.addSpacing(8)
        tools.addWidget(self.filter_edit, 1)
        tools.addWidget(self.regex_box)
        tools.addWidget(self.columns_button)
        tools.addWidget(QLabel("Key"))
        tools.addWidget(self.key_combo)
        tools.addSpacing(8)
        tools.addWidget(self.buffer_spin)
        tools.addWidget(self.follow_box)
        tools.addWidget(self.export_button)
        tools.addWidget(self.detail_button)

        # -- table and detail -------------------------------------------------------------
        self.view = QTableView()
        self.view.setMinimumHeight(48)
        self.view.setModel(self.proxy)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setWordWrap(False)
        self.view.setAlternatingRowColors(True)
        self.view.setSortingEnabled(False)
        self.view.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        vertical = self.view.verticalHeader()
        vertical.hide()
        vertical.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vertical.setDefaultSectionSize(self.view.fontMetrics().height() + 6)
        header = self.view.horizontalHeader()
        header.setStretchLastSection(True)
        header.setSectionsMovable(True)
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(self._header_menu)
        self.view.selectionModel().selectionChanged.connect(self._selection_changed)
        self.detail = DetailView()
        self.detail.explain_button.clicked.connect(self.explain_selected)
        self.plot = AttributePlot()
        self.plot.hide()
        # below the table: the plot (when something is plotted) beside the detail
        below = split(Qt.Orientation.Horizontal, (self.plot, 0), (self.detail, 0))
        self.keys = KeyIndex()
        self.key_tree = KeyTree(self.keys)
        self.key_tree.keyActivated.connect(self.select_latest_of)
        self.key_tree.hide()
        self.table_split = split(Qt.Orientation.Horizontal, (self.key_tree, 1), (self.view, 3))
        self.splitter = split(Qt.Orientation.Vertical, (self.table_split, 3), (below, 2))
        self.below = below
        self.detail_button.toggled.connect(self.set_detail_shown)
        below.setVisible(spec.detail)

        self.stats_label = QLabel()
        self.stats_label.setTextFormat(Qt.TextFormat.RichText)
        layout = self.column(top)
        layout.addWidget(self.editor)
        layout.addWidget(self.status_label)
        layout.addLayout(tools)
        layout.addWidget(self.splitter, 1)
        layout.addWidget(self.stats_label)

        self.editor.validityChanged.connect(self._update_buttons)
        self.editor.validityChanged.connect(self._clear_not_sent)
        self.editor.expressionChanged.connect(self._update_buttons)
        self.insecure_box.toggled.connect(self._update_buttons)
        self.keys_button.changed.connect(self._update_buttons)
        self.set_columns(spec.columns)
        self.set_plotted(spec.plots)
        if spec.key:
            self._offer_key(spec.key)
            self.set_key(spec.key)
        self._filter_changed()
        self._update_buttons()
        self.set_status("Not subscribed. Write a subscription and press Subscribe "
                        "(Ctrl+Enter).")
        self._update_stats()
        self.timer = QTimer(self)
        self.timer.setInterval(flush_interval_ms)
        self.timer.timeout.connect(self.tick)
        self.timer.start()
        if spec.subscribed and spec.subscription and self.editor.isValid():
            self.wanted = True
            self.applied = (spec.subscription, self.keys_button.spec(), spec.accept_insecure)
            self.set_status(f"Waiting for router {self.router_name or '(none)'} to connect; "
                            "the subscription is sent then.")
        self.ready()

    def _clear_not_sent(self, valid: bool) -> None:
        """A "Not sent: <parse error>" is stale once the expression is valid."""
        if valid and self.status_label.text().startswith("Not sent"):
            self.set_status("The expression is valid: Subscribe (Ctrl+Enter) sends it.")

    # -- subscription ----------------------------------------------------------------------
    def apply(self) -> bool:
        """Subscribe with the editor's expression (or change the subscription).
        Returns False, sending nothing, when the expression is invalid."""
        self.completer.hide()
        if not self.editor.isValid():
            error = self.editor.error()
            self.set_status("Not sent: " + (self.editor.errorText() or
                                            (error.message if error else
                                             "the subscription is empty")), error=True)
            self.editor.edit.setFocus()
            return False
        self.wanted = True
        self.applied = (self.editor.expression(), self.keys_button.spec(),
                        self.insecure_box.isChecked())
        spawn(self._apply(*self.applied), "subscribing",
              lambda message: self.set_status(message, error=True))
        self._update_buttons()
        return True

    async def _apply(self, expression: str, keys: KeySpec, insecure: bool) -> None:
        async with self._lock:
            conn = self.connection()
            if conn is None:
                self.set_status(f"Waiting for router {self.router_name or '(none)'} to "
                                "connect; the subscription is sent then.")
                return
            sub_keys = keys.subscription_keys() or EMPTY_KEYS
            sub = self.sub
            try:
                if sub is not None and not sub.closed and sub.connection is conn:
                    await sub.modify(expression, keys_add=sub_keys - sub.keys,
                                     keys_del=sub.keys - sub_keys, accept_insecure=insecure)
                    verb = "Subscription changed"
                else:
                    await self._close_sub()
                    self.sub = await conn.subscribe(
                        expression, keys=sub_keys, accept_insecure=insecure, buffer_size=0,
                        listener=self._deliver)
                    verb = "Subscribed"
            except ElvinError as exc:
                self.set_status(f"The router refused the subscription: {exc}", error=True)
                return
            secure = " with keys" if sub_keys else ""
            self.set_status(f"{verb} on {self.router_name}{secure}: {_one_line(expression)}")
            self._update_buttons()

    def _deliver(self, notification: Notification) -> None:
        # hot path: one small record per delivery, shown by the next flush
        self.model.enqueue(notification.attributes, notification.secure)

    async def _close_sub(self) -> None:
        sub, self.sub = self.sub, None
        if sub is not None and not sub.closed:
            try:
                await sub.close()
            except (ElvinError, OSError, TimeoutError):
                pass   # the connection is going: nothing to remove

    def unsubscribe(self) -> None:
        self.wanted = False
        spawn(self._unsubscribe(), "unsubscribing",
              lambda message: self.set_status(message, error=True))

    async def _unsubscribe(self) -> None:
        async with self._lock:
            await self._close_sub()
        self.set_status("Not subscribed.")
        self._update_buttons()

    @property
    def subscribed(self) -> bool:
        return self.sub is not None and not self.sub.closed

    def on_connected(self, conn: Connection) -> None:
        sub = self.sub
        if self.wanted and self.applied and (sub is None or sub.closed or
                                             sub.connection is not conn):
            spawn(self._apply(*self.applied), "subscribing",
                  lambda message: self.set_status(message, error=True))

    def on_router_changed(self) -> None:
        spawn(self._switch_router(), "changing router",
              lambda message: self.set_status(message, error=True))

    async def _switch_router(self) -> None:
        async with self._lock:
            await self._close_sub()
        if self.wanted and self.applied:
            await self._apply(*self.applied)
        else:
            self._update_buttons()

    def _update_buttons(self, *_args) -> None:
        valid = self.editor.isValid()
        subscribed = self.subscribed
        current = (self.editor.expression(), self.keys_button.spec(),
                   self.insecure_box.isChecked())
        edited = self.applied is None or current != self.applied
        button = self.subscribe_button
        if not subscribed:
            button.setText("Subscribe")
            button.setEnabled(valid)
        elif edited:
            button.setText("Update")
            button.setEnabled(valid)
        else:
            button.setText("Subscribed")
            button.setEnabled(False)
        self.unsubscribe_button.setEnabled(subscribed or self.wanted)
        self.backtest_button.setEnabled(valid)
        if not valid and self.editor.expression().strip():
            button.setToolTip("Fix the expression first: an invalid subscription is never "
                              "sent")
        elif subscribed and edited:
            button.setToolTip("Change the subscription to what the editor says (Ctrl+Enter); "
                              "the rows received so far stay")
        elif subscribed:
            button.setToolTip("The router has this subscription; edit it to change it")
        else:
            button.setToolTip("Send the subscription to the router (Ctrl+Enter)")

    # -- back-test ------------------------------------------------------------------------
    def backtest_dialog(self) -> BacktestDialog | None:
        """Open the back-test of the editor's expression (one dialog per pane;
        a new expression replaces the old dialog unless it is running)."""
        if not self.editor.isValid():
            self.set_status("Back-test: fix the expression first", error=True)
            return None
        dialog = self.backtest
        expression = self.editor.expression()
        if dialog is not None and (dialog.running or dialog.expression == expression):
            dialog.show()
            dialog.raise_()
            return dialog
        if dialog is not None:
            self.backtest_archive = dialog.archive_edit.text()
            dialog.deleteLater()
        dialog = BacktestDialog(expression, self.backtest_archive, parent=self)
        dialog.finished_run.connect(
            lambda _outcome: setattr(self, "backtest_archive", dialog.archive_edit.text()))
        self.backtest = dialog
        dialog.show()
        return dialog

    # -- the table ------------------------------------------------------------------------
    def tick(self) -> int:
        """Timer: show what arrived, update the rate and counters."""
        now = time.monotonic()
        added = self.model.flush()
        self.rate.add(self.model.received - self._counted, now)
        self._counted = self.model.received
        if added and self.follow_box.isChecked():
            self.view.scrollToBottom()
        self._update_stats(now)
        return added

    def _flushed(self, batch: list[Received]) -> None:
        seen = self._seen
        new = set()
        for record in batch:
            for name, value in record.attributes.items():
                if name not in seen:
                    new.add(name)
                    seen.add(name)
                    if isinstance(value, (int, float)):
                        self._numeric.add(name)
        if new:
            self.names.add(new)
            for name in sorted(new, key=str.casefold):
                self._offer_key(name)
        if self.keys.key:
            self.key_tree.update_keys(self.keys.feed(batch))
        if self.plot.names:
            self.plot.feed(batch, self.proxy.accepts)

    def set_plotted(self, names: list[str]) -> None:
        """Plot these numeric attributes over time (up to four)."""
        self.plot.set_names(names)
        if self.keys.key:
            self.plot.set_key(self.keys.key, self.model.rows(), self.proxy.accepts)

    # -- key attribute ----------------------------------------------------------------
    def _offer_key(self, name: str) -> None:
        """Add ``name`` to the key choices, in sorted place."""
        combo = self.key_combo
        if combo.findData(name) >= 0:
            return
        at = 1
        while at < combo.count() and combo.itemText(at).casefold() < name.casefold():
            at += 1
        combo.insertItem(at, name, name)

    def set_key(self, name: str) -> None:
        """Use ``name`` as the key attribute ("" for none): the per-key tree,
        the same-key diff and one plot line per key value, from the rows
        already received on."""
        if name:
            self._offer_key(name)
        self.key_combo.setCurrentIndex(max(self.key_combo.findData(name), 0))
        self.keys.key = name
        self.keys.clear()
        self.keys.feed(self.model.rows())
        self.key_tree.rebuild()
        self.key_tree.setVisible(bool(name))
        self.plot.set_key(name, self.model.rows(), self.proxy.accepts)
        indexes = self.view.selectionModel().selectedRows()
        if indexes:
            self.show_detail(indexes[0].row())

    def set_detail_shown(self, shown: bool) -> None:
        self.below.setVisible(shown)
        if self.detail_button.isChecked() != shown:
            self.detail_button.setChecked(shown)

    def select_latest_of(self, key_value: str) -> None:
        """Select the newest row of this key value (tree click)."""
        entry = self.keys.stats.get(key_value)
        if entry is None:
            return
        row = self._source_row(entry.latest)
        if row is None:
            return
        proxy_index = self.proxy.mapFromSource(self.model.index(row, 0))
        if proxy_index.isValid():
            self.view.selectRow(proxy_index.row())
            self.view.scrollTo(proxy_index)
        else:           # hidden by the filter: show it anyway
            self._show_source_row(row)

    def _source_row(self, record: Received) -> int | None:
        rows = self.model.rows()
        low, high = 0, len(rows) - 1
        while low <= high:            # rows are in delivery (seq) order
            middle = (low + high) // 2
            seq = rows[middle].seq
            if seq == record.seq:
                return middle
            if seq < record.seq:
                low = middle + 1
            else:
                high = middle - 1
        return None

    def toggle_plot(self, name: str, on: bool) -> None:
        names = list(self.plot.names)
        if on and name not in names:
            names.append(name)
        elif not on and name in names:
            names.remove(name)
        self.set_plotted(names)

    def set_paused(self, paused: bool) -> None:
        self.model.paused = paused
        if self.pause_button.isChecked() != paused:
            self.pause_button.setChecked(paused)
        if not paused:
            self.tick()
        self._update_stats()

    @property
    def paused(self) -> bool:
        return self.model.paused

    def clear(self) -> None:
        self.model.clear()
        self.plot.clear()
        self.keys.clear()
        self.key_tree.rebuild()
        self.detail.show_record(None, None)
        self._update_stats()

    def set_capacity(self, capacity: int) -> None:
        self.model.set_capacity(capacity)
        if self.buffer_spin.value() != capacity:
            self.buffer_spin.setValue(capacity)
        self._update_stats()

    def _update_stats(self, now: float | None = None) -> None:
        model = self.model
        now = time.monotonic() if now is None else now
        shown = self.proxy.rowCount()
        parts = [f"<b>{_count(model.rowCount())}</b> of {_count(model.capacity)} rows"]
        if self.proxy.active:
            parts.append(f"{_count(shown)} match the filter")
        parts.append(f"<b>{self.rate.rate(now):,.1f}</b>/s")
        parts.append(f"{_count(model.received)} received")
        if model.dropped:
            parts.append(f"<span style='color:#c62828'><b>{_count(model.dropped)}</b> "
                         "dropped (oldest, buffer full)</span>")
        if model.paused:
            parts.append(f"<span style='color:#b35900'><b>paused</b>: "
                         f"{_count(model.waiting)} buffered</span>")
        self.stats_label.setText(" · ".join(parts))
        self.pause_button.setText(f"Resume ({_count(model.waiting)})" if model.paused
                                  else "Pause")

    # -- columns -----------------------------------------------------------------------
    def set_columns(self, names: list[str]) -> None:
        self.model.set_columns(names)
        header = self.view.horizontalHeader()
        widths = {0: 56, 1: 96, 2: 56}
        for column, width in widths.items():
            header.resizeSection(column, width)
        for column in range(3, self.model.summary_column):
            header.resizeSection(column, 120)

    def seen_names(self) -> list[str]:
        return sorted(self._seen, key=str.casefold)

    def _fill_columns_menu(self) -> None:
        menu = self.columns_menu
        menu.clear()
        chosen = self.model.columns()
        # one stable order (by name), whatever is ticked: ticking never moves
        # an entry under the pointer
        names = sorted(set(chosen) | self._seen, key=str.casefold)
        if not names:
            action = menu.addAction("No attributes received yet")
            action.setEnabled(False)
            return
        for name in names[:200]:
            action = QAction(name, menu)
            action.setCheckable(True)
            action.setChecked(name in chosen)
            action.toggled.connect(lambda on, n=name: self.toggle_column(n, on))
            menu.addAction(action)
        if chosen:
            menu.addSeparator()
            menu.addAction("Hide all attribute columns", lambda: self.set_columns([]))
        numeric = [n for n in names if n in self._numeric]
        if numeric:
            plot_menu = StayOpenMenu("Plot over time", menu)
            menu.addMenu(plot_menu)
            for name in numeric[:50]:
                action = QAction(name, plot_menu)
                action.setCheckable(True)
                action.setChecked(name in self.plot.names)
                action.setEnabled(name in self.plot.names or
                                  len(self.plot.names) < MAX_PLOTTED)
                action.toggled.connect(lambda on, n=name: self.toggle_plot(n, on))
                action.toggled.connect(lambda _on, m=plot_menu: self._plot_limit(m))
                plot_menu.addAction(action)

    def _plot_limit(self, menu: QMenu) -> None:
        """The open Plot menu: at the limit, only ticked names can change."""
        full = len(self.plot.names) >= MAX_PLOTTED
        for action in menu.actions():
            action.setEnabled(action.isChecked() or not full)

    def toggle_column(self, name: str, on: bool) -> None:
        columns = self.model.columns()
        if on and name not in columns:
            columns.append(name)
        elif not on and name in columns:
            columns.remove(name)
        self.set_columns(columns)

    def _header_menu(self, point) -> None:
        header = self.view.horizontalHeader()
        column = header.logicalIndexAt(point)
        menu = QMenu(self)
        name = self.model.column_name(column)
        if name:
            menu.addAction(f"Hide column {name}", lambda: self.toggle_column(name, False))
            if name in self._numeric:
                plotted = name in self.plot.names
                menu.addAction(f"{'Stop plotting' if plotted else 'Plot'} {name} over time",
                               lambda: self.toggle_plot(name, not plotted))
        self._fill_columns_menu()
        menu.addMenu(self.columns_menu).setText("Columns")
        menu.exec(header.mapToGlobal(point))

    # -- filter ----------------------------------------------------------------------------
    def _filter_changed(self, *_args) -> None:
        error = self.proxy.set_filter(self.filter_edit.text(), self.regex_box.isChecked())
        self.filter_edit.setStyleSheet("border: 1px solid #c62828;" if error else "")
        self.filter_edit.setToolTip(error or "Only rows whose ec text contains this "
                                             "(or matches the regex) are shown")
        self._update_stats()

    # -- detail ------------------------------------------------------------------------
    def _selection_changed(self, selected: QItemSelection, _deselected) -> None:
        indexes = self.view.selectionModel().selectedRows()
        if not indexes:
            return
        self.show_detail(indexes[0].row())

    def show_detail(self, proxy_row: int) -> None:
        """Show the detail of a visible row, diffed with the visible row above,
        or with a key attribute, with the previous notification of that key
        (filtered out or not)."""
        if self.keys.key:
            source = self.proxy.mapToSource(self.proxy.index(proxy_row, 0))
            self._show_source_row(source.row())
            return
        record = self.proxy.index(proxy_row, 0).data(RECORD_ROLE)
        previous = self.proxy.index(proxy_row - 1, 0).data(RECORD_ROLE) \
            if proxy_row > 0 else None
        self.detail.show_record(record, previous)

    def _show_source_row(self, row: int) -> None:
        rows = self.model.rows()
        if not 0 <= row < len(rows):
            return
        key = self.keys.key
        record = rows[row]
        self.detail.show_record(record, previous_of_key(rows, row, key),
                                f"{key} {key_of(record, key)}" if key else "")

    def selected_record(self) -> Received | None:
        indexes = self.view.selectionModel().selectedRows()
        return indexes[0].data(RECORD_ROLE) if indexes else None

    def explain_selected(self) -> None:
        record = self.selected_record()
        self.explainRequested.emit(record.attributes if record else None,
                                   self.editor.expression())

    def visible_records(self) -> list[Received]:
        if not self.proxy.active:
            return self.model.records()
        proxy = self.proxy
        return [proxy.index(row, 0).data(RECORD_ROLE) for row in range(proxy.rowCount())]

    # -- export ----------------------------------------------------------------------------
    def export_dialog(self) -> None:
        filters = ";;".join(f for f, _ext in FORMATS.values())
        path, chosen = QFileDialog.getSaveFileName(self, "Export received notifications",
                                                   "received.ec", filters)
        if not path:
            return
        fmt = next((name for name, (f, _e) in FORMATS.items() if f == chosen), None)
        fmt = format_for_path(path, fmt or "ec")
        try:
            count = self.export_to(path, fmt)
        except ExportError as exc:
            QMessageBox.warning(self, "Export", str(exc))
            return
        self.set_status(f"Exported {_count(count)} notifications to {path}")

    def export_to(self, path: str, fmt: str | None = None) -> int:
        return export(self.visible_records(), path, fmt)

    # -- workspace -----------------------------------------------------------------------
    def to_spec(self) -> ConsumerSpec:
        applied = self.applied
        keys = self.keys_button.spec()
        return ConsumerSpec(
            title=self.title(), router=self.router_name,
            subscription=self.editor.expression(),
            subscribed=bool(self.wanted and applied and applied[0] == self.editor.expression()),
            columns=self.model.columns(), buffer=self.model.capacity,
            accept_insecure=self.insecure_box.isChecked(),
            producer_keys=keys.producer, consumer_keys=keys.consumer,
            filter=self.filter_edit.text(), regex=self.regex_box.isChecked(),
            plots=list(self.plot.names), key=self.keys.key,
            detail=self.detail_button.isChecked())

    async def shutdown(self) -> None:
        self.timer.stop()
        self.wanted = False
        if self.backtest is not None:
            self.backtest.cancel()      # no Spark child outlives the console
        async with self._lock:
            await self._close_sub()


def _one_line(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"

