"""Small builders for what every app's windows set up the same way.

Each is one decision made once: which font shows code and ec text, how a
dialog's OK and Cancel are wired, how a splitter shares its space. An app
that wants something else builds it itself; these are not a layout
language.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QWidget,
)

__all__ = ["dialog_buttons", "flat_table", "monospace_font", "push_button", "split"]


def monospace_font() -> QFont:
    """The font for subscriptions, keys and ec text: a fixed pitch keeps
    columns, brackets and error carets lined up. ``monospace`` alone is a
    fontconfig alias; the style hint finds a fixed font where there is none."""
    font = QFont("monospace")
    font.setStyleHint(QFont.StyleHint.TypeWriter)
    return font


def dialog_buttons(dialog: QDialog, accept_text: str | None = None
                   ) -> tuple[QDialogButtonBox, QPushButton]:
    """OK (or a button saying ``accept_text``) and Cancel, wired to the
    dialog's accept and reject. Returns the box, to lay out, and the accept
    button, which a dialog that checks its input enables and disables.

    The box has no parent until it is laid out, so that it comes last in the
    dialog's tab order and the first field, not OK, has the focus; once
    shown, it makes the accept button the default (Enter)."""
    cancel = QDialogButtonBox.StandardButton.Cancel
    if accept_text is None:
        box = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | cancel)
        accept = box.button(QDialogButtonBox.StandardButton.Ok)
    else:
        box = QDialogButtonBox(cancel)
        accept = box.addButton(accept_text, QDialogButtonBox.ButtonRole.AcceptRole)
    box.accepted.connect(dialog.accept)
    box.rejected.connect(dialog.reject)
    return box, accept


def push_button(text: str, tip: str, action: Callable[..., object]) -> QPushButton:
    """A button that says what it does when hovered, and does it when clicked."""
    button = QPushButton(text)
    button.setToolTip(tip)
    button.clicked.connect(action)
    return button


def split(orientation: Qt.Orientation, *parts: tuple[QWidget, int]) -> QSplitter:
    """``parts`` (widget, stretch) side by side or stacked: each keeps its
    share of the space as the window resizes, and none can be dragged to
    nothing (a collapsed part looks like a missing one)."""
    splitter = QSplitter(orientation)
    for index, (widget, stretch) in enumerate(parts):
        splitter.addWidget(widget)
        splitter.setStretchFactor(index, stretch)
    splitter.setChildrenCollapsible(False)
    return splitter


def flat_table(tree: QTreeWidget, headers: Sequence[str] | int,
               sizes: Sequence[QHeaderView.ResizeMode], *, stripes: bool = False
               ) -> QHeaderView:
    """``tree`` as a table of rows without children: ``headers`` (or a
    column count, with the header hidden), no branch decoration, rows of one
    height (so long lists lay out fast), column ``i`` sized as ``sizes[i]``
    says. A last column without a size stretches, so that the rows always
    fill the width; ``stripes`` alternates the rows' colours. Returns the
    header, for what a table sets beyond this."""
    if isinstance(headers, int):
        tree.setColumnCount(headers)
        tree.setHeaderHidden(True)
    else:
        tree.setColumnCount(len(headers))
        tree.setHeaderLabels(list(headers))
    tree.setRootIsDecorated(False)
    tree.setUniformRowHeights(True)
    tree.setAlternatingRowColors(stripes)
    header = tree.header()
    header.setStretchLastSection(len(sizes) < tree.columnCount())
    for column, size in enumerate(sizes):
        header.setSectionResizeMode(column, size)
    return header
