"""Quenches: learning which subscriptions refer to some attribute names.

``Quench`` is the application's object; ``QuenchTable`` is the connection's
table of them, which registers them at the router (again after each
reconnection), changes them, and applies the router's SubAddNotify,
SubModNotify and SubDelNotify to the quenches they name.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from elvin.client.args import keys_arg, names_arg
from elvin.client.core import ClientCore
from elvin.client.errors import ConnectionClosedError, QuenchNotSupported
from elvin.client.events import (
    QuenchEvent,
    SubscriptionAdded,
    SubscriptionModified,
    SubscriptionRemoved,
)
from elvin.client.registry import Registered, Registry
from elvin.client.session import Session
from elvin.client.subscriptions_core import QuenchChange, QuenchesCore
from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import packets as pk
from elvin.subscription.ast import Node

if TYPE_CHECKING:
    from elvin.quenching import Wanted

log = logging.getLogger("elvin.client")

__all__ = ["Quench", "QuenchTerm"]

DEFAULT_BUFFER = 1000

_UNSET = object()


@dataclass
class QuenchTerm:
    """One subscription term the router reported: its AST, whether it matched
    the quench securely, and (lazily) its compiled evaluator."""

    term_id: int
    ast: Node
    secure: bool
    _compiled: object = field(default=_UNSET, repr=False, compare=False)
    _required: frozenset | None = field(default=None, repr=False, compare=False)

    def evaluator(self):
        """The compiled subscription, or None if it cannot be compiled (then
        it must be assumed to match anything)."""
        if self._compiled is _UNSET:
            from elvin.subscription import compile as compile_subscription
            try:
                self._compiled = compile_subscription(self.ast)
            except Exception:  # noqa: BLE001 - the router's tree: unknown means may match
                self._compiled = None
        return self._compiled

    @property
    def required_names(self) -> frozenset:
        """The attribute names a notification must hold for this term to match it (empty
        when that cannot be worked out).
        """
        if self._required is None:
            try:
                from elvin.subscription import required_names
                self._required = frozenset(required_names(self.ast))
            except Exception:  # noqa: BLE001 - the router's tree: no names known
                self._required = frozenset()
        return self._required

    def could_match(self, attributes) -> bool:
        """Could a notification with exactly these attributes match this term?"""
        if not self.required_names <= attributes.keys():
            return False
        compiled = self.evaluator()
        if compiled is None:
            return True
        try:
            return compiled.evaluate(attributes) is True
        except Exception:  # noqa: BLE001 - an evaluation failure: may match
            return True


class Quench(Registered[QuenchEvent]):
    """A quench registered with the router (QnchAddRqst).

    ``subscriptions`` is the current ``{term_id: ast}`` of the subscription
    terms referring to ``names``; ``terms`` has the full :class:`QuenchTerm`
    records (with the ``secure`` flag). Changes arrive as
    ``SubscriptionAdded`` / ``SubscriptionModified`` / ``SubscriptionRemoved``
    events through iteration (``async for event in q``), ``await q.get()`` or
    listeners (``q.add_listener(fn)``). The analysis helpers of
    ``elvin.quenching`` take ``q.subscriptions`` directly.

    After a reconnection the router's term ids change: the quench reports
    ``SubscriptionRemoved`` for every old term, then ``SubscriptionAdded`` for
    the terms of the new session.
    """

    _table: QuenchTable

    def __init__(self, table: QuenchTable, names: Iterable[str], keys: Keys,
                 deliver_insecure: bool, buffer_size: int = DEFAULT_BUFFER, *,
                 internal: bool = False) -> None:
        super().__init__(table, buffer_size, "quench")
        self.names: frozenset[str] = frozenset(names)
        self.keys = keys
        self.deliver_insecure = deliver_insecure
        self.terms: dict[int, QuenchTerm] = {}
        #: counts changes to ``terms`` (for caches of analyses of them)
        self.version = 0
        #: the connection's own (auto-quench), not listed in ``Connection.quenches``
        self._internal = internal

    # -- events from the table ---------------------------------------------------
    def _apply(self, event: QuenchEvent) -> None:
        if isinstance(event, SubscriptionRemoved):
            if self.terms.pop(event.term_id, None) is None:
                return
        elif isinstance(event, SubscriptionAdded) and event.term_id in self.terms:
            event = SubscriptionModified(event.term_id, event.ast, event.secure)
            self.terms[event.term_id] = QuenchTerm(event.term_id, event.ast, event.secure)
        elif isinstance(event, SubscriptionModified) and event.term_id not in self.terms:
            event = SubscriptionAdded(event.term_id, event.ast, event.secure)
            self.terms[event.term_id] = QuenchTerm(event.term_id, event.ast, event.secure)
        else:
            self.terms[event.term_id] = QuenchTerm(event.term_id, event.ast, event.secure)
        self.version += 1
        self._stream.push(event)

    def _reset(self) -> None:
        """Forget every term (reconnection): report each as removed."""
        for term_id in list(self.terms):
            self._apply(SubscriptionRemoved(term_id))

    # -- application API -------------------------------------------------------
    @property
    def subscriptions(self) -> dict[int, Node]:
        """The subscription terms this quench knows of now, by term id, each as its parsed
        expression (AST).
        """
        return {tid: term.ast for tid, term in self.terms.items()}

    def wanted(self, attribute: str) -> Wanted:
        """The values of ``attribute`` some current subscription can match
        (``elvin.quenching.wanted`` over ``subscriptions``): exact values,
        prefixes, numeric intervals; ``wanted(...).matches(85)`` is False
        when nobody can match 85. An over-approximation, never an under-."""
        from elvin.quenching import wanted
        return wanted(self.subscriptions.values(), attribute)

    async def modify(self, add: Iterable[str] = (), remove: Iterable[str] = (), *,
                     keys_add: Keys | None = None, keys_del: Keys | None = None,
                     deliver_insecure: bool | None = None) -> None:
        """Add or remove attribute names (and keys) with QnchModRqst."""
        await self._table.modify(self, tuple(add), tuple(remove), keys_add or EMPTY_KEYS,
                                 keys_del or EMPTY_KEYS, deliver_insecure)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"id={self.id}"
        return f"<Quench {state} {sorted(self.names)} terms={len(self.terms)}>"


class QuenchTable(Registry[Quench]):
    """A connection's quenches, by their router ids: the asyncio shell of
    ``subscriptions_core.QuenchesCore``, which also holds the events for
    quench ids whose QnchRply has not come yet (the router reports existing
    subscriptions *before* the QnchRply; see ``connection.py``)."""

    ids: QuenchesCore[Quench]

    def __init__(self, core: ClientCore, connection: Any) -> None:
        super().__init__(core, connection, QuenchesCore())

    @property
    def public(self) -> list[Quench]:
        """The application's quenches (not auto-quench's own)."""
        return [q for q in self.live if not q._internal]

    @contextlib.contextmanager
    def _outstanding(self) -> Iterator[None]:
        """Around a request whose QnchRply names a quench: events for ids
        not known yet are held meanwhile."""
        self.ids.asked()
        try:
            yield
        finally:
            self.ids.answered()

    def _registered(self, session: Session, quench: Quench, quench_id: int) -> None:
        self.core.supports_quench = True   # a QnchRply: this router has quench
        early = self.ids.held(quench_id)
        if self.registered(session, quench, quench_id):     # else closed meanwhile
            for event in early:
                quench._apply(event)

    def _modified(self, quench: Quench, change: QuenchChange, reply: pk.QnchRply) -> None:
        self.core.supports_quench = True   # a QnchRply: this router has quench
        for event in self.ids.modified(quench, change, reply):
            quench._apply(event)

    async def register(self, session: Session, quench: Quench) -> None:
        """QnchAddRqst for ``quench`` in ``session`` (new, or restored)."""
        with self._outstanding():
            await self.core.request(session, self.ids.add_request(quench), (self.ids.reply,),
                                    lambda reply: self._registered(session, quench,
                                                                   reply.quench_id))

    async def modify(self, quench: Quench, add: tuple, remove: tuple, keys_add: Keys,
                     keys_del: Keys, deliver_insecure: bool | None) -> None:
        if quench.closed:
            raise ConnectionClosedError("the quench is closed")
        change = QuenchChange(
            names_arg(add, "names to add"), names_arg(remove, "names to remove"),
            quench.deliver_insecure if deliver_insecure is None else bool(deliver_insecure),
            keys_arg(keys_add, "keys_add"), keys_arg(keys_del, "keys_del"))
        session = await self.core.live_session()
        old_id = quench.id
        if old_id is None:
            raise ConnectionClosedError("the quench is not registered at the router "
                                        "(its connection is reconnecting)")
        with self._outstanding():
            await self.core.request(session, self.ids.modify_request(old_id, change),
                                    (self.ids.reply,),
                                    lambda reply: self._modified(quench, change, reply))

    def refused(self, quench: Quench, error: BaseException) -> None:
        """A router without quench ends every quench restored to it; the
        application hears of its own (auto-quench says the rest itself)."""
        if not isinstance(error, QuenchNotSupported):
            super().refused(quench, error)
            return
        if not quench._internal:
            log.warning("%s does not support quench (%s): the quench on %s is ended",
                        self.core.url, error.message, ", ".join(sorted(quench.names)))
        self.discard(quench)

    def forget_ids(self) -> list[Quench]:
        quenches = super().forget_ids()
        for quench in quenches:
            quench._reset()
        return quenches

    def notify(self, packet: pk.SubAddNotify | pk.SubModNotify | pk.SubDelNotify) -> None:
        """A subscription term appeared, changed or went for some quenches
        (``QuenchesCore.notified``)."""
        found, unknown = self.ids.notified(packet)
        for quench, event in found:
            quench._apply(event)
        for qid in unknown:
            log.debug("quench event for unknown quench %d ignored", qid)
