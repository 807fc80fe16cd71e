"""The attribute names a router has seen recently: ``Elvin-Router-Attributes``.

A pub/sub browser (the console's Browse pane, like MQTT Explorer's tree)
wants to show everything that flows through a router without the user
writing a subscription first. Elvin has no "everything" subscription (a
subscription names the attributes it needs), so the router says which
names are in use, the way it says its statistics (``stats``): while at
least one subscription refers to ``Elvin-Router-Attributes`` (the engine
reports it, as for quench; nothing is polled), it counts the attribute
names of the notifications it delivers (since the first subscriber
came) and publishes, every
``stats_interval`` seconds and soon after a name it had not listed
appears, a notification of its own:

(the notification's attributes: ``elvin.census``, shared with the clients
that read it).

A client then subscribes to ``require(A) || require(B) || ...`` and follows
the list as it changes. Only notifications that may be delivered without
keys are counted (a secure-only notification's names are not told to
anyone), and never the census notification itself; names with a line
break (which the list could not carry) are left out. Counting costs one
dictionary update per attribute, and only while someone subscribes. An
administrator can turn the census off (``attribute-names = false``); a
router without it (another implementation, Avis) simply never publishes,
which is how a client tells.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TypeVar

from elvin.census import CENSUS_ATTRIBUTE, census_notification
from elvin.router.stats import STATS_ATTRIBUTE

log = logging.getLogger("elvin.router")

__all__ = ["CENSUS_ATTRIBUTE", "AttributeCensus"]

_K = TypeVar("_K")

#: seconds a name stays listed after it was last seen
WINDOW = 600.0
#: names listed at most (the most used); the rest are counted in Left-Out
LIMIT = 2000
#: seconds between a new name and the notification that lists it, at least
QUICK = 0.25
#: notification shapes (sets of names) counted as such; more are counted by name
MAX_SHAPES = 2_000
#: names counted one by one (of shapes past ``MAX_SHAPES``) at most: a
#: producer that invents a name per notification fills it, and then its new
#: names are not counted until old ones leave the window (memory, and the
#: time to publish, stay bounded: at most about 5 ms of the loop per publish)
MAX_LOOSE = 5_000


class AttributeCensus:
    """Counts names for ``publish`` (a callable taking the notification, the
    router's delivery) on ``loop``; ``watch(active)`` is the engine's
    callback for subscriptions that refer to ``CENSUS_ATTRIBUTE``.
    ``counting`` is the hot path's test: ``note`` is called only while it
    is true.

    The hot path counts notifications per *shape* (the tuple of their
    attribute names): one dictionary lookup and two list updates per
    notification, whatever its size, since producers send few shapes; the
    names' counts are summed from the shapes when the census is published.
    Past ``max_shapes`` shapes (a producer that varies its names), new
    shapes are counted name by name instead."""

    def __init__(self, publish: Callable[[dict[str, object]], object],
                 router_id: Callable[[], str], interval: Callable[[], float], *,
                 window: float = WINDOW, limit: int = LIMIT, quick: float = QUICK,
                 max_shapes: int = MAX_SHAPES, max_loose: int = MAX_LOOSE) -> None:
        self._publish = publish
        self._router_id = router_id
        self._interval = interval
        self.window = window
        self.limit = limit
        self.quick = quick
        self.max_shapes = max_shapes
        self.max_loose = max_loose
        self.counting = False
        #: shape -> [notifications, generation last seen, counted]
        self.shapes: dict[tuple[str, ...], list[int]] = {}
        #: names of shapes past max_shapes -> [notifications, generation last seen]
        self.loose: dict[str, list[int]] = {}
        self.generation = 0
        self._listed: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._regular: asyncio.TimerHandle | None = None
        self._soon: asyncio.TimerHandle | None = None

    # -- the hot path -------------------------------------------------------------------
    def note(self, attributes: Mapping[str, object]) -> None:
        """One delivered notification's names."""
        key = tuple(attributes)
        entry = self.shapes.get(key)
        if entry is not None:
            entry[0] += 1
            entry[1] = self.generation
            return
        self._new_shape(key)

    def _new_shape(self, key: tuple[str, ...]) -> None:
        # never the census itself, nor the router's statistics (a browser
        # that opens a statistics pane would see a dozen of the router's names)
        counted = CENSUS_ATTRIBUTE not in key and STATS_ATTRIBUTE not in key
        if len(self.shapes) < self.max_shapes:
            self.shapes[key] = [1, self.generation, counted]
        elif counted:
            loose = self.loose
            for name in key:
                entry = loose.get(name)
                if entry is not None:
                    entry[0] += 1
                    entry[1] = self.generation
                elif len(loose) < self.max_loose:
                    loose[name] = [1, self.generation]
        # a new name is listed soon after it appears -- while the list has
        # room for it: past ``limit`` names a new one (seen once) is not
        # listed anyway, and a producer inventing names would otherwise
        # have the whole census summed and sorted every ``quick`` seconds
        if counted and self._soon is None and self._loop is not None and \
                len(self._listed) < self.limit and not self._listed.issuperset(key):
            self._soon = self._loop.call_later(self.quick, self._publish_soon)

    # -- switching on and off -----------------------------------------------------------
    def watch(self, active: bool) -> None:
        """Someone subscribes to the census (True), or no one any more."""
        if active and not self.counting:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self.counting = True
            self._soon = self._loop.call_later(self.quick, self._publish_soon)
            self._schedule()
        elif not active and self.counting:
            self.stop()

    def stop(self) -> None:
        """Stop counting and forget: the next subscriber starts afresh."""
        self.counting = False
        for handle in (self._regular, self._soon):
            if handle is not None:
                handle.cancel()
        self._regular = self._soon = None
        self.shapes.clear()
        self.loose.clear()
        self._listed.clear()

    # -- publishing ---------------------------------------------------------------------
    def _schedule(self) -> None:
        if self._loop is not None and self.counting:
            self._regular = self._loop.call_later(self._interval(), self._publish_regular)

    def _publish_regular(self) -> None:
        self._regular = None
        self._send()
        self.generation += 1
        self._forget_old()
        self._schedule()

    def _publish_soon(self) -> None:
        self._soon = None
        self._send()

    def _forget_old(self) -> None:
        """Shapes and names not seen within the window leave the list."""
        keep = max(1, round(self.window / max(self._interval(), 1e-3)))
        oldest = self.generation - keep
        _forget_before(self.shapes, oldest)
        _forget_before(self.loose, oldest)

    def counts(self) -> dict[str, int]:
        """Notifications per name, summed from the shapes."""
        counts: dict[str, int] = {name: entry[0] for name, entry in self.loose.items()}
        for key, (count, _generation, counted) in self.shapes.items():
            if counted:
                for name in key:
                    counts[name] = counts.get(name, 0) + count
        return counts

    def _send(self) -> None:
        if not self.counting:
            return
        try:
            self._publish(self.notification())
        except Exception:  # the router must not stop over its census
            log.exception("publishing the attribute census failed")

    def notification(self) -> dict[str, object]:
        counts = self.counts()
        listable = [(-count, name) for name, count in counts.items()
                    if "\n" not in name and "\r" not in name]
        listable.sort()                 # the most used first, then by name
        shown = [(-negated, name) for negated, name in listable[:self.limit]]
        self._listed = {name for _count, name in shown}
        return census_notification(self._router_id(), [(name, count) for count, name in shown],
                                   len(counts) - len(shown), self.window)


def _forget_before(table: dict[_K, list[int]], oldest: int) -> None:
    """Drop the entries (``[count, generation last seen, ...]``) older than ``oldest``."""
    for key in [k for k, entry in table.items() if entry[1] < oldest]:
        del table[key]
