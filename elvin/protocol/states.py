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
from enum import Enum

__all__ = [
    "ANY_PACKET",
    "FEDERATION_ACCEPTING",
    "FEDERATION_CONNECTING",
    "IllegalEvent",
    "IllegalPacket",
    "FederationLinkState",
    "Machine",
    "Role",
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
# (filled in by the router session; see elvin.router.session_core)

# -- the client's end (spec 5, 7) ---------------------------------------------------------
# (filled in by the client core; see elvin.client)

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

from enum import StrEnum  # noqa: E402 - this section's own imports

from elvin.protocol import federation_ids as _fed  # noqa: E402
from elvin.protocol.packets import PacketId as _PacketId  # noqa: E402


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
    int(_PacketId.NACK): FederationLinkState.LINKED,        # our FedSubReplace refused: the core closes
    int(_PacketId.TEST_CONN): FederationLinkState.LINKED,
    int(_PacketId.CONF_CONN): FederationLinkState.LINKED,
    int(_PacketId.DROP_WARN): FederationLinkState.LINKED,
    int(_PacketId.DISCONN): FederationLinkState.CLOSED,
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
    int(_PacketId.NACK): "Nack", int(_PacketId.DISCONN): "Disconn",
    int(_PacketId.TEST_CONN): "TestConn", int(_PacketId.CONF_CONN): "ConfConn",
    int(_PacketId.DROP_WARN): "DropWarn",
}

#: the accepting end of a federation link: FedConnRqst first, nothing else
FEDERATION_ACCEPTING = Machine(
    role=Role.FEDERATION_LINK,
    initial=FederationLinkState.AWAIT_RQST,
    received={
        # a second FedConnRqst while the first is admitted is legal here; the
        # core drops it (the draft has no answer for it but the first's)
        FederationLinkState.AWAIT_RQST: {_fed.FED_CONN_RQST: FederationLinkState.AWAIT_RQST},
        FederationLinkState.LINKED: _LINKED_TAKES,
    },
    events=_LINK_EVENTS,
    ignored=frozenset({FederationLinkState.CLOSED}),
    names=_LINK_NAMES,
    refusals={FederationLinkState.AWAIT_RQST: "before FedConnRqst",
              FederationLinkState.LINKED: "on a federation link"},
)

#: the connecting end: FedConnRply, or a Nack or Disconn refusing the link
FEDERATION_CONNECTING = Machine(
    role=Role.FEDERATION_LINK,
    initial=FederationLinkState.AWAIT_RPLY,
    received={
        FederationLinkState.AWAIT_RPLY: {_fed.FED_CONN_RPLY: FederationLinkState.AWAIT_RPLY,
                               int(_PacketId.NACK): FederationLinkState.CLOSED,
                               int(_PacketId.DISCONN): FederationLinkState.CLOSED},
        FederationLinkState.LINKED: _LINKED_TAKES,
    },
    events=_LINK_EVENTS,
    ignored=frozenset({FederationLinkState.CLOSED}),
    names=_LINK_NAMES,
    refusals={FederationLinkState.AWAIT_RPLY: "before FedConnRply",
              FederationLinkState.LINKED: "on a federation link"},
)
