"""One request/reply exchange of the mobility protocol over a connection.

Requests and replies are ordinary notifications, so that the service works in
front of any Elvin router (the paper's portability goal). Replies may carry a
download secret or a client's buffered notifications, so they travel on a
private channel: the requester subscribes with a fresh raw key in the SHA-1
consumer scheme and puts the key's public form in the request; the replier
sends with that public key and ``deliver_insecure`` off, so the router hands
the reply to the requester only, whoever else subscribes to ``Mobility.*``.

Requests that carry a secret travel the same way in the other direction:
given ``to_key`` (the recipient proxy's public key, from a ``hello`` reply
or a ticket) the request is sent with that key and ``deliver_insecure`` off,
so only the proxy holding the matching raw key receives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from elvin.errors import ElvinError
from elvin.mobility import protocol as P


@dataclass
class Reply:
    """A complete reply: the first reply notification's attributes, and for
    move-in/download the batches of buffered notifications in order."""

    attributes: dict[str, Any]
    blobs: list[bytes] = field(default_factory=list)
    count: int = 0
    dropped: int = 0
    expired: bool = False


async def hello(connection: Any, proxy: str, timeout: float,
                retry: float | None = None) -> bytes:
    """Ask the proxy named ``proxy`` for its public key (a ``hello``
    request: public, it carries nothing secret; the reply is private).

    Whoever answers a hello is believed: an active attacker on the bus could
    answer first with a key of its own (see the threat model in the
    ``elvin.mobility`` docstring); a pinned key avoids the hello."""
    reply = await exchange(connection, {P.REQUEST: P.HELLO, P.PROXY: proxy}, timeout, retry)
    try:
        key = P.get_public_key(reply.attributes, P.PROXY_KEY)
    except P.MobilityError:
        raise P.MobilityError(f"mobility proxy {proxy!r} answered hello without a valid "
                              f"{P.PROXY_KEY}", "malformed") from None
    assert key is not None
    return key


async def check_key(connection: Any, proxy: str, known: bytes, timeout: float,
                    retry: float | None = None) -> bytes:
    """The key a ticket holds for ``proxy``, checked with a hello before a
    request that carries the secret is sent with it. A proxy whose state was
    reset (``--state-reset``: a damaged file moved aside) starts with a new
    key and no buffers; a request sent with the old key reaches no one, so
    the move-in waited for its timeout, every time, for ever (a chaos run:
    one client failed 3,384 move-ins in 40 minutes). A different key means
    nothing buffered under the ticket is left there: ``unknown-client``, the
    answer the proxy would give, so the client is attached again and told.
    Whoever answers a hello is believed, as in ``hello``: a forged answer
    can make the move-in fail as ``unknown-client`` (the secret never goes
    to the key it names). A key the client pinned is not checked: a key
    file outlives a state reset, and pinning is how a client refuses to
    believe hello answers."""
    current = await hello(connection, proxy, timeout, retry)
    if current != known:
        raise P.MobilityError(
            f"mobility proxy {proxy!r} now has another key than the ticket's (its state was "
            "reset, or another proxy answers to its name): nothing buffered under this "
            "ticket is left there", "unknown-client")
    return current


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class _Collector:
    """Gathers the reply notifications of one request into a ``Reply``."""

    def __init__(self, kind: str, future: asyncio.Future,
                 on_reply: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.kind = kind
        self.future = future
        self.on_reply = on_reply
        self.batches: dict[int, bytes] = {}
        self.first: dict[str, Any] | None = None

    def __call__(self, notification: Any) -> None:
        attrs = notification.attributes
        future = self.future
        if future.done():
            return
        if attrs.get(P.STATUS) != "ok":
            code = attrs.get(P.ERROR_CODE)
            message = attrs.get(P.ERROR)
            future.set_exception(P.MobilityError(
                str(message) if isinstance(message, str) else f"{self.kind} failed",
                code if isinstance(code, str) else "internal"))
            return
        if self.first is None:
            self.first = dict(attrs)
            if self.on_reply is not None:
                # now, in the order of the connection's notifications: what
                # came before the reply and what comes after it differ
                self.on_reply(self.first)
        if self.kind in (P.MOVE_OUT, P.HELLO):
            future.set_result(Reply(self.first))
            return
        index, total = attrs.get(P.BATCH), attrs.get(P.BATCH_COUNT)
        blob = attrs.get(P.NOTIFICATIONS)
        if (not isinstance(index, int) or not isinstance(total, int) or isinstance(index, bool)
                or not 0 <= index < total or not isinstance(blob, bytes)):
            future.set_exception(P.MobilityError(
                f"malformed {self.kind} reply (batch {index!r} of {total!r})", "malformed"))
            return
        self.batches[index] = blob
        if len(self.batches) == total:
            first = self.first
            future.set_result(Reply(first, [self.batches[i] for i in range(total)],
                                    _int(first.get(P.COUNT)), _int(first.get(P.DROPPED)),
                                    bool(_int(first.get(P.EXPIRED)))))


async def exchange(connection: Any, request: dict[str, Any], timeout: float,
                   retry: float | None = None, *, to_key: bytes | None = None,
                   on_reply: Callable[[dict[str, Any]], None] | None = None) -> Reply:
    """Send ``request`` (a mobility request without ``Request-Id`` and
    ``Reply-Key``, which are added here) and wait for its whole reply.

    ``to_key``: the recipient proxy's public key. The request is then sent
    privately (that key, ``deliver_insecure`` off): required for every
    request that carries a secret. Without it the request is public (only
    ``hello`` should be sent that way).

    ``on_reply(attributes)``: called as the first (successful) reply
    notification is delivered, before any notification that follows it on
    the connection.

    ``retry``: resend the same request (same id) after ``retry`` seconds,
    doubling up to 2 s, until the reply is complete. Across federated routers
    the reply subscription made just before the request may not have reached
    the replier's router yet, so its first answer can be lost; proxies
    answer a repeated download with the same buffer (see ``MobilityProxy``).

    Raises ``MobilityError``: the replier's error (with its code), or code
    ``"timeout"`` when nothing complete came back within ``timeout`` seconds
    (no proxy with that id, or it could not finish in time).
    """
    kind = request[P.REQUEST]
    raw = secrets.token_bytes(20)
    sub_keys, public = P.reply_subscription_keys(raw)
    request_id = secrets.token_hex(12)
    future = asyncio.get_running_loop().create_future()
    collector = _Collector(kind, future, on_reply)
    expression = (f"{P.REPLY} == {P.quote(kind)} && "
                  f"{P.REQUEST_ID} == {P.quote(request_id)}")
    sub = await connection.subscribe(expression, keys=sub_keys, accept_insecure=False,
                                     buffer_size=0, listener=collector)
    try:
        message = {**request, P.REQUEST_ID: request_id, P.REPLY_KEY: public}
        send_args: dict[str, Any] = {}
        if to_key is not None:
            send_args = {"keys": P.private_to(to_key), "deliver_insecure": False}
        await connection.send(message, **send_args)
        try:
            async with asyncio.timeout(timeout):
                # a connection that ends (its router died) ends the wait
                closed = getattr(connection, "closed", None)
                waiters = [future] + ([closed] if isinstance(closed, asyncio.Future) else [])
                interval = retry
                while not future.done():
                    await asyncio.wait(waiters, timeout=interval,
                                       return_when=asyncio.FIRST_COMPLETED)
                    if future.done():
                        break
                    if closed is not None and closed in waiters and closed.done():
                        raise P.MobilityError(
                            f"the connection to {getattr(connection, 'url', '?')} was lost "
                            f"before the {kind} reply was complete", "unreachable")
                    if interval is not None:
                        if not collector.batches:
                            await connection.send(message, **send_args)
                        interval = min(interval * 2, 2.0)
                return await future
        except TimeoutError:
            raise P.MobilityError(
                f"no complete {kind} reply from mobility proxy {request.get(P.PROXY)!r} "
                f"within {timeout:g} s (is a proxy with that id running at "
                f"{getattr(connection, 'url', '?')}?)", "timeout") from None
    finally:
        with contextlib.suppress(ElvinError, OSError):
            await sub.close()
