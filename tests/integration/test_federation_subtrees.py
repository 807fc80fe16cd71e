"""Pull filters follow the trees (issue 40, point 3), with real routers.

A router gets a notification only if a subscriber at it, or below it in the
origin's tree, may want it: on a ring of four with a subscriber at r2 only
and a producer at r0, r0 sends to r1 alone (r2 hangs below r1 in r0's tree)
and r3 receives nothing, although r3's plain pull filter holds r2's
subscription (it would pass it on to r2). Counts of what each link carried,
read once nothing is in flight and the subscriber has answered a request
sent after the last notification: counts, not timings.
"""

from __future__ import annotations

from tests.waiting import until

from .federation_util import (
    fed_stats,
    federated_routers,
    link_stats,
    pull_wants,
    stop_all,
    wait_linked,
)
from .rawclient import RawClient
from .test_federation_topologies import RING4, SIXTEEN, Subscriber, in_flight

COUNT = 200


def pulls_settled(routers) -> bool:
    """No pull filter in flight or waiting to be sent anywhere: every one
    sent has been acknowledged (a router acts on a FedSubReplace, scheduling
    its own, before it acknowledges it) and no router has one scheduled."""
    def settled(router) -> bool:
        service = router.router.federation
        return service._flush is None and all(
            link.acked_pull for link in service.linked.values() if link.sent_pull is not None)
    return all(r.call(lambda r=r: settled(r)) for r in routers)


async def settle(routers) -> None:
    """Pull filters at their fixed point (twice in a row, to be sure)."""
    await until(lambda: pulls_settled(routers) and pulls_settled(routers),
                what="the pull filters settling")


def sent_on(routers, links) -> dict[tuple[int, int], int]:
    """FedNotify packets sent each way on every link."""
    out = {}
    for a, b in links:
        for x, y in ((a, b), (b, a)):
            out[(x, y)] = (link_stats(routers[x], f"r{y}") or {}).get("fed_notify_sent", 0)
    return out


async def publish_and_settle(routers, producer_at: int, subscriber: Subscriber,
                             count: int, origin: str) -> None:
    producer = await RawClient.connected(routers[producer_at].port)
    try:
        for seq in range(count):
            producer.notify({"Origin": origin, "Seq": seq})
        expected = {(origin, s) for s in range(count)}
        await until(lambda: expected <= set(subscriber.counts),
                    what="every notification at the subscriber")
        await until(lambda: in_flight(routers) == 0, what="nothing in flight")
        await subscriber.round_trip()
    finally:
        await producer.close()


async def test_ring_only_the_subscribers_branch_carries_it():
    routers = federated_routers(4, RING4)
    try:
        wait_linked(routers, RING4, timeout=60)
        subscriber = await Subscriber.at(routers[2].port)
        try:
            # r2's subscription has reached r0 both ways round the ring
            await until(lambda: pull_wants(routers[0], "r1", "Seq")
                        and pull_wants(routers[0], "r3", "Seq"),
                        what="r2's subscription in r0's pull filters from r1 and r3")
            await settle(routers)     # also what came back around the ring
            before = sent_on(routers, RING4)
            received_before = fed_stats(routers[3])["fed_notify_received"]
            await publish_and_settle(routers, 0, subscriber, COUNT, "r0")
            after = sent_on(routers, RING4)
            carried = {k: after[k] - before[k] for k in after}
            assert carried[(0, 1)] == COUNT and carried[(1, 2)] == COUNT, carried
            assert carried[(0, 3)] == 0, f"r0 sent r3 what nobody at or below r3 wants: {carried}"
            assert fed_stats(routers[3])["fed_notify_received"] == received_before
            assert sum(carried.values()) == 2 * COUNT, carried
            assert all(c == 1 for c in subscriber.counts.values())
        finally:
            await subscriber.close()
    finally:
        stop_all(routers)


async def test_ring_subscribers_everywhere_each_link_at_most_once():
    """With a subscriber at every router, every notification crosses each
    link at most once and exactly n - 1 links (its tree's edges)."""
    routers = federated_routers(4, RING4)
    try:
        wait_linked(routers, RING4, timeout=60)
        subscribers = [await Subscriber.at(r.port) for r in routers]
        try:
            await until(lambda: all(pull_wants(routers[a], f"r{b}", "Seq")
                                    for x, y in RING4 for a, b in ((x, y), (y, x))),
                        what="every subscription in every pull filter")
            await settle(routers)
            before = sent_on(routers, RING4)
            await publish_and_settle(routers, 0, subscribers[2], COUNT, "r0")
            await until(lambda: all(len(s.counts) == COUNT for s in subscribers),
                        what="every subscriber has them all")
            for s in subscribers:
                await s.round_trip()
            after = sent_on(routers, RING4)
            carried = {k: after[k] - before[k] for k in after}
            assert all(c <= COUNT for c in carried.values()), carried
            assert sum(carried.values()) == 3 * COUNT, carried
            for s in subscribers:
                assert all(c == 1 for c in s.counts.values())
        finally:
            for s in subscribers:
                await s.close()
    finally:
        stop_all(routers)


async def test_sixteen_routers_one_subscriber_only_its_path():
    """On a ring of sixteen with chords, one subscriber: exactly the links on
    the path from the origin to it in the origin's tree carry anything."""
    routers = federated_routers(16, SIXTEEN)
    try:
        wait_linked(routers, SIXTEEN, timeout=120)
        target = 11
        subscriber = await Subscriber.at(routers[target].port)
        try:
            neighbours = {f"r{b}" for a, b in SIXTEEN if a == 0} | \
                         {f"r{a}" for a, b in SIXTEEN if b == 0}
            await until(lambda: all(pull_wants(routers[0], d, "Seq") for d in neighbours),
                        what="r11's subscription at r0 from every side")
            await settle(routers)
            # the tree path r0 -> ... -> r11, as r0's agreed graph gives it
            def path():
                graph = routers[0].router.federation.topology.confirmed
                tree = graph.tree("r0")
                hops, node = [], f"r{target}"
                while node != "r0":
                    hops.append((int(tree[node][1:]), int(node[1:])))
                    node = tree[node]
                return set(hops)
            hops = routers[0].call(path)
            before = sent_on(routers, SIXTEEN)
            await publish_and_settle(routers, 0, subscriber, 50, "r0")
            after = sent_on(routers, SIXTEEN)
            carried = {k: after[k] - before[k] for k in after if after[k] != before[k]}
            assert set(carried) == hops and all(c == 50 for c in carried.values()), \
                (carried, hops)
        finally:
            await subscriber.close()
    finally:
        stop_all(routers)


async def test_flood_router_in_the_ring_still_gets_what_is_behind_it():
    """A router that does not take part (``routing = "flood"``) sends a pull
    filter without groups: its terms count for any subtree, so nothing
    behind it is lost."""
    routers = federated_routers(4, RING4, per_router_routing={3: "flood"})
    try:
        wait_linked(routers, RING4, timeout=60)
        subscriber = await Subscriber.at(routers[3].port)
        try:
            # at the producer's router too: r1 sends a child only what a router
            # at or below it wants, so until r3's subscription has reached r1
            # through r0 and r2, r1 rightly sends nothing
            await until(lambda: pull_wants(routers[0], "r3", "Seq")
                        and pull_wants(routers[2], "r3", "Seq")
                        and pull_wants(routers[1], "r0", "Seq")
                        and pull_wants(routers[1], "r2", "Seq"),
                        what="r3's subscription at r0, r2 and the producer's r1")
            await publish_and_settle(routers, 1, subscriber, COUNT, "r1")
        finally:
            await subscriber.close()
    finally:
        stop_all(routers)
