"""A quench kept in place across reconnections, at routers that may lack quench.

Quench is protocol subset C, which is optional (Avis answers ``NOT_IMPL``). A
quench-driven tool (the filewatcher, the newswatcher) has to ask at start-up,
fall back to its feature-less behaviour when the router refuses, ask again
after every reconnection (the router may be another one now), and say each
change of state once. That is one job, done here, so the tools only decide
what "quench-driven" and "fallback" mean for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from elvin.client.connection import Connection
from elvin.client.errors import QuenchNotSupported
from elvin.client.events import QuenchEvent
from elvin.client.quench import Quench
from elvin.errors import ElvinError
from elvin.tasks import stop_task

log = logging.getLogger("elvin.client")

__all__ = ["OptionalQuench"]


class OptionalQuench:
    """``quench`` on ``names`` when the router has quench, else None.

    ``on_change(available)`` is called each time the quench is put in place
    or given up (also for a new quench after a reconnection, which the tool
    must re-read). ``available`` is None until the router first answered.
    The change to "no quench" is logged once as a warning with ``fallback``
    (what the tool does instead), the return of quench once at info level
    with ``resumed``, both on ``logger`` (the tool's). Errors other than the refusal raise from :meth:`ask`;
    after a reconnection they are logged and the next reconnection asks again.
    """

    def __init__(self, conn: Connection, names: Iterable[str], *,
                 listener: Callable[[QuenchEvent], object],
                 on_change: Callable[[bool], object],
                 fallback: str, resumed: str, logger: logging.Logger | None = None) -> None:
        self.conn = conn
        self.names = list(names)
        self.listener = listener
        self.on_change = on_change
        self.fallback = fallback
        self.resumed = resumed
        self.log = logger or log                 # the tool's own log says it
        self.quench: Quench | None = None
        self.available: bool | None = None
        self._tasks: set[asyncio.Task] = set()
        conn.add_reconnect_listener(self._reconnected)

    @property
    def current(self) -> Quench | None:
        """The quench in place now; None also while one the router ended has
        not been replaced, since it is then no guide to what is wanted."""
        quench = self.quench
        return quench if quench is not None and not quench.closed else None

    @property
    def refused(self) -> bool:
        """The router answered that it has no quench."""
        return self.available is False

    async def ask(self) -> None:
        """Register the quench now, or fall back if the router refuses it."""
        try:
            quench = await self.conn.quench(self.names, listener=self.listener, buffer_size=0)
        except QuenchNotSupported:
            self._set(None)
            return
        self._set(quench)

    def _set(self, quench: Quench | None) -> None:
        self.quench = quench
        available = quench is not None
        if available and self.available is False:
            self.log.info("%s supports quench again: %s", self.conn.url, self.resumed)
        elif not available and self.available is not False:
            self.log.warning("%s: %s", self.conn.url, self.fallback)
        self.available = available
        self.on_change(available)

    def _reconnected(self, _conn: Connection) -> None:
        quench = self.quench
        if quench is not None and not quench.closed:
            return                               # the client restored it
        if self.conn.supports_quench is False:   # the new router refused to restore it
            self._set(None)
            return
        task = asyncio.get_running_loop().create_task(self._ask_again())
        self._tasks.add(task)                    # the loop keeps only weak references
        task.add_done_callback(self._tasks.discard)

    async def _ask_again(self) -> None:
        try:
            await self.ask()
        except (ElvinError, OSError, TimeoutError) as exc:
            self.log.warning("could not ask %s for quench again: %s", self.conn.url, exc)

    async def close(self) -> None:
        """Stop asking; the quench itself ends with its connection."""
        self.conn.remove_listener(self._reconnected)
        for task in list(self._tasks):
            await stop_task(task, 5.0, "asking for quench again")
