"""The tickertape's "news" preset: a dialog that writes a news subscription.

Users should not have to learn the subscription language to say "LWN and
Hacker News, titles mentioning python or rust". The dialog offers the feeds
the local newswatcher knows (from its status file, else its config), words
for the title (any or all of them), an author and a category, and shows the
expression it builds as you type; ``expression()`` is the text to subscribe
with (or to put in the tickertape's extra subscription).

The expression is shaped for the newswatcher's quench as much as for the
reader: ``News-Feed == "lwn"`` (or ``equals(News-Feed, ...)``) lets the
newswatcher poll only the chosen feeds, and the title/author tests, on
article values, let auto-quench drop the other articles before they leave
the newswatcher. Text tests use ``fold-case`` so that case does not matter
(the words are folded here, with the same Unicode case folding the router
uses).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from elvin.qt import dialog_buttons

__all__ = ["NewsPresetDialog", "ask_news_subscription", "build_expression",
           "expression_clauses", "known_feeds", "split_words"]

#: Shown instead of the (empty) feed list.
NO_FEEDS_TEXT = ("No feeds to choose from yet: no newswatcher on this computer has "
                 "announced any (it lists its feeds once it runs; start it with "
                 "<code>newswatcher</code>). Type feed names under <i>Other feeds</i>, or "
                 "leave them empty to get articles from every feed.")


def quote(text: str) -> str:
    """``text`` as a subscription string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def split_words(text: str) -> list[str]:
    """Words from a free-text field: separated by commas or spaces, with
    "double quotes" keeping a phrase together; duplicates dropped."""
    words = []
    for quoted, plain in re.findall(r'"([^"]*)"|([^\s,]+)', text):
        word = (quoted or plain).strip()
        if word and word.casefold() not in (w.casefold() for w in words):
            words.append(word)
    return words


def _any_or_all(tests: list[str], all_of: bool) -> str:
    if len(tests) == 1:
        return tests[0]
    return "(" + (" && " if all_of else " || ").join(tests) + ")"


def build_expression(feeds: Iterable[str] = (), title_words: Iterable[str] = (), *,
                     all_words: bool = False, author: str = "",
                     categories: Iterable[str] = ()) -> str:
    """The subscription for the choices; no choice at all means every
    newswatcher article (``require(News-Feed)``)."""
    return " && ".join(expression_clauses(feeds, title_words, all_words=all_words,
                                          author=author, categories=categories))


def expression_clauses(feeds: Iterable[str] = (), title_words: Iterable[str] = (), *,
                       all_words: bool = False, author: str = "",
                       categories: Iterable[str] = ()) -> list[str]:
    """The clauses :func:`build_expression` joins with ``&&`` (the dialog's
    preview shows one per line)."""
    feeds = [f for f in dict.fromkeys(f.strip() for f in feeds) if f]
    parts = ["require(News-Feed)"]
    if len(feeds) == 1:
        parts = [f"News-Feed == {quote(feeds[0])}"]
    elif feeds:
        parts = ["equals(News-Feed, " + ", ".join(quote(f) for f in feeds) + ")"]
    words = [w for w in title_words if w.strip()]
    if words:
        tests = [f"contains(fold-case(News-Title), {quote(w.strip().casefold())})"
                 for w in words]
        parts.append(_any_or_all(tests, all_words))
    if author.strip():
        parts.append(f"contains(fold-case(News-Author), {quote(author.strip().casefold())})")
    cats = [c.strip().replace("|", "/").lower() for c in categories if c.strip()]
    if cats:
        parts.append(_any_or_all([f"contains(News-Categories, {quote('|' + c + '|')})"
                                  for c in cats], False))
    return parts


#: where a newswatcher run as a system service (packaging/systemd) keeps its
#: status (``StateDirectory=newswatcher``) and reads its config
SYSTEM_DATA_DIRS = (Path("/var/lib/newswatcher"),)
SYSTEM_CONFIGS = (Path("/etc/elvin/newswatcher.toml"),)


def _status_feeds(directory: Path) -> list[str]:
    from elvin_apps.newswatcher.status import STATUS_NAME
    try:
        document = json.loads((directory / STATUS_NAME).read_text("utf-8"))
        return [f["name"] for f in document.get("feeds", []) if isinstance(f.get("name"), str)]
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return []


def known_feeds(data_dir: Path | None = None, config_path: Path | None = None, *,
                system_dirs: Sequence[Path] = SYSTEM_DATA_DIRS,
                system_configs: Sequence[Path] = SYSTEM_CONFIGS) -> list[str]:
    """Feed names of the newswatchers on this computer: the status files
    (what runs now) of the user's own and of the system service's (which
    runs as another user: reading only the user's state said "no
    newswatcher" while one ran), else their config files; empty when none
    is readable."""
    from elvin_apps.newswatcher.config import ConfigError, default_data_dir, load

    def merged(lists: Iterable[list[str]]) -> list[str]:
        seen: dict[str, None] = {}
        for names in lists:
            seen.update(dict.fromkeys(names))
        return list(seen)

    running = merged(_status_feeds(d) for d in (data_dir or default_data_dir(), *system_dirs))
    if running:
        return running

    def configured(path: Path | None) -> list[str]:
        try:
            return [f.name for f in load(path, must_exist=path is not None).feeds]
        except (ConfigError, OSError):
            return []
    return merged(configured(p) for p in (config_path, *[c for c in system_configs
                                                          if c.is_file()]))


class NewsPresetDialog(QDialog):
    """Build a news subscription. ``expression()`` is valid (it parses)
    whenever the OK button is enabled."""

    def __init__(self, feeds: Sequence[str] = (), parent: QWidget | None = None, *,
                 selected: Iterable[str] = ()) -> None:
        super().__init__(parent)
        self.setWindowTitle("News subscription")
        self.resize(520, 480 if feeds else 380)
        chosen = set(selected)

        self.feed_list = QListWidget(self)
        for name in feeds:
            item = QListWidgetItem(name, self.feed_list)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if name in chosen
                               else Qt.CheckState.Unchecked)
        self.other_feeds = QLineEdit(self)
        self.other_feeds.setPlaceholderText("other feed names, comma separated")
        self.title_words = QLineEdit(self)
        self.title_words.setPlaceholderText('e.g. python rust "free software"')
        self.all_words = QCheckBox("all of the words (else any)", self)
        self.author = QLineEdit(self)
        self.author.setPlaceholderText("part of the author's name")
        self.categories = QLineEdit(self)
        self.categories.setPlaceholderText("e.g. linux, security")
        self.preview = QPlainTextEdit(self)
        self.preview.setReadOnly(True)
        self.preview.setMaximumHeight(90)
        # one clause per line, never wrapped: a wrap would break names like
        # fold-case at their hyphen and make the expression hard to read
        self.preview.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.preview.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.error = QLabel(self)
        self.error.setStyleSheet("color: #b00020")
        self.error.setWordWrap(True)

        form = QFormLayout()
        hint = QLabel("Feeds (none ticked: every feed)", self)
        form.addRow(hint)
        form.addRow(self.feed_list)
        self.no_feeds = QLabel(NO_FEEDS_TEXT, self)
        self.no_feeds.setWordWrap(True)
        self.no_feeds.setStyleSheet("color: #5f6368; padding: 6px 0")
        form.addRow(self.no_feeds)
        if feeds:
            self.no_feeds.hide()
        else:
            hint.hide()
            self.feed_list.hide()
        form.addRow("Other feeds:", self.other_feeds)
        form.addRow("Words in title:", self.title_words)
        form.addRow("", self.all_words)
        form.addRow("Author:", self.author)
        form.addRow("Categories:", self.categories)
        form.addRow("Subscription:", self.preview)
        self.buttons, self.ok_button = dialog_buttons(self)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)

        self.feed_list.itemChanged.connect(lambda _item: self._update())
        for edit in (self.other_feeds, self.title_words, self.author, self.categories):
            edit.textChanged.connect(lambda _text: self._update())
        self.all_words.toggled.connect(lambda _on: self._update())
        self._update()

    # -- the result ----------------------------------------------------------------
    def chosen_feeds(self) -> list[str]:
        names = [self.feed_list.item(i).text() for i in range(self.feed_list.count())
                 if self.feed_list.item(i).checkState() == Qt.CheckState.Checked]
        names += [n.strip() for n in self.other_feeds.text().split(",") if n.strip()]
        return list(dict.fromkeys(names))

    def clauses(self) -> list[str]:
        return expression_clauses(self.chosen_feeds(), split_words(self.title_words.text()),
                                  all_words=self.all_words.isChecked(),
                                  author=self.author.text(),
                                  categories=self.categories.text().split(","))

    def expression(self) -> str:
        return " && ".join(self.clauses())

    def _update(self) -> None:
        from elvin.errors import SubscriptionError
        from elvin.subscription import parse
        text = self.expression()
        self.preview.setPlainText("\n&& ".join(self.clauses()))
        try:
            parse(text)
        except SubscriptionError as exc:
            self.error.setText(f"Cannot use this: {exc}")
            ok = False
        else:
            self.error.setText("")
            ok = True
        self.ok_button.setEnabled(ok)


def ask_news_subscription(parent: QWidget | None = None,
                          feeds: Sequence[str] | None = None) -> str | None:
    """Show the dialog; the expression, or None when cancelled. ``feeds``
    defaults to :func:`known_feeds`."""
    dialog = NewsPresetDialog(known_feeds() if feeds is None else feeds, parent)
    if dialog.exec() == QDialog.DialogCode.Accepted:
        return dialog.expression()
    return None
