"""The client's end of one session, sans-IO: bytes in, events out.

As h11's ``Connection`` or aioquic's ``QuicConnection``, ``ClientSessionCore``
owns everything about a session that is protocol and nothing that is I/O:
the frame decoder, xid allocation, which request each reply answers, and the
session's state, kept by the ``elvin.protocol.states.CLIENT`` table. It has
no socket, no futures, no asyncio and reads no clock. Its shell
(``elvin.client.session.Session``, an ``asyncio.Protocol``) moves the bytes,
keeps a future per xid for the callers waiting (``requests.RequestTable``)
and the timers; the meaning of what the router says is its owner's
(``connection.Connection``).

* ``request(make)`` allocates an xid, builds ``make(xid)``, remembers it
  and returns it with its frame; ``send(packet)`` frames a packet that has no
  reply (NotifyEmit, ConfConn). Either moves the state for the client's own
  events (ConnRqst sent, DisconnRqst sent).
* ``receive(data)`` returns what the bytes complete, in order: a ``Reply``
  for each answer (reply or Nack) with the request it answers, the packet
  itself for everything else (NotifyDeliver, quench notifications, TestConn,
  DropWarn, Disconn: packets are already events, and wrapping the many
  deliveries of a subscriber would cost each one an object), a
  ``Violation`` for a packet the table does not allow (the session is then
  closed: spec 7.3.2), a ``BadPacket`` for a body that does not decode
  while the stream stays in step (ignored, as 7.3.2 allows), or a
  ``Violation`` when the stream itself is broken.
* ``lost()``: the channel is gone; the requests still unanswered are
  returned, so that the shell fails their callers.

An illegal packet is decided here and nowhere else: the table says whether
it is legal, ``receive`` turns the refusal into a ``Violation`` once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from elvin.errors import ProtocolError
from elvin.protocol import DEFAULT_LIMITS, FrameDecoder, Limits, frame_packet
from elvin.protocol import packets as pk
from elvin.protocol.states import CLIENT, ClientState, IllegalPacket

__all__ = ["BadPacket", "ClientSessionCore", "Event", "Reply", "Violation"]

_XID_MAX = 0xFFFFFFFF

#: the packets that answer a request, by the xid they repeat
_REPLIES = (pk.ConnRply, pk.DisconnRply, pk.SecRply, pk.QosRply, pk.SubRply, pk.QnchRply,
            pk.Nack)

_Request = TypeVar("_Request", bound=pk.Packet)


@dataclass(frozen=True, slots=True)
class Reply:
    """The router answered ``request`` (sent with ``xid``) with ``packet``:
    a reply or a Nack. ``request`` is None when no request of this session
    has that xid (a late duplicate, or a router's bug): the shell logs it."""

    xid: int
    request: pk.Packet | None
    packet: pk.Packet


@dataclass(frozen=True, slots=True)
class Violation:
    """The router broke the protocol (a packet its state does not allow, or
    a stream that no longer frames): the session is closed, ``reason`` says
    why, ``error`` is the decoder's when it was the bytes."""

    reason: str
    error: ProtocolError | None = None


@dataclass(frozen=True, slots=True)
class BadPacket:
    """A packet body that does not decode, in a stream still in step: it is
    dropped and the session goes on (spec 7.3.2 lets a robust end do so)."""

    error: ProtocolError


#: what ``receive`` returns: a router packet that is not a reply, or one of the above
Event = pk.Packet | Reply | Violation | BadPacket


class ClientSessionCore:
    """One session's protocol state: see the module's docstring."""

    __slots__ = ("decoder", "pending", "state", "_xid")

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.decoder = FrameDecoder(limits)
        #: the requests sent and not yet answered, by xid
        self.pending: dict[int, pk.Packet] = {}
        self.state: ClientState = CLIENT.initial  # type: ignore[assignment]  # Machine holds Enum
        self._xid = 0

    # -- what the client sends ---------------------------------------------------------
    def next_xid(self) -> int:
        """A fresh xid: the next after the last, skipping any still pending
        (32-bit, never 0)."""
        xid = self._xid
        pending = self.pending
        while True:
            xid = xid + 1 if xid < _XID_MAX else 1
            if xid not in pending:
                self._xid = xid
                return xid

    def request(self, make: Callable[[int], _Request]) -> tuple[int, _Request, bytes]:
        """``make(xid)`` with a fresh xid, remembered until its reply comes:
        the xid, the packet and its frame, for the shell to write."""
        xid = self.next_xid()
        packet = make(xid)
        self.pending[xid] = packet
        return xid, packet, self.send(packet)

    def send(self, packet: pk.Packet) -> bytes:
        """``packet`` framed; ConnRqst and DisconnRqst move the state."""
        if type(packet) is pk.ConnRqst:
            self._event("sent ConnRqst")
        elif type(packet) is pk.DisconnRqst and self.state is ClientState.OPEN:
            self._event("sent DisconnRqst")
        return frame_packet(packet)

    def lost(self) -> list[tuple[int, pk.Packet]]:
        """The channel is gone: the session is closed; the requests that
        were waiting for a reply, which now never comes."""
        self._event("lost")
        unanswered = list(self.pending.items())
        self.pending.clear()
        return unanswered

    @property
    def is_open(self) -> bool:
        """ConnRply came and the session is not ending."""
        return self.state is ClientState.OPEN

    # -- what the router sends ---------------------------------------------------------
    def receive(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """The events that ``data`` completes, in order (see the module)."""
        events: list[Event] = []
        try:
            packets = self.decoder.feed(data)
        except ProtocolError as exc:
            self._bad_bytes(exc, events)
            return events
        self._packets(packets, events)
        return events

    def _packets(self, packets: list[pk.Packet], events: list[Event]) -> None:
        state = self.state
        for packet in packets:
            if state is ClientState.OPEN and type(packet) is pk.NotifyDeliver:
                events.append(packet)   # most of a subscriber's traffic: no table look-up
                continue
            try:
                following = CLIENT.receive(state, packet.ID)
            except IllegalPacket as exc:
                self._violation(exc.reason, None, events)
                return
            if state is ClientState.CLOSED:
                return   # dropped unread: the session is over
            self.state = state = following  # type: ignore[assignment]  # CLIENT's states
            if type(packet) in _REPLIES:
                xid: int = packet.xid  # type: ignore[attr-defined]  # every reply has one
                events.append(Reply(xid, self.pending.pop(xid, None), packet))
            else:
                events.append(packet)

    def _bad_bytes(self, exc: ProtocolError, events: list[Event]) -> None:
        """A decoding failure: the packets before it are good; a broken
        stream ends the session, a bad body is dropped and decoding goes on."""
        while True:
            self._packets(list(exc.packets), events)
            if self.state is ClientState.CLOSED:
                return
            if self.decoder.broken:
                self._violation(f"undecodable data: {exc}", exc, events)
                return
            events.append(BadPacket(exc))
            try:
                packets = self.decoder.feed(b"")
            except ProtocolError as again:
                exc = again
                continue
            self._packets(packets, events)
            return

    def _violation(self, reason: str, error: ProtocolError | None,
                   events: list[Event]) -> None:
        """The one place a protocol violation is handled: the session is
        closed and the shell told why."""
        self._event("lost")
        events.append(Violation(reason, error))

    def _event(self, name: str) -> None:
        self.state = CLIENT.event(self.state, name)  # type: ignore[assignment]  # CLIENT's states
