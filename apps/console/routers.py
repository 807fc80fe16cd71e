"""The saved routers of a workspace, each with its own live connection.

Every router the user saves (name, URL, raw keys, connection options) gets
one ``elvin.qt.ConnectionManager``, which connects in the background,
retries, reconnects and restores subscriptions, and reports its state to a
``StatusWidget``. Panes refer to routers by name and listen to
``connected`` to (re)make their subscriptions on a fresh connection.
Editing a router keeps its manager object (so status widgets stay bound)
and restarts it with the new settings.
"""

from __future__ import annotations

import contextlib
import logging

from elvin_apps.console.keytext import KeyTextError
from elvin_apps.console.tasks import spawn
from elvin_apps.console.workspace import RouterSpec
from PySide6.QtCore import QObject, Signal

from elvin.qt import ConnectionManager
from elvin.router_url import split_router_urls

__all__ = ["RouterEntry", "RouterRegistry", "RouterError"]

log = logging.getLogger("elvin_apps.console")


class RouterError(ValueError):
    """A router definition that cannot be used (name taken, bad keys...)."""


def routers(url: str) -> str | list[str]:
    """A saved router's URL as the connection takes it: several URLs apart
    by spaces are routers to fail over among, in order."""
    urls = split_router_urls(url)
    return urls if len(urls) > 1 else url.strip()


def connect_kwargs(spec: RouterSpec) -> dict:
    """Connection arguments for ``ConnectionManager`` from a saved router."""
    try:
        keys = spec.keys
        kwargs: dict = {"reconnect_delay": 0.2, "reconnect_max_delay": 5.0}
        notification_keys = keys.notification_keys()
        subscription_keys = keys.subscription_keys()
    except KeyTextError as exc:
        raise RouterError(f"router {spec.name!r}: {exc}") from None
    if notification_keys is not None:
        kwargs["notification_keys"] = notification_keys
    if subscription_keys is not None:
        kwargs["subscription_keys"] = subscription_keys
    if spec.options:
        kwargs["options"] = dict(spec.options)
    return kwargs


class RouterEntry(QObject):
    """One saved router and its connection manager."""

    changed = Signal()

    def __init__(self, spec: RouterSpec, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.spec = spec
        self.manager = ConnectionManager(routers(spec.url), self, retry_delay=0.5, max_retry_delay=10.0,
                                         **connect_kwargs(spec))

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def connection(self):
        return self.manager.connection

    async def apply(self, spec: RouterSpec) -> None:
        """New settings: reconnect with them (subscriptions are made again
        by the panes when ``connected`` fires)."""
        kwargs = connect_kwargs(spec)
        self.spec = spec
        self.manager.connect_kwargs = kwargs
        await self.manager.set_url(routers(spec.url))
        self.changed.emit()

    async def reconnect(self) -> None:
        await self.manager.set_url(routers(self.spec.url))


class RouterRegistry(QObject):
    """The routers by name. ``routersChanged`` fires when one is added,
    removed or renamed (pane router choosers listen to it);
    ``routerRenamed(old, new)`` lets panes follow a rename."""

    routersChanged = Signal()
    routerRenamed = Signal(str, str)

    def __init__(self, parent: QObject | None = None, autostart: bool = True) -> None:
        super().__init__(parent)
        self._entries: dict[str, RouterEntry] = {}
        self.autostart = autostart

    def names(self) -> list[str]:
        return list(self._entries)

    def entries(self) -> list[RouterEntry]:
        return list(self._entries.values())

    def get(self, name: str) -> RouterEntry | None:
        return self._entries.get(name)

    def __len__(self) -> int:
        return len(self._entries)

    def specs(self) -> list[RouterSpec]:
        return [entry.spec for entry in self._entries.values()]

    def add(self, spec: RouterSpec) -> RouterEntry:
        if not spec.name.strip():
            raise RouterError("a router needs a name")
        if spec.name in self._entries:
            raise RouterError(f"there is already a router named {spec.name!r}")
        entry = RouterEntry(spec, self)
        self._entries[spec.name] = entry
        if self.autostart:
            entry.manager.start()
        self.routersChanged.emit()
        return entry

    async def update(self, name: str, spec: RouterSpec) -> RouterEntry:
        entry = self._entries.get(name)
        if entry is None:
            raise RouterError(f"no router named {name!r}")
        if spec.name != name:
            if spec.name in self._entries:
                raise RouterError(f"there is already a router named {spec.name!r}")
            connect_kwargs(spec)   # check before changing anything
            self._entries = {(spec.name if k == name else k): v
                             for k, v in self._entries.items()}
        await entry.apply(spec)
        if spec.name != name:
            self.routerRenamed.emit(name, spec.name)
            self.routersChanged.emit()
        return entry

    async def remove(self, name: str) -> None:
        entry = self._entries.pop(name, None)
        if entry is None:
            return
        self.routersChanged.emit()
        with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
            await entry.manager.stop()
        entry.deleteLater()

    def remove_later(self, name: str) -> None:
        spawn(self.remove(name), f"removing router {name}")

    async def stop_all(self) -> None:
        for entry in list(self._entries.values()):
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await entry.manager.stop()

    async def clear(self) -> None:
        for name in list(self._entries):
            await self.remove(name)
