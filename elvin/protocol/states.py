"""Which packet is legal in which state, and what state follows: one table per role.

Every endpoint of the suite speaks a protocol whose legality depends on where
the conversation is: a router session takes ConnRqst or UNotify first and
nothing else; a client takes NotifyDeliver only once ConnRply has come; a
federation link takes FedConnRqst first at the accepting end. Before this
module each endpoint decided that in its own handlers, with states as
strings each handler set, so the three answers drifted apart and nobody could
read the protocol in one place. Here, as in h11's ``_state.py``, each role is
data: for each state, the packet ids a peer may send, and the state each one
leads to; and for each state, the endpoint's own events (it sent Disconn, the
channel was lost) and where they lead. An endpoint asks ``Machine.receive``
about every packet before it handles it and ``Machine.event`` about its own
transitions; an illegal packet raises ``IllegalPacket`` in exactly one place,
and the endpoint turns that into the spec's answer for its role (7.3.2: a
violation closes the channel).

The tables say what is *legal*, not what is *wise*: a second ConnRqst on a
connected session is legal here (the handler answers it with a Nack, 7.3.3, a
protocol error rather than a violation), because the spec says it gets a
Nack, not a closed socket.

Sans-IO: no sockets, no clocks, no logging; ids are the wire's integers so
that a fast path which reads ``body[:4]`` need not decode the packet first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum

from elvin.protocol import federation_ids as _fed
from elvin.protocol.packets import PACKET_CLASSES, PacketId

__all__ = [
    "ANY_PACKET",
    "CLIENT",
    "CLIENT_LIFECYCLE",
    "ClientLifecycle",
    "ClientState",
    "FEDERATION_ACCEPTING",
    "FEDERATION_CONNECTING",
    "IllegalEvent",
    "IllegalPacket",
    "FederationLinkState",
    "Machine",
    "ROUTER_SESSION",
    "Role",
    "SessionEvent",
    "SessionState",
]


class Role(Enum):
    """Who holds the state: the three protocol endpoints of the suite."""

    ROUTER_SESSION = "router session"
    CLIENT = "client"
    FEDERATION_LINK = "federation link"


#: in a ``received`` row: every packet id not named otherwise in that row
ANY_PACKET = -1


class IllegalPacket(Exception):
    """A peer sent a packet its role may not send in this state (7.3.2:
    a protocol violation). ``reason`` is the sentence for the log."""

    def __init__(self, role: Role, state: Enum, packet_id: int, reason: str) -> None:
        super().__init__(reason)
        self.role, self.state, self.packet_id, self.reason = role, state, packet_id, reason


class IllegalEvent(Exception):
    """The endpoint itself tried a transition its table lacks: a bug in the
    endpoint, never the peer's doing."""


@dataclass(frozen=True)
class Machine:
    """One role's table.

    ``received[state][packet_id]`` is the state after a peer's packet (the
    same state for most requests); a row may hold ``ANY_PACKET`` for "every
    other id". A state missing from ``received`` takes no packet at all.
    ``ignored`` are the states in which everything received is dropped
    unread (closing: the spec lets either side discard what comes after its
    Disconn). ``events[state][name]`` is the state after one of the
    endpoint's own events. ``names`` gives packet ids their names for the
    reason of an ``IllegalPacket``; ``refusals[state]`` says, in words, why
    a state takes nothing else (e.g. "before ConnRqst")."""

    role: Role
    initial: Enum
    received: Mapping[Enum, Mapping[int, Enum]]
    events: Mapping[Enum, Mapping[str, Enum]]
    ignored: frozenset[Enum] = frozenset()
    names: Mapping[int, str] = field(default_factory=dict)
    refusals: Mapping[Enum, str] = field(default_factory=dict)

    def receive(self, state: Enum, packet_id: int) -> Enum:
        """The state after the peer's packet ``packet_id`` in ``state``;
        IllegalPacket if the role may not send it there. (States in
        ``ignored`` answer their own state: the caller drops the packet.)"""
        if state in self.ignored:
            return state
        row = self.received.get(state)
        if row is not None:
            following = row.get(packet_id)
            if following is None:
                following = row.get(ANY_PACKET)
            if following is not None:
                return following
        name = self.names.get(packet_id, f"packet type {packet_id}")
        where = self.refusals.get(state, f"in state {state.name}")
        raise IllegalPacket(self.role, state, packet_id, f"{name} {where}")

    def legal(self, state: Enum, packet_id: int) -> bool:
        """Whether ``receive`` would accept the packet (no exception)."""
        if state in self.ignored:
            return True
        row = self.received.get(state)
        return row is not None and (packet_id in row or ANY_PACKET in row)

    def event(self, state: Enum, name: str) -> Enum:
        """The state after the endpoint's own event ``name``."""
        following = self.events.get(state, {}).get(name)
        if following is None:
            raise IllegalEvent(f"{self.role.value}: event {name!r} in state {state.name}")
        return following


# -- the router's end of a client channel (spec 5, 7) ------------------------------------
# (consulted by elvin.router.session_core)

class SessionState(StrEnum):
    """Where a router's client channel is (``elvin.router.session_core``).
    Strings, so that the status file and the logs show them as they are."""

    #: nothing taken yet: ConnRqst or UNotify must come first (7.4.3)
    NEW = "new"
    #: session-less (5.4.1): UNotify only; the router sends nothing
    UNOTIFY = "unotify"
    #: a session: ConnRqst accepted
    CONNECTED = "connected"
    #: DisconnRqst taken or Disconn sent: what is read is dropped
    CLOSING = "closing"
    #: the channel is gone
    CLOSED = "closed"


class SessionEvent(StrEnum):
    """The router session's own transitions (``Machine.event``)."""

    #: a ConnRqst passed every check: ConnRply follows
    ACCEPTED = "accepted ConnRqst"
    #: Disconn was written (a redirect, too many errors, a violation, shutdown)
    SENT_DISCONN = "sent Disconn"
    #: closed at once, without a word (a violation before a session, a timeout)
    ABORTED = "aborted"
    #: refused at the door (elvin.router.door) before a byte was read
    REFUSED = "refused at the door"
    #: the channel is gone (the peer hung up, or the close finished)
    LOST = "lost"


_S = SessionState
_E = SessionEvent
_P = PacketId

#: what a connected client may send; each leaves the session connected (a
#: second ConnRqst too: it is Nacked, a protocol error, 7.3.3), but DisconnRqst
_SESSION_REQUESTS = (_P.CONN_RQST, _P.UNOTIFY, _P.NOTIFY_EMIT, _P.TEST_CONN, _P.QOS_RQST,
                     _P.SEC_RQST, _P.SUB_ADD_RQST, _P.SUB_MOD_RQST, _P.SUB_DEL_RQST,
                     _P.QNCH_ADD_RQST, _P.QNCH_MOD_RQST, _P.QNCH_DEL_RQST)

ROUTER_SESSION = Machine(
    role=Role.ROUTER_SESSION,
    initial=_S.NEW,
    received={
        # ConnRqst stays NEW until the handler accepts it (ACCEPTED): a refused
        # one (version, keys, a full router) gets a Nack and another may come
        _S.NEW: {_P.CONN_RQST: _S.NEW, _P.UNOTIFY: _S.UNOTIFY},
        _S.UNOTIFY: {_P.UNOTIFY: _S.UNOTIFY},
        # 7.4.5: nothing after DisconnRqst is read; its DisconnRply is the last packet
        _S.CONNECTED: {**{int(pid): _S.CONNECTED for pid in _SESSION_REQUESTS},
                       _P.DISCONN_RQST: _S.CLOSING},
    },
    events={
        _S.NEW: {_E.ACCEPTED: _S.CONNECTED, _E.SENT_DISCONN: _S.CLOSING,
                 _E.ABORTED: _S.CLOSING, _E.REFUSED: _S.CLOSED, _E.LOST: _S.CLOSED},
        _S.UNOTIFY: {_E.ABORTED: _S.CLOSING, _E.LOST: _S.CLOSED},
        _S.CONNECTED: {_E.SENT_DISCONN: _S.CLOSING, _E.ABORTED: _S.CLOSING,
                       _E.LOST: _S.CLOSED},
        _S.CLOSING: {_E.ABORTED: _S.CLOSING, _E.LOST: _S.CLOSED},
        _S.CLOSED: {_E.ABORTED: _S.CLOSED, _E.LOST: _S.CLOSED},
    },
    ignored=frozenset({_S.CLOSING, _S.CLOSED}),
    names={int(pid): cls.__name__ for pid, cls in PACKET_CLASSES.items()},
    refusals={_S.NEW: "before ConnRqst", _S.UNOTIFY: "on a session-less channel",
              _S.CONNECTED: "may not be sent by a client"})

# -- the client's end (spec 5, 7) ---------------------------------------------------------
# One table for a session (one channel: the protocol), one for the
# ``Connection`` that goes through several sessions (its lifecycle, which
# ``Connection.state`` shows as a word). The session table is what the client
# core (``elvin.client.session_core``) asks about every packet.


class ClientState(Enum):
    """The client's end of one session (one channel to a router)."""

    #: the channel is up, ConnRqst not yet sent: the router has nothing to say
    STARTING = "starting"
    #: ConnRqst sent, ConnRply (or a Nack, or a Disconn redirect) awaited
    CONNECTING = "connecting"
    #: ConnRply received: every router packet of the session is legal
    OPEN = "open"
    #: DisconnRqst sent: replies to earlier requests and deliveries in flight
    #: still come, then DisconnRply
    DISCONNECTING = "disconnecting"
    #: the session is over (DisconnRply, Disconn, a refused ConnRqst, the
    #: channel lost or aborted): whatever still comes is dropped unread
    CLOSED = "closed"



#: what a router may send in an open session, and where each leads
_CLIENT_OPEN: dict[int, Enum] = {
    **dict.fromkeys((_P.NACK, _P.SEC_RPLY, _P.QOS_RPLY, _P.SUB_RPLY, _P.QNCH_RPLY,
                     _P.NOTIFY_DELIVER, _P.SUB_ADD_NOTIFY, _P.SUB_MOD_NOTIFY,
                     _P.SUB_DEL_NOTIFY, _P.TEST_CONN, _P.CONF_CONN, _P.DROP_WARN),
                    ClientState.OPEN),
    _P.DISCONN: ClientState.CLOSED,
}

CLIENT = Machine(
    role=Role.CLIENT,
    initial=ClientState.STARTING,
    received={
        # a router that is shutting down (or a proxy's channel) may say so at once
        ClientState.STARTING: {_P.DISCONN: ClientState.CLOSED},
        ClientState.CONNECTING: {
            _P.CONN_RPLY: ClientState.OPEN,
            _P.NACK: ClientState.CLOSED,       # the ConnRqst refused (7.4.1)
            _P.DISCONN: ClientState.CLOSED,    # a redirect (7.4.7) or shutdown
        },
        ClientState.OPEN: _CLIENT_OPEN,
        ClientState.DISCONNECTING: {
            **{packet: ClientState.DISCONNECTING for packet in _CLIENT_OPEN},
            _P.DISCONN: ClientState.CLOSED,
            _P.DISCONN_RPLY: ClientState.CLOSED,
        },
    },
    events={
        ClientState.STARTING: {"sent ConnRqst": ClientState.CONNECTING,
                               "lost": ClientState.CLOSED},
        ClientState.CONNECTING: {"lost": ClientState.CLOSED},
        ClientState.OPEN: {"sent DisconnRqst": ClientState.DISCONNECTING,
                           "lost": ClientState.CLOSED},
        ClientState.DISCONNECTING: {"lost": ClientState.CLOSED},
        ClientState.CLOSED: {"lost": ClientState.CLOSED},
    },
    ignored=frozenset({ClientState.CLOSED}),
    names={int(p): p.name for p in PacketId},
    refusals={
        ClientState.STARTING: "from the router before the client's ConnRqst",
        ClientState.CONNECTING: "from the router before its ConnRply",
        ClientState.OPEN: "is not a packet a router sends in an open session",
        ClientState.DISCONNECTING: "is not a packet a router sends in a session",
    },
)


class ClientLifecycle(Enum):
    """A ``Connection`` across its sessions; the values are the words of
    ``Connection.state`` (public API)."""

    CONNECTING = "connecting"
    OPEN = "open"
    RECONNECTING = "reconnecting"
    CLOSING = "closing"
    CLOSED = "closed"


_L = ClientLifecycle

#: the lifecycle's moves, all the connection's own (no packet moves it directly:
#: a session's end does, through the reconnector)
CLIENT_LIFECYCLE = Machine(
    role=Role.CLIENT,
    initial=_L.CONNECTING,
    received={},
    events={
        _L.CONNECTING: {"opened": _L.OPEN, "failed": _L.CLOSED, "close": _L.CLOSING,
                        "finalized": _L.CLOSED},
        _L.OPEN: {"lost": _L.RECONNECTING, "close": _L.CLOSING, "finalized": _L.CLOSED},
        _L.RECONNECTING: {"reconnected": _L.OPEN, "close": _L.CLOSING,
                          "finalized": _L.CLOSED},
        _L.CLOSING: {"finalized": _L.CLOSED},
        _L.CLOSED: {"finalized": _L.CLOSED},
    },
)

# -- either end of a federation link (federation draft) ----------------------------------
# (the federation link core, elvin.federation.link_core, consults it)
#
# The draft's handshake (6.3): the connecting router sends FedConnRqst and
# waits for FedConnRply (or a Nack, or a Disconn); the accepting router waits
# for FedConnRqst and answers it once the peer is admitted. Admission may take
# DNS lookups, so a FedConnRqst leaves the accepting end in AWAIT_RQST and the
# link core's own "established" event moves it to LINKED; likewise the
# connecting end checks the FedConnRply's domain before it is linked. Once
# linked, either end may send everything but the handshake.



class FederationLinkState(StrEnum):
    """Where a federation link is. A ``str`` enum with the values the link
    used before this table, so logs and status pages read the same. (Not
    ``LinkState``: ``elvin.federation.topology.LinkState`` is a link as a
    topology announcement describes it.)"""

    AWAIT_RQST = "await-rqst"      # accepting end: waiting for FedConnRqst (and admission)
    AWAIT_RPLY = "await-rply"      # connecting end: waiting for FedConnRply
    LINKED = "linked"
    CLOSED = "closed"

    def __str__(self) -> str:
        return self.value


_LINKED_TAKES: dict[int, Enum] = {
    _fed.FED_NOTIFY: FederationLinkState.LINKED,
    _fed.FED_SUB_REPLACE: FederationLinkState.LINKED,
    _fed.ACK: FederationLinkState.LINKED,
    int(PacketId.NACK): FederationLinkState.LINKED,        # our FedSubReplace refused: the core closes
    int(PacketId.TEST_CONN): FederationLinkState.LINKED,
    int(PacketId.CONF_CONN): FederationLinkState.LINKED,
    int(PacketId.DROP_WARN): FederationLinkState.LINKED,
    int(PacketId.DISCONN): FederationLinkState.CLOSED,
}
_LINK_EVENTS: dict[Enum, dict[str, Enum]] = {
    FederationLinkState.AWAIT_RQST: {"established": FederationLinkState.LINKED, "close": FederationLinkState.CLOSED},
    FederationLinkState.AWAIT_RPLY: {"established": FederationLinkState.LINKED, "close": FederationLinkState.CLOSED},
    FederationLinkState.LINKED: {"close": FederationLinkState.CLOSED},
    FederationLinkState.CLOSED: {"close": FederationLinkState.CLOSED},
}
_LINK_NAMES: dict[int, str] = {
    _fed.FED_CONN_RQST: "FedConnRqst", _fed.FED_CONN_RPLY: "FedConnRply",
    _fed.FED_SUB_REPLACE: "FedSubReplace", _fed.FED_NOTIFY: "FedNotify", _fed.ACK: "Ack",
    int(PacketId.NACK): "Nack", int(PacketId.DISCONN): "Disconn",
    int(PacketId.TEST_CONN): "TestConn", int(PacketId.CONF_CONN): "ConfConn",
    int(PacketId.DROP_WARN): "DropWarn",
}

def _link_machine(waiting: FederationLinkState, first: dict[int, Enum],
                  awaited: str) -> Machine:
    """One end of a link: what it takes while ``waiting`` for the handshake's
    ``awaited`` packet, then what either end takes once linked."""
    return Machine(
        role=Role.FEDERATION_LINK, initial=waiting,
        received={waiting: first, FederationLinkState.LINKED: _LINKED_TAKES},
        events=_LINK_EVENTS, ignored=frozenset({FederationLinkState.CLOSED}),
        names=_LINK_NAMES,
        refusals={waiting: f"before {awaited}",
                  FederationLinkState.LINKED: "on a federation link"})


#: the accepting end of a federation link: FedConnRqst first, nothing else. A
#: second FedConnRqst while the first is admitted is legal here; the core drops
#: it (the draft has no answer for it but the first's)
FEDERATION_ACCEPTING = _link_machine(
    FederationLinkState.AWAIT_RQST,
    {_fed.FED_CONN_RQST: FederationLinkState.AWAIT_RQST}, "FedConnRqst")

#: the connecting end: FedConnRply, or a Nack or Disconn refusing the link
FEDERATION_CONNECTING = _link_machine(
    FederationLinkState.AWAIT_RPLY,
    {_fed.FED_CONN_RPLY: FederationLinkState.AWAIT_RPLY,
     int(PacketId.NACK): FederationLinkState.CLOSED,
     int(PacketId.DISCONN): FederationLinkState.CLOSED}, "FedConnRply")
