"""The mobility proxy: subscribes and buffers for clients that moved out,
and hands the buffers over on move-in.

It is an ordinary Elvin client (``elvin.client`` only), so it works in front
of any Elvin router: inside ``elvind`` (``mobility = true``) it connects to
its own router over an in-process channel (``elvin.router.localchannel``:
the router hands it its NotifyDeliver frames undecoded and lets it commit
its buffers before writing to any socket); ``elvin-mobility-proxy -e URL``
runs it as a process of its own. With a ``MobilityStore`` its state
survives restarts. See the ``elvin.mobility`` docstring for the protocol,
and ``elvin.mobility.buffer`` for where a buffer starts and ends.

Resource limits the paper left open (its section 3.2) are configurable: a
per-client quota (oldest notifications dropped first, so the newest survive
and per-producer order is kept), an expiry after which an unclaimed buffer is
released (a tombstone remembers how many notifications were lost, so the
client hears about it at move-in), and caps on clients and subscriptions.
Bad requests get an error reply and never disturb other clients.

The proxy holds a private key (a raw key in the SHA-1 consumer scheme) and
subscribes to its requests with it, still accepting insecure matches so
that anyone can ask for its public key (``hello``). Requests that carry a
secret (``move-out``: subscriptions with their raw keys; ``move-in`` and
``download``: the download secret) are acted on only when they arrived
through that key, i.e. were sent so that no other subscriber got them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hmac
import logging
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elvin.config_file import check_numbers, number
from elvin.daemon.crashpoints import crash_point
from elvin.errors import ElvinError, SubscriptionError
from elvin.fileutil import reading
from elvin.keys import Keys, public_key
from elvin.mobility import protocol as P
from elvin.mobility.buffer import ClientHandler, Handover
from elvin.mobility.exchange import check_key, exchange, hello
from elvin.mobility.store import MobilityStore, StoredClient, StoredTombstone, iter_entries
from elvin.protocol import URIError, parse_uri

log = logging.getLogger("elvin.mobility")

__all__ = ["MobilityProxy", "ProxyConfig", "load_key_file", "main"]

#: Requests (and ping answers) being handled at once; beyond, new ones are
#: dropped and counted in ``stats["overload"]``.
MAX_PENDING = 1000
#: seconds between two slices of a released buffer's deletion
PURGE_PAUSE = 0.005
#: seconds between two looks at whether the federation's peers know the
#: router's interest, while a move-out or move-in reply waits for it
INTEREST_POLL = 0.02


@dataclass
class ProxyConfig:
    """Limits and identity of a proxy.

    ``id``: the name clients and other proxies address it by; default the
    URL of the router it is connected to (what a client connected to the same
    router calls it by default). ``aliases``: other names it answers to (the
    router's other URLs). ``quota``/``expiry`` are the most a client may ask
    for and the default when it does not ask. ``key``: the proxy's raw
    private key (default: a fresh random one at each start); set it to give
    the proxy a stable public key that clients can pin (``proxy_key``), which
    takes the ``hello`` exchange, and the impersonation it allows, away.
    ``announce_wait``: the most seconds a move-out or move-in reply waits
    for the router's federation peers to know what its subscribers want
    (``MobilityProxy(interest=...)``); a reply sent while some still may
    not names them (``Mobility.Unannounced``).
    """

    id: str | None = None
    aliases: tuple[str, ...] = ()
    quota: int = number(10_000, 1, integer=True)
    expiry: float = number(3600.0, above=0)
    max_clients: int = number(1000, 1, integer=True)
    max_subscriptions: int = number(1000, 1, integer=True)
    tombstone_ttl: float = number(3600.0, above=0)
    max_tombstones: int = number(10_000, 0, integer=True)
    download_timeout: float = number(30.0, above=0)
    announce_wait: float = number(3.0, above=0)
    key: bytes | None = field(default=None, repr=False)

    def validate(self) -> ProxyConfig:
        """``ValueError`` (a ``ConfigError``) naming the setting out of range."""
        check_numbers(self, "mobility", lambda name: name.replace("_", "-"))
        if self.key is not None and (not isinstance(self.key, bytes) or not self.key):
            raise ValueError("a mobility proxy key must be non-empty bytes")
        return self


def load_key_file(path: str | Path) -> bytes:
    """Read a proxy's raw private key from ``path``: the file's bytes, as
    they are (``elvin-mobility-proxy --key-file`` and ``elvind
    --mobility-key-file`` / ``mobility-key-file``). Raises ``ValueError``
    naming the file and what is wrong with it (missing, unreadable, empty)."""
    name = repr(str(path))
    with reading("mobility key file", name, ValueError):
        with open(path, "rb") as f:
            key = f.read()
    if not key:
        raise ValueError(f"mobility key file {name} is empty (it must hold the "
                         "proxy's raw private key, its bytes as they are)")
    return key


def canonical(name: str) -> str:
    """Proxy ids that are Elvin URLs compare in canonical form, so
    ``elvin://h:1`` and ``elvin:4.0/tcp,none,xdr/h:1`` name the same proxy."""
    try:
        return str(parse_uri(name))
    except (URIError, ValueError):
        return name


@dataclass
class _Tombstone:
    secret: str
    dropped: int
    until: float


def _since_restart(restored: ClientHandler) -> int:
    """What a restored buffer recorded (or dropped to its quota) since the
    restart: what the client, whose connection died at the restart, never
    had."""
    assert restored.restored_seq is not None
    since = restored.restored_seq
    return (sum(1 for seq, _ in restored.entries if seq >= since) + len(restored.pending)
            + restored.dropped - restored.restored_dropped)


def _same_secret(known: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(known.encode(), given.encode())


class MobilityProxy:
    """``async with MobilityProxy(url) as proxy:`` or ``await proxy.start()``
    / ``await proxy.stop()``. ``proxy.id`` is its name; ``proxy.handlers``
    the moved-out clients; ``proxy.stats`` counters.

    ``store`` (a ``MobilityStore``): keep the key, the moved-out clients and
    their buffers on disk, and take them back at ``start``. ``connector``:
    an ``async () -> (connection, channel)`` used instead of connecting to
    ``url`` (``elvin.router.mobility_service``: the router's in-process channel, whose
    barrier calls ``flush`` before the router writes to any socket).
    ``interest``: ``() -> names`` of the router's federation peers that may
    not know yet what its subscribers want now (inside ``elvind``:
    ``FederationService.interest_pending``: after a restart until the links
    are up and acknowledged, and for one round trip after a subscription
    that changes the router's pull filters); a move-out or move-in reply,
    which promises that from then on everything reaches the client, waits
    for it to be empty (``ProxyConfig.announce_wait`` at most), else names
    them. ``unreachable``: ``(seconds) -> names`` of those peers that are
    dialled and have been down for that long at least
    (``FederationService.interest_unreachable``): when only such peers are
    missing, the reply names them without waiting."""

    def __init__(self, url: str, config: ProxyConfig | None = None, *,
                 reconnect: bool = False, store: MobilityStore | None = None,
                 connector: Callable[[], Awaitable[tuple[Any, Any]]] | None = None,
                 interest: Callable[[], Sequence[str]] | None = None,
                 unreachable: Callable[[float], Collection[str]] | None = None) -> None:
        self.url = url
        self._interest = interest
        self._unreachable = unreachable
        #: replies waiting now for the federation's peers to know the interest
        self.awaiting_interest = 0
        self.config = (config or ProxyConfig()).validate()
        self.reconnect = reconnect
        self.store = store
        self._connector = connector
        self.connection: Any = None
        self.channel: Any = None
        self.id: str = ""
        self.ids: set[str] = set()
        self.handlers: dict[str, ClientHandler] = {}
        self.tombstones: OrderedDict[str, _Tombstone] = OrderedDict()
        self.stats = {"move_out": 0, "move_in": 0, "download": 0, "errors": 0,
                      "malformed": 0, "bad_secret": 0, "expired": 0, "pings": 0,
                      "overload": 0, "insecure": 0, "hello": 0, "released": 0,
                      "superseded": 0, "restored": 0, "fences": 0, "disk_full": 0,
                      "dropped_disk_full": 0, "store_failures": 0, "lost_at_restart": 0,
                      "lost_in_take_over": 0, "interest_waits": 0, "unannounced": 0,
                      "unannounced_at_once": 0, "replaced_unclaimed": 0,
                      "replaced_unclaimed_held": 0}
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task] = set()
        self._subs: list[Any] = []
        self._dirty: list[ClientHandler] = []
        #: the flush asked for this turn (new notifications), and the one
        #: asked for later (a released buffer's next slice, or the store's
        #: next try after a failed write); both cancelled by ``stop``
        self._flush_soon: asyncio.Handle | None = None
        self._flush_timer: asyncio.TimerHandle | None = None
        self._stopped = False
        self._fence_waiters: dict[str, asyncio.Future] = {}
        #: the router's id of each handler subscription: (handler, the
        #: client's id for it); inside elvind deliveries are read through it
        self._routes: dict[int, tuple[ClientHandler, int]] = {}
        self._next_handle = 1
        raw = self.config.key
        if raw is None and store is not None:
            raw = store.load_key()
            if raw is None:
                raw = secrets.token_bytes(20)
                store.save_key(raw)   # tickets name it: the same key after a restart
        raw = raw or secrets.token_bytes(20)
        self._request_keys = Keys.consumer_subscription(raw)
        #: what clients and other proxies send private requests with
        self.public_key: bytes = public_key(raw)
        if store is not None:
            store.on_full = self._disk_full

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> MobilityProxy:
        if self._connector is not None:
            self.connection, self.channel = await self._connector()
            self.channel.on_delivered = self.flush
            self.channel.raw_deliver = self._raw_deliver
        else:
            from elvin.client import connect
            self.connection = await connect(self.url, reconnect=self.reconnect)
        self.id = self.config.id or self.connection.url
        self.ids = {canonical(self.id), self.id}
        for alias in self.config.aliases:
            self.ids.update((alias, canonical(alias)))
        if self.store is not None:
            # first: a request must never find a client not yet taken back
            # (a move-in would be told there is no buffer)
            await self._restore()
        names = " || ".join(f"{P.PROXY} == {P.quote(n)}" for n in sorted(self.ids))
        # Requests arrive securely (sent with our public key: only we get
        # them) or insecurely (hello, which anyone may send and see). Our own
        # move-out replies come back to us too: a buffer starts there.
        self._subs.append(await self.connection.subscribe(
            f"(require({P.REQUEST}) || {P.REPLY} == {P.quote(P.MOVE_OUT)}) && ({names})",
            keys=self._request_keys, accept_insecure=True, buffer_size=0,
            listener=self._on_request))
        self._subs.append(await self.connection.subscribe(
            f"{P.PING} == \"request\" && ({names})", buffer_size=0, listener=self._on_ping))
        log.info("mobility proxy %r serving at %s (public key %s)", self.id,
                 self.connection.url, self.public_key.hex())
        return self

    async def stop(self) -> None:
        self._stopped = True
        self._cancel_flushes()
        for task in list(self._tasks):
            task.cancel()
        for handler in self.handlers.values():
            handler.cancel_timers()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self.flush()
        # the handlers stay on disk: the next start takes them back
        self.handlers.clear()
        if self.channel is not None:
            self.channel.on_delivered = self.channel.raw_deliver = None
        if self.connection is not None:
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await self.connection.close(timeout=2)
        if self.store is not None:
            self.store.close()
        log.info("mobility proxy %r stopped", self.id)

    async def __aenter__(self) -> MobilityProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _lock(self, client_id: str) -> asyncio.Lock:
        lock = self._locks.get(client_id)
        if lock is None:
            if len(self._locks) > 4 * self.config.max_clients:
                for key, old in list(self._locks.items()):
                    if not old.locked():
                        del self._locks[key]
            lock = self._locks[client_id] = asyncio.Lock()
        return lock

    # -- buffers to disk ----------------------------------------------------------------
    def _raw_deliver(self, data: bytes, parts: tuple) -> bool:
        """A NotifyDeliver from our router, still encoded: when every
        subscription it names is a handler's, buffer it as it is (no decoding,
        no encoding: the same bytes a move-in reply carries) and take it."""
        start, end, secure, insecure = parts
        routes = self._routes
        ids = secure + insecure if secure else insecure
        if len(ids) == 1:
            route = routes.get(ids[0])
            if route is None:
                return False
            route[0].on_raw(data[start:end], (route[1],))
            return True
        found = [routes.get(i) for i in ids]
        if not ids or None in found:
            return False
        block = data[start:end]
        by_handler: dict[ClientHandler, list[int]] = {}
        for handler, spec_id in found:   # type: ignore[misc]
            by_handler.setdefault(handler, []).append(spec_id)
        for handler, spec_ids in by_handler.items():
            handler.on_raw(block, spec_ids)
        return True

    def _on_pending(self, handler: ClientHandler) -> None:
        self._dirty.append(handler)
        if self._flush_soon is None and not self._stopped:
            self._flush_soon = asyncio.get_running_loop().call_soon(self.flush)

    def _cancel_flushes(self) -> None:
        for handle in (self._flush_soon, self._flush_timer):
            if handle is not None:
                handle.cancel()
        self._flush_soon = self._flush_timer = None

    def flush(self, force: bool = False) -> bool:
        """Seal what the handlers received since the last call, apply the
        quotas, and write all of it in one transaction. Inside ``elvind`` the
        router calls it before it writes to any socket; otherwise it runs
        once per loop turn. False when the store could not write it (it is
        kept, and tried again when the store's back-off ends). ``force``:
        try the store now even during its back-off (a move-out is waiting:
        the disk may have room again)."""
        self._cancel_flushes()
        dirty, self._dirty = self._dirty, []
        store = self.store
        for handler in dirty:
            if handler.carried:
                continue        # sealed when the handler replacing it is armed
            if self.handlers.get(handler.client_id) is not handler:
                handler.pending.clear()
                continue
            new = handler.seal()
            if store is not None:
                store.append(handler.handle, new)
            over = handler.over_quota()
            if over:
                handler.drop_oldest(over)
                if store is not None:
                    store.trim(handler.handle, handler.first_seq, handler.dropped)
        if store is None or not (store.dirty or store.ledger_failing):
            return True
        written = store.commit(force)
        self.stats["store_failures"] = store.failures
        if store.dirty and not self._stopped:
            # a failed write is tried again when the store's back-off ends;
            # a released buffer is deleted a slice per turn, not at once
            delay = store.retry_at - time.monotonic() if store.retry_at else PURGE_PAUSE
            self._flush_timer = asyncio.get_running_loop().call_later(max(0.0, delay),
                                                                      self.flush)
        return written

    def storage(self) -> dict[str, Any]:
        """For the router's status and metrics: is the state being written
        (``ok``), failing (``failing``, with why: the buffers are in memory,
        or the ledger cannot be written, and a crash now loses what is not
        written, counted as lost at the restart only if the ledger has it),
        or not kept at all (``memory``); what the buffers lost; and
        ``warnings`` (only when there are some): damage found at start, each
        naming its file."""
        store = self.store
        warnings: list[str] = []
        if store is None:
            state, error = "memory", None
        else:
            ledger = store.ledger
            if ledger.problem is not None:
                warnings.append(ledger.problem)
            if store.damaged_at_start:
                warnings.append(store.damaged_at_start)
            if store.last_error is not None:
                state, error = "failing", store.last_error
            elif not ledger.usable or store.ledger_failing:
                state = "failing"
                error = ledger.problem if not ledger.usable else \
                    f"the ledger {ledger.path} cannot be written"
            else:
                state, error = "ok", None
        out: dict[str, Any] = {"state": state, "error": error,
                               "dropped": sum(h.dropped for h in self.handlers.values())}
        if warnings:
            out["warnings"] = warnings
        return out

    def _disk_full(self) -> bool:
        """The disk is full: drop the oldest quarter of every buffer (the
        quota rule: the newest survive), so that the commit can be tried
        again."""
        dropped = clients = 0
        for handler in self.handlers.values():
            if handler.entries:
                dropped += handler.drop_oldest(max(1, len(handler.entries) // 4))
                clients += 1
                self.store.trim(handler.handle, handler.first_seq,  # type: ignore[union-attr]
                                handler.dropped)
        self.stats["disk_full"] += 1
        self.stats["dropped_disk_full"] += dropped
        if dropped:
            log.warning("mobility state %s: the disk is full: dropped the %d oldest buffered "
                        "notifications of %d clients to make room", self.store.path,  # type: ignore[union-attr]
                        dropped, clients)
        return dropped > 0

    def _remember(self, handler: ClientHandler) -> None:
        if self.store is not None:
            self.store.add_client(StoredClient(
                handler.handle, handler.client_id, handler.secret, handler.quota,
                handler.expiry, handler.moved_out_at, handler.expires_at, handler.dropped,
                P.encode_subscriptions(handler.specs), owner=handler.owner))

    def _forget(self, handler: ClientHandler) -> None:
        if self.handlers.get(handler.client_id) is handler:
            del self.handlers[handler.client_id]
        handler.cancel_timers()
        handler.armed = False
        carry, handler.carry = handler.carry, None
        if carry is not None:   # a take-over never armed: its feed stops too
            carry.into = None
            carry.carried = False
            self._spawn(self._unsubscribe(carry))
        if self.store is not None:
            self.store.remove_client(handler.handle)

    async def _restore(self) -> None:
        """Take back what the store kept: tombstones, then every moved-out
        client with its buffer, subscribed again (before the router accepts
        connections, inside ``elvind``). A big buffer is read a slice per
        loop turn."""
        store = self.store
        assert store is not None
        wall, mono = time.time(), time.monotonic()
        for stone in store.tombstones():
            if stone.until > wall:
                self.tombstones[stone.client_id] = _Tombstone(stone.secret, stone.dropped,
                                                              mono + stone.until - wall)
            else:
                store.remove_tombstone(stone.client_id)
        buffered = 0
        # never a handle with rows in the file: a released buffer's rows may
        # still be there (deleted a slice at a time, cut short by a stop)
        self._next_handle = max(self._next_handle, store.next_handle())
        for row in store.clients():
            handler = ClientHandler(row.client_id, row.secret, row.quota, row.expiry, [],
                                    row.handle)
            handler.moved_out_at, handler.expires_at = row.moved_out_at, row.expires_at
            handler.owner = row.owner
            for chunk in iter_entries(store, row.handle):
                handler.entries.extend(chunk)
                await asyncio.sleep(0)
            # numbering goes on above every seq ever handed out (an emptied
            # buffer's floor, the ledger's mark); what the file lacks below
            # it (damaged rows, writes lost to a full disk or a torn WAL
            # before a crash) is counted in dropped: the client is told
            handler.next_seq, handler.dropped, lost = store.account(
                row, len(handler.entries),
                handler.entries[-1][0] if handler.entries else None)
            if lost:
                self.stats["lost_at_restart"] += lost
                log.error("mobility state %s: client %r lost %d buffered notifications (%s): "
                          "counted in what its move-in reports as dropped", store.path,
                          row.client_id, lost, "; ".join(store.damaged.get(row.handle, [])))
            if row.expires_at <= time.time():
                self._tombstone(handler.client_id, handler.secret,
                                handler.dropped + len(handler.entries))
                store.remove_client(row.handle)
                self.stats["expired"] += 1
                continue
            try:
                handler.specs = P.decode_subscriptions(row.subscriptions, 2**31)
            except P.MobilityError as exc:
                log.error("mobility state %s: the subscriptions of client %r cannot be read "
                          "(%s): its buffer is kept, nothing more is buffered", store.path,
                          row.client_id, exc)
            handler.on_pending = self._on_pending
            handler.restored_seq, handler.restored_dropped = handler.next_seq, handler.dropped
            handler.arm()
            for spec, why in await self._subscribe(handler):
                log.error("mobility: client %r's subscription %d (%r) is refused after the "
                          "restart: %s", row.client_id, spec.id, spec.expression, why)
            self.handlers[row.client_id] = handler
            self._start_expiry(handler, row.expires_at - time.time())
            buffered += len(handler.entries)
            self.stats["restored"] += 1
        self.flush()
        log.info("mobility state %s: %d moved-out clients restored, %d buffered "
                 "notifications", store.path, self.stats["restored"], buffered)

    # -- requests ---------------------------------------------------------------------
    def _on_request(self, notification: Any) -> None:
        attrs = notification.attributes
        kind = attrs.get(P.REQUEST)
        # markers are acted on here, in the order the router routed them
        if kind == P.FENCE_KIND:
            self._on_fence(attrs, bool(notification.secure))
            return
        if kind is None:
            if attrs.get(P.REPLY) == P.MOVE_OUT and notification.secure:
                self._on_own_move_out_reply(attrs)
            return
        if len(self._tasks) >= MAX_PENDING:
            # a flood of requests must not grow memory without bound
            self.stats["overload"] += 1
            return
        self._spawn(self._handle(dict(attrs), bool(notification.secure)))

    def _on_own_move_out_reply(self, attrs: dict[str, Any]) -> None:
        handler = self.handlers.get(attrs.get(P.CLIENT))  # type: ignore[arg-type]
        request_id = attrs.get(P.REQUEST_ID)
        if handler is not None and request_id is not None and handler.arm_id == request_id:
            handler.arm()
            if handler.carry is not None:
                self._take_over(handler)

    def _absorb(self, handler: ClientHandler) -> None:
        """At the move-out of ``handler``, before it is written: what the
        restored buffer it replaces (``handler.carry``) recorded since the
        restart goes into it, and what that one's subscriptions receive
        until ``handler`` is armed goes there too (``into``). The new
        client's row, those entries and the old row's removal are then one
        transaction: a crash at any point of the take-over finds either the
        old buffer whole or the new one with everything (the old row used to
        be replaced at the move-out and its rows carried over only at
        ``arm``: a crash in between lost them, uncounted)."""
        old = handler.carry
        assert old is not None and old.restored_seq is not None
        old.seal()
        carried = [data for seq, data in old.entries if seq >= old.restored_seq]
        handler.pending = [*carried, *handler.pending]
        handler.dropped += old.dropped - old.restored_dropped
        self._forget(old)           # its row goes with the new one's commit
        old.into = handler          # disarmed, it forwards
        if handler.pending:
            self._on_pending(handler)
        handler.carried_count = len(carried)
        log.info("client %r: %d notifications recorded since the restart carried into its "
                 "new buffer", handler.client_id, len(carried))

    def _take_over(self, handler: ClientHandler) -> None:
        """``handler`` is armed (its move-out reply fell here): it records
        on its own from now on; the restored buffer it took over, whose
        subscriptions fed it until this very point, is let go."""
        old, handler.carry = handler.carry, None
        assert old is not None
        crash_point("mobility-take-over")
        old.into = None
        old.carried = False
        self._spawn(self._unsubscribe(old))

    def _on_fence(self, attrs: dict[str, Any], private: bool) -> None:
        client_id, fence = attrs.get(P.CLIENT), attrs.get(P.FENCE)
        handler = self.handlers.get(client_id) if isinstance(client_id, str) else None
        if (not private or handler is None or not isinstance(fence, str)
                or not 0 < len(fence) <= P.MAX_FENCE_LENGTH
                or not isinstance(attrs.get(P.SECRET), str)
                or not _same_secret(handler.secret, attrs.get(P.SECRET))):
            self.stats["malformed"] += 1
            return
        handler.fence(fence)
        self.stats["fences"] += 1
        waiter = self._fence_waiters.pop(fence, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _handle(self, attrs: dict[str, Any], private: bool = False) -> None:
        kind = attrs.get(P.REQUEST)
        request_id = attrs.get(P.REQUEST_ID)
        client_id = attrs.get(P.CLIENT)
        reply_key: bytes | None = None
        try:
            if kind == P.RELEASE:          # no reply: the client does not wait
                if not private:
                    self.stats["insecure"] += 1
                    raise P.MobilityError("a release must be sent with this proxy's key",
                                          "insecure")
                await self._release_request(attrs)
                return
            reply_key = P.get_reply_key(attrs)
            P.get_str(attrs, P.REQUEST_ID)
            if kind == P.HELLO:
                self.stats["hello"] += 1
                await self._send({P.REPLY: P.HELLO, P.PROXY: self.id,
                                  P.REQUEST_ID: attrs[P.REQUEST_ID], P.STATUS: "ok",
                                  P.PROXY_KEY: self.public_key}, reply_key)
                return
            P.get_str(attrs, P.CLIENT)
            if kind in P.PRIVATE_KINDS and not private:
                # Its secret is out already; acting on it would teach clients
                # that sending secrets in the clear works.
                self.stats["insecure"] += 1
                raise P.MobilityError(
                    f"a {kind} request must be sent with this proxy's public key "
                    f"({P.PROXY_KEY}, from a {P.HELLO} request) and deliver_insecure "
                    "false: it carries a secret", "insecure")
            if kind == P.MOVE_OUT:
                await self._move_out(attrs, reply_key)
            elif kind == P.MOVE_IN:
                await self._move_in(attrs, reply_key)
            elif kind == P.DOWNLOAD:
                await self._download(attrs, reply_key)
            else:
                raise P.MalformedRequest(f"{P.REQUEST} must be one of "
                                         f"{', '.join(P.REQUEST_KINDS)}, not {kind!r}")
        except asyncio.CancelledError:
            raise
        except P.MobilityError as exc:
            self.stats["errors"] += 1
            if exc.code == "malformed":
                self.stats["malformed"] += 1
            log.info("mobility %r request from client %r refused: %s (%s)", kind, client_id,
                     exc, exc.code)
            if kind != P.RELEASE:
                await self._send_error(kind, request_id, client_id, reply_key, exc)
        except Exception as exc:  # never let one request hurt the proxy
            self.stats["errors"] += 1
            log.exception("mobility %r request failed", kind)
            if kind != P.RELEASE:
                await self._send_error(kind, request_id, client_id, reply_key,
                                       P.MobilityError(f"internal error: {exc}", "internal"))

    async def _send(self, attrs: dict[str, Any], reply_key: bytes | None,
                    to_self: bool = False) -> None:
        if reply_key is not None:
            keys = P.private_to(reply_key)
            if to_self:
                keys = keys | P.private_to(self.public_key)
            await self.connection.send(attrs, keys=keys, deliver_insecure=False)
        else:  # no private channel to answer on: errors only, never secrets
            await self.connection.send(attrs)

    async def _send_error(self, kind: Any, request_id: Any, client_id: Any,
                          reply_key: bytes | None, exc: P.MobilityError) -> None:
        reply: dict[str, Any] = {P.REPLY: kind if isinstance(kind, str) else "unknown",
                                 P.PROXY: self.id, P.STATUS: "error",
                                 P.ERROR_CODE: exc.code, P.ERROR: str(exc)}
        if isinstance(request_id, str):
            reply[P.REQUEST_ID] = request_id
        if isinstance(client_id, str):
            reply[P.CLIENT] = client_id
        try:
            await self._send(reply, reply_key)
        except Exception as send_exc:  # noqa: BLE001 - the requester may be gone
            log.info("could not send a mobility error reply: %s", send_exc)

    # -- move-out ---------------------------------------------------------------------
    def _replaced_unclaimed(self, old: ClientHandler) -> None:
        """Told, not hidden: what a buffer replaced by its client's owner
        proof held. The client may have had it all live (a move-out whose
        reply it never got) or never (a ticket it gave up), so it is not
        counted as dropped in the new ticket."""
        held = len(old.entries) + len(old.pending) + old.dropped
        self.stats["replaced_unclaimed"] += 1
        self.stats["replaced_unclaimed_held"] += held
        log.warning("client %r: replaced a buffer held under a secret it no longer names "
                    "(its owner proof matched): %d notifications it held are gone, "
                    "lost unless the client had them live", old.client_id, held)

    async def _subscribe(self, handler: ClientHandler
                         ) -> list[tuple[P.SubscriptionSpec, BaseException]]:
        """Subscribe with every one of the client's subscriptions (and its
        keys); the refused ones, with why."""
        specs = handler.specs
        results = await asyncio.gather(*(
            self.connection.subscribe(spec.expression, keys=spec.keys,
                                      accept_insecure=spec.accept_insecure, buffer_size=0,
                                      listener=functools.partial(handler.on_notification,
                                                                 spec.id))
            for spec in specs), return_exceptions=True)
        handler.subscriptions = [r for r in results if not isinstance(r, BaseException)]
        for spec, sub in zip(specs, results, strict=True):
            if not isinstance(sub, BaseException) and sub.id is not None:
                self._routes[sub.id] = (handler, spec.id)
        return [(spec, r) for spec, r in zip(specs, results, strict=True)
                if isinstance(r, BaseException)]

    async def _move_out(self, attrs: dict[str, Any], reply_key: bytes) -> None:
        config = self.config
        client_id = P.get_str(attrs, P.CLIENT)
        specs = P.decode_subscriptions(attrs.get(P.SUBSCRIPTIONS), config.max_subscriptions)
        quota = P.get_number(attrs, P.QUOTA)
        expiry = P.get_number(attrs, P.EXPIRY)
        quota = config.quota if quota is None or quota <= 0 else min(int(quota), config.quota)
        expiry = config.expiry if expiry is None or expiry <= 0 else min(expiry, config.expiry)
        # the client may choose the secret: then it knows it even if this
        # reply never reaches it (the router died), and can still collect
        secret = P.get_str(attrs, P.SECRET, required=False, max_length=P.MAX_SECRET_LENGTH)
        if secret is not None and len(secret) < P.MIN_SECRET_LENGTH:
            raise P.MalformedRequest(f"attribute {P.SECRET} must be at least "
                                     f"{P.MIN_SECRET_LENGTH} characters")
        # the client's last secret, then older ones (space-separated)
        previous = P.get_str(attrs, P.PREVIOUS_SECRET, required=False,
                             max_length=P.MAX_PREVIOUS_SECRETS * (P.MAX_SECRET_LENGTH + 1))
        earlier = previous.split()[:P.MAX_PREVIOUS_SECRETS] if previous else []
        resume = attrs.get(P.RESUME) == 1
        owner = P.get_str(attrs, P.OWNER, required=False, max_length=P.MAX_OWNER_LENGTH)
        if owner is not None and len(owner) < P.MIN_OWNER_LENGTH:
            raise P.MalformedRequest(f"attribute {P.OWNER} must be at least "
                                     f"{P.MIN_OWNER_LENGTH} characters")
        crash_point("mobility-move-out-received")
        async with self._lock(client_id):
            old = self.handlers.get(client_id)
            #: an unfinished take-over (its move-out's reply never came back,
            #: the client stayed attached live): what it holds cannot be
            #: delivered without part of it coming twice, so it is counted
            unfinished: ClientHandler | None = None
            lost_unfinished = 0
            if old is not None:
                # the same client again (its earlier move-out's reply was
                # lost, or its move-in was never released): it proves it
                # with that ticket's secret
                known = (_same_secret(old.secret, secret) or _same_secret(old.secret, previous)
                         or any(_same_secret(old.secret, e) for e in earlier))
                if not known and not (old.owner and _same_secret(old.owner, owner)):
                    raise P.MobilityError(f"client {client_id!r} already has a buffer at this "
                                          "proxy (move in first)", "in-use")
                # not known: a buffer the client lost track of (its secret
                # fell out of the ones it keeps, a ticket it gave up):
                # refusing would lock it out of this proxy until the buffer
                # expires. Its owner proof says it is the same client
                if resume and old.restored_seq is not None:
                    # kept (subscribed, recording) until the new one is armed
                    old.carried = True
                    old.cancel_timers()
                elif old.carry is not None:
                    # kept until the new subscriptions are in: a refused
                    # move-out leaves it as it was
                    unfinished = old
                else:
                    if not known:
                        self._replaced_unclaimed(old)
                    await self._release(old)
                self.stats["superseded"] += 1
            # a retry of this client replaces (or continues) its own buffer,
            # still held while it is carried or unfinished: not one more client
            if len(self.handlers) - (client_id in self.handlers) >= config.max_clients:
                raise P.MobilityError(f"this proxy already buffers for {config.max_clients} "
                                      "clients", "limit")
            handler = ClientHandler(client_id, secret or secrets.token_urlsafe(24), quota,
                                    expiry, specs, self._next_handle)
            self._next_handle += 1
            handler.owner = owner or ""
            handler.on_pending = self._on_pending
            handler.arm_id = attrs[P.REQUEST_ID]
            if old is not None and old.carried:
                handler.carry = old
            failed = await self._subscribe(handler)
            if failed:
                # the restored buffer goes with the refused move-out (the
                # client is attached again, live): what it recorded since the
                # restart is told, not hidden, as for a refusal for want of disk
                lost = _since_restart(handler.carry) if handler.carry is not None else 0
                await self._drop_carry(handler)
                await self._unsubscribe(handler)
                spec, exc = failed[0]
                if lost:
                    self.stats["lost_in_take_over"] += lost
                    log.error("client %r: a resumed move-out was refused (a subscription "
                              "was): the %d notifications its restored buffer recorded since "
                              "the restart are lost", client_id, lost)
                if not isinstance(exc, (ElvinError, SubscriptionError, ValueError, TypeError)):
                    raise exc
                raise P.MobilityError(
                    f"subscription {spec.id} ({spec.expression!r}) refused: {exc}"
                    + (f" (not moved out: the {lost} notifications published for you since "
                       "this router restarted, before you reconnected, are lost)"
                       if lost else ""), "subscription")
            # the client's old connection (or a restored buffer) has what
            # comes meanwhile: the new buffer starts only at the reply
            unannounced = await self._interest_known(client_id, "move-out")
            if unfinished is not None:
                # counted now, not when the retry came: the restored buffer's
                # subscriptions kept feeding it while the new ones were made
                # (and the reply waited for the federation). Its row goes with
                # the new one's commit, which carries the count
                lost_unfinished = (unfinished.dropped + len(unfinished.entries)
                                   + len(unfinished.pending))
                self._forget(unfinished)
                self._spawn(self._unsubscribe(unfinished))
                handler.dropped += lost_unfinished
                self.stats["lost_in_take_over"] += lost_unfinished
                if lost_unfinished:
                    log.error("client %r: its earlier move-out's take-over never finished "
                              "(the reply did not come back): the %d notifications it "
                              "held are lost, counted in what its move-in reports as "
                              "dropped", client_id, lost_unfinished)
            self.handlers[client_id] = handler
            self._start_expiry(handler, expiry)
            if handler.carry is not None:
                self._absorb(handler)
            self._remember(handler)
            if not await self._write_move_out():
                carried = handler.carried_count
                lost = carried + lost_unfinished
                await self._drop_carry(handler)
                await self._release(handler)
                store = self.store
                assert store is not None
                if carried:
                    # the restored buffer goes with the refused move-out: the client
                    # is attached again, live; what it recorded is told, not hidden
                    self.stats["lost_in_take_over"] += carried
                    log.error("client %r: a resumed move-out was refused (%s): the %d "
                              "notifications its restored buffer recorded since the restart "
                              "are lost", client_id, store.last_error, carried)
                raise P.MobilityError(
                    f"this proxy cannot write its state file {store.path} now "
                    f"({store.last_error or 'the write failed'}): not moved out (you stay "
                    + (f"attached; the {lost} notifications published for you since this "
                       "router restarted, before you reconnected, are lost" if lost else
                       "attached and lose nothing") + "); try again later", "storage")
            if self.tombstones.pop(client_id, None) is not None and self.store is not None:
                self.store.remove_tombstone(client_id)
            crash_point("mobility-move-out-committed")
            self.stats["move_out"] += 1
            log.info("client %r moved out: %d subscriptions, quota %d, expiry %g s",
                     client_id, len(specs), quota, expiry)
            # The subscriptions are active (every SubRply is in): only now may
            # the client detach (paper, section 3.2). The reply comes back to
            # us too, and the buffer starts where it falls: what the router
            # routed before it reached the client live.
            reply = {P.REPLY: P.MOVE_OUT, P.PROXY: self.id, P.CLIENT: client_id,
                     P.REQUEST_ID: attrs[P.REQUEST_ID], P.STATUS: "ok",
                     P.SECRET: handler.secret, P.QUOTA: quota,
                     P.EXPIRY: float(expiry), P.PROXY_KEY: self.public_key}
            if unannounced:
                reply[P.UNANNOUNCED] = ", ".join(unannounced)
            await self._send(reply, reply_key, to_self=True)

    async def _interest_known(self, client_id: str, kind: str) -> list[str]:
        """Before a reply that promises "from now on everything reaches
        you" (a move-out: the buffer has it; a move-in: the client has it
        live): wait until the router's federation peers know what its
        subscribers want, at most ``announce_wait`` seconds, without holding
        the loop. Until then what is published at those peers is not
        forwarded here (right after a restart the pull filters are not yet
        announced and acknowledged; after a subscription of ours that
        changes them, for a round trip), lost where no router can count it; so
        the peers that still may not know are returned, and the reply names
        them (``Mobility.Unannounced``) rather than promise what cannot be
        kept. Empty: every peer knows (or no federation).

        The wait ends early once every peer still missing is one waiting
        cannot help (``unreachable``: a dialled peer down for the whole
        bound already, as one that is off for hours), so that such a peer
        costs no reply the bound: it is named at once."""
        if self._interest is None:
            return []
        missing = list(self._interest())
        if not missing:
            return []
        loop = asyncio.get_running_loop()
        if self._hopeless(missing):
            self.stats["unannounced_at_once"] += 1
        else:
            self.stats["interest_waits"] += 1
            log.info("client %r: the %s reply waits until the federation's peers know what "
                     "this router's subscribers want (%s)", client_id, kind,
                     ", ".join(missing[:8]))
            deadline = loop.time() + self.config.announce_wait
            self.awaiting_interest += 1
            try:
                while missing and loop.time() < deadline:
                    await asyncio.sleep(INTEREST_POLL)
                    missing = list(self._interest())
                    if self._hopeless(missing):
                        break
            finally:
                self.awaiting_interest -= 1
        if missing:
            self.stats["unannounced"] += 1
            bound = self.config.announce_wait
            why = (f"their links have been down for over {bound:g} s, not waited for"
                   if self._hopeless(missing) else f"after waiting {bound:g} s")
            log.warning("client %r: %s acknowledged while the federation's peers %s may not "
                        "know yet what this router's subscribers want (%s): what is "
                        "published there until they do may not reach the client, and the "
                        "reply says so", client_id, kind, ", ".join(missing[:8]), why)
        return missing

    def _hopeless(self, missing: Sequence[str]) -> bool:
        """Waiting cannot help: each peer in ``missing`` (not empty) is a
        dialled one down for ``announce_wait`` already (``unreachable``)."""
        if self._unreachable is None or not missing:
            return False
        down = self._unreachable(self.config.announce_wait)
        return all(name in down for name in missing)

    async def _write_move_out(self) -> bool:
        """A move-out is acknowledged only once it is on disk: written now,
        whatever the store's back-off (the disk may have room again); on a
        full disk once more after the WAL's room was handed back. False:
        refuse it (the client stays attached, nothing is lost)."""
        if self.flush(force=True):
            return True
        store = self.store
        if store is None or not store.full:
            return False
        await asyncio.sleep(store.RECLAIM_WAIT)     # the checkpoint thread's truncation
        return self.flush(force=True)

    def _start_expiry(self, handler: ClientHandler, delay: float) -> None:
        handler.timer = asyncio.get_running_loop().call_later(
            max(0.0, delay), lambda: self._spawn(self._expire(handler)))

    async def _unsubscribe(self, handler: ClientHandler) -> None:
        subs, handler.subscriptions = handler.subscriptions, []
        for sub in subs:
            self._routes.pop(sub.id, None)
        await asyncio.gather(*(sub.close() for sub in subs), return_exceptions=True)

    async def _drop_carry(self, handler: ClientHandler) -> None:
        """A move-out that fails lets the restored buffer it would have
        taken over go, as a move-out without ``Resume`` does at once."""
        old, handler.carry = handler.carry, None
        if old is not None:
            old.carried = False
            old.into = None
            await self._release(old)

    async def _release(self, handler: ClientHandler) -> None:
        """The client has its buffer (or left it for a new one): forget it,
        here and on disk."""
        self._forget(handler)
        await self._unsubscribe(handler)
        self.flush()

    async def _release_later(self, handler: ClientHandler) -> None:
        async with self._lock(handler.client_id):
            if self.handlers.get(handler.client_id) is handler:
                await self._release(handler)

    async def _expire(self, handler: ClientHandler) -> None:
        async with self._lock(handler.client_id):
            if self.handlers.get(handler.client_id) is not handler:
                return
            self.flush()
            lost = handler.dropped + len(handler.entries)
            await self._release(handler)
            handler.entries.clear()
            self._tombstone(handler.client_id, handler.secret, lost)
            self.flush()
            self.stats["expired"] += 1
            log.info("buffer of client %r expired unclaimed: %d notifications released",
                     handler.client_id, lost)

    def _tombstone(self, client_id: str, secret: str, lost: int) -> None:
        now = time.monotonic()
        stones = self.tombstones
        stones[client_id] = stone = _Tombstone(secret, lost, now + self.config.tombstone_ttl)
        stones.move_to_end(client_id)
        store = self.store
        if store is not None:
            store.put_tombstone(StoredTombstone(client_id, secret, lost,
                                                time.time() + self.config.tombstone_ttl))
        while stones and (len(stones) > self.config.max_tombstones
                          or next(iter(stones.values())).until < now):
            gone, old = stones.popitem(last=False)
            if store is not None and old is not stone:
                store.remove_tombstone(gone)

    # -- handing a buffer over ------------------------------------------------------------
    async def _take(self, client_id: str, secret: str, fence: str | None = None,
                    request_id: str | None = None, since_restart: bool = False) -> Handover:
        """Check the secret and return the buffer as batches with (count,
        dropped, expired, fenced): what was buffered before the client's
        fence (``fenced``), else before a fence of our own, sent now. The
        handler stays (subscribed, on disk) until the client releases it or
        ``download_timeout`` passes, so that a move-in cut short by a crash
        can be done again; a repeated request gets the same reply.

        ``since_restart``: the client was attached here until the router
        restarted (``Mobility.Resume`` on its move-in: it collects after a
        resumed move-out failed), so of a buffer restored at that restart
        only what it recorded since is owed, as a resumed move-out carries
        (``_absorb``); the rest the client had, by the move-in whose release
        the crash lost."""
        async with self._lock(client_id):
            self.flush()
            handler = self.handlers.get(client_id)
            if handler is None:
                stone = self.tombstones.get(client_id)
                if stone is not None and stone.until >= time.monotonic():
                    if not _same_secret(stone.secret, secret):
                        self.stats["bad_secret"] += 1
                        raise P.MobilityError(f"wrong secret for client {client_id!r}",
                                              "bad-secret")
                    del self.tombstones[client_id]
                    if self.store is not None:
                        self.store.remove_tombstone(client_id)
                        self.flush()
                    return [b""], 0, stone.dropped, True, False
                raise P.MobilityError(f"no buffer for client {client_id!r} at proxy "
                                      f"{self.id!r}", "unknown-client")
            if not _same_secret(handler.secret, secret):
                self.stats["bad_secret"] += 1
                raise P.MobilityError(f"wrong secret for client {client_id!r}", "bad-secret")
            # the same request again (repeated on the bus, say): the same
            # reply. A new request (a move-in done again after one cut short)
            # gets a new cut: what was buffered since belongs to it too
            if handler.handed is not None and handler.handed[0] == (fence, request_id):
                return handler.handed[1]
            packer = P.BatchPacker()
            first, dropped = 0, handler.dropped
            if since_restart and handler.restored_seq is not None:
                # the oldest go first (quota, full disk): those recorded
                # since the restart only once the older ones are gone
                first = handler.restored_seq
                dropped = min(dropped - handler.restored_dropped,
                              max(0, handler.first_seq - first))
            fenced = await handler.cut_sliced(fence, packer, first=first)
            if not fenced and not await handler.cut_sliced(await self._own_fence(handler),
                                                           packer, first=first):
                packer.add(data for seq, data in list(handler.entries)   # fence evicted
                           if seq >= first)
            result = (packer.finish(), packer.count, dropped, False, fenced)
            handler.handed = ((fence, request_id), result)
            if handler.handed_timer is None:
                handler.handed_timer = asyncio.get_running_loop().call_later(
                    self.config.download_timeout,
                    lambda: self._spawn(self._release_later(handler)))
            return result

    async def _own_fence(self, handler: ClientHandler) -> str:
        """Fence the buffer ourselves: a marker to our own key; once it is
        back, everything the router routed before it is in the buffer."""
        fence = secrets.token_hex(8)
        waiter = asyncio.get_running_loop().create_future()
        self._fence_waiters[fence] = waiter
        try:
            await self.connection.send(
                {P.REQUEST: P.FENCE_KIND, P.PROXY: self.id, P.CLIENT: handler.client_id,
                 P.FENCE: fence, P.SECRET: handler.secret},
                keys=P.private_to(self.public_key), deliver_insecure=False)
            try:
                await asyncio.wait_for(waiter, self.config.download_timeout)
            except TimeoutError:
                raise P.MobilityError("the proxy's own fence did not come back from its "
                                      "router", "internal") from None
        finally:
            self._fence_waiters.pop(fence, None)
        self.flush()
        return fence

    async def _send_batches(self, kind: str, attrs: dict[str, Any], reply_key: bytes,
                            blobs: Sequence[bytes], count: int, dropped: int,
                            expired: bool, fence: str | None = None,
                            unannounced: Sequence[str] = ()) -> None:
        for index, blob in enumerate(blobs):
            reply = {P.REPLY: kind, P.PROXY: self.id, P.CLIENT: attrs[P.CLIENT],
                     P.REQUEST_ID: attrs[P.REQUEST_ID], P.STATUS: "ok",
                     P.BATCH: index, P.BATCH_COUNT: len(blobs),
                     P.NOTIFICATIONS: blob, P.COUNT: count, P.DROPPED: dropped,
                     P.EXPIRED: int(expired)}
            if fence is not None:
                reply[P.FENCE] = fence   # cut at the client's fence
            if unannounced:
                reply[P.UNANNOUNCED] = ", ".join(unannounced)
            await self._send(reply, reply_key)
            crash_point("mobility-move-in-handed")

    async def _download(self, attrs: dict[str, Any], reply_key: bytes) -> None:
        """Another proxy collects a client's buffer (step 4 of the paper's
        full move-in, the move-out proxy's side)."""
        client_id = P.get_str(attrs, P.CLIENT)
        secret = P.get_str(attrs, P.SECRET, max_length=P.MAX_SECRET_LENGTH)
        crash_point("mobility-download-received")
        blobs, count, dropped, expired, _fenced = await self._take(
            client_id, secret, request_id=attrs[P.REQUEST_ID])
        self.stats["download"] += 1
        log.info("client %r: %d buffered notifications downloaded by %r", client_id, count,
                 attrs.get(P.REQUESTER))
        await self._send_batches(P.DOWNLOAD, attrs, reply_key, blobs, count, dropped, expired)

    def _is_me(self, name: str) -> bool:
        return name in self.ids or canonical(name) in self.ids

    async def _move_in(self, attrs: dict[str, Any], reply_key: bytes) -> None:
        """A client moved in here: hand over its buffer, ours (abbreviated
        move-in) or the move-out proxy's (full move-in)."""
        client_id = P.get_str(attrs, P.CLIENT)
        secret = P.get_str(attrs, P.SECRET, max_length=P.MAX_SECRET_LENGTH)
        previous = P.get_str(attrs, P.FROM, max_length=1024)
        from_url = P.get_str(attrs, P.FROM_URL, required=False, max_length=1024)
        via = P.get_str(attrs, P.VIA, required=False) or P.VIA_DIRECT
        from_key = P.get_public_key(attrs, P.FROM_KEY, required=False)
        # a key the client pinned is not asked for again (the hello an
        # active attacker could answer): a key file survives a state reset
        pinned = from_key is not None and type(attrs.get(P.FROM_KEY_PINNED)) is int \
            and attrs[P.FROM_KEY_PINNED] == 1      # not 1.0 nor "1": only an integer 1
        fence = P.get_str(attrs, P.FENCE, required=False, max_length=P.MAX_FENCE_LENGTH)
        if via not in (P.VIA_DIRECT, P.VIA_BUS):
            raise P.MalformedRequest(f"{P.VIA} must be {P.VIA_DIRECT!r} or {P.VIA_BUS!r}")
        fenced = False
        if self._is_me(previous):
            blobs, count, dropped, expired, fenced = await self._take(
                client_id, secret, fence, request_id=attrs[P.REQUEST_ID],
                since_restart=attrs.get(P.RESUME) == 1)
        else:
            blobs, count, dropped, expired = await self._fetch(
                previous, from_url, via, client_id, secret, from_key, checked=pinned)
        # the client is subscribed here already: what it gets live from now on
        unannounced = await self._interest_known(client_id, "move-in")
        self.stats["move_in"] += 1
        log.info("client %r moved in from %r: %d notifications, %d dropped", client_id,
                 previous, count, dropped)
        await self._send_batches(P.MOVE_IN, attrs, reply_key, blobs, count, dropped, expired,
                                 fence if fenced else None, unannounced)

    async def _release_request(self, attrs: dict[str, Any]) -> None:
        """The client has delivered its buffer: release it here, or tell the
        move-out proxy (over the path the download took)."""
        client_id = P.get_str(attrs, P.CLIENT)
        secret = P.get_str(attrs, P.SECRET, max_length=P.MAX_SECRET_LENGTH)
        previous = P.get_str(attrs, P.FROM, required=False, max_length=1024)
        if previous is not None and not self._is_me(previous):
            request = {P.REQUEST: P.RELEASE, P.PROXY: previous, P.CLIENT: client_id,
                       P.SECRET: secret}
            from_key = P.get_public_key(attrs, P.FROM_KEY, required=False)
            via = P.get_str(attrs, P.VIA, required=False) or P.VIA_DIRECT
            url = P.get_str(attrs, P.FROM_URL, required=False, max_length=1024) or previous
            await self._on_path(previous, url, via, from_key,
                                lambda conn, key: conn.send(request, keys=P.private_to(key),
                                                            deliver_insecure=False))
            return
        async with self._lock(client_id):
            handler = self.handlers.get(client_id)
            if handler is None:
                return           # gone already (released, expired)
            if not _same_secret(handler.secret, secret):
                self.stats["bad_secret"] += 1
                raise P.MobilityError(f"wrong secret for client {client_id!r}", "bad-secret")
            crash_point("mobility-release-received")
            await self._release(handler)
            self.stats["released"] += 1
            crash_point("mobility-released")

    async def _on_path(self, previous: str, url: str, via: str, key: bytes | None,
                       action: Callable[[Any, bytes], Awaitable[Any]],
                       checked: bool = True) -> Any:
        """``action(connection, previous's key)`` where the move-out proxy
        ``previous`` can hear it: through our own router (``bus``), or a
        connection of its own to ``url`` (``direct``), closed after. A given
        ``key`` is checked with a hello first unless ``checked``."""
        timeout = self.config.download_timeout
        if via == P.VIA_BUS:
            if key is None:
                key = await hello(self.connection, previous, timeout, retry=0.1)
            elif not checked:
                key = await check_key(self.connection, previous, key, timeout, retry=0.1)
            return await action(self.connection, key)
        from elvin.client import connect
        try:
            async with asyncio.timeout(timeout):
                conn = await connect(url)
        except (ElvinError, OSError, TimeoutError, URIError, ValueError) as exc:
            raise P.MobilityError(f"cannot reach the move-out proxy's router {url!r}: {exc}",
                                  "unreachable") from None
        try:
            if key is None:
                key = await hello(conn, previous, timeout)
            elif not checked:
                key = await check_key(conn, previous, key, timeout)
            return await action(conn, key)
        except (ElvinError, OSError) as exc:
            # that router died under the request (as it subscribed for the
            # reply, say): unreachable, as a connection lost while waiting is
            raise P.MobilityError(f"the connection to the move-out proxy's router {url!r} "
                                  f"was lost: {exc}", "unreachable") from None
        finally:
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await conn.close(timeout=2)

    async def _fetch(self, previous: str, from_url: str | None, via: str, client_id: str,
                     secret: str, from_key: bytes | None, checked: bool = False
                     ) -> tuple[list[bytes], int, int, bool]:
        """Download the buffer from the move-out proxy: the request holds the
        secret, so it is sent with that proxy's public key (from the client's
        ticket, or asked for with a hello on the same path). A ticket's key
        is checked first (see ``check_key``) unless ``checked``: the client
        pinned it."""
        request = {P.REQUEST: P.DOWNLOAD, P.PROXY: previous, P.CLIENT: client_id,
                   P.SECRET: secret, P.REQUESTER: self.id}
        timeout = self.config.download_timeout
        # over the bus the reply subscription may not have reached the old
        # router when the request does: repeat it (same id) until answered
        retry = 0.1 if via == P.VIA_BUS else None
        reply = await self._on_path(
            previous, from_url or previous, via, from_key,
            lambda conn, key: exchange(conn, request, timeout, retry=retry, to_key=key),
            checked=checked)
        return reply.blobs, reply.count, reply.dropped, reply.expired

    # -- ping -------------------------------------------------------------------------
    def _on_ping(self, notification: Any) -> None:
        attrs = notification.attributes
        client_id, ping_id = attrs.get(P.CLIENT), attrs.get(P.PING_ID)
        if not isinstance(client_id, str) or not isinstance(ping_id, str):
            self.stats["malformed"] += 1
            return
        if len(self._tasks) >= MAX_PENDING:
            self.stats["overload"] += 1
            return
        self.stats["pings"] += 1
        # The response travelling back through the routers is what tells the
        # client that routes towards its new router are in place (section 3.3).
        self._spawn(self.connection.send({P.PING: "response", P.PROXY: self.id,
                                          P.CLIENT: client_id, P.PING_ID: ping_id}))


# -- inside elvind ------------------------------------------------------------------
# -- elvin-mobility-proxy ------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from elvin.cli_common import ToolParser, add_log_level_argument
    from elvin.router_url import add_router_argument

    parser = ToolParser(
        prog="elvin-mobility-proxy",
        description="Mobility proxy for Elvin clients that move between routers: "
                    "buffers for moved-out clients and hands the buffer over on move-in.")
    add_router_argument(parser, what="the router to serve")
    parser.add_argument("--id", help="the proxy's name (default: the router URL)")
    parser.add_argument("--alias", action="append", default=[],
                        help="another name the proxy answers to (repeatable)")
    parser.add_argument("--quota", type=int, default=ProxyConfig.quota,
                        help="most notifications buffered per client (default %(default)s)")
    parser.add_argument("--expiry", type=float, default=ProxyConfig.expiry,
                        help="seconds an unclaimed buffer is kept (default %(default)s)")
    parser.add_argument("--max-clients", type=int, default=ProxyConfig.max_clients)
    parser.add_argument("--key-file", metavar="PATH",
                        help="the proxy's raw private key (the file's bytes); gives it a "
                             "stable public key that clients can pin (default: a new "
                             "random key at each start)")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="keep the buffers (and the key, unless --key-file) in DIR, "
                             "so that they survive a restart of the proxy; inside elvind "
                             "(elvind --mobility --state-dir) they are also safe from a "
                             "crash of the router")
    parser.add_argument("--state-reset", action="store_true",
                        help="move the state found in --state-dir aside (never deleted)")
    add_log_level_argument(parser, "info")
    return parser


async def _run(url: str, config: ProxyConfig, store: MobilityStore | None = None) -> None:
    import signal

    proxy = MobilityProxy(url, config, reconnect=True, store=store)
    try:
        await proxy.start()
    except BaseException:
        if store is not None:
            store.close()
        raise
    print(f"elvin-mobility-proxy {proxy.id!r} serving {proxy.connection.url} "
          f"(public key {proxy.public_key.hex()})", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    closed = proxy.connection.closed
    waiter = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiter, closed}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    await proxy.stop()


def main(argv: Sequence[str] | None = None) -> int:
    from elvin.cli_common import EXIT_OK, EXIT_USAGE, ToolError, fail, setup_logging
    from elvin.router_url import choose_router_url
    from elvin.tools import CONNECT_ERRORS, connect_failure

    prog = "elvin-mobility-proxy"
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level, prog=prog)
    try:
        url = choose_router_url(args.elvin, what="router URL").url
        key = load_key_file(args.key_file) if args.key_file else None
        config = ProxyConfig(id=args.id, aliases=tuple(args.alias), quota=args.quota,
                             expiry=args.expiry, max_clients=args.max_clients,
                             key=key).validate()
    except ToolError as exc:
        return exc.report(prog)
    except (OSError, ValueError) as exc:
        return fail(prog, str(exc), EXIT_USAGE)
    from elvin.daemon.statedir import StateDir, StateError
    if args.state_reset and not args.state_dir:
        return fail(prog, "--state-reset needs --state-dir (the state to move aside)",
                    EXIT_USAGE)
    state = store = None
    try:
        if args.state_dir:
            state = StateDir.open(args.state_dir, owner=prog)
            store = MobilityStore.open(state.path, reset=args.state_reset)
    except StateError as exc:
        if state is not None:
            state.close()
        return fail(prog, str(exc), EXIT_USAGE)
    try:
        asyncio.run(_run(url, config, store))
    except StateError as exc:      # found at start: a row damaged inside the file
        return fail(prog, str(exc), EXIT_USAGE)
    except CONNECT_ERRORS as exc:
        # unreachable or lost (2), or a request the router refused, e.g. a
        # Nack to ConnRqst (3): one line either way, never a traceback
        return connect_failure(url, exc, f"cannot reach the router at {url}: ").report(prog)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        if state is not None:
            state.close()
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
