"""The client's sans-IO session core (``elvin/client/session_core.py``) and its table.

No socket, no event loop: the test plays the router by framing packets
with the real codec and feeding the bytes to ``ClientSessionCore.receive``,
and reads what the client would write by decoding ``request``'s frames.
Each test shows one rule of the ``CLIENT`` table
(``elvin/protocol/states.py``) or of matching replies to requests.
"""

from __future__ import annotations

import struct

import pytest

from elvin.client.session_core import BadPacket, ClientSessionCore, Reply, Violation
from elvin.protocol import FrameDecoder, frame_packet
from elvin.protocol import packets as pk
from elvin.protocol.packets import PacketId
from elvin.protocol.states import (
    CLIENT,
    CLIENT_LIFECYCLE,
    ClientLifecycle,
    ClientState,
    IllegalEvent,
)

#: what a router sends a client (spec 7.4): everything else is the client's to send
ROUTER_SENDS = {PacketId.NACK, PacketId.CONN_RPLY, PacketId.DISCONN_RPLY, PacketId.DISCONN,
                PacketId.SEC_RPLY, PacketId.NOTIFY_DELIVER, PacketId.SUB_RPLY,
                PacketId.DROP_WARN, PacketId.TEST_CONN, PacketId.CONF_CONN,
                PacketId.QOS_RPLY, PacketId.QNCH_RPLY, PacketId.SUB_ADD_NOTIFY,
                PacketId.SUB_MOD_NOTIFY, PacketId.SUB_DEL_NOTIFY}


def router(*packets: pk.Packet) -> bytes:
    """What a router writes: the packets framed, back to back."""
    return b"".join(frame_packet(p) for p in packets)


def sent(frame: bytes) -> pk.Packet:
    """The one packet a frame of the client's holds."""
    (packet,) = FrameDecoder().feed(frame)
    return packet


def connecting() -> tuple[ClientSessionCore, int]:
    """A core that has sent its ConnRqst, and that request's xid."""
    core = ClientSessionCore()
    xid, packet, frame = core.request(pk.ConnRqst)
    assert sent(frame) == packet == pk.ConnRqst(xid)
    return core, xid


def opened() -> ClientSessionCore:
    core, xid = connecting()
    core.receive(router(pk.ConnRply(xid, {"Vendor": "test"})))
    assert core.state is ClientState.OPEN
    return core


def test_conn_rqst_then_conn_rply_opens_the_session_and_the_reply_names_its_request():
    core, xid = connecting()
    assert core.state is ClientState.CONNECTING and not core.is_open
    (event,) = core.receive(router(pk.ConnRply(xid, {"a": 1})))
    assert event == Reply(xid, pk.ConnRqst(xid), pk.ConnRply(xid, {"a": 1}))
    assert core.is_open and core.pending == {}


def test_a_packet_before_the_conn_rqst_is_a_violation_and_closes_the_session():
    core = ClientSessionCore()
    events = core.receive(router(pk.TestConn(), pk.ConfConn()))
    assert events == [Violation("TEST_CONN from the router before the client's ConnRqst")]
    assert core.state is ClientState.CLOSED


def test_a_delivery_before_the_conn_rply_is_a_violation():
    core, _xid = connecting()
    (event,) = core.receive(router(pk.NotifyDeliver({"a": 1}, (1,))))
    assert isinstance(event, Violation)
    assert event.reason == "NOTIFY_DELIVER from the router before its ConnRply"


def test_a_second_conn_rply_is_a_violation_and_nothing_after_it_is_looked_at():
    core = opened()
    events = core.receive(router(pk.ConnRply(7), pk.NotifyDeliver({"a": 1}, (1,))))
    assert events == [Violation("CONN_RPLY is not a packet a router sends in an open session")]
    assert core.receive(router(pk.NotifyDeliver({"a": 2}, (1,)))) == []


def test_a_refused_conn_rqst_closes_the_session():
    core, xid = connecting()
    nack = pk.Nack(xid, 2001, "no", ())
    assert core.receive(router(nack)) == [Reply(xid, pk.ConnRqst(xid), nack)]
    assert core.state is ClientState.CLOSED
    assert core.receive(router(pk.Disconn(1))) == []   # dropped unread


def test_a_redirect_while_connecting_is_handed_on_and_ends_the_session():
    core, _xid = connecting()
    disconn = pk.Disconn(pk.DisconnReason.REDIRECT, "elvin://elsewhere:2917")
    assert core.receive(router(disconn)) == [disconn]
    assert core.state is ClientState.CLOSED


def test_an_open_session_hands_on_deliveries_and_notifications_in_order():
    core = opened()
    packets = [pk.NotifyDeliver({"a": 1}, (1,)), pk.TestConn(), pk.DropWarn(),
               pk.SubDelNotify((5,), 9), pk.NotifyDeliver({"a": 2}, (), (1,))]
    assert core.receive(router(*packets)) == packets


def test_replies_find_their_requests_whatever_their_order():
    core = opened()
    first, _, _ = core.request(lambda xid: pk.SubAddRqst(xid, "a == 1"))
    second, _, _ = core.request(lambda xid: pk.QosRqst(xid, {}))
    events = core.receive(router(pk.QosRply(second, {}), pk.SubRply(first, 42)))
    assert events == [Reply(second, pk.QosRqst(second, {}), pk.QosRply(second, {})),
                      Reply(first, pk.SubAddRqst(first, "a == 1"), pk.SubRply(first, 42))]
    assert core.pending == {}


def test_a_reply_to_no_request_says_so():
    core = opened()
    assert core.receive(router(pk.SubRply(99, 1))) == [Reply(99, None, pk.SubRply(99, 1))]


def test_xids_skip_those_still_pending_and_wrap_without_zero():
    core = opened()
    core._xid = 0xFFFFFFFE
    high, _, _ = core.request(pk.DisconnRqst)
    assert high == 0xFFFFFFFF
    core.pending[1] = pk.SecRqst(1)
    after, _, _ = core.request(lambda xid: pk.QosRqst(xid, {}))
    assert after == 2


def test_disconnecting_still_takes_replies_and_deliveries_then_the_disconn_rply_closes():
    core = opened()
    sub, _, _ = core.request(lambda xid: pk.SubAddRqst(xid, "a == 1"))
    bye, _, _ = core.request(pk.DisconnRqst)
    assert core.state is ClientState.DISCONNECTING and not core.is_open
    events = core.receive(router(pk.SubRply(sub, 3), pk.NotifyDeliver({"a": 1}, (3,)),
                                 pk.DisconnRply(bye)))
    assert [type(e) for e in events] == [Reply, pk.NotifyDeliver, Reply]
    assert core.state is ClientState.CLOSED


def test_a_disconn_ends_an_open_session_and_is_handed_on():
    core = opened()
    disconn = pk.Disconn(pk.DisconnReason.SHUTDOWN)
    assert core.receive(router(disconn, pk.TestConn())) == [disconn]
    assert core.state is ClientState.CLOSED


def test_a_frame_split_across_reads_comes_out_once_whole():
    core = opened()
    data = router(pk.NotifyDeliver({"text": "x" * 100}, (1,)))
    assert core.receive(data[:7]) == []
    assert core.receive(data[7:]) == [pk.NotifyDeliver({"text": "x" * 100}, (1,))]


def test_an_undecodable_body_is_dropped_and_the_session_goes_on():
    core = opened()
    bad = struct.pack(">II", 4, 999)   # a packet type no one knows, in a good frame
    good = pk.NotifyDeliver({"a": 1}, (1,))
    events = core.receive(router(pk.TestConn()) + bad + router(good))
    assert events[0] == pk.TestConn() and isinstance(events[1], BadPacket)
    assert events[2:] == [good] and core.is_open


def test_a_broken_stream_is_a_violation_with_the_decoders_error():
    core = opened()
    (event,) = core.receive(struct.pack(">I", 7) + b"\0" * 8)  # a length not a multiple of 4
    assert isinstance(event, Violation) and event.error is not None
    assert core.state is ClientState.CLOSED


def test_losing_the_channel_closes_the_session_and_returns_the_unanswered():
    core = opened()
    xid, packet, _ = core.request(lambda xid: pk.SubAddRqst(xid, "b == 2"))
    assert core.lost() == [(xid, packet)]
    assert core.state is ClientState.CLOSED and core.pending == {}
    assert core.lost() == []   # idempotent


def test_a_second_conn_rqst_is_a_bug_of_the_client_not_the_routers():
    core = opened()
    with pytest.raises(IllegalEvent):
        core.request(pk.ConnRqst)


# -- the table itself ---------------------------------------------------------------------
@pytest.mark.parametrize("state", [ClientState.OPEN, ClientState.DISCONNECTING])
def test_a_session_takes_every_router_packet_but_conn_rply_and_no_client_packet(state):
    open_only = ROUTER_SENDS - {PacketId.CONN_RPLY}
    if state is ClientState.OPEN:
        open_only -= {PacketId.DISCONN_RPLY}   # only after DisconnRqst
    for packet_id in PacketId:
        assert CLIENT.legal(state, packet_id) == (packet_id in open_only), packet_id.name


def test_every_state_ends_when_the_channel_is_lost():
    for state in ClientState:
        assert CLIENT.event(state, "lost") is ClientState.CLOSED


def test_the_lifecycle_words_are_the_public_states_of_a_connection():
    assert {s.value for s in ClientLifecycle} == {"connecting", "open", "reconnecting",
                                                  "closing", "closed"}
    assert CLIENT_LIFECYCLE.event(ClientLifecycle.OPEN, "lost") is ClientLifecycle.RECONNECTING
    with pytest.raises(IllegalEvent):
        CLIENT_LIFECYCLE.event(ClientLifecycle.CLOSED, "reconnected")
