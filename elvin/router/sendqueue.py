"""A session's bounded outgoing queue with the negotiated drop policy.

Everything the router sends to one client goes through its ``SendQueue``.
Packets queued during one event-loop iteration are written to the transport
together (one ``write`` per client per iteration, however many
notifications were delivered to it). While the transport is paused (its
buffer is above the high-water mark because the client is not reading),
packets wait here, in a deque whose size in bytes is bounded by
``Send-Queue.Max-Length``.

When a packet would take the queue over its limit, *droppable* packets
(NotifyDeliver, SubAddNotify, SubModNotify, SubDelNotify; spec 7.4.12) are
dropped according to ``Send-Queue.Drop-Policy``:

* ``oldest``: the oldest droppable packets, from the head of the queue;
* ``newest``: the packet being queued (if droppable), else the newest
  droppable packets;
* ``largest``: the largest droppable packets. To keep the cost amortised
  when a consumer is stalled, one pass drops packets until the queue is at
  most 7/8 of its limit.
* ``none`` (or Avis's ``fail``): nothing is ever dropped; a client that
  lets its queue reach the limit is disconnected (``on_overflow``), because
  the only alternatives are unbounded memory or stalling every producer.

A dropped run of packets is replaced by one DropWarn (spec 7.4.12) placed
where they were: at the head for ``oldest`` and at the tail otherwise (for
``largest`` that is an approximation: the dropped packets came from
anywhere). Replies (SubRply, Nack, ...) are never dropped. If replies alone
fill the queue, the session stops reading the client's requests
(``on_backpressure(True)``) until the queue drains below half its limit: a
client that sends requests without reading replies cannot grow router
memory. ConfConn is only queued when nothing else is waiting (7.4.14).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from elvin.protocol import DropWarn, frame

log = logging.getLogger(__name__)

DROP_WARN = frame(DropWarn())

#: transport buffer high-water mark: beyond it the transport is paused and
#: packets wait (and are dropped) here instead.
TRANSPORT_HIGH_WATER = 256 * 1024
TRANSPORT_LOW_WATER = 64 * 1024
#: write at once, without waiting for the end of the loop iteration, when
#: this much is queued
EAGER_FLUSH = 64 * 1024


class FlushBatch:
    """The queues with packets waiting for the end of the loop iteration,
    flushed by one callback, or earlier by ``run()``: the router's scheduler
    calls it after each session's turn, so a delivery or reply made in a turn
    is written before the next session's packets (which may cost a whole
    evaluation budget) run, whatever order the event loop gives its
    callbacks."""

    __slots__ = ("loop", "pending", "_scheduled", "barriers")

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.pending: list[SendQueue] = []
        self._scheduled = False
        #: called before anything is written to a client: an in-process
        #: client first gets what was routed to it, and writes it to disk
        #: (elvin.router.localchannel), so that no reply can tell anyone a
        #: notification was read before it is safe
        self.barriers: list[Callable[[], None]] = []

    def before_write(self) -> None:
        for barrier in self.barriers:
            barrier()

    def add(self, queue: SendQueue) -> None:
        self.pending.append(queue)
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self.run)

    def run(self) -> None:
        self._scheduled = False
        if self.barriers:
            self.before_write()
        pending, self.pending = self.pending, []
        for queue in pending:
            if queue._scheduled:
                queue.flush()


def _closed_flush() -> None:
    """A closed queue's flush: nothing to write."""


class SendQueue:
    __slots__ = ("transport", "loop", "max_bytes", "policy", "bytes", "dropped",
                 "drop_events", "_queue", "_paused", "_scheduled", "_closed",
                 "_reading_paused", "on_drop", "on_overflow", "on_backpressure",
                 "on_drained", "_flush_cb", "_defer", "_batch", "__weakref__")

    def __init__(self, transport: Any, loop: Any, max_bytes: int, policy: str = "oldest",
                 on_drop: Callable[[int], None] | None = None,
                 on_overflow: Callable[[], None] | None = None,
                 on_backpressure: Callable[[bool], None] | None = None,
                 batch: FlushBatch | None = None) -> None:
        self.transport = transport
        self.loop = loop
        self.max_bytes = max_bytes
        self.policy = "none" if policy == "fail" else policy
        self.bytes = 0                 # bytes waiting in _queue
        self.dropped = 0               # packets dropped in total
        self.drop_events = 0           # DropWarns queued
        # entries are [data, droppable]; data None = dropped
        self._queue: deque[list[Any]] = deque()
        self._paused = False
        self._scheduled = False
        self._closed = False
        self._reading_paused = False
        self.on_drop = on_drop
        self.on_overflow = on_overflow
        self.on_backpressure = on_backpressure
        self.on_drained: Callable[[], None] | None = None
        self._flush_cb = self.flush
        self._batch = batch
        # a flush at the end of the loop iteration: with the router's batch, or alone
        self._defer: Callable[[], None] = ((lambda: batch.add(self)) if batch is not None
                                           else (lambda: loop.call_soon(self._flush_cb)))

    # -- state --------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._queue)

    @property
    def paused(self) -> bool:
        return self._paused

    def idle(self) -> bool:
        """Nothing waiting for the client: no queued packet and an empty
        transport buffer."""
        if self._queue:
            return False
        try:
            return bool(self.transport.get_write_buffer_size() == 0)
        except Exception:  # noqa: BLE001 - a closed or odd transport holds nothing for us
            return True

    def configure(self, max_bytes: int, policy: str) -> None:
        self.max_bytes = max_bytes
        self.policy = "none" if policy == "fail" else policy
        if self.bytes > self.max_bytes:
            self._overflow(None)

    # -- queueing -------------------------------------------------------------------
    def push(self, data: bytes, droppable: bool = False) -> None:
        if self._closed:
            return
        size = len(data)
        if self.bytes + size > self.max_bytes and self._queue:
            if not self._overflow(data if droppable else None, size):
                return                 # the new packet itself was dropped (or session closed)
        self._queue.append([data, droppable])
        self.bytes += size
        if not self._paused:
            if self.bytes >= EAGER_FLUSH or self.bytes * 2 >= self.max_bytes:
                batch = self._batch
                if batch is not None and batch.barriers:
                    batch.before_write()
                self.flush()
            elif not self._scheduled:
                self._scheduled = True
                self._defer()
        if self.bytes > self.max_bytes and not self._reading_paused:
            # only replies left and still over the limit: stop reading requests
            self._set_backpressure(True)

    def write_now(self) -> None:
        """Write what waits for the end of the loop iteration at once (the
        barriers first, as for any write): a caller whose budget must count
        the system call (the quench fan-out)."""
        if self._scheduled and not self._paused and not self._closed:
            batch = self._batch
            if batch is not None and batch.barriers:
                batch.before_write()
            self.flush()

    def push_conf_conn(self, data: bytes) -> bool:
        """Queue a ConfConn only if nothing else is waiting (7.4.14)."""
        if not self.idle():
            return False
        self.push(data)
        return True

    def _overflow(self, incoming: bytes | None, size: int = 0) -> bool:
        """Make room for ``size`` bytes. Returns False when the incoming packet
        must not be queued."""
        policy = self.policy
        if policy == "none":
            if incoming is None and size == 0:
                return True
            # (the session says so, rate-limited: a client that stops reading
            # can make this happen as often as it likes)
            log.debug("send queue limit of %d bytes reached with drop policy 'none': "
                      "closing the session", self.max_bytes)
            on_overflow = self.on_overflow
            self.close()
            if on_overflow is not None:
                on_overflow()
            return False
        target = self.max_bytes - size
        q = self._queue
        dropped = 0
        if policy == "newest":
            if incoming is not None:
                self._note_drops(1, tail=True)
                return False
            dropped = self._drop(target, tail=True)
            if dropped:
                self._note_drops(dropped, tail=True)
        elif policy == "largest":
            goal = self.max_bytes - self.max_bytes // 8
            live = [e for e in q if e[1] and e[0] is not None]
            if incoming is not None:
                live.append([incoming, True])
            live.sort(key=lambda e: len(e[0]), reverse=True)
            keep_incoming = True
            for entry in live:
                if self.bytes + (size if keep_incoming else 0) <= goal:
                    break
                if entry[0] is incoming:
                    keep_incoming = False
                else:
                    self.bytes -= len(entry[0])
                    entry[0] = None
                dropped += 1
            if dropped:
                self._queue = deque(e for e in q if e[0] is not None)
                self._note_drops(dropped, tail=True)
            if not keep_incoming:
                return False
        else:  # oldest
            dropped = self._drop(target, tail=False)
            if dropped:
                self._note_drops(dropped, tail=False)
        return True

    def _drop(self, target: int, tail: bool) -> int:
        """Drop droppable packets from one end (the newest at the tail, the
        oldest at the head) until at most ``target`` bytes are queued or none
        is left; what may not be dropped stays, in its order, at that end.
        The number dropped."""
        q = self._queue
        take, put_back = (q.pop, q.append) if tail else (q.popleft, q.appendleft)
        kept = []
        dropped = 0
        while q and self.bytes > target:
            entry = take()
            if entry[1]:
                self.bytes -= len(entry[0])
                dropped += 1
            else:
                kept.append(entry)
        for entry in reversed(kept):
            put_back(entry)
        return dropped

    def _note_drops(self, count: int, tail: bool) -> None:
        self.dropped += count
        q = self._queue
        if not q or q[-1 if tail else 0][0] is not DROP_WARN:
            (q.append if tail else q.appendleft)([DROP_WARN, False])
            self.bytes += len(DROP_WARN)
            self.drop_events += 1
        if self.on_drop is not None:
            self.on_drop(count)
        if not self._paused and not self._scheduled:
            self._scheduled = True
            self._defer()

    # -- writing -------------------------------------------------------------------------
    def flush(self) -> None:
        """Write what is queued until the transport asks us to pause."""
        self._scheduled = False
        if self._closed or self._paused:
            return
        q = self._queue
        transport = self.transport
        try:
            while q and not self._paused:
                if len(q) == 1:
                    data = q.popleft()[0]
                    self.bytes -= len(data)
                    transport.write(data)
                    break
                chunk = []
                size = 0
                while q and size < TRANSPORT_HIGH_WATER:
                    data = q.popleft()[0]
                    chunk.append(data)
                    size += len(data)
                self.bytes -= size
                transport.write(b"".join(chunk))
        except Exception:  # a failed write closes the queue; logged
            log.debug("write failed", exc_info=True)
            self.close()
            return
        if self._reading_paused and self.bytes <= self.max_bytes // 2:
            self._set_backpressure(False)
        if not q and self.on_drained is not None:
            callback, self.on_drained = self.on_drained, None
            callback()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._queue:
            self.flush()
        elif self.on_drained is not None:
            callback, self.on_drained = self.on_drained, None
            callback()

    def _set_backpressure(self, on: bool) -> None:
        self._reading_paused = on
        if self.on_backpressure is not None:
            self.on_backpressure(on)

    def close(self) -> None:
        """Forget everything queued (the session is going away), and the
        callbacks: they are the session's bound methods (and ``flush`` is this
        queue's own), reference cycles that would keep a closed session in
        memory until a full collection (elvind freezes what survives)."""
        self._closed = True
        self._queue.clear()
        self.bytes = 0
        self.on_drop = self.on_overflow = self.on_backpressure = self.on_drained = None
        self._flush_cb = _closed_flush
        self._defer = _closed_flush

    @property
    def closed(self) -> bool:
        return self._closed
