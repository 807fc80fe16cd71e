"""The federation link's sans-IO core (elvin.federation.link_core), without a
socket or an event loop: bytes in, events out, the clock a number the test
moves. Two cores are wired back to back for the handshakes (what one sends
is framed with the real codec and fed to the other); a core alone is fed
the packets a bad peer would send."""

from __future__ import annotations

import pytest

from elvin.errors import NackCode
from elvin.federation.config import FederationConfig
from elvin.federation.link_core import (
    OFF_LOOP_BYTES,
    Acked,
    BadPullFilter,
    Close,
    ConnRplyReceived,
    ConnRqstReceived,
    DropWarned,
    Event,
    LinkCore,
    Linked,
    NotifyReceived,
    OffLoopSubReplace,
    Send,
    SubReplaceReceived,
)
from elvin.federation.packets import (
    VERSION_MAJOR,
    Ack,
    FedConnRply,
    FedConnRqst,
    FedNotify,
    FedSubReplace,
    frame_fed_packet,
)
from elvin.protocol import ConfConn, Disconn, DisconnReason, DropWarn, Nack, TestConn
from elvin.protocol.limits import DEFAULT_LIMITS
from elvin.protocol.states import (
    FEDERATION_ACCEPTING,
    FEDERATION_CONNECTING,
    FederationLinkState,
    IllegalPacket,
)

SETTINGS = FederationConfig(keepalive=10.0, request_timeout=2.0, request_retries=1,
                            max_routing=3)


def core(role: str, domain: str, now: float = 0.0) -> LinkCore:
    return LinkCore(role, domain, DEFAULT_LIMITS, SETTINGS, now)  # type: ignore[arg-type]


def sent(events: list[Event]) -> list[object]:
    return [e.packet for e in events if isinstance(e, Send)]


def deliver(events: list[Event], to: LinkCore, now: float = 0.0) -> list[Event]:
    """Frame what one core sent, feed it to the other, handle every body."""
    data = b"".join(frame_fed_packet(p) for p in sent(events))
    bodies, bad, out = to.feed(data, now)
    assert bad is None
    for body in bodies:
        out += to.handle(body)
    return out


def feed(link: LinkCore, *packets: object, now: float = 0.0) -> list[Event]:
    return deliver([Send(p) for p in packets], link, now)


def closes(events: list[Event]) -> list[Close]:
    return [e for e in events if isinstance(e, Close)]


def linked_pair() -> tuple[LinkCore, LinkCore]:
    a, b = core("connect", "a.example"), core("accept", "b.example")
    rqst = deliver(a.start(), b)
    (asked,) = [e for e in rqst if isinstance(e, ConnRqstReceived)]
    admitted = b.establish(asked.packet.router_domain, asked.packet.xid)
    replied = deliver(admitted, a)
    (rply,) = [e for e in replied if isinstance(e, ConnRplyReceived)]
    assert a.establish(rply.packet.router_domain) == [Linked("b.example")]
    return a, b


# -- the handshake ---------------------------------------------------------------------
def test_both_ends_link_through_the_handshake():
    a, b = core("connect", "a.example"), core("accept", "b.example")
    assert (a.state, b.state) == (FederationLinkState.AWAIT_RPLY, FederationLinkState.AWAIT_RQST)
    assert b.start() == []                              # the accepting end waits
    (rqst,) = sent(a.start())
    assert isinstance(rqst, FedConnRqst) and rqst.router_domain == "a.example"
    assert rqst.major_version == VERSION_MAJOR

    events = deliver(a.start(), b)                      # a second start: xid 2
    assert [type(e) for e in events] == [ConnRqstReceived]
    assert b.state is FederationLinkState.AWAIT_RQST              # admission is the shell's
    admitted = b.establish("a.example", events[0].packet.xid)
    assert isinstance(sent(admitted)[0], FedConnRply)
    assert admitted[-1] == Linked("a.example") and b.state is FederationLinkState.LINKED

    answer = deliver(admitted, a)
    assert [type(e) for e in answer] == [ConnRplyReceived] and a.answered
    assert a.state is FederationLinkState.AWAIT_RPLY               # until the shell checks the domain
    assert a.establish("b.example") == [Linked("b.example")]
    assert a.state is FederationLinkState.LINKED and a.remote_domain == "b.example" and a.established


def test_a_reply_to_another_xid_is_a_violation():
    a = core("connect", "a.example")
    a.start()
    events = feed(a, FedConnRply(99, "b.example"))
    assert "not 1" in closes(events)[0].detail
    assert closes(events)[0].kind == "violation" and a.closed and a.answered
    disconn = sent(events)[0]
    assert isinstance(disconn, Disconn) and disconn.reason == DisconnReason.PROTOCOL_ERRORS


def test_a_refusal_or_disconn_ends_the_connecting_end_without_a_word_back():
    for answer, kind in ((Nack(1, 2500, "no"), "peer-refused"),
                         (Disconn(1, ""), "peer-disconnected")):
        a = core("connect", "a.example")
        a.start()
        events = feed(a, answer)
        assert sent(events) == [] and [c.kind for c in closes(events)] == [kind]
        assert a.closed and a.answered


def test_an_incompatible_version_is_nacked_and_closed():
    b = core("accept", "b.example")
    events = feed(b, FedConnRqst(7, VERSION_MAJOR + 1, 0, "a.example"))
    (nack,) = sent(events)
    assert isinstance(nack, Nack) and nack.xid == 7
    assert nack.error == int(NackCode.PROT_INCOMPAT) and "version 2.0" in nack.message
    assert [c.kind for c in closes(events)] == ["refused"] and b.closed
    assert not any(isinstance(e, ConnRqstReceived) for e in events)


def test_the_shell_refusing_a_peer_nacks_with_what_the_peer_may_be_told():
    b = core("accept", "b.example")
    feed(b, FedConnRqst(3, VERSION_MAJOR, 0, "a.example"))
    events = b.refuse(3, 2500, "not allowed", "domain a.example is not in the list")
    assert sent(events) == [Nack(3, 2500, "not allowed")]
    assert closes(events)[0].detail == "domain a.example is not in the list"
    assert b.establish("a.example", 3) == []            # too late: closed


def test_a_handshake_not_done_by_its_deadline_closes():
    b = core("accept", "b.example")
    assert [c.detail for c in closes(b.handshake_due())] == ["FedConnRqst"]
    a, _ = linked_pair()
    assert a.handshake_due() == []                      # linked: nothing to do


# -- illegal packets, one path -----------------------------------------------------------
LINKED_ONLY = [FedNotify({"x": 1}, routing=("a.example",)), FedSubReplace(1, True), Ack(1),
               TestConn(), ConfConn(), DropWarn()]


@pytest.mark.parametrize("packet", LINKED_ONLY + [FedConnRply(1, "x"), Nack(1, 1, "")],
                         ids=lambda p: type(p).__name__)
def test_anything_but_fed_conn_rqst_first_is_a_violation(packet):
    b = core("accept", "b.example")
    events = feed(b, packet)
    (close,) = closes(events)
    assert close.kind == "violation" and close.detail.endswith("before FedConnRqst")
    assert isinstance(sent(events)[0], Disconn) and b.closed
    assert feed(b, FedConnRqst(1, 1, 0, "a.example")) == []   # closed: dropped unread


@pytest.mark.parametrize("packet", LINKED_ONLY + [FedConnRqst(1, 1, 0, "x")],
                         ids=lambda p: type(p).__name__)
def test_anything_but_an_answer_first_is_a_violation(packet):
    a = core("connect", "a.example")
    a.start()
    (close,) = closes(feed(a, packet))
    assert close.kind == "violation" and close.detail.endswith("before FedConnRply")
    assert a.answered


@pytest.mark.parametrize("packet", [FedConnRqst(5, 1, 0, "x"), FedConnRply(5, "x")],
                         ids=lambda p: type(p).__name__)
def test_a_handshake_packet_on_a_linked_link_is_a_violation(packet):
    for end in linked_pair():
        (close,) = closes(feed(end, packet))
        assert close.kind == "violation" and "on a federation link" in close.detail


def test_an_unknown_or_truncated_packet_is_a_violation():
    _, b = linked_pair()
    assert closes(b.handle((77).to_bytes(4, "big")))[0].detail == \
        "packet type 77 on a federation link"
    _, b = linked_pair()
    assert closes(b.handle(b"\x00"))[0].kind == "violation"


def test_the_tables_are_the_ones_the_core_consults():
    with pytest.raises(IllegalPacket):
        FEDERATION_ACCEPTING.receive(FederationLinkState.AWAIT_RQST, FedNotify.ID)
    assert FEDERATION_CONNECTING.receive(FederationLinkState.AWAIT_RPLY, int(Nack.ID)) is \
        FederationLinkState.CLOSED
    assert FEDERATION_ACCEPTING.receive(FederationLinkState.LINKED, int(Disconn.ID)) is FederationLinkState.CLOSED
    assert FEDERATION_ACCEPTING.legal(FederationLinkState.CLOSED, 12345)     # dropped unread


def test_a_bad_frame_header_is_reported_after_the_good_bodies_before_it():
    _, b = linked_pair()
    data = frame_fed_packet(TestConn()) + frame_fed_packet(DropWarn()) + b"\x00\x00\x00\x03xyz"
    bodies, bad, answers = b.feed(data, 0.0)
    assert sent(answers) == [ConfConn()]                 # TestConn answered at once
    assert [type(e) for body in bodies for e in b.handle(body)] == [DropWarned]
    assert bad is not None and bad.startswith("bad frame")
    assert closes(b.violate(bad))[0].kind == "violation"


# -- a linked link -----------------------------------------------------------------------
def test_fed_notify_without_the_senders_domain_is_a_violation():
    a, b = linked_pair()
    events = feed(b, FedNotify({"x": 1}, routing=("c.example",)))
    (close,) = closes(events)
    assert close.kind == "violation" and "lacks the sender's domain 'a.example'" in close.detail


def test_fed_notify_with_too_long_a_routing_list_is_a_violation():
    _, b = linked_pair()
    routing = ("a.example", "c", "d", "e")
    assert "limit 3" in closes(feed(b, FedNotify({"x": 1}, routing=routing)))[0].detail


def test_a_good_fed_notify_is_received_with_its_attribute_block():
    _, b = linked_pair()
    (event,) = feed(b, FedNotify({"x": 1}, routing=("a.example",)))
    assert isinstance(event, NotifyReceived) and event.packet.attributes == {"x": 1}
    assert event.block is not None and b.state is FederationLinkState.LINKED


def test_pull_filters_small_large_and_malformed():
    _, b = linked_pair()
    (event,) = feed(b, FedSubReplace(4, True))
    assert isinstance(event, SubReplaceReceived) and event.packet.xid == 4
    big = frame_fed_packet(FedSubReplace(5, True))[4:] + b"\x00" * OFF_LOOP_BYTES
    assert [type(e) for e in b.handle(big)] == [OffLoopSubReplace]
    bad = FedSubReplace.ID.to_bytes(4, "big") + (6).to_bytes(4, "big") + b"\xff\xff\xff\xff"
    events = b.handle(bad)
    (nack,) = sent(events)
    assert isinstance(nack, Nack) and nack.xid == 6 and nack.error == int(NackCode.PROT_ERROR)
    assert isinstance(events[-1], BadPullFilter) and not b.closed    # the old filter stays


def test_only_the_latest_pull_filter_is_acked():
    a, b = linked_pair()
    first = sent(a.send_pull_filter(True, now=0.0))[0]
    second = sent(a.send_pull_filter(False, now=0.0))[0]
    assert feed(a, Ack(first.xid)) == []
    assert feed(a, Ack(second.xid)) == [Acked(second.xid)]
    assert a.next_request_deadline is None


def test_an_unanswered_pull_filter_is_resent_then_the_link_closes():
    a, _ = linked_pair()
    (first,) = sent(a.send_pull_filter(True, now=0.0))
    assert a.next_request_deadline == 2.0
    assert a.requests_due(1.9) == []
    (again,) = sent(a.requests_due(2.0))
    assert isinstance(again, FedSubReplace) and again.xid != first.xid and again.pull_filter
    assert a.next_request_deadline == 4.0
    (close,) = closes(a.requests_due(4.0))
    assert close.kind == "request-timeout" and a.closed


def test_a_nack_of_our_request_ends_the_link_with_a_disconn():
    a, _ = linked_pair()
    a.send_pull_filter(True, now=0.0)
    events = feed(a, Nack(2, 2001, "bad"))
    assert sent(events)[0].reason == DisconnReason.SHUTDOWN
    assert closes(events)[0].kind == "rejected"


def test_the_peers_disconn_ends_the_link():
    a, _ = linked_pair()
    events = feed(a, Disconn(1, "bye"))
    assert sent(events) == [] and closes(events)[0].kind == "peer-disconnected" and a.closed


# -- keepalive ---------------------------------------------------------------------------
def test_test_conn_is_answered_and_conf_conn_ends_the_wait():
    a, b = linked_pair()
    assert sent(feed(b, TestConn())) == [ConfConn()]          # through feed's fast path
    assert sent(b.handle(frame_fed_packet(TestConn())[4:])) == [ConfConn()]
    assert a.keepalive_due(5.0) == []                          # not silent long enough
    assert sent(a.keepalive_due(10.0)) == [TestConn()] and a.test_pending
    assert feed(a, ConfConn(), now=10.5) == [] and not a.test_pending
    assert a.keepalive_due(20.0) == []                          # heard from at 10.5


def test_a_peer_silent_through_two_keepalives_is_closed():
    a, _ = linked_pair()
    assert sent(a.keepalive_due(10.0)) == [TestConn()]
    (close,) = closes(a.keepalive_due(20.0))
    assert close.kind == "silent" and a.closed
    assert a.keepalive_due(30.0) == []


def test_our_close_sends_disconn_unless_the_reason_is_zero():
    a, b = linked_pair()
    assert sent(a.close(DisconnReason.SHUTDOWN, "stopping")) == [Disconn(1, "stopping")]
    assert a.close() == []                                      # once
    assert [type(e) for e in b.close(0)] == [Close]
