"""Subscriptions: the consumer side of a connection."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from elvin.client._stream import EventStream
from elvin.client.events import Notification
from elvin.keys import EMPTY_KEYS, Keys
from elvin.subscription.ast import Node

if TYPE_CHECKING:
    from elvin.client.connection import Connection

__all__ = ["Subscription"]

DEFAULT_BUFFER = 1000


class Subscription:
    """A subscription registered with the router.

    Iterate it (``async for n in sub``) to receive :class:`Notification` s,
    or ``await sub.get(timeout=...)``, or add listeners (``sub.add_listener(fn)``,
    ``fn(notification)``, sync or async). The iterator keeps at most
    ``buffer_size`` undelivered notifications; beyond that the oldest are
    dropped and counted in ``dropped``. Iteration ends when the subscription
    or its connection is closed (a reconnecting connection keeps it alive:
    its router-side id changes, the object does not).
    """

    def __init__(self, connection: Connection, expression: str, ast: Node, keys: Keys,
                 accept_insecure: bool, buffer_size: int = DEFAULT_BUFFER) -> None:
        self.connection = connection
        self.expression = expression
        self.ast = ast
        self.keys = keys
        self.accept_insecure = accept_insecure
        self.id: int | None = None
        self.closed = False
        self._end_callbacks: list[Callable[[], object]] = []
        self.delivered = 0
        self._stream = EventStream(buffer_size, "subscription")

    # -- delivery (called by the connection) --------------------------------
    def _deliver(self, attributes: dict, secure: bool) -> None:
        self.delivered += 1
        self._stream.push(Notification(attributes, secure, self))

    def _end(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._stream.end()
        for fn in self._end_callbacks:
            fn()

    # -- application API -----------------------------------------------------
    def add_listener(self, fn: Callable[[Notification], object]) -> None:
        self._stream.add_listener(fn)

    def remove_listener(self, fn: Callable) -> None:
        self._stream.remove_listener(fn)

    @property
    def dropped(self) -> int:
        """Notifications dropped from the iterator buffer (oldest first)."""
        return self._stream.dropped

    @property
    def pending(self) -> int:
        """Notifications buffered and not yet read."""
        return self._stream.pending

    async def get(self, timeout: float | None = None) -> Notification:
        """The next notification; TimeoutError after ``timeout`` seconds,
        ``SubscriptionClosedError`` once closed and drained."""
        return await self._stream.get(timeout)

    def get_nowait(self) -> Notification:
        """The next buffered notification, or ``asyncio.QueueEmpty``."""
        return self._stream.get_nowait()

    def __aiter__(self) -> Subscription:
        return self

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
        await self.connection._modify_subscription(self, expr, keys_add or EMPTY_KEYS,
                                                   keys_del or EMPTY_KEYS, accept_insecure)

    async def close(self) -> None:
        """Remove the subscription at the router (SubDelRqst); idempotent."""
        await self.connection._close_subscription(self)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"id={self.id}"
        return f"<Subscription {state} {self.expression!r}>"
