"""Suspending an expression whose pattern overran its own time limit.

A ``regex()`` or ``wildcard()`` match has a limit of its own
(``patterns.MATCH_TIMEOUT``); one that runs out makes its expression bottom
for that notification. An expression that overran once is likely to again,
so it is then suspended: bottom at once, without being evaluated, for a
while that doubles with each overrun (``SUSPEND_FIRST`` up to
``SUSPEND_MOST``). Both users of compiled expressions hold them so -- the
router's engine its predicates, the federation's pull matcher a peer's pull
filter terms -- which is why this lives here, below both, and not in either
(the federation does not import the router).

Sans-IO: the suspension is measured on ``time.monotonic``, which is not a
budget of the loop but how long an account lasts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["SUSPEND_FIRST", "SUSPEND_MOST", "Suspended", "charge_overrun"]

#: seconds an expression whose pattern overran its own time limit
#: (``patterns.MATCH_TIMEOUT``) is bottom without being evaluated; each
#: further overrun doubles it, up to ``SUSPEND_MOST``
SUSPEND_FIRST = 1.0
SUSPEND_MOST = 64.0


class Suspended:
    """The ``evaluate`` of a predicate (or pull filter term) whose pattern ran
    out of its own time: bottom at once until ``until``, then the predicate's
    own ``evaluate`` again. Its account is its own: how often *it* overran
    decides how long it waits, nothing else does, so an expensive pattern
    costs the loop at most one time limit per suspension, and every other
    subscription is evaluated as if it were not there."""

    __slots__ = ("evaluate", "until", "count")

    def __init__(self, evaluate: Callable[[Mapping[str, Any]], Any]) -> None:
        self.evaluate = evaluate
        self.until = 0.0
        self.count = 0      # overruns so far

    def __call__(self, attrs: Mapping[str, Any]) -> Any:
        if time.monotonic() < self.until:
            return None
        return self.evaluate(attrs)


def charge_overrun(holder: Any, again: bool = True) -> int:
    """``holder`` (anything with an ``evaluate``: a ``Predicate``, a pull
    filter term) just overran a pattern's time limit: suspend it (see
    ``Suspended``) from now; returns how many times it has overrun.
    ``again=False``: only start its current suspension anew from now."""
    wrapper = holder.evaluate
    if type(wrapper) is not Suspended:
        wrapper = holder.evaluate = Suspended(wrapper)
    if again:
        wrapper.count += 1
    wrapper.until = time.monotonic() + min(SUSPEND_MOST,
                                           SUSPEND_FIRST * 2 ** (wrapper.count - 1))
    return wrapper.count
