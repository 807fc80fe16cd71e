"""The transport of one session: a TCP or TLS channel carrying Elvin frames.

A ``Session`` lives as long as its channel. A reconnecting ``Connection``
goes through several of them, so everything that dies with the channel is
kept here: the protocol of the session (``core``, the sans-IO
``session_core.ClientSessionCore``: decoding, xids, the session's state by
the ``CLIENT`` table, violations), the output buffer and flow control, the
futures of requests still waiting for a reply (``requests``), and why the
channel ended. The session is the core's I/O shell: it feeds it the bytes
read and acts on the events it returns. What the packets mean is its owner's business (``SessionOwner``, the
connection's core): each decoded packet is handed on, in order, and the
owner hears when the channel is gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl as ssl_module
from collections.abc import Callable
from typing import Protocol

from elvin.client.errors import ConnectError, ConnectionClosedError
from elvin.client.events import CloseReason
from elvin.client.requests import RequestTable
from elvin.client.session_core import BadPacket, ClientSessionCore, Event, Violation
from elvin.protocol import ElvinURI, Limits, parse_uri
from elvin.protocol import packets as pk
from elvin.protocol.limits import OPTION_FIELDS
from elvin.protocol.states import ClientState

log = logging.getLogger("elvin.client")

#: the protocol version this client speaks (ConnRqst, UNotify)
CLIENT_VERSION = (4, 0)
#: frames written in one turn of the event loop are joined up to this size
_CORK_LIMIT = 64 * 1024


def client_uri(url: str | ElvinURI) -> ElvinURI:
    """``url`` parsed, if it names a protocol stack this client speaks."""
    uri = url if isinstance(url, ElvinURI) else parse_uri(url)
    if uri.protocol[0] not in ("tcp", "ssl") or uri.protocol[2] != "xdr":
        raise ValueError(f"unsupported protocol stack {','.join(uri.protocol)} in {url}")
    return uri


def ssl_context_for(uri: ElvinURI, context: ssl_module.SSLContext | None
                    ) -> ssl_module.SSLContext | None:
    """The TLS context for ``uri``: None for TCP, else ``context`` or the default."""
    if uri.protocol[0] != "ssl":
        return None
    return context or ssl_module.create_default_context()


def os_error_text(exc: OSError) -> str:
    """Why a socket could not be opened, in words (not an errno tuple)."""
    if isinstance(exc, ssl_module.SSLCertVerificationError):
        return f"TLS certificate verification failed ({exc.verify_message})"
    if isinstance(exc, ssl_module.SSLError):
        return f"TLS error ({exc.reason or exc})"
    if exc.errno:
        return os.strerror(exc.errno)
    return exc.strerror or str(exc) or type(exc).__name__


def disconn_reason(packet: pk.Disconn) -> CloseReason:
    """The close reason a router's Disconn gives."""
    detail = f" ({packet.args})" if packet.args else ""
    if packet.reason == pk.DisconnReason.SHUTDOWN:
        return CloseReason("shutdown", "the router is shutting down" + detail, packet.reason)
    if packet.reason == pk.DisconnReason.REDIRECT:
        return CloseReason("redirect", f"redirected to {packet.args}", packet.reason,
                           redirect=packet.args or None)
    if packet.reason == pk.DisconnReason.PROTOCOL_ERRORS:
        return CloseReason("protocol-errors", "the router closed the connection for "
                           "repeated protocol errors" + detail, packet.reason)
    return CloseReason("disconnected", f"Disconn reason {packet.reason}" + detail,
                       packet.reason)


class SessionOwner(Protocol):
    """Who a session hands what it receives to (``connection.ConnectionCore``)."""

    @property
    def deliver(self) -> Callable[[pk.NotifyDeliver], None]:
        """Where NotifyDeliver goes: most of a subscriber's traffic, so it
        skips ``packet_received`` (looked up once per read, not per packet)."""
        ...

    def packet_received(self, session: Session, event: Event) -> None:
        """Any other event of the session's core, in order: a ``Reply`` to a
        request, or a router packet that is not one (errors are the owner's)."""
        ...

    def session_lost(self, session: Session) -> None:
        """The channel is gone (``session.close_reason`` says why); its
        requests have already failed."""
        ...


async def open_session(owner: SessionOwner, uri: ElvinURI, limits: Limits, timeout: float,
                       ssl_context: ssl_module.SSLContext | None,
                       open_channel: Callable[[Session], None] | None = None) -> Session:
    """A channel to the router at ``uri``, within ``timeout`` seconds; a
    ConnectError that says why not. ``open_channel(session)``, if given,
    connects the session without a socket instead (``Connection.open_channel``)."""
    session = Session(owner, limits)
    if open_channel is not None:   # an in-process channel (elvin.router.localchannel)
        open_channel(session)
        return session
    try:
        async with asyncio.timeout(timeout):
            await session.loop.create_connection(
                lambda: session, uri.host, uri.port,
                ssl=ssl_context_for(uri, ssl_context))
    except TimeoutError:
        raise ConnectError(f"cannot connect to {uri}: no answer within "
                           f"{timeout} s") from None
    except OSError as exc:
        raise ConnectError(f"cannot connect to {uri}: {os_error_text(exc)}") from None
    return session


class Session(asyncio.Protocol):
    """One transport (TCP or TLS) to a router, with its pending requests."""

    def __init__(self, owner: SessionOwner, limits: Limits) -> None:
        self.owner = owner
        self.loop = asyncio.get_running_loop()
        #: the protocol of the session (sans-IO): decoding, xids, its state
        self.core = ClientSessionCore(limits)
        self.transport: asyncio.Transport | None = None
        self.requests = RequestTable(self)
        self.paused = False
        self._drain_waiters: list[asyncio.Future] = []
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_scheduled = False
        self.last_received = self.loop.time()
        self.disconn: pk.Disconn | None = None
        self.close_reason: CloseReason | None = None
        self.lost = self.loop.create_future()
        self.keepalive_task: asyncio.Task | None = None

    # -- asyncio.Protocol ------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.last_received = self.loop.time()
        owner = self.owner
        dispatch = owner.packet_received
        deliver = owner.deliver
        for event in self.core.receive(data):
            # a subscriber's chunk is mostly NotifyDeliver: straight to the
            # subscriptions, without the owner's handler table
            if type(event) is pk.NotifyDeliver:
                try:
                    deliver(event)
                except Exception:  # a listener's bug must not stop delivery; logged
                    log.exception("error handling NotifyDeliver")
            elif type(event) is Violation:
                log.error("router broke the protocol: %s", event.reason)
                self.abort(CloseReason("protocol-violation", event.reason, error=event.error))
                return
            elif type(event) is BadPacket:
                # the stream is still in step: ignore the packet (spec 7.3.2
                # allows a robust implementation to carry on)
                log.warning("ignoring a packet from the router that does not decode: %s",
                            event.error)
            else:
                dispatch(self, event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._wake_drain_waiters()
        if self.keepalive_task is not None:
            self.keepalive_task.cancel()
        if self.close_reason is None:
            if self.disconn is not None:
                self.close_reason = disconn_reason(self.disconn)
            else:
                message = str(exc) if exc else "the router closed the connection"
                self.close_reason = CloseReason("lost", message, error=exc)
        self.core.lost()
        self.requests.fail_all(ConnectionClosedError(f"connection lost ({self.close_reason})",
                                                     self.close_reason))
        if not self.lost.done():
            self.lost.set_result(self.close_reason)
        self.owner.session_lost(self)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_drain_waiters()

    def _wake_drain_waiters(self) -> None:
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    # -- used by the owner -----------------------------------------------------
    def accept_options(self, options: dict) -> None:
        """The connection options agreed: where they let the router send
        more than the decoder's limits allow, they apply (in full)."""
        decoder = self.core.decoder
        base = decoder.limits
        offered = Limits.from_options(options, base)
        if any(getattr(offered, f) > getattr(base, f) for f in OPTION_FIELDS.values()):
            decoder.limits = offered

    def on_disconn(self, packet: pk.Disconn) -> None:
        """The router ends the session (Disconn): note why, close the channel."""
        self.disconn = packet
        self.close_reason = disconn_reason(packet)
        self.close()

    @property
    def is_closing(self) -> bool:
        return (self.transport is None or self.transport.is_closing() or self.lost.done()
                or self.core.state is ClientState.CLOSED)

    def write(self, data: bytes) -> None:
        """Queue a framed packet. Packets written in one turn of the event
        loop go to the socket in one write (far fewer system calls for a
        producer sending in a loop); 64 KiB or more is written at once, so
        the transport's flow control (pause_writing) still applies."""
        self._out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= _CORK_LIMIT:
            self.flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        out = self._out
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._out_bytes = 0
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    async def drain(self) -> None:
        while self.paused and not self.lost.done():
            waiter = self.loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def abort(self, reason: CloseReason) -> None:
        if self.close_reason is None:
            self.close_reason = reason
        self._out.clear()
        self._out_bytes = 0
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Write what is queued, then close the channel."""
        self.flush()
        if self.transport is not None:
            self.transport.close()
