"""The daemon's connection to the router, and its quench there.

The connection reconnects by itself and uses auto-quench: a notification no
subscription can match is dropped before it leaves, so the daemon may emit
every change it routes and let the quench decide. One quench covers every
attribute the daemon sends (``attributes.ALL_NAMES``), so it hears of every
subscription that could match one of its notifications. ``OptionalQuench``
keeps that quench across reconnections and copes with a router that has
none; what the quench *means* for the watches is ``reconcile``'s business.

This module holds the connection, says what state it is in (for the other
parts and the status file), and tells the daemon what happened to it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from elvin_apps.filewatcher.attributes import ALL_NAMES
from elvin_apps.filewatcher.status import NO_QUENCH_NOTE

from elvin.client import Connection, OptionalQuench, Quench, connect

__all__ = ["RouterLink"]

log = logging.getLogger("elvin_apps.filewatcher")

#: a daemon keeps trying, and notices a silent router within a minute
CONNECT_DEFAULTS: dict[str, Any] = {"reconnect": True, "auto_quench": True,
                                    "reconnect_max_delay": 5.0, "keepalive": 30.0}


class RouterLink:
    """``await open()`` connects and registers the quench; then:

    * ``on_wanted()``: what is wanted may have changed (a quench event, the
      quench put in place or given up)
    * ``on_lost()``: the connection was lost (it is being re-established)
    * ``on_back()``: it was re-established (the quench is restored next)
    * ``on_gone(reason)``: it is closed for good, not by :meth:`close`
    """

    def __init__(self, url: str | list[str], options: dict[str, Any] | None = None, *,
                 on_wanted: Callable[[], None], on_lost: Callable[[], None],
                 on_back: Callable[[], None], on_gone: Callable[[object], None]) -> None:
        self.url = url
        self.options = {**CONNECT_DEFAULTS, **(options or {})}
        self.on_wanted = on_wanted
        self.on_lost = on_lost
        self.on_back = on_back
        self.on_gone = on_gone
        self.conn: Connection | None = None
        self._quench: OptionalQuench | None = None

    async def open(self) -> None:
        """Connect and ask for quench. Raises ``ConnectError`` (an
        ``OSError``) when the router cannot be reached; a failure leaves
        nothing open."""
        self.conn = conn = await connect(self.url, **self.options)
        try:
            conn.add_connection_lost_listener(self._lost)
            conn.add_reconnect_listener(self._back)
            conn.add_close_listener(self._closed)
            self._quench = OptionalQuench(conn, ALL_NAMES, listener=self._wanted,
                                          on_change=self._wanted, fallback=NO_QUENCH_NOTE,
                                          logger=log,
                                          resumed="watching only what subscriptions ask for")
            await self._quench.ask()
        except BaseException:  # closed however; re-raised
            await self.close()
            raise

    async def close(self) -> None:
        if self._quench is not None:
            await self._quench.close()
        if self.conn is not None:
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await self.conn.close()

    # -- state -----------------------------------------------------------------------
    @property
    def quench(self) -> Quench | None:
        """The quench that says what is wanted, when there is one now."""
        return self._quench.current if self._quench is not None else None

    @property
    def no_quench(self) -> bool:
        """The router has no quench: everything under the roots is announced."""
        return self._quench is not None and self._quench.refused

    @property
    def is_open(self) -> bool:
        return self.conn is not None and self.conn.state == "open"

    @property
    def shown_url(self) -> str:
        """The router's URL as connected (after redirection or failover),
        else as given (several: apart by spaces)."""
        if self.conn is not None:
            return self.conn.url
        return self.url if isinstance(self.url, str) else " ".join(self.url)

    def connection_state(self) -> str:
        if self.conn is None:
            return "not connected"
        state = self.conn.state
        return {"open": "connected"}.get(state, state)

    def quench_state(self) -> str:
        """"on", "off" (the router has no quench: roots), or "unknown" before
        the router answered."""
        if self.no_quench:
            return "off"
        return "on" if self.quench is not None else "unknown"

    # -- connection events -----------------------------------------------------------
    def _wanted(self, _event: object) -> None:
        self.on_wanted()

    def _lost(self, reason: object) -> None:
        log.warning("lost the router (%s): reconnecting; watches are kept", reason)
        self.on_lost()

    def _back(self, _conn: object) -> None:
        log.info("reconnected to %s", self.shown_url)   # the quench follows (OptionalQuench)
        self.on_back()

    def _closed(self, reason: object) -> None:
        if getattr(reason, "kind", "") != "closed":     # "closed": we closed it
            self.on_gone(reason)
