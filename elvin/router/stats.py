"""Router statistics and the live statistics notification.

While at least one subscription refers to the attribute
``Elvin-Router-Stats`` (the engine reports that, as it does for quench; no
subscription is ever polled), the router publishes, every
``stats_interval`` seconds, a notification of its own, delivered like any
other notification (insecure, no keys):

==============================  =========  ===========================================
attribute                       type       meaning
==============================  =========  ===========================================
Elvin-Router-Stats              int32      always 1: subscribe with
                                           ``require(Elvin-Router-Stats)``
Router-Id                       string     this router's id (host:pid:start time:sequence)
Connections                     int32      client sessions (ConnRqst accepted) now open
Subscriptions                   int32      subscriptions registered now
Quenches                        int32      quenches registered now
Notifications-In                int64      NotifyEmit + UNotify received since start
Notifications-Out               int64      NotifyDeliver packets queued since start
Notifications-In-Per-Second     real64     Notifications-In rate over the last interval
Notifications-Out-Per-Second    real64     Notifications-Out rate over the last interval
Drops                           int64      packets dropped from send queues since start
Uptime                          real64     seconds since the router started
Federation-Links                int32      federation links configured or accepted
Federation-Links-Up             int32      of those, linked now
Federation-Links-Down           string     the peers not linked now, with their last
                                           error (``edge: Connection refused; ...``),
                                           empty when all are up
Federation-Redials-Failed       int64      outgoing federation dials that failed
Refused                         int64      sockets, channels and requests refused by
                                           the router's limits since start
                                           (elvin.router.door: all kinds)
Refused-Kinds                   string     the same by kind,
                                           ``connections-per-address=3, keys=1``;
                                           empty when none
Pattern-Overruns                int64      regex()/wildcard() matches that ran out of
                                           their own time limit since start (each
                                           makes only its own subscription bottom)
Throttled                       int64      notifications dropped since start because
                                           their publisher was over its publish limit
                                           (``publish-rate``; elvin.router.clientstats)
Top-Clients                     string     the busiest clients (at most 10), busiest
                                           first: ``HOST:PORT in N out N drops N
                                           throttled N subs N; ...``
==============================  =========  ===========================================

The statistics notification itself is not counted (neither in
Notifications-In nor in Notifications-Out): the figures are the clients'.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from elvin.values import Int64

STATS_ATTRIBUTE = "Elvin-Router-Stats"


class Stats:
    __slots__ = ("started", "notifications_in", "notifications_out", "drops",
                 "protocol_errors", "connections_total", "refused", "pattern_overruns",
                 "throttled",
                 "_last_time", "_last_in", "_last_out")

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.notifications_in = 0
        self.notifications_out = 0
        self.drops = 0
        self.protocol_errors = 0
        self.connections_total = 0
        #: refusals by kind (elvin.router.door.REFUSALS)
        self.refused: dict[str, int] = {}
        self.pattern_overruns = 0
        #: notifications dropped by the publish limit (elvin.router.clientstats)
        self.throttled = 0
        self._last_time = self.started
        self._last_in = 0
        self._last_out = 0

    def refuse(self, kind: str) -> None:
        """Count one refusal of ``kind``."""
        self.refused[kind] = self.refused.get(kind, 0) + 1

    @property
    def uptime(self) -> float:
        return time.monotonic() - self.started

    def rates(self) -> tuple[float, float]:
        """(in, out) per second since the previous call."""
        now = time.monotonic()
        elapsed = max(now - self._last_time, 1e-9)
        rate_in = (self.notifications_in - self._last_in) / elapsed
        rate_out = (self.notifications_out - self._last_out) / elapsed
        self._last_time = now
        self._last_in = self.notifications_in
        self._last_out = self.notifications_out
        return rate_in, rate_out

    def notification(self, router_id: str, connections: int, subscriptions: int,
                     quenches: int, *, federation_links: Sequence[Mapping[str, Any]] = (),
                     redials_failed: int = 0, top_clients: str = "") -> dict[str, object]:
        rate_in, rate_out = self.rates()
        down = [f"{link.get('peer') or link.get('url')}: "
                f"{link.get('last_error') or link.get('state')}"
                for link in federation_links if link.get("state") != "linked"]
        return {
            STATS_ATTRIBUTE: 1,
            "Router-Id": router_id,
            "Connections": connections,
            "Subscriptions": subscriptions,
            "Quenches": quenches,
            "Notifications-In": Int64(self.notifications_in),
            "Notifications-Out": Int64(self.notifications_out),
            "Notifications-In-Per-Second": float(rate_in),
            "Notifications-Out-Per-Second": float(rate_out),
            "Drops": Int64(self.drops),
            "Uptime": float(self.uptime),
            "Federation-Links": len(federation_links),
            "Federation-Links-Up": len(federation_links) - len(down),
            "Federation-Links-Down": "; ".join(down),
            "Federation-Redials-Failed": Int64(redials_failed),
            "Refused": Int64(sum(self.refused.values())),
            "Refused-Kinds": ", ".join(f"{kind}={count}"
                                       for kind, count in sorted(self.refused.items())),
            "Pattern-Overruns": Int64(self.pattern_overruns),
            "Throttled": Int64(self.throttled),
            "Top-Clients": top_clients,
        }
