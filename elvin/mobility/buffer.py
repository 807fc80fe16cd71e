"""One moved-out client at a proxy: ``ClientHandler``, its subscriptions and
its buffer (the paper's "client handler").

The buffer has two parts. Notifications arrive through the proxy's
subscriptions as listener calls (one per matching subscription, with the
same attributes dict) and wait in ``pending``; ``seal()``, once per loop
turn, encodes each once with the ids of every subscription it matched
(``protocol.encode_entry``) and numbers it: ``entries`` holds
``(seq, encoded)``, oldest first, which is what a move-in reply carries and
what the proxy's store writes to disk. The quota drops the oldest.

Where a buffer starts and ends is decided by markers that travel through
the router like any notification, so that they fall at an exact place in the
router's one order of routing, which the proxy's connection and the
client's both see:

* it starts at the proxy's own copy of its move-out reply (``arm``): what
  was routed before it reached the client live; what was routed after it
  the client ignores, so the buffer has it;
* it ends at a *fence*: a marker the moving-in client publishes at the same
  router after its new subscriptions are in place, to itself and to the
  proxy. ``fence(id)`` notes where it fell; the move-in hands over what came
  before it, and the client delivers from its new subscriptions only what
  came after it. Nothing is lost and nothing comes twice.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any

from elvin.mobility import protocol as P

__all__ = ["ClientHandler", "Handover"]

#: fences remembered per client (the last ones win)
MAX_FENCES = 16

#: what a move-in or a download takes from a buffer: its batches, how many
#: notifications they hold, how many were dropped, whether only a tombstone
#: was left (expired), whether it was cut at the client's fence
Handover = tuple[list[bytes], int, int, bool, bool]


class ClientHandler:
    """The proxy's stand-in for one moved-out client."""

    def __init__(self, client_id: str, secret: str, quota: int, expiry: float,
                 specs: Sequence[P.SubscriptionSpec], handle: int = 0) -> None:
        self.client_id = client_id
        self.secret = secret
        #: the client's owner proof for this proxy (``Mobility.Owner``): a
        #: later move-out of the same client replaces this buffer with it even
        #: when it no longer knows this buffer's secret; "" when it sent none
        self.owner = ""
        self.quota = quota
        self.expiry = expiry
        self.specs = list(specs)
        #: the row of this client in the proxy's store
        self.handle = handle
        self.moved_out_at = time.time()
        self.expires_at = self.moved_out_at + expiry
        self.subscriptions: list[Any] = []
        #: buffering starts when the proxy sees its move-out reply come back
        #: (``arm``); a handler restored from disk is armed at once
        self.armed = False
        self.arm_id: str | None = None
        #: ``[attributes, ids]`` (through the client library) or an entry
        #: already encoded (``on_raw``), in arrival order
        self.pending: list[list | bytes] = []
        self.entries: deque[tuple[int, bytes]] = deque()
        self.next_seq = 0
        self.dropped = 0
        self.fences: OrderedDict[str, int] = OrderedDict()
        #: a move-in handed the buffer over: ((fence, request id), reply),
        #: repeated as is to a repeated request; the handler stays (subscribed, on disk) until
        #: the client releases it or ``handed_timer`` runs out
        self.handed: tuple[tuple[str | None, str | None], Handover] | None = None
        self.timer: Any = None
        self.handed_timer: Any = None
        self._last: dict | None = None
        #: called when the first notification of a turn waits in ``pending``
        self.on_pending: Any = None
        #: restored after a restart: the next seq then, and the dropped count
        self.restored_seq: int | None = None
        self.restored_dropped = 0
        #: a restored buffer this one replaces and takes over at ``arm``:
        #: what it recorded since the restart (the client never had it)
        self.carry: ClientHandler | None = None
        #: this one is being carried into another: keep what it receives
        self.carried = False
        #: the handler that took this restored buffer over at its move-out,
        #: before its own subscriptions are armed: what this one's
        #: subscriptions receive until then goes into that one's buffer
        #: (written with it, so that a crash in between loses nothing)
        self.into: ClientHandler | None = None
        #: how many entries this one took over from a restored buffer
        self.carried_count = 0

    # -- filling -----------------------------------------------------------------------
    def on_notification(self, sub_id: int, notification: Any) -> None:
        # The client library calls us once per matching subscription with the
        # same attributes dict: buffer the notification once, noting every
        # subscription of the client that it matched.
        sink = self.into or self
        if not (self.armed or self.into is not None):
            return
        attrs = notification.attributes
        pending = sink.pending
        if attrs is self._last and pending and type(pending[-1]) is list \
                and pending[-1][0] is attrs:
            pending[-1][1].append(sub_id)
            return
        self._last = attrs
        pending.append([attrs, [sub_id]])
        if len(pending) == 1 and sink.on_pending is not None:
            sink.on_pending(sink)

    def on_raw(self, block: bytes, sub_ids: Sequence[int]) -> None:
        """A notification as the router encoded it (``block``: its
        attributes), for the client's subscriptions ``sub_ids``: buffered
        without being decoded (``MobilityProxy`` inside ``elvind``)."""
        sink = self.into or self
        if not (self.armed or self.into is not None):
            return
        pending = sink.pending
        pending.append(P.entry_from_block(block, sub_ids))
        if len(pending) == 1 and sink.on_pending is not None:
            sink.on_pending(sink)

    def arm(self) -> None:
        self.armed = True

    def fence(self, fence_id: str) -> None:
        """A fence fell here: what is buffered from now on came after it."""
        self.fences[fence_id] = self.next_seq + len(self.pending)
        self.fences.move_to_end(fence_id)
        while len(self.fences) > MAX_FENCES:
            self.fences.popitem(last=False)

    def seal(self) -> list[tuple[int, bytes]]:
        """Encode and number what is pending; returns the new entries."""
        new = []
        seq = self.next_seq
        for item in self.pending:
            if isinstance(item, bytes):
                data = item
            else:
                try:
                    data = P.encode_entry(item[0], item[1])
                except (ValueError, TypeError, OverflowError):
                    continue    # came off the wire decoded: cannot happen, never fatal
            new.append((seq, data))
            seq += 1
        self.pending.clear()
        self._last = None
        self.next_seq = seq
        self.entries.extend(new)
        return new

    def drop_oldest(self, count: int) -> int:
        """Drop up to ``count`` of the oldest entries (quota, full disk);
        returns how many went."""
        entries = self.entries
        count = min(count, len(entries))
        for _ in range(count):
            entries.popleft()
        self.dropped += count
        return count

    @property
    def buffered(self) -> int:
        """Notifications held now (sealed or not)."""
        return len(self.entries) + len(self.pending)

    def over_quota(self) -> int:
        return max(0, len(self.entries) - self.quota)

    @property
    def first_seq(self) -> int:
        return self.entries[0][0] if self.entries else self.next_seq

    # -- handing over --------------------------------------------------------------------
    def cut(self, fence_id: str | None) -> list[bytes] | None:
        """The encoded entries before the fence ``fence_id``; None when that
        fence is unknown here."""
        end = self.fences.get(fence_id) if fence_id is not None else None
        if end is None:
            return None
        return [data for seq, data in self.entries if seq < end]

    async def cut_sliced(self, fence_id: str | None, packer: P.BatchPacker,
                         slice_size: int = 4096, first: int = 0) -> bool:
        """``cut`` into ``packer`` from the entry numbered ``first`` on, a
        slice per loop turn (a big buffer must not hold the router's loop);
        False when the fence is unknown."""
        import asyncio

        end = self.fences.get(fence_id) if fence_id is not None else None
        if end is None:
            return False
        entries = list(self.entries)     # the handler keeps buffering meanwhile
        for start in range(0, len(entries), slice_size):
            packer.add([data for seq, data in entries[start:start + slice_size]
                        if first <= seq < end])
            if start + slice_size < len(entries):
                await asyncio.sleep(0)
        return True

    def cancel_timers(self) -> None:
        for timer in (self.timer, self.handed_timer):
            if timer is not None:
                timer.cancel()
        self.timer = self.handed_timer = None
