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
from elvin_apps.console.keyindex import key_of
from elvin_apps.console.received import Received
from PySide6.QtWidgets import QVBoxLayout, QWidget

__all__ = ["AttributePlot", "COLOURS", "MAX_PLOTTED", "MAX_SERIES"]

COLOURS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#c62828", "#00838f", "#ad1457",
           "#5d4037")
MAX_PLOTTED = 4             # attributes
MAX_SERIES = len(COLOURS)   # lines: attributes x key values
MAX_POINTS = 5000
PER_FLUSH = 400


class AttributePlot(QWidget):
    """A chart of up to four numeric attributes against receive time; with
    a key attribute, one line per key value (``Price`` of each ``Symbol``),
    broken where a value is missing or the key fell silent for a while."""

    def __init__(self, window: float = 3600, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # values, not counts: the y axis fits the data; the time axis grows with
        # the data up to an hour
        self.chart = TimeSeriesChart("", [], window, clock=time.time, zero_based=False,
                                     fit_time=True, break_gaps=True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.chart)
        self.names: list[str] = []
        self.key = ""
        # series label -> points; the label is the attribute's name, or with a
        # key the key value (prefixed by the name when several are plotted)
        self.points: dict[str, deque[tuple[float, float]]] = {}
        self.left_out: set[str] = set()     # key values beyond MAX_SERIES
        self.setMinimumHeight(110)

    def set_names(self, names: Iterable[str]) -> None:
        names = list(dict.fromkeys(names))[:MAX_PLOTTED]
        if self.key:
            self.points = {}       # labels depend on the names: the pane feeds again
        else:
            self.points = {name: self.points.get(name, deque(maxlen=MAX_POINTS))
                           for name in names}
        self.names = names
        self.setVisible(bool(names))
        self._update_series()

    def set_key(self, key: str, records: Iterable[Received] = (),
                accept: Callable[[Received], bool] = lambda _r: True) -> None:
        """Plot per value of ``key`` ("" for none), from ``records`` on."""
        self.key = key
        self.points = {} if key else {n: deque(maxlen=MAX_POINTS) for n in self.names}
        self.left_out.clear()
        self._update_series()
        self.feed(list(records), accept)

    def _label(self, name: str, key_value: str) -> str:
        if not self.key:
            return name
        return key_value if len(self.names) == 1 else f"{name} · {key_value}"

    def _update_series(self) -> None:
        labels = list(self.points)
        self.chart.series = [(label, COLOURS[i % len(COLOURS)])
                             for i, label in enumerate(labels)]
        self.chart.fill_first = self.chart.dash_later = not self.key
        if not self.names:
            title = ""
        elif self.key:
            title = f"{', '.join(self.names)} by {self.key}"
            if self.left_out:
                title += f" (first {MAX_SERIES} values; {len(self.left_out)} more not shown)"
        else:
            title = "Plot of " + ", ".join(self.names)
        self.chart.title = title

    def feed(self, records: list[Received], accept: Callable[[Received], bool]) -> int:
        """Add the numeric values of ``records`` that ``accept`` lets through."""
        if not self.names or not records:
            return 0
        step = max(1, len(records) // PER_FLUSH)
        added = 0
        created = False
        key = self.key
        for record in records[::step]:
            if not accept(record):
                continue
            attributes = record.attributes
            key_value = key_of(record, key) if key else ""
            for name in self.names:
                value = attributes.get(name)
                numeric = isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and math.isfinite(float(value))
                label = self._label(name, key_value)
                points = self.points.get(label)
                if points is None:
                    if not key or not numeric:
                        continue
                    if len(self.points) >= MAX_SERIES:
                        self.left_out.add(key_value)
                        continue
                    points = self.points[label] = deque(maxlen=MAX_POINTS)
                    created = True
                if numeric:
                    points.append((record.time, float(value)))
                    added += 1
                elif key and points and math.isfinite(points[-1][1]):
                    points.append((record.time, math.nan))     # the line breaks here
        if created or self.left_out:
            self._update_series()
        if added:
            self._redraw()
        return added

    def values(self, label: str) -> list[float]:
        """The plotted values of one series (NaN where the line breaks)."""
        return [v for _t, v in self.points.get(label, ())]

    def clear(self) -> None:
        for points in self.points.values():
            points.clear()
        self._redraw()

    def _redraw(self) -> None:
        self.chart.set_data([list(points) for points in self.points.values()])
