"""Stepped work that must keep the order it came in, per origin.

A client's NotifyEmit is matched in steps as that session's job (its later
packets wait for it). A notification that came another way -- a
sessionless client's UNotify, a federated router's FedNotify -- has no
session whose packets could wait, so it was matched in one go: 40,000
regex() subscriptions held the loop as long as it took (issue 42).
``OrderedSteps.submit(key, steps)`` runs the generator ``steps``' first step
at once and, if it is not over, the rest by the router's ``StepRunner``;
later work of the same ``key`` (a federated link's domain, a session) waits
for the work before it, so one origin's notifications are delivered in the
order they came. The work runs to its end even if its origin goes: an
accepted notification is delivered.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Generator, Hashable
from typing import Any

log = logging.getLogger("elvin.router")

__all__ = ["OrderedSteps"]


class OrderedSteps:
    """``background(generator)`` runs a job in later loop turns (the router's
    ``StepRunner.background``)."""

    def __init__(self, background: Callable[[Generator[Any, Any, Any]], None]) -> None:
        self.background = background
        #: key -> the work of that origin not started yet (its chain is a job)
        self.chains: dict[Hashable, deque[Generator[Any, Any, Any]]] = {}
        self.deferred = 0       # work that did not end in its first step (tests, stats)

    def __len__(self) -> int:
        return len(self.chains)

    def submit(self, key: Hashable, steps: Generator[Any, Any, Any]) -> None:
        chain = self.chains.get(key)
        if chain is not None:           # work of this origin under way: after it
            chain.append(steps)
            return
        try:
            next(steps)
        except StopIteration:
            return
        self.deferred += 1
        self.chains[key] = deque()
        self.background(self._chain(key, steps))

    def _chain(self, key: Hashable, steps: Generator[Any, Any, Any]) -> Generator[None, None, None]:
        """``steps`` (already started), then the origin's work queued behind it."""
        chain = self.chains[key]
        try:
            current = steps
            while True:
                try:
                    yield from current
                except Exception:
                    log.exception("a stepped delivery failed")
                if not chain:
                    break
                current = chain.popleft()
        finally:
            if chain:                   # (closed: the router is stopping) the rest now
                for rest in chain:
                    for _ in rest:
                        pass
            del self.chains[key]
