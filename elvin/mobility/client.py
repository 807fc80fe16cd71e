"""The mobility client library: ``MobileConnection`` and the requests it makes.

``MobileConnection`` wraps an ``elvin.client.Connection`` the way the paper's
client library wraps the target API: subscriptions made through it are kept
(as ``MobileSubscription`` objects that outlive any one connection), and it
adds ``move_out()`` and ``move_in()``. Applications that manage their own
subscriptions (the tickertape) can use the lower-level ``request_move_out``,
``request_move_in`` and ``ping`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import secrets
import time
import uuid
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from elvin.client import Notification
from elvin.client._stream import EventStream
from elvin.errors import ElvinError
from elvin.keys import EMPTY_KEYS, Keys
from elvin.mobility import protocol as P
from elvin.mobility.exchange import Reply, check_key, exchange, hello
from elvin.mobility.proxy import canonical

__all__ = [
    "MobileConnection",
    "MobileSubscription",
    "MoveInReport",
    "Ticket",
    "hello",
    "ping",
    "request_move_in",
    "request_move_out",
]

SYNC_OPTIONS = ("none", "ping", "delay")
#: live deliveries remembered after a failed move-in for ``collect()``
MAX_OVERLAP = 200_000


def _content(attrs: Mapping[str, Any]) -> frozenset:
    """A notification's identity for ``collect()``: its attributes."""
    return frozenset(attrs.items())

log = logging.getLogger("elvin.mobility")


@dataclass(frozen=True)
class Ticket:
    """What a client needs to collect its buffer: handed out at move-out.
    ``secret`` authenticates the download; keep it to yourself.
    ``proxy_key``: the move-out proxy's public key, which the move-in and
    download requests (they carry the secret) are sent with."""

    client_id: str
    proxy: str           # the move-out proxy's id
    router_url: str      # the router it serves (for the direct download)
    secret: str = field(repr=False)    # never in logs
    quota: int
    expiry: float
    moved_out_at: float
    proxy_key: bytes = field(default=b"", repr=False)
    #: False when the router went away before the proxy confirmed the
    #: move-out: the proxy may or may not hold a buffer under this secret
    confirmed: bool = True
    #: federation peers of the router that may not have known, when the
    #: proxy confirmed, what it subscribed for (it had just restarted, say):
    #: what is published there until they do may be missing from the buffer,
    #: uncounted (``Mobility.Unannounced``); empty when every peer knew
    unannounced: tuple[str, ...] = ()
    #: the client was attached at this proxy's router until it restarted
    #: (the ticket of a failed resumed move-out, ``MobileConnection.
    #: collect``): only what a buffer restored at the restart recorded since
    #: is owed (``Mobility.Resume`` on the move-in), the rest the client had
    since_restart: bool = False


@dataclass
class MoveInReport:
    """The outcome of a move-in: ``caught_up`` buffered notifications were
    delivered; ``dropped`` were lost at the proxy (quota, or ``expired``);
    ``duplicates`` were suppressed (with ``dedup``); ``delay`` is the time
    move_in took (seconds); ``abbreviated`` when the client came back to the
    proxy it left; ``ping_ok`` None unless the ping option ran."""

    caught_up: int = 0
    dropped: int = 0
    expired: bool = False
    duplicates: int = 0
    abbreviated: bool = False
    ping_ok: bool | None = None
    delay: float = 0.0
    merged_live: int = 0
    #: federation peers of the new router that may not have known, when
    #: the proxy answered, what the client subscribed to there: what is
    #: published at them until they do may not arrive (``Mobility.Unannounced``)
    unannounced: tuple[str, ...] = ()


# -- the protocol's client-side requests --------------------------------------------
async def request_move_out(connection: Any, subscriptions: Sequence[P.SubscriptionSpec], *,
                           client_id: str, proxy: str | None = None, quota: int | None = None,
                           expiry: float | None = None, timeout: float = 10.0,
                           proxy_key: bytes | None = None, secret: str | None = None,
                           previous_secret: str | None = None,
                           on_reply: Callable[[dict[str, Any]], None] | None = None,
                           resume: bool = False, owner_key: bytes | None = None) -> Ticket:
    """Ask the proxy (``proxy``, default the connection's router URL) to
    subscribe for ``client_id``; returns once it has, with the ticket.

    The request holds the subscriptions' raw keys, so it goes privately to
    the proxy: with ``proxy_key`` (its public key, if pinned) or the key a
    ``hello`` exchange returns. ``secret``: the download secret, chosen by
    the client (at least 16 characters; default: the proxy chooses), so that
    it is known even if the reply is lost. ``previous_secret``: the secret of
    this client's previous ticket, which lets the proxy replace a buffer it
    still holds for it. ``owner_key``: a key only this client holds; the
    request carries its proof for this proxy (``P.owner_proof``), which lets
    the proxy replace a buffer this client made there under a secret it has
    since forgotten. ``on_reply`` is called as the reply arrives (see
    ``exchange``): the proxy buffers what the router routes after it."""
    proxy_id = proxy or connection.url
    if proxy_key is None:
        proxy_key = await hello(connection, proxy_id, timeout)
    request: dict[str, Any] = {P.REQUEST: P.MOVE_OUT, P.PROXY: proxy_id, P.CLIENT: client_id,
                               P.SUBSCRIPTIONS: P.encode_subscriptions(subscriptions)}
    if quota is not None:
        request[P.QUOTA] = int(quota)
    if expiry is not None:
        request[P.EXPIRY] = float(expiry)
    if secret is not None:
        request[P.SECRET] = secret
    if previous_secret is not None:
        request[P.PREVIOUS_SECRET] = previous_secret
    if resume:
        request[P.RESUME] = 1
    if owner_key is not None:
        request[P.OWNER] = P.owner_proof(owner_key, proxy_id)
    reply = await exchange(connection, request, timeout, to_key=proxy_key, on_reply=on_reply)
    attrs = reply.attributes
    secret = attrs.get(P.SECRET)
    if not isinstance(secret, str):
        raise P.MobilityError("the proxy's move-out reply carries no secret", "malformed")
    granted_quota = attrs.get(P.QUOTA)
    granted_expiry = attrs.get(P.EXPIRY)
    unannounced = P.unannounced_names(attrs)
    if unannounced:
        log.warning("client %s moved out at %s while its federation peers %s may not know "
                    "yet what it subscribed for: what is published there until they do may "
                    "be missing from the buffer", client_id, proxy_id, ", ".join(unannounced))
    return Ticket(client_id, proxy_id, connection.url, secret,
                  granted_quota if isinstance(granted_quota, int) else 0,
                  float(granted_expiry) if isinstance(granted_expiry, (int, float)) else 0.0,
                  time.time(), proxy_key, unannounced=unannounced)


async def request_move_in(connection: Any, ticket: Ticket, *, proxy: str | None = None,
                          previous_proxy: str | None = None, previous_url: str | None = None,
                          via: str = P.VIA_DIRECT, timeout: float = 30.0,
                          proxy_key: bytes | None = None, fence: str | None = None,
                          from_key_pinned: bool = False) -> tuple[list[P.Entry], Reply]:
    """Ask the proxy here (default: the connection's router URL) for the
    buffer ``ticket`` stands for: held by the same proxy (abbreviated move-in)
    or downloaded from the move-out proxy (full move-in). Returns the buffered
    notifications in arrival order, and the reply (counts, dropped, expired).

    The request holds the secret, so it goes privately to the proxy here:
    with ``proxy_key``, the ticket's key when it is the move-out proxy, or
    the key a ``hello`` returns. The ticket's key also goes along (as
    ``From-Key``) so that the proxy here can send the download privately.
    ``fence``: the id of a fence the client placed at the proxy here; a
    reply that repeats it (``Mobility.Fence``) holds only what was buffered
    before it. Once the reply is complete the proxies are told to release
    the buffer (a ``release`` request, unanswered). ``from_key_pinned``: the
    ticket's key is one the client pinned, so the proxy here does not check
    it with a hello (see ``check_key``)."""
    here = proxy or connection.url
    previous = previous_proxy or ticket.proxy
    from_url = previous_url or (previous if previous_proxy else ticket.router_url)
    same_as_ticket = canonical(previous) == canonical(ticket.proxy)
    if proxy_key is None:
        if ticket.proxy_key and same_as_ticket and canonical(here) == canonical(previous):
            proxy_key = ticket.proxy_key
        else:
            proxy_key = await hello(connection, here, min(timeout, 10.0))
    request: dict[str, Any] = {
        P.REQUEST: P.MOVE_IN, P.PROXY: here, P.CLIENT: ticket.client_id,
        P.SECRET: ticket.secret, P.FROM: previous, P.FROM_URL: from_url, P.VIA: via}
    if ticket.proxy_key and same_as_ticket:
        request[P.FROM_KEY] = ticket.proxy_key
        if from_key_pinned:
            request[P.FROM_KEY_PINNED] = 1
    if fence is not None:
        request[P.FENCE] = fence
    if ticket.since_restart:
        request[P.RESUME] = 1
    reply = await exchange(connection, request, timeout, to_key=proxy_key)
    entries: list[P.Entry] = []
    for blob in reply.blobs:
        entries.extend(P.decode_batch(blob))
    # the proxies keep the buffer until they hear it arrived (a move-in cut
    # short by a crash can then be done again): nothing waits for an answer
    release = {P.REQUEST: P.RELEASE, P.PROXY: here, P.CLIENT: ticket.client_id,
               P.SECRET: ticket.secret, P.FROM: previous, P.FROM_URL: from_url, P.VIA: via}
    if P.FROM_KEY in request:
        release[P.FROM_KEY] = request[P.FROM_KEY]
    with contextlib.suppress(ElvinError, OSError):
        await connection.send(release, keys=P.private_to(proxy_key), deliver_insecure=False)
    return entries, reply


async def ping(connection: Any, proxy: str, client_id: str, *, interval: float = 0.05,
               timeout: float = 5.0) -> bool:
    """The paper's ping synchronisation: publish ping requests for the
    move-out proxy through the bus until one of its responses comes back
    (True), or ``timeout`` passes (False). Call it after subscribing at the
    new router: a response proves routes to here are in place."""
    ping_id = secrets.token_hex(8)
    answered = asyncio.get_running_loop().create_future()

    def on_response(_notification: Any) -> None:
        if not answered.done():
            answered.set_result(True)

    sub = await connection.subscribe(
        f"{P.PING} == \"response\" && {P.CLIENT} == {P.quote(client_id)} && "
        f"{P.PING_ID} == {P.quote(ping_id)}", buffer_size=0, listener=on_response)
    try:
        deadline = time.monotonic() + timeout
        while not answered.done() and time.monotonic() < deadline:
            await connection.send({P.PING: "request", P.PROXY: proxy, P.CLIENT: client_id,
                                   P.PING_ID: ping_id})
            await asyncio.wait([answered], timeout=interval)
        return answered.done()
    finally:
        with contextlib.suppress(ElvinError, OSError):
            await sub.close()


# -- MobileSubscription ---------------------------------------------------------------
class MobileSubscription:
    """A subscription that survives moves: iterate it, ``await get()``, or
    add listeners, as with ``elvin.client.Subscription``. Notifications
    buffered while the client was away arrive here on move-in."""

    def __init__(self, owner: MobileConnection, sub_id: int, expression: str,
                 accept_insecure: bool, buffer_size: int, keys: Keys = EMPTY_KEYS) -> None:
        self.owner = owner
        self.id = sub_id
        self.expression = expression
        self.accept_insecure = accept_insecure
        #: the subscription's keys: the client's own state, used again at
        #: every router it moves to (never taken back from the wire)
        self.keys = keys
        self.closed = False
        self.delivered = 0
        self.subscription: Any = None    # the current connection's Subscription
        # the same bounded buffer + listeners as elvin.client.Subscription, so
        # that iterating, get() and drop counting behave exactly alike
        self._stream = EventStream(buffer_size, "mobile subscription")

    def _push(self, notification: Any) -> None:
        self.delivered += 1
        self._stream.push(notification)

    def _end(self) -> None:
        """Closed: iteration ends once what is buffered has been read."""
        self.closed = True
        self._stream.end()

    @property
    def dropped(self) -> int:
        """Notifications dropped from the iterator buffer (oldest first)."""
        return self._stream.dropped

    def add_listener(self, fn: Callable[[Any], object]) -> None:
        self._stream.add_listener(fn)

    def remove_listener(self, fn: Callable) -> None:
        self._stream.remove_listener(fn)

    @property
    def pending(self) -> int:
        return self._stream.pending

    def get_nowait(self) -> Any:
        return self._stream.get_nowait()

    async def get(self, timeout: float | None = None) -> Any:
        """The next notification; SubscriptionClosedError once closed and
        drained, TimeoutError after ``timeout`` seconds."""
        return await self._stream.get(timeout)

    def __aiter__(self) -> MobileSubscription:
        return self

    async def __anext__(self) -> Any:
        return await self._stream.next()

    async def close(self) -> None:
        if self.closed:
            return
        self._end()
        self.owner._subs.pop(self.id, None)
        sub, self.subscription = self.subscription, None
        if sub is not None:
            with contextlib.suppress(ElvinError, OSError):
                await sub.close()

    def __repr__(self) -> str:
        return f"<MobileSubscription {self.id} {self.expression!r}>"


# -- MobileConnection -------------------------------------------------------------------
class MobileConnection:
    """A connection that can move out and move in (paper, section 3).

    ``MobileConnection(conn)`` wraps an open connection (or ``await
    MobileConnection.open(url)``). ``client_id`` identifies the client to the
    proxies (default: random). ``proxy`` is the id of the proxy at the
    current router (default: the router's URL, which is what proxies call
    themselves by default). ``dedup=(producer_attr, seq_attr)`` suppresses a
    notification whose (producer, sequence) was already delivered; without it
    duplicates are delivered, as in the paper. ``quota``/``expiry`` are asked
    of the proxy at move-out (it may grant less). ``proxy_keys``: public
    keys of proxies known in advance, by proxy id (``MobilityProxy.public_key``
    of a proxy with a configured ``key``): requests to those proxies are sent
    with the pinned key instead of one learnt from a ``hello``, which an
    active attacker could answer (see the ``elvin.mobility`` threat model).
    ``owner_key`` (default: random, kept for this object's life): the key
    whose per-proxy proof (``Mobility.Owner``) lets a move-out replace a
    buffer this client left at a proxy and lost track of, instead of being
    refused ``in-use`` until it expires; a program that keeps its
    ``client_id`` across restarts keeps this too (at least 16 bytes, private).

    Connection-level keys (``set_keys``, as ``Connection.set_keys``, or the
    keys the wrapped connection was opened with) move too: they are the
    client's own state (``notification_keys``, ``subscription_keys``), the
    subscription keys go to the proxy at move-out merged into every
    subscription's own keys (the router combines them the same way), and
    both are set again on the new connection at move-in.
    """

    def __init__(self, connection: Any, *, client_id: str | None = None,
                 proxy: str | None = None, dedup: tuple[str, str] | None = None,
                 quota: int | None = None, expiry: float | None = None,
                 timeout: float = 10.0, download_timeout: float = 30.0,
                 proxy_keys: Mapping[str, bytes] | None = None,
                 owner_key: bytes | None = None) -> None:
        if owner_key is not None and (not isinstance(owner_key, bytes) or len(owner_key) < 16):
            raise ValueError("owner_key must be at least 16 bytes")
        self._conn = connection
        self.proxy_keys = {canonical(k): bytes(v) for k, v in (proxy_keys or {}).items()}
        self.client_id = client_id or uuid.uuid4().hex
        self.proxy = proxy
        self.dedup = dedup
        self.quota = quota
        self.expiry = expiry
        self.timeout = timeout
        self.download_timeout = download_timeout
        self.state = "connected"
        self.ticket: Ticket | None = None
        self.duplicates = 0
        self._subs: dict[int, MobileSubscription] = {}
        self._next_id = 0
        self._listeners: list[Callable[[Any], object]] = []
        self._merging = False
        #: moved out: the proxy's reply arrived, what comes after it on the
        #: old connection is in the buffer, not for delivery here
        self._live_off = False
        #: where the fence of the current move-in fell in the merge queue
        self._fence_at: int | None = None
        #: the secret of the last ticket: proves to a proxy that a buffer it
        #: still holds for this client id is ours to replace
        self._last_secret: str | None = None
        #: the secrets before it (newest last): a move-out whose outcome was
        #: unknown (the router died) replaced the last one, but the proxy may
        #: still hold a buffer under an older one (a release lost in a crash)
        self._older_secrets: deque[str] = deque(maxlen=P.MAX_PREVIOUS_SECRETS - 1)
        #: proves to a proxy that a buffer made there is this client's even
        #: when none of the secrets above is its own (``Mobility.Owner``)
        self._owner_key = owner_key or secrets.token_bytes(32)
        #: after a move-in whose download failed (the client stays attached
        #: and live here): what was delivered live since its subscriptions
        #: here were made, by content, so that ``collect()`` leaves out the
        #: buffered copies of them; None when there is nothing to collect
        self._overlap: Counter | None = None
        self._merge_queue: deque[list] = deque()
        self._last_live: dict | None = None
        self._last_decision: tuple[dict | None, bool] = (None, True)
        self._seen: OrderedDict[Any, tuple[deque, set]] = OrderedDict()
        self._lock = asyncio.Lock()
        #: connection-level keys: the client's own state, set again on every
        #: connection it moves to (never taken back from the wire)
        self.notification_keys: Keys = EMPTY_KEYS
        self.subscription_keys: Keys = EMPTY_KEYS
        self._remember_keys(connection)

    @classmethod
    async def open(cls, url: str, **kwargs: Any) -> MobileConnection:
        from elvin.client import connect
        return cls(await connect(url), **kwargs)

    @property
    def connection(self) -> Any:
        """The current ``elvin.client.Connection`` (None while moved out)."""
        return self._conn

    @property
    def subscriptions(self) -> list[MobileSubscription]:
        return list(self._subs.values())

    def add_listener(self, fn: Callable[[Any], object]) -> None:
        """``fn(notification)`` once per notification delivered to any of the
        subscriptions (however many it matched), live or caught up."""
        self._listeners.append(fn)

    # -- using it ------------------------------------------------------------------------
    async def subscribe(self, expression: str, *, keys: Keys | None = None,
                        accept_insecure: bool = True,
                        listener: Callable[[Any], object] | None = None,
                        buffer_size: int = 1000) -> MobileSubscription:
        """Subscribe now, and wherever the client moves. ``keys`` (as for
        ``Connection.subscribe``) move too: the move-out request hands them,
        raw keys included, privately to the proxy, which subscribes with
        them while the client is away."""
        if self.state != "connected":
            raise P.MobilityError(f"cannot subscribe while {self.state}", "state")
        if keys is not None and not isinstance(keys, Keys):
            raise TypeError(f"keys must be elvin.Keys, not {type(keys).__name__}")
        msub = MobileSubscription(self, self._next_id, expression, accept_insecure,
                                  buffer_size, keys or EMPTY_KEYS)
        if listener is not None:
            msub.add_listener(listener)
        await self._attach(msub, self._conn)
        self._next_id += 1
        self._subs[msub.id] = msub
        return msub

    async def set_keys(self, *, add_notification: Keys | None = None,
                       del_notification: Keys | None = None,
                       add_subscription: Keys | None = None,
                       del_subscription: Keys | None = None) -> None:
        """Change the connection-level keys (``Connection.set_keys`` on the
        current connection), and remember them: they move with the client.
        The subscription keys apply to every subscription, here, at the
        proxy while away (merged into each subscription's keys) and at the
        next router; the notification keys to what ``send`` publishes."""
        async with self._lock:
            if self.state != "connected" or self._conn is None:
                raise P.MobilityError(f"cannot set keys while {self.state}", "state")
            await self._conn.set_keys(add_notification=add_notification,
                                      del_notification=del_notification,
                                      add_subscription=add_subscription,
                                      del_subscription=del_subscription)
            self._remember_keys(self._conn)

    def _remember_keys(self, conn: Any) -> None:
        """Keep the connection's connection-level keys as the client's state
        (they are local: what this client set, never what a router sent)."""
        notification = getattr(conn, "notification_keys", None)
        subscription = getattr(conn, "subscription_keys", None)
        self.notification_keys = notification if isinstance(notification, Keys) else EMPTY_KEYS
        self.subscription_keys = subscription if isinstance(subscription, Keys) else EMPTY_KEYS

    async def _restore_keys(self, conn: Any) -> None:
        """Set the remembered connection-level keys on a new connection
        (those it lacks: adding a key twice is a Nack)."""
        add_n = self.notification_keys - conn.notification_keys
        add_s = self.subscription_keys - conn.subscription_keys
        if add_n or add_s:
            await conn.set_keys(add_notification=add_n if add_n else None,
                                add_subscription=add_s if add_s else None)

    async def send(self, notification: Mapping[str, Any], **kwargs: Any) -> bool:
        """Publish through the current router. Publishing while moved out is
        the application's business (the paper: a local buffer suffices)."""
        if self._conn is None or self.state == "moved-out":
            raise P.MobilityError("moved out: publish after move_in", "state")
        return await self._conn.send(notification, **kwargs)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
        for msub in list(self._subs.values()):
            msub._end()

    async def _attach(self, msub: MobileSubscription, conn: Any) -> None:
        msub.subscription = await conn.subscribe(
            msub.expression, keys=msub.keys, accept_insecure=msub.accept_insecure,
            buffer_size=0,
            listener=functools.partial(self._on_live, msub))

    # -- delivery ---------------------------------------------------------------------------
    def _accept(self, attrs: Mapping[str, Any]) -> bool:
        """Duplicate suppression by (producer, sequence), when configured and
        both attributes are present."""
        if self.dedup is None:
            return True
        producer = attrs.get(self.dedup[0])
        seq = attrs.get(self.dedup[1])
        if producer is None or not isinstance(seq, int):
            return True
        seen = self._seen.get(producer)
        if seen is None:
            seen = self._seen[producer] = (deque(), set())
            while len(self._seen) > 10_000:
                self._seen.popitem(last=False)
        order, members = seen
        if seq in members:
            self.duplicates += 1
            return False
        order.append(seq)
        members.add(seq)
        if len(order) > 65_536:
            members.discard(order.popleft())
        return True

    def _notify_listeners(self, attrs: dict, secure: bool) -> None:
        for fn in list(self._listeners):
            try:
                fn(Notification(attrs, secure, None))
            except Exception:  # one listener must not stop delivery
                log.exception("listener %r raised", fn)

    def _buffered_secure(self, sub_ids: Sequence[int]) -> bool:
        """Whether a buffered notification matched securely. The buffer does
        not record it, but a subscription that refuses insecure matches can
        only have had secure ones (the proxy subscribed with the same keys
        and ``accept_insecure``); otherwise it is reported insecure."""
        subs = self._subs
        return any(sid in subs and not subs[sid].accept_insecure for sid in sub_ids)

    def _deliver(self, attrs: dict, sub_ids: Sequence[int], secure: bool) -> bool:
        if not self._accept(attrs):
            return False
        self._notify_listeners(attrs, secure)
        for sid in sub_ids:
            msub = self._subs.get(sid)
            if msub is not None and not msub.closed:
                msub._push(Notification(attrs, secure, msub))  # type: ignore[arg-type]
        return True

    def _record_live(self, attrs: Mapping[str, Any]) -> None:
        overlap = self._overlap
        if overlap is None:
            return
        if overlap.total() >= MAX_OVERLAP:
            log.warning("client %s: more than %d notifications delivered live since the "
                        "failed move-in: collect() may deliver some of them twice",
                        self.client_id, MAX_OVERLAP)
            self._overlap = None
            return
        overlap[_content(attrs)] += 1

    def _on_live(self, msub: MobileSubscription, notification: Any) -> None:
        attrs = notification.attributes
        secure = bool(notification.secure)
        if self._live_off and not self._merging:
            return      # after the move-out reply: the proxy has buffered it
        if self._merging:
            # step 2 of the full move-in: the receiver stores what the new
            # router delivers in the merge queue until the buffer is in
            queue = self._merge_queue
            if attrs is self._last_live and queue and queue[-1][0] is attrs:
                queue[-1][1].append(msub.id)
            else:
                self._last_live = attrs
                queue.append([attrs, [msub.id], secure])
            return
        # one notification matching several subscriptions arrives as several
        # calls with the same attributes dict: decide (dedup) once
        last, accepted = self._last_decision
        if attrs is not last:
            if self._accept(attrs):
                accepted = True
                if self._overlap is not None:
                    self._record_live(attrs)
                self._notify_listeners(attrs, secure)
            else:
                accepted = False
            self._last_decision = (attrs, accepted)
        if accepted and not msub.closed:
            msub._push(Notification(attrs, secure, msub))  # type: ignore[arg-type]

    # -- moving -------------------------------------------------------------------------------
    def _stop_live(self, _reply: dict[str, Any]) -> None:
        self._live_off = True

    def _proxy_key(self, name: str) -> bytes | None:
        return self.proxy_keys.get(canonical(name))

    def _pinned(self, ticket: Ticket, previous_proxy: str | None) -> bool:
        """Whether the ticket's key is the one pinned for its proxy."""
        pin = self._proxy_key(previous_proxy or ticket.proxy)
        return pin is not None and pin == ticket.proxy_key

    async def move_out(self) -> Ticket:
        """Hand the subscriptions to the proxy here; once it has subscribed
        (its acknowledgement), detach (close the connection). Returns the
        ticket (also kept as ``self.ticket``).

        Notifications delivered live before the proxy's reply are not in the
        buffer, those after it are only in the buffer: none comes twice. If
        the connection is lost before the reply (the router died), the
        outcome is unknown: this raises ``MobilityError`` (code
        ``"unconfirmed"``) but the client is moved out with an unconfirmed
        ticket (``ticket.confirmed`` False) whose secret it chose itself, so
        ``move_in`` collects whatever the proxy buffered, if anything."""
        async with self._lock:
            if self.state != "connected" or self._conn is None:
                raise P.MobilityError(f"cannot move out while {self.state}", "state")
            await self._collect_owed()
            conn = self._conn
            resumed = False
            if not await self._alive(conn):
                # no request can have left on it: the secret stays as it is
                conn = await self._reconnect(conn.url)
                resumed = True
            # keys set on the connection directly count too: they are its own
            self._remember_keys(conn)
            # The router matches each subscription with its keys plus the
            # connection's subscription keys; the proxy's connection has none
            # of the client's, so each subscription carries both.
            conn_keys = self.subscription_keys
            specs = [P.SubscriptionSpec(m.id, m.expression, m.accept_insecure,
                                        m.keys | conn_keys if conn_keys else m.keys)
                     for m in self._subs.values()]
            proxy = self.proxy or conn.url
            proxy_key = self._proxy_key(proxy)
            secret = secrets.token_urlsafe(24)
            previous = self._previous_secrets()
            try:
                if proxy_key is None:
                    proxy_key = await hello(conn, proxy, self.timeout)
                ticket = await request_move_out(
                    conn, specs, client_id=self.client_id, proxy=proxy, quota=self.quota,
                    expiry=self.expiry, timeout=self.timeout, proxy_key=proxy_key,
                    secret=secret, previous_secret=previous, on_reply=self._stop_live,
                    resume=resumed, owner_key=self._owner_key)
            except P.MobilityError as exc:
                if not conn.is_open:
                    raise self._moved_out_unconfirmed(conn, proxy, proxy_key, secret) from exc
                self._live_off = False
                if exc.code == "timeout":
                    # the proxy may have made a buffer under this secret:
                    # the next move-out replaces it
                    self._set_secret(secret)
                if resumed:
                    self._owe_restored(conn, proxy)
                    await self._reattach(conn)
                raise
            except (ElvinError, OSError) as exc:
                if not conn.is_open:
                    raise self._moved_out_unconfirmed(conn, proxy, proxy_key, secret) from exc
                self._live_off = False
                if resumed:
                    self._owe_restored(conn, proxy)
                    await self._reattach(conn)
                raise
            self._set_secret(ticket.secret)
            self._detach(ticket)
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await conn.close(timeout=self.timeout)
            return ticket

    def _owe_restored(self, conn: Any, proxy: str) -> None:
        """A resumed move-out failed before the proxy took the restored
        buffer over (a timeout, say) and the client is about to be live
        again: that buffer, if the restart left one, holds what was published
        for the client since the restart, which it never had, and goes on
        recording what it now gets live. So it is owed as after a failed
        move-in: a ticket to ``collect`` (which the next move-out collects
        first: the proxy would replace the buffer, its content unreported),
        what arrives live counted from now on. Its secret is the last one
        (the move-out's own if it may have reached the proxy); ``collect``
        tries the older ones too, since the proxy may hold it under either.
        A buffer already owed (a failed move-in whose buffer is at another
        proxy) keeps its ticket and its live count: one ticket is held, and
        that one was owed first (what the restart left here is then lost, and
        said so)."""
        if self.ticket is not None:
            log.warning("client %s: a resumed move-out failed while a buffer at %s is still "
                        "owed (collect() it): what the restart of %s left for the client "
                        "is lost", self.client_id, self.ticket.proxy, conn.url)
            return
        self._overlap = Counter()
        secret = self._last_secret or secrets.token_urlsafe(24)
        # no proxy key: the one this move-out used may be why it failed
        self.ticket = Ticket(self.client_id, proxy, conn.url, secret, self.quota or 0,
                             float(self.expiry or 0), time.time(), b"",
                             confirmed=False, since_restart=True)

    async def _collect_owed(self) -> None:
        """Before a move-out: collect a buffer still owed (``self.ticket``
        while connected: a failed move-in or resumed move-out). Here, the
        move-out would replace it at the proxy; at another proxy, its new
        ticket would replace this one: either way unreported. One at another
        proxy that cannot be reached now is given up, said so, rather than
        keep the client from moving out for as long as that router is away."""
        ticket, conn = self.ticket, self._conn
        if ticket is None or conn is None:
            return
        elsewhere = canonical(ticket.proxy) != canonical(self.proxy or conn.url)
        try:
            report = await self._collect()
        except P.MobilityError as exc:
            if exc.code in ("timeout", "unreachable") and not elsewhere:
                raise               # the move-out, at the same proxy, would fail too
            # nothing to collect under it (or never again): not a reason
            # to refuse the move-out, which would then never happen
            if self.ticket is ticket:
                self.ticket, self._overlap = None, None
            log.warning("client %s: what was owed at %s is lost%s: %s", self.client_id,
                        ticket.proxy, " (it cannot be reached now, and moving out here "
                        "gives it up)" if exc.code in ("timeout", "unreachable") else "", exc)
            return
        log.info("client %s: collected %d notifications owed since %s before moving out",
                 self.client_id, report.caught_up,
                 "the router restarted" if ticket.since_restart else "a failed move-in")
        if report.dropped:
            log.warning("client %s: %d notifications were dropped while away",
                        self.client_id, report.dropped)

    def _set_secret(self, secret: str) -> None:
        last = self._last_secret
        if last is not None and last != secret:
            if last in self._older_secrets:
                self._older_secrets.remove(last)
            self._older_secrets.append(last)
        self._last_secret = secret

    def _previous_secrets(self) -> str | None:
        """What a move-out sends as ``Mobility.Previous-Secret``: the last
        secret, then the older ones, space-separated."""
        if self._last_secret is None:
            return None
        return " ".join([self._last_secret, *reversed(self._older_secrets)])

    async def _alive(self, conn: Any) -> bool:
        """A round trip (an empty ``set_keys``) before a move-out: a
        connection whose router was killed may not know it yet, and a
        move-out sent on it would end unconfirmed for nothing."""
        if not conn.is_open:
            return False
        try:
            async with asyncio.timeout(self.timeout):
                await conn.set_keys()
        except (ElvinError, OSError, TimeoutError):
            return False
        return conn.is_open

    async def _reconnect(self, url: str) -> Any:
        """The connection died under a connected client (its router was
        killed, say, after a move-in whose release it never wrote): a new
        one to the same router, for the move-out (the subscriptions are
        attached again only if the move-out fails: until the proxy's reply
        what the router routes is in the buffer it restored, which the
        move-out carries over)."""
        from elvin.client import connect
        try:
            conn = await connect(url)
        except (ElvinError, OSError) as exc:
            raise P.MobilityError(f"the connection to {url} was lost and cannot be opened "
                                  f"again: {exc}", "unreachable") from None
        self._conn = conn
        await self._restore_keys(conn)
        return conn

    async def _reattach(self, conn: Any) -> None:
        """A move-out on a new connection failed: live again here."""
        with contextlib.suppress(ElvinError, OSError):
            await asyncio.gather(*(self._attach(m, conn) for m in self._subs.values()))

    def _detach(self, ticket: Ticket) -> None:
        self._overlap = None
        self.ticket = ticket
        self.state = "moved-out"
        self._live_off = True
        for msub in self._subs.values():
            msub.subscription = None
        self._conn = None

    def _moved_out_unconfirmed(self, conn: Any, proxy: str, proxy_key: bytes | None,
                               secret: str) -> P.MobilityError:
        self._set_secret(secret)
        self._detach(Ticket(self.client_id, proxy, conn.url, secret, 0, 0.0, time.time(),
                            proxy_key or b"", confirmed=False))
        return P.MobilityError(
            f"the connection to {conn.url} was lost before the proxy confirmed the "
            "move-out: moved out with an unconfirmed ticket (move_in collects whatever "
            "the proxy buffered)", "unconfirmed")

    async def collect(self, previous_proxy: str | None = None, *, proxy: str | None = None,
                      via: str = P.VIA_DIRECT) -> MoveInReport:
        """Collect the buffer again after a ``move_in`` whose download failed
        (the move-out proxy was unreachable, say): the subscriptions here
        already work, and the buffer is still at the move-out proxy until it
        expires. Its notifications are delivered after those that arrived
        live meanwhile, so per-producer order may not hold across the two.
        Likewise after a resumed move-out that failed (the router here had
        restarted): what a buffer it restored recorded since the restart.
        A buffer still owed at the proxy of a move-out is collected by that
        move-out first."""
        async with self._lock:
            return await self._collect(previous_proxy, proxy=proxy, via=via)

    async def _collect(self, previous_proxy: str | None = None, *, proxy: str | None = None,
                       via: str = P.VIA_DIRECT) -> MoveInReport:
        ticket, conn = self.ticket, self._conn
        if self.state != "connected" or ticket is None or conn is None:
            raise P.MobilityError("no buffer left to collect", "state")
        started = time.monotonic()
        duplicates_before = self.duplicates
        if not await self._alive(conn):
            # the router here died since: live again on a new connection
            # (what was published meanwhile is lost with the old one)
            conn = await self._reconnect(conn.url)
            await self._reattach(conn)
        here = proxy or self.proxy or conn.url
        key = self._proxy_key(here) or await hello(conn, here, min(self.timeout, 10.0))
        entries, reply = await self._collect_request(conn, ticket, here, previous_proxy,
                                                     via, key)
        self.ticket = None
        # the buffer went on recording what we had live here meanwhile:
        # each live delivery takes one buffered copy of the same content
        # out (a multiset: identical notifications are told apart by
        # number, not by identity), so each is delivered once
        overlap, self._overlap = self._overlap, None
        caught_up = skipped = 0
        for attrs, ids in entries:
            if overlap:
                content = _content(attrs)
                if overlap[content] > 0:
                    overlap[content] -= 1
                    skipped += 1
                    continue
            caught_up += self._deliver(attrs, ids, self._buffered_secure(ids))
        self.duplicates += skipped
        return MoveInReport(caught_up=caught_up, dropped=reply.dropped,
                            expired=reply.expired,
                            unannounced=P.unannounced_names(reply.attributes),
                            duplicates=self.duplicates - duplicates_before,
                            delay=time.monotonic() - started)

    async def _collect_request(self, conn: Any, ticket: Ticket, here: str,
                               previous_proxy: str | None, via: str, key: bytes,
                               ) -> tuple[list[P.Entry], Reply]:
        """``request_move_in`` for ``collect``. An unconfirmed ticket's
        buffer may be under an older secret of this client (the move-out
        that named the ticket's never reached the proxy): each is tried."""
        tries = [ticket.secret]
        if not ticket.confirmed:
            tries += [s for s in (self._previous_secrets() or "").split() if s not in tries]
        for i, secret in enumerate(tries):
            attempt = ticket if secret == ticket.secret else dataclasses.replace(
                ticket, secret=secret)
            try:
                return await request_move_in(
                    conn, attempt, proxy=here, previous_proxy=previous_proxy, via=via,
                    timeout=self.download_timeout, proxy_key=key,
                    from_key_pinned=self._pinned(ticket, previous_proxy))
            except P.MobilityError as exc:
                if exc.code == "bad-secret" and i + 1 < len(tries):
                    continue
                raise self._nothing_to_collect(ticket, exc) from exc
        raise AssertionError("unreachable: the ticket's own secret is always tried")

    def _on_fence(self, _notification: Any) -> None:
        if self._fence_at is None:
            self._fence_at = len(self._merge_queue)

    async def _place_fence(self, connection: Any, ticket: Ticket, here: str, key: bytes,
                           fence: str, subscribed: Any) -> None:
        """Publish the fence, to the proxy and to ourselves (``subscribed``:
        our subscription to it), now that the subscriptions here are in place:
        the proxy hands over what it buffered before it, and we deliver from
        the merge queue only what came after it."""
        _sub, public = subscribed
        await connection.send({P.REQUEST: P.FENCE_KIND, P.PROXY: here,
                               P.CLIENT: ticket.client_id, P.FENCE: fence,
                               P.SECRET: ticket.secret},
                              keys=P.private_to(key) | P.private_to(public),
                              deliver_insecure=False)

    async def _fence_subscription(self, connection: Any, fence: str) -> tuple[Any, bytes]:
        raw = secrets.token_bytes(20)
        keys, public = P.reply_subscription_keys(raw)
        sub = await connection.subscribe(
            f"{P.REQUEST} == {P.quote(P.FENCE_KIND)} && {P.FENCE} == {P.quote(fence)}",
            keys=keys, accept_insecure=False, buffer_size=0, listener=self._on_fence)
        return sub, public

    async def move_in(self, url: str | None = None, previous_proxy: str | None = None, *,
                      connection: Any = None, proxy: str | None = None, sync: str = "none",
                      delay: float = 1.0, ping_timeout: float = 5.0,
                      via: str = P.VIA_DIRECT) -> MoveInReport:
        """Reattach at ``url`` (or on the open ``connection``) and collect
        what was buffered.

        ``previous_proxy``: the move-out proxy's id (default: the one moved
        out from; by default proxy ids are router URLs, so this is also where
        the new proxy connects for the direct download). Back at the same
        proxy this is the paper's abbreviated move-in: subscribe here, place
        a fence, collect what was buffered before it, then deliver what came
        live after it (nothing lost, nothing twice). Elsewhere the full
        move-in: merge queue, subscribe here, ``sync`` (``"ping"`` through
        the bus, or ``"delay"`` seconds), download through the proxy here
        (``via="direct"``: it connects to the old router; ``"bus"``: through
        federated routers), then deliver the buffer, then the merge queue.

        If the new connection is lost on the way (the router died), nothing
        collected is delivered and the client is still moved out with its
        ticket: ``move_in`` again. If only the download failed, the client
        stays attached here and ``collect()`` tries again.
        """
        if sync not in SYNC_OPTIONS:
            raise ValueError(f"sync must be one of {', '.join(SYNC_OPTIONS)}, not {sync!r}")
        async with self._lock:
            ticket = self.ticket
            if self.state != "moved-out" or ticket is None:
                raise P.MobilityError(f"cannot move in while {self.state}", "state")
            started = time.monotonic()
            if connection is None:
                from elvin.client import connect
                connection = await connect(url or ticket.router_url)
            here = proxy or self.proxy or connection.url
            previous = previous_proxy or ticket.proxy
            abbreviated = canonical(previous) == canonical(here)
            report = MoveInReport(abbreviated=abbreviated)
            duplicates_before = self.duplicates
            # steps 1-2: merge queue, subscriptions at the new router
            self._merging, self._merge_queue, self._last_live = True, deque(), None
            self._fence_at = None
            self._conn = connection
            self.state = "moving-in"
            entries: list[P.Entry] = []
            fence_sub: tuple[Any, bytes] | None = None
            fence = secrets.token_hex(8) if abbreviated else None
            fenced = False
            try:
                # the connection-level keys first, from the client's state
                await self._restore_keys(connection)
                attached = asyncio.gather(*(self._attach(m, connection)
                                            for m in self._subs.values()))
                if fence is None:
                    await attached
                else:
                    # held at once, so that ``finally`` closes it even if
                    # what comes before the fence is placed fails
                    _, fence_sub = await asyncio.gather(
                        attached, self._fence_subscription(connection, fence))
                key = self._proxy_key(here)
                if key is None and abbreviated and ticket.proxy_key:
                    key = await check_key(connection, here, ticket.proxy_key,
                                          min(self.download_timeout, 10.0))
                if key is None:
                    key = await hello(connection, here, min(self.download_timeout, 10.0))
                if fence is not None and fence_sub is not None:
                    await self._place_fence(connection, ticket, here, key, fence, fence_sub)
                elif sync == "ping":
                    report.ping_ok = await ping(connection, previous, self.client_id,
                                                timeout=ping_timeout)
                elif sync == "delay":
                    await asyncio.sleep(delay)
                # steps 3-4: download through the proxy here
                entries, reply = await request_move_in(
                    connection, ticket, proxy=here, previous_proxy=previous_proxy,
                    via=via, timeout=self.download_timeout, proxy_key=key, fence=fence,
                    from_key_pinned=self._pinned(ticket, previous_proxy))
                fenced = fence is not None and reply.attributes.get(P.FENCE) == fence
                report.dropped, report.expired = reply.dropped, reply.expired
                report.unannounced = P.unannounced_names(reply.attributes)
                if report.unannounced:
                    log.warning("client %s moved in at %s while its federation peers %s may "
                                "not know yet what it subscribes to: what is published there "
                                "until they do may not arrive", self.client_id, here,
                                ", ".join(report.unannounced))
                self.ticket = None
                if reply.dropped:
                    log.warning("client %s: %d notifications were dropped while away (%s)",
                                self.client_id, reply.dropped,
                                "the buffer expired" if reply.expired else "quota")
            except BaseException as exc:
                if not connection.is_open:
                    # the router here went away: what the proxy had is still
                    # there, what came live is in it too (or was never routed)
                    raise self._back_out(connection, exc) from exc
                # attached and live here from now on; the buffer, still at
                # the move-out proxy, goes on recording what we get live too
                self._overlap = Counter()
                self._merge(entries, fenced=False, report=report)
                if isinstance(exc, P.MobilityError):
                    raise self._nothing_to_collect(ticket, exc) from exc
                raise
            finally:
                if fence_sub is not None:
                    with contextlib.suppress(ElvinError, OSError):
                        await fence_sub[0].close()
            # steps 5-6: switch and merge
            self._merge(entries, fenced=fenced, report=report)
            self._set_secret(ticket.secret)
            report.duplicates = self.duplicates - duplicates_before
            report.delay = time.monotonic() - started
            return report

    def _merge(self, entries: list[P.Entry], *, fenced: bool, report: MoveInReport) -> None:
        """Deliver the buffer, then the merge queue: with a fence, only what
        came after it (the rest was in the buffer)."""
        queue = self._merge_queue
        if fenced:
            if self._fence_at is None:
                log.warning("client %s: the fence of this move-in never came back; "
                            "notifications may be delivered twice", self.client_id)
            else:
                for _ in range(self._fence_at):
                    queue.popleft()
        report.merged_live = len(queue)
        caught_up = 0
        for attrs, ids in entries:
            caught_up += self._deliver(attrs, ids, self._buffered_secure(ids))
        while queue:
            attrs, ids, secure = queue.popleft()
            if self._deliver(attrs, ids, secure):
                self._record_live(attrs)
        self._merging = False
        self._live_off = False
        self._last_decision = (None, True)
        self.state = "connected"
        report.caught_up = caught_up

    def _nothing_to_collect(self, ticket: Ticket, exc: P.MobilityError) -> P.MobilityError:
        """A move-in or collect refused: when no buffer can be under this
        ticket (none for this client, or an unconfirmed ticket whose
        move-out was never written while an older buffer is there), the
        ticket is dropped, so that the next call is a move-out (which
        replaces such a buffer), and the client is told what it lost."""
        if exc.code == "unknown-client" or (exc.code == "bad-secret" and not ticket.confirmed):
            if self.ticket is ticket:
                self.ticket = None
            self._overlap = None
            return P.MobilityError(
                f"{exc} (nothing was buffered under this ticket: what was published while "
                "away is lost)", "unknown-client")
        return exc

    def _back_out(self, connection: Any, exc: BaseException) -> P.MobilityError:
        """The connection of a move-in was lost: moved out again, ticket kept."""
        self._merge_queue.clear()
        self._merging = False
        self._conn = None
        self.state = "moved-out"
        for msub in self._subs.values():
            msub.subscription = None
        return P.MobilityError(
            f"the connection to {connection.url} was lost during the move-in ({exc}): still "
            "moved out, with the ticket: move_in again", "unreachable")
