"""What the router says when a subscription's pattern overruns its time limit.

A regex()/wildcard() that runs out of its own time limit
(``patterns.MATCH_TIMEOUT``) is bottom for that notification alone and
suspended a while (``elvin.subscription.suspension``). The router counts it
(statistics, status, metrics) and logs it, naming the client and the
subscription -- at most once per ``OVERRUN_LOG_EVERY`` seconds per client,
since a client's pattern could overrun on every notification.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, cast

from elvin.subscription.patterns import MATCH_TIMEOUT

if TYPE_CHECKING:
    from elvin.router.engine import Predicate
    from elvin.router.stats import Stats
    from elvin.subscription.suspension import Suspended

__all__ = ["OVERRUN_LOG_EVERY", "OverrunLog"]

log = logging.getLogger("elvin.router")

#: seconds between two log lines about one client's overrunning patterns
OVERRUN_LOG_EVERY = 10.0


def _clip(text: str, most: int) -> str:
    """``text`` cut to ``most`` characters for a log line."""
    return text if len(text) <= most else text[:most - 3] + "..."


class OverrunLog:
    """The engine's ``overrun_listener``: counts into ``stats()`` (the
    router's figures, renewed at each start) and logs, rate-limited per
    subscription owner."""

    def __init__(self, stats: Callable[[], Stats]) -> None:
        self._stats = stats
        #: owner -> [when its last overrun line was logged, overruns not logged since]
        self._lines: weakref.WeakKeyDictionary[Hashable, list[float]] = \
            weakref.WeakKeyDictionary()

    def overran(self, pred: Predicate, count: int) -> None:
        """``pred``'s pattern overran, for the ``count``-th time."""
        self._stats().pattern_overruns += 1
        members = list(pred.members())
        if not members:
            return
        sub = members[0]
        now = time.monotonic()
        # the engine calls this once charge_overrun has made it a Suspended
        until = cast("Suspended", pred.evaluate).until
        try:
            line = self._lines.get(sub.owner)
        except TypeError:           # an owner that cannot be weakly referenced
            line = None
        if line is not None and now - line[0] < OVERRUN_LOG_EVERY:
            line[1] += 1
            return
        quiet = line[1] if line is not None else 0
        try:
            self._lines[sub.owner] = [now, 0]
        except TypeError:
            pass
        others = f" (and {len(members) - 1} more with the same expression)" if len(members) > 1 \
            else ""
        since = f"; {quiet} more overrun(s) of this client not logged" if quiet else ""
        log.warning("%s: subscription %d%s: a regex()/wildcard() pattern ran out of its own "
                    "time limit (%.0f ms), so it is bottom for this notification and is not "
                    "evaluated for %.0f s (overrun %d of this expression)%s: %s",
                    getattr(sub.owner, "peer", sub.owner), sub.id, others,
                    MATCH_TIMEOUT * 1000, until - now, count, since,
                    _clip(sub.text, 200))
