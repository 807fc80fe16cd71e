"""SubscriptionEditor: a subscription text field with highlighting and
live checking by ``elvin.subscription.parse``; where the precedence of the
shift and bitwise operators decides how an expression groups (the language
does not follow C there), it says how it reads."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QSyntaxHighlighter,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QTextEdit, QVBoxLayout, QWidget

from elvin.errors import SubscriptionError
from elvin.qt.widgets import monospace_font
from elvin.subscription.ast import FUNCTION_KINDS, Node

__all__ = ["SubscriptionEditor", "SubscriptionHighlighter", "tokens"]

# token classes, in the order they are tried
_TOKEN_RE = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?)
  | (?P<number>0[xX][0-9a-fA-F]+[lL]?|(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[lL]?)
  | (?P<operator>>>>|<<|>>|==|!=|<=|>=|&&|\|\||\^\^|[-+*/%&|^~!<>=(),])
  | (?P<name>(?:[^\s()\[\],'"\\]|\\.)+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)

_FOLLOWED_BY_PAREN = re.compile(r"\s*\(")


def tokens(text: str):
    """``(kind, start, length)`` for each token: ``string``, ``number``,
    ``operator``, ``function``, ``name`` or ``other``."""
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "space":
            continue
        start, end = m.span()
        if kind == "name":
            word = m.group()
            if word in FUNCTION_KINDS and _FOLLOWED_BY_PAREN.match(text, end):
                kind = "function"
            elif re.fullmatch(r"[-+]?\d.*", word):
                kind = "number"
        yield kind, start, end - start


def _format(colour: str, bold: bool = False, italic: bool = False) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(colour))
    if bold:
        fmt.setFontWeight(QFont.Weight.Bold)
    if italic:
        fmt.setFontItalic(True)
    return fmt


FORMATS = {
    "name": _format("#1f4e9c"),                 # blue
    "string": _format("#2e7d32"),               # green
    "number": _format("#b35900"),               # orange
    "operator": _format("#6a1b9a", bold=True),  # purple
    "function": _format("#00838f", bold=True),  # teal
    "other": _format("#c62828"),                # red
}


class SubscriptionHighlighter(QSyntaxHighlighter):
    """Colours names, strings, numbers, operators and function names."""

    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)

    def highlightBlock(self, text: str) -> None:
        """Colour one line of the expression by its tokens (Qt calls it per block)."""
        for kind, start, length in tokens(text):
            self.setFormat(start, length, FORMATS[kind])


class SubscriptionEditor(QWidget):
    """An editor for one subscription expression.

    As the text changes it is parsed with ``elvin.subscription.parse``; an
    error is shown under the editor (message and position) and the place is
    underlined with a red wavy line. A valid expression that mixes shift or
    bitwise operators with others without parentheses gets a grey line
    "Reads as: (A | 2) + 1" (``reading()``). ``validityChanged(bool)`` is emitted
    when the expression becomes valid or invalid, ``expressionChanged(str)``
    on every edit. An empty editor is invalid but shows no error.
    """

    validityChanged = Signal(bool)
    expressionChanged = Signal(str)

    def __init__(self, parent: QWidget | None = None, text: str = "") -> None:
        super().__init__(parent)
        self.edit = QPlainTextEdit(self)
        self.edit.setPlaceholderText('e.g. TICKERTAPE == "Chat" && require(TICKERTEXT)')
        self.edit.setTabChangesFocus(True)
        self.edit.setFont(monospace_font())
        self.highlighter = SubscriptionHighlighter(self.edit.document())
        self.error_label = QLabel(self)
        self.error_label.setStyleSheet("color: #c62828;")
        self.error_label.setWordWrap(True)
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()
        self.reading_label = QLabel(self)
        self.reading_label.setStyleSheet("color: #555555;")
        self.reading_label.setWordWrap(True)
        self.reading_label.setTextFormat(Qt.TextFormat.PlainText)
        self.reading_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.reading_label.setToolTip("How the precedence of the operators groups this "
                                      "expression: + - bind loosest, then * / %, then "
                                      "<< >> >>>, then |, ^ and & (tightest)")
        self.reading_label.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.error_label)
        layout.addWidget(self.reading_label)
        self._valid = False
        self._error: SubscriptionError | None = None
        self._ast: Node | None = None
        self.edit.textChanged.connect(self._check)
        if text:
            self.setExpression(text)

    # -- API --------------------------------------------------------------------------
    def expression(self) -> str:
        """The expression as typed."""
        return self.edit.toPlainText()

    def setExpression(self, text: str) -> None:
        """Replace the text; it is parsed and highlighted at once."""
        self.edit.setPlainText(text)

    def isValid(self) -> bool:
        """True when the expression parses and checks."""
        return self._valid

    def error(self) -> SubscriptionError | None:
        """The current parse error, if any."""
        return self._error

    def errorText(self) -> str:
        """The error shown under the editor, or "" when none is."""
        return self.error_label.text() if self.error_label.isVisibleTo(self) else ""

    def ast(self):
        """The parsed expression, or None when invalid."""
        return self._ast

    def reading(self) -> str:
        """The "Reads as" line shown under the editor, or "" when none is."""
        return self.reading_label.text() if self.reading_label.isVisibleTo(self) else ""

    def underlined(self) -> list[tuple[int, int]]:
        """``(start, length)`` of the spans underlined as errors."""
        return [(s.cursor.selectionStart(), s.cursor.selectionEnd() - s.cursor.selectionStart())
                for s in self.edit.extraSelections()]

    # -- checking -------------------------------------------------------------------
    def _check(self) -> None:
        from elvin.subscription import parse
        text = self.expression()
        error = None
        ast = None
        if text.strip():
            try:
                ast = parse(text)
            except SubscriptionError as exc:
                error = exc
            except Exception as exc:  # noqa: BLE001 - never let a parser bug break the editor
                error = SubscriptionError("PARSE_ERROR", str(exc), None, text)
        self._ast = ast
        self._error = error
        self._show_error(text, error)
        self._show_reading(text, ast)
        # the state first, then the signals: a slot that asks isValid() or
        # ast() must hear about this text, not the one before it
        valid = ast is not None
        flipped = valid != self._valid
        self._valid = valid
        self.expressionChanged.emit(text)
        if flipped:
            self.validityChanged.emit(valid)

    def _show_reading(self, text: str, ast) -> None:
        from elvin.subscription.unparse import implicit_groupings
        groupings = []
        if ast is not None:
            try:
                groupings = implicit_groupings(ast, text)
            except Exception:  # noqa: BLE001 - a hint must never break the editor
                groupings = []
        if groupings:
            self.reading_label.setText("Reads as: " + ";  ".join(groupings))
            self.reading_label.show()
        else:
            self.reading_label.clear()
            self.reading_label.hide()

    def _show_error(self, text: str, error: SubscriptionError | None) -> None:
        if error is None:
            self.error_label.clear()
            self.error_label.hide()
            self.edit.setExtraSelections([])
            return
        position = error.position
        where = ""
        if position is not None:
            line = text.count("\n", 0, position) + 1
            column = position - (text.rfind("\n", 0, position) + 1) + 1
            where = f"line {line}, column {column}: " if "\n" in text else \
                f"column {column}: "
        self.error_label.setText(f"{where}{error.message} ({error.code})")
        self.error_label.show()
        if position is None:
            start, end = 0, len(text)
        else:
            start = min(max(position, 0), len(text))
            end = start + 1
            if start >= len(text):        # error at the end: mark the last character
                start, end = max(len(text) - 1, 0), len(text)
            else:
                # underline the whole token that starts at the error position
                for _kind, tok_start, length in tokens(text):
                    if tok_start == start:
                        end = start + length
                        break
        selection = QTextEdit.ExtraSelection()
        fmt = QTextCharFormat()
        fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
        fmt.setUnderlineColor(QColor("#d50000"))
        selection.format = fmt
        cursor = QTextCursor(self.edit.document())
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        selection.cursor = cursor
        self.edit.setExtraSelections([selection])
