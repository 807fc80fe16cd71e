"""StatusWidget: a coloured dot and a line of text for a ConnectionManager."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QBrush, QColor, QPainter
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from elvin.protocol import URIError, parse_uri
from elvin.qt.manager import ConnectionManager

__all__ = ["STATE_COLOURS", "StatusWidget", "failover_lines", "router_name"]

STATE_COLOURS = {
    "connected": "#2e9d3a",      # green
    "connecting": "#e0a100",     # amber
    "reconnecting": "#e0a100",
    "disconnected": "#c62828",   # red
}


class _Dot(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.colour = QColor(STATE_COLOURS["disconnected"])
        self.setFixedSize(QSize(12, 12))

    def set_colour(self, colour: str) -> None:
        self.colour = QColor(colour)
        self.update()

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QBrush(self.colour))
        painter.drawEllipse(1, 1, 10, 10)
        painter.end()


class StatusWidget(QWidget):
    """Shows the state of a :class:`ConnectionManager`: green when
    connected, amber while connecting or reconnecting, red when
    disconnected, with the router URL and the last error as text/tooltip.
    ``show_url=False`` keeps the URL (a detail most users need not read) to
    the tooltip: the text is then just the state in words. With several
    routers (failover) the tooltip names the others, and after a failover
    the router that was left."""

    def __init__(self, manager: ConnectionManager, parent: QWidget | None = None, *,
                 show_url: bool = True) -> None:
        super().__init__(parent)
        self.manager = manager
        self.show_url = show_url
        self.dot = _Dot(self)
        self.label = QLabel(self)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.addWidget(self.dot)
        layout.addWidget(self.label, 1)
        manager.stateChanged.connect(self._update)
        manager.error.connect(lambda _message: self._update(manager.state))
        manager.routerChanged.connect(lambda _url: self._update(manager.state))
        self._update(manager.state)

    def state(self) -> str:
        """The manager's state that the widget shows."""
        return self.manager.state

    def text(self) -> str:
        """The status line shown (``Connected to elvin://...``)."""
        return self.label.text()

    def colour(self) -> str:
        """The dot's colour as ``#rrggbb``."""
        return self.dot.colour.name()

    def _update(self, state: str) -> None:
        url = self.manager.url
        text = {
            "connected": f"Connected to {url}",
            "connecting": f"Connecting to {url}…",
            "reconnecting": f"Reconnecting to {url}…",
            "disconnected": f"Not connected to {url}",
        }.get(state, state)
        shown = text if self.show_url else {
            "connected": "Connected",
            "connecting": "Connecting…",
            "reconnecting": "Reconnecting…",
            "disconnected": "Not connected",
        }.get(state, state)
        self.label.setText(shown)
        self.dot.set_colour(STATE_COLOURS.get(state, "#808080"))
        error = self.manager.last_error
        tip = [text]
        if error and state != "connected":
            tip.append(error)
        tip += failover_lines(self.manager)
        self.setToolTip("\n".join(tip))


def failover_lines(manager: ConnectionManager) -> list[str]:
    """What a tooltip adds for a manager with several routers: the others
    it may move to, and the one it last moved from."""
    others = [url for url in manager.urls if url != manager.url]
    lines = [f"Fails over to: {', '.join(others)}"] if others else []
    if manager.previous_url:
        lines.append(f"Moved here from {manager.previous_url}")
    return lines


def router_name(url: str) -> str:
    """A router as a window title or a notice names it: ``host:port`` (the
    whole URL if it does not parse)."""
    try:
        uri = parse_uri(url)
    except URIError:
        return url
    return f"{uri.host}:{uri.port}"
