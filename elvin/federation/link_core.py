"""The federation link's protocol, sans-IO: bytes and times in, events out.

``LinkCore`` is one end of a router-to-router link as the Elvin Federation
Protocol 1.0 sees it: the FedConnRqst/FedConnRply handshake, then FedNotify,
FedSubReplace and its Ack, TestConn/ConfConn, DropWarn and Disconn. It owns
the link's state (``elvin.protocol.states.FEDERATION_ACCEPTING`` or
``FEDERATION_CONNECTING``, consulted for every packet: an illegal one takes
the one violation path, ``_violation``), the FedSubReplace requests awaiting
an Ack and their deadlines, and the keepalive's bookkeeping.

It holds no socket, no loop and no clock: every method that needs the time
takes ``now`` (any monotonic clock; the asyncio shell passes ``loop.time()``),
and everything it wants done comes back as events (``Send`` a packet,
``Close`` the channel, ``Linked``, ``NotifyReceived``...). The asyncio shell,
``elvin.federation.link.FederationLink``, writes the packets, runs the
timers and the peer's admission (which may take DNS lookups), compiles large
pull filters off the loop and tells its ``FederationService``; so, as h11
and aioquic do, the protocol can be tested packet by packet with no sockets
(tests/unit/test_federation_link_core.py).

What the core decides, and the shell does not: which packet is legal when;
the protocol version; that a FedConnRply answers our FedConnRqst's xid; that
a FedNotify's routing list names the sender's domain and is not longer than
``max_routing``; which Ack answers the latest pull filter; when a request has
timed out (resent ``request_retries`` times first, as Avis does) and when a
silent peer is dead (TestConn after ``keepalive`` seconds of silence, closed
after another ``keepalive`` without a word).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal, Protocol

from elvin.errors import NackCode, ProtocolError
from elvin.federation.packets import (
    VERSION_MAJOR,
    VERSION_MINOR,
    Ack,
    FedConnRply,
    FedConnRqst,
    FedNotify,
    FedSubReplace,
    decode_fed_notify,
)
from elvin.federation.subast import PullFilter
from elvin.protocol import ConfConn, Disconn, DisconnReason, DropWarn, Nack, TestConn
from elvin.protocol.backlog import TEST_CONN_BODY
from elvin.protocol.framing import FrameDecoder
from elvin.protocol.limits import Limits
from elvin.protocol.states import (
    FEDERATION_ACCEPTING,
    FEDERATION_CONNECTING,
    FederationLinkState,
    IllegalPacket,
)

__all__ = [
    "OFF_LOOP_BYTES", "Acked", "BadPullFilter", "Close", "ConnRplyReceived",
    "ConnRqstReceived", "DropWarned", "Event", "LinkCore", "LinkSettings", "Linked",
    "NotifyReceived", "OffLoopSubReplace", "Send", "SubReplaceReceived",
]

#: a FedSubReplace body longer than this is decoded and compiled by the
#: shell off the loop (FederationHost.run_off_loop); a shorter one (~10
#: terms) costs the loop at most a few milliseconds
OFF_LOOP_BYTES = 1024
_NO_ROW: dict[int, object] = {}


class LinkSettings(Protocol):
    """The settings the core reads (``FederationConfig`` has them all); read
    at each use, so a reload applies to links already up."""

    @property
    def max_routing(self) -> int: ...

    @property
    def keepalive(self) -> float: ...

    @property
    def request_timeout(self) -> float: ...

    @property
    def request_retries(self) -> int: ...


# -- events --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Send:
    """Write this packet to the peer."""
    packet: object


#: why a link closes: ``violation`` (the peer broke the protocol: Disconn
#: reason 4 already sent), ``refused`` (we Nacked its FedConnRqst),
#: ``peer-refused`` (it Nacked ours), ``peer-disconnected`` (its Disconn),
#: ``rejected`` (it Nacked our FedSubReplace), ``request-timeout``,
#: ``silent`` (keepalive), ``handshake-timeout``, ``closed`` (we closed it)
CloseKind = Literal["violation", "refused", "peer-refused", "peer-disconnected", "rejected",
                    "request-timeout", "silent", "handshake-timeout", "closed"]


@dataclass(frozen=True, slots=True)
class Close:
    """The link is over (the core is CLOSED): close the channel once the
    packets sent before it are written. ``detail`` is for the log."""
    kind: CloseKind
    detail: str = ""
    packet: object = None           # the Nack or Disconn that ended it, if any


@dataclass(frozen=True, slots=True)
class ConnRqstReceived:
    """Accepting end: a compatible FedConnRqst. The shell admits the peer
    (domain, address, certificate) and answers with ``establish`` or
    ``refuse``."""
    packet: FedConnRqst


@dataclass(frozen=True, slots=True)
class ConnRplyReceived:
    """Connecting end: the FedConnRply to our FedConnRqst. The shell checks
    the domain and answers with ``establish`` or ``close``."""
    packet: FedConnRply


@dataclass(frozen=True, slots=True)
class Linked:
    """The handshake is done: the link is up with ``domain``."""
    domain: str


@dataclass(frozen=True, slots=True)
class NotifyReceived:
    """A FedNotify whose routing list passed the checks; ``block`` is its
    attributes' encoding (None when it was decoded another way)."""
    packet: FedNotify
    block: bytes | None


@dataclass(frozen=True, slots=True)
class SubReplaceReceived:
    """A small FedSubReplace: the shell applies it and Acks or Nacks."""
    packet: FedSubReplace


@dataclass(frozen=True, slots=True)
class OffLoopSubReplace:
    """A large FedSubReplace, undecoded: the shell decodes and compiles it
    off the loop (its later packets wait), then Acks or Nacks."""
    body: bytes


@dataclass(frozen=True, slots=True)
class BadPullFilter:
    """A FedSubReplace that does not decode: Nacked (the Nack is sent),
    the old filter stays. For the log."""
    detail: str


@dataclass(frozen=True, slots=True)
class Acked:
    """The Ack of our latest pull filter (earlier ones' Acks are dropped)."""
    xid: int


@dataclass(frozen=True, slots=True)
class DropWarned:
    """The peer dropped packets of ours (DropWarn). For the log."""


Event = (Send | Close | ConnRqstReceived | ConnRplyReceived | Linked | NotifyReceived
         | SubReplaceReceived | OffLoopSubReplace | BadPullFilter | Acked | DropWarned)


class LinkCore:
    """One end of a federation link, sans-IO (see the module's docstring)."""

    def __init__(self, role: Literal["connect", "accept"], domain: str, limits: Limits,
                 settings: LinkSettings, now: float) -> None:
        self.role = role
        self.domain = domain                    # this router's
        self.limits = limits
        self.settings = settings
        self.machine = FEDERATION_CONNECTING if role == "connect" else FEDERATION_ACCEPTING
        self._rows = self.machine.received
        self.state: FederationLinkState = self.machine.initial  # type: ignore[assignment]  # the machine's initial is a FederationLinkState
        self.decoder = FrameDecoder(limits)
        self.remote_domain: str | None = None
        #: the link was established (it may since have closed)
        self.established = False
        #: the peer answered our FedConnRqst (FedConnRply, Nack or Disconn)
        self.answered = False
        self.pull_xid = 0                        # xid of our latest FedSubReplace
        self._pull_sent: PullFilter = False      # ... and its filter (resent as is)
        #: FedSubReplace awaiting an Ack: xid -> (deadline, attempt), oldest first
        self.requests: dict[int, tuple[float, int]] = {}
        self._xids = itertools.count(1)
        self._rqst_xid = 0
        self.last_rx = now
        self.test_pending = False

    def __repr__(self) -> str:
        return f"<LinkCore {self.role} {self.remote_domain or '?'} {self.state}>"

    @property
    def closed(self) -> bool:
        return self.state is FederationLinkState.CLOSED

    # -- the handshake ---------------------------------------------------------------------
    def start(self) -> list[Event]:
        """The channel is open: the connecting end sends its FedConnRqst."""
        if self.role != "connect":
            return []
        self._rqst_xid = next(self._xids)
        return [Send(FedConnRqst(self._rqst_xid, VERSION_MAJOR, VERSION_MINOR, self.domain))]

    def establish(self, domain: str, xid: int | None = None) -> list[Event]:
        """The shell admitted the peer as ``domain``: at the accepting end
        ``xid`` is its FedConnRqst's, answered with FedConnRply."""
        if self.state not in (FederationLinkState.AWAIT_RQST, FederationLinkState.AWAIT_RPLY):
            return []
        events: list[Event] = []
        if self.role == "accept":
            events.append(Send(FedConnRply(xid or 0, self.domain)))
        self.state = self.machine.event(self.state, "established")  # type: ignore[assignment]  # FederationLinkState table
        self.remote_domain = domain
        self.established = True
        events.append(Linked(domain))
        return events

    def refuse(self, xid: int, code: int, told: str, detail: str) -> list[Event]:
        """Nack the peer's FedConnRqst with ``told`` and close (the log says ``detail``)."""
        if self.closed:
            return []
        self.state = FederationLinkState.CLOSED
        return [Send(Nack(xid, code, told[:200])), Close("refused", detail)]

    def handshake_due(self) -> list[Event]:
        """The handshake's deadline (``request_timeout`` after the channel
        opened) has come: if it is not done, the link is closed."""
        if self.state not in (FederationLinkState.AWAIT_RQST, FederationLinkState.AWAIT_RPLY):
            return []
        self.state = FederationLinkState.CLOSED
        awaited = "FedConnRqst" if self.role == "accept" else "FedConnRply"
        return [Close("handshake-timeout", awaited)]

    # -- bytes in --------------------------------------------------------------------------
    def feed(self, data: bytes, now: float) -> tuple[list[bytes], str | None, list[Event]]:
        """Frame ``data``: (the whole packet bodies, a violation if a frame
        header was bad, the ConfConns answering TestConns at once). The shell
        handles the bodies in order with ``handle``, after any pull filter
        still compiling, and then the violation with ``violate``.

        A TestConn is answered as it arrives, even while a pull filter
        compiles: ConfConn has no xid to keep in order, and a peer whose
        keepalive is shorter than a big compile must not close the link."""
        self.last_rx = now
        bad = None
        try:
            bodies = self.decoder.feed_frames(data)
        except ProtocolError as exc:
            # the bodies that arrived whole before the bad header are good
            # packets of this peer's, acted on before the violation
            bodies, bad = exc.frames, f"bad frame: {exc}"
        answers: list[Event] = []
        if self.state is FederationLinkState.LINKED and TEST_CONN_BODY in bodies:
            kept = []
            for body in bodies:
                if body == TEST_CONN_BODY:
                    answers.append(Send(ConfConn()))
                else:
                    kept.append(body)
            bodies = kept
        return bodies, bad, answers

    def handle(self, body: bytes) -> list[Event]:
        """One packet body from the peer: what to do about it."""
        state = self.state
        if state is FederationLinkState.CLOSED:
            return []
        packet_id = int.from_bytes(body[:4], "big") if len(body) >= 4 else -2
        # the table's row looked up directly (a FedNotify pays no method
        # call); whatever the row lacks goes to Machine.receive, which raises
        following = self._rows.get(state, _NO_ROW).get(packet_id)
        if following is None:
            try:
                following = self.machine.receive(state, packet_id)
            except IllegalPacket as exc:
                if state is FederationLinkState.AWAIT_RPLY:
                    self.answered = True
                return self.violate(exc.reason)
        if state is FederationLinkState.LINKED and packet_id == FedSubReplace.ID and \
                len(body) > OFF_LOOP_BYTES:
            return [OffLoopSubReplace(body)]
        try:
            packet, attrs_end = decode_fed_notify(body, self.limits)
        except ProtocolError as exc:
            if state is FederationLinkState.AWAIT_RPLY:
                self.answered = True
            return self.malformed(exc)
        if state is FederationLinkState.AWAIT_RQST:
            return self._fed_conn_rqst(packet)  # type: ignore[arg-type]  # the table let only FedConnRqst through
        if state is FederationLinkState.AWAIT_RPLY:
            self.answered = True
            return self._answer(packet, following)
        if attrs_end:
            return self._fed_notify(packet, body[4:attrs_end])  # type: ignore[arg-type]  # attrs_end is set only for FedNotify
        return self._linked(packet, following)

    def malformed(self, exc: ProtocolError) -> list[Event]:
        """A bad FedSubReplace is Nacked; any other bad packet ends the link."""
        if exc.packet_id == FedSubReplace.ID and exc.xid and self.state is FederationLinkState.LINKED:
            return [Send(Nack(exc.xid, int(NackCode.PROT_ERROR), f"bad SubAST: {exc}"[:200])),
                    BadPullFilter(str(exc))]
        return self.violate(f"malformed packet: {exc}")

    def violate(self, reason: str) -> list[Event]:
        """The one violation path (7.3.2): Disconn with reason 4 and close."""
        if self.closed:
            return []
        self.state = FederationLinkState.CLOSED
        return [Send(Disconn(int(DisconnReason.PROTOCOL_ERRORS), reason[:200])),
                Close("violation", reason)]

    def _fed_conn_rqst(self, p: FedConnRqst) -> list[Event]:
        if p.major_version != VERSION_MAJOR or p.minor_version > VERSION_MINOR:
            reason = (f"incompatible federation protocol version {p.major_version}."
                      f"{p.minor_version} (this router speaks {VERSION_MAJOR}.{VERSION_MINOR})")
            return self.refuse(p.xid, int(NackCode.PROT_INCOMPAT), reason, reason)
        return [ConnRqstReceived(p)]

    def _answer(self, packet: object, following: object) -> list[Event]:
        """The peer's answer to our FedConnRqst."""
        if isinstance(packet, FedConnRply):
            if packet.xid != self._rqst_xid:
                return self.violate(f"FedConnRply for xid {packet.xid}, not {self._rqst_xid}")
            return [ConnRplyReceived(packet)]
        self.state = following              # type: ignore[assignment]  # CLOSED, from the table
        if isinstance(packet, Nack):
            return [Close("peer-refused", f"Nack {packet.error} {packet.message}", packet)]
        return [Close("peer-disconnected", "", packet)]

    def _linked(self, packet: object, following: object) -> list[Event]:
        if isinstance(packet, FedNotify):
            return self._fed_notify(packet, None)
        if isinstance(packet, FedSubReplace):
            return [SubReplaceReceived(packet)]
        if isinstance(packet, Ack):
            if self.requests.pop(packet.xid, None) is not None and packet.xid == self.pull_xid:
                return [Acked(packet.xid)]
            return []
        if isinstance(packet, TestConn):
            return [Send(ConfConn())]
        if isinstance(packet, ConfConn):
            self.test_pending = False
            return []
        if isinstance(packet, DropWarn):
            return [DropWarned()]
        if isinstance(packet, Nack):
            self.state = FederationLinkState.CLOSED
            return [Send(Disconn(int(DisconnReason.SHUTDOWN), "request rejected")),
                    Close("rejected", f"Nack {packet.error}: {packet.message}", packet)]
        self.state = following          # type: ignore[assignment]  # Disconn: CLOSED, from the table
        return [Close("peer-disconnected", "", packet)]

    def _fed_notify(self, p: FedNotify, block: bytes | None) -> list[Event]:
        routing = p.routing
        if self.remote_domain not in routing:
            return self.violate(f"FedNotify routing list {list(routing)[:8]!r} lacks the "
                                f"sender's domain {self.remote_domain!r}")
        limit = self.settings.max_routing
        if len(routing) > limit:
            return self.violate(f"FedNotify routing list of {len(routing)} domains "
                                f"(limit {limit})")
        return [NotifyReceived(p, block)]

    # -- our requests ------------------------------------------------------------------
    # FedSubReplace is the only request a linked router sends (the handshake's
    # FedConnRqst has its own deadline, TestConn is the keepalive's business).
    # Avis's Link answers a FedSubReplace timeout by sending it again, forever,
    # leaving dead peers to the liveness check. We retry ``request_retries``
    # times and then give up: a peer that keeps up TCP and TestConn but never
    # answers a request would otherwise never get our pull filter, silently.
    def send_pull_filter(self, pull: PullFilter, now: float) -> list[Event]:
        """Send ``pull`` as our pull filter (a FedSubReplace awaiting its Ack)."""
        self._pull_sent = pull
        return self._send_sub_replace(0, now)

    def _send_sub_replace(self, attempt: int, now: float) -> list[Event]:
        xid = self.pull_xid = next(self._xids)
        self.requests[xid] = (now + self.settings.request_timeout, attempt)
        return [Send(FedSubReplace(xid, self._pull_sent))]

    @property
    def next_request_deadline(self) -> float | None:
        """When ``requests_due`` has something to do (None: no request waits)."""
        return next(iter(self.requests.values()))[0] if self.requests else None

    def requests_due(self, now: float) -> list[Event]:
        """Resend or give up on the requests whose deadline has passed."""
        if self.state is not FederationLinkState.LINKED:
            return []
        settings = self.settings
        events: list[Event] = []
        for xid, (deadline, attempt) in list(self.requests.items()):
            if deadline > now:
                break
            del self.requests[xid]
            if xid != self.pull_xid:
                continue          # superseded by a later FedSubReplace, itself pending
            if attempt < settings.request_retries:
                events.extend(self._send_sub_replace(attempt + 1, now))
                continue
            self.state = FederationLinkState.CLOSED
            self.requests.clear()
            events.append(Close("request-timeout",
                                f"FedSubReplace unanswered after {attempt + 1} attempts"))
            return events
        return events

    # -- liveness ----------------------------------------------------------------------
    def keepalive_due(self, now: float) -> list[Event]:
        """Every ``keepalive`` seconds while linked: TestConn after that much
        silence, and close if the peer said nothing since the last one."""
        if self.state is not FederationLinkState.LINKED:
            return []
        keepalive = self.settings.keepalive
        idle = now - self.last_rx
        if self.test_pending and idle >= keepalive:
            self.state = FederationLinkState.CLOSED
            return [Close("silent", f"nothing for {idle:.0f} s")]
        if idle >= keepalive:
            self.test_pending = True
            return [Send(TestConn())]
        self.test_pending = False
        return []

    # -- our end -----------------------------------------------------------------------
    def close(self, reason: int = DisconnReason.SHUTDOWN, message: str = "") -> list[Event]:
        """We end the link: Disconn (unless ``reason`` is 0) and close."""
        if self.closed:
            return []
        self.state = FederationLinkState.CLOSED
        self.requests.clear()
        events: list[Event] = [Send(Disconn(int(reason), message))] if reason else []
        events.append(Close("closed", message))
        return events

    def lost(self) -> None:
        """The channel is gone."""
        self.state = FederationLinkState.CLOSED
        self.requests.clear()
