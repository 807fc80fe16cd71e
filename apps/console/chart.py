"""A small time-series chart drawn with QPainter.

The router view needs four live line charts and nothing else from a chart
library; QtCharts lives in PySide6-Addons (a separate ~200 MB wheel that must
match the Essentials version exactly), so a hundred lines of QPainter are
the cheaper dependency. The chart shows the last ``window`` seconds, scales
its y axis to round numbers, labels the x axis in seconds or minutes
before now, and keeps each series' latest value in the legend so the exact
figure is readable without hovering.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

__all__ = ["TimeSeriesChart", "nice_ticks", "format_number", "segments"]

Point = tuple[float, float]


def nice_ticks(high: float, count: int = 4) -> list[float]:
    """Round tick values from 0 to at least ``high`` (``count`` steps or so)."""
    if not high > 0 or not math.isfinite(high):
        high = 1.0
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        step = factor * magnitude
        if step >= raw:
            break
    top = math.ceil(high / step - 1e-9) * step
    ticks = []
    value = 0.0
    while value <= top + step / 2:
        ticks.append(round(value, 10))
        value += step
    return ticks


def nice_range(low: float, high: float, count: int = 4) -> list[float]:
    """Round ticks covering ``low``..``high`` (not forced to start at 0)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return nice_ticks(1.0, count)
    if high - low < 1e-12:
        pad = abs(high) * 0.05 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        step = factor * magnitude
        if step >= raw:
            break
    first = math.floor(low / step + 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-6 or len(ticks) < 2:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 10))
    return ticks


def format_tick(value: float, step: float) -> str:
    """A tick label with as many decimals as the tick step needs."""
    if abs(value) >= 1e4:
        return format_number(value)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 0
    if step > 0 and round(step, decimals) != round(step, 10):
        decimals += 1
    return f"{value:,.{decimals}f}"


def format_number(value: float) -> str:
    """``950``, ``1.2k``, ``3.4M``; small rates with one decimal."""
    magnitude = abs(value)
    if magnitude >= 1e9:
        return f"{value / 1e9:.3g}G"
    if magnitude >= 1e6:
        return f"{value / 1e6:.3g}M"
    if magnitude >= 1e4:
        return f"{value / 1e3:.3g}k"
    if magnitude >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.1f}"


def segments(points: Sequence[Point], break_gaps: bool = False) -> list[list[Point]]:
    """The runs of ``points`` to draw as connected lines. A non-finite value
    (a notification of the key without the value) always breaks the line;
    with ``break_gaps`` so does a pause much longer than the series' usual
    interval (four times the median, and at least two seconds), so that a
    line never pretends a value held while nothing arrived."""
    gap = math.inf
    if break_gaps and len(points) > 2:
        steps = sorted(b[0] - a[0] for a, b in zip(points, points[1:], strict=False))
        gap = max(4 * steps[len(steps) // 2], 2.0)
    runs: list[list[Point]] = []
    run: list[Point] = []
    last = None
    for t, value in points:
        if not math.isfinite(value):
            if run:
                runs.append(run)
            run, last = [], None
            continue
        if last is not None and t - last > gap:
            runs.append(run)
            run = []
        run.append((t, value))
        last = t
    if run:
        runs.append(run)
    return runs


class TimeSeriesChart(QWidget):
    """``set_data([points per series])``; points are (monotonic time, value)."""

    def __init__(self, title: str, series: Sequence[tuple[str, str]], window: float = 300,
                 unit: str = "", parent: QWidget | None = None,
                 clock: Callable[[], float] = time.monotonic, zero_based: bool = True,
                 fit_time: bool = False, break_gaps: bool = False) -> None:
        super().__init__(parent)
        self.title = title
        self.series = list(series)
        self.window = window
        self.unit = unit
        self.clock = clock
        self.zero_based = zero_based    # counts and rates: 0 at the bottom
        self.fit_time = fit_time        # the time axis spans the data (up to window)
        self.break_gaps = break_gaps    # no line across a long pause (values, not rates)
        self.fill_first = True          # shade under the first series
        self.dash_later = True          # series after the first dashed
        self.data: list[list[Point]] = [[] for _ in self.series]
        self.setMinimumSize(240, 110)   # four fit in a 1024x768 screen's console
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:
        return QSize(420, 200)

    def set_data(self, data: Sequence[Sequence[Point]]) -> None:
        self.data = [list(points) for points in data]
        self.update()

    def latest(self, index: int) -> float | None:
        points = self.data[index] if index < len(self.data) else []
        return next((v for _t, v in reversed(points) if math.isfinite(v)), None)

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        try:
            self._paint(painter)
        finally:
            painter.end()

    def _paint(self, painter: QPainter) -> None:
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        painter.setPen(QPen(QColor("#d0d0d0")))
        painter.setBrush(QColor("#ffffff"))
        painter.drawRoundedRect(rect, 6, 6)
        font = QFont(self.font())
        small = QFont(font)
        small.setPointSizeF(max(font.pointSizeF() * 0.85, 7))
        bold = QFont(font)
        bold.setBold(True)
        metrics = QFontMetrics(small)
        now = self.clock()
        window = self.window
        if self.fit_time:
            first = min((points[0][0] for points in self.data if points), default=now)
            span = max(now - first, 1.0) * 1.1
            window = min(self.window, next((w for w in (10, 30, 60, 120, 300, 600, 1800, 3600)
                                            if w >= span), self.window))
        start = now - window

        # title, and the legend with the latest values (beside the title when
        # it fits, else on a line of its own)
        painter.setFont(bold)
        painter.setPen(QColor("#202020"))
        bold_metrics = QFontMetrics(bold)
        title_height = bold_metrics.height()
        painter.drawText(QPointF(rect.left() + 10, rect.top() + 6 + bold_metrics.ascent()),
                         self.title)
        painter.setFont(small)
        entries = []
        for index, (label, colour) in enumerate(self.series):
            value = self.latest(index)
            shown = "–" if value is None else (format_number(value) if self.zero_based
                                               else f"{value:,.6g}")   # values: exact
            text = f"{label} {shown}{self.unit}"
            entries.append((text, colour, metrics.horizontalAdvance(text)))
        legend_width = sum(width + 22 for _t, _c, width in entries)
        beside = bold_metrics.horizontalAdvance(self.title) + legend_width + 30 <= rect.width()
        baseline = rect.top() + 6 + (bold_metrics.ascent() if beside
                                     else title_height + 2 + metrics.ascent())
        if not beside:
            title_height += metrics.height() + 2
        x = rect.right() - 10
        for text, colour, width in reversed(entries):
            x -= width
            painter.setPen(QColor("#404040"))
            painter.drawText(QPointF(x, baseline), text)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(colour))
            painter.drawEllipse(QPointF(x - 8, baseline - metrics.ascent() / 2 + 1), 4, 4)
            x -= 22

        visible = [[p for p in points if p[0] >= start] for points in self.data]
        values = [v for points in visible for _t, v in points if math.isfinite(v)]
        high = max(values, default=0.0)
        if self.zero_based or not values:
            # nothing above zero yet (no drops): a plain 0..1 axis, not 0.25 steps
            ticks = nice_ticks(high * 1.05) if high > 0 else [0.0, 1.0]
        else:
            ticks = nice_range(min(values), high)
        bottom_value = ticks[0]
        span_value = (ticks[-1] - bottom_value) or 1.0
        tick_step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
        labels = [format_tick(t, tick_step) for t in ticks]
        label_width = max(metrics.horizontalAdvance(text) for text in labels) + 8
        plot = QRectF(rect.left() + 8 + label_width, rect.top() + 12 + title_height,
                      rect.width() - 24 - label_width,
                      rect.height() - 24 - title_height - metrics.height())
        if plot.width() < 20 or plot.height() < 20:
            return

        # y grid
        for tick, text in zip(ticks, labels, strict=True):
            y = plot.bottom() - (tick - bottom_value) / span_value * plot.height()
            painter.setPen(QPen(QColor("#bdbdbd") if tick == ticks[0] else QColor("#eeeeee"),
                                1))
            painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
            painter.setPen(QColor("#757575"))
            painter.drawText(QPointF(plot.left() - 6 - metrics.horizontalAdvance(text),
                                     y + metrics.ascent() / 2 - 1), text)

        # x labels: seconds or minutes before now
        step = _time_step(window)
        seconds = 0.0
        while seconds <= window + 1e-6:
            x = plot.right() - seconds / window * plot.width()
            text = "now" if seconds == 0 else (f"-{seconds / 60:g}m" if step >= 60
                                              else f"-{seconds:g}s")
            painter.setPen(QPen(QColor("#f3f3f3"), 1))
            if seconds:
                painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()))
            painter.setPen(QColor("#757575"))
            width = metrics.horizontalAdvance(text)
            painter.drawText(QPointF(min(max(x - width / 2, plot.left() - label_width),
                                         plot.right() - width),
                                     plot.bottom() + 4 + metrics.ascent()), text)
            seconds += step

        if not any(visible):
            painter.setPen(QColor("#9e9e9e"))
            painter.drawText(plot, Qt.AlignmentFlag.AlignCenter, "waiting for data…")
            return

        # the series: one path per unbroken run
        painter.setClipRect(plot.adjusted(-1, -2, 1, 1))
        for index, points in enumerate(visible):
            colour = QColor(self.series[index][1])
            for run in segments(points, self.break_gaps):
                path = QPainterPath()
                for n, (t, value) in enumerate(run):
                    point = QPointF(plot.left() + (t - start) / window * plot.width(),
                                    plot.bottom() - (value - bottom_value) / span_value *
                                    plot.height())
                    if n == 0:
                        path.moveTo(point)
                    else:
                        path.lineTo(point)
                if index == 0 and len(run) > 1 and self.fill_first:
                    area = QPainterPath(path)
                    area.lineTo(path.currentPosition().x(), plot.bottom())
                    area.lineTo(path.elementAt(0).x, plot.bottom())
                    area.closeSubpath()
                    fill = QColor(colour)
                    fill.setAlpha(28)
                    painter.fillPath(area, fill)
                pen = QPen(colour, 2)
                if index and self.dash_later:   # dashed: equal values stay visible
                    pen.setStyle(Qt.PenStyle.DashLine)
                painter.setPen(pen)
                painter.setBrush(Qt.BrushStyle.NoBrush)
                painter.drawPath(path)
                if len(run) == 1:
                    painter.setBrush(colour)
                    painter.drawEllipse(path.currentPosition(), 2.5, 2.5)


def _time_step(window: float) -> float:
    for step in (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400):
        if window / step <= 6:
            return float(step)
    return window / 4
