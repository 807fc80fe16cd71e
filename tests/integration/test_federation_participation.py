"""Taking part in learning the topology, on the wire (issue 27).

Raw federation peers stand for Avis (which never takes part) and for a
router that takes part but is slow: what a router sends each of them, when,
and what it refuses. Plus a router that doesn't take part (``routing =
"flood"``, as an older ``elvind``) on a cycle of routers that do.
"""

from __future__ import annotations

import pytest

from elvin.federation.packets import Ack, FedNotify, FedSubReplace
from elvin.federation.subast import TRUE_FILTER_AST
from elvin.federation.topology import (
    ANNOUNCEMENT_ATTR,
    STAMP_PREFIX,
    Announcement,
    LinkState,
    decode_announcement,
    split_markers,
    with_marker,
)
from elvin.protocol import NotifyDeliver
from elvin.subscription import parse
from tests.waiting import until

from .federation_util import (
    RawFederator,
    RawListener,
    fed_stats,
    federated_routers,
    linked_domains,
    remote_pull,
    single_router,
    stop_all,
    wait_linked,
)
from .rawclient import RawClient
from .test_federation_topologies import RING4, everything_everywhere


def own_announcement(router) -> Announcement:
    return router.call(lambda: router.router.federation.topology.own)


async def next_announcement(peer: RawFederator) -> Announcement:
    while True:
        packet = await peer.expect(FedNotify)
        if ANNOUNCEMENT_ATTR in packet.attributes:
            return decode_announcement(packet.attributes)


@pytest.mark.parametrize("dialled", [False, True], ids=["avis-dials", "router-dials"])
async def test_a_router_that_does_not_take_part_gets_no_announcements_and_plain_efp(dialled):
    """An Avis-like peer: its pull filter has no marker. It gets the
    router's marker in the pull filters (an ordinary term), notifications
    with routing lists it can use, and never an announcement; either end
    may dial."""
    listener = await RawListener.start() if dialled else None
    router = (single_router(connect=[listener.url]) if listener is not None
              else single_router(accept=["avis"]))
    try:
        if listener is not None:
            peer = await listener.accept_linked("avis")
        else:
            peer = await RawFederator.linked(router.federation_urls[0], "avis")
        replace = await peer.expect(FedSubReplace)
        pull, domains = split_markers(replace.pull_filter, TRUE_FILTER_AST)
        assert domains == {"r0"} and pull is False        # r0 takes part, wants nothing
        peer.send(Ack(replace.xid))
        peer.send(FedSubReplace(7, parse("require(Seq)")))   # what Avis's clients want
        await peer.expect(Ack)
        producer = await RawClient.connected(router.port)
        producer.notify({"Seq": 1})
        notify = await peer.expect(FedNotify)
        assert notify.attributes == {"Seq": 1}
        assert notify.routing[0] == "r0" and notify.routing[-1].startswith(STAMP_PREFIX)
        # Avis sends it back with its domain first: our domain is in the list
        peer.send(FedNotify(notify.attributes, routing=("avis", *notify.routing)))
        # ... and its own clients' notifications come in as any peer's
        sub = await RawClient.connected(router.port)
        await sub.subscribe("require(FromAvis)")
        peer.send(FedNotify({"FromAvis": 1}, routing=("avis",)))
        assert (await sub.expect(NotifyDeliver)).attributes == {"FromAvis": 1}
        assert fed_stats(router)["fed_notify_looped"] == 1
        assert fed_stats(router)["announcements_sent"] == 0
        assert own_announcement(router).links[0].participant is False
        await peer.close()
    finally:
        router.stop()
        if listener is not None:
            await listener.close()


async def test_announcements_from_a_peer_that_does_not_take_part_are_ignored():
    """A FedNotify shaped as an announcement from a router that has not said
    it takes part (a client of Avis can publish anything) changes nothing
    and reaches no client."""
    router = single_router(accept=["avis"])
    try:
        peer = await RawFederator.linked(router.federation_urls[0], "avis")
        sub = await RawClient.connected(router.port)
        await sub.subscribe(f"require({ANNOUNCEMENT_ATTR}) || require(After)")
        fake = '{"v":1,"router":"avis","seq":9,"held":[],"links":[["r0",true,true,true]]}'
        peer.send(FedNotify({ANNOUNCEMENT_ATTR: fake}, routing=("avis",)))
        peer.send(FedNotify({"After": 1}, routing=("avis",)))
        assert (await sub.expect(NotifyDeliver)).attributes == {"After": 1}
        assert "avis" not in router.call(
            lambda: router.router.federation.topology.announcements)
        # the fake changed nothing: avis is still a router that does not take part
        assert [(s.peer, s.participant) for s in own_announcement(router).links] == \
            [("avis", False)]
        await peer.close()
    finally:
        router.stop()


async def test_a_client_notification_shaped_as_an_announcement_is_not_forwarded():
    routers = federated_routers(2)
    try:
        wait_linked(routers)
        r0, r1 = routers
        sub = await RawClient.connected(r1.port)
        await sub.subscribe(f"require({ANNOUNCEMENT_ATTR}) || require(Marker)")
        await until(lambda: "Marker" in repr(remote_pull(r0, "r1")), what="r1's pull filter")
        producer = await RawClient.connected(r0.port)
        producer.notify({ANNOUNCEMENT_ATTR: '{"v":1}', "Marker": 1})
        producer.notify({"Marker": 2})
        assert (await sub.expect(NotifyDeliver)).attributes == {"Marker": 2}
        assert fed_stats(r0)["fed_notify_sent"] == 1
    finally:
        stop_all(routers)


async def test_a_new_link_joins_the_trees_once_its_pull_filters_are_acknowledged():
    """A peer that takes part joins this router's announcement (and so the
    trees) only once every other peer has acknowledged the pull filter the
    new link changed: a tree through it used earlier could lose what the
    routers upstream do not yet know it wants."""
    router = single_router(accept=["p1", "p2"])
    try:
        url = router.federation_urls[0]
        p2 = await RawFederator.linked(url, "p2")
        p2.send(Ack((await p2.expect(FedSubReplace)).xid))
        p1 = await RawFederator.linked(url, "p1")
        p1.send(Ack((await p1.expect(FedSubReplace)).xid))
        # p1 takes part, and wants require(X): r0 must ask p2 for it too
        p1.send(FedSubReplace(5, with_marker(parse("require(X)"), "p1", TRUE_FILTER_AST)))
        ann = await next_announcement(p1)          # what r0 knows, ahead of the Ack
        assert ann.router == "r0"
        await p1.expect(Ack)
        changed = await p2.expect(FedSubReplace)
        assert "X" in repr(changed.pull_filter)
        assert own_announcement(router).link("p1") is None    # pending: not announced
        p2.send(Ack(changed.xid))
        await until(lambda: (own_announcement(router).link("p1") or LinkState("", False))
                    .participant,
                    what="p1 announced as taking part once p2 acknowledged")
        ann = await next_announcement(p1)
        while not ann.link("p1").participant:
            ann = await next_announcement(p1)
        await p1.close()
        await p2.close()
    finally:
        router.stop()


async def test_bad_announcements_are_ignored_with_one_warning(caplog):
    caplog.set_level("WARNING", logger="elvin.federation")
    router = single_router(accept=["p1"])
    try:
        peer = await RawFederator.linked(router.federation_urls[0], "p1")
        replace = await peer.expect(FedSubReplace)
        peer.send(Ack(replace.xid))
        peer.send(FedSubReplace(5, with_marker(False, "p1", TRUE_FILTER_AST)))
        await peer.expect(Ack)
        for garbage in ("not json", '{"v":1,"router":5}', '{"v":1}'):
            peer.send(FedNotify({ANNOUNCEMENT_ATTR: garbage}, routing=("p1",)))
        peer.send(FedNotify({ANNOUNCEMENT_ATTR: 42}, routing=("p1",)))
        await until(lambda: [r for r in caplog.records if "bad topology announcement"
                             in r.getMessage()], what="the warning")
        assert linked_domains(router) == {"p1"}        # the link stays
        assert len([r for r in caplog.records
                    if "bad topology announcement" in r.getMessage()]) == 1
        await peer.close()
    finally:
        router.stop()


async def test_a_router_that_does_not_take_part_on_a_cycle():
    """A router with ``routing = "flood"`` (as an older elvind or Avis) on a
    ring of four: every subscriber, its own included, gets every notification
    exactly once (its neighbours drop the copies it floods to them that don't
    come from their parent in the tree)."""
    routers = federated_routers(4, RING4, per_router_routing={2: "flood"})
    try:
        await everything_everywhere(routers, RING4, exact_forwarding=False)
        assert sum(fed_stats(r)["fed_notify_off_tree"] for r in routers) > 0
    finally:
        stop_all(routers)


@pytest.mark.parametrize("flooding", [[1, 2], [1, 3]], ids=["adjacent", "splitting-ours"])
async def test_flooding_elvinds_linked_or_cutting_ours_apart_deliver_once(flooding):
    """Two routers with ``routing = "flood"`` on a ring of four, next to each
    other or cutting ours apart: what lies beyond them is unknown to ours,
    so one of them can get a notification twice, by two paths (issue 40).
    It passes both copies on, as the protocol says, but delivers only the
    first to its own clients (``FederationService.first_here``): every
    subscriber gets each notification once, nothing is lost, nothing loops.
    Before, the subscribers at the flooding routers got some twice."""
    routers = federated_routers(4, RING4, per_router_routing={i: "flood" for i in flooding})
    try:
        await everything_everywhere(routers, RING4, exact_forwarding=False)
        assert sum(fed_stats(routers[i])["fed_notify_passed_on"] for i in flooding) > 0
    finally:
        stop_all(routers)


async def test_a_router_cut_apart_by_a_flooding_router_reaches_the_others():
    """r0 - r1 - r2 - r3 with r1 flooding: r0 is cut apart from r2 and r3 but
    for r1, so its notifications carry a stamp of a graph only it holds. r2
    routes them by its own graph and passes them on with that stamp, which
    r3 dropped (a stamp it does not hold, from a router that takes part):
    r0's notifications never reached r3 (issue 40, simulation seed 93).
    r3 routes them as r2 does (their origin is not in its graph), and
    everyone gets everything once."""
    chain = [(1, 0), (2, 1), (3, 2)]
    routers = federated_routers(4, chain, per_router_routing={1: "flood"})
    try:
        await everything_everywhere(routers, chain, exact_forwarding=False)
    finally:
        stop_all(routers)


def test_config_refuses_unknown_routing_and_reserved_domains():
    from elvin.federation.config import FederationConfig, FederationConfigError
    with pytest.raises(FederationConfigError, match="federation.routing"):
        FederationConfig(routing="spanning").validate()
    with pytest.raises(FederationConfigError, match="reserved"):
        FederationConfig(router_domain=STAMP_PREFIX + "x").validate()


async def test_reloading_with_another_routing_relinks_and_takes_part_again(tmp_path):
    """A router switched to ``routing = "flood"`` by a config reload relinks
    and no longer takes part (the others then treat it as an older elvind);
    switched back, it takes part again. Exactly once all along."""
    from .test_federation_config import _reload
    from .test_federation_topologies import RING3

    routers = federated_routers(3, RING3)
    r0, r1, r2 = routers
    path = tmp_path / "r1.toml"

    def write(routing: str) -> None:
        path.write_text(
            '[federation]\nrouter_domain = "r1"\n'
            f'listen = "{r1.federation_urls[0]}"\ndebounce = 0.01\n'
            f'reconnect_min = 0.05\nrouting = "{routing}"\n'
            f'[[federation.connect]]\nrouter = "r0"\nurl = "{r0.federation_urls[0]}"\n'
            '[[federation.accept]]\nrouter = "r2"\n')

    def takes_part(router, domain: str) -> bool:
        return router.call(lambda: router.router.federation.link_for(domain).participant)

    try:
        await everything_everywhere(routers, RING3)
        write("flood")
        assert _reload(r1, path)
        await until(lambda: linked_domains(r1) == {"r0", "r2"} and
                    r1.call(lambda: r1.router.federation.topology) is None,
                    what="r1 relinked, flooding")
        await until(lambda: not takes_part(r0, "r1") and not takes_part(r2, "r1"),
                    what="r0 and r2 seeing r1 flood")
        await everything_everywhere(routers, RING3, exact_forwarding=False)
        write("trees")
        assert _reload(r1, path)
        await until(lambda: r1.call(lambda: r1.router.federation.topology) is not None,
                    what="r1 learning the topology again")
        await everything_everywhere(routers, RING3)
        assert takes_part(r0, "r1") and takes_part(r2, "r1")
    finally:
        stop_all(routers)


async def test_interest_not_yet_announced_is_a_counted_logged_gap(caplog):
    """Right after a (re)start, what its subscribers want reaches the peers
    only once the links are up and the pull filters acknowledged;
    notifications published elsewhere before then are lost, and no router
    can tell (mobility run 25). The gap cannot be closed, so it is reported:
    a subscription added in it is counted (``interest_gaps``) and logged,
    and ``interest_unannounced`` names the peers that may not know it. A
    subscription added once every link is acknowledged is not counted."""
    router = single_router(accept=["p1"])
    service = lambda: router.router.federation  # noqa: E731
    try:
        url = router.federation_urls[0]
        p1 = await RawFederator.linked(url, "p1")
        first = await p1.expect(FedSubReplace)              # not acknowledged yet
        sub = await RawClient.connected(router.port)
        await sub.subscribe('Group == "early"')
        await until(lambda: fed_stats(router)["interest_gaps"] == 1,
                    what="the subscription counted as a gap")
        assert router.call(lambda: service().interest_unannounced())[0] == "p1"
        assert "before its interest could be announced to p1" in caplog.text
        p1.send(Ack(first.xid))
        await until(lambda: router.call(lambda: service().interest_unannounced()) == [],
                    what="p1 acknowledged a pull filter, a topology agreed")
        await sub.subscribe('Group == "later"')
        await p1.expect(FedSubReplace)          # the later interest went out: it was seen
        assert fed_stats(router)["interest_gaps"] == 1
        await sub.close()
        await p1.close()
    finally:
        router.stop()
