"""Work done a bounded amount per turn of the router's event loop.

The loop is shared by every client, so work that could take long (handling
the packets that busy clients sent, forgetting a closed client's tens of
thousands of subscriptions) is done in steps: a turn runs steps until its
deadline or until nothing is left, then hands the loop back to its sockets
and comes back in the next turn. ``TurnLoop`` is that mechanism, once; the
scheduler (``elvin.router.scheduler``) and the reaper (``elvin.router.
reaper``) say what a step is.

The next run is a timer, not ``call_soon``: due timers run after the I/O
callbacks of the loop's next turn, so work that arrived meanwhile (a client
whose packet was read) is taken into account before the next run starts.
"""

from __future__ import annotations

import asyncio
import logging
import time

log = logging.getLogger("elvin.router")

__all__ = ["TurnLoop"]


class TurnLoop:
    """Subclasses implement ``_has_work()`` and ``_turn(deadline)`` (run
    steps until ``time.perf_counter()`` passes ``deadline`` or nothing is
    left); ``_kick()`` asks for a run."""

    def __init__(self, loop: asyncio.AbstractEventLoop, budget: float) -> None:
        self.loop = loop
        self.budget = budget
        self._scheduled = False

    def _deadline(self) -> float:
        """When this run must stop (a subclass may share a deadline)."""
        return time.perf_counter() + self.budget

    def _has_work(self) -> bool:
        raise NotImplementedError

    def _turn(self, deadline: float) -> None:
        raise NotImplementedError

    def _kick(self, soon: bool = False) -> None:
        """Run in a coming loop turn (``soon``: with the ready callbacks of
        the next one, before its I/O; else after it)."""
        if not self._scheduled:
            self._scheduled = True
            if soon:
                self.loop.call_soon(self._run)
            else:
                self.loop.call_later(0, self._run)

    def _run(self) -> None:
        self._scheduled = False
        try:
            self._turn(self._deadline())
        except Exception:   # a failed turn must not stop the next ones
            log.exception("%s: a turn failed", type(self).__name__)
        if self._has_work():
            self._kick()
