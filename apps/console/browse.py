"""The Browse pane: everything flowing through a router, as a tree, with no
subscription to write (what MQTT Explorer users expect of a broker).

Elvin has no "everything" subscription, so the pane asks the router which
attribute names are in use: elvind publishes them as
``Elvin-Router-Attributes`` while someone subscribes (``elvin.router.census``).
The pane subscribes to that, then to ``require(A) || require(B) || ...``
for the names listed, and changes its subscription as new names appear.
A router that does not publish the list (another implementation such as
Avis, or an elvind whose administrator turned ``attribute-names`` off) is
said in one line after ``census_timeout`` seconds; the consumer pane
still works there.

The tree (``browseindex``): one row per attribute name, with how many
notifications had it, how many a second and the latest value; under a
name that works as a key (short strings, integers: ``Group``, ``Symbol``)
one row per value, each with its count, rate and latest notification.
Selecting a row shows that latest notification in full; "Subscribe in a
consumer pane" turns the row into a subscription (``Group == "Chat"``).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from elvin_apps.console.browseindex import BrowseIndex
from elvin_apps.console.detailview import DetailView
from elvin_apps.console.pane import Pane
from elvin_apps.console.received import Received, display_value
from elvin_apps.console.routers import RouterRegistry
from elvin_apps.console.tasks import spawn
from elvin_apps.console.workspace import BrowseSpec
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QWidget,
)

from elvin.census import (
    BROWSE_TERM,
    CENSUS_ATTRIBUTE,
    CENSUS_SUBSCRIPTION,
    read_census,
    recent_request,
)
from elvin.client import Connection, Notification, Subscription
from elvin.errors import ElvinError
from elvin.qt import split
from elvin.subscription.unparse import quote_name, quote_string

__all__ = ["BrowsePane", "browse_expression"]

#: seconds to wait for the router's list of names before saying it has none
CENSUS_TIMEOUT = 12.0
#: names subscribed to at most (the most used first)
MAX_NAMES = 500
FLUSH_MS = 300
#: seconds after a replay request during which a notification already shown
#: is not counted again (the router replays what carries a new name, which
#: may have come live through an old one)
REPLAY_WINDOW = 5.0
#: notifications remembered for that, at most
SEEN = 2000
NAME_ROLE = Qt.ItemDataRole.UserRole + 11
VALUE_ROLE = Qt.ItemDataRole.UserRole + 12
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


def browse_expression(names: list[str]) -> str:
    """The subscription for every notification with one of ``names``. (The
    language cannot say "without an attribute": ``require`` of a missing
    name is bottom, not false; so the router's own census, which may match
    through ``Router-Id``, is left out as it arrives.)"""
    return " || ".join([BROWSE_TERM] + [f"require({quote_name(name)})" for name in names])


def fingerprint(attributes: dict) -> int:
    """A notification's identity, to tell a replayed one already shown."""
    try:
        return hash(frozenset(attributes.items()))
    except TypeError:                   # a value that is not hashable: never a duplicate
        return id(attributes)


def _rate(value: float) -> str:
    if value <= 0:
        return ""
    return f"{value:,.1f}/s" if value < 100 else f"{value:,.0f}/s"


class BrowsePane(Pane):
    """``consumerRequested(str)``: open a consumer pane with this subscription;
    ``namesListed(list)``: the router's attribute names (for completion)."""

    kind = "browse"
    consumerRequested = Signal(str)
    namesListed = Signal(list)

    def __init__(self, registry: RouterRegistry, spec: BrowseSpec | None = None,
                 parent: QWidget | None = None, *, census_timeout: float = CENSUS_TIMEOUT
                 ) -> None:
        spec = spec or BrowseSpec()
        super().__init__(registry, spec.title or "Browse", spec.router, parent)
        self.census_timeout = census_timeout
        self.index = BrowseIndex()
        self.names: dict[str, int] = {}          # the router's names and their counts
        self.subscribed_names: list[str] = []
        self.census_sub: Subscription | None = None
        self.sub: Subscription | None = None
        self.census_seen = False
        self._pending: list[Received] = []
        self._seq = 0
        self._seen: OrderedDict[int, None] = OrderedDict()   # fingerprints, newest last
        self._replay_until = 0.0
        self._lock = asyncio.Lock()
        self._resubscribe_wanted = False
        self._items: dict[str, QTreeWidgetItem] = {}
        self._value_items: dict[tuple[str, str], QTreeWidgetItem] = {}

        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter names and values")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self._apply_filter)
        self.consumer_button = QPushButton("Subscribe in a consumer pane")
        self.consumer_button.setToolTip("A consumer pane with a subscription for the row "
                                        "selected: Name == value, or require(Name)")
        self.consumer_button.setEnabled(False)
        self.consumer_button.clicked.connect(self._open_consumer)
        top = self.router_row()
        top.addWidget(self.filter_edit, 1)
        top.addWidget(self.consumer_button)

        self.tree = QTreeWidget()
        self.tree.setColumnCount(4)
        self.tree.setHeaderLabels(["Attribute / value", "Count", "Rate", "Latest"])
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSortingEnabled(False)
        header = self.tree.header()
        header.setStretchLastSection(True)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for column, width in enumerate((220, 70, 70)):
            header.resizeSection(column, width)
        self.tree.currentItemChanged.connect(self._current_changed)
        self.detail = DetailView()
        self.detail.explain_button.clicked.connect(self._explain)
        self.stats_label = QLabel()
        self.stats_label.setTextFormat(Qt.TextFormat.RichText)

        layout = self.column(top)
        layout.addWidget(self.status_label)
        layout.addWidget(split(Qt.Orientation.Horizontal, (self.tree, 3), (self.detail, 2)), 1)
        layout.addWidget(self.stats_label)

        self._census_timer = QTimer(self)
        self._census_timer.setSingleShot(True)
        self._census_timer.timeout.connect(self._no_census)
        self.timer = QTimer(self)
        self.timer.setInterval(FLUSH_MS)
        self.timer.timeout.connect(self.tick)
        self.timer.start()
        self.set_status("Waiting for the router to connect.")
        self._update_stats()
        self.ready()

    # -- the router's list of names ------------------------------------------------------
    def on_connected(self, conn: Connection) -> None:
        sub = self.census_sub
        if sub is None or sub.closed or sub.connection is not conn:
            spawn(self._start(conn), "browsing", lambda m: self.set_status(m, error=True))

    def on_router_changed(self) -> None:
        self.clear()
        conn = self.connection()
        spawn(self._start(conn), "browsing", lambda m: self.set_status(m, error=True))

    async def _start(self, conn: Connection | None) -> None:
        async with self._lock:
            await self._restart(conn)
        self._resubscribe_if_wanted()      # a census that came while this held the lock

    async def _restart(self, conn: Connection | None) -> None:
        """Drop the subscriptions and ask ``conn`` anew (under the lock)."""
        await self._close()
        self.census_seen = False
        self.subscribed_names = []
        if conn is None:
            self.set_status(f"Waiting for router {self.router_name or '(none)'} to "
                            "connect.")
            return
        try:
            self.census_sub = await conn.subscribe(CENSUS_SUBSCRIPTION, buffer_size=0,
                                                   listener=self._census)
        except ElvinError as exc:
            self.set_status(f"Cannot ask {self.router_name} which names are in use: "
                            f"{exc}", error=True)
            return
        self.set_status(f"Asking {self.router_name} which attribute names are in use…")
        self._census_timer.start(int(self.census_timeout * 1000))
        if self.names:                   # a new connection: follow what was known
            await self._subscribe_names(conn)

    def _census(self, notification: Notification) -> None:
        listed = read_census(notification.attributes)
        if listed is None:
            return
        self.census_seen = True
        self._census_timer.stop()
        grew = any(name not in self.names for name in listed)
        self.names.update(listed)
        if grew:
            self.namesListed.emit(list(listed))
        if not self.names:
            self.set_status(f"{self.router_name} has delivered nothing yet; notifications "
                            "show here as they flow.")
        if grew:
            self._resubscribe()

    def _no_census(self) -> None:
        if not self.census_seen:
            self.set_status(f"{self.router_name} does not say which attribute names are in "
                            f"use (no {CENSUS_ATTRIBUTE}: not an elvind, or its "
                            "attribute-names is off), so there is nothing to browse without "
                            "a subscription: use a consumer pane.", error=True)

    def _resubscribe(self) -> None:
        if self._lock.locked():
            self._resubscribe_wanted = True       # once the current change is done
            return
        conn = self.connection()
        if conn is not None:
            spawn(self._locked_subscribe(conn), "browsing",
                  lambda m: self.set_status(m, error=True))

    async def _locked_subscribe(self, conn: Connection) -> None:
        async with self._lock:
            await self._subscribe_names(conn)
        self._resubscribe_if_wanted()

    def _resubscribe_if_wanted(self) -> None:
        """Every holder of the lock calls this once it lets go: names a
        census added meanwhile are subscribed to then."""
        if self._resubscribe_wanted:
            self._resubscribe_wanted = False
            self._resubscribe()

    async def _subscribe_names(self, conn: Connection) -> None:
        names = sorted(self.names, key=lambda n: (-self.names[n], n))[:MAX_NAMES]
        names.sort(key=str.casefold)
        if names == self.subscribed_names and self.sub is not None and not self.sub.closed:
            return
        expression = browse_expression(names)
        before = set(self.subscribed_names)
        try:
            if self.sub is not None and not self.sub.closed and self.sub.connection is conn:
                await self.sub.modify(expression)
                added: list[str] | None = [name for name in names if name not in before]
            else:
                self.sub = await conn.subscribe(expression, buffer_size=0,
                                                listener=self._deliver)
                added = None           # a new subscription: everything kept
            # what already flowed: the router replays its last notifications
            # (of the new names) that this subscription could have received
            # (elvin.router.recent; a router without it delivers this to no one)
            if added is None or added:
                self._replay_until = time.monotonic() + REPLAY_WINDOW
                await conn.send(recent_request(self.sub.id, added or ()))
        except ElvinError as exc:
            self.set_status(f"{self.router_name} refused the browsing subscription: {exc}",
                            error=True)
            return
        self.subscribed_names = names
        left_out = len(self.names) - len(names)
        self.set_status(f"Browsing everything on {self.router_name}: {len(names)} attribute "
                        "names in use" + (f" (the {left_out} least used left out)"
                                          if left_out > 0 else "") + ".")

    async def _close(self) -> None:
        self._census_timer.stop()
        for attr in ("sub", "census_sub"):
            sub = getattr(self, attr)
            setattr(self, attr, None)
            if sub is not None and not sub.closed:
                try:
                    await sub.close()
                except (ElvinError, OSError, TimeoutError):
                    pass

    # -- notifications -------------------------------------------------------------------
    def _deliver(self, notification: Notification) -> None:
        if CENSUS_ATTRIBUTE in notification.attributes:
            return                     # the census, read by its own subscription
        mark = fingerprint(notification.attributes)
        seen = self._seen
        if mark in seen and time.monotonic() < self._replay_until:
            return                     # replayed, and shown when it came
        seen[mark] = None
        seen.move_to_end(mark)
        if len(seen) > SEEN:
            seen.popitem(last=False)
        self._seq += 1
        self._pending.append(Received(self._seq, time.time(), dict(notification.attributes),
                                      notification.secure))

    def tick(self) -> int:
        """Timer: take in what arrived, refresh counts and rates."""
        batch, self._pending = self._pending, []
        now = time.monotonic()
        changed = self.index.feed(batch, now)
        for name, values in changed.items():
            self._show_name(name, values)
        self._refresh_rates(now)
        self._update_stats(now)
        return len(batch)

    def _show_name(self, name: str, values: set[str]) -> None:
        node = self.index.names[name]
        item = self._items.get(name)
        if item is None:
            item = QTreeWidgetItem([name])
            item.setData(0, NAME_ROLE, name)
            for column in (1, 2):
                item.setTextAlignment(column, _RIGHT)
            # in name order among the rows already there
            before = sum(1 for other in self._items if other.casefold() < name.casefold())
            self._items[name] = item
            self.tree.insertTopLevelItem(before, item)
            self._filter_item(item)
        item.setText(1, f"{node.count:,}")
        latest = node.latest.attributes.get(name) if node.latest else None
        item.setText(3, display_value(latest) if latest is not None else "")
        item.setToolTip(3, item.text(3))
        if not node.keyed:
            for (owner, value), child in list(self._value_items.items()):
                if owner == name:
                    item.removeChild(child)
                    del self._value_items[(owner, value)]
            item.setToolTip(0, f"{name}: many different values (a measurement): "
                               "no row per value")
            return
        for value in values:
            child_node = node.values.get(value)
            if child_node is None:
                continue
            child = self._value_items.get((name, value))
            if child is None:
                child = QTreeWidgetItem([value])
                child.setData(0, NAME_ROLE, name)
                child.setData(0, VALUE_ROLE, value)
                for column in (1, 2):
                    child.setTextAlignment(column, _RIGHT)
                self._value_items[(name, value)] = child
                item.addChild(child)
                item.sortChildren(0, Qt.SortOrder.AscendingOrder)
                self._filter_item(child)
            child.setText(1, f"{child_node.count:,}")
            if child_node.latest is not None:
                child.setText(3, child_node.latest.summary(200))
                child.setToolTip(3, child_node.latest.text())
        current = self.tree.currentItem()
        if current is not None and current.data(0, NAME_ROLE) == name:
            self._current_changed(current, None)

    def _refresh_rates(self, now: float) -> None:
        for name, item in self._items.items():
            node = self.index.names[name]
            item.setText(2, _rate(node.rate.rate(now)))
            if item.isExpanded():
                for value, child_node in node.values.items():
                    child = self._value_items.get((name, value))
                    if child is not None:
                        child.setText(2, _rate(child_node.rate.rate(now)))

    def _update_stats(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        index = self.index
        self.stats_label.setText(
            f"<b>{index.total:,}</b> notifications · <b>{index.rate.rate(now):,.1f}</b>/s · "
            f"{len(index.names):,} attribute names seen here"
            + (f" · {len(self.names):,} in use at the router" if self.census_seen else "")
            + self._left_out_text())

    def _left_out_text(self) -> str:
        """The names past the index's bound, said where the counts are."""
        index = self.index
        if not index.left_out_names:
            return ""
        more = "over " if index.left_out_capped else ""
        return (f" · <span style='color:#b45309'>{more}{len(index.left_out_names):,} more "
                f"names left out</span> (only the first {index.max_names:,} are shown)")

    def clear(self) -> None:
        self.index.clear()
        self.names.clear()
        self._pending.clear()
        self.tree.clear()
        self._items.clear()
        self._value_items.clear()
        self.detail.show_record(None, None)
        self._update_stats()

    # -- selection, filter ---------------------------------------------------------------
    def _selected(self) -> tuple[str, str | None] | None:
        item = self.tree.currentItem()
        if item is None:
            return None
        return item.data(0, NAME_ROLE), item.data(0, VALUE_ROLE)

    def _node_of(self, name: str, value: str | None):
        node = self.index.names.get(name)
        if node is None or value is None:
            return node
        return node.values.get(value)

    def _record_of(self, name: str, value: str | None) -> Received | None:
        node = self._node_of(name, value)
        return node.latest if node is not None else None

    def _current_changed(self, current: QTreeWidgetItem | None, _previous) -> None:
        self.consumer_button.setEnabled(current is not None)
        if current is None:
            return
        name, value = current.data(0, NAME_ROLE), current.data(0, VALUE_ROLE)
        node = self._node_of(name, value)
        if node is not None:
            self.detail.show_record(node.latest, node.previous,
                                    f"{name} {value}" if value is not None else
                                    f"those with {name}")

    def subscription_for(self, name: str, value: str | None) -> str:
        """``Name == value`` for a value row (the value as the latest
        notification had it), ``require(Name)`` for a name row."""
        record = self._record_of(name, value)
        raw = record.attributes.get(name) if (record is not None and value is not None) \
            else None
        if isinstance(raw, str):
            return f"{quote_name(name)} == {quote_string(raw)}"
        if isinstance(raw, int) and not isinstance(raw, bool):
            return f"{quote_name(name)} == {int(raw)}"
        return f"require({quote_name(name)})"

    def _open_consumer(self) -> None:
        selected = self._selected()
        if selected is not None:
            self.consumerRequested.emit(self.subscription_for(*selected))

    def _explain(self) -> None:
        selected = self._selected()
        record = self._record_of(*selected) if selected else None
        self.explainRequested.emit(record.attributes if record else None,
                                   self.subscription_for(*selected) if selected else "")

    def _apply_filter(self, *_args) -> None:
        for item in self._items.values():
            self._filter_item(item)
            for index in range(item.childCount()):
                self._filter_item(item.child(index))

    def _filter_item(self, item: QTreeWidgetItem) -> None:
        text = self.filter_edit.text().strip().casefold()
        if not text:
            item.setHidden(False)
            return
        if item.parent() is None:
            children = [item.child(i).text(0) for i in range(item.childCount())]
            item.setHidden(text not in item.text(0).casefold() and
                           not any(text in c.casefold() for c in children))
        else:
            parent = item.parent()
            item.setHidden(text not in item.text(0).casefold() and
                           text not in parent.text(0).casefold())

    # -- tests and the workspace ---------------------------------------------------------
    def rows(self) -> dict[str, tuple[str, dict[str, str]]]:
        """``{name: (count, {value: count})}`` as shown (tests)."""
        return {name: (item.text(1), {item.child(i).text(0): item.child(i).text(1)
                                      for i in range(item.childCount())})
                for name, item in self._items.items()}

    def to_spec(self) -> BrowseSpec:
        return BrowseSpec(title=self.title(), router=self.router_name)

    async def shutdown(self) -> None:
        self.timer.stop()
        self._census_timer.stop()
        async with self._lock:
            await self._close()
