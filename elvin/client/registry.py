"""What the router knows by an id it chose: subscriptions and quenches.

Both kinds of object outlive the router's ids: a reconnecting connection
registers them again in the new session, where they get new ids, while the
application keeps the same object. ``Registered`` is what the two share
(the id, the event stream with its listeners, the end); ``Registry`` is a
connection's table of one kind: the open objects in creation order, and the
current router id of each, which is how incoming packets find their object.
A table works through its connection's ``ClientCore`` (``core.py``); each
object knows its table, and hands the application back the connection it
belongs to.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from elvin.client._stream import EventStream
from elvin.client.core import ClientCore
from elvin.client.session import Session

log = logging.getLogger("elvin.client")

E = TypeVar("E")
R = TypeVar("R", bound="Registered")


class Registered(Generic[E]):
    """Base of Subscription and Quench: events of type ``E`` through
    iteration (``async for``), ``await get()`` or listeners; ``id`` is the
    router's id in the current session (None while not registered);
    ``connection`` the ``elvin.client.Connection`` it belongs to."""

    def __init__(self, table: Registry, buffer_size: int, what: str) -> None:
        # typed loosely: the connection composes this module, not the reverse
        self.connection: Any = table.connection
        self._table = table
        self.id: int | None = None
        self.closed = False
        self._end_callbacks: list[Callable[[], object]] = []
        self._stream = EventStream(buffer_size, what)

    def _end(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._stream.end()
        for fn in self._end_callbacks:
            fn()

    def add_listener(self, fn: Callable[[E], object]) -> None:
        """``fn(event)`` for every event as it arrives (sync or async)."""
        self._stream.add_listener(fn)

    def remove_listener(self, fn: Callable) -> None:
        """Stop calling ``fn`` for each event; ValueError when it was not added."""
        self._stream.remove_listener(fn)

    @property
    def dropped(self) -> int:
        """Events dropped from the iterator buffer (oldest first)."""
        return self._stream.dropped

    async def get(self, timeout: float | None = None) -> E:
        """The next event; TimeoutError after ``timeout`` seconds,
        ``SubscriptionClosedError`` once closed and drained."""
        return await self._stream.get(timeout)

    def __aiter__(self):
        return self

    async def __anext__(self) -> E:
        return await self._stream.next()

    async def close(self) -> None:
        """Remove it at the router (SubDelRqst, QnchDelRqst); idempotent."""
        await self._table.close(self)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


class Registry(Generic[R]):
    """A connection's open objects of one kind, and their router ids."""

    #: the request that removes one at the router: ``delete(xid, id)``
    delete: Callable[[int, int], Any]
    #: the reply to register, modify and delete requests
    reply: type

    def __init__(self, core: ClientCore, connection: Any) -> None:
        self.core = core
        #: what the objects give the application as their ``connection``
        self.connection = connection
        self.by_id: dict[int, R] = {}
        self.live: list[R] = []   # open ones, in creation order

    def bind(self, obj: R, new_id: int, add: bool = False) -> None:
        """The router now knows ``obj`` as ``new_id`` (a reply arrived);
        ``add``: a registration, which makes ``obj`` one of the open ones."""
        if add and obj not in self.live:
            self.live.append(obj)
        self.unbind(obj, obj.id)
        obj.id = new_id
        self.by_id[new_id] = obj

    def registered(self, session: Session, obj: R, new_id: int) -> bool:
        """A registration's reply arrived in ``session``: the router knows
        ``obj`` as ``new_id``. True if ``obj`` is now one of the open ones.

        False if the application closed it meanwhile -- while a reconnect
        was restoring it, or before the reply to its first registration
        came: ``close`` could not remove it at the router then (no id, or no
        session). The router is told to forget it now (SubDelRqst or
        QnchDelRqst), so that nothing piles up for a closed object and no
        later reconnect restores it."""
        if obj.closed:
            session.requests.fire_and_forget(lambda xid: self.delete(xid, new_id),
                                             (self.reply,))
            return False
        self.bind(obj, new_id, add=True)
        return True

    def unbind(self, obj: R, old_id: int | None) -> None:
        if old_id is not None and self.by_id.get(old_id) is obj:
            del self.by_id[old_id]

    def discard(self, obj: R) -> None:
        """``obj`` can no longer be registered: end it."""
        if obj in self.live:
            self.live.remove(obj)
        self.unbind(obj, obj.id)
        obj._end()

    def refused(self, obj: R, error: BaseException) -> None:
        """The router of a new session refused to register ``obj`` again
        (another language version, say): end it rather than leave it
        silently dead, and say so."""
        log.error("could not restore %r after reconnecting: %s", obj, error)
        self.discard(obj)

    def forget_ids(self) -> list[R]:
        """A new session: every id is void. Returns the objects to register again."""
        self.by_id.clear()
        for obj in self.live:
            obj.id = None
        return list(self.live)

    def end_all(self) -> None:
        """The connection is closed: every object ends."""
        for obj in self.live:
            obj._end()
        self.live.clear()
        self.by_id.clear()

    async def register(self, session: Session, obj: R) -> None:
        raise NotImplementedError

    async def close(self, obj: R) -> None:
        """Remove ``obj`` at the router if the session is up, and end it."""
        if obj.closed:
            return
        if obj in self.live:
            self.live.remove(obj)
        core = self.core
        session, obj_id = core.session, obj.id
        if core.state != "open" or session is None or obj_id is None:
            self.unbind(obj, obj_id)
            obj._end()
            return
        try:
            await core.request(session, lambda xid: self.delete(xid, obj_id), (self.reply,),
                               lambda _reply: self.unbind(obj, obj_id))
        finally:
            obj._end()
