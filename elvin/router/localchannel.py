"""An in-process channel between the router and a client of the same process
(the mobility proxy inside ``elvind``): the client protocol's bytes, without
a socket.

Why not loopback TCP: a notification the router routes to the proxy must be
in the proxy's hands, and on disk, before the router writes anything else to
any socket. A producer that sent notifications and then got the answer to a
later request knows the router read them; if the router is killed at that
moment, those notifications must not be lost (``elvin.mobility.store``).
So this channel's router end delivers its bytes to the client synchronously,
and ``LocalChannel.barrier`` (hooked into the router's ``FlushBatch``: it
runs before the router's writes of each turn, and before an early write)
first flushes this session's queue into the client, then calls
``on_delivered`` (the proxy writes its buffers in one transaction).

The other direction (client to router) goes through ``call_soon``, so that a
client that writes from inside a listener never re-enters the router. The
channel also exists before the router accepts connections, so that the
proxy can restore its subscriptions before anyone can publish.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

from elvin.protocol import split_notify_deliver
from elvin.router.session_core import INTERNAL_PEER

__all__ = ["LocalChannel", "connect_local"]

#: the peer name of an in-process client (``SessionCore`` holds it to no key limit)
PEER_NAME = INTERNAL_PEER
_LENGTH = struct.Struct(">I").unpack_from


class _End(asyncio.Transport):
    """One end: ``protocol`` is the protocol this end belongs to (the one
    that writes through it); the peer end's protocol receives."""

    def __init__(self, channel: LocalChannel, name: str) -> None:
        super().__init__()
        self.channel = channel
        self.name = name
        self.protocol: Any = None
        self.peer: _End | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name in ("peername", "sockname"):
            return PEER_NAME
        return default

    def is_closing(self) -> bool:
        return self.channel.closing

    def close(self) -> None:
        self.channel.close(flush=True)

    def abort(self) -> None:
        self.channel.close(flush=False)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        return None

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        self.channel.pause(self, True)

    def resume_reading(self) -> None:
        self.channel.pause(self, False)

    def is_reading(self) -> bool:
        return not self.channel.paused.get(self.name, False)

    def can_write_eof(self) -> bool:
        return False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.channel.write(self, bytes(data))


class LocalChannel:
    """The two ends and what flows between them."""

    def __init__(self, router: Any) -> None:
        self.router = router
        self.loop = asyncio.get_running_loop()
        self.router_end = _End(self, "router")
        self.client_end = _End(self, "client")
        self.router_end.peer, self.client_end.peer = self.client_end, self.router_end
        self.session: Any = None          # the router's Session for this client
        self.closing = False
        self.paused: dict[str, bool] = {}
        self._to_router: deque[bytes] = deque()
        self._drain_scheduled = False
        self._lost = False
        self._in_barrier = False
        #: called by the barrier once this client has what the router sent it
        self.on_delivered: Callable[[], None] | None = None
        #: ``raw_deliver(data, (start, end, secure, insecure))``: offered each
        #: NotifyDeliver before it is decoded (its attributes still encoded
        #: at ``data[start:end]``); True when it took it, and then the client
        #: never sees it (the proxy buffers them as they are, undecoded)
        self.raw_deliver: Callable[[bytes, tuple[int, int, tuple[int, ...], tuple[int, ...]]], bool] | None = None

    def attach(self, client_protocol: asyncio.Protocol, listener: str) -> None:
        """Connect ``client_protocol`` (an ``elvin.client`` session) to a new
        router session: ``connection_made`` on both sides."""
        from elvin.router.session import Session

        self.session = Session(self.router, listener)
        self.router_end.protocol = self.session
        self.client_end.protocol = client_protocol
        self.session.connection_made(self.router_end)
        client_protocol.connection_made(self.client_end)
        self.router.flush_batch.barriers.append(self.barrier)

    # -- moving bytes -------------------------------------------------------------------
    def write(self, end: _End, data: bytes) -> None:
        if self.closing or not data:
            return
        if end is self.router_end:
            # router -> client: now, so that the barrier can write it to disk
            # before any other client is told anything
            if self.raw_deliver is None:
                self.client_end.protocol.data_received(data)
            else:
                self._offer_raw(data)
        else:
            self._to_router.append(data)
            self._schedule_drain()

    def _offer_raw(self, data: bytes) -> None:
        """Whole frames (the router writes nothing else): those ``raw_deliver``
        takes go there, the others to the client, all in their order."""
        receive = self.client_end.protocol.data_received
        take = self.raw_deliver
        passed = 0            # data[passed:o] waits for the client
        o, size = 0, len(data)
        while o < size:
            (length,) = _LENGTH(data, o)
            start, end = o + 4, o + 4 + length
            parts = split_notify_deliver(data, start, end)
            if parts is not None:
                if passed < o:       # what came before it, first
                    receive(data[passed:o])
                    passed = o
                if take(data, parts):   # type: ignore[misc]  # take is set whenever parts are
                    passed = end
            o = end
        if passed < size:
            receive(data[passed:] if passed else data)

    def _schedule_drain(self) -> None:
        if not self._drain_scheduled and not self.paused.get("router", False):
            self._drain_scheduled = True
            self.loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False
        queue = self._to_router
        session = self.session
        while queue and not self.paused.get("router", False) and not self._lost:
            session.data_received(queue.popleft())
        if self.closing and not queue:
            self._finish()

    def pause(self, end: _End, on: bool) -> None:
        self.paused[end.name] = on
        if not on and end is self.router_end:
            self._schedule_drain()

    def barrier(self) -> None:
        """Before the router writes to any socket: what it queued for this
        client goes to it now, then ``on_delivered`` (a disk commit)."""
        if self._in_barrier or self._lost:
            return
        self._in_barrier = True
        try:
            queue = getattr(self.session, "queue", None)
            if queue is not None and len(queue):
                queue.flush()
            if self.on_delivered is not None:
                self.on_delivered()
        finally:
            self._in_barrier = False

    # -- closing ------------------------------------------------------------------------
    def close(self, flush: bool) -> None:
        if self.closing:
            return
        self.closing = True
        if not flush:
            self._to_router.clear()
        if self._to_router:
            self._schedule_drain()
        else:
            self.loop.call_soon(self._finish)

    def _finish(self) -> None:
        if self._lost:
            return
        self._lost = True
        barriers = self.router.flush_batch.barriers
        if self.barrier in barriers:
            barriers.remove(self.barrier)
        for protocol in (self.session, self.client_end.protocol):
            if protocol is not None:
                try:
                    protocol.connection_lost(None)
                except Exception:  # the other side must hear of it too
                    import logging
                    logging.getLogger("elvin.router").exception("closing a local channel")


async def connect_local(router: Any, url: str, **kwargs: Any) -> tuple[Any, LocalChannel]:
    """An ``elvin.client.Connection`` to ``router`` over a new in-process
    channel, named ``url`` (what the client reports as its router's URL).
    Works before the router accepts connections."""
    from elvin.client import Connection

    channel = LocalChannel(router)
    conn = Connection(url, **kwargs)
    listener = url
    conn.open_channel = lambda protocol: channel.attach(protocol, listener)
    await conn.open()
    return conn, channel
