"""A one-line scrolling list: the coffee biff's list of drinkers.

The original biff showed current drinkers on one scrolling line. Here the
line stands still when everything fits (nothing to read twice) and scrolls
smoothly when it does not; hovering pauses it so a name can be read, and
the tooltip lists everybody, one per line.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QLinearGradient, QPainter, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

__all__ = ["Marquee"]

SEPARATOR = "   •   "
GAP = 48          # pixels between the end of the line and its next start
STEP_MS = 30
FADE = 24          # pixels of fade at each edge while scrolling
STEP_PX = 1
HOLD_STEPS = 50   # stand still this many steps (1.5 s) at the start of each pass


class Marquee(QWidget):
    """Shows ``items`` on one line, scrolling when they do not fit;
    ``placeholder`` (greyed, italic) when there are none."""

    def __init__(self, parent: QWidget | None = None, placeholder: str = "") -> None:
        super().__init__(parent)
        self._items: list[str] = []
        self._placeholder = placeholder
        self._offset = 0
        self._hold = HOLD_STEPS
        self._paused = False
        self._timer = QTimer(self)
        self._timer.setInterval(STEP_MS)
        self._timer.timeout.connect(self._step)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAttribute(Qt.WidgetAttribute.WA_Hover)
        self.setAccessibleName("current list")
        self.setToolTip(placeholder)

    # -- content --------------------------------------------------------------------
    def setItems(self, items: list[str]) -> None:  # noqa: N802 (Qt naming)
        if items == self._items:
            return
        self._items = list(items)
        self.setToolTip("\n".join(self._items) if self._items else self._placeholder)
        self.setAccessibleDescription(self.text())
        self._relayout()

    def setPlaceholder(self, text: str) -> None:  # noqa: N802 (Qt naming)
        self._placeholder = text
        if not self._items:
            self.setToolTip(text)
        self.update()

    def items(self) -> list[str]:
        return list(self._items)

    def text(self) -> str:
        """What the line says (the placeholder when empty)."""
        return SEPARATOR.join(self._items) if self._items else self._placeholder

    def isScrolling(self) -> bool:  # noqa: N802 (Qt naming)
        return self._timer.isActive()

    def offset(self) -> int:
        return self._offset

    def rewind(self) -> None:
        """Back to the start of the line (and hold there a moment)."""
        self._offset = 0
        self._hold = HOLD_STEPS
        self.update()

    # -- geometry -----------------------------------------------------------------------
    def sizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        return QSize(240, self.fontMetrics().height() + 10)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        return QSize(60, self.fontMetrics().height() + 10)

    def _text_width(self) -> int:
        return self.fontMetrics().horizontalAdvance(self.text())

    def _fits(self) -> bool:
        return not self._items or self._text_width() <= self.width() - 8

    def _relayout(self) -> None:
        if self._fits():
            self._timer.stop()
            self._offset = 0
            self._hold = HOLD_STEPS
        elif not self._timer.isActive() and not self._paused and self.isVisible():
            self._timer.start()
        self.update()

    # -- events ---------------------------------------------------------------------
    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        super().resizeEvent(event)
        self._relayout()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt API)
        super().showEvent(event)
        self._relayout()

    def hideEvent(self, event) -> None:  # noqa: N802 (Qt API)
        super().hideEvent(event)
        self._timer.stop()

    def enterEvent(self, event) -> None:  # noqa: N802 (Qt API)
        super().enterEvent(event)
        self._paused = True
        self._timer.stop()

    def leaveEvent(self, event) -> None:  # noqa: N802 (Qt API)
        super().leaveEvent(event)
        self._paused = False
        self._relayout()

    def _step(self) -> None:
        if self._hold > 0:
            self._hold -= 1
            return
        self._offset = (self._offset + STEP_PX) % (self._text_width() + GAP)
        if self._offset == 0:
            self._hold = HOLD_STEPS
        self.update()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt API)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        rect = self.rect().adjusted(4, 0, -4, 0)
        painter.setClipRect(rect)
        align = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft
        if not self._items:
            font = QFont(self.font())
            font.setItalic(True)
            painter.setFont(font)
            colour = self.palette().color(QPalette.ColorRole.PlaceholderText)
            painter.setPen(colour if colour.isValid() else QColor("gray"))
            painter.drawText(rect, align, self._placeholder)
            return
        painter.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        text = self.text()
        if not self.isScrolling() and self._fits():
            painter.drawText(rect, align, text)
            return
        width = self._text_width()
        x = rect.left() - self._offset
        while x < rect.right():
            painter.drawText(x, rect.top(), width, rect.height(), align, text)
            x += width + GAP
        # fade the edges into the background: the line goes on beyond them
        background = self.palette().color(QPalette.ColorRole.Window)
        clear = QColor(background)
        clear.setAlpha(0)
        right = QLinearGradient(rect.right() - FADE, 0, rect.right(), 0)
        right.setColorAt(0, clear)
        right.setColorAt(1, background)
        painter.fillRect(QRectF(rect.right() - FADE, rect.top(), FADE + 1, rect.height()), right)
        if self._offset > 0:
            left = QLinearGradient(rect.left(), 0, rect.left() + FADE, 0)
            left.setColorAt(0, background)
            left.setColorAt(1, clear)
            painter.fillRect(QRectF(rect.left(), rect.top(), FADE, rect.height()), left)
