"""The scrolling line: paints the model's messages and handles the mouse.

Smoothness comes from three choices: a precise ~60 Hz QTimer that moves the
line by ``speed * elapsed`` (so a late frame does not slow the scroll down),
one cached pixmap per message (text is laid out once, when the message
arrives or is replaced, never per frame), and painting only the messages
that are on screen. The timer stops when there is nothing to show, so an
idle ticker costs no CPU.

When messages arrive faster than one line shows them, the line says how
many wait ("+N waiting") and speeds up just enough that the oldest waiting
message enters within ``ENTRY_DEADLINE`` seconds of its arrival (the time
paused does not count), up to ``MAX_HURRY`` px/s; a message that still
waited more than ``SKIP_AFTER`` (a flood no line can show) is left out of
the line, "N skipped: in history" says so, and the history has it. Neither
xtickertape (a constant speed: a backlog waits, or expires unseen) nor
Sticker 3 (a still stack that scrolls once full) bounds the delay; under
moderate chat (a 700 px message every 2 s at 80 px/s) the line of either
falls further behind with every message, which is how this one used to
run 30 s behind the history. Speeding up shows every message of moderate
chat, each for as long as the chat leaves room for; skipping is kept for
floods, where showing everything in time cannot be done. While the pointer
holds the line (or its right-click menu is open), it says "paused". The badge has a slot of its own at the right end:
messages enter from the slot's left edge, never scroll underneath it.

Whether the pointer is over the line is asked of the pointer itself after
a menu closes, and checked on every frame while paused by it: a window
manager or a popup's grab can swallow the Leave event (after right-click ▸
Mute, the line used to stay paused until hovered again).
"""

from __future__ import annotations

import time
from collections import deque
from datetime import datetime

from elvin_apps.tickertape.lane import FADE_OUT, Item, Lane
from elvin_apps.tickertape.message import Message
from elvin_apps.tickertape.model import Entry, ScrollerModel
from elvin_apps.tickertape.palette import text_colour_on
from elvin_apps.tickertape.qtcompat import emit
from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QColor,
    QContextMenuEvent,
    QCursor,
    QFont,
    QFontMetricsF,
    QGuiApplication,
    QLinearGradient,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
    QPixmap,
    QResizeEvent,
)
from PySide6.QtWidgets import QMenu, QToolTip, QWidget

from elvin.qt.links import LinkOpener

BACKGROUND = QColor("#1d1f21")
TEXT = QColor("#e6e6e6")
MENTION = QColor("#ffe8a3")
MENTION_BAND = QColor(255, 196, 0, 48)
DIM = QColor("#9aa0a6")
#: Widest a message is drawn (pixels); longer text is cut with an ellipsis
#: (the full text is in the tooltip and the history).
MAX_ITEM_WIDTH = 2400.0
FRAME_INTERVAL_MS = 16
#: Opacity a message has faded to when its lifetime ends.
MIN_OPACITY = 0.35
DRAG_THRESHOLD = 4
EDGE_FADE = 18.0
#: Fastest the line runs to catch up with a backlog, as a multiple of the
#: user's speed; each waiting message adds ``CATCH_UP_STEP`` to the factor.
MAX_CATCH_UP = 3.0
CATCH_UP_STEP = 0.25
#: Seconds after its arrival by which a waiting message should have entered
#: the line (it is "shown"): the line runs as fast as that takes
ENTRY_DEADLINE = 3.5
#: Fastest the line runs to meet the deadline, in px/s
MAX_HURRY = 1500.0
#: Seconds a message may wait before it is skipped (left to the history)
SKIP_AFTER = 4.5
#: Seconds "N skipped: in history" stays on the badge after the last skip
SKIPPED_NOTICE = 10.0
#: Pixels a tooltip adds around its text (frame and margins), generously.
TIP_FRAME = 16
BADGE = QColor(40, 42, 46)
#: Pixels between the messages' area and the badge.
BADGE_GAP = 6.0
BADGE_TEXT = QColor("#ffd166")
#: Minutes offered by the right-click "Mute" menu (None: until restart).
MUTE_CHOICES: tuple[tuple[str, float | None], ...] = (
    ("for 1 hour", 3600.0), ("until Tickertape restarts", None))


class ScrollerWidget(QWidget):
    """One horizontally scrolling line of messages.

    Signals: ``replyRequested(Message)``, ``composeRequested()``,
    ``urlOpened(str)`` (after a click asked for a message's attachment to be
    opened), ``urlFailed(str, str)`` (the link and why no program opened it).
    """

    replyRequested = Signal(object)
    composeRequested = Signal()
    urlOpened = Signal(str)
    urlFailed = Signal(str, str)

    def __init__(self, model: ScrollerModel, *, speed: float = 80.0,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.speed = float(speed)
        self.lane = Lane(max(1, self.width()), measure=self._measure_uid)
        self.open_urls = True       # tests turn this off to keep the desktop quiet
        self.background = QColor(BACKGROUND)
        self.text_colour = QColor(TEXT)
        self.user_paused = False    # the menu's "Pause scrolling"
        self._cache: dict[int, tuple[int, QPixmap]] = {}
        self._hover = False
        self._menu_open = False
        self._press_x: float | None = None
        self._last_drag_x = 0.0
        self._dragging = False
        self._last_tick = time.monotonic()
        self._pending_click: Item | None = None
        #: messages left out of the line by a flood (``SKIP_AFTER``), and when
        self.skipped = 0
        self._skipped_at = 0.0
        self.frame_costs: deque[float] = deque(maxlen=600)   # seconds per paint
        self.tick_gaps: deque[float] = deque(maxlen=600)     # seconds between ticks

        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        # tooltips also when its window is not the active one (Qt looks for
        # this on the window: the strip alone, or TickerWindow, which sets it)
        self.setAttribute(Qt.WidgetAttribute.WA_AlwaysShowToolTips)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        font = QFont(self.font())
        font.setPointSizeF(max(font.pointSizeF(), 11.0))
        self.setFont(font)

        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(FRAME_INTERVAL_MS)
        self._timer.timeout.connect(self._tick)
        self._click_timer = QTimer(self)
        self._click_timer.setSingleShot(True)
        self._click_timer.timeout.connect(self._single_click)
        self.links = LinkOpener(self)
        self.links.failed.connect(self.urlFailed)

        model.added.connect(self._on_added)
        model.replaced.connect(self._on_replaced)
        model.removed.connect(self._on_removed)
        model.cleared.connect(self._on_cleared)
        for entry in model.entries():
            self._on_added(entry)
        self.lane.as_shown()        # what was there before (the history): no backlog

    # -- state ---------------------------------------------------------------
    @property
    def paused(self) -> bool:
        """Scrolling stops while the pointer is over the line, while its
        menu is open (the message clicked stays put), while dragging and
        when the user paused it."""
        return self._hover or self._menu_open or self._dragging or self.user_paused

    def pointer_inside(self) -> bool:
        """Whether the pointer is over the line now (asked of the pointer,
        not of the last Enter/Leave event)."""
        return self.isVisible() and self.rect().contains(self.mapFromGlobal(QCursor.pos()))

    @property
    def animating(self) -> bool:
        return self._timer.isActive()

    @property
    def waiting(self) -> int:
        """Messages that arrived but have not entered the line yet."""
        return len(self.lane.fresh)

    @property
    def effective_speed(self) -> float:
        """The user's speed, raised while a backlog waits so that it clears,
        and as much more as the waiting messages need to enter by their
        deadlines (``ENTRY_DEADLINE``, ``Lane.speed_for_deadline``)."""
        factor = min(MAX_CATCH_UP, 1.0 + CATCH_UP_STEP * self.waiting)
        speed = self.speed * factor
        return max(speed, min(MAX_HURRY, self.lane.speed_for_deadline(ENTRY_DEADLINE)))

    def status_text(self) -> str:
        """What the badge at the right end says ("" when nothing)."""
        parts = []
        if self.paused and not self.lane.idle:
            parts.append("paused")
        if self.waiting:
            parts.append(f"+{self.waiting} waiting")
        if self.skipped and time.monotonic() - self._skipped_at < SKIPPED_NOTICE:
            parts.append(f"{self.skipped} skipped: in history")
        return " · ".join(parts)

    def set_colours(self, background: QColor | str, text: QColor | str) -> None:
        """The strip's colour and the messages' text colour (each group keeps
        its own colour for its pill and sender)."""
        self.background, self.text_colour = QColor(background), QColor(text)
        self._cache.clear()              # the text is drawn into the cached pixmaps
        self.update()

    def set_speed(self, speed: float) -> None:
        self.speed = max(1.0, float(speed))

    def setFont(self, font: QFont) -> None:
        super().setFont(font)
        self._cache.clear()
        if hasattr(self, "lane"):
            for entry in self.model.entries():
                self.lane.resize_item(entry.uid, None)
        self.updateGeometry()

    def sizeHint(self) -> QSize:
        return QSize(800, self._line_height())

    def minimumSizeHint(self) -> QSize:
        return QSize(120, self._line_height())

    def _line_height(self) -> int:
        return int(QFontMetricsF(self.font()).height() * 1.9)

    # -- model -> lane ---------------------------------------------------------
    def _measure_uid(self, uid: int) -> float:
        entry = self.model.entry(uid)
        return self._item_width(entry) if entry is not None else 1.0

    def _on_added(self, entry: Entry) -> None:
        self.lane.add(entry.uid)  # laid out only when it enters the view
        self._start()

    def _on_replaced(self, entry: Entry) -> None:
        self._cache.pop(entry.uid, None)
        if entry.uid in self.lane:
            self.lane.resize_item(entry.uid, None)
        else:
            self.lane.add(entry.uid)
        self._start()
        self.update()

    def _on_removed(self, entry: Entry) -> None:
        now = time.monotonic()
        item = self.lane.item(entry.uid)
        if item is not None:
            item.opacity = _age_opacity(entry, now)
        self.lane.remove(entry.uid, now)
        if entry.uid not in self.lane:
            self._cache.pop(entry.uid, None)  # kept only while it fades out
        self._start()
        self.update()

    def _on_cleared(self) -> None:
        self.lane.clear()
        self._cache.clear()
        self.update()

    # -- animation -------------------------------------------------------------
    def _start(self) -> None:
        self._fit_badge_slot()
        if not self._timer.isActive() and not self.lane.idle:
            self._last_tick = time.monotonic()
            self._timer.start()

    def _tick(self) -> None:
        now = time.monotonic()
        if self._hover and not self._menu_open and not self.pointer_inside():
            self._hover = False          # a Leave that never came
        self._fit_badge_slot()
        gap = now - self._last_tick
        self._last_tick = now
        self.tick_gaps.append(gap)
        self.frame(gap, now)
        if len(self._cache) > 2 * len(self.lane.visible) + 16:
            visible = {item.uid for item in self.lane.visible}
            for uid in [u for u in self._cache if u not in visible]:
                del self._cache[uid]  # laid out again if it comes round
        if self.lane.idle:
            self._timer.stop()
        self.update()

    def frame(self, gap: float, now: float) -> None:
        """One frame, ``gap`` seconds after the last: the waiting messages
        age (unless paused), the overdue ones are skipped, the line moves."""
        moving = not self.paused
        if moving:
            self.lane.wait(gap)
            skipped = self.lane.skip_overdue(SKIP_AFTER)
            if skipped:
                self.skipped = (self.skipped if now - self._skipped_at < SKIPPED_NOTICE
                                else 0) + len(skipped)
                self._skipped_at = now
                for uid in skipped:
                    self._cache.pop(uid, None)
        else:
            self.lane.hold()
        dx = -self.effective_speed * min(gap, 0.1) if moving else 0.0
        self.lane.advance(dx, now)

    def step(self, seconds: float) -> None:
        """Advance the line as if ``seconds`` had passed (tests, benchmarks)."""
        self.lane.advance(-self.speed * seconds, time.monotonic())

    # -- painting ----------------------------------------------------------------
    def _item_width(self, entry: Entry) -> float:
        pixmap = self._pixmap(entry)
        return pixmap.width() / max(1.0, pixmap.devicePixelRatio())

    def _pixmap(self, entry: Entry) -> QPixmap:
        cached = self._cache.get(entry.uid)
        if cached is not None and cached[0] == entry.version:
            return cached[1]
        pixmap = render_entry(entry, self.font(), self._line_height(),
                              self.devicePixelRatioF(), self.text_colour)
        self._cache[entry.uid] = (entry.version, pixmap)
        return pixmap

    def paintEvent(self, event: QPaintEvent) -> None:
        started = time.perf_counter()
        painter = QPainter(self)
        painter.fillRect(self.rect(), self.background)
        now = time.monotonic()
        height = self.height()
        right = self.message_area_right()
        painter.setClipRect(QRectF(0.0, 0.0, right, height))
        for item in self.lane.visible:
            if item.right < 0 or item.x > right:
                continue
            entry = self.model.entry(item.uid)
            if entry is None and item.uid not in self._cache:
                continue
            pixmap = self._pixmap(entry) if entry is not None else self._cache[item.uid][1]
            opacity = _age_opacity(entry, now) if entry is not None else item.opacity
            if item.dying_since is not None:
                opacity *= max(0.0, 1.0 - (now - item.dying_since) / FADE_OUT)
            painter.setOpacity(opacity)
            y = (height - pixmap.height() / max(1.0, pixmap.devicePixelRatio())) / 2
            painter.drawPixmap(QPointF(round(item.x), round(y)), pixmap)
        painter.setOpacity(1.0)
        self._paint_edges(painter, right)
        painter.setClipping(False)
        self._paint_badge(painter)
        if self.lane.idle:
            painter.setPen(DIM)
            painter.drawText(self.rect().adjusted(12, 0, -12, 0),
                             Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                             self.idle_text)
        painter.end()
        self.frame_costs.append(time.perf_counter() - started)

    def _paint_edges(self, painter: QPainter, width: float) -> None:
        """Soft edges: messages fade in on the right (at the badge's slot
        when it shows) and out on the left instead of being cut off sharply."""
        height = self.height()
        edge = min(EDGE_FADE, width / 4)
        for x0, x1 in ((0.0, edge), (float(width), width - edge)):
            gradient = QLinearGradient(x0, 0.0, x1, 0.0)
            gradient.setColorAt(0.0, self.background)
            clear = QColor(self.background)
            clear.setAlpha(0)
            gradient.setColorAt(1.0, clear)
            painter.fillRect(QRectF(min(x0, x1), 0.0, edge, height), gradient)

    def _badge(self) -> tuple[str, QFont, QRectF] | None:
        """The badge's text, font and place, or None when there is nothing to say."""
        text = self.status_text()
        if not text:
            return None
        font = QFont(self.font())
        font.setPointSizeF(max(6.0, font.pointSizeF() * 0.8))
        font.setBold(True)
        fm = QFontMetricsF(font)
        w, h = fm.horizontalAdvance(text) + 14.0, fm.height() + 4.0
        return text, font, QRectF(self.width() - w - 4.0, (self.height() - h) / 2, w, h)

    def message_area_right(self) -> float:
        """Where the messages' area ends: the right edge, or the badge's slot."""
        badge = self._badge()
        return float(self.width()) if badge is None else \
            max(0.0, badge[2].left() - BADGE_GAP)

    def _fit_badge_slot(self) -> None:
        """Messages enter at the area's right end, so none passes under the badge."""
        right = self.message_area_right()
        if abs(right - self.lane.view_width) >= 1.0:
            self.lane.set_view_width(right)

    def _paint_badge(self, painter: QPainter) -> None:
        """"paused" / "+N waiting" in its slot at the right end."""
        badge = self._badge()
        if badge is None:
            return
        text, font, rect = badge
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(BADGE)
        painter.drawRoundedRect(rect, rect.height() / 2, rect.height() / 2)
        painter.setFont(font)
        painter.setPen(BADGE_TEXT)
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)

    idle_text = "No messages yet — double-click or press Ctrl+N to send one"

    def resizeEvent(self, event: QResizeEvent) -> None:
        self.lane.set_view_width(event.size().width())
        self._fit_badge_slot()
        self._start()
        super().resizeEvent(event)

    # -- mouse -----------------------------------------------------------------
    def entry_at(self, x: float) -> Entry | None:
        item = self.lane.item_at(x)
        return self.model.entry(item.uid) if item is not None else None

    def enterEvent(self, event: QEvent) -> None:
        self._hover = True
        self._fit_badge_slot()
        self.update()
        super().enterEvent(event)

    def leaveEvent(self, event: QEvent) -> None:
        self._hover = False
        self._fit_badge_slot()
        self._start()
        self.update()
        super().leaveEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._press_x = event.position().x()
            self._last_drag_x = self._press_x
            self._dragging = False
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._press_x is not None and event.buttons() & Qt.MouseButton.LeftButton:
            x = event.position().x()
            if not self._dragging and abs(x - self._press_x) >= DRAG_THRESHOLD:
                self._dragging = True
                self.setCursor(Qt.CursorShape.ClosedHandCursor)
            if self._dragging:
                self.lane.advance(x - self._last_drag_x, time.monotonic())
                self._last_drag_x = x
                self.update()
        else:
            entry = self.entry_at(event.position().x())
            self.setCursor(Qt.CursorShape.PointingHandCursor if entry and entry.message.urls
                           else Qt.CursorShape.ArrowCursor)
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self._press_x is not None:
            if not self._dragging:
                item = self.lane.item_at(event.position().x())
                if item is not None:
                    # wait: a double-click (reply) must not also open the URL
                    self._pending_click = item
                    self._click_timer.start(QGuiApplication.styleHints().mouseDoubleClickInterval())
            self._press_x = None
            self._dragging = False
            self.unsetCursor()
            self._start()
        super().mouseReleaseEvent(event)

    def _single_click(self) -> None:
        item, self._pending_click = self._pending_click, None
        if item is None:
            return
        entry = self.model.entry(item.uid)
        if entry is not None:
            self.open_attachment(entry.message)

    def open_attachment(self, message: Message) -> bool:
        """Open the first URL of a message with the desktop's handler."""
        if not message.urls:
            return False
        url = message.urls[0]
        if self.open_urls:
            self.links.open(url)
        emit(self.urlOpened, url)
        return True

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        self._click_timer.stop()
        self._pending_click = None
        entry = self.entry_at(event.position().x())
        if entry is not None:
            emit(self.replyRequested, entry.message)
        else:
            emit(self.composeRequested)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        menu = self.context_menu(event.pos().x())
        if menu is not None:
            self._menu_open = True
            self.update()
            try:
                menu.exec(event.globalPos())
            finally:
                self._menu_open = False
                # the menu's grab hid where the pointer went: ask the pointer
                self._hover = self.pointer_inside()
                self._fit_badge_slot()
                self._start()
                self.update()

    def context_menu(self, x: float) -> QMenu | None:
        """The right-click menu for the message at ``x`` (or a compose-only
        menu over empty space)."""
        entry = self.entry_at(x)
        menu = QMenu(self)
        if entry is None:
            menu.addAction("New message…", lambda: emit(self.composeRequested))
            if self.model.mutes:
                menu.addAction(_action(menu, f"Unmute all ({len(self.model.mutes)})",
                                       self.model.unmute_all))
            return menu
        message = entry.message
        menu.addAction(_action(menu, "Reply…", lambda: emit(self.replyRequested, message)))
        if message.urls:
            menu.addAction(_action(menu, "Open link", lambda: self.open_attachment(message)))
        menu.addAction(_action(menu, "Copy text", lambda: copy_text(message)))
        if message.urls:
            menu.addAction(_action(menu, "Copy link",
                                   lambda: QGuiApplication.clipboard().setText(message.urls[0])))
        menu.addSeparator()
        menu.addAction(_action(menu, "Hide", lambda: self.model.hide(entry.uid)))
        menu.addAction(_action(menu, "Kill thread",
                               lambda: self.model.kill_thread(message)))
        self._add_mute_menu(menu, message)
        return menu

    def _add_mute_menu(self, menu: QMenu, message: Message) -> None:
        mute = menu.addMenu("Mute")
        name, _domain = _split_sender(message.sender)
        for kind, label, value in (("sender", name, message.sender),
                                   ("group", f"group {message.group}", message.group)):
            for when, seconds in MUTE_CHOICES:
                mute.addAction(_action(mute, f"{label} {when}",
                                       lambda *_checked, k=kind, v=value, s=seconds:
                                       self.model.mute(k, v, s)))
        if self.model.mutes:
            menu.addAction(_action(menu, f"Unmute all ({len(self.model.mutes)})",
                                   self.model.unmute_all))

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            entry = self.entry_at(event.pos().x())
            if entry is not None:
                text = tooltip_text(entry.message, entry.replied_to)
                QToolTip.showText(self.tooltip_anchor(event.pos().x(), text), text, self)
            else:
                QToolTip.hideText()
            return True
        return super().event(event)


    def tooltip_anchor(self, x: float, text: str) -> QPoint:
        """Where to show a tooltip so that it never covers the line it
        describes: below the strip, or above it when the screen ends below.
        (Qt puts a tip 16 px under the point it is given, and moves it up by
        its height plus 24 px only when it would leave the screen; so for
        "above" the point is raised by the tip's height, estimated with the
        tooltip font plus room for its frame.)"""
        below = self.mapToGlobal(QPoint(int(x), self.height()))
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        tip = QFontMetricsF(QToolTip.font()).boundingRect(
            QRectF(0, 0, 600, 2000), int(Qt.TextFlag.TextWordWrap), text)
        tip_height = int(tip.height()) + TIP_FRAME
        if screen is None or below.y() + 16 + tip_height <= screen.bottom():
            return below
        return self.mapToGlobal(QPoint(int(x), -16 - tip_height))


def _age_opacity(entry: Entry, now: float) -> float:
    """Messages fade as they age: full opacity when new, ``MIN_OPACITY`` at
    the end of their lifetime (quadratic, so they stay crisp for a while)."""
    return 1.0 - (1.0 - MIN_OPACITY) * entry.age_fraction(now) ** 2


def _action(menu: QMenu, text: str, slot) -> QAction:
    action = QAction(text, menu)
    action.triggered.connect(slot)
    return action


def copy_text(message: Message) -> None:
    QGuiApplication.clipboard().setText(f"{message.sender}: {message.text}")


def tooltip_text(message: Message, replied_to: str | None = None) -> str:
    """Plain-text details shown when hovering over a message."""
    when = datetime.fromtimestamp(message.received).strftime("%H:%M:%S")
    lines = [f"{message.group} — {message.sender} at {when}", message.text[:1000]]
    if message.urls:
        lines.append("Link: " + message.urls[0] + "  (click to open)")
    if message.in_reply_to:
        lines.append(f"Reply to {replied_to}" if replied_to else "Reply in a thread")
    if message.secure:
        lines.append("Private (received with a key)")
    return "\n".join(lines)


def _split_sender(sender: str) -> tuple[str, str]:
    """``user@example.org`` -> ("user", "@example.org"): the name is drawn
    bold, the domain dimmed, so long addresses stay readable but quiet."""
    name, at, domain = sender.partition("@")
    if at and name and domain and " " not in sender:
        return name, at + domain
    return sender, ""


def _draw_padlock(p: QPainter, x: float, centre_y: float, size: float, colour: QColor) -> None:
    """A small padlock (fonts rarely have one) marking a private message."""
    body_h = size * 0.55
    body = QRectF(x, centre_y - body_h / 2 + size * 0.15, size * 0.8, body_h)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(colour)
    p.drawRoundedRect(body, 1.5, 1.5)
    pen = QPen(colour, max(1.2, size * 0.13))
    p.setPen(pen)
    p.setBrush(Qt.BrushStyle.NoBrush)
    shackle = QRectF(body.left() + body.width() * 0.2, body.top() - size * 0.42,
                     body.width() * 0.6, size * 0.7)
    p.drawArc(shackle, 0, 180 * 16)
    p.drawLine(QPointF(shackle.left(), shackle.center().y()),
               QPointF(shackle.left(), body.top()))
    p.drawLine(QPointF(shackle.right(), shackle.center().y()),
               QPointF(shackle.right(), body.top()))


def reply_prefix(message: Message, replied_to: str | None) -> str:
    """"↪ alice: " before a reply whose referent we know, "↪ " otherwise."""
    if not message.in_reply_to:
        return ""
    if replied_to:
        return f"\N{RIGHTWARDS ARROW WITH HOOK} {_split_sender(replied_to)[0]}: "
    return "\N{RIGHTWARDS ARROW WITH HOOK} "


def render_entry(entry: Entry, font: QFont, line_height: int, dpr: float,
                 text_colour: QColor = TEXT) -> QPixmap:
    """Lay out and draw one message once: a coloured group pill (with a
    padlock when it came with a key), the sender in the group colour, then
    the text (yellow when it mentions the user), an arrow for a link."""
    message = entry.message
    bold = QFont(font)
    bold.setBold(True)
    small = QFont(font)
    small.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
    small.setBold(True)
    fm, fm_bold, fm_small = QFontMetricsF(font), QFontMetricsF(bold), QFontMetricsF(small)

    group = fm_small.elidedText(message.group, Qt.TextElideMode.ElideRight, 200.0)
    name, domain = _split_sender(message.sender)
    name = fm_bold.elidedText(name, Qt.TextElideMode.ElideRight, 200.0)
    domain = fm.elidedText(domain, Qt.TextElideMode.ElideRight, 160.0) if domain else ""
    prefix = reply_prefix(message, entry.replied_to)
    link = " \N{NORTH EAST ARROW}" if message.urls else ""
    text = fm.elidedText(prefix + message.text, Qt.TextElideMode.ElideRight, MAX_ITEM_WIDTH)

    pad = 7.0
    lock = fm_small.height() * 0.75 if message.secure else 0.0
    pill_w = fm_small.horizontalAdvance(group) + 2 * pad + (lock + 3.0 if lock else 0.0)
    pill_h = fm_small.height() + 4.0
    name_w = fm_bold.horizontalAdvance(name)
    domain_w = fm.horizontalAdvance(domain) if domain else 0.0
    text_w = fm.horizontalAdvance(text)
    link_w = fm_bold.horizontalAdvance(link) if link else 0.0
    width = pill_w + 8.0 + name_w + domain_w + 9.0 + text_w + link_w + 2.0
    height = float(line_height)

    pixmap = QPixmap(max(1, int(width * dpr + 0.5)), max(1, int(height * dpr + 0.5)))
    pixmap.setDevicePixelRatio(dpr)
    pixmap.fill(Qt.GlobalColor.transparent)
    p = QPainter(pixmap)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setRenderHint(QPainter.RenderHint.TextAntialiasing)
    colour = QColor(entry.colour)
    on_pill = QColor(text_colour_on(entry.colour))
    pill = QRectF(0.0, (height - pill_h) / 2, pill_w, pill_h)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(colour)
    p.drawRoundedRect(pill, pill_h / 2, pill_h / 2)
    label = QRectF(pill)
    if lock:
        _draw_padlock(p, pill.left() + pad, pill.center().y(), lock, on_pill)
        label.setLeft(pill.left() + pad + lock + 3.0)
        label.setRight(pill.right() - pad)
        align = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft
    else:
        align = Qt.AlignmentFlag.AlignCenter
    p.setFont(small)
    p.setPen(on_pill)
    p.drawText(label, align, group)

    baseline = (height + fm.ascent() - fm.descent()) / 2

    def draw(x: float, piece: str, piece_font: QFont, pen: QColor, width: float) -> float:
        """Draw one piece of the line at ``x``; where the next one starts."""
        p.setFont(piece_font)
        p.setPen(pen)
        p.drawText(QPointF(x, baseline), piece)
        return x + width

    x = draw(pill_w + 8.0, name, bold, colour, name_w)
    if domain:
        x = draw(x, domain, font, DIM, domain_w)
    text_x = x = x + 9.0
    if entry.mention:  # for you: a soft amber band behind the text
        band = QRectF(x - 4.0, (height - fm.height()) / 2 - 1.0, text_w + 8.0, fm.height() + 2.0)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(MENTION_BAND)
        p.drawRoundedRect(band, 4.0, 4.0)
    x = draw(x, text, font, MENTION if entry.mention else text_colour, text_w)
    if link:
        draw(x, link, bold, colour, link_w)
        under_y = baseline + 2.5
        p.setPen(QPen(colour.darker(120), 1.0))
        p.drawLine(QPointF(text_x, under_y), QPointF(x, under_y))
    p.end()
    return pixmap
