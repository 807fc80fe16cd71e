"""Copies of one notification told apart by the path they came on (sans-IO).

Why: a notification that entered the federation at a router that does not
take part (Avis, ``routing = "flood"``) carries no stamp, so each router
routes it by the graph it has agreed itself; while the routers switch to a
new graph, two of them can take it by different trees, and it can reach a
router twice. Routers that do not take part also copy what they pass on,
when they are linked to each other, over links nobody announces. Nothing
those routers send can be changed (the protocol is theirs), and two copies
share nothing but their content and their origin, so a router that takes
part keeps, for a short window, the content of each such notification it
took with the routing list it came by, and drops a copy of the same content
from the same origin that comes by *another* routing list.

Why the routing list: one publication never reaches a router twice by the
same routing list (each router sends each copy it takes once to each link,
and prepends its domain), while the same content published again comes the
same way as before as long as the routes do not change. So a notification
published twice with equal content is delivered twice, and only when its
path changed within the window (a switch, when loss is allowed) can a
repeat be taken for a copy and dropped. The stamp (``@spt1:``) of the
router where the notification first met one that takes part (``origin``)
plays no part: two entry routers may stamp it with different graphs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

__all__ = ["DEDUP_ENTRIES", "PRUNE_STEP", "Recent", "content_key"]

#: notifications remembered at most (the oldest go first): a bound on memory
#: whatever the rate; at a higher rate the window is shorter
DEDUP_ENTRIES = 65536

#: entries past the window forgotten at most per call (see ``Recent.first``)
PRUNE_STEP = 8


def content_key(attrs: Mapping[str, Any]) -> Hashable:
    """A notification's attributes as a key: equal for equal contents (the
    codec's values are all hashable: int, float, str, bytes)."""
    try:
        return frozenset(attrs.items())
    except TypeError:                     # not from the codec: an unhashable value
        return repr(sorted(attrs.items()))


class Recent:
    """``first(key, path, now)``: is this copy of ``key`` (origin and content)
    one to take? Yes unless a copy of it came by another ``path`` within
    ``window`` seconds (``now`` from the caller's monotonic clock)."""

    def __init__(self, window: float, entries: int = DEDUP_ENTRIES) -> None:
        self.window = window
        self.entries = entries
        self._seen: OrderedDict[Hashable, tuple[tuple[str, ...], float]] = OrderedDict()
        self.dropped = 0

    def first(self, key: Hashable, path: tuple[str, ...], now: float) -> bool:
        seen = self._seen
        # forget what is past the window, a few at a time: after a quiet
        # spell all of them are, and popping 65,536 at once held the loop
        # for some 50 ms. Each call adds at most one, so taking up to
        # PRUNE_STEP keeps up; what lingers is ignored by its age below.
        for _ in range(PRUNE_STEP):
            if not seen:
                break
            oldest = next(iter(seen.values()))
            if oldest[1] + self.window > now and len(seen) < self.entries:
                break
            seen.popitem(last=False)
        held = seen.get(key)
        if held is not None and held[1] + self.window > now and held[0] != path:
            self.dropped += 1
            return False
        seen[key] = (path, now)
        seen.move_to_end(key)
        return True

    def clear(self) -> None:
        self._seen.clear()

    def __len__(self) -> int:
        return len(self._seen)
