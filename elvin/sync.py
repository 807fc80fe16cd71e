"""A blocking facade over the asyncio client, for scripts and threads.

::

    import elvin.sync

    with elvin.sync.connect("elvin://127.0.0.1") as conn:
        sub = conn.subscribe("require(Greeting)")
        conn.send({"Greeting": "hello"})
        print(sub.get(timeout=5)["Greeting"])
        for notification in sub:      # blocks; ends when sub or conn closes
            ...

There is no second implementation of the protocol: every call runs the
asyncio client (``elvin.client``) on an event loop in one background daemon
thread shared by all sync connections, and waits for the result. It wraps
``Connection``, not the sans-IO ``session_core`` beneath it, on purpose: what
a blocking shell of its own would need beside the core (reconnection and
failover, keepalive timers, restoring subscriptions, listeners) is the
asyncio shell's, and would otherwise be written twice. All
methods are thread-safe. Listeners added with ``add_listener`` run on that
background thread and must not block.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, Self, TypeVar

from elvin.client import (
    DEFAULT_URL,
    CloseReason,
    Connection,
    Notification,
    Quench,
    QuenchEvent,
    Subscription,
    SubscriptionClosedError,
)
from elvin.keys import Keys
from elvin.quenching import Wanted

log = logging.getLogger("elvin.client")

__all__ = ["SyncConnection", "SyncQuench", "SyncSubscription", "connect", "unotify"]

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None

T = TypeVar("T")
V = TypeVar("V", bound="_StreamView")

#: Bytes of encoded notifications that may wait for the loop thread before
#: ``send`` blocks.
SEND_HIGH_WATER = 256 * 1024


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _loop_lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            _thread = threading.Thread(target=run, name="elvin-sync-loop", daemon=True)
            _thread.start()
            started.wait()
            _loop = loop
        return _loop


def _run(coro, timeout: float | None = None) -> Any:
    loop = _background_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError("elvin.sync calls cannot be made from a listener on the "
                           "elvin.sync loop thread")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout)
    except BaseException:  # the caller's wait ends however: cancel, re-raise
        future.cancel()
        raise


class _BlockingStream:
    """A thread-safe bounded buffer fed on the loop thread (drop oldest).

    A deque under one lock; the condition is signalled only when a reader
    is waiting and no signal is already on its way (a woken reader may take
    a few milliseconds to get the GIL, while the loop thread pushes a whole
    received chunk). The loop thread, which pushes every delivered
    notification, so pays one lock round trip and an append per item rather
    than ``queue.Queue``'s extra lock and per-item notify. A reader that
    leaves items behind wakes the next waiting reader. Items pushed before
    ``end`` are still handed out; then every reader gets
    ``SubscriptionClosedError``."""

    __slots__ = ("_items", "_maxsize", "dropped", "_ended", "_waiting", "_signalled",
                 "_cond")

    def __init__(self, maxsize: int) -> None:
        self._items: deque = deque()
        self._maxsize = maxsize          # 0: unbounded
        self.dropped = 0
        self._ended = False
        self._waiting = 0                # readers blocked in get()
        self._signalled = False          # a notify is pending, not yet seen by a reader
        self._cond = threading.Condition(threading.Lock())

    def push(self, item: Any) -> None:
        with self._cond:
            items = self._items
            if self._maxsize and len(items) >= self._maxsize:
                items.popleft()
                self.dropped += 1
            items.append(item)
            if self._waiting and not self._signalled:
                self._signalled = True
                self._cond.notify()

    def end(self) -> None:
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def get(self, timeout: float | None, what: str) -> Any:
        if timeout is not None and timeout < 0:
            raise ValueError("'timeout' must be a non-negative number")
        with self._cond:
            items = self._items
            deadline = None
            while not items:
                if deadline is None and timeout is not None:
                    deadline = time.monotonic() + timeout
                if self._ended:
                    raise SubscriptionClosedError(f"the {what} is closed")
                remaining = None
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(f"no {what} event within {timeout} s")
                self._waiting += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._waiting -= 1
                    self._signalled = False
            item = items.popleft()
            if items and self._waiting and not self._signalled:
                self._signalled = True
                self._cond.notify()
            return item


class _StreamView(Generic[T]):
    """What the blocking views of a subscription and of a quench share:
    events handed over from the loop thread through a ``_BlockingStream``,
    taken with ``get`` or by iterating, until ``close``."""

    _what = ""    # "subscription" or "quench", in the stream's messages

    def __init__(self, conn: SyncConnection, target: Subscription | Quench,
                 stream: _BlockingStream) -> None:
        self._conn = conn
        self._target = target
        self._stream = stream

    def get(self, timeout: float | None = None) -> T:
        """The next event; TimeoutError after ``timeout`` seconds,
        SubscriptionClosedError once closed and drained."""
        return self._stream.get(timeout, self._what)

    def __iter__(self) -> Iterator[T]:
        while True:
            try:
                yield self.get()
            except SubscriptionClosedError:
                return

    def close(self) -> None:
        """Close it at the router (blocking); the events already received can still be
        taken, then ``get`` raises SubscriptionClosedError.
        """
        _run(self._target.close(), self._conn._wait)
        self._stream.end()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SyncSubscription(_StreamView[Notification]):
    """Blocking view of a :class:`elvin.client.Subscription`."""

    _what = "subscription"

    def __init__(self, conn: SyncConnection, sub: Subscription,
                 stream: _BlockingStream) -> None:
        super().__init__(conn, sub, stream)
        self.subscription = sub

    @property
    def expression(self) -> str:
        """The subscription expression, as last set by ``subscribe`` or ``modify``."""
        return self.subscription.expression

    @property
    def id(self) -> int | None:
        """The router's id of the subscription; None until it is registered."""
        return self.subscription.id

    @property
    def closed(self) -> bool:
        """True once the subscription was closed, here or by its connection."""
        return self.subscription.closed

    @property
    def dropped(self) -> int:
        """How many notifications were dropped because the buffer (``buffer_size``) was
        full when they arrived: the oldest go first.
        """
        return self._stream.dropped

    def add_listener(self, fn: Callable[[Notification], object]) -> None:
        """``fn(notification)`` on the background loop thread (must not block)."""
        _background_loop().call_soon_threadsafe(self.subscription.add_listener, fn)

    def modify(self, expr: str | None = None, *, keys_add: Keys | None = None,
               keys_del: Keys | None = None, accept_insecure: bool | None = None) -> None:
        """Change the expression, keys or insecure flag (blocking), as
        :meth:`elvin.client.Subscription.modify`. A bad expression raises
        SubscriptionError here, in the caller's thread, before anything is sent.
        """
        if expr is not None:
            from elvin.subscription import parse
            parse(expr)   # raise SubscriptionError in the caller's thread
        _run(self.subscription.modify(expr, keys_add=keys_add, keys_del=keys_del,
                                      accept_insecure=accept_insecure), self._conn._wait)


class SyncQuench(_StreamView[QuenchEvent]):
    """Blocking view of a :class:`elvin.client.Quench`."""

    _what = "quench"

    def __init__(self, conn: SyncConnection, quench: Quench, stream: _BlockingStream) -> None:
        super().__init__(conn, quench, stream)
        self.quench = quench

    @property
    def subscriptions(self) -> dict:
        """The subscriptions this quench knows of now, by id (read on the loop thread, so
        the snapshot is consistent).
        """
        return _run(_call(lambda: self.quench.subscriptions), self._conn._wait)

    @property
    def names(self) -> frozenset[str]:
        """The attribute names this quench asks about."""
        return self.quench.names

    def wanted(self, attribute: str) -> Wanted:
        """As ``Quench.wanted``: the values of ``attribute`` some current
        subscription can match."""
        return _run(_call(lambda: self.quench.wanted(attribute)), self._conn._wait)

    def modify(self, add: Iterable[str] = (), remove: Iterable[str] = (), **kw: Any) -> None:
        """Add or remove quench names (blocking), as :meth:`elvin.client.Quench.modify`."""
        _run(self.quench.modify(add, remove, **kw), self._conn._wait)


async def _call(fn: Callable[[], Any]) -> Any:
    return fn()


class SyncConnection:
    """Blocking view of a :class:`elvin.client.Connection`, made by :func:`connect`.

    The asyncio connection runs on the one background loop thread that every
    SyncConnection shares; each call hands its work to that thread and waits for
    the answer. Use it as a context manager to close it."""

    def __init__(self, conn: Connection) -> None:
        self.connection = conn
        self._wait = conn.timeout + 5
        self._cond = threading.Condition()
        self._outbox: list[bytes] = []
        self._outbox_bytes = 0
        self._pumping = False
        self._views: list[_StreamView] = []
        self._send_error: BaseException | None = None

    @property
    def url(self) -> str:
        """The router the connection is at now (it changes on failover)."""
        return self.connection.url

    @property
    def urls(self) -> list[str]:
        """Every router this connection may use, in the order it tries them."""
        return self.connection.urls

    @property
    def failovers(self) -> int:
        """How many times the connection has moved to another router."""
        return self.connection.failovers

    @property
    def options(self) -> dict:
        """The connection options the router granted, a copy."""
        return dict(self.connection.options)

    @property
    def state(self) -> str:
        """``"connecting"``, ``"open"``, ``"reconnecting"`` or ``"closed"``, as
        :attr:`elvin.client.Connection.state`.
        """
        return self.connection.state

    @property
    def auto_quench_stats(self) -> dict | None:
        """With ``auto_quench``, how many notifications were sent and dropped for want of a
        subscriber; None without it.
        """
        return self.connection.auto_quench_stats

    @property
    def supports_quench(self) -> bool | None:
        """As ``Connection.supports_quench``; ``quench()`` raises
        ``QuenchNotSupported`` at a router without quench."""
        return self.connection.supports_quench

    def send(self, notification: Mapping[str, Any], *, keys: Keys | None = None,
             deliver_insecure: bool = True) -> bool:
        """Send a notification. Returns False when auto-quench dropped it.

        Without auto-quench the notification is validated and encoded in the
        caller's thread and queued for the loop thread, which writes queued
        notifications in batches; ``send`` blocks while more than
        ``SEND_HIGH_WATER`` bytes wait, so a fast producer is held to the
        socket's pace and nothing is buffered without bound. A failure to
        write (connection closed) is raised by the next ``send`` or ``flush``.
        """
        conn = self.connection
        data = conn.frame_notification(notification, keys=keys,
                                       deliver_insecure=deliver_insecure)
        if data is None:   # auto-quench decides, or not open: the loop's send does it all
            return _run(conn.send(notification, keys=keys, deliver_insecure=deliver_insecure),
                        self._wait)
        with self._cond:
            if self._send_error is not None:
                error, self._send_error = self._send_error, None
                raise error
            while self._outbox_bytes > SEND_HIGH_WATER:
                if not self._cond.wait(self._wait):
                    raise TimeoutError("the connection is not draining its send queue")
            self._outbox.append(data)
            self._outbox_bytes += len(data)
            start = not self._pumping
            self._pumping = True
        if start:
            _background_loop().call_soon_threadsafe(self._start_pump)
        return True

    def _start_pump(self) -> None:   # loop thread
        asyncio.ensure_future(self._pump())

    async def _pump(self) -> None:   # loop thread: write queued notifications
        try:
            while True:
                with self._cond:
                    batch, self._outbox = self._outbox, []
                    self._outbox_bytes = 0
                    if not batch:
                        self._pumping = False
                        self._cond.notify_all()
                        return
                    self._cond.notify_all()
                await self.connection.write_frames(b"".join(batch))
        except BaseException as exc:  # noqa: BLE001 - kept, raised in the caller's thread
            with self._cond:
                self._send_error = exc
                self._outbox = []
                self._outbox_bytes = 0
                self._pumping = False
                self._cond.notify_all()

    def flush(self) -> None:
        """Wait until every notification passed to ``send`` was written."""
        with self._cond:
            while self._pumping:
                if not self._cond.wait(self._wait):
                    raise TimeoutError("the connection is not draining its send queue")
            if self._send_error is not None:
                error, self._send_error = self._send_error, None
                raise error

    def subscribe(self, expression: str, *, keys: Keys | None = None,
                  accept_insecure: bool = True, buffer_size: int = 1000) -> SyncSubscription:
        """Subscribe (blocking) and return a :class:`SyncSubscription` that buffers up to
        ``buffer_size`` notifications (the oldest dropped first). A bad expression
        raises SubscriptionError in the caller's thread, before anything is sent.
        """
        from elvin.subscription import parse
        parse(expression)   # SubscriptionError raised in the caller's thread
        return self._open(SyncSubscription, buffer_size, self.connection.subscribe, expression,
                          keys=keys, accept_insecure=accept_insecure)

    def wanted(self, attribute: str, *, keys: Keys | None = None) -> Wanted:
        """As ``Connection.wanted`` (needs ``auto_quench=True``): the values
        of ``attribute`` some subscription can match."""
        return _run(self.connection.wanted(attribute, keys=keys), self._wait)

    def quench(self, names: Iterable[str], *, keys: Keys | None = None,
               deliver_insecure: bool = True, buffer_size: int = 1000) -> SyncQuench:
        """Quench the router for ``names`` (blocking): a :class:`SyncQuench` whose events
        say which subscriptions on those attributes exist, so that a producer sends only
        what someone wants.
        """
        names = list(names) if not isinstance(names, str) else [names]
        return self._open(SyncQuench, buffer_size, self.connection.quench, names,
                          keys=keys, deliver_insecure=deliver_insecure)

    def _open(self, view: type[V], buffer_size: int, start: Callable[..., Awaitable[Any]],
              *args: Any, **kwargs: Any) -> V:
        """``start(*args, **kwargs)`` (``Connection.subscribe`` or ``quench``)
        on the loop thread, its events fed to a blocking stream that ends with
        it; the blocking ``view`` of it."""
        stream = _BlockingStream(buffer_size)

        async def go() -> V:
            target = await start(*args, buffer_size=0, listener=stream.push, **kwargs)
            target._end_callbacks.append(stream.end)
            return view(self, target, stream)

        wrapper = _run(go(), self._wait)
        self._views.append(wrapper)
        return wrapper

    def set_keys(self, **kw: Keys | None) -> None:
        """Replace the connection's notification or subscription keys (blocking), as
        :meth:`elvin.client.Connection.set_keys`.
        """
        _run(self.connection.set_keys(**kw), self._wait)

    def set_options(self, options: Mapping[str, Any]) -> dict:
        """Ask for other connection options (blocking); returns the options granted, as
        :meth:`elvin.client.Connection.set_options`.
        """
        return _run(self.connection.set_options(options), self._wait)

    def add_close_listener(self, fn: Callable[[CloseReason], object]) -> None:
        """``fn(reason)`` when the connection closes for good, on the background loop
        thread (must not block).
        """
        _background_loop().call_soon_threadsafe(self.connection.add_close_listener, fn)

    def add_reconnect_listener(self, fn: Callable[[Connection], object]) -> None:
        """``fn(connection)`` after each reconnection (``reconnect=True``), on the
        background loop thread (must not block).
        """
        _background_loop().call_soon_threadsafe(self.connection.add_reconnect_listener, fn)

    def add_failover_listener(self, fn: Callable[[Connection, str], object]) -> None:
        """``fn(connection, previous_url)`` (in the loop thread) after a move
        to another router."""
        _background_loop().call_soon_threadsafe(self.connection.add_failover_listener, fn)

    def close(self) -> CloseReason:
        """Write what ``send`` queued, then close the connection (blocking) and end every
        subscription and quench made on it; returns why it closed. Closing a closed
        connection does nothing.
        """
        if self.connection.state == "closed":
            return CloseReason("closed")
        try:
            self.flush()
        except Exception:  # closing anyway: what could not be sent is lost
            log.debug("close: the last flush failed", exc_info=True)
        reason = _run(self.connection.close(), self._wait)
        for wrapper in self._views:
            wrapper._stream.end()
        return reason

    def __enter__(self) -> SyncConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SyncConnection {self.url} {self.state}>"


_open_connections: weakref.WeakSet[SyncConnection] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At interpreter exit, close what is still open (DisconnRqst), briefly."""
    for conn in list(_open_connections):
        if conn.connection.state == "open":
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                _run(conn.connection.close(timeout=1), 2)


def connect(url: str | Sequence[str] = DEFAULT_URL, **kwargs: Any) -> SyncConnection:
    """Connect (blocking); same arguments as :func:`elvin.client.connect`
    (a list of routers too: failover)."""
    conn = Connection(url, **kwargs)
    _run(conn.open(), conn.timeout * len(conn.urls) + 5)
    wrapper = SyncConnection(conn)
    _open_connections.add(wrapper)
    return wrapper


def unotify(url: str, notification: Mapping[str, Any], **kwargs: Any) -> None:
    """Blocking :func:`elvin.client.unotify`."""
    from elvin.client import unotify as async_unotify
    _run(async_unotify(url, notification, **kwargs), kwargs.get("timeout", 10) + 5)
