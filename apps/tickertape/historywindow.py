"""The message log window: time, group, from, text; search; thread view;
messages that mention the user stand out (and can be shown alone); a
detail pane shows the selected message in full: text, group, sender, time,
attachment and links, and its thread (whom it answers, how many messages).

It reads from :class:`~elvin_apps.tickertape.history.History` when opened or
searched, and takes live messages in batches (a timer adds what arrived since
the last batch), so a flood of messages does not redraw the tree once per
message.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from html import escape

from elvin_apps.tickertape.history import History
from elvin_apps.tickertape.message import Message
from elvin_apps.tickertape.palette import Palette
from elvin_apps.tickertape.qtcompat import emit
from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QBrush, QColor, QFont, QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QSplitter,
    QTextBrowser,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from elvin.qt import flat_table
from elvin.qt.links import LinkOpener

MAX_ROWS = 5000
COLUMNS = ("Time", "Group", "From", "Message")
MENTION_BACKGROUND = QColor(255, 196, 0, 70)
#: The detail pane's link that shows the selected message's thread.
THREAD_LINK = "thread:show"


class HistoryWindow(QWidget):
    """Signals: ``replyRequested(Message)``."""

    replyRequested = Signal(object)

    def __init__(self, history: History, palette: Palette | None = None,
                 parent: QWidget | None = None, *,
                 is_mention: Callable[[Message], bool] | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.history = history
        self.palette_ = palette or Palette()
        self.is_mention = is_mention or (lambda _m: False)
        self.current: Message | None = None
        self.setWindowTitle("Tickertape history")
        self.resize(820, 560)
        self._pending: list[Message] = []
        self._items: dict[str, QTreeWidgetItem] = {}

        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search text, sender or group…")
        self.search.setClearButtonEnabled(True)
        self.threads = QCheckBox("&Threads", self)
        self.threads.setToolTip("Show replies under the message they answer")
        self.mentions_only = QCheckBox("&Mentions", self)
        self.mentions_only.setToolTip("Show only messages that mention you")
        self.count_label = QLabel(self)
        self.problem_label = QLabel(self)          # a link no program could open
        self.problem_label.setStyleSheet("color: #c62828")
        self.problem_label.setWordWrap(True)
        self.problem_label.hide()
        self.links = LinkOpener(self)
        self.links.failed.connect(self._link_failed)
        self.links.opened.connect(lambda _url: self.problem_label.hide())
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.threads)
        top.addWidget(self.mentions_only)
        top.addWidget(self.count_label)

        self.tree = QTreeWidget(self)
        flat_table(self.tree, COLUMNS, [QHeaderView.ResizeMode.ResizeToContents,
                                        QHeaderView.ResizeMode.Interactive,
                                        QHeaderView.ResizeMode.Interactive], stripes=True)
        self.tree.setColumnWidth(1, 110)
        self.tree.setColumnWidth(2, 160)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._menu)
        self.tree.itemDoubleClicked.connect(
            lambda item, _col: emit(self.replyRequested, item.data(0, Qt.ItemDataRole.UserRole)))

        self.detail = QTextBrowser(self)
        self.detail.setOpenLinks(False)
        self.detail.anchorClicked.connect(self._link_clicked)
        self.detail.setPlaceholderText("Select a message to read it in full")
        self.tree.currentItemChanged.connect(self._current_changed)
        self.splitter = QSplitter(Qt.Orientation.Vertical, self)
        self.splitter.addWidget(self.tree)
        self.splitter.addWidget(self.detail)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([380, 150])

        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.problem_label)
        layout.addWidget(self.splitter)

        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(250)
        self._search_timer.timeout.connect(self.reload)
        self.search.textChanged.connect(lambda _t: self._search_timer.start())
        self.threads.toggled.connect(lambda _on: self.reload())
        self.mentions_only.toggled.connect(lambda _on: self.reload())
        self._batch_timer = QTimer(self)
        self._batch_timer.setInterval(300)
        self._batch_timer.timeout.connect(self._add_pending)
        self._batch_timer.start()
        self.reload()

    # -- content -------------------------------------------------------------
    def messages(self) -> list[Message]:
        """The messages shown, in display order (depth-first in thread view)."""
        out: list[Message] = []

        def walk(item: QTreeWidgetItem) -> None:
            out.append(item.data(0, Qt.ItemDataRole.UserRole))
            for i in range(item.childCount()):
                walk(item.child(i))

        for i in range(self.tree.topLevelItemCount()):
            walk(self.tree.topLevelItem(i))
        return out

    def reload(self) -> None:
        query = self.search.text().strip()
        records = self.history.search(query) if query else self.history.recent()
        self.tree.clear()
        self._items.clear()
        self._pending.clear()
        self.tree.setRootIsDecorated(self.threads.isChecked())
        for record in records:
            if self._wanted(record.message):
                self._insert(record.message)
        if self.threads.isChecked():
            self.tree.expandAll()
        self._update_count()
        self.tree.scrollToBottom()

    def add_message(self, message: Message) -> None:
        """A message just arrived (shown at the next batch)."""
        self._pending.append(message)  # shown live even when it is not archived
        if len(self._pending) > MAX_ROWS:
            del self._pending[:-MAX_ROWS]

    def _add_pending(self) -> None:
        if not self._pending or not self.isVisible():
            return
        pending, self._pending = self._pending, []
        query = self.search.text().strip().casefold()
        at_bottom = self.tree.verticalScrollBar().value() >= \
            self.tree.verticalScrollBar().maximum() - 2
        for message in pending:
            if query and not any(query in f.casefold()
                                 for f in (message.text, message.sender, message.group)):
                continue
            if not self._wanted(message):
                continue
            item = self._insert(message)
            if self.threads.isChecked() and item.parent() is not None:
                item.parent().setExpanded(True)
        while self.tree.topLevelItemCount() > MAX_ROWS:
            old = self.tree.takeTopLevelItem(0)
            self._forget(old)
        self._update_count()
        if at_bottom:
            self.tree.scrollToBottom()

    def _forget(self, item: QTreeWidgetItem) -> None:
        message = item.data(0, Qt.ItemDataRole.UserRole)
        self._items.pop(message.message_id, None)
        for i in range(item.childCount()):
            self._forget(item.child(i))

    def _insert(self, message: Message) -> QTreeWidgetItem:
        when = datetime.fromtimestamp(message.received)
        stamp = when.strftime("%H:%M:%S") if when.date() == datetime.now().date() \
            else when.strftime("%Y-%m-%d %H:%M")
        text = message.text + ("  \N{NORTH EAST ARROW}" if message.urls else "")
        item = QTreeWidgetItem([stamp, message.group, message.sender, text])
        item.setData(0, Qt.ItemDataRole.UserRole, message)
        item.setToolTip(3, message.text[:2000])
        item.setForeground(1, _brush(self.palette_.colour(message.group)))
        if self._mentions(message):
            bold = QFont(self.tree.font())
            bold.setBold(True)
            for column in range(len(COLUMNS)):
                item.setBackground(column, QBrush(MENTION_BACKGROUND))
                item.setFont(column, bold)
            item.setToolTip(0, "Mentions you")
        parent = None
        if self.threads.isChecked():
            parent = self._items.get(message.in_reply_to or "") if message.in_reply_to else None
            if parent is None and message.thread_id:
                parent = self._items.get(message.thread_id)
        if parent is not None:
            parent.addChild(item)
        else:
            self.tree.addTopLevelItem(item)
        self._items.setdefault(message.message_id, item)
        if message.thread_id:
            self._items.setdefault(message.thread_id, item)
        return item

    def _mentions(self, message: Message) -> bool:
        try:
            return bool(self.is_mention(message))
        except Exception:  # noqa: BLE001 - a bad matcher must not empty the log
            return False

    def _wanted(self, message: Message) -> bool:
        return not self.mentions_only.isChecked() or self._mentions(message)

    # -- detail pane -------------------------------------------------------------------
    def _current_changed(self, item: QTreeWidgetItem | None, _previous: object) -> None:
        self.show_detail(item.data(0, Qt.ItemDataRole.UserRole) if item is not None else None)

    def show_detail(self, message: Message | None) -> None:
        """Show ``message`` in full in the detail pane (None: clear it)."""
        self.current = message
        if message is None:
            self.detail.clear()
            return
        referent = None
        if message.in_reply_to:
            referent = self.history.by_message_id(message.in_reply_to)
        thread_size = len(self.history.thread(message)) \
            if (message.in_reply_to or message.thread_id) else 1
        self.detail.setHtml(detail_html(message, referent=referent, thread_size=thread_size,
                                        mention=self._mentions(message)))

    def _link_clicked(self, url: QUrl) -> None:
        if url.toString() == THREAD_LINK:
            if self.current is not None:
                self.show_thread(self.current)
        elif url.scheme() in ("http", "https", "ftp", "mailto"):
            self.links.open(url.toString())

    def _link_failed(self, url: str, why: str) -> None:
        self.problem_label.setText(f"Cannot open {url}: {why}")
        self.problem_label.show()

    def _update_count(self) -> None:
        self.count_label.setText(f"{len(self._items)} shown")

    # -- actions ---------------------------------------------------------------------
    def _menu(self, pos) -> None:
        item = self.tree.itemAt(pos)
        if item is None:
            return
        message: Message = item.data(0, Qt.ItemDataRole.UserRole)
        menu = QMenu(self)
        reply = QAction("Reply…", menu)
        reply.triggered.connect(lambda: emit(self.replyRequested, message))
        menu.addAction(reply)
        copy = QAction("Copy text", menu)
        copy.triggered.connect(
            lambda: QGuiApplication.clipboard().setText(f"{message.sender}: {message.text}"))
        menu.addAction(copy)
        if message.urls:
            link = QAction("Open link", menu)
            link.triggered.connect(lambda: self.links.open(message.urls[0]))
            menu.addAction(link)
        thread = QAction("Show thread", menu)
        thread.triggered.connect(lambda: self.show_thread(message))
        menu.addAction(thread)
        menu.exec(self.tree.viewport().mapToGlobal(pos))

    def show_thread(self, message: Message) -> None:
        """Show only the conversation ``message`` belongs to."""
        self.search.blockSignals(True)
        self.search.clear()
        self.search.blockSignals(False)
        self.threads.blockSignals(True)
        self.threads.setChecked(True)
        self.threads.blockSignals(False)
        self.tree.clear()
        self._items.clear()
        self.tree.setRootIsDecorated(True)
        for m in self.history.thread(message):
            self._insert(m)
        self.tree.expandAll()
        self._update_count()


def detail_html(message: Message, *, referent: Message | None = None,
                thread_size: int = 1, mention: bool = False) -> str:
    """The detail pane's text for ``message`` (escaped: everything in it
    comes from other people)."""
    when = datetime.fromtimestamp(message.received).strftime("%Y-%m-%d %H:%M:%S")
    rows = [("Group", escape(message.group) + (" (private, received with its key)"
                                               if message.secure else "")),
            ("From", escape(message.sender)),
            ("Time", when)]
    if mention:
        rows.append(("", "<b>Mentions you</b>"))
    if message.in_reply_to:
        rows.append(("In reply to", escape(f"{referent.sender}: {referent.text[:200]}")
                     if referent is not None else "a message not in the history"))
    if message.in_reply_to or message.thread_id:
        rows.append(("Thread", f'{thread_size} message{"s" if thread_size != 1 else ""} '
                               f'— <a href="{THREAD_LINK}">show the thread</a>'))
    for url in message.urls:
        rows.append(("Link", f'<a href="{escape(url, quote=True)}">{escape(url)}</a>'))
    if message.attachment and not message.urls:
        rows.append(("Attachment", f"<pre>{escape(message.attachment[:2000])}</pre>"))
    if message.no_archive:
        rows.append(("", "The sender asked archivers not to keep it"))
    table = "".join(f'<tr><td style="color:#777;padding-right:10px">{label}</td>'
                    f"<td>{value}</td></tr>" for label, value in rows)
    text = escape(message.text).replace("\n", "<br>")
    return f'<p style="white-space: pre-wrap">{text}</p><table>{table}</table>'


def _brush(colour: str) -> QBrush:
    return QBrush(QColor(colour).darker(135))
