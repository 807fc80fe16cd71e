"""Subscriptions: the consumer side of a connection.

``Subscription`` is the application's object, and ``Notification`` what it
delivers; ``SubscriptionTable`` is the connection's table of them, which
registers them at the router (again after each reconnection), changes and
removes them, and hands each NotifyDeliver to the subscriptions it names.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from elvin.client.args import keys_arg
from elvin.client.core import ClientCore
from elvin.client.errors import ConnectionClosedError
from elvin.client.registry import Registered, Registry
from elvin.client.session import Session
from elvin.client.subscriptions_core import SubscriptionChange, SubscriptionsCore
from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import packets as pk
from elvin.subscription.ast import Node
from elvin.values import Value

__all__ = ["Notification", "Subscription"]

DEFAULT_BUFFER = 1000


class Notification(Mapping):
    """A delivered notification: a read-only mapping of its attributes.

    ``secure`` says whether it matched ``subscription`` securely (with keys)
    rather than by content alone. ``attributes`` is the plain dict (shared by
    every subscription the notification matched: do not modify it).
    """

    __slots__ = ("attributes", "secure", "subscription")

    def __init__(self, attributes: dict[str, Value], secure: bool = False,
                 subscription: Subscription | None = None) -> None:
        self.attributes = attributes
        self.secure = secure
        self.subscription = subscription

    def __getitem__(self, name: str) -> Value:
        return self.attributes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.attributes)

    def __len__(self) -> int:
        return len(self.attributes)

    def __contains__(self, name: object) -> bool:
        return name in self.attributes

    def get(self, name, default=None):
        return self.attributes.get(name, default)

    def __repr__(self) -> str:
        return f"Notification({self.attributes!r}, secure={self.secure})"


class Subscription(Registered[Notification]):
    """A subscription registered with the router.

    Iterate it (``async for n in sub``) to receive :class:`Notification` s,
    or ``await sub.get(timeout=...)``, or add listeners (``sub.add_listener(fn)``,
    ``fn(notification)``, sync or async). The iterator keeps at most
    ``buffer_size`` undelivered notifications; beyond that the oldest are
    dropped and counted in ``dropped``. Iteration ends when the subscription
    or its connection is closed (a reconnecting connection keeps it alive:
    its router-side id changes, the object does not).
    """

    _table: SubscriptionTable

    def __init__(self, table: SubscriptionTable, expression: str, ast: Node, keys: Keys,
                 accept_insecure: bool, buffer_size: int = DEFAULT_BUFFER) -> None:
        super().__init__(table, buffer_size, "subscription")
        self.expression = expression
        self.ast = ast
        self.keys = keys
        self.accept_insecure = accept_insecure
        self.delivered = 0

    # -- delivery (called by the table) ---------------------------------------
    def _deliver(self, attributes: dict, secure: bool) -> None:
        self.delivered += 1
        self._stream.push(Notification(attributes, secure, self))

    # -- application API -----------------------------------------------------
    @property
    def pending(self) -> int:
        """Notifications buffered and not yet read."""
        return self._stream.pending

    def get_nowait(self) -> Notification:
        """The next buffered notification, or ``asyncio.QueueEmpty``."""
        return self._stream.get_nowait()

    async def __anext__(self) -> Notification:
        # fast path: a buffered notification needs no wait (one coroutine
        # per item instead of three); the stream handles waiting and the end
        items = self._stream._items
        if items:
            return items.popleft()
        return await self._stream.next()

    async def modify(self, expr: str | None = None, *, keys_add: Keys | None = None,
                     keys_del: Keys | None = None,
                     accept_insecure: bool | None = None) -> None:
        """Change the expression, the keys or the insecure flag (SubModRqst).
        A bad expression raises SubscriptionError before any round trip and
        leaves the subscription as it was."""
        await self._table.modify(self, expr, keys_add or EMPTY_KEYS, keys_del or EMPTY_KEYS,
                                 accept_insecure)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"id={self.id}"
        return f"<Subscription {state} {self.expression!r}>"


class SubscriptionTable(Registry[Subscription]):
    """A connection's subscriptions, by their router ids: the asyncio shell
    of ``subscriptions_core.SubscriptionsCore``."""

    ids: SubscriptionsCore[Subscription]

    def __init__(self, core: ClientCore, connection: Any) -> None:
        super().__init__(core, connection, SubscriptionsCore())

    async def register(self, session: Session, sub: Subscription) -> None:
        """SubAddRqst for ``sub`` in ``session`` (new, or restored)."""
        ids = self.ids

        def on_late(reply: pk.SubRply) -> None:
            # the caller gave up waiting: remove the orphan at the router
            session.requests.fire_and_forget(ids.delete_request(reply.subscription_id),
                                             (ids.reply,))

        await self.core.request(session, ids.add_request(sub), (ids.reply,),
                                lambda reply: self.registered(session, sub,
                                                              reply.subscription_id),
                                on_late, expression=sub.expression)

    async def modify(self, sub: Subscription, expression: str | None, keys_add: Keys,
                     keys_del: Keys, accept_insecure: bool | None) -> None:
        from elvin.subscription import parse
        if sub.closed:
            raise ConnectionClosedError("the subscription is closed")
        ast = parse(expression) if expression is not None else None
        change = SubscriptionChange(
            expression, ast,
            sub.accept_insecure if accept_insecure is None else bool(accept_insecure),
            keys_arg(keys_add, "keys_add"), keys_arg(keys_del, "keys_del"))
        session = await self.core.live_session()
        old_id = sub.id
        if old_id is None:
            raise ConnectionClosedError("the subscription is not registered at the router "
                                        "(its connection is reconnecting)")
        ids = self.ids
        await self.core.request(session, ids.modify_request(old_id, change), (ids.reply,),
                                lambda reply: ids.modified(sub, change, reply),
                                expression=expression)

    def deliver(self, packet: pk.NotifyDeliver) -> None:
        """A notification for the subscriptions the router names
        (``SubscriptionsCore.deliver``)."""
        self.ids.deliver(packet, Subscription._deliver)
