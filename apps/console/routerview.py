"""The router pane: live charts of a router's statistics.

The router publishes an ``Elvin-Router-Stats`` notification every
stats-interval while someone subscribes to it (elvin/router/stats.py), so
this pane is just a subscriber: ``require(Elvin-Router-Stats)``. Samples are
kept per ``Router-Id`` (federated routers may deliver each other's), and
charted for the one chosen: notifications in and out per second,
connections, subscriptions and quenches, and drops per interval (the
counter is cumulative, so the chart shows its increase, with the total in
the summary line). Below the charts, the router's busiest clients with their
figures (``Top-Clients``) and how many notifications its publish limit
dropped (``Throttled``; elvin.router.clientstats).

After a router restart (a new Router-Id: host, pid and start time) the pane
follows the router it is connected to: the first Router-Id not seen before
the reconnection is taken as that router's, and selected if the old one
of the connected router was (a router the user picked stays picked).
"""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections import deque
from dataclasses import dataclass

from elvin_apps.console.chart import TimeSeriesChart, format_number
from elvin_apps.console.pane import Pane
from elvin_apps.console.routers import RouterRegistry
from elvin_apps.console.tasks import spawn
from elvin_apps.console.workspace import RouterViewSpec
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QGridLayout, QLabel, QWidget

from elvin.client import Connection, Notification, Subscription
from elvin.errors import ElvinError

__all__ = ["RouterViewPane", "Sample", "STATS_SUBSCRIPTION", "describe_router_id"]

STATS_SUBSCRIPTION = "require(Elvin-Router-Stats)"
MAX_SAMPLES = 20_000
WINDOWS = ((60, "last minute"), (300, "last 5 minutes"), (900, "last 15 minutes"),
           (3600, "last hour"))


@dataclass(frozen=True)
class Sample:
    time: float                 # monotonic, when received
    rate_in: float
    rate_out: float
    connections: int
    subscriptions: int
    quenches: int
    drops: int                  # cumulative
    uptime: float
    notifications_in: int
    notifications_out: int
    throttled: int = 0          # cumulative
    top_clients: str = ""       # "HOST:PORT in N out N ...; ..." (elvin.router.clientstats)

    @classmethod
    def from_notification(cls, attrs, now: float) -> Sample:
        def number(name: str, default: float = 0) -> float:
            value = attrs.get(name, default)
            return float(value) if isinstance(value, (int, float)) else default
        return cls(now, number("Notifications-In-Per-Second"),
                   number("Notifications-Out-Per-Second"), int(number("Connections")),
                   int(number("Subscriptions")), int(number("Quenches")), int(number("Drops")),
                   number("Uptime"), int(number("Notifications-In")),
                   int(number("Notifications-Out")), int(number("Throttled")),
                   top if isinstance(top := attrs.get("Top-Clients"), str) else "")


#: elvind's Router-Id: host, process id, start time (Unix seconds), sequence
_ROUTER_ID = re.compile(r"(?P<host>.+):(?P<pid>\d+):(?P<started>\d{9,11}):(?P<seq>\d+)")


def describe_router_id(router_id: str, now: float | None = None) -> str:
    """A Router-Id in words: ``vm:32705:1795797083:1`` reads "vm, started
    14:31 (process 32705)"; the date is said unless it is today, and the
    sequence only when one process runs several routers. An id in another
    form (another router implementation) is shown as it is."""
    found = _ROUTER_ID.fullmatch(router_id)
    if found is None:
        return router_id
    started = time.localtime(int(found["started"]))
    today = time.localtime(time.time() if now is None else now)
    when = time.strftime("%H:%M", started)
    if started[:3] != today[:3]:
        when = time.strftime("%d %b %Y ", started).lstrip("0") + when
    sequence = int(found["seq"])
    extra = f", router {sequence}" if sequence > 1 else ""
    return f"{found['host']}, started {when} (process {found['pid']}{extra})"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def _clients_html(text: str) -> str:
    """``Top-Clients`` (``HOST:PORT in N out N ...; ...``) as lines."""
    rows = [row.strip() for row in text.split(";") if row.strip()]
    if not rows:
        return ""
    return "<b>Busiest clients</b><br>" + "<br>".join(html.escape(row) for row in rows)


class RouterViewPane(Pane):
    kind = "router"

    def __init__(self, registry: RouterRegistry, spec: RouterViewSpec | None = None,
                 parent: QWidget | None = None) -> None:
        spec = spec or RouterViewSpec()
        super().__init__(registry, spec.title or "Router statistics", spec.router, parent)
        self.sub: Subscription | None = None
        self._lock = asyncio.Lock()
        self.samples: dict[str, deque[Sample]] = {}
        self.received = 0
        #: the Router-Id taken as the connected router's, and the ids seen
        #: before the last (re)connection (the next new one is the router's)
        self.own_id: str | None = None
        self._seen_before: set[str] | None = set()
        #: the router of the last connection, and the one a failover left
        self._connected_url: str | None = None
        self._moved_from: str | None = None

        self.id_combo = QComboBox()
        self.id_combo.setToolTip("Routers whose statistics arrive here (federated routers "
                                 "may forward each other's)")
        self.id_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.id_combo.currentIndexChanged.connect(lambda _i: self.redraw())
        self.window_combo = QComboBox()
        for seconds, label in WINDOWS:
            self.window_combo.addItem(label, seconds)
        index = self.window_combo.findData(spec.window)
        if index < 0:
            self.window_combo.addItem(f"last {spec.window} s", spec.window)
            index = self.window_combo.count() - 1
        self.window_combo.setCurrentIndex(index)
        self.window_combo.currentIndexChanged.connect(self._window_changed)
        top = self.router_row()
        top.addWidget(QLabel("Statistics of"))
        top.addWidget(self.id_combo)
        top.addStretch(1)
        top.addWidget(QLabel("Show"))
        top.addWidget(self.window_combo)

        window = self.window()
        self.rate_chart = TimeSeriesChart("Notifications per second",
                                          [("in", "#1565c0"), ("out", "#ef6c00")], window, "/s")
        self.connections_chart = TimeSeriesChart("Connections", [("clients", "#2e7d32")],
                                                 window)
        self.subscriptions_chart = TimeSeriesChart(
            "Subscriptions and quenches", [("subscriptions", "#6a1b9a"),
                                           ("quenches", "#00838f")], window)
        self.drops_chart = TimeSeriesChart("Drops per interval", [("dropped", "#c62828")],
                                           window)
        grid = QGridLayout()
        grid.setSpacing(8)
        grid.addWidget(self.rate_chart, 0, 0)
        grid.addWidget(self.connections_chart, 0, 1)
        grid.addWidget(self.subscriptions_chart, 1, 0)
        grid.addWidget(self.drops_chart, 1, 1)
        self.summary = QLabel()
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.setWordWrap(True)
        self.clients_label = QLabel()
        self.clients_label.setTextFormat(Qt.TextFormat.RichText)
        self.clients_label.setWordWrap(True)
        self.clients_label.setToolTip("The router's busiest clients (notifications in and "
                                      "out), from its statistics notification")
        layout = self.column(top)
        layout.addWidget(self.status_label)
        layout.addWidget(self.summary)
        layout.addLayout(grid, 1)
        layout.addWidget(self.clients_label)
        self.set_status("Waiting for the router to connect.")
        self.summary.setText("")
        self.ready()

    # -- subscription ---------------------------------------------------------------------
    def charts(self) -> list[TimeSeriesChart]:
        return [self.rate_chart, self.connections_chart, self.subscriptions_chart,
                self.drops_chart]

    def window(self) -> int:
        return int(self.window_combo.currentData() or 300)

    def _window_changed(self) -> None:
        for chart in self.charts():
            chart.window = self.window()
        self.redraw()

    def on_connected(self, conn: Connection) -> None:
        self._seen_before = set(self.samples)
        # a reconnection at another router (failover) is said as such
        previous, self._connected_url = self._connected_url, conn.url
        self._moved_from = previous if previous not in (None, conn.url) else None
        sub = self.sub
        if sub is None or sub.closed or sub.connection is not conn:
            spawn(self._subscribe(), "router statistics",
                  lambda m: self.set_status(m, error=True))

    def on_router_changed(self) -> None:
        self.samples.clear()
        self.id_combo.clear()
        self.own_id = None
        self._seen_before = set()
        self.redraw()
        spawn(self._subscribe(), "router statistics", lambda m: self.set_status(m, error=True))

    async def _subscribe(self) -> None:
        async with self._lock:
            await self._close()
            conn = self.connection()
            if conn is None:
                self.set_status(f"Waiting for router {self.router_name or '(none)'} to "
                                "connect.")
                return
            try:
                self.sub = await conn.subscribe(STATS_SUBSCRIPTION, buffer_size=0,
                                                listener=self._stats)
            except ElvinError as exc:
                self.set_status(f"Cannot subscribe to the statistics: {exc}", error=True)
                return
            if not self.received:
                self.set_status(f"Subscribed to {self.router_name}'s statistics; the router "
                                "sends them every stats-interval (elvind --stats-interval, "
                                "5 s by default).")

    async def _close(self) -> None:
        sub, self.sub = self.sub, None
        if sub is not None and not sub.closed:
            try:
                await sub.close()
            except (ElvinError, OSError, TimeoutError):
                pass

    def _stats(self, notification: Notification) -> None:
        router_id = notification.get("Router-Id")
        router_id = router_id if isinstance(router_id, str) and router_id else "(unnamed)"
        samples = self.samples.get(router_id)
        if samples is None:
            samples = self.samples[router_id] = deque(maxlen=MAX_SAMPLES)
            self.id_combo.addItem(describe_router_id(router_id), router_id)
            self.id_combo.setItemData(self.id_combo.count() - 1, f"Router-Id {router_id}",
                                      Qt.ItemDataRole.ToolTipRole)
        samples.append(Sample.from_notification(notification, time.monotonic()))
        if self._seen_before is not None and router_id not in self._seen_before:
            self._follow(router_id)
        self.received += 1
        if self.received == 1:
            self.set_status("")
        if router_id == self.current_id():
            self.redraw()

    def _follow(self, router_id: str) -> None:
        """``router_id`` is the connected router's (new since the last
        connection): select it if the pane was showing that router."""
        self._seen_before = None
        previous, self.own_id = self.own_id, router_id
        if previous is not None and self.current_id() == previous:
            self.id_combo.setCurrentIndex(self.id_combo.findData(router_id))
            why = f"Failed over from {self._moved_from} to {self._connected_url}" \
                if self._moved_from \
                else "The router restarted"
            self.set_status(f"{why}: now showing "
                            f"{describe_router_id(router_id)} "
                            f"(was {describe_router_id(previous)}).")

    def current_id(self) -> str:
        return self.id_combo.currentData() or ""

    def current_samples(self) -> list[Sample]:
        return list(self.samples.get(self.current_id(), ()))

    # -- drawing ---------------------------------------------------------------------------
    def redraw(self) -> None:
        samples = self.current_samples()
        start = time.monotonic() - self.window() - 5
        shown = [s for s in samples if s.time >= start]
        self.rate_chart.set_data([[(s.time, s.rate_in) for s in shown],
                                  [(s.time, s.rate_out) for s in shown]])
        self.connections_chart.set_data([[(s.time, s.connections) for s in shown]])
        self.subscriptions_chart.set_data([[(s.time, s.subscriptions) for s in shown],
                                           [(s.time, s.quenches) for s in shown]])
        drops = []
        for previous, sample in zip(shown, shown[1:], strict=False):
            drops.append((sample.time, max(sample.drops - previous.drops, 0)))
        self.drops_chart.set_data([drops])
        if samples:
            last = samples[-1]
            self.summary.setText(
                f"<b>{html.escape(describe_router_id(self.current_id()))}</b> · "
                f"up {_duration(last.uptime)} · "
                f"{format_number(last.notifications_in)} in, "
                f"{format_number(last.notifications_out)} out since start · "
                f"{last.connections} connections · {last.subscriptions} subscriptions · "
                f"{last.quenches} quenches · "
                + (f"<span style='color:#c62828'><b>{last.drops:,}</b> dropped</span>"
                   if last.drops else "no drops")
                + (f" · <span style='color:#c62828'><b>{last.throttled:,}</b> throttled "
                   "(publish limit)</span>" if last.throttled else ""))
            self.clients_label.setText(_clients_html(last.top_clients))
        else:
            self.clients_label.setText("")

    def to_spec(self) -> RouterViewSpec:
        return RouterViewSpec(title=self.title(), router=self.router_name, window=self.window())

    async def shutdown(self) -> None:
        async with self._lock:
            await self._close()
