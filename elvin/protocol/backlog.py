"""A peer's pending work: the packets it sent that are not acted on yet, and
the one off-loop job (a compile) they wait for.

Both ends that receive subscriptions share this piece: a router's client
session (``elvin.router.session``) and a federation link (``elvin.federation.
link``, whose peer sends pull filters). Their rules are the same:

* **Order.** Packets take effect in the order sent. While a job runs (a long
  expression or pull filter compiling on a worker thread), later packets are
  held here and acted on once it is done, so replies stay in request order.
* **One job per peer.** A peer has at most one job queued or running: the
  packets behind it wait, so a peer can never have more than one compile in
  the router's workers, however many it sends.
* **Liveness does not wait.** Packets that carry no reply-order obligation
  (``TestConn``: its ``ConfConn`` has no xid) are answered by the owner as
  they arrive, even while a job runs, so a client with a short keepalive does
  not take a router busy with its own compile for dead. For that the owner
  keeps reading while a job runs, until ``hold_limit`` bytes are held.
* **A bad frame after good ones.** The frames that arrived whole before a
  framing error are good packets of the peer's: they are kept, in order, and
  the violation (``Violation``) takes effect after them.
* **Release cancels.** When the peer goes, ``release`` cancels the job (the
  compile stops at its next checkpoint, or never starts: ``elvin.subscription.
  cancel``), forgets what is held, and ``finish`` then tells the job's
  completion that its result must be dropped, not linked in.
* **What was accepted is still owed.** A peer that hangs up after sending a
  notification has had it accepted: ``leave`` is ``release`` for that case.
  It does not cancel a job started with ``keep`` (delivering a notification)
  and gives back that job and the packets held behind it, which the owner
  still acts on (its notifications, not its requests: nobody waits for a
  reply).

Sans-IO: a job is anything with ``cancel()`` (an ``asyncio.Future``); nothing
here reads a socket or schedules a callback.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

__all__ = ["HOLD_LIMIT", "TEST_CONN_BODY", "Backlog", "Job", "Violation"]

#: bytes of packets held behind a running job before the owner stops reading
#: from the peer (the kernel's buffers then hold the rest): enough for a long
#: run of small requests, notifications and the TestConns among them
HOLD_LIMIT = 256 * 1024

#: the whole body of a TestConn (no fields): the one packet a peer may have
#: answered out of turn (client protocol 7.4.13: ConfConn carries no xid)
TEST_CONN_BODY = (63).to_bytes(4, "big")


class Job(Protocol):
    """What a backlog waits on (an ``asyncio.Future``, or a test's stand-in)."""

    def cancel(self) -> Any: ...

    def exception(self) -> BaseException | None: ...

    def result(self) -> Any: ...


class Violation:
    """A framing error found after the frames before it: a protocol
    violation once they are acted on."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"Violation({self.reason!r})"


class Backlog:
    """Packets (bodies, or a final ``Violation``) not acted on yet, and the job
    they wait for."""

    __slots__ = ("items", "job", "keep", "held", "released", "hold_limit")

    def __init__(self, hold_limit: int = HOLD_LIMIT) -> None:
        self.items: deque[bytes | Violation] = deque()
        self.job: Job | None = None
        self.keep = False               # the job is owed even if the peer goes
        self.held = 0                   # bytes in ``items``
        self.released = False
        self.hold_limit = hold_limit

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    @property
    def busy(self) -> bool:
        """A job runs: the packets here wait for it."""
        return self.job is not None

    @property
    def full(self) -> bool:
        """Held past ``hold_limit``: stop reading from the peer for now."""
        return self.held > self.hold_limit

    # -- in -----------------------------------------------------------------------
    def add(self, bodies: list[bytes]) -> None:
        if self.released:
            return
        self.items.extend(bodies)
        self.held += sum(map(len, bodies))

    def violation(self, reason: str) -> None:
        """A framing error after what is held: it takes effect after them."""
        if not self.released:
            self.items.append(Violation(reason))

    # -- out ----------------------------------------------------------------------
    def next(self) -> bytes | Violation | None:
        """The next packet to act on; None while a job runs or nothing waits."""
        if self.job is not None or not self.items:
            return None
        item = self.items.popleft()
        if type(item) is bytes:
            self.held -= len(item)
        return item

    def clear(self) -> None:
        """Forget what is held (the peer is closing: nothing more is acted on)."""
        self.items.clear()
        self.held = 0

    # -- the job ------------------------------------------------------------------
    def start(self, job: Job, keep: bool = False) -> None:
        """``job`` runs now; what arrives meanwhile waits for it. ``keep``: it
        finishes even if the peer goes (``leave``)."""
        if self.released:
            if not keep:
                job.cancel()
            return
        if self.job is not None:
            raise RuntimeError("a peer has at most one job at a time")
        self.job = job
        self.keep = keep

    def finish(self, job: Job) -> bool:
        """``job`` is done: True if its result is to be used (it is this
        backlog's job and the peer was not released meanwhile)."""
        if self.job is not job:
            return False
        self.job = None
        return not self.released

    def release(self) -> None:
        """The peer is gone: cancel the job, forget what is held."""
        self.released = True
        job, self.job = self.job, None
        self.clear()
        if job is not None:
            job.cancel()

    def leave(self) -> tuple[Job | None, list[bytes]]:
        """The peer hung up: released as by ``release``, except that a job
        started with ``keep`` goes on; that job (or None) and the packets held
        (those before a ``Violation``), which are still owed."""
        kept = self.job if self.keep else None
        owed: list[bytes] = []
        for item in self.items:
            if type(item) is not bytes:
                break
            owed.append(item)
        if kept is not None:
            self.job = None             # forgotten, not cancelled
        self.release()
        return kept, owed
