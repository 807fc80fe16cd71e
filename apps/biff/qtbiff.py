"""``QtBiff``: a Biff as a QObject, for widgets that want signals.

The Biff core knows nothing of Qt; this thin adapter turns its listener
calls into signals, starts it on the connection of an ``elvin.qt``
``ConnectionManager`` (and moves it when the manager opens a new
connection), and runs its coroutines as tasks on the qasync loop so that
slots can call it without awaiting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from elvin_apps.biff.core import Biff
from elvin_apps.biff.notify import new_starters
from PySide6.QtCore import QObject, Signal

from elvin.qt import ConnectionManager

__all__ = ["QtBiff"]

log = logging.getLogger("elvin_apps.biff")


class QtBiff(QObject):
    """Signals: ``changed()`` after any visible change; ``countChanged(int)``
    when the number of active users changes; ``activeChanged(bool)`` when
    the local user's state flips (also when ``active_timeout`` ends it);
    ``started(list)`` with the other people who just became active (see
    ``notify.new_starters``); ``error(str)`` when starting on a connection
    fails."""

    changed = Signal()
    started = Signal(list)
    countChanged = Signal(int)
    activeChanged = Signal(bool)
    error = Signal(str)

    def __init__(self, biff: Biff, manager: ConnectionManager,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._biff = biff
        self._manager = manager
        self._count = biff.count
        self._active = biff.is_active
        self._drinkers = biff.active_members
        self._tasks: set[asyncio.Task] = set()
        self._closed = False
        biff.add_listener(self._on_biff_changed)
        manager.connected.connect(self._on_connected)

    @property
    def biff(self) -> Biff:
        return self._biff

    @property
    def manager(self) -> ConnectionManager:
        return self._manager

    def count(self) -> int:
        return self._biff.count

    def isActive(self) -> bool:
        return self._biff.is_active

    # -- control --------------------------------------------------------------------
    async def attach(self) -> None:
        """Start the biff on the manager's connection now (if connected)."""
        conn = self._manager.connection
        if conn is not None and conn is not self._biff.connection:
            try:
                await self._biff.start(conn)
            except Exception as exc:  # noqa: BLE001 - reported; the manager retries
                log.warning("biff could not start: %s", exc)
                self.error.emit(str(exc))

    def setActive(self, active: bool, text: str = "") -> None:
        """For slots: become active (with ``text``) or idle."""
        self._spawn(self._biff.activate(text) if active else self._biff.deactivate())

    async def close(self) -> None:
        """Announce departure and stop (the manager is the caller's)."""
        if self._closed:
            return
        self._closed = True
        self._manager.connected.disconnect(self._on_connected)
        await self._biff.stop()
        for task in list(self._tasks):
            task.cancel()

    # -- plumbing ----------------------------------------------------------------
    def _on_connected(self) -> None:
        self._spawn(self.attach())

    def _on_biff_changed(self, biff: Biff) -> None:
        drinkers = biff.active_members
        fresh = new_starters(self._drinkers, drinkers, biff.now())
        self._drinkers = drinkers
        self.changed.emit()
        if fresh:
            self.started.emit(fresh)
        count, active = biff.count, biff.is_active
        if count != self._count:
            self._count = count
            self.countChanged.emit(count)
        if active != self._active:
            self._active = active
            self.activeChanged.emit(active)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("biff task failed", exc_info=task.exception())
            self.error.emit(str(task.exception()))
