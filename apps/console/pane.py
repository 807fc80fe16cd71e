"""What every pane shares: a title, a chosen router, its connection events.

A pane works against one router, chosen by name in a combo box at its top;
the choice survives renames and is saved in the workspace. When the
router's connection comes up (first time, after an edit, after the
ConnectionManager had to make a fresh connection) the pane's
``on_connected`` runs so it can make its subscription or quench again. A
reconnect of the same Connection restores them by itself (elvin.client),
so panes only act when the Connection object changed.
"""

from __future__ import annotations

import contextlib

from elvin_apps.console.routers import RouterEntry, RouterRegistry
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from elvin.client import Connection

__all__ = ["Pane"]

NO_ROUTER = "(no router)"


class Pane(QWidget):
    """Base of the consumer, producer, quench and router panes."""

    kind = "pane"
    titleChanged = Signal(str)
    # (attributes or None, subscription or ""): open "Explain a match" with these
    explainRequested = Signal(object, str)

    def __init__(self, registry: RouterRegistry, title: str, router: str,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.registry = registry
        self._title = title
        self._router = router or (registry.names()[0] if len(registry) else "")
        self._manager = None
        self._ready = False
        self.router_combo = QComboBox()
        self.router_combo.setToolTip("The router this pane works with")
        self.router_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.router_combo.activated.connect(self._picked)
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        registry.routersChanged.connect(self._fill_routers)
        registry.routerRenamed.connect(self._renamed)
        self._fill_routers()

    # -- title -------------------------------------------------------------------------
    def title(self) -> str:
        return self._title

    def set_title(self, title: str) -> None:
        if title and title != self._title:
            self._title = title
            self.titleChanged.emit(title)

    # -- router choice -----------------------------------------------------------------
    def router_row(self) -> QHBoxLayout:
        """``Router: [combo]`` for the pane's top row."""
        row = QHBoxLayout()
        row.addWidget(QLabel("Router"))
        row.addWidget(self.router_combo)
        return row

    def column(self, top: QHBoxLayout) -> QVBoxLayout:
        """The pane's layout, as every pane spaces it: its top row, then
        the status line; the caller adds the rest."""
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addLayout(top)
        return layout

    @property
    def router_name(self) -> str:
        return self._router

    def entry(self) -> RouterEntry | None:
        return self.registry.get(self._router)

    def connection(self) -> Connection | None:
        """The router's open connection, or None."""
        entry = self.entry()
        if entry is None:
            return None
        conn = entry.manager.connection
        return conn if conn is not None and conn.is_open else None

    def set_router(self, name: str) -> None:
        if name == self._router and self._manager is not None:
            return
        self._router = name
        self._fill_routers()
        self.on_router_changed()

    def _picked(self, index: int) -> None:
        name = self.router_combo.itemData(index)
        if name and name != self._router:
            self.set_router(name)

    def _renamed(self, old: str, new: str) -> None:
        if self._router == old:
            self._router = new
            self._fill_routers()

    def _fill_routers(self) -> None:
        combo = self.router_combo
        combo.blockSignals(True)
        combo.clear()
        for name in self.registry.names():
            combo.addItem(name, name)
        if self._router not in self.registry.names():
            combo.addItem(f"{self._router} (missing)" if self._router else NO_ROUTER, "")
        combo.setCurrentIndex(max(combo.findData(self._router if self.entry() else ""), 0))
        combo.blockSignals(False)
        self._watch()

    def _watch(self) -> None:
        """Follow the current router's connection events."""
        entry = self.entry()
        manager = entry.manager if entry is not None else None
        if manager is self._manager:
            return
        if self._manager is not None:
            with contextlib.suppress(RuntimeError, TypeError):
                self._manager.connected.disconnect(self._connected)
        self._manager = manager
        if manager is not None:
            manager.connected.connect(self._connected)
            self._connected()

    def _connected(self) -> None:
        conn = self.connection()
        if conn is not None and self._ready:
            self.on_connected(conn)

    def ready(self) -> None:
        """The subclass is built: from now on ``on_connected`` runs (at once
        if the router is already connected)."""
        self._ready = True
        self._connected()

    # -- for subclasses --------------------------------------------------------------------
    def on_router_changed(self) -> None:
        """The user chose another router (default: nothing)."""

    def on_connected(self, conn: Connection) -> None:
        """The router's connection is open (maybe a new Connection)."""

    def set_status(self, text: str, error: bool = False) -> None:
        self.status_label.setText(text)
        if self.status_label.parent() is not None:  # laid out: no empty line for nothing
            self.status_label.setVisible(bool(text))
        self.status_label.setStyleSheet("color: #c62828;" if error else "")

    def to_spec(self):
        raise NotImplementedError

    async def shutdown(self) -> None:
        """Release router resources (subscriptions, quenches, timers)."""
