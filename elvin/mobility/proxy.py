"""The mobility proxy: subscribes and buffers for clients that moved out,
and hands the buffers over on move-in.

It is an ordinary Elvin client (``elvin.client`` only), so it works in front
of any Elvin router: inside ``elvind`` (``mobility = true``) it connects to
its own router over loopback; ``elvin-mobility-proxy -e URL`` runs it as a
process of its own. See the ``elvin.mobility`` docstring for the protocol.

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
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elvin.config_file import check_numbers, number
from elvin.errors import ElvinError, SubscriptionError
from elvin.keys import Keys, public_key
from elvin.mobility import protocol as P
from elvin.mobility.exchange import exchange, hello
from elvin.protocol import URIError, parse_uri

log = logging.getLogger("elvin.mobility")

__all__ = ["MobilityProxy", "ProxyConfig", "load_key_file", "main"]

#: Requests (and ping answers) being handled at once; beyond, new ones are
#: dropped and counted in ``stats["overload"]``.
MAX_PENDING = 1000


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
    try:
        with open(path, "rb") as f:
            key = f.read()
    except OSError as exc:
        raise ValueError(f"cannot read mobility key file {str(path)!r}: "
                         f"{exc.strerror or exc}") from None
    if not key:
        raise ValueError(f"mobility key file {str(path)!r} is empty (it must hold the "
                         "proxy's raw private key, its bytes as they are)")
    return key


def canonical(name: str) -> str:
    """Proxy ids that are Elvin URLs compare in canonical form, so
    ``elvin://h:1`` and ``elvin:4.0/tcp,none,xdr/h:1`` name the same proxy."""
    try:
        return str(parse_uri(name))
    except (URIError, ValueError):
        return name


class ClientHandler:
    """The proxy's stand-in for one moved-out client (the paper's "client
    handler"): its subscriptions at the router and its buffer."""

    def __init__(self, client_id: str, secret: str, quota: int, expiry: float) -> None:
        self.client_id = client_id
        self.secret = secret
        self.quota = quota
        self.expiry = expiry
        self.moved_out_at = time.time()
        self.subscriptions: list[Any] = []
        self.buffer: deque[list] = deque()
        self.dropped = 0
        self.timer: asyncio.TimerHandle | None = None
        self._last: dict | None = None

    def on_notification(self, sub_id: int, notification: Any) -> None:
        # The client library calls us once per matching subscription with the
        # same attributes dict: buffer the notification once, noting every
        # subscription of the client that it matched.
        attrs = notification.attributes
        buffer = self.buffer
        if attrs is self._last and buffer and buffer[-1][0] is attrs:
            buffer[-1][1].append(sub_id)
            return
        self._last = attrs
        if len(buffer) >= self.quota:
            buffer.popleft()
            self.dropped += 1
        buffer.append([attrs, [sub_id]])


@dataclass
class _Tombstone:
    secret: str
    dropped: int
    until: float


class MobilityProxy:
    """``async with MobilityProxy(url) as proxy:`` or ``await proxy.start()``
    / ``await proxy.stop()``. ``proxy.id`` is its name; ``proxy.handlers``
    the moved-out clients; ``proxy.stats`` counters."""

    def __init__(self, url: str, config: ProxyConfig | None = None, *,
                 reconnect: bool = False) -> None:
        self.url = url
        self.config = (config or ProxyConfig()).validate()
        self.reconnect = reconnect
        self.connection: Any = None
        self.id: str = ""
        self.ids: set[str] = set()
        self.handlers: dict[str, ClientHandler] = {}
        self.tombstones: OrderedDict[str, _Tombstone] = OrderedDict()
        self.stats = {"move_out": 0, "move_in": 0, "download": 0, "errors": 0,
                      "malformed": 0, "bad_secret": 0, "expired": 0, "pings": 0,
                      "overload": 0, "insecure": 0, "hello": 0}
        self._locks: dict[str, asyncio.Lock] = {}
        #: buffers handed over recently, by client id: (secret, result, until)
        #: so that a repeated download (its reply was lost) gets them again
        self._taken: dict[str, tuple[str, tuple, float]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._subs: list[Any] = []
        raw = self.config.key or secrets.token_bytes(20)
        self._request_keys = Keys.consumer_subscription(raw)
        #: what clients and other proxies send private requests with
        self.public_key: bytes = public_key(raw)

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> MobilityProxy:
        from elvin.client import connect
        self.connection = await connect(self.url, reconnect=self.reconnect)
        self.id = self.config.id or self.connection.url
        self.ids = {canonical(self.id), self.id}
        for alias in self.config.aliases:
            self.ids.update((alias, canonical(alias)))
        names = " || ".join(f"{P.PROXY} == {P.quote(n)}" for n in sorted(self.ids))
        # Requests arrive securely (sent with our public key: only we get
        # them) or insecurely (hello, which anyone may send and see).
        self._subs.append(await self.connection.subscribe(
            f"require({P.REQUEST}) && ({names})", keys=self._request_keys,
            accept_insecure=True, buffer_size=0, listener=self._on_request))
        self._subs.append(await self.connection.subscribe(
            f"{P.PING} == \"request\" && ({names})", buffer_size=0, listener=self._on_ping))
        log.info("mobility proxy %r serving at %s (public key %s)", self.id,
                 self.connection.url, self.public_key.hex())
        return self

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for handler in self.handlers.values():
            if handler.timer is not None:
                handler.timer.cancel()
        self.handlers.clear()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.connection is not None:
            with contextlib.suppress(Exception):
                await self.connection.close(timeout=2)
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

    # -- requests ---------------------------------------------------------------------
    def _on_request(self, notification: Any) -> None:
        if len(self._tasks) >= MAX_PENDING:
            # a flood of requests must not grow memory without bound
            self.stats["overload"] += 1
            return
        self._spawn(self._handle(dict(notification.attributes), bool(notification.secure)))

    async def _handle(self, attrs: dict[str, Any], private: bool = False) -> None:
        kind = attrs.get(P.REQUEST)
        request_id = attrs.get(P.REQUEST_ID)
        client_id = attrs.get(P.CLIENT)
        try:
            reply_key: bytes | None = None
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
            await self._send_error(kind, request_id, client_id, reply_key, exc)
        except Exception as exc:  # never let one request hurt the proxy
            self.stats["errors"] += 1
            log.exception("mobility %r request failed", kind)
            await self._send_error(kind, request_id, client_id, reply_key,
                                   P.MobilityError(f"internal error: {exc}", "internal"))

    async def _send(self, attrs: dict[str, Any], reply_key: bytes | None) -> None:
        if reply_key is not None:
            await self.connection.send(attrs, keys=P.reply_keys(reply_key),
                                       deliver_insecure=False)
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
    async def _move_out(self, attrs: dict[str, Any], reply_key: bytes) -> None:
        config = self.config
        client_id = P.get_str(attrs, P.CLIENT)
        specs = P.decode_subscriptions(attrs.get(P.SUBSCRIPTIONS), config.max_subscriptions)
        quota = P.get_number(attrs, P.QUOTA)
        expiry = P.get_number(attrs, P.EXPIRY)
        quota = config.quota if quota is None or quota <= 0 else min(int(quota), config.quota)
        expiry = config.expiry if expiry is None or expiry <= 0 else min(expiry, config.expiry)
        async with self._lock(client_id):
            if client_id in self.handlers:
                raise P.MobilityError(f"client {client_id!r} already has a buffer at this "
                                      "proxy (move in first)", "in-use")
            if len(self.handlers) >= config.max_clients:
                raise P.MobilityError(f"this proxy already buffers for {config.max_clients} "
                                      "clients", "limit")
            handler = ClientHandler(client_id, secrets.token_urlsafe(24), quota, expiry)
            results = await asyncio.gather(*(
                self.connection.subscribe(spec.expression, keys=spec.keys,
                                          accept_insecure=spec.accept_insecure,
                                          buffer_size=0,
                                          listener=functools.partial(handler.on_notification,
                                                                     spec.id))
                for spec in specs), return_exceptions=True)
            failed = [(spec, r) for spec, r in zip(specs, results, strict=True)
                      if isinstance(r, BaseException)]
            handler.subscriptions = [r for r in results if not isinstance(r, BaseException)]
            if failed:
                await self._unsubscribe(handler)
                spec, exc = failed[0]
                if not isinstance(exc, (ElvinError, SubscriptionError, ValueError, TypeError)):
                    raise exc
                raise P.MobilityError(f"subscription {spec.id} ({spec.expression!r}) refused: "
                                      f"{exc}", "subscription")
            self.handlers[client_id] = handler
            self.tombstones.pop(client_id, None)
            self._taken.pop(client_id, None)
            handler.timer = asyncio.get_running_loop().call_later(
                expiry, lambda: self._spawn(self._expire(handler)))
            self.stats["move_out"] += 1
            log.info("client %r moved out: %d subscriptions, quota %d, expiry %g s",
                     client_id, len(specs), quota, expiry)
            # The subscriptions are active (every SubRply is in): only now may
            # the client detach (paper, section 3.2).
            await self._send({P.REPLY: P.MOVE_OUT, P.PROXY: self.id, P.CLIENT: client_id,
                              P.REQUEST_ID: attrs[P.REQUEST_ID], P.STATUS: "ok",
                              P.SECRET: handler.secret, P.QUOTA: quota,
                              P.EXPIRY: float(expiry), P.PROXY_KEY: self.public_key},
                             reply_key)

    async def _unsubscribe(self, handler: ClientHandler) -> None:
        # Waiting for every SubRply matters: notifications the router sent
        # before it removed a subscription arrive before the reply, and must
        # be in the buffer before it is handed over.
        subs, handler.subscriptions = handler.subscriptions, []
        await asyncio.gather(*(sub.close() for sub in subs), return_exceptions=True)

    async def _expire(self, handler: ClientHandler) -> None:
        async with self._lock(handler.client_id):
            if self.handlers.get(handler.client_id) is not handler:
                return
            del self.handlers[handler.client_id]
            await self._unsubscribe(handler)
            lost = handler.dropped + len(handler.buffer)
            handler.buffer.clear()
            self._tombstone(handler.client_id, handler.secret, lost)
            self.stats["expired"] += 1
            log.info("buffer of client %r expired unclaimed: %d notifications released",
                     handler.client_id, lost)

    def _tombstone(self, client_id: str, secret: str, lost: int) -> None:
        now = time.monotonic()
        stones = self.tombstones
        stones[client_id] = _Tombstone(secret, lost, now + self.config.tombstone_ttl)
        stones.move_to_end(client_id)
        while stones and (len(stones) > self.config.max_tombstones
                          or next(iter(stones.values())).until < now):
            stones.popitem(last=False)

    # -- handing a buffer over ------------------------------------------------------------
    async def _take(self, client_id: str, secret: str) -> tuple[list[bytes], int, int, bool]:
        """Check the secret, unsubscribe and destroy the handler, and return
        the buffer as batches with (count, dropped, expired)."""
        async with self._lock(client_id):
            handler = self.handlers.get(client_id)
            now = time.monotonic()
            for key in [k for k, v in self._taken.items() if v[2] < now]:
                del self._taken[key]
            taken = self._taken.get(client_id)
            if handler is None and taken is not None:
                if not hmac.compare_digest(taken[0].encode(), secret.encode()):
                    self.stats["bad_secret"] += 1
                    raise P.MobilityError(f"wrong secret for client {client_id!r}",
                                          "bad-secret")
                return taken[1]
            if handler is None:
                stone = self.tombstones.get(client_id)
                if stone is not None and stone.until >= time.monotonic():
                    if not hmac.compare_digest(stone.secret.encode(), secret.encode()):
                        self.stats["bad_secret"] += 1
                        raise P.MobilityError(f"wrong secret for client {client_id!r}",
                                              "bad-secret")
                    del self.tombstones[client_id]
                    return [b""], 0, stone.dropped, True
                raise P.MobilityError(f"no buffer for client {client_id!r} at proxy "
                                      f"{self.id!r}", "unknown-client")
            if not hmac.compare_digest(handler.secret.encode(), secret.encode()):
                self.stats["bad_secret"] += 1
                raise P.MobilityError(f"wrong secret for client {client_id!r}", "bad-secret")
            del self.handlers[client_id]
            if handler.timer is not None:
                handler.timer.cancel()
            await self._unsubscribe(handler)
            entries = [(attrs, ids) for attrs, ids in handler.buffer]
            handler.buffer.clear()
            result = P.encode_batches(entries), len(entries), handler.dropped, False
            self._taken[client_id] = (handler.secret, result,
                                      now + self.config.download_timeout)
            return result

    async def _send_batches(self, kind: str, attrs: dict[str, Any], reply_key: bytes,
                            blobs: Sequence[bytes], count: int, dropped: int,
                            expired: bool) -> None:
        for index, blob in enumerate(blobs):
            await self._send({P.REPLY: kind, P.PROXY: self.id, P.CLIENT: attrs[P.CLIENT],
                              P.REQUEST_ID: attrs[P.REQUEST_ID], P.STATUS: "ok",
                              P.BATCH: index, P.BATCH_COUNT: len(blobs),
                              P.NOTIFICATIONS: blob, P.COUNT: count, P.DROPPED: dropped,
                              P.EXPIRED: int(expired)}, reply_key)

    async def _download(self, attrs: dict[str, Any], reply_key: bytes) -> None:
        """Another proxy collects a client's buffer (step 4 of the paper's
        full move-in, the move-out proxy's side)."""
        client_id = P.get_str(attrs, P.CLIENT)
        secret = P.get_str(attrs, P.SECRET, max_length=P.MAX_SECRET_LENGTH)
        blobs, count, dropped, expired = await self._take(client_id, secret)
        self.stats["download"] += 1
        log.info("client %r: %d buffered notifications downloaded by %r", client_id, count,
                 attrs.get(P.REQUESTER))
        await self._send_batches(P.DOWNLOAD, attrs, reply_key, blobs, count, dropped, expired)

    async def _move_in(self, attrs: dict[str, Any], reply_key: bytes) -> None:
        """A client moved in here: hand over its buffer, ours (abbreviated
        move-in) or the move-out proxy's (full move-in)."""
        client_id = P.get_str(attrs, P.CLIENT)
        secret = P.get_str(attrs, P.SECRET, max_length=P.MAX_SECRET_LENGTH)
        previous = P.get_str(attrs, P.FROM, max_length=1024)
        from_url = P.get_str(attrs, P.FROM_URL, required=False, max_length=1024)
        via = P.get_str(attrs, P.VIA, required=False) or P.VIA_DIRECT
        from_key = P.get_public_key(attrs, P.FROM_KEY, required=False)
        if via not in (P.VIA_DIRECT, P.VIA_BUS):
            raise P.MalformedRequest(f"{P.VIA} must be {P.VIA_DIRECT!r} or {P.VIA_BUS!r}")
        if previous in self.ids or canonical(previous) in self.ids:
            blobs, count, dropped, expired = await self._take(client_id, secret)
        else:
            blobs, count, dropped, expired = await self._fetch(
                previous, from_url, via, client_id, secret, from_key)
        self.stats["move_in"] += 1
        log.info("client %r moved in from %r: %d notifications, %d dropped", client_id,
                 previous, count, dropped)
        await self._send_batches(P.MOVE_IN, attrs, reply_key, blobs, count, dropped, expired)

    async def _fetch(self, previous: str, from_url: str | None, via: str, client_id: str,
                     secret: str, from_key: bytes | None
                     ) -> tuple[list[bytes], int, int, bool]:
        """Download the buffer from the move-out proxy: the request holds the
        secret, so it is sent with that proxy's public key (from the client's
        ticket, or asked for with a hello on the same path)."""
        request = {P.REQUEST: P.DOWNLOAD, P.PROXY: previous, P.CLIENT: client_id,
                   P.SECRET: secret, P.REQUESTER: self.id}
        timeout = self.config.download_timeout
        if via == P.VIA_BUS:
            if from_key is None:
                from_key = await hello(self.connection, previous, timeout, retry=0.1)
            reply = await exchange(self.connection, request, timeout, retry=0.1,
                                   to_key=from_key)
            return reply.blobs, reply.count, reply.dropped, reply.expired
        url = from_url or previous
        from elvin.client import connect
        try:
            async with asyncio.timeout(timeout):
                conn = await connect(url)
        except (ElvinError, OSError, TimeoutError, URIError, ValueError) as exc:
            raise P.MobilityError(f"cannot reach the move-out proxy's router {url!r}: {exc}",
                                  "unreachable") from None
        try:
            if from_key is None:
                from_key = await hello(conn, previous, timeout)
            reply = await exchange(conn, request, timeout, to_key=from_key)
        finally:
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)
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
async def start_in_router(router: Any) -> MobilityProxy:
    """Start a proxy as an internal client of ``router`` (an
    ``elvin.router.server.Router`` that has started), over loopback through
    the public client API like any other client. It answers to every URL the
    router listens on. Its key comes from the router's ``mobility_key_file``
    (``load_key_file``), else it is random."""
    urls = [u for u in router.urls if "/ssl," not in u]
    if not urls:
        raise RuntimeError("the mobility proxy needs a plain TCP listen URI")
    aliases = set(router.urls)
    url = urls[0]
    port = parse_uri(url).port
    for host in ("0.0.0.0", "[::]"):
        if f"//{host}:" in url:
            url = url.replace(f"//{host}:", "//127.0.0.1:")
    for host in ("127.0.0.1", "localhost"):
        aliases.add(f"elvin://{host}:{port}")
    conf = router.config
    key_file = getattr(conf, "mobility_key_file", None)
    config = ProxyConfig(id=getattr(conf, "mobility_id", None) or url, aliases=tuple(aliases),
                         quota=getattr(conf, "mobility_quota", ProxyConfig.quota),
                         expiry=getattr(conf, "mobility_expiry", ProxyConfig.expiry),
                         key=load_key_file(key_file) if key_file else None)
    return await MobilityProxy(url, config).start()


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
    add_log_level_argument(parser, "info")
    return parser


async def _run(url: str, config: ProxyConfig) -> None:
    import signal

    proxy = MobilityProxy(url, config, reconnect=True)
    await proxy.start()
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
    try:
        asyncio.run(_run(url, config))
    except CONNECT_ERRORS as exc:
        # unreachable or lost (2), or a request the router refused, e.g. a
        # Nack to ConnRqst (3): one line either way, never a traceback
        return connect_failure(url, exc, f"cannot reach the router at {url}: ").report(prog)
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
