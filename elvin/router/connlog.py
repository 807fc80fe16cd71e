"""Client connects and disconnects in elvind's log: each one at INFO while
they are few, a summary with the rate when they are many.

An admin wants to see "client 10.0.0.5:51234 connected" when a tickertape
starts, but not ten thousand such lines when a thousand clients reconnect
after a network blip. So within each ``window`` (10 s) the first ``burst``
events are logged one by one, and the rest are counted and summed up in one
line when the window ends (``... and 340 more connects, 338 more
disconnects in the last 10 s (67.8/s)``). The timer that ends a window runs
only while something is counted; ``close()`` (router stop) says the summary
of the window so far at once, and cancels it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from elvin.cli_common import duration

__all__ = ["ConnectionLog"]

log = logging.getLogger("elvin.router.clients")

WINDOW = 10.0
BURST = 20


class ConnectionLog:
    def __init__(self, loop: asyncio.AbstractEventLoop, *, window: float = WINDOW,
                 burst: int = BURST) -> None:
        self.loop = loop
        self.window = window
        self.burst = burst
        self._since: dict[Any, float] = {}          # connected session -> when
        self._window_start = 0.0
        self._logged = 0
        self._connects = 0       # counted, not logged, in this window
        self._disconnects = 0
        self._timer: asyncio.TimerHandle | None = None

    def connected(self, session: Any) -> None:
        self._since[session] = time.monotonic()
        if self._admit():
            log.info("client %s connected on %s", _peer(session),
                     getattr(session, "listener", "?") or "?")
        else:
            self._connects += 1

    def disconnected(self, session: Any) -> None:
        started = self._since.pop(session, None)
        if started is None:            # never connected (a probe, a refused ConnRqst)
            return
        if self._admit():
            log.info("client %s disconnected after %s", _peer(session),
                     duration(time.monotonic() - started))
        else:
            self._disconnects += 1

    def _admit(self) -> bool:
        now = time.monotonic()
        if now - self._window_start >= self.window and self._timer is None:
            self._window_start = now
            self._logged = 0
        if self._logged < self.burst:
            self._logged += 1
            return True
        if self._timer is None:
            self._timer = self.loop.call_at(
                self.loop.time() + max(0.0, self._window_start + self.window - now),
                self._summary)
        return False

    def _summary(self) -> None:
        self._timer = None
        connects, disconnects = self._connects, self._disconnects
        self._connects = self._disconnects = 0
        elapsed = max(time.monotonic() - self._window_start, 1e-3)
        if connects or disconnects:
            log.info("... and %d more client connects, %d more disconnects in the last "
                     "%.0f s (%.1f/s); %d clients connected now", connects, disconnects,
                     elapsed, (connects + disconnects + self._logged) / elapsed,
                     len(self._since))
        self._window_start = time.monotonic()
        self._logged = 0

    def close(self) -> None:
        """At router stop: the summary of the window so far is said now (a
        router stopped within the window must not lose it), then nothing."""
        if self._timer is not None:
            self._timer.cancel()
            self._summary()
        self._since.clear()


def _peer(session: Any) -> str:
    peer = getattr(session, "peer", None)
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = peer[0]
        return f"[{host}]:{peer[1]}" if ":" in str(host) else f"{host}:{peer[1]}"
    return str(peer)
