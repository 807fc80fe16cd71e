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
* since a frozen object that later dies *in a reference cycle* is not
  reclaimed until it is unfrozen, it watches for such garbage directly: the
  heap's allocated blocks (``sys.getallocatedblocks()``, which falls as soon
  as anything is freed by its reference count) against what the live
  *population* (subscriptions + sessions) explains. After a thaw the heap is
  all live, so ``blocks per member = (blocks - baseline) / population`` is
  exact; from then on, blocks beyond ``baseline + blocks per member x
  population`` are dead cycles (or a heavier kind of member, which the next
  thaw learns). When they exceed ``THAW_SHARE`` of what is expected (at least
  ``THAW_MIN_OBJECTS``), it thaws everything and runs one full collection.
  Whatever the router forgets or replaces -- a modified subscription's code,
  a closed or session-less channel, a federated peer's replaced pull filter --
  is therefore reclaimed without anyone having to count it (an earlier
  policy counted removed subscriptions and accepted connections, and missed
  modifications, session-less channels and pull filters: 40,000
  modifications grew the heap by 350 MB). Dead cycles are thus bounded by
  about a quarter of the live heap; only that rare pass is proportional to
  the whole heap -- CPython's own rule would make it after the same amount
  of change, *and* after every 25 % of growth. Most of what the router
  replaces holds no cycle at all (compiled code, pull matchers, sessions:
  see ``compiler._define`` and ``Session.connection_lost``) and is freed
  by its reference count at once.

Why blocks and not ``gc.get_freeze_count()``: counting the frozen objects
walks every one of them, a linked list of cache misses (56 ms for a million
on this machine: a router with 100,000 subscriptions and 100,000 keys held
its loop 60-67 ms for it, issue 42). ``sys.getallocatedblocks()`` reads one
counter per 4 KiB pool of the allocator (0.4 ms for the same heap: 2 million
blocks), so the check costs what a heap's *size in pages* costs, a hundred
times less, and the policy never walks the frozen objects. Blocks count
untracked objects too (strings, buffers), which a dead cycle also holds:
the share and the minimum apply to blocks.

A check put off by its pace, an excess waiting for its confirmation, and a
fall of the population (every ``WATCH_EVERY`` seconds the policy compares
the population with the one its last check saw: one call, no walk) are
checked by a timer, not by the next generation-1 pass: after a mass
unsubscribe the router goes quiet, no pass comes, and 16,384 unsubscribed
subscriptions of distinct shapes left 1.6 million blocks of dead frozen
cycles (elvind at 300 MiB with none left, issue 42). When a check sees ``TRIM_MIN_BLOCKS`` fewer blocks than the
most one saw since the last trim (a large release, by reference counts or by
a thaw), the C allocator is asked to give its free pages back (glibc's ``malloc_trim``; elsewhere nothing): what
pymalloc's arenas and ``malloc`` keep free after a large release is
otherwise never returned to the system.

Only the standalone router installs this (``elvind``): an embedded router
shares its process with an application whose collector is not ours to tune.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger("elvin.router.gc")

__all__ = ["CHECK_SHARE", "CONFIRM_AFTER", "THAW_MIN_OBJECTS", "THAW_SHARE", "TRIM_MIN_BLOCKS",
           "WATCH_EVERY", "YOUNG_PASSES", "GcPolicy", "give_back"]

#: generation-1 passes between two managed collections of the old generation
YOUNG_PASSES = 2
#: allocated blocks beyond what the population explains that always allow a
#: thaw (the name is older than the measure: it counted frozen objects)
THAW_MIN_OBJECTS = 20_000
#: ... and the share of the expected blocks that allows one on a big heap
THAW_SHARE = 0.25
#: the share of the loop's time the dead-cycle check may take: it reads one
#: counter per allocator pool (``sys.getallocatedblocks``, 0.4 ms for a heap of
#: a million tracked objects; the walk it replaced took 56), and during a registration burst managed passes come every hundred or so
#: subscriptions, where checking at each one took 15 % of the router's CPU
#: (at 2 % it was still a microsecond per registration; at 0.5 % a heap of 3
#: million objects is checked every 6 s, soon enough for garbage that only
#: matters once it is a quarter of the heap)
CHECK_SHARE = 0.005
#: seconds an excess of blocks must last before a thaw: blocks also count
#: what is alive but not yet a member -- a wide expression compiled and
#: still being linked in, a 60,000-attribute notification being decoded --
#: and on a small router one ``||`` of 10,000 names in flight (~300,000
#: blocks) was a quarter of the heap, so each wide SubAddRqst set off a full
#: collection (60 ms at 5,000 subscriptions). Dead cycles stay; a transient
#: goes: the excess is confirmed by a check at least this much later
CONFIRM_AFTER = 2.0
#: a third threshold no generation-2 count reaches (a C int)
NEVER = 2**31 - 1
#: blocks fewer than the highest a check saw (since the last trim) before the
#: C allocator is asked to give pages back (``give_back``): a trim walks the
#: heap, worth it after a large release only
TRIM_MIN_BLOCKS = 200_000
#: seconds between two looks at the population (a fall sets off a check)
WATCH_EVERY = 1.0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where there is none (musl, macOS)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):   # not glibc: nothing to ask
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()


_trimming = threading.Lock()


def give_back() -> bool:
    """Ask the C allocator to return its free pages to the system (True if
    there is one to ask: glibc's). In a thread of its own: a trim walks the
    heap (19 ms on a 500 MiB one), and a ctypes call lets go of the
    interpreter meanwhile, so the loop goes on; one trim at a time."""
    if _TRIM is None:
        return False
    if _trimming.acquire(blocking=False):
        threading.Thread(target=_trim_once, name="elvin-malloc-trim", daemon=True).start()
    return True


def _trim_once() -> None:
    try:
        assert _TRIM is not None
        _TRIM(0)        # 1 if it released pages: the RSS tells, not this
    finally:
        _trimming.release()


class GcPolicy:
    """``install()`` on the router's loop, ``uninstall()`` when it stops.
    ``population()`` counts what the router keeps alive on purpose (live
    subscriptions weighted by what they hold, ``Engine.weight``, + sessions:
    a wide subscription counted as one member looked like garbage)."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 population: Callable[[], int]) -> None:
        self.loop = loop
        self.population = population
        self.passes = 0             # managed old-generation collections (statistics)
        self.thaws = 0              # full collections after a thaw
        self.longest = 0.0          # seconds of the longest managed collection
        self.checks = 0             # dead-cycle checks made (statistics, tests)
        #: ``CHECK_SHARE``, or None to check at every managed pass (tests)
        self.check_share: float | None = CHECK_SHARE
        self._next_check = 0.0      # perf_counter() before which no check is made
        #: ``CONFIRM_AFTER``; 0 to thaw at the first check that sees an excess (tests)
        self.confirm_after = CONFIRM_AFTER
        self._suspect: float | None = None  # perf_counter() of the first check over
        self._young = 0
        self._frozen_young = 0      # young passes followed by a freeze since a generation-1 count
        self._scheduled = False
        self._thresholds = gc.get_threshold()
        self._baseline = 0          # allocated blocks with no population (modules, caches)
        self._per_member: float | None = None   # allocated blocks per member, after a thaw
        self._installed = False
        self._recheck: asyncio.TimerHandle | None = None    # a check put off or to confirm
        self._watch: asyncio.TimerHandle | None = None      # the population's watch
        self._checked_population = 0    # the population the last check saw
        self.trims = 0              # times the C allocator was asked to give pages back
        self._high = 0              # the most blocks a check saw since the last trim

    def install(self) -> None:
        if self._installed:
            return
        self._installed = True
        gc.collect()
        gc.freeze()                 # modules and start-up state: never garbage
        t0, t1, _ = self._thresholds
        gc.set_threshold(t0, t1, NEVER)
        self._learn(sys.getallocatedblocks(), self.population(), start=True)
        gc.callbacks.append(self._on_gc)
        self._watch = self.loop.call_later(WATCH_EVERY, self._look)

    def uninstall(self) -> None:
        if not self._installed:
            return
        self._installed = False
        for handle in (self._recheck, self._watch):
            if handle is not None:
                handle.cancel()
        self._recheck = self._watch = None
        try:
            gc.callbacks.remove(self._on_gc)
        except ValueError:
            pass
        gc.set_threshold(*self._thresholds)
        gc.unfreeze()

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
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

    def _over_threshold(self, blocks: int, population: int) -> bool:
        dead = self.dead_estimate(blocks, population)
        return dead > max(THAW_MIN_OBJECTS, (blocks - dead) * THAW_SHARE)

    def dead_estimate(self, blocks: int, population: int) -> int:
        """Allocated blocks that what is alive on purpose does not explain."""
        per_member = self._per_member
        if per_member is None or population == 0:
            return max(0, blocks - self._baseline) if population == 0 else 0
        return int(blocks - self._baseline - per_member * population)

    def _learn(self, blocks: int, population: int, start: bool = False) -> None:
        """Everything allocated is alive now (a full collection just ran):
        with no population it is all baseline, else what the members hold."""
        if start or population == 0:
            self._baseline = blocks
            if start:
                self._per_member = None
            return
        self._per_member = max(0.0, (blocks - self._baseline) / population)

    def _confirm(self) -> None:
        """The timer set for a suspected excess or a check put off by its
        pace: check now, whether or not a young pass has come since (a
        router that went quiet makes none)."""
        self._recheck = None
        if self._installed:
            self.collect(force=True)

    def _look(self) -> None:
        """The population's watch: members went (unsubscribed, closed) since
        the last check, and what they held in frozen cycles is only found by
        a check, which a quiet router's young passes would never set off."""
        self._watch = self.loop.call_later(WATCH_EVERY, self._look)
        if self._recheck is None and self.population() < self._checked_population:
            wait = self._next_check - time.perf_counter() if self.check_share is not None else 0
            if wait > 0:        # still paced by the checks' cost: as soon as it may
                self._recheck = self.loop.call_later(wait, self._confirm)
            else:
                self.collect(force=True)

    def collect(self, force: bool = False) -> None:
        """Collect what reached the old generation since the last freeze,
        freeze the survivors; thaw and collect everything if the heap holds
        more dead cycles than ``THAW_SHARE`` allows. Never walks the frozen
        objects (see the module's docstring): the check reads the
        allocator's pools."""
        self._scheduled = False
        self._young = 0
        start = time.perf_counter()
        gc.collect()
        gc.freeze()
        if not force and self.check_share is not None and start < self._next_check:
            # the last check was too recent to pay for another: one comes when
            # it may, even if no young pass does (a burst's last pass is checked)
            if self._recheck is None:
                self._recheck = self.loop.call_later(self._next_check - start, self._confirm)
            self._done(start)
            return
        counted = time.perf_counter()
        blocks = sys.getallocatedblocks()
        population = self.population()
        self._checked_population = population
        self.checks += 1
        if self.check_share is not None:
            now = time.perf_counter()
            self._next_check = now + (now - counted) / self.check_share
        if self._per_member is None and population:
            # the first measure with members: the best estimate until a thaw
            self._per_member = max(0.0, (blocks - self._baseline) / population)
        over = self._over_threshold(blocks, population)
        if over and self.confirm_after > 0:
            now = time.perf_counter()
            if self._suspect is None:
                self._suspect = now
            over = now - self._suspect >= self.confirm_after
            if not over:
                if self._recheck is None:   # the next check tells, even on a quiet router
                    self._recheck = self.loop.call_later(
                        self._suspect + self.confirm_after - now, self._confirm)
                self._done(start, blocks)   # a transient, or garbage
                return
        else:
            self._suspect = None
        if over:
            self._suspect = None
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.thaws += 1
            blocks = sys.getallocatedblocks()
            self._learn(blocks, population)
        elif population and self._per_member is not None:
            # a lighter population than learnt: lower the estimate now (never
            # raise it here: a rise may be garbage, which only a thaw can tell)
            observed = (blocks - self._baseline) / population
            if observed < self._per_member:
                self._per_member = max(0.0, observed)
        self._trim(blocks)
        self._done(start, blocks)

    def _trim(self, blocks: int) -> None:
        """After a large release (by reference counts or a thaw) ask the C
        allocator to give its free pages back: ``TRIM_MIN_BLOCKS`` fewer
        blocks than the highest a check saw since the last trim."""
        if self._high - blocks >= TRIM_MIN_BLOCKS:
            if give_back():
                self.trims += 1
            self._high = blocks
        else:
            self._high = max(self._high, blocks)

    def _done(self, start: float, blocks: int | None = None) -> None:
        """Statistics and the log line of a slow pass (with the heap's
        allocated blocks when this pass read them)."""
        self.passes += 1
        elapsed = time.perf_counter() - start
        self.longest = max(self.longest, elapsed)
        if elapsed > 0.05:
            counted = "" if blocks is None else f" ({blocks} blocks allocated)"
            log.info("garbage collection took %.0f ms%s", elapsed * 1e3, counted)
