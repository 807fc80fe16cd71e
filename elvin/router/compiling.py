"""The worker threads that compile long subscription expressions.

An expression longer than ``session.OFF_LOOP_LENGTH`` characters is parsed,
checked, compiled and analysed for the index (``engine.place``) on a worker
thread, never on the loop every client shares. Two lanes, one thread each:

* **short**: expressions up to ``LONG_EXPRESSION`` characters (the default
  ``Subscription.Max-Length``, what every client may send without asking):
  5-50 ms each;
* **long**: longer ones, which only a client that negotiated a larger
  ``Subscription.Max-Length`` can send: up to 2-10 s each at the 256 KiB
  maximum.

So an ordinary client's expression never waits behind someone's huge ones;
a huge one waits only for other huge ones. Each lane is first come, first
served, and a session has at most one expression compiling (its later
packets wait: ``Session._busy``), so the long lane serves the sessions that
use it in turn. That is also why there is no per-session limit on queued
compiles, and why ``Subscription.Max-Length``'s maximum stays at 256 KiB
(enough for an OR of a few thousand groups): its cost falls on the clients
that ask for it, and on the loop only as the GIL it shares with one busy
thread (see ``compiler._COMPILE_PIECE`` and elvind's switch interval).

The federation service sends its peers' large pull filters the same way
(``run``, through ``FederationHost.compile_off_loop``): a peer's filter is
as much a subscription as a client's expression, and waits in the same lanes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any

from elvin.router.engine import place
from elvin.subscription.shapes import Registered, compile_text

__all__ = ["LONG_EXPRESSION", "CompileWorkers"]

#: characters beyond which an expression takes the long lane
LONG_EXPRESSION = 8 * 1024


def compile_and_place(text: str) -> Registered:
    """A worker's job: compile, and work out where the engine files the tree
    (hashing and analysing a 256 KiB tree takes ~0.1 s: not on the loop)."""
    compiled = compile_text(text)
    compiled.placement = place(compiled.ast)
    return compiled


class CompileWorkers:
    """``submit(loop, text)`` -> a future giving a ``Registered`` (with its
    ``placement``) or raising ``SubscriptionError``; threads start on first use."""

    def __init__(self) -> None:
        self._lanes: dict[str, concurrent.futures.ThreadPoolExecutor] = {}

    def submit(self, loop: asyncio.AbstractEventLoop, text: str) -> asyncio.Future:
        return self.run(loop, len(text), compile_and_place, text)

    def run(self, loop: asyncio.AbstractEventLoop, size: int, job: Callable[..., Any],
            *args: Any) -> asyncio.Future:
        """``job(*args)`` in the lane for an expression of ``size`` characters."""
        lane = "long" if size > LONG_EXPRESSION else "short"
        pool = self._lanes.get(lane)
        if pool is None:
            pool = self._lanes[lane] = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"elvind-compile-{lane}")
        return loop.run_in_executor(pool, job, *args)

    def close(self) -> None:
        """Drop what is queued; a compile under way finishes on its own."""
        lanes, self._lanes = self._lanes, {}
        for pool in lanes.values():
            pool.shutdown(wait=False, cancel_futures=True)
