"""Exactly once on any connected topology (issue 27), with real routers.

A subscriber to everything at every router, numbered notifications
published at every router: each subscriber must get each notification once,
in publication order per producer, and the routers must have sent exactly
one FedNotify per tree edge (n - 1 per notification). The counts are read
once nothing is in flight (every FedNotify sent has been received) and each
subscriber's router has answered a request sent after that, so a late
duplicate cannot hide: these are counts, not timings.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from elvin.protocol import NotifyDeliver, SubAddRqst
from tests.waiting import until

from .federation_util import (
    agreed_topology,
    fed_stats,
    federated_routers,
    remote_pull,
    stop_all,
    wait_linked,
)
from .rawclient import RawClient

RING3 = [(1, 0), (2, 1), (2, 0)]
RING4 = [(1, 0), (2, 1), (3, 2), (3, 0)]
MESH4 = [(a, b) for a in range(4) for b in range(a)]
DIAMOND = [(1, 0), (2, 0), (3, 1), (3, 2)]
CYCLE_WITH_TAIL = [(1, 0), (2, 1), (2, 0), (3, 2), (4, 3)]
RING4_DIALLED_BOTH_WAYS = [(0, 1), (2, 1), (2, 3), (0, 3)]
#: sixteen routers: a ring with chords across it
SIXTEEN = [(i, i - 1) for i in range(1, 16)] + [(15, 0), (8, 0), (12, 4), (10, 3), (14, 7)]


class Subscriber:
    """A client subscribed to everything with a ``Seq``, counting deliveries
    per (Origin, Seq) in arrival order; the only reader of its socket."""

    def __init__(self, client: RawClient) -> None:
        self.client = client
        self.counts: Counter = Counter()
        self.order: dict[str, list[int]] = defaultdict(list)
        self.replies: asyncio.Queue = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def at(cls, port: int, name: str | None = None) -> Subscriber:
        """``name``: a term that only this subscriber has (it matches
        nothing published), so that a pull filter shows whether its
        subscription is in it; ``require(Seq)`` alone is the same for every
        subscriber, and one router's is taken for another's."""
        client = await RawClient.connected(port)
        await client.subscribe("require(Seq)" if name is None else
                               f'require(Seq) || Subscriber == "at-{name}"')
        return cls(client)

    async def _read(self) -> None:
        while True:
            packet = await self.client.next(timeout=3600)
            if isinstance(packet, NotifyDeliver):
                origin, seq = packet.attributes.get("Origin"), packet.attributes.get("Seq")
                self.counts[(origin, seq)] += 1
                self.order[origin].append(seq)
            else:
                self.replies.put_nowait(packet)

    async def round_trip(self) -> None:
        """Everything the router delivered before this request is read."""
        self.client.send(SubAddRqst(self.client.xid(), "require(Never-Sent)"))
        await asyncio.wait_for(self.replies.get(), 10)

    async def close(self) -> None:
        self.task.cancel()
        await self.client.close()


def in_flight(routers) -> int:
    stats = [fed_stats(r) for r in routers]
    return sum(s["fed_notify_sent"] for s in stats) - sum(s["fed_notify_received"]
                                                           for s in stats)


def _reachable(neighbours: Mapping[str, set[str]], start: str, without: str) -> set[str]:
    """The routers reachable from ``start`` without passing ``without``."""
    seen, todo = {start}, [start]
    while todo:
        for peer in neighbours[todo.pop()]:
            if peer != without and peer not in seen:
                seen.add(peer)
                todo.append(peer)
    return seen


def subscribed_behind(routers: Mapping[str, Any], neighbours: Mapping[str, set[str]],
                      subscribed: Iterable[str]) -> bool:
    """Whether each router's pull filter from each neighbour has the
    subscriber (``Subscriber.at(port, name)``) of every router behind that
    neighbour: whichever tree a notification takes, the router it reaches
    next knows who wants it below. (``"Seq"`` in the filter alone was there
    once any one subscription was: the last subscriber's own, still on its
    way, then lost all it was sent, 3 runs in 160 on a loaded machine.)"""
    wanted = set(subscribed)
    return all(f"'at-{e}'" in repr(remote_pull(router, d))
               for name, router in routers.items() for d in neighbours[name]
               for e in _reachable(neighbours, d, without=name) & wanted)


async def everything_everywhere(routers, links, per_router: int = 15,
                                exact_forwarding: bool = True,
                                exactly_once: bool = True) -> dict[str, Counter]:
    """Publish ``per_router`` numbered notifications at every router and check
    that every subscriber got each exactly once (with ``exactly_once``), in
    order, and (with ``exact_forwarding``) that the routers sent one FedNotify
    per tree edge. Returns each subscriber's counts, by router name."""
    n = len(routers)
    wait_linked(routers, links, timeout=60)       # a generous limit: a loaded machine
    subscribers = [await Subscriber.at(r.port, f"r{i}") for i, r in enumerate(routers)]
    try:
        neighbours: defaultdict[str, set[str]] = defaultdict(set)
        for a, b in links:
            neighbours[f"r{a}"].add(f"r{b}")
            neighbours[f"r{b}"].add(f"r{a}")
        named = {f"r{i}": r for i, r in enumerate(routers)}
        await until(lambda: subscribed_behind(named, neighbours, named),
                    what="every subscription in every pull filter")
        sent_before = sum(fed_stats(r)["fed_notify_sent"] for r in routers)
        producers = [await RawClient.connected(r.port) for r in routers]
        for i, producer in enumerate(producers):
            for seq in range(per_router):
                producer.notify({"Origin": f"r{i}", "Seq": seq})
        expected = {(f"r{i}", s) for i in range(n) for s in range(per_router)}
        try:
            await until(lambda: all(expected <= set(s.counts) for s in subscribers),
                        what="every notification at every subscriber")
        except AssertionError as exc:
            missing = {f"r{i}": sorted(expected - set(s.counts))
                       for i, s in enumerate(subscribers) if not expected <= set(s.counts)}
            stats = {f"r{i}": {k: v for k, v in fed_stats(r).items() if v}
                     for i, r in enumerate(routers)}
            graphs = {f"r{i}": agreed_topology(r) for i, r in enumerate(routers)}
            raise AssertionError(f"{exc}; missing: {missing}; federation counters: "
                                 f"{stats}; graphs: {graphs}") from None
        await until(lambda: in_flight(routers) == 0, what="nothing in flight")
        for s in subscribers:
            await s.round_trip()
        for i, s in enumerate(subscribers):
            if not exactly_once:
                continue
            duplicates = {k: c for k, c in s.counts.items() if c != 1}
            assert not duplicates, f"subscriber at r{i} got duplicates: {duplicates}"
            for origin, seqs in s.order.items():
                assert seqs == sorted(seqs), f"r{i} got {origin}'s out of order: {seqs}"
        if exact_forwarding:
            forwarded = sum(fed_stats(r)["fed_notify_sent"] for r in routers) - sent_before
            assert forwarded == (n - 1) * n * per_router, "one FedNotify per tree edge"
        for producer in producers:
            await producer.close()
        return {f"r{i}": Counter(s.counts) for i, s in enumerate(subscribers)}
    finally:
        for s in subscribers:
            await s.close()


@pytest.mark.parametrize("links", [RING3, RING4, MESH4, DIAMOND, CYCLE_WITH_TAIL,
                                   RING4_DIALLED_BOTH_WAYS],
                         ids=["ring3", "ring4", "mesh4", "diamond", "cycle-with-tail",
                              "ring4-dialled-both-ways"])
async def test_every_notification_exactly_once(links):
    n = 1 + max(max(pair) for pair in links)
    routers = federated_routers(n, links)
    try:
        await everything_everywhere(routers, links)
    finally:
        stop_all(routers)


async def test_sixteen_routers_with_cycles():
    routers = federated_routers(16, SIXTEEN)
    try:
        await everything_everywhere(routers, SIXTEEN, per_router=4)
    finally:
        stop_all(routers)
