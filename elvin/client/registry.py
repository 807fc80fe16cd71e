"""What the router knows by an id it chose: subscriptions and quenches.

Both kinds of object outlive the router's ids: a reconnecting connection
registers them again in the new session, where they get new ids, while the
application keeps the same object. ``Registered`` is what the two share
(the id, the event stream with its listeners, the end); ``Registry`` is a
connection's table of one kind: the open objects in creation order, and the
current router id of each, which is how incoming packets find their object.
A table works through its connection's ``ClientCore`` (``core.py``) and
keeps its bookkeeping in a sans-IO table of ``subscriptions_core``; each
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
from elvin.client.subscriptions_core import IdTable

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
    """A connection's open objects of one kind, the asyncio shell of their
    sans-IO table (``subscriptions_core``: the ids, which request does what,
    what each reply changes): it sends the table's requests in a session,
    awaits their replies, and ends the objects the table lets go."""

    def __init__(self, core: ClientCore, connection: Any, ids: IdTable) -> None:
        self.core = core
        #: what the objects give the application as their ``connection``
        self.connection = connection
        #: the sans-IO table: the open objects and their router ids
        self.ids = ids

    @property
    def by_id(self) -> dict[int, R]:
        """The open objects by their router id in the current session."""
        return self.ids.by_id

    @property
    def live(self) -> list[R]:
        """The open objects, in creation order."""
        return self.ids.live

    def bind(self, obj: R, new_id: int, add: bool = False) -> None:
        """The router now knows ``obj`` as ``new_id`` (``IdTable.bind``)."""
        self.ids.bind(obj, new_id, add)

    def registered(self, session: Session, obj: R, new_id: int) -> bool:
        """A registration's reply arrived in ``session`` (``IdTable.registered``);
        an object closed meanwhile is removed at the router now."""
        if self.ids.registered(obj, new_id):
            return True
        session.requests.fire_and_forget(self.ids.delete_request(new_id), (self.ids.reply,))
        return False

    def discard(self, obj: R) -> None:
        """``obj`` can no longer be registered: end it."""
        self.ids.discard(obj)
        obj._end()

    def refused(self, obj: R, error: BaseException) -> None:
        """The router of a new session refused to register ``obj`` again
        (another language version, say): end it rather than leave it
        silently dead, and say so."""
        log.error("could not restore %r after reconnecting: %s", obj, error)
        self.discard(obj)

    def forget_ids(self) -> list[R]:
        """A new session: every id is void. Returns the objects to register again."""
        return self.ids.forget_ids()

    def end_all(self) -> None:
        """The connection is closed: every object ends."""
        for obj in self.ids.clear():
            obj._end()

    async def register(self, session: Session, obj: R) -> None:
        raise NotImplementedError

    async def close(self, obj: R) -> None:
        """Remove ``obj`` at the router if the session is up, and end it."""
        if obj.closed:
            return
        ids = self.ids
        ids.closing(obj)
        core = self.core
        session, obj_id = core.session, obj.id
        if core.state != "open" or session is None or obj_id is None:
            ids.unbind(obj, obj_id)
            obj._end()
            return
        try:
            await core.request(session, ids.delete_request(obj_id), (ids.reply,),
                               lambda _reply: ids.unbind(obj, obj_id))
        finally:
            obj._end()
