"""Plotting numeric attributes of received notifications over time.

What MQTT Explorer users like most is seeing a value move; here any numeric
attribute of a consumer pane (int32, int64, real64) can be plotted live,
for the rows that pass the pane's filter (filter ``ACME`` and plot
``Price`` to chart one symbol's price). Points are kept per attribute in a
bounded deque, and at most a few hundred per attribute are taken from one
flush, so plotting a 10,000-a-second stream costs little.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable

from elvin_apps.console.chart import TimeSeriesChart
from elvin_apps.console.received import Received
from PySide6.QtWidgets import QVBoxLayout, QWidget

__all__ = ["AttributePlot", "COLOURS", "MAX_PLOTTED"]

COLOURS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a")
MAX_PLOTTED = len(COLOURS)
MAX_POINTS = 5000
PER_FLUSH = 400


class AttributePlot(QWidget):
    """A chart of up to four numeric attributes against receive time."""

    def __init__(self, window: float = 3600, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # values, not counts: the y axis fits the data; the time axis grows with
        # the data up to an hour
        self.chart = TimeSeriesChart("", [], window, clock=time.time, zero_based=False,
                                     fit_time=True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.chart)
        self.names: list[str] = []
        self.points: dict[str, deque[tuple[float, float]]] = {}
        self.setMinimumHeight(150)

    def set_names(self, names: Iterable[str]) -> None:
        names = list(dict.fromkeys(names))[:MAX_PLOTTED]
        self.points = {name: self.points.get(name, deque(maxlen=MAX_POINTS))
                       for name in names}
        self.names = names
        self.chart.series = [(name, COLOURS[i]) for i, name in enumerate(names)]
        self.chart.title = "Plot of " + ", ".join(names) if names else ""
        self.setVisible(bool(names))
        self._redraw()

    def feed(self, records: list[Received], accept: Callable[[Received], bool]) -> int:
        """Add the numeric values of ``records`` that ``accept`` lets through."""
        if not self.names or not records:
            return 0
        step = max(1, len(records) // PER_FLUSH)
        added = 0
        for record in records[::step]:
            attributes = record.attributes
            for name in self.names:
                value = attributes.get(name)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                        math.isfinite(float(value)) and accept(record):
                    self.points[name].append((record.time, float(value)))
                    added += 1
        if added:
            self._redraw()
        return added

    def clear(self) -> None:
        for points in self.points.values():
            points.clear()
        self._redraw()

    def _redraw(self) -> None:
        self.chart.set_data([list(self.points[name]) for name in self.names])
