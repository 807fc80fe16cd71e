"""The elvind process's garbage-collection policy: no full pass over a big heap.

CPython's cyclic collector occasionally examines *every* tracked object (a
"full" or generation-2 collection): while a router holds 100,000
subscriptions (about 20 tracked objects each) one pass takes 0.3-1.5 s on
the loop every client shares, and it comes back each time the heap has grown
by a quarter -- many times during a mass registration, where these passes
were the bystanders' worst round trips (and half the router's CPU).

Objects that survive to the old generation in a router are nearly all
long-lived (subscriptions, their trees and code, sessions), so elvind:

* leaves the young generations to CPython (cheap, bounded passes);
* turns CPython's automatic full collection off (``gc.set_threshold`` with a
  third threshold no count reaches) and instead, every ``YOUNG_PASSES``
  generation-1 passes (each moves at most a few thousand objects to the old
  generation), collects the old generation on the loop and then
  ``gc.freeze()``\\ s what survived. Frozen objects are never examined again,
  so each such pass costs only what arrived since the previous one (a few
  milliseconds), however big the heap;
* after a generation-0 pass that found no garbage (the heap grows by live
  objects: a registration burst), it freezes at once, so that each new
  subscription's objects are examined once, not three times;
* since a frozen object that later dies *in a reference cycle* (a closed
  session, a subscription compiled with its own code) is not reclaimed until
  it is unfrozen, it thaws everything and runs one full collection once the
  churn (subscriptions removed + connections accepted) since the last thaw
  exceeds a quarter of the subscriptions and sessions there were then (at
  least ``THAW_CHURN_MIN``). Memory held by dead cycles is thus bounded by
  about a quarter of the live heap; only that rare pass is proportional to
  the whole heap -- CPython's own rule would make it after the same amount
  of change, *and* after every 25 % of growth.

Only the standalone router installs this (``elvind``): an embedded router
shares its process with an application whose collector is not ours to tune.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable

log = logging.getLogger("elvin.router.gc")

__all__ = ["THAW_CHURN_MIN", "YOUNG_PASSES", "GcPolicy"]

#: generation-1 passes between two managed collections of the old generation
YOUNG_PASSES = 2
#: churn (removed subscriptions + accepted connections) that always allows a thaw
THAW_CHURN_MIN = 10_000
#: a third threshold no generation-2 count reaches (a C int)
_NEVER = 2**31 - 1


class GcPolicy:
    """``install()`` on the router's loop, ``uninstall()`` when it stops.
    ``population()`` counts live subscriptions + sessions, ``churn()`` is a
    monotonic count of removed subscriptions + accepted connections."""

    def __init__(self, loop: asyncio.AbstractEventLoop, population: Callable[[], int],
                 churn: Callable[[], int]) -> None:
        self.loop = loop
        self.population = population
        self.churn = churn
        self.passes = 0             # managed old-generation collections (statistics)
        self.thaws = 0              # full collections after a thaw
        self.longest = 0.0          # seconds of the longest managed collection
        self._young = 0
        self._frozen_young = 0      # young passes followed by a freeze since a generation-1 count
        self._scheduled = False
        self._thresholds = gc.get_threshold()
        self._thaw_churn = 0
        self._thaw_population = 0
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        self._installed = True
        gc.collect()
        gc.freeze()                 # modules and start-up state: never garbage
        t0, t1, _ = self._thresholds
        gc.set_threshold(t0, t1, _NEVER)
        self._thaw_churn = self.churn()
        self._thaw_population = self.population()
        gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        if not self._installed:
            return
        self._installed = False
        try:
            gc.callbacks.remove(self._on_gc)
        except ValueError:
            pass
        gc.set_threshold(*self._thresholds)
        gc.unfreeze()

    def _on_gc(self, phase: str, info: dict) -> None:
        """(Any thread, inside the collector: only counts, freezes and schedules.)"""
        if phase != "stop":
            return
        generation = info.get("generation")
        if generation == 0:
            if info.get("collected"):
                return
            # a young pass that found no garbage: the heap is growing by live
            # objects (a registration burst), so freeze them now rather than
            # examine each twice more (generation 1, then the managed pass):
            # a tenth of a registration's CPU. A freeze resets generation 1's
            # count, so these passes count towards the managed pass (and its
            # thaw) as CPython's would have counted towards a generation-1 one
            self._frozen_young += 1
            gc.freeze()
            if self._frozen_young < self._thresholds[1]:
                return
        elif generation != 1:
            return
        self._frozen_young = 0
        self._young += 1
        if self._young >= YOUNG_PASSES and not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self.collect)
            except RuntimeError:        # the loop is closed: nothing to do any more
                pass

    def collect(self) -> None:
        """Collect what reached the old generation since the last freeze,
        freeze the survivors; thaw and collect everything if churn says so."""
        self._scheduled = False
        self._young = 0
        start = time.perf_counter()
        churn, population = self.churn(), self.population()
        if churn - self._thaw_churn > max(THAW_CHURN_MIN, self._thaw_population // 4):
            gc.unfreeze()
            self.thaws += 1
            self._thaw_churn, self._thaw_population = churn, population
        gc.collect()
        gc.freeze()
        self.passes += 1
        elapsed = time.perf_counter() - start
        self.longest = max(self.longest, elapsed)
        if elapsed > 0.05:
            log.info("garbage collection took %.0f ms (%d objects frozen)", elapsed * 1e3,
                     gc.get_freeze_count())
