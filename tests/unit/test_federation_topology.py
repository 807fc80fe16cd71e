"""The tree computation of ``elvin.federation.topology``, on simulated
federations: every router's ``TopologyView`` floods its announcements to its
neighbours (as the federation service does) until nothing changes, then
notifications are forwarded hop by hop with ``TopologyView.route``.

The property (issue 27): on random connected graphs of up to 16 routers,
all routers agree on the graph, and from every origin every router gets
every notification exactly once.
"""

from __future__ import annotations

import itertools
from collections import Counter, deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elvin.federation.topology import (
    ANNOUNCEMENT_ATTR,
    STAMP_PREFIX,
    Announcement,
    BadAnnouncement,
    LinkState,
    TopologyView,
    compute_graph,
    decode_announcement,
    encode_announcement,
    split_routing,
)


class Federation:
    """Routers ``r0``..``r{n-1}`` linked by ``links``; ``silent`` routers
    don't take part (they flood, as Avis does). ``filters[(a, b)]`` is ``a``'s
    outgoing filter towards ``b``."""

    def __init__(self, n: int, links, silent=(), filters=None, clock_start=1000) -> None:
        self.names = [f"r{i:02d}" for i in range(n)]
        self.links = {frozenset((self.names[a], self.names[b])) for a, b in links}
        self.silent = {self.names[i] for i in silent}
        self.filters = {(self.names[a], self.names[b]): f for (a, b), f in (filters or {}).items()}
        self.clock = itertools.count(clock_start)
        self.views = {name: TopologyView(name, clock=lambda: next(self.clock))
                      for name in self.names if name not in self.silent}
        self.queue: deque[tuple[str, str, Announcement]] = deque()
        for name in self.views:
            self.update_links(name)

    def neighbours(self, name: str) -> list[str]:
        return sorted(next(iter(link - {name})) for link in self.links if name in link)

    def update_links(self, name: str) -> None:
        view = self.views[name]
        states = [LinkState(peer, peer not in self.silent,
                            self.filters.get((name, peer), True), True)
                  for peer in self.neighbours(name)]
        if view.set_links(states):
            self.send_own(name)

    def send_own(self, name: str) -> None:
        for peer in self.neighbours(name):
            if peer in self.views:
                self.queue.append((name, peer, self.views[name].own))

    def settle(self) -> None:
        """Deliver announcements in rounds (what one read of a link brings),
        each router refreshing its graphs once per round, until none is left."""
        rounds = 0
        while self.queue:
            rounds += 1
            assert rounds < 1000, "announcements never settle"
            batch, self.queue = self.queue, deque()
            touched = set()
            for sender, to, ann in batch:
                if frozenset((sender, to)) not in self.links or to not in self.views:
                    continue
                # announcements travel as FedNotify attributes: through the codec
                ann = decode_announcement(encode_announcement(ann))
                touched.add(to)
                if self.views[to].receive(ann):
                    for peer in self.neighbours(to):
                        if peer != sender and peer in self.views:
                            self.queue.append((to, peer, ann))
            for name in sorted(touched):
                if self.views[name].refresh():
                    self.send_own(name)

    def remove_router(self, name: str) -> None:
        self.links = {link for link in self.links if name not in link}
        self.views.pop(name, None)
        for peer in self.views:
            self.update_links(peer)

    def deliveries(self, origin: str, attrs=None) -> Counter:
        """Forward one notification published at ``origin``: routers that take
        part follow ``route`` (dropping copies from anyone but the parent),
        the others flood with routing lists, as the protocol says."""
        got: Counter = Counter()
        pending: deque[tuple[str, tuple[str, ...]]] = deque([(origin, ())])
        hops = 0
        while pending:
            hops += 1
            assert hops < 100_000
            at, routing = pending.popleft()
            if at in self.silent:
                got[at] += 1
                out = (at, *routing)
                targets = [p for p in self.neighbours(at) if p not in routing]
            else:
                route = self.views[at].route(routing, attrs)
                if routing and route.graph is not None and route.parent != routing[0]:
                    continue                      # off the tree: dropped
                got[at] += 1
                if not routing and route.stamp:
                    out = (at, route.stamp)
                else:
                    out = (at, *routing)
                if route.graph is None:
                    targets = [p for p in self.neighbours(at) if p not in routing]
                else:
                    targets = list(route.children)
            for target in targets:
                if frozenset((at, target)) in self.links and target not in out:
                    pending.append((target, out))
        return got


@st.composite
def connected_graphs(draw, max_nodes=16):
    n = draw(st.integers(1, max_nodes))
    links = set()
    for i in range(1, n):                       # a random spanning tree ...
        links.add((i, draw(st.integers(0, i - 1))))
    pairs = [(a, b) for a in range(n) for b in range(a)]
    extra = draw(st.lists(st.sampled_from(pairs), max_size=2 * n)) if pairs else []
    links.update(extra)                         # ... plus cycles
    return n, sorted(links)


@settings(max_examples=60, deadline=None)
@given(connected_graphs())
def test_every_router_gets_every_notification_once_from_every_origin(graph):
    n, links = graph
    fed = Federation(n, links)
    fed.settle()
    digests = {view.confirmed.digest for view in fed.views.values()}
    assert len(digests) == 1, "all routers agree on the graph"
    assert all(view.current.digest in digests for view in fed.views.values())
    for origin in fed.names:
        got = fed.deliveries(origin)
        assert got == Counter({name: 1 for name in fed.names}), origin


@settings(max_examples=30, deadline=None)
@given(connected_graphs(max_nodes=12), st.data())
def test_routers_agree_again_after_one_goes(graph, data):
    n, links = graph
    fed = Federation(n, links)
    fed.settle()
    victim = data.draw(st.sampled_from(fed.names))
    fed.remove_router(victim)
    fed.settle()
    # the survivors in the victim's largest remaining component agree, and
    # reach each other exactly once; every survivor reaches its own component
    for origin in fed.views:
        got = fed.deliveries(origin)
        assert set(got.values()) <= {1}, (origin, got)
        component = set(fed.views[origin].confirmed.nodes)
        assert set(got) == component
        assert {fed.views[name].confirmed.digest for name in component} == \
            {fed.views[origin].confirmed.digest}


def test_trees_are_shortest_paths_with_the_lowest_named_parent():
    # ring r00 - r01 - r02 - r03 - r00: r02 is two hops from r00 either way
    fed = Federation(4, [(1, 0), (2, 1), (3, 2), (3, 0)])
    fed.settle()
    graph = fed.views["r00"].confirmed
    assert graph.tree("r00") == {"r00": "r00", "r01": "r00", "r03": "r00", "r02": "r01"}
    assert graph.tree("r01")["r03"] == "r00"
    assert fed.views["r01"].route(("r00", STAMP_PREFIX + graph.digest), None).children == \
        ("r02",)
    assert fed.views["r03"].route(("r00", STAMP_PREFIX + graph.digest), None).children == ()


def test_a_router_that_does_not_take_part_between_ours_on_a_cycle():
    # ring r00 - r01 - r02 - r03 - r00 with r02 silent (Avis): it floods,
    # its neighbours drop the copies that are not from their parent
    fed = Federation(4, [(1, 0), (2, 1), (3, 2), (3, 0)], silent=[2])
    fed.settle()
    assert "r02" in fed.views["r00"].confirmed.nodes
    assert "r02" not in fed.views["r00"].confirmed.participants
    for origin in fed.names:
        assert fed.deliveries(origin) == Counter({name: 1 for name in fed.names}), origin


def test_two_adjacent_silent_routers_on_a_cycle_are_loop_free_but_may_duplicate():
    # r00 - r01 - r02 - r03 - r00 with r01, r02 silent: the link between them
    # is unknown, so r03's tree for r00's notifications misses it
    fed = Federation(4, [(1, 0), (2, 1), (3, 2), (3, 0)], silent=[1, 2])
    fed.settle()
    got = fed.deliveries("r00")
    assert set(got) == set(fed.names)          # nothing lost, nothing loops
    assert got["r00"] == 1 and got["r03"] == 1  # ours get it once


def test_filtered_links_shape_the_tree_per_notification():
    # triangle: r00 -> r01 only lets Group == "a" through, so for anything
    # else r01 is reached through r02
    fed = Federation(3, [(1, 0), (2, 1), (2, 0)], filters={(0, 1): 'Group == "a"'})
    fed.settle()
    graph = fed.views["r00"].confirmed
    assert graph.tree("r00", {"Group": "a"})["r01"] == "r00"
    assert graph.tree("r00", {"Group": "b"})["r01"] == "r02"
    for group in ("a", "b"):
        assert fed.deliveries("r00", {"Group": group}) == \
            Counter({"r00": 1, "r01": 1, "r02": 1})


def test_a_restarted_router_supersedes_its_old_announcements():
    view = TopologyView("r00", clock=lambda: 5.0)
    old = Announcement("r00", view.own.sequence + 50, (LinkState("r01", True),), ())
    assert view.receive(old) is False
    assert view.refresh() is True
    assert view.own.sequence > old.sequence
    assert view.own.links == ()


def test_announcement_codec_refuses_garbage():
    ann = Announcement("r00", 7, (LinkState("r01", True, 'Group == "x"', False),), ("ab",))
    assert decode_announcement(encode_announcement(ann)) == ann
    bad = ['{"v": 2}', "not json", '{"v":1,"router":"","seq":1,"held":[],"links":[]}',
           '{"v":1,"router":"a","seq":-1,"held":[],"links":[]}',
           '{"v":1,"router":"a","seq":1,"held":[],"links":[["b",1,true,true]]}',
           '{"v":1,"router":"a","seq":1,"held":[],"links":[["b",true,true]]}']
    for text in bad:
        with pytest.raises(BadAnnouncement):
            decode_announcement({ANNOUNCEMENT_ATTR: text})
    with pytest.raises(BadAnnouncement):
        decode_announcement({ANNOUNCEMENT_ATTR: 5})
    with pytest.raises(BadAnnouncement):
        decode_announcement({**encode_announcement(ann), "Other": 1})


def test_split_routing():
    assert split_routing(()) == (None, None)
    assert split_routing(("b", "a")) == ("a", None)
    assert split_routing(("b", "a", STAMP_PREFIX + "d1")) == ("a", "d1")
    assert split_routing((STAMP_PREFIX + "d1",)) == (None, None)


def test_stale_announcements_of_a_gone_router_do_not_change_the_graph():
    fed = Federation(3, [(1, 0), (2, 1)])
    fed.settle()
    before = fed.views["r00"].confirmed.digest
    # r00 still holds r02's last announcement, but r01 no longer lists r02
    fed.remove_router("r02")
    fed.settle()
    assert "r02" in fed.views["r00"].announcements
    graph = compute_graph("r00", fed.views["r00"].announcements)
    assert graph.nodes == ("r00", "r01")
    assert fed.views["r00"].confirmed.digest == graph.digest != before
