"""Requests waiting for their reply: xid allocation and the pending table.

Each request packet carries a transaction id (xid) that its reply (or Nack)
repeats. The session's sans-IO core (``session_core``) allocates the xids
and knows which request each reply answers; this table maps the same xids
to the futures of the callers waiting for them. A reply updates client state through its
``on_reply`` callback *while it is dispatched*, before any later packet is
looked at, so that (for example) a delivery that follows a SubRply in the
same read already finds its subscription. A reply that comes after its
caller gave up (timeout, cancellation) goes to ``on_late``, which undoes
what the router did for nobody.

The table belongs to one session: when the channel goes, every request
still waiting fails with the reason (``fail_all``). It sees its session only
as a ``Channel`` (below), so it can be exercised without a socket.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from elvin.client.errors import ConnectionClosedError, nack_exception
from elvin.client.events import CloseReason
from elvin.client.session_core import ClientSessionCore
from elvin.errors import ElvinError, ProtocolError
from elvin.protocol import packets as pk

log = logging.getLogger("elvin.client")


class Pending:
    """A request sent and not yet answered."""

    __slots__ = ("future", "expect", "on_reply", "on_late", "packet", "expression")

    def __init__(self, future: asyncio.Future, expect: tuple[type, ...],
                 on_reply: Callable | None, on_late: Callable | None, packet: pk.Packet,
                 expression: str | None) -> None:
        self.future = future
        self.expect = expect
        self.on_reply = on_reply
        self.on_late = on_late
        self.packet = packet
        self.expression = expression   # a subscription's text, for a Nack's caret


def _log_failure(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.info("background request failed: %s", future.exception())


class Channel(Protocol):
    """What a ``RequestTable`` needs of its session (``elvin.client.session.Session``)."""

    @property
    def core(self) -> ClientSessionCore:
        """The session's protocol: it allocates each request's xid and frames it."""
        ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the callers' futures belong to."""
        ...

    @property
    def is_closing(self) -> bool:
        """True once nothing more can be sent."""
        ...

    @property
    def close_reason(self) -> CloseReason | None:
        """Why the channel ended, for the error of a request made too late."""
        ...

    @property
    def paused(self) -> bool:
        """The transport asked us to stop writing for now (flow control)."""
        ...

    def write(self, data: bytes) -> None:
        """Queue a framed packet for the router."""
        ...

    async def drain(self) -> None:
        """Return once writing may go on (or the channel is gone)."""
        ...


class RequestTable:
    """The requests of one session that wait for a reply, by xid."""

    def __init__(self, session: Channel) -> None:
        self.session = session
        self.pending: dict[int, Pending] = {}

    def _send(self, make: Callable[[int], Any], expect: tuple, on_reply: Callable | None,
              on_late: Callable | None, expression: str | None) -> Pending:
        xid, packet, data = self.session.core.request(make)
        pending = Pending(self.session.loop.create_future(), expect, on_reply, on_late,
                          packet, expression)
        self.pending[xid] = pending
        self.session.write(data)
        return pending

    def fire_and_forget(self, make: Callable[[int], Any], expect: tuple) -> None:
        """Send a request whose reply nobody waits for (errors are logged)."""
        if self.session.is_closing:
            return
        self._send(make, expect, None, None, None).future.add_done_callback(_log_failure)

    async def request(self, make: Callable[[int], Any], expect: tuple, timeout: float,
                      on_reply: Callable | None = None, on_late: Callable | None = None,
                      expression: str | None = None):
        """Send ``make(xid)`` and return its reply, one of the ``expect`` types.
        A Nack raises (``nack_exception``); no reply within ``timeout``
        seconds raises TimeoutError."""
        session = self.session
        if session.is_closing:
            raise ConnectionClosedError("connection closed", session.close_reason)
        pending = self._send(make, expect, on_reply, on_late, expression)
        if session.paused:
            await session.drain()
        try:
            async with asyncio.timeout(timeout):
                return await pending.future
        except TimeoutError:
            raise TimeoutError(f"no reply from the router to {type(pending.packet).__name__} "
                               f"within {timeout} s") from None

    def resolve(self, packet) -> ElvinError | None:
        """Hand a reply or Nack to the request with its xid; returns the
        exception a Nack became (the caller may learn from it), else None."""
        pending = self.pending.pop(packet.xid, None)
        if pending is None:
            log.warning("%s for unknown xid %d; ignored", type(packet).__name__, packet.xid)
            return None
        future = pending.future
        if isinstance(packet, pk.Nack):
            exc = nack_exception(packet.error, packet.message, packet.args,
                                 type(pending.packet).__name__, pending.expression)
            if not future.done():
                future.set_exception(exc)
            return exc
        if not isinstance(packet, pending.expect):
            if not future.done():
                future.set_exception(ProtocolError(
                    f"router answered {type(pending.packet).__name__} with "
                    f"{type(packet).__name__}"))
            return None
        if future.done():
            if pending.on_late is not None:
                pending.on_late(packet)
            return None
        if pending.on_reply is not None:
            pending.on_reply(packet)
        future.set_result(packet)
        return None

    def fail_all(self, error: BaseException) -> None:
        """The channel is gone: every waiting request fails with ``error``."""
        for pending in self.pending.values():
            if not pending.future.done():
                pending.future.set_exception(error)
                pending.future.exception()  # mark retrieved: the caller may be gone
        self.pending.clear()
