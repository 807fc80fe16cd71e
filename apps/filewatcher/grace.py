"""Keeping the watches through a reconnection.

When the router goes away the client library reconnects and restores the
quench, reporting every old subscription as removed and the restored ones as
added; consumers reconnect too, each at its own pace. Re-planning from that
would drop the watches of the slower ones, and with them the changes they
would want reported. So during an outage nothing is re-planned, and for
``seconds`` after the reconnection (or until every interest watched before is
wanted again, whichever is first) the interests from before the outage are
kept. While the grace lasts, a notification nobody wants is not taken as
handled, since its subscriber may be on the way back; at its end ``on_end``
asks for a re-plan and a re-scan, which reports what changed while
notifications could not be delivered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Container, Mapping
from typing import Any

from elvin_apps.filewatcher.pathset import Interest

__all__ = ["ReconnectGrace"]

log = logging.getLogger("elvin_apps.filewatcher")


class ReconnectGrace:
    def __init__(self, seconds: float, on_end: Callable[[], None]) -> None:
        self.seconds = seconds
        self.on_end = on_end
        #: the interests watched when the outage began, and their subscriptions
        self.kept: dict[Interest, set[Any]] = {}
        self.in_outage = False
        self._timer: asyncio.TimerHandle | None = None
        #: numbers each grace period: an end queued for an earlier one (by
        #: ``check``, then a loss and a return before it ran) is ignored
        self._period = 0

    @property
    def active(self) -> bool:
        """In an outage, or in the grace after one."""
        return self.in_outage or self._timer is not None

    def lost(self, watched: Mapping[Interest, set[Any]]) -> None:
        """The connection was lost while ``watched`` was the watch set."""
        if self.in_outage:
            return
        self.in_outage = True
        self.cancel()              # a grace under way ends with the outage: nothing re-plans
        if not self.kept:          # an outage within the grace keeps the older set
            self.kept = {interest: set(terms) for interest, terms in watched.items()}

    def back(self) -> None:
        """The connection is back: the grace starts (again)."""
        self.in_outage = False
        self.cancel()
        self._period += 1
        self._timer = asyncio.get_running_loop().call_later(self.seconds, self._end, "timeout",
                                                            self._period)

    def check(self, wanted: Container[Interest]) -> None:
        """End the grace soon when everything kept is ``wanted`` again."""
        if self._timer is not None and all(i in wanted for i in self.kept):
            asyncio.get_running_loop().call_soon(self._end, "all subscriptions are back",
                                                 self._period)

    def _end(self, why: str, period: int) -> None:
        if self._timer is None or period != self._period:
            return      # already ended, or an end meant for an earlier grace
        self._timer.cancel()
        self._timer = None
        log.info("reconnection settled (%s): re-planning and re-scanning", why)
        self.kept = {}
        self.on_end()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
