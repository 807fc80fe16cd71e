"""Per-client statistics and the per-client publish limit (issue 49).

The Elvin 3 paper keeps "statistics about individual connections ... to
allow the throttling of individual clients". Every client channel (a
session, or a session-less UNotify channel) has its ``ClientCounters``,
kept by its ``SessionCore`` and ``Session`` with a few integer adds per
packet; nothing is summed or sorted until someone asks (``top_clients``:
``elvind status``, ``/metrics``, the ``Elvin-Router-Stats`` notification),
and what is shown is bounded: the ``TOP_CLIENTS`` busiest, never one
series per client.

The publish limit (``publish-rate`` notifications/s with ``publish-burst``
at once, in the router's configuration; 0 = no limit) is a token bucket per
**client address** (``PublishLimit``): every channel from one IP address
draws on the same bucket, so more connections do not buy more rate (as
``max-connections-per-address`` counts sockets per address). Not per key
holder: an Elvin key is a shared secret, not an identity -- a producer may
present any number of keys, and any number of producers one key -- so a
limit per key could be dodged with a fresh key and would throttle everyone
who shares one. The router's in-process clients (its mobility proxy) are
never limited: they publish on behalf of clients already counted.

Beyond the limit, the Elvin way: the notification is dropped (delivered to
no one, federated nowhere), counted (``throttled``, per client and in the
router's totals), and the publisher is sent a DropWarn (spec 7.4.12: "one
or more notification packets were dropped"), at most one per
``DROP_WARN_INTERVAL`` per channel, so that a flooding client does not make
the router flood it back. The bucket is sans-IO: the caller passes the
clock.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable
from typing import Any

__all__ = ["DROP_WARN_INTERVAL", "TOP_CLIENTS", "ClientCounters", "PublishLimit",
           "TokenBucket", "client_name", "timed_steps", "top_clients", "top_clients_text"]

#: how many clients the status, the metrics and the statistics notification show
TOP_CLIENTS = 10
#: seconds between two DropWarns for one throttled channel
DROP_WARN_INTERVAL = 1.0


class ClientCounters:
    """One channel's figures since it opened. ``match_seconds``: time the
    router spent matching this client's notifications and queueing their
    deliveries (on the loop, all steps of a stepped match included)."""

    __slots__ = ("notifications_in", "bytes_in", "notifications_out", "bytes_out", "drops",
                 "throttled", "match_seconds", "drop_warned_at", "bucket")

    def __init__(self) -> None:
        self.notifications_in = 0
        self.bytes_in = 0
        self.notifications_out = 0
        self.bytes_out = 0
        self.drops = 0
        self.throttled = 0
        self.match_seconds = 0.0
        #: when the last DropWarn for the publish limit went (monotonic), None: never
        self.drop_warned_at: float | None = None
        #: the channel's publish-limit bucket (its address's), once it published
        self.bucket: TokenBucket | None = None

    def drop_warn_due(self, now: float) -> bool:
        """A notification was throttled at ``now``: True when a DropWarn is
        due (the first, or ``DROP_WARN_INTERVAL`` after the last)."""
        last = self.drop_warned_at
        if last is not None and now - last < DROP_WARN_INTERVAL:
            return False
        self.drop_warned_at = now
        return True


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` held; starts full.
    Sans-IO: ``take`` is given the time (seconds, any monotonic clock)."""

    __slots__ = ("rate", "burst", "tokens", "at", "__weakref__")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.at = now

    def take(self, now: float) -> bool:
        """One token at ``now``: True if there was one (the notification
        goes), False if the bucket is empty (it is over the limit)."""
        tokens = self.tokens + (now - self.at) * self.rate
        if tokens > self.burst:
            tokens = self.burst
        self.at = now
        if tokens >= 1.0:
            self.tokens = tokens - 1.0
            return True
        self.tokens = tokens
        return False


class PublishLimit:
    """The buckets of the publish limit, one per client address, shared by
    that address's channels. A channel holds its bucket; the table holds
    them weakly, so a bucket goes with the last channel of its address (and
    a new one starts full). A reload that changes the rate or the burst
    costs nothing here: a channel whose bucket has other figures asks for a
    new one at its next notification (``bucket``)."""

    def __init__(self) -> None:
        self._buckets: weakref.WeakValueDictionary[Any, TokenBucket] = \
            weakref.WeakValueDictionary()

    def __len__(self) -> int:
        return len(self._buckets)

    def admits(self, counters: ClientCounters, peer: Any, config: Any, now: float) -> bool:
        """One notification of the channel ``counters`` belong to, from
        ``peer``, at ``now``, under ``config``'s ``publish_rate`` and
        ``publish_burst``: True if it goes, False (and counted) if over the
        limit."""
        rate = config.publish_rate
        burst = config.publish_burst or max(rate, 1)
        bucket = counters.bucket
        if bucket is None or bucket.rate != rate or bucket.burst != burst:
            address = peer[0] if isinstance(peer, tuple) and peer else peer
            bucket = counters.bucket = self.bucket(address, rate, burst, now)
        if bucket.take(now):
            return True
        counters.throttled += 1
        return False

    def bucket(self, address: Any, rate: float, burst: float, now: float) -> TokenBucket:
        """The bucket of ``address`` for ``rate``/``burst`` (a new one when
        there is none with these figures; the old one's fill is kept, up
        to the new burst)."""
        bucket = self._buckets.get(address)
        if bucket is not None and bucket.rate == rate and bucket.burst == burst:
            return bucket
        fresh = TokenBucket(rate, burst, now)
        if bucket is not None:
            fresh.tokens = min(float(burst), bucket.tokens + (now - bucket.at) * bucket.rate)
        self._buckets[address] = fresh
        return fresh


def timed_steps(steps: Any, counters: ClientCounters) -> Any:
    """The steps of a match (``Router.deliver_steps``), each timed into
    ``counters.match_seconds``: a match long enough to be run over several
    loop turns. Closing it closes ``steps``."""
    clock = time.perf_counter
    try:
        while True:
            started = clock()
            try:
                next(steps)
            except StopIteration as stop:
                return stop.value
            finally:
                counters.match_seconds += clock() - started
            yield
    finally:
        steps.close()


def client_name(peer: Any) -> str:
    """``host:port`` of a channel's peer (as the connection log names it)."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(peer)


def _row(session: Any, engine: Any, quench: Any) -> dict[str, Any]:
    counters: ClientCounters = session.core.counters
    return {"client": client_name(session.peer), "state": str(session.state),
            "notifications_in": counters.notifications_in, "bytes_in": counters.bytes_in,
            "notifications_out": counters.notifications_out,
            "bytes_out": counters.bytes_out, "drops": counters.drops,
            "throttled": counters.throttled,
            "match_seconds": round(counters.match_seconds, 6),
            "subscriptions": len(engine.owned(session)),
            "quenches": len(quench.owned(session))}


def top_clients(sessions: Iterable[Any], engine: Any, quench: Any,
                count: int = TOP_CLIENTS) -> list[dict[str, Any]]:
    """The ``count`` busiest channels, busiest first: by notifications in
    and out together, then by bytes in and out. One pass and a partial
    sort: cheap enough for each status rewrite and scrape."""
    import heapq

    def busy(session: Any) -> tuple[int, int]:
        c = session.core.counters
        return (c.notifications_in + c.notifications_out + c.throttled,
                c.bytes_in + c.bytes_out)

    chosen = heapq.nlargest(count, sessions, key=busy)
    return [_row(session, engine, quench) for session in chosen]


def top_clients_text(rows: Iterable[dict[str, Any]]) -> str:
    """The rows in one line for the statistics notification
    (``Top-Clients``): ``127.0.0.1:40112 in 1200 out 3 drops 0 throttled
    40 subs 1; ...``."""
    return "; ".join(f"{r['client']} in {r['notifications_in']} out {r['notifications_out']} "
                     f"drops {r['drops']} throttled {r['throttled']} "
                     f"subs {r['subscriptions']}" for r in rows)
