"""Completing attribute names in the subscription editor.

Names are learnt from what the consumer panes actually receive (and from
names typed in producer panes), so completion offers the names this
router's traffic really uses, spelt as it spells them; function names of
the subscription language follow. One ``AttributeNames`` model is shared by
every pane of the window.

``SubscriptionEditor`` keeps its ``QPlainTextEdit`` inside, so the
completer is attached from outside: an event filter forwards the keys the
popup needs and the word before the cursor is the completion prefix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from PySide6.QtCore import QEvent, QObject, QRect, QStringListModel, Qt
from PySide6.QtGui import QKeyEvent, QTextCursor
from PySide6.QtWidgets import QCompleter, QPlainTextEdit

from elvin.qt import SubscriptionEditor
from elvin.subscription.ast import FUNCTION_KINDS

__all__ = ["AttributeNames", "NameCompleter", "escape_name", "word_before"]

# characters that end a name in the subscription language (besides space)
_STOP = set("()[],'\"\\=<>!&|^~*/%+")
_SAFE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]*")


class AttributeNames(QObject):
    """The attribute names seen so far, as a sorted ``QStringListModel``."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._names: set[str] = set()
        self.model = QStringListModel(self)
        self._refresh()

    def __contains__(self, name: str) -> bool:
        return name in self._names

    def names(self) -> list[str]:
        return sorted(self._names, key=str.casefold)

    def add(self, names: Iterable[str]) -> bool:
        """Learn names; returns True when one was new."""
        known = self._names
        new = [n for n in names if n not in known]
        if not new:
            return False
        known.update(new)
        self._refresh()
        return True

    def _refresh(self) -> None:
        functions = sorted(set(FUNCTION_KINDS) - self._names)
        self.model.setStringList(self.names() + functions)


def escape_name(name: str) -> str:
    """A name as it must be written in a subscription (backslash escapes)."""
    if _SAFE_NAME.fullmatch(name):
        return name
    return "".join("\\" + ch if ch.isspace() or ch in _STOP or ch == "#" else ch
                   for ch in name)


def word_before(text: str, position: int) -> tuple[int, str]:
    """``(start, word)``: the partial name that ends at ``position``."""
    start = position
    while start > 0:
        ch = text[start - 1]
        escaped = start >= 2 and text[start - 2] == "\\"
        if (ch.isspace() or ch in _STOP) and not escaped:
            break
        start -= 1
    return start, text[start:position]


class NameCompleter(QObject):
    """A QCompleter popup for names in a SubscriptionEditor: pops up after
    two typed characters of a name (or Ctrl+Space), Tab/Enter inserts.

    Ctrl+Enter while the popup is open closes it and calls ``submit`` (the
    pane's "Subscribe"): the popup holds the keyboard, so the editor's own
    Ctrl+Enter shortcut would not see the key."""

    def __init__(self, editor: SubscriptionEditor, names: AttributeNames,
                 submit: Callable[[], object] | None = None) -> None:
        super().__init__(editor)
        self.editor = editor
        self.names = names
        self.submit = submit
        self.edit: QPlainTextEdit = editor.edit
        self.completer = QCompleter(names.model, self)
        self.completer.setWidget(self.edit)
        self.completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        self.completer.setFilterMode(Qt.MatchFlag.MatchStartsWith)
        self.completer.activated[str].connect(self.insert)
        self.edit.installEventFilter(self)
        # while the popup is open it has the keyboard, and QCompleter hands
        # the keys to the edit past its event filters: the text's own signal
        # is what hears each keystroke, so the list narrows as one types
        self.edit.textChanged.connect(self._text_changed)

    def prefix(self) -> tuple[int, str]:
        cursor = self.edit.textCursor()
        return word_before(self.edit.toPlainText(), cursor.position())

    def hide(self) -> None:
        """Close the popup (the expression was sent, or the edit lost interest)."""
        self.completer.popup().hide()

    def insert(self, name: str) -> None:
        start, _word = self.prefix()
        cursor = self.edit.textCursor()
        cursor.setPosition(start, QTextCursor.MoveMode.MoveAnchor)
        cursor.setPosition(self.edit.textCursor().position(), QTextCursor.MoveMode.KeepAnchor)
        function = name in FUNCTION_KINDS and name not in self.names
        cursor.insertText(name + "(" if function else escape_name(name))
        self.edit.setTextCursor(cursor)
        self.completer.popup().hide()

    def _text_changed(self) -> None:
        if self.completer.popup().isVisible():
            self.update_popup()

    def update_popup(self, force: bool = False) -> None:
        _start, word = self.prefix()
        if len(word) < (1 if force else 2):
            self.completer.popup().hide()
            return
        self.completer.setCompletionPrefix(word)
        if self.completer.completionCount() == 0:
            self.completer.popup().hide()
            return
        if self.completer.completionCount() == 1 and \
                self.completer.currentCompletion() == word and not force:
            self.completer.popup().hide()
            return
        # below the whole edit (above it where the screen has no room), at
        # the word's column: the popup never covers the lines being written
        cursor = self.edit.cursorRect()
        x = self.edit.viewport().mapTo(self.edit, cursor.topLeft()).x()
        width = self.completer.popup().sizeHintForColumn(0) + \
            self.completer.popup().verticalScrollBar().sizeHint().width() + 12
        self.completer.complete(QRect(x, 0, width, self.edit.height() + 1))

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if obj is not self.edit or event.type() != QEvent.Type.KeyPress:
            return False
        key_event: QKeyEvent = event  # type: ignore[assignment]
        popup = self.completer.popup()
        key = key_event.key()
        if popup.isVisible() and key in (Qt.Key.Key_Enter, Qt.Key.Key_Return) and \
                key_event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            popup.hide()
            if self.submit is not None:
                self.submit()
            return True
        if popup.isVisible() and key in (Qt.Key.Key_Enter, Qt.Key.Key_Return, Qt.Key.Key_Tab,
                                         Qt.Key.Key_Escape, Qt.Key.Key_Backtab):
            if key == Qt.Key.Key_Escape:
                popup.hide()
                return True
            index = popup.currentIndex()
            text = index.data() if index.isValid() else self.completer.currentCompletion()
            if text:
                self.insert(text)
            return True
        if key == Qt.Key.Key_Space and key_event.modifiers() & \
                Qt.KeyboardModifier.ControlModifier:
            self.update_popup(force=True)
            return True
        if key_event.text() and not key_event.modifiers() & \
                Qt.KeyboardModifier.ControlModifier:
            # let the edit insert the character first, then look at the word
            self.edit.event(event)
            self.update_popup()
            return True
        return False
