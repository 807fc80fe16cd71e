"""Letting go of a wide structure a slice per step, not all in one (issue 42).

When the last reference to a subscription of an ``||`` of 10,000 names goes,
CPython frees all it holds at once -- its tree (~30,000 nodes and their
``children`` tuples), its set of names, its predicate's compiled code, the
index paths: ~80,000 blocks -- inside whichever step dropped the reference:
2.6-6 ms of one loop turn, most of a wide SubDelRqst's hold on the loop.

``ToFree`` is a to-free list: the engine puts what it lets go of on it, and
its ``steps`` drop the references a slice at a time. Before it drops an
object it holds alone, it takes that object's referents (``gc.get_referents``)
onto the list, so that freeing the object frees that object and nothing
more; its referents follow, in the same way, in this step or a later one. A
step handles at most ``step`` work units -- objects taken off the list plus
referents put on it -- a count, not a time, so that tests can count it.

It takes apart only what it holds *alone* (its reference count says so,
``_ALONE``): an object someone else also refers to -- a subtree another
tree shares, a module's globals, a session -- is only let go of, so nothing
outside the dropped structure is walked, and nothing is freed that was not
about to be. Nothing is changed either: objects are held and let go of,
which is why a structure still in use elsewhere is never harmed. An object
in a reference cycle is never held alone, and is left to the collector, as
before.

Taking apart costs more than freeing at once (every object is looked at in
Python: 40-70 ms of CPU for an ``||`` of 10,000 names, 5-8 times what
freeing it at once costs), so that work waits: each step ends with
``NEXT_TURN``, at most one step per loop turn, never the turn's whole budget
that the deferred unlinking and a bystander's packets share (with the whole
budget, a bystander's median round trip in ``bench/loop.py``'s wide
SubDelRqst row rose from 0.3-4.5 ms to 3.5-11.1 ms, on a loaded machine).

``steps`` is a generator in ``elvin.router.steps``' protocol; the engine
hands it to the router's deferred work (``Engine.on_deferred``,
``StepRunner.background``).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Generator
from typing import Any

from elvin.router.steps import NEXT_TURN

__all__ = ["ToFree"]


def _alone() -> int:
    """The reference count of an object held only by a local variable that
    was popped off a list: what ``steps`` sees of an object it holds alone
    (2 on CPython 3.11: the variable and ``getrefcount``'s argument; worked
    out, not assumed, so that an interpreter that counts otherwise only
    makes ``steps`` take apart less)."""
    held: list[list[Any]] = [[]]
    obj = held.pop()
    return sys.getrefcount(obj)


_ALONE = _alone()


class ToFree:
    """``put(objects)``: hold them until ``steps`` lets go of them. ``put``
    says whether the caller must start ``steps`` (none are running); they
    end when the list is empty, and the next ``put`` says so again."""

    __slots__ = ("_held", "running", "released")

    def __init__(self) -> None:
        self._held: list[Any] = []
        self.running = False
        self.released = 0           # objects taken off the list (statistics, tests)

    def __len__(self) -> int:
        return len(self._held)

    def put(self, *objects: Any) -> bool:
        """Hold ``objects``; True if no ``steps`` are running (start them)."""
        self._held.extend(objects)
        if self.running:
            return False
        self.running = True
        return True

    def steps(self, step: int) -> Generator[Any, None, None]:
        """Let go of what is held, at most ``step`` work units per step, one
        step per loop turn (``NEXT_TURN``)."""
        held = self._held
        referents = gc.get_referents
        count = sys.getrefcount
        alone = _ALONE
        units = 0
        try:
            while held:
                obj = held.pop()
                units += 1
                if count(obj) <= alone:
                    # held alone: its referents first, so that dropping it
                    # frees it alone (a wide tuple's referents count whole)
                    # (no list of them kept: it would hold each twice)
                    before = len(held)
                    held.extend(referents(obj))
                    units += len(held) - before
                obj = None          # freed here, in this step
                self.released += 1
                if units >= step and held:
                    yield NEXT_TURN
                    units = 0
        finally:
            self.running = False
