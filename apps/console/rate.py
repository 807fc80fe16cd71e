"""A rate indicator that stays honest at 1 and at 10,000 per second.

The consumer pane counts deliveries and asks for a rate a few times a
second. Counts are kept per tick in a short sliding window (2 s by default)
so the figure reacts within a couple of seconds and drops to zero when the
traffic stops, rather than decaying forever as an average would.
"""

from __future__ import annotations

from collections import deque

__all__ = ["RateMeter"]


class RateMeter:
    def __init__(self, window: float = 2.0) -> None:
        if window <= 0:
            raise ValueError("window must be positive")
        self.window = window
        self._ticks: deque[tuple[float, int]] = deque()
        self.total = 0
        self._start: float | None = None

    def add(self, count: int, now: float) -> None:
        """``count`` events happened up to ``now`` (monotonic seconds)."""
        if self._start is None:
            self._start = now
        self.total += count
        if count:
            self._ticks.append((now, count))
        self._expire(now)

    def _expire(self, now: float) -> None:
        ticks = self._ticks
        while ticks and ticks[0][0] <= now - self.window:
            ticks.popleft()

    def rate(self, now: float) -> float:
        """Events per second over the last ``window`` seconds."""
        self._expire(now)
        if self._start is None:
            return 0.0
        span = min(self.window, max(now - self._start, 1e-3))
        return sum(count for _t, count in self._ticks) / span

    def reset(self) -> None:
        self._ticks.clear()
        self.total = 0
        self._start = None
