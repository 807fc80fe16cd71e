"""One received notification, as a row of a consumer pane.

Rows are made in the subscription listener for every delivery (10,000 a
second on a busy router), so the record is a slotted object holding what
the delivery already gave us; the searchable text is made only when a
filter first needs it, then kept.
"""

from __future__ import annotations

from datetime import datetime

from elvin.text import format_notification, format_value
from elvin.values import Value

__all__ = ["Received", "display_value", "timestamp"]


class Received:
    """``seq`` counts deliveries in the pane from 1; ``time`` is
    ``time.time()`` at delivery; ``secure`` is the secure-match flag."""

    __slots__ = ("seq", "time", "attributes", "secure", "_text")

    def __init__(self, seq: int, time: float, attributes: dict[str, Value],
                 secure: bool) -> None:
        self.seq = seq
        self.time = time
        self.attributes = attributes
        self.secure = secure
        self._text: str | None = None

    def text(self) -> str:
        """The notification in ec text form (what the filter searches)."""
        if self._text is None:
            try:
                self._text = format_notification(self.attributes)
            except (TypeError, ValueError):   # never let one odd value break a filter
                self._text = repr(self.attributes)
        return self._text

    def summary(self, limit: int = 300) -> str:
        """``Name=value  Name=value`` on one line, typed as in ec."""
        parts = []
        size = 0
        for name, value in self.attributes.items():
            part = f"{name}={_short(value)}"
            parts.append(part)
            size += len(part) + 2
            if size > limit:
                break
        text = "  ".join(parts)
        return text if len(text) <= limit else text[:limit - 1] + "…"

    def __repr__(self) -> str:
        return f"<Received #{self.seq} {self.attributes!r}>"


def _short(value: Value) -> str:
    text = format_value(value)
    if len(text) > 80:
        text = text[:79] + "…"
    return text.replace("\n", "⏎")


def display_value(value: Value) -> str:
    """A table cell: strings without quotes, numbers plain, opaque as hex."""
    if isinstance(value, str):
        text = value.replace("\n", "⏎")
        return text if len(text) <= 200 else text[:199] + "…"
    if isinstance(value, float):
        return format_value(value)      # as ec writes it: NaN, Infinity, 1.0e+300
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value[:64]).hex(" ")
        return f"[{text}{' …' if len(value) > 64 else ''}]"
    return str(int(value))


def timestamp(when: float, with_date: bool = False) -> str:
    """Local time with milliseconds (``12:03:04.567``)."""
    moment = datetime.fromtimestamp(when)
    text = moment.strftime("%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S")
    return f"{text}.{moment.microsecond // 1000:03d}"
