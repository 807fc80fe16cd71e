"""Quenches: learning which subscriptions refer to some attribute names."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from elvin.client._stream import EventStream
from elvin.client.events import (
    QuenchEvent,
    SubscriptionAdded,
    SubscriptionModified,
    SubscriptionRemoved,
)
from elvin.keys import EMPTY_KEYS, Keys
from elvin.subscription.ast import Node

if TYPE_CHECKING:
    from elvin.client.connection import Connection

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
            except Exception:
                self._compiled = None
        return self._compiled

    @property
    def required_names(self) -> frozenset:
        if self._required is None:
            try:
                from elvin.subscription import required_names
                self._required = frozenset(required_names(self.ast))
            except Exception:
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
        except Exception:
            return True


class Quench:
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

    def __init__(self, connection: Connection, names: Iterable[str], keys: Keys,
                 deliver_insecure: bool, buffer_size: int = DEFAULT_BUFFER) -> None:
        self.connection = connection
        self.names: frozenset[str] = frozenset(names)
        self.keys = keys
        self.deliver_insecure = deliver_insecure
        self.id: int | None = None
        self.closed = False
        self._end_callbacks: list[Callable[[], object]] = []
        self.terms: dict[int, QuenchTerm] = {}
        self._stream = EventStream(buffer_size, "quench")

    # -- events from the connection -------------------------------------------
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
        self._stream.push(event)

    def _reset(self) -> None:
        """Forget every term (reconnection): report each as removed."""
        for term_id in list(self.terms):
            self._apply(SubscriptionRemoved(term_id))

    def _end(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._stream.end()
        for fn in self._end_callbacks:
            fn()

    # -- application API -------------------------------------------------------
    @property
    def subscriptions(self) -> dict[int, Node]:
        return {tid: term.ast for tid, term in self.terms.items()}

    def add_listener(self, fn: Callable[[QuenchEvent], object]) -> None:
        self._stream.add_listener(fn)

    def remove_listener(self, fn: Callable) -> None:
        self._stream.remove_listener(fn)

    @property
    def dropped(self) -> int:
        return self._stream.dropped

    async def get(self, timeout: float | None = None) -> QuenchEvent:
        return await self._stream.get(timeout)

    def __aiter__(self) -> Quench:
        return self

    async def __anext__(self) -> QuenchEvent:
        return await self._stream.next()

    async def modify(self, add: Iterable[str] = (), remove: Iterable[str] = (), *,
                     keys_add: Keys | None = None, keys_del: Keys | None = None,
                     deliver_insecure: bool | None = None) -> None:
        """Add or remove attribute names (and keys) with QnchModRqst."""
        await self.connection._modify_quench(self, tuple(add), tuple(remove),
                                             keys_add or EMPTY_KEYS, keys_del or EMPTY_KEYS,
                                             deliver_insecure)

    async def close(self) -> None:
        """Remove the quench at the router (QnchDelRqst); idempotent."""
        await self.connection._close_quench(self)

    async def __aenter__(self) -> Quench:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"id={self.id}"
        return f"<Quench {state} {sorted(self.names)} terms={len(self.terms)}>"
