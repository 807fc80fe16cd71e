"""Federation between real routers on loopback (three or more per test).

Each test starts its routers with ``federated_routers`` (r0 <- r1 <- r2 by
default: r1 dials r0, r2 dials r1) and talks to them with raw clients. The
FedNotify counters of the routers show which links a notification crossed.
"""

from __future__ import annotations

import pytest

from elvin.keys import Keys
from elvin.protocol import NotifyDeliver
from elvin.subscription import parse
from tests.waiting import until

from .federation_util import (
    fed_stats,
    federated_routers,
    link_stats,
    remote_pull,
    stop_all,
    wait_linked,
)
from .rawclient import RawClient


@pytest.fixture
def chain():
    routers = federated_routers(3)
    wait_linked(routers)
    yield routers
    stop_all(routers)


def sent(router) -> int:
    return fed_stats(router)["fed_notify_sent"]


async def wait_pull(router, domain, predicate=lambda p: p is not False and p is not None):
    return await until(lambda: predicate(remote_pull(router, domain)),
                       what=f"a pull filter from {domain}")


async def test_notification_reaches_a_subscriber_two_hops_away(chain):
    r0, r1, r2 = chain
    sub = await RawClient.connected(r2.port)
    sub_id = await sub.subscribe('Group == "chat"')
    await wait_pull(r0, "r1")          # r2's subscription has reached r0 through r1
    assert remote_pull(r0, "r1") == parse('Group == "chat"')
    producer = await RawClient.connected(r0.port)
    producer.notify({"Group": "chat", "Message": "hello from r0"})
    delivered = await sub.expect(NotifyDeliver)
    assert delivered.attributes == {"Group": "chat", "Message": "hello from r0"}
    assert delivered.insecure_matches == (sub_id,)
    assert link_stats(r0, "r1")["fed_notify_sent"] == 1
    assert link_stats(r1, "r2")["fed_notify_sent"] == 1
    assert fed_stats(r2)["fed_notify_delivered"] == 1
    # and back the other way: a producer at r2, a subscriber at r0
    sub0 = await RawClient.connected(r0.port)
    await sub0.subscribe("require(Reply)")
    await wait_pull(r2, "r1", lambda p: p is not False and p is not None and "Reply" in repr(p))
    RawClient_r2 = await RawClient.connected(r2.port)
    RawClient_r2.notify({"Reply": 1})
    assert (await sub0.expect(NotifyDeliver)).attributes == {"Reply": 1}


async def test_no_fed_notify_where_the_peer_has_no_matching_subscription(chain):
    r0, r1, r2 = chain
    sub = await RawClient.connected(r1.port)
    await sub.subscribe('Group == "x"')
    await wait_pull(r0, "r1")
    producer = await RawClient.connected(r0.port)
    for i in range(20):
        producer.notify({"Group": "y", "n": i})      # nobody beyond r0 wants these
    producer.notify({"Group": "x", "n": 99})
    assert (await sub.expect(NotifyDeliver)).attributes["n"] == 99
    # r0 forwarded only the one that r1's pull filter matched, and r1 did not
    # pass it on to r2, which has no subscriptions (its pull filter is FALSE)
    assert link_stats(r0, "r1")["fed_notify_sent"] == 1
    assert sent(r1) == 0 and fed_stats(r2)["fed_notify_received"] == 0
    assert remote_pull(r1, "r2") is False
    # once r2's client subscribes, its pull filter opens the link
    sub2 = await RawClient.connected(r2.port)
    await sub2.subscribe('Group == "y"')
    await wait_pull(r0, "r1", lambda p: p is not None and "'y'" in repr(p))
    producer.notify({"Group": "y", "n": 100})
    assert (await sub2.expect(NotifyDeliver)).attributes["n"] == 100
    assert link_stats(r0, "r1")["fed_notify_sent"] == 2
    assert link_stats(r1, "r2")["fed_notify_sent"] == 1
    # and closes it again when the subscription goes
    await sub2.close()
    await wait_pull(r1, "r2", lambda p: p is False)
    await wait_pull(r0, "r1", lambda p: p is not None and "'y'" not in repr(p))
    producer.notify({"Group": "y", "n": 101})
    producer.notify({"Group": "x", "n": 102})
    assert (await sub.expect(NotifyDeliver)).attributes["n"] == 102
    assert link_stats(r0, "r1")["fed_notify_sent"] == 3     # only n=102


async def test_link_filters_block_what_they_should():
    # r0's outgoing filter towards r1 lets only Public notifications leave;
    # r2's incoming filter from r1 refuses Level 5 and above (and is part of
    # r2's pull filter, so r1 does not even send those).
    routers = federated_routers(3, filters={
        (1, 0): {"b_out": "require(Public)"},
        (2, 1): {"a_in": "Level < 5"},
    })
    try:
        wait_linked(routers)
        r0, r1, r2 = routers
        sub = await RawClient.connected(r2.port)
        await sub.subscribe("require(Msg)")
        await wait_pull(r0, "r1")
        assert remote_pull(r1, "r2") == parse("Level < 5 && require(Msg)")
        producer = await RawClient.connected(r0.port)
        producer.notify({"Msg": 1, "Level": 1})                # blocked leaving r0
        producer.notify({"Msg": 2, "Public": 1, "Level": 9})   # blocked entering r2
        producer.notify({"Msg": 3, "Public": 1, "Level": 1})   # passes
        got = await sub.expect(NotifyDeliver)
        assert got.attributes == {"Msg": 3, "Public": 1, "Level": 1}
        await sub.nothing(0.2)
        # r1's pull filter at r0 carries r2's incoming filter, so Msg 2 does
        # not even leave r0: one FedNotify on each link
        assert link_stats(r0, "r1")["fed_notify_sent"] == 1
        assert link_stats(r1, "r2")["fed_notify_sent"] == 1
    finally:
        stop_all(routers)


async def test_incoming_filter_drops_what_a_peer_sends_regardless():
    from elvin.federation.packets import FedNotify

    from .federation_util import RawFederator

    routers = federated_routers(3, links=[(1, 0), (2, 1)], accept_any=True,
                                accept_any_incoming="Level > 2")
    try:
        wait_linked(routers)
        r0, r1, r2 = routers
        sub = await RawClient.connected(r0.port)
        await sub.subscribe("require(Level)")
        peer = await RawFederator.linked(r0.federation_urls[0], "intruder")
        peer.send(FedNotify({"Level": 1}, True, Keys(), ("intruder",)))
        peer.send(FedNotify({"Level": 5}, True, Keys(), ("intruder",)))
        assert (await sub.expect(NotifyDeliver)).attributes == {"Level": 5}
        stats = fed_stats(r0)
        assert stats["fed_notify_filtered"] == 1 and stats["fed_notify_delivered"] == 1
        await peer.close()
    finally:
        stop_all(routers)


async def test_a_loop_does_not_loop_notifications_with_routing_lists_alone():
    """routing = "flood": the protocol as written (Avis, older elvind), where
    routing lists stop loops but not copies by two paths; every copy is
    passed on as the protocol says, and an elvind delivers only the first
    (test_federation_topologies has the trees, which send none)."""
    links = [(1, 0), (2, 1), (2, 0)]          # a triangle: not a spanning tree
    routers = federated_routers(3, links=links, routing="flood")
    try:
        wait_linked(routers, links)
        r0, r1, r2 = routers
        subs = []
        for r in (r1, r2):
            client = await RawClient.connected(r.port)
            await client.subscribe("require(Seq)")
            subs.append(client)
        for r, domain in ((r0, "r1"), (r0, "r2"), (r1, "r2"), (r2, "r1")):
            await wait_pull(r, domain)
        producer = await RawClient.connected(r0.port)
        count = 5
        for i in range(count):
            producer.notify({"Seq": i})

        def total(key):
            return sum(fed_stats(r)[key] for r in routers)
        # r0 -> r1, r0 -> r2, then r1 -> r2 and r2 -> r1 with the longer
        # routing lists; every further hop is cut by a routing list.
        await until(lambda: total("fed_notify_received") == 4 * count,
                    what="every FedNotify to arrive")
        # a second batch after the first one has settled: still exactly 4
        # FedNotify per notification, so nothing circulates
        producer.notify({"Seq": count})
        await until(lambda: total("fed_notify_received") == 4 * (count + 1),
                    what="the last FedNotify")
        assert total("fed_notify_sent") == 4 * (count + 1)
        # without a spanning tree a router gets a notification along both
        # paths (the draft assumes a tree): the second copy is passed on only
        await until(lambda: total("fed_notify_passed_on") == 2 * (count + 1),
                    what="the second copies")
        for client in subs:
            got = [p.attributes["Seq"] for p in await client.quiet(0.3)
                   if isinstance(p, NotifyDeliver)]
            assert sorted(got) == list(range(count + 1))      # once each
        assert fed_stats(r0)["fed_notify_received"] == 0
        assert total("fed_notify_sent") == 4 * (count + 1)
    finally:
        stop_all(routers)


@pytest.mark.parametrize("which", [0, 1])
async def test_router_restart_reestablishes_links_and_pull_filters(chain, which):
    r0, r1, r2 = chain
    sub = await RawClient.connected(r2.port)
    await sub.subscribe('Group == "chat"')
    await wait_pull(r0, "r1")
    chain[which].restart()
    wait_linked(chain)
    await wait_pull(r0, "r1")             # r2's subscription is known at r0 again
    producer = await RawClient.connected(r0.port)
    producer.notify({"Group": "chat", "n": 1})
    assert (await sub.expect(NotifyDeliver)).attributes == {"Group": "chat", "n": 1}


async def test_secure_notifications_cross_with_their_keys(chain):
    r0, r1, r2 = chain
    key = b"the producer's secret"
    holder = await RawClient.connected(r2.port)
    holder_id = await holder.subscribe("require(Pay)", accept_insecure=False,
                                       keys=Keys.producer_subscription(key))
    other = await RawClient.connected(r2.port)
    await other.subscribe("require(Pay)")
    await wait_pull(r0, "r1")
    producer = await RawClient.connected(r0.port)
    producer.notify({"Pay": 1}, deliver_insecure=False)            # no keys: nobody
    producer.notify({"Pay": 2}, deliver_insecure=False,
                    keys=Keys.producer_notification(key))         # only the key holder
    got = await holder.expect(NotifyDeliver)
    assert got.attributes == {"Pay": 2} and got.secure_matches == (holder_id,)
    await other.nothing(0.2)
    assert link_stats(r0, "r1")["fed_notify_sent"] == 1   # the keyless one stayed home


async def test_stop_sends_disconn_to_federated_routers(chain):
    from elvin.federation.packets import Ack, FedSubReplace
    from elvin.protocol import Disconn

    from .federation_util import RawFederator
    from .federation_util import federated_routers as make

    extra = make(1, accept_any=True)
    try:
        peer = await RawFederator.linked(extra[0].federation_urls[0], "watcher")
        peer.send(FedSubReplace(5, True))
        await peer.expect(Ack)
        extra[0].stop()
        got = await peer.until_closed()
        assert any(isinstance(p, Disconn) and p.reason == 1 for p in got)
    finally:
        stop_all(extra)


async def test_large_pull_filters_are_indexed_and_forward_selectively(chain):
    r0, r1, r2 = chain
    sub = await RawClient.connected(r2.port)
    for first in range(0, 400, 50):
        await sub.subscribe(" || ".join(f'(Group == "g{i}" && require(Body))'
                                        for i in range(first, first + 50)))

    def terms():
        pull = remote_pull(r0, "r1")
        return 0 if pull in (None, False, True) else len(pull.children)
    await until(lambda: terms() == 400, what="a 400-term pull filter at r0")
    producer = await RawClient.connected(r0.port)
    producer.notify({"Group": "g9999", "Body": 1})
    producer.notify({"Group": "g399", "Body": 2})
    assert (await sub.expect(NotifyDeliver)).attributes == {"Group": "g399", "Body": 2}
    assert link_stats(r0, "r1")["fed_notify_sent"] == 1
