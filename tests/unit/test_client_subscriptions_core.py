"""The client's sans-IO tables of subscriptions and quenches
(``elvin/client/subscriptions_core.py``).

No socket, no event loop, no session shell: the requests the tables build
go through a ``ClientSessionCore`` (which gives them xids and frames), the
test plays the router by framing its replies and notifications with the
real codec, and the ``Reply`` events that come out are handed back to the
tables. The entries are plain records with the fields ``Entry`` names, to
show that the tables need nothing else of the application's objects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from elvin.client.events import SubscriptionAdded, SubscriptionModified, SubscriptionRemoved
from elvin.client.session_core import ClientSessionCore, Reply
from elvin.client.subscriptions_core import (
    QuenchChange,
    QuenchesCore,
    SubscriptionChange,
    SubscriptionsCore,
)
from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import FrameDecoder, frame_packet
from elvin.protocol import packets as pk
from elvin.subscription import parse
from elvin.subscription.ast import Node


@dataclass(eq=False)
class Sub:
    expression: str
    accept_insecure: bool = True
    keys: Keys = EMPTY_KEYS
    ast: Node = field(init=False)
    id: int | None = None
    closed: bool = False

    def __post_init__(self) -> None:
        self.ast = parse(self.expression)


@dataclass(eq=False)
class Q:
    names: frozenset[str]
    deliver_insecure: bool = True
    keys: Keys = EMPTY_KEYS
    id: int | None = None
    closed: bool = False


def open_session() -> ClientSessionCore:
    core = ClientSessionCore()
    core.request(lambda xid: pk.ConnRqst(xid, 4, 0, {}, EMPTY_KEYS, EMPTY_KEYS))
    (reply,) = core.receive(frame_packet(pk.ConnRply(1, {})))
    assert isinstance(reply, Reply) and core.is_open
    return core


def sent(core: ClientSessionCore, make: Callable[[int], pk.Packet]) -> pk.Packet:
    """``make`` sent in ``core``: the packet as the router reads it off the wire."""
    _xid, _packet, frame = core.request(make)
    (packet,) = FrameDecoder().feed(frame)
    return packet


def answer(core: ClientSessionCore, packet: pk.Packet) -> Reply:
    (event,) = core.receive(frame_packet(packet))
    assert isinstance(event, Reply)
    return event


def test_a_subscription_is_registered_by_the_id_its_reply_names():
    session, table = open_session(), SubscriptionsCore[Sub]()
    sub = Sub("Price > 10", accept_insecure=False)
    rqst = sent(session, table.add_request(sub))
    assert rqst == pk.SubAddRqst(rqst.xid, "Price > 10", False, EMPTY_KEYS)
    reply = answer(session, pk.SubRply(rqst.xid, 77))
    assert reply.request == rqst
    assert table.registered(sub, reply.packet.subscription_id)
    assert sub.id == 77 and table.by_id == {77: sub} and table.live == [sub]


def test_a_subscription_closed_before_its_reply_is_not_kept_and_is_removed_at_the_router():
    session, table = open_session(), SubscriptionsCore[Sub]()
    sub = Sub("require(A)")
    rqst = sent(session, table.add_request(sub))
    sub.closed = True                                 # the application gave up on it
    reply = answer(session, pk.SubRply(rqst.xid, 5))
    assert not table.registered(sub, reply.packet.subscription_id)
    assert table.live == [] and table.by_id == {}
    assert sent(session, table.delete_request(5)) == pk.SubDelRqst(rqst.xid + 1, 5)


def test_a_modification_changes_the_subscription_only_when_its_reply_comes():
    session, table = open_session(), SubscriptionsCore[Sub]()
    sub = Sub("require(A)")
    table.bind(sub, 3, add=True)
    change = SubscriptionChange("require(B)", parse("require(B)"), False, EMPTY_KEYS,
                                EMPTY_KEYS)
    rqst = sent(session, table.modify_request(3, change))
    assert rqst == pk.SubModRqst(rqst.xid, 3, "require(B)", False, EMPTY_KEYS, EMPTY_KEYS)
    assert sub.expression == "require(A)" and sub.accept_insecure
    table.modified(sub, change, answer(session, pk.SubRply(rqst.xid, 4)).packet)
    assert (sub.expression, sub.accept_insecure, sub.id) == ("require(B)", False, 4)
    assert table.by_id == {4: sub}                    # the old id no longer finds it


def test_a_modification_without_an_expression_sends_an_empty_one_and_keeps_the_old():
    session, table = open_session(), SubscriptionsCore[Sub]()
    sub = Sub("require(A)")
    table.bind(sub, 3, add=True)
    change = SubscriptionChange(None, None, True, EMPTY_KEYS, EMPTY_KEYS)
    rqst = sent(session, table.modify_request(3, change))
    assert isinstance(rqst, pk.SubModRqst) and rqst.expression == ""
    table.modified(sub, change, answer(session, pk.SubRply(rqst.xid, 3)).packet)
    assert sub.expression == "require(A)" and table.by_id == {3: sub}


def test_a_delivery_goes_to_the_named_subscriptions_a_secure_match_winning():
    session, table = open_session(), SubscriptionsCore[Sub]()
    a, b, c = Sub("require(X)"), Sub("require(X)"), Sub("require(X)")
    for number, sub in enumerate((a, b, c), 1):
        table.bind(sub, number, add=True)
    events = session.receive(frame_packet(pk.NotifyDeliver({"X": 1}, (2,), (1, 2, 9))))
    (delivery,) = events
    assert isinstance(delivery, pk.NotifyDeliver)
    pushed: list[tuple[Sub, dict, bool]] = []
    table.deliver(delivery, lambda sub, attributes, secure: pushed.append(
        (sub, attributes, secure)))
    assert pushed == [(b, {"X": 1}, True), (a, {"X": 1}, False)]   # 9 nobody's, c unnamed


def test_a_new_session_voids_every_id_and_registers_the_open_ones_again_in_order():
    table = SubscriptionsCore[Sub]()
    first, closed, last = Sub("require(A)"), Sub("require(B)"), Sub("require(C)")
    for number, sub in enumerate((first, closed, last), 1):
        table.bind(sub, number, add=True)
    table.closing(closed)
    assert table.forget_ids() == [first, last]
    assert table.by_id == {} and first.id is None and last.id is None
    session = open_session()
    for number, sub in enumerate(table.live, 10):
        rqst = sent(session, table.add_request(sub))
        assert table.registered(sub, answer(session, pk.SubRply(rqst.xid, number)).packet
                                .subscription_id)
    assert table.by_id == {10: first, 11: last}
    assert table.clear() == [first, last] and table.live == [] and table.by_id == {}


def test_quench_events_before_the_qnchrply_are_held_for_it():
    session, table = open_session(), QuenchesCore[Q]()
    quench = Q(frozenset({"B", "A"}))
    table.asked()
    rqst = sent(session, table.add_request(quench))
    assert rqst == pk.QnchAddRqst(rqst.xid, ("A", "B"), True, EMPTY_KEYS)
    ast = parse("A > 1")
    # the router reports what exists before its QnchRply (see connection.py)
    (early,) = session.receive(frame_packet(pk.SubAddNotify((), (8,), 40, ast)))
    assert table.notified(early) == ([], [])          # held, not for nobody
    reply = answer(session, pk.QnchRply(rqst.xid, 8))
    held = table.held(reply.packet.quench_id)
    assert table.registered(quench, 8) and quench.id == 8
    assert held == [SubscriptionAdded(40, ast, False)]
    table.answered()
    assert table.early == {} and table.asking == 0


def test_quench_events_for_unknown_ids_are_for_nobody_when_no_request_is_out():
    table = QuenchesCore[Q]()
    quench = Q(frozenset({"A"}))
    table.bind(quench, 1, add=True)
    ast = parse("A > 1")
    packet = pk.SubModNotify((1,), (1, 2), 40, ast)
    assert table.notified(packet) == ([(quench, SubscriptionModified(40, ast, True))], [2])
    assert table.early == {}
    assert table.notified(pk.SubDelNotify((2, 1), 40)) == (
        [(quench, SubscriptionRemoved(40))], [2])


def test_what_is_held_goes_when_the_last_quench_request_is_over():
    table = QuenchesCore[Q]()
    table.asked()
    table.asked()
    table.notified(pk.SubDelNotify((5,), 1))
    table.answered()
    assert table.early == {5: [SubscriptionRemoved(1)]}   # one request is still out
    table.answered()
    assert table.early == {}


def test_a_quench_modification_applies_its_change_and_hands_over_what_was_held():
    session, table = open_session(), QuenchesCore[Q]()
    quench = Q(frozenset({"A", "B"}))
    table.bind(quench, 2, add=True)
    change = QuenchChange(("C",), ("A",), False, EMPTY_KEYS, EMPTY_KEYS)
    table.asked()
    rqst = sent(session, table.modify_request(2, change))
    assert rqst == pk.QnchModRqst(rqst.xid, 2, ("C",), ("A",), False, EMPTY_KEYS, EMPTY_KEYS)
    ast = parse("C == 1")
    table.notified(pk.SubAddNotify((3,), (), 9, ast))   # for the id the reply will name
    held = table.modified(quench, change, answer(session, pk.QnchRply(rqst.xid, 3)).packet)
    assert held == [SubscriptionAdded(9, ast, True)]
    assert quench.names == {"B", "C"} and not quench.deliver_insecure
    assert quench.id == 3 and table.by_id == {3: quench}
    assert sent(session, table.delete_request(3)) == pk.QnchDelRqst(rqst.xid + 1, 3)
