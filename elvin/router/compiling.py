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
served.

**Every job has an owner.** A peer (a client session, a federation link) has
at most one job queued or running (``elvin.protocol.backlog``: its later
packets wait for it), so the lanes hold at most one job per peer, and a long
lane serves the sessions that use it in turn. When the peer goes, it cancels
its job: one still queued never runs, and one running stops at its next
checkpoint (``elvin.subscription.cancel``: between parser reductions, checked
nodes and pieces of generated code, a few milliseconds apart), so 40 clients
that send an 8 KiB or 256 KiB expression and hang up at once cost the
workers a few milliseconds, not minutes. That is why ``Subscription.
Max-Length``'s maximum can stay at 256 KiB (enough for an OR of a few
thousand groups): its cost falls on the clients that ask for it, and on the
loop only as the GIL it shares with one busy thread (see
``compiler._COMPILE_PIECE`` and elvind's switch interval).

The federation service sends its peers' large pull filters the same way
(``run``, through ``FederationHost.run_off_loop``): a peer's filter is
as much a subscription as a client's expression, and waits in the same lanes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Callable
from typing import Any

from elvin.router.engine import place
from elvin.subscription.cancel import Cancelled, CancelToken, cancellable, checkpoint
from elvin.subscription.shapes import Registered, compile_text

__all__ = ["LONG_EXPRESSION", "CompileWorkers"]

#: characters beyond which an expression takes the long lane
LONG_EXPRESSION = 8 * 1024


def compile_and_place(text: str) -> Registered:
    """A worker's job: compile, and work out where the engine files the tree
    (hashing and analysing a 256 KiB tree takes ~0.1 s: not on the loop)."""
    compiled = compile_text(text)
    checkpoint()
    compiled.placement = place(compiled.ast, compiled.names, compiled.index)
    return compiled


class _Counts:
    """What the workers did (statistics; tests read them)."""

    __slots__ = ("submitted", "started", "finished", "stopped", "_lock")

    def __init__(self) -> None:
        self.submitted = 0      # jobs handed to a lane
        self.started = 0        # ... that a worker started (the others were cancelled first)
        self.finished = 0       # ... that ran to their end (a result or an error)
        self.stopped = 0        # ... cancelled while running (at a checkpoint)
        self._lock = threading.Lock()   # the lanes' threads count too

    def add(self, field: str) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + 1)


def _run_cancellable(counts: _Counts, token: CancelToken, job: Callable[..., Any],
                     *args: Any) -> Any:
    """On the worker: ``job(*args)`` unless or until ``token`` is cancelled
    (then ``Cancelled``, which nobody reads: the future was cancelled)."""
    counts.add("started")
    try:
        with cancellable(token):
            result = job(*args)
    except Cancelled:
        counts.add("stopped")
        raise
    except BaseException:  # counted however it ends; re-raised
        counts.add("finished")
        raise
    counts.add("finished")
    return result


def _cancel_token_if_cancelled(token: CancelToken, future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        token.cancel()


class CompileWorkers:
    """``submit(loop, text)`` -> a future giving a ``Registered`` (with its
    ``placement``) or raising ``SubscriptionError``; threads start on first
    use. Cancelling the future cancels the job (queued or running)."""

    def __init__(self) -> None:
        self._lanes: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
        self.counts = _Counts()
        self._waiting = 0       # futures not done yet (on the loop)

    def submit(self, loop: asyncio.AbstractEventLoop, text: str) -> asyncio.Future[Any]:
        return self.run(loop, len(text), compile_and_place, text)

    def run(self, loop: asyncio.AbstractEventLoop, size: int, job: Callable[..., Any],
            *args: Any) -> asyncio.Future[Any]:
        """``job(*args)`` in the lane for an expression of ``size`` characters;
        cancelling the future stops the job at its next checkpoint."""
        lane = "long" if size > LONG_EXPRESSION else "short"
        pool = self._lanes.get(lane)
        if pool is None:
            pool = self._lanes[lane] = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"elvind-compile-{lane}")
        token = CancelToken()
        self.counts.add("submitted")
        future = loop.run_in_executor(pool, _run_cancellable, self.counts, token, job, *args)
        future.add_done_callback(functools.partial(_cancel_token_if_cancelled, token))
        self._waiting += 1
        future.add_done_callback(self._done)
        return future

    @property
    def busy(self) -> bool:
        """A job is queued (and not cancelled) or running."""
        counts = self.counts
        return self._waiting > 0 or counts.started > counts.finished + counts.stopped

    def _done(self, future: asyncio.Future[Any]) -> None:
        self._waiting -= 1

    def close(self) -> None:
        """Drop what is queued; a compile under way finishes on its own."""
        lanes, self._lanes = self._lanes, {}
        for pool in lanes.values():
            pool.shutdown(wait=False, cancel_futures=True)
