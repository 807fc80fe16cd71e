"""Explain a match: why a subscription does (not) match a notification.

No other pub/sub console has this, and it is what a developer needs when a
subscription stays silent: which clause failed, and why (a missing
attribute, a value of the wrong type, or simply the values). The dialog
holds a notification as ec text (taken from a consumer's selected row, a
producer's draft, or pasted/typed by the user) and a subscription; every
edit re-explains. The results come from ``elvin.subscription.explain``
(the reference interpreter, recorded) — there is no evaluator here.

The tree shows each sub-expression with its three-valued result; the
clauses that make the whole fail (``explain.failing``) are bold on red
with "fails here".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from elvin_apps.console.completion import AttributeNames, NameCompleter
from elvin_apps.console.ectextedit import EcTextEdit
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from elvin.qt import SubscriptionEditor, monospace_font, split
from elvin.qt.geometry import fit_to_screen
from elvin.subscription.explain import Step, explain, failing, index_placement
from elvin.text import format_notification
from elvin.values import Value

__all__ = ["ExplainDialog", "Source", "FAILS_ROLE"]

# (menu text, a callable giving the notification now, or None when there is none)
Source = tuple[str, Callable[[], Mapping[str, Value] | None]]
FAILS_ROLE = Qt.ItemDataRole.UserRole + 7

_MARKS = {True: "\N{CHECK MARK} true", False: "\N{BALLOT X} false",
          None: "\N{UP TACK} bottom"}
_FOREGROUND = {True: QColor("#2e7d32"), False: QColor("#c62828"), None: QColor("#6a1b9a")}
_FAILS_BACKGROUND = QBrush(QColor("#ffebee"))
_VERDICTS = {
    True: ("<span style='color:#2e7d32'><b>\N{CHECK MARK} Matches</b></span>: "
           "the router delivers this notification to this subscription."),
    False: ("<span style='color:#c62828'><b>\N{BALLOT X} Does not match</b></span> "
            "(false): see the clauses marked <b>fails here</b>."),
    None: ("<span style='color:#6a1b9a'><b>\N{UP TACK} Does not match</b></span> "
           "(bottom: a missing attribute or a wrong type): see <b>fails here</b>."),
}


class ExplainDialog(QDialog):
    """Non-modal; ``sources()`` lists where a notification can be taken from."""

    def __init__(self, names: AttributeNames, sources: Callable[[], list[Source]],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Explain a match")
        self.sources = sources
        self.steps: list[Step] = []
        self.failing: list[int] = []

        self.notification_text = EcTextEdit(
            'The notification in ec text, e.g.\nSymbol: "ACME"\nPrice: 12.5\n\n'
            "or take one from a pane with the button above.")
        self.notification_edit = self.notification_text.edit
        self.notification_error = self.notification_text.error_label
        self.take_button = QToolButton()
        self.take_button.setText("Take from")
        self.take_button.setToolTip("Use the row selected in a consumer pane, or a "
                                    "producer's draft")
        self.take_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.take_menu = QMenu(self)
        self.take_menu.aboutToShow.connect(self._fill_take_menu)
        self.take_button.setMenu(self.take_menu)
        head = QHBoxLayout()
        head.addWidget(QLabel("<b>Notification</b> (ec text: paste, type or take)"), 1)
        head.addWidget(self.take_button)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addLayout(head)
        left_layout.addWidget(self.notification_text, 1)

        self.editor = SubscriptionEditor(self)
        self.editor.edit.setPlaceholderText('Subscription, e.g. Price < 10 && Symbol == "ACME"')
        self.editor.edit.setFixedHeight(self.editor.edit.fontMetrics().lineSpacing() * 3 + 14)
        self.editor.edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.editor.edit.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.completer = NameCompleter(self.editor, names)
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        self.verdict.setTextFormat(Qt.TextFormat.RichText)
        #: where a router's index files the subscription (why it is slow, or not)
        self.index_label = QLabel()
        self.index_label.setWordWrap(True)
        self.index_label.setTextFormat(Qt.TextFormat.PlainText)
        self.index_label.setStyleSheet("color: #555")
        self.index_label.setToolTip(
            "Which notifications a router evaluates this subscription for. In a value, "
            "range, prefix or suffix index: only those that meet the condition. In the "
            "name index (scanned): every notification that has the attribute, which is "
            "what makes thousands of regex or contains subscriptions slow.")
        self.tree = QTreeWidget()
        self.tree.setColumnCount(3)
        self.tree.setHeaderLabels(["Result", "Sub-expression", "Why"])
        self.tree.setUniformRowHeights(True)
        header = self.tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        header.resizeSection(1, 240)
        self._mono = monospace_font()
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(QLabel("<b>Subscription</b>"))
        right_layout.addWidget(self.editor)
        right_layout.addWidget(self.verdict)
        right_layout.addWidget(self.index_label)
        right_layout.addWidget(self.tree, 1)

        layout = QVBoxLayout(self)
        layout.addWidget(split(Qt.Orientation.Horizontal, (left, 1), (right, 2)))
        self.notification_edit.textChanged.connect(self.update_explanation)
        self.editor.expressionChanged.connect(self.update_explanation)
        fit_to_screen(self, QSize(1080, 520))
        self.update_explanation()

    # -- input -------------------------------------------------------------------------
    def set_notification(self, attributes: Mapping[str, Value]) -> None:
        self.notification_edit.setPlainText(format_notification(attributes))

    def set_expression(self, expression: str) -> None:
        if expression and expression != self.editor.expression():
            self.editor.setExpression(expression)

    def _fill_take_menu(self) -> None:
        menu = self.take_menu
        menu.clear()
        found = False
        for text, get in self.sources():
            found = True
            action = menu.addAction(text)
            action.triggered.connect(lambda _checked=False, g=get, t=text: self._take(g, t))
        if not found:
            menu.addAction("No consumer or producer pane").setEnabled(False)

    def _take(self, get: Callable[[], Mapping[str, Value] | None], text: str) -> None:
        attributes = get()
        if attributes is None:
            self.notification_text.say(f"{text}: nothing there (select a row first).")
            return
        self.set_notification(attributes)

    def notification(self) -> dict[str, Value] | None:
        """The notification in the editor; None (with the error shown) if it is
        not valid ec text."""
        found = self.notification_text.read()
        if not found:
            return None
        if len(found) > 1:
            self.notification_text.say(f"Explaining the first of {len(found)} notifications.")
        return found[0]

    # -- output ------------------------------------------------------------------------
    def update_explanation(self, *_args) -> None:
        self.tree.clear()
        self.steps, self.failing = [], []
        attributes = self.notification()
        self.index_label.setText(_index_text(self.editor.ast()) if self.editor.isValid() else "")
        if not self.editor.isValid():
            self.verdict.setText("Write a subscription to explain." if not
                                 self.editor.expression().strip() else
                                 "Fix the subscription first.")
            return
        if attributes is None:
            self.verdict.setText("Paste, type or take a notification to explain.")
            return
        self.steps = explain(self.editor.ast(), attributes)
        self.failing = failing(self.steps)
        self.verdict.setText(_VERDICTS[self.steps[0].result])
        parents: list[QTreeWidgetItem] = []
        for index, step in enumerate(self.steps):
            fails = index in self.failing
            mark = _MARKS[step.result] + ("  \N{BLACK RIGHT-POINTING TRIANGLE} fails here"
                                          if fails else "")
            item = QTreeWidgetItem([mark, step.text, step.reason])
            item.setForeground(0, _FOREGROUND[step.result])
            item.setFont(1, self._mono)
            item.setToolTip(1, step.text)
            item.setToolTip(2, step.reason)
            item.setData(0, FAILS_ROLE, fails)
            if fails:
                bold = QFont(self._mono)
                bold.setBold(True)
                item.setFont(1, bold)
                for column in range(3):
                    item.setBackground(column, _FAILS_BACKGROUND)
            del parents[step.depth:]
            if parents:
                parents[-1].addChild(item)
            else:
                self.tree.addTopLevelItem(item)
            parents.append(item)
        self.tree.expandAll()
        self.tree.resizeColumnToContents(1)
        limit = max(self.tree.viewport().width() * 2 // 5, 160)
        if self.tree.columnWidth(1) > limit:
            self.tree.setColumnWidth(1, limit)

    def failing_texts(self) -> list[str]:
        """The sub-expressions marked "fails here" (tests)."""
        return [self.steps[i].text for i in self.failing]


def _index_text(tree) -> str:
    lines = index_placement(tree)
    if len(lines) == 1:
        return f"Router index: {lines[0]}"
    return "Router index, one of:\n" + "\n".join(f"  {line}" for line in lines)
