"""The main window: routers on the left, panes as dock widgets beside them.

A first start opens on the Browse pane: everything flowing through the
router as a tree, with no subscription to write (``browse``); a consumer
and a producer are a tab and a bar away.

The routers sidebar folds away (View menu, the "Routers" button in the
status bar, or by itself below 1200 px wide), leaving each router's state
in words in the status bar; producers start as a one-line publish bar, so
the consumer table gets the height.

Panes are ``QDockWidget`` s, so they can be tabbed together, split side by
side, or floated as separate windows; by default consumers (and the quench
and router views) are tabbed in the upper area and producers in the lower
one, so what is sent and what arrives are visible together. The File menu
opens and saves workspaces (JSON or TOML) and exports the current consumer
pane's rows; the Panes menu adds panes of each kind.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from elvin_apps.console import __version__
from elvin_apps.console.browse import BrowsePane
from elvin_apps.console.completion import AttributeNames
from elvin_apps.console.consumer import ConsumerPane
from elvin_apps.console.explainview import ExplainDialog, Source
from elvin_apps.console.pane import Pane
from elvin_apps.console.producer import ProducerPane
from elvin_apps.console.quenchview import QuenchPane
from elvin_apps.console.routers import RouterError, RouterRegistry
from elvin_apps.console.routerspanel import RoutersPanel
from elvin_apps.console.routerview import RouterViewPane
from elvin_apps.console.tasks import spawn
from elvin_apps.console.workspace import (
    BrowseSpec,
    ConsumerSpec,
    ProducerSpec,
    QuenchSpec,
    RouterSpec,
    RouterViewSpec,
    Workspace,
    WorkspaceError,
    load,
    save,
)
from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSizePolicy,
    QTabWidget,
    QToolButton,
    QWidget,
)

from elvin.qt import split
from elvin.qt.geometry import fit_to_screen

__all__ = ["MainWindow", "default_workspace"]

WORKSPACE_FILTER = "Workspace (*.json *.toml);;JSON (*.json);;TOML (*.toml)"
#: what a first start opens at, on a screen large enough (else the screen less its frame)
PREFERRED_SIZE = QSize(1280, 800)
_KIND_LABELS = {"browse": "Browse", "consumer": "Consumer", "producer": "Producer", "quench": "Quench",
                "router": "Router statistics"}


def default_workspace(url: str, buffer: int = 10_000) -> Workspace:
    """What a first start shows: one router, everything on it as a tree
    (Browse, in front), a consumer and a producer."""
    return Workspace([RouterSpec("default", url)],
                     [BrowseSpec(title="Browse", router="default"),
                      ConsumerSpec(title="Consumer 1", router="default", buffer=buffer),
                      ProducerSpec(title="Producer 1", router="default")])


class PaneDock(QDockWidget):
    """A dock holding one pane; closing it closes the pane."""

    closing = Signal(object)

    def __init__(self, pane: Pane, parent: QWidget | None = None) -> None:
        super().__init__(pane.title(), parent)
        self.pane = pane
        self.setObjectName(f"pane-{id(pane)}")
        self.setWidget(pane)
        self.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetClosable |
                         QDockWidget.DockWidgetFeature.DockWidgetMovable |
                         QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        pane.titleChanged.connect(self.setWindowTitle)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.closing.emit(self)
        super().closeEvent(event)


class MainWindow(QMainWindow):
    """``closed`` is emitted when the user closes the window."""

    closed = Signal()

    def __init__(self, registry: RouterRegistry, buffer: int = 10_000,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.registry = registry
        self.buffer = buffer
        self.names = AttributeNames(self)
        self.panes: list[Pane] = []
        self.docks: dict[Pane, PaneDock] = {}
        self.path: Path | None = None
        self._counters: dict[str, int] = {}
        self._last_consumer: ConsumerPane | None = None
        self.setWindowTitle("Elvin console")
        # panes dock inside an inner main window, so that they share all of its
        # space; the routers list sits beside it in a splitter
        self.dock_host = QMainWindow()
        self.dock_host.setDockOptions(QMainWindow.DockOption.AnimatedDocks |
                                      QMainWindow.DockOption.AllowTabbedDocks |
                                      QMainWindow.DockOption.AllowNestedDocks)
        self.dock_host.setTabPosition(Qt.DockWidgetArea.AllDockWidgetAreas,
                                      QTabWidget.TabPosition.North)
        self.dock_host.setDocumentMode(True)
        placeholder = QWidget()
        placeholder.setMaximumSize(0, 0)
        self.dock_host.setCentralWidget(placeholder)
        self.routers_panel = RoutersPanel(registry)
        self.splitter = split(Qt.Orientation.Horizontal, (self.routers_panel, 0),
                              (self.dock_host, 1))
        # the sidebar never sets the window's minimum width (below 1200 px it
        # folds by itself), so the window can be made narrow with it shown
        self.splitter.setCollapsible(0, True)
        self.routers_panel.setMinimumWidth(0)
        policy = self.routers_panel.sizePolicy()
        policy.setHorizontalPolicy(QSizePolicy.Policy.Ignored)
        self.routers_panel.setSizePolicy(policy)
        self.setCentralWidget(self.splitter)
        self.sidebar_button = QToolButton()
        self.sidebar_button.setCheckable(True)
        self.sidebar_button.setChecked(True)
        self.sidebar_button.setAutoRaise(True)
        self.sidebar_button.toggled.connect(self.set_sidebar_shown)
        self._sidebar_chosen = False        # the user's choice beats the automatic one
        self.routers_summary = QLabel()
        self.routers_summary.setTextFormat(Qt.TextFormat.RichText)
        self._menus()
        self.workspace_label = QLabel()
        self.statusBar().addWidget(self.sidebar_button)
        self.statusBar().addWidget(self.routers_summary)
        self.statusBar().addWidget(self.workspace_label, 1)
        registry.routersChanged.connect(self._watch_routers)
        registry.routersChanged.connect(self._update_title)   # an unsaved one is named by them
        self._watched: set[int] = set()
        self._watch_routers()
        self._update_title()
        fit_to_screen(self, PREFERRED_SIZE)

    # -- menus -----------------------------------------------------------------------------
    def _menus(self) -> None:
        bar = self.menuBar()
        file = bar.addMenu("&File")
        self._action(file, "&New workspace", self.new_workspace, QKeySequence.StandardKey.New)
        self._action(file, "&Open workspace…", self.open_dialog, QKeySequence.StandardKey.Open)
        self._action(file, "&Save workspace", self.save_current, QKeySequence.StandardKey.Save)
        self._action(file, "Save workspace &as…", self.save_dialog,
                     QKeySequence.StandardKey.SaveAs)
        file.addSeparator()
        self._action(file, "&Export received…", self.export_current, "Ctrl+E")
        file.addSeparator()
        self._action(file, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        view = bar.addMenu("&View")
        self.sidebar_action = self._action(view, "&Routers sidebar",
                                           lambda on: self.set_sidebar_shown(on, chosen=True),
                                           "Ctrl+Shift+B")
        self.sidebar_action.setCheckable(True)
        self.sidebar_action.setChecked(True)
        panes = bar.addMenu("&Panes")
        self._action(panes, "New &browse pane", lambda: self.add_pane("browse", focus=True),
                     "Ctrl+Shift+W")
        self._action(panes, "New &consumer", lambda: self.add_pane("consumer", focus=True),
                     "Ctrl+Shift+C")
        self._action(panes, "New &producer", lambda: self.add_pane("producer", focus=True),
                     "Ctrl+Shift+P")
        self._action(panes, "New &quench view", lambda: self.add_pane("quench", focus=True),
                     "Ctrl+Shift+Q")
        self._action(panes, "New &router statistics",
                     lambda: self.add_pane("router", focus=True), "Ctrl+Shift+R")
        panes.addSeparator()
        self._action(panes, "Re&name current pane…", self.rename_current, "F2")
        tools = bar.addMenu("&Tools")
        self._action(tools, "&Explain a match…", lambda: self.explain(None, ""),
                     "Ctrl+Shift+X")
        tools.addSeparator()
        self.apps_menu = tools.addMenu("&Open")
        from elvin_apps.suite import AppLauncher, add_app_actions
        self.launcher = AppLauncher(self)
        self.launcher.failed.connect(lambda text: self.statusBar().showMessage(text, 20_000))
        self.launcher.started.connect(
            lambda title: self.statusBar().showMessage(f"Starting {title}…", 5000))
        add_app_actions(self.apps_menu, self.launcher, "console", self.current_router_url)
        routers = bar.addMenu("&Routers")
        self._action(routers, "&Add router…", self.routers_panel.add_router)
        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "&About", self.about)

    def _action(self, menu, text: str, slot, shortcut=None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    # -- panes -------------------------------------------------------------------------------
    def add_pane(self, kind: str, spec=None, focus: bool = False) -> Pane:
        count = self._counters.get(kind, 0) + 1
        self._counters[kind] = count
        if spec is None:
            spec = {"browse": BrowseSpec(), "consumer": ConsumerSpec(buffer=self.buffer),
                    "producer": ProducerSpec(),
                    "quench": QuenchSpec(), "router": RouterViewSpec()}[kind]
        if not spec.title:
            spec.title = f"{_KIND_LABELS[kind]} {count}" if kind not in ("router", "browse") \
                else _KIND_LABELS[kind] + (f" {count}" if count > 1 else "")
        if not spec.router and len(self.registry):
            spec.router = self.registry.names()[0]
        if kind == "consumer":
            pane: Pane = ConsumerPane(self.registry, self.names, spec)
        elif kind == "producer":
            pane = ProducerPane(self.registry, self.names, spec)
        elif kind == "quench":
            pane = QuenchPane(self.registry, self.names, spec)
        elif kind == "router":
            pane = RouterViewPane(self.registry, spec)
        elif kind == "browse":
            pane = BrowsePane(self.registry, spec)
            pane.namesListed.connect(self.names.add)   # the router's names complete too
            pane.consumerRequested.connect(
                lambda expression, p=pane: self.open_consumer(expression, p.router_name))
        else:
            raise ValueError(f"unknown pane kind {kind!r}")
        pane.explainRequested.connect(self.explain)
        if isinstance(pane, ProducerPane):
            pane.expandedChanged.connect(lambda _on: QTimer.singleShot(0, self.arrange_heights))
        dock = PaneDock(pane, self.dock_host)
        dock.closing.connect(self._dock_closing)
        dock.visibilityChanged.connect(lambda visible, p=pane: self._pane_shown(p, visible))
        group = "producer" if kind == "producer" else "view"
        same = [d for p, d in self.docks.items() if _group(p.kind) == group]
        others = [d for p, d in self.docks.items() if _group(p.kind) != group]
        if same:
            self.dock_host.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
            self.dock_host.tabifyDockWidget(same[-1], dock)
        elif others and group == "producer":
            # below everything (splitting a view that is already tabbed would
            # only add one more tab)
            self.dock_host.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock,
                                         Qt.Orientation.Vertical)
        elif others:
            self.dock_host.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
            self.dock_host.splitDockWidget(dock, others[0], Qt.Orientation.Vertical)
        else:
            self.dock_host.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        self.panes.append(pane)
        self.docks[pane] = dock
        if isinstance(pane, ConsumerPane) and self._last_consumer is None:
            self._last_consumer = pane
        if focus or len(same) == 0:
            dock.show()
            dock.raise_()
        return pane

    def _pane_shown(self, pane: Pane, visible: bool) -> None:
        if visible and isinstance(pane, ConsumerPane):
            self._last_consumer = pane

    def _dock_closing(self, dock: PaneDock) -> None:
        self.close_pane(dock.pane)

    def close_pane(self, pane: Pane) -> None:
        dock = self.docks.pop(pane, None)
        if pane in self.panes:
            self.panes.remove(pane)
        if self._last_consumer is pane:
            self._last_consumer = next((p for p in self.panes
                                        if isinstance(p, ConsumerPane)), None)

        async def finish() -> None:
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await pane.shutdown()
            if dock is not None:
                self.dock_host.removeDockWidget(dock)
                dock.deleteLater()

        spawn(finish(), f"closing {pane.title()}")

    def open_consumer(self, expression: str, router: str = "") -> Pane:
        """A new consumer pane subscribed to ``expression`` (from Browse)."""
        spec = ConsumerSpec(router=router, subscription=expression, subscribed=True,
                            buffer=self.buffer)
        return self.add_pane("consumer", spec, focus=True)

    def panes_of(self, kind: str) -> list[Pane]:
        return [pane for pane in self.panes if pane.kind == kind]

    def show_pane(self, pane: Pane) -> None:
        dock = self.docks.get(pane)
        if dock is not None:
            dock.show()
            dock.raise_()

    def rename_current(self) -> None:
        pane = next((p for p in self.panes if p.isVisible() and p.hasFocus() or
                     p.isAncestorOf(self.focusWidget() or self)), None)
        pane = pane or (self.panes[-1] if self.panes else None)
        if pane is None:
            return
        title, ok = QInputDialog.getText(self, "Rename pane", "Title", text=pane.title())
        if ok and title.strip():
            pane.set_title(title.strip())

    # -- workspace -----------------------------------------------------------------------
    def workspace(self) -> Workspace:
        return Workspace(self.registry.specs(), [pane.to_spec() for pane in self.panes])

    async def clear(self) -> None:
        for pane in list(self.panes):
            dock = self.docks.pop(pane)
            self.panes.remove(pane)
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await pane.shutdown()
            self.dock_host.removeDockWidget(dock)
            dock.deleteLater()
        self._last_consumer = None
        self._counters.clear()
        await self.registry.clear()

    async def apply_workspace(self, workspace: Workspace, path: Path | None = None) -> None:
        """Replace everything with ``workspace``."""
        await self.clear()
        for spec in workspace.routers:
            try:
                self.registry.add(spec)
            except RouterError as exc:
                QMessageBox.warning(self, "Workspace", str(exc))
        for spec in workspace.panes:
            self.add_pane(spec.kind, spec)
        self.raise_front_panes()
        self.path = path
        self._update_title()
        self.arrange()

    def raise_front_panes(self) -> None:
        """Browse (else the first consumer) and the first producer in front
        of their tabs: again once the window is shown, since a dock raised
        before that may not stay raised."""
        front = self.panes_of("browse") or self.panes_of("consumer")
        if front:
            self.show_pane(front[0])
        if self.panes_of("producer"):
            self.show_pane(self.panes_of("producer")[0])

    def arrange(self) -> None:
        """Default proportions: a narrow routers column; views get about
        two thirds of the height, producers the rest (a folded producer
        only its bar)."""
        width = max(self.width(), 800)
        left = min(300, width // 4)
        self.splitter.setSizes([left, width - left])
        self.arrange_heights()

    def arrange_heights(self) -> None:
        view = next((d for p, d in self.docks.items() if _group(p.kind) == "view"), None)
        producer = next((d for p, d in self.docks.items() if _group(p.kind) == "producer"),
                        None)
        if view is not None and producer is not None:
            height = max(self.dock_host.height(), 300)
            pane = producer.pane
            if isinstance(pane, ProducerPane) and not pane.expanded:
                low = producer.minimumSizeHint().height() + 4
            else:
                # its natural height where the window allows, at most half:
                # on a small screen the editor still shows a few rows
                low = min(max(height * 36 // 100, producer.sizeHint().height()), height // 2)
            self.dock_host.resizeDocks([view, producer], [height - low, low],
                                       Qt.Orientation.Vertical)

    # -- routers sidebar -----------------------------------------------------------------
    def set_sidebar_shown(self, shown: bool, chosen: bool = True) -> None:
        if chosen:
            self._sidebar_chosen = True
        self.routers_panel.setVisible(shown)
        for control in (self.sidebar_button, self.sidebar_action):
            control.blockSignals(True)
            control.setChecked(shown)
            control.blockSignals(False)
        self.sidebar_button.setText("\N{BLACK LEFT-POINTING SMALL TRIANGLE} Routers" if shown
                                    else "\N{BLACK RIGHT-POINTING SMALL TRIANGLE} Routers")
        self.sidebar_button.setToolTip("Fold the routers sidebar away (Ctrl+Shift+B)" if shown
                                       else "Show the routers sidebar (Ctrl+Shift+B)")
        self._update_routers_summary()

    @property
    def sidebar_shown(self) -> bool:
        return not self.routers_panel.isHidden()

    def _watch_routers(self) -> None:
        for entry in self.registry.entries():
            if id(entry.manager) not in self._watched:
                self._watched.add(id(entry.manager))
                entry.manager.stateChanged.connect(self._update_routers_summary)
        self._update_routers_summary()

    def _update_routers_summary(self, *_args) -> None:
        """Each router's state in words, while the sidebar is folded."""
        if self.sidebar_shown:
            self.routers_summary.setText("")
            self.routers_summary.hide()
            return
        parts = []
        for entry in self.registry.entries():
            state = entry.manager.state
            colour = _STATE_COLOURS.get(state, "#c62828")
            words = _STATE_WORDS.get(state, state)
            parts.append(f"<span style='color:{colour}'>\N{BLACK CIRCLE}</span> "
                         f"{_html(entry.name)} {words}")
        self.routers_summary.setText(" · ".join(parts) or "no router")
        self.routers_summary.show()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if not self._sidebar_chosen:
            self.set_sidebar_shown(self.width() >= SIDEBAR_MIN_WIDTH, chosen=False)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not getattr(self, "_arranged", False):
            self._arranged = True
            self.raise_front_panes()
            self.arrange()
            QTimer.singleShot(0, self.arrange)   # again once the layout has its real size

    async def open_workspace(self, path: str | Path) -> bool:
        try:
            workspace = load(path)
        except WorkspaceError as exc:
            QMessageBox.warning(self, "Open workspace", str(exc))
            return False
        await self.apply_workspace(workspace, Path(path))
        self.statusBar().showMessage(f"Opened {path}", 5000)
        return True

    def save_workspace(self, path: str | Path) -> bool:
        try:
            save(self.workspace(), path)
        except WorkspaceError as exc:
            QMessageBox.warning(self, "Save workspace", str(exc))
            return False
        self.path = Path(path)
        self._update_title()
        self.statusBar().showMessage(f"Saved {path}", 5000)
        return True

    def new_workspace(self) -> None:
        url = self.registry.specs()[0].url if len(self.registry) else "elvin://127.0.0.1:2917"
        spawn(self.apply_workspace(default_workspace(url, self.buffer)), "new workspace")

    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open workspace", "", WORKSPACE_FILTER)
        if path:
            spawn(self.open_workspace(path), "opening workspace")

    def save_current(self) -> None:
        if self.path is None:
            self.save_dialog()
        else:
            self.save_workspace(self.path)

    def save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save workspace",
                                              str(self.path or "workspace.json"),
                                              WORKSPACE_FILTER)
        if path:
            if not Path(path).suffix:
                path += ".json"
            self.save_workspace(path)

    def _update_title(self) -> None:
        """The workspace's file, or for one never saved its routers: two
        consoles are told apart in the task bar."""
        if self.path:
            name = self.path.name
        else:
            routers = [f"{spec.name} ({spec.url.removeprefix('elvin://')})"
                       for spec in self.registry.specs()]
            name = "unsaved: " + (", ".join(routers[:2]) + (" …" if len(routers) > 2 else "")
                                  if routers else "no router")
        self.setWindowTitle(f"{name} — Elvin console")
        self.workspace_label.setText(f"Workspace: {self.path}" if self.path else
                                     "Workspace not saved yet (File ▸ Save workspace as…)")

    # -- explain -----------------------------------------------------------------------
    def explain(self, attributes=None, expression: str = "") -> ExplainDialog:
        """Open "Explain a match" (one per window), with this notification and
        subscription when given; else the current consumer's subscription."""
        dialog = getattr(self, "explain_dialog", None)
        if dialog is None:
            dialog = ExplainDialog(self.names, self._explain_sources, self)
            self.explain_dialog = dialog
        consumer = self.current_consumer()
        if not expression and not dialog.editor.expression().strip() and consumer:
            expression = consumer.editor.expression()
        dialog.set_expression(expression)
        if attributes is not None:
            dialog.set_notification(attributes)
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def _explain_sources(self) -> list[Source]:
        sources: list[Source] = []
        for pane in self.panes:
            if isinstance(pane, ConsumerPane):
                sources.append((f"Selected row of {pane.title()}",
                                lambda p=pane: (r.attributes if (r := p.selected_record())
                                                else None)))
            elif isinstance(pane, ProducerPane):
                sources.append((f"Draft of {pane.title()}", pane.draft))
        return sources

    def current_router_url(self) -> str | None:
        """The router of the pane in front (else the first): the other apps
        are started on it."""
        consumer = self.current_consumer()
        name = consumer.router_name if consumer is not None else ""
        entry = self.registry.get(name) if name else None
        if entry is None and len(self.registry):
            entry = self.registry.entries()[0]
        return entry.manager.url if entry is not None else None

    # -- export --------------------------------------------------------------------------
    def current_consumer(self) -> ConsumerPane | None:
        if self._last_consumer in self.panes:
            return self._last_consumer
        return next((p for p in self.panes if isinstance(p, ConsumerPane)), None)

    def export_current(self) -> None:
        pane = self.current_consumer()
        if pane is None:
            QMessageBox.information(self, "Export", "There is no consumer pane to export from.")
            return
        pane.export_dialog()

    def about(self) -> None:
        QMessageBox.about(self, "Elvin console",
                          f"<b>elvin-console</b> {__version__}<br>Write and test Elvin "
                          "subscriptions, send notifications, watch quench and router "
                          "statistics.")

    # -- closing -------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:
        self.closed.emit()
        super().closeEvent(event)

    async def shutdown(self) -> None:
        for pane in list(self.panes):
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await pane.shutdown()
        await self.registry.stop_all()


SIDEBAR_MIN_WIDTH = 1200
_STATE_COLOURS = {"connected": "#2e7d32", "connecting": "#ef8f00", "reconnecting": "#ef8f00"}
_STATE_WORDS = {"connected": "connected", "connecting": "connecting…",
                "reconnecting": "reconnecting…", "disconnected": "not connected"}


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _group(kind: str) -> str:
    return "producer" if kind == "producer" else "view"

