"""The client's tables of subscriptions and quenches, sans-IO.

Beside ``session_core.ClientSessionCore`` (one session's packets), these
are the protocol of what the router knows by an id it chose: which request
registers, changes or removes an object (SubAddRqst, SubModRqst, SubDelRqst,
QnchAddRqst, QnchModRqst, QnchDelRqst), what each reply does to the table
(the object's new id, its new expression, names or keys), which objects a
NotifyDeliver or a SubAdd/Mod/DelNotify is for (a delivery is handed to a
callback of the shell's, the rest returned as events), and what a new session
registers again (every open object, with its id void). No socket, future,
session or clock: a request is returned as ``make(xid)`` for the shell to
send, a reply is handed in once it came, and what the router said is
returned as the objects and events it concerns.

The asyncio shells (``registry.Registry``, ``subscription.SubscriptionTable``,
``quench.QuenchTable``) send those requests in a session, await their
replies and end or feed the application's objects (whose event streams are
asyncio's); ``tests/unit/test_client_subscriptions_core.py`` drives these
tables alone, packet by packet.

The objects are the application's own (``Subscription``, ``Quench``): a
table reads and sets the fields named by ``Entry`` and its two refinements,
and nothing else of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, Protocol, TypeVar

from elvin.client.events import (
    QuenchEvent,
    SubscriptionAdded,
    SubscriptionModified,
    SubscriptionRemoved,
)
from elvin.keys import Keys
from elvin.protocol import packets as pk
from elvin.subscription.ast import Node
from elvin.values import Value

__all__ = ["Entry", "IdTable", "QuenchChange", "QuenchEntry", "QuenchesCore",
           "SubscriptionChange", "SubscriptionEntry", "SubscriptionsCore"]


class Entry(Protocol):
    """What a table knows of one of its objects: the router's id in the
    current session (None while not registered) and whether the
    application closed it."""

    id: int | None
    closed: bool


class SubscriptionEntry(Entry, Protocol):
    expression: str
    ast: Node
    keys: Keys
    accept_insecure: bool


class QuenchEntry(Entry, Protocol):
    names: frozenset[str]
    keys: Keys
    deliver_insecure: bool


T = TypeVar("T", bound=Entry)
S = TypeVar("S", bound=SubscriptionEntry)
Q = TypeVar("Q", bound=QuenchEntry)


class IdTable(Generic[T]):
    """A connection's open objects of one kind, in creation order, and the
    current router id of each (how an incoming packet finds its object).

    The objects outlive the ids: a new session voids every id
    (``forget_ids``) and the same objects are registered again."""

    __slots__ = ("by_id", "live")

    #: the request that removes one at the router: ``delete(xid, id)``
    delete: Callable[[int, int], pk.Packet]
    #: the reply to register, modify and delete requests
    reply: type

    def __init__(self) -> None:
        self.by_id: dict[int, T] = {}
        self.live: list[T] = []   # open ones, in creation order

    def bind(self, obj: T, new_id: int, add: bool = False) -> None:
        """The router now knows ``obj`` as ``new_id`` (a reply arrived);
        ``add``: a registration, which makes ``obj`` one of the open ones."""
        if add and obj not in self.live:
            self.live.append(obj)
        self.unbind(obj, obj.id)
        obj.id = new_id
        self.by_id[new_id] = obj

    def unbind(self, obj: T, old_id: int | None) -> None:
        """``old_id`` no longer names ``obj`` (if it did)."""
        if old_id is not None and self.by_id.get(old_id) is obj:
            del self.by_id[old_id]

    def registered(self, obj: T, new_id: int) -> bool:
        """A registration's reply: the router knows ``obj`` as ``new_id``.
        True if ``obj`` is now one of the open ones; False if the
        application closed it meanwhile (while a reconnection restored it,
        or before its first reply came, when closing could not tell the
        router): then the shell sends ``delete_request(new_id)``, so that
        nothing piles up for a closed object and no reconnection restores it."""
        if obj.closed:
            return False
        self.bind(obj, new_id, add=True)
        return True

    def delete_request(self, obj_id: int) -> Callable[[int], pk.Packet]:
        """``make(xid)`` of the request that removes ``obj_id`` at the router."""
        delete = self.delete
        return lambda xid: delete(xid, obj_id)

    def closing(self, obj: T) -> None:
        """The application closes ``obj``: it is no longer one of the open
        ones (its id stays bound until the router's reply, or ``unbind``)."""
        if obj in self.live:
            self.live.remove(obj)

    def discard(self, obj: T) -> None:
        """``obj`` can no longer be registered: out of the table (the shell ends it)."""
        if obj in self.live:
            self.live.remove(obj)
        self.unbind(obj, obj.id)

    def forget_ids(self) -> list[T]:
        """A new session: every id is void. Returns the objects to register
        again, in creation order."""
        self.by_id.clear()
        for obj in self.live:
            obj.id = None
        return list(self.live)

    def clear(self) -> list[T]:
        """The connection is closed: the table empties. Returns the objects
        that were open, for the shell to end."""
        live = self.live
        self.live = []
        self.by_id.clear()
        return live


class SubscriptionChange(NamedTuple):
    """What a SubModRqst asks: a new expression (None: the same), the
    accept-insecure flag it will have, and the keys added and removed."""

    expression: str | None
    ast: Node | None
    accept_insecure: bool
    keys_add: Keys
    keys_del: Keys


class SubscriptionsCore(IdTable[S]):
    """The subscriptions' table: SubAddRqst, SubModRqst, SubDelRqst and
    their SubRply, and the subscriptions each NotifyDeliver names."""

    __slots__ = ()

    delete = pk.SubDelRqst
    reply = pk.SubRply

    @staticmethod
    def add_request(sub: S) -> Callable[[int], pk.SubAddRqst]:
        """``make(xid)`` of the SubAddRqst that registers ``sub`` (new, or restored)."""
        return lambda xid: pk.SubAddRqst(xid, sub.expression, sub.accept_insecure, sub.keys)

    @staticmethod
    def modify_request(old_id: int, change: SubscriptionChange) -> Callable[[int], pk.SubModRqst]:
        """``make(xid)`` of the SubModRqst that applies ``change`` to the
        subscription the router knows as ``old_id``."""
        return lambda xid: pk.SubModRqst(xid, old_id, change.expression or "",
                                         change.accept_insecure, change.keys_add,
                                         change.keys_del)

    def modified(self, sub: S, change: SubscriptionChange, reply: pk.SubRply) -> None:
        """The SubRply to a SubModRqst: ``sub`` is as ``change`` says, under
        the id the reply names."""
        self.bind(sub, reply.subscription_id)
        if change.expression is not None and change.ast is not None:
            sub.expression, sub.ast = change.expression, change.ast
        sub.keys = (sub.keys | change.keys_add) - change.keys_del
        sub.accept_insecure = change.accept_insecure

    def deliver(self, packet: pk.NotifyDeliver,
                push: Callable[[S, dict[str, Value], bool], object]) -> None:
        """``push(sub, attributes, secure)`` for each subscription ``packet``
        names, with whether it matched securely (a secure match wins over an
        insecure one for the same subscription); ids this table does not know
        are skipped. A callback, not a list of events: this is most of a
        subscriber's traffic, and a list of them cost each hand-over 0.3-0.5 us
        more (about half as much again, by timeit)."""
        by_id = self.by_id
        attributes = packet.attributes
        secure = packet.secure_matches
        for sub_id in secure:
            sub = by_id.get(sub_id)
            if sub is not None:
                push(sub, attributes, True)
        for sub_id in packet.insecure_matches:
            sub = by_id.get(sub_id)
            if sub is not None and (not secure or sub_id not in secure):
                push(sub, attributes, False)


class QuenchChange(NamedTuple):
    """What a QnchModRqst asks: names added and removed, the
    deliver-insecure flag it will have, and the keys added and removed."""

    add: tuple[str, ...]
    remove: tuple[str, ...]
    deliver_insecure: bool
    keys_add: Keys
    keys_del: Keys


class QuenchesCore(IdTable[Q]):
    """The quenches' table: QnchAddRqst, QnchModRqst, QnchDelRqst and their
    QnchRply, and the quenches each SubAdd/Mod/DelNotify is for.

    Until a quench's reply arrives its id is unknown here, so the events of
    a notification addressed to an unknown quench id are held while any
    quench request is outstanding (``asking``) and handed over when the
    QnchRply names that id (the router reports existing subscriptions
    *before* the QnchRply; see ``connection.py``)."""

    __slots__ = ("asking", "early")

    delete = pk.QnchDelRqst
    reply = pk.QnchRply

    def __init__(self) -> None:
        super().__init__()
        #: quench requests sent and not yet answered or given up
        self.asking = 0
        #: events for quench ids not known yet, by id, while ``asking``
        self.early: dict[int, list[QuenchEvent]] = {}

    def asked(self) -> None:
        """A QnchAddRqst or QnchModRqst goes out: hold events for unknown ids."""
        self.asking += 1

    def answered(self) -> None:
        """That request is over (answered, refused or given up); when none
        is left, what is still held is for nobody and goes."""
        self.asking -= 1
        if not self.asking:
            self.early.clear()

    @staticmethod
    def add_request(quench: Q) -> Callable[[int], pk.QnchAddRqst]:
        """``make(xid)`` of the QnchAddRqst that registers ``quench``."""
        return lambda xid: pk.QnchAddRqst(xid, tuple(sorted(quench.names)),
                                          quench.deliver_insecure, quench.keys)

    @staticmethod
    def modify_request(old_id: int, change: QuenchChange) -> Callable[[int], pk.QnchModRqst]:
        """``make(xid)`` of the QnchModRqst that applies ``change`` to the
        quench the router knows as ``old_id``."""
        return lambda xid: pk.QnchModRqst(xid, old_id, change.add, change.remove,
                                          change.deliver_insecure, change.keys_add,
                                          change.keys_del)

    def held(self, quench_id: int) -> list[QuenchEvent]:
        """The events held for ``quench_id`` until its QnchRply, which just
        came: handed over once (the shell applies them if the quench is kept)."""
        return self.early.pop(quench_id, [])

    def modified(self, quench: Q, change: QuenchChange,
                 reply: pk.QnchRply) -> list[QuenchEvent]:
        """The QnchRply to a QnchModRqst: ``quench`` is as ``change`` says,
        under the id the reply names; the events held for that id, to apply."""
        quench.names = (quench.names | frozenset(change.add)) - frozenset(change.remove)
        quench.keys = (quench.keys | change.keys_add) - change.keys_del
        quench.deliver_insecure = change.deliver_insecure
        self.bind(quench, reply.quench_id)
        return self.held(reply.quench_id)

    def notified(self, packet: pk.SubAddNotify | pk.SubModNotify | pk.SubDelNotify
                 ) -> tuple[list[tuple[Q, QuenchEvent]], list[int]]:
        """A subscription term appeared, changed or went: the event for each
        known quench it names, in the packet's order (a secure match wins),
        and the ids nobody knows or waits for (held, when a quench request
        is outstanding, for its reply)."""
        targets: list[tuple[int, QuenchEvent]]
        if isinstance(packet, pk.SubDelNotify):
            targets = [(qid, SubscriptionRemoved(packet.term_id)) for qid in packet.quench_ids]
        else:
            cls = SubscriptionAdded if isinstance(packet, pk.SubAddNotify) \
                else SubscriptionModified
            targets = [(qid, cls(packet.term_id, packet.sub_expr, True))
                       for qid in packet.secure_quench_ids]
            targets += [(qid, cls(packet.term_id, packet.sub_expr, False))
                        for qid in packet.insecure_quench_ids
                        if qid not in packet.secure_quench_ids]
        found: list[tuple[Q, QuenchEvent]] = []
        unknown: list[int] = []
        for qid, event in targets:
            quench = self.by_id.get(qid)
            if quench is not None:
                found.append((quench, event))
            elif self.asking:
                # the QnchRply that names this id has not arrived yet
                self.early.setdefault(qid, []).append(event)
            else:
                unknown.append(qid)
        return found, unknown
