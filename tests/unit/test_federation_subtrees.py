"""Pull filters that follow the trees (``elvin.federation.subtrees``), sans-IO.

The property (issue 40, point 3): on random connected graphs, with
subscriptions at random routers, once the pull filters (with their groups)
have reached their fixed point, a router forwards a notification to a child
in the origin's tree exactly when a subscriber at that child or below it in
the tree wants it: nothing is lost, and nothing goes where nobody wants it.
The filters travel through the wire encoding, as between routers.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from elvin.federation.pullfilter import compute_pull_filter
from elvin.federation.subast import decode_subast, encode_subast
from elvin.federation.subtrees import (
    WILDCARD,
    BehindMatchers,
    PullMatcher,
    compute_groups,
    split_groups,
    subtrees,
    with_groups,
)
from elvin.federation.topology import Announcement, LinkState, compute_graph
from elvin.subscription import parse
from elvin.subscription.ast import Kind

GROUPS = 6


def random_links(rng: random.Random, n: int, extra: int) -> set[frozenset[int]]:
    links = {frozenset((i, rng.randrange(i))) for i in range(1, n)}
    for _ in range(extra):
        a, b = rng.sample(range(n), 2)
        links.add(frozenset((a, b)))
    return links


def wire(pull):
    """A pull filter as the peer decodes it."""
    if pull is True or pull is False:
        return pull
    return decode_subast(encode_subast(pull))[0]


def canonical(held: tuple):
    """A filter and its groups as sets of terms (the order of OR terms
    depends on the order the peers' filters came in)."""
    def terms(pull):
        if pull is True or pull is False:
            return pull
        return frozenset(pull.children if pull.kind is Kind.OR else (pull,))
    plain, groups = held
    return terms(plain), None if groups is None else {k: terms(v) for k, v in groups.items()}


def fixed_point(n: int, links, local) -> dict[tuple[int, int], tuple]:
    """``{(r, p): (plain, groups)}``: r's pull filter to p, as p holds it,
    once nothing changes."""
    neighbours = {i: sorted(j for link in links if i in link for j in link if j != i)
                  for i in range(n)}
    held = {(r, p): (False, None) for r in range(n) for p in neighbours[r]}
    for _ in range(4 * n):
        changed = False
        for (r, p) in list(held):
            others = [held[(m, r)] for m in neighbours[r] if m != p]
            plain = compute_pull_filter(True, local[r], [(True, pl) for pl, _ in others])
            groups = compute_groups(True, f"r{r}", local[r],
                                    [(True, g, pl) for pl, g in others], f"r{p}")
            got = split_groups(wire(with_groups(plain, groups)))
            if canonical(got) != canonical(held[(r, p)]):
                held[(r, p)] = got
                changed = True
        if not changed:
            return held
    raise AssertionError("the pull filters did not reach a fixed point")


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9), st.integers(0, 4), st.integers(0, 2**32))
def test_forward_exactly_where_the_subtree_wants_it(n, extra, seed):
    rng = random.Random(seed)
    links = random_links(rng, n, extra)
    wants = {i: set(rng.sample(range(GROUPS), rng.randint(0, 2))) for i in range(n)}
    local = {i: [parse(f'Group == "g{g}"') for g in sorted(wants[i])] for i in range(n)}
    held = fixed_point(n, links, local)
    announcements = {
        f"r{i}": Announcement(f"r{i}", 1, tuple(LinkState(f"r{j}", True) for link in links
                                                 if i in link for j in link if j != i))
        for i in range(n)}
    graph = compute_graph("r0", announcements)
    nodes = frozenset(graph.nodes)
    for origin in range(n):
        tree = graph.tree(f"r{origin}")
        for r in range(n):
            for child, below in subtrees(tree, f"r{r}").items():
                c = int(child[1:])
                plain, groups = held[(c, r)]
                if groups is None:            # sent nothing: it wants nothing
                    assert plain is False, (c, r, plain)
                    groups = {}
                plain_match = PullMatcher()
                plain_match.update(plain)
                matcher = BehindMatchers(groups, plain_match if plain_match.constant is None
                                         else plain_match.constant).for_subtree(below, nodes)
                for g in range(GROUPS):
                    attrs = {"Group": f"g{g}"}
                    wanted = any(g in wants[int(x[1:])] for x in below)
                    sent = matcher is True or (matcher is not False and matcher(attrs))
                    assert sent == wanted, (origin, r, child, g, sorted(below), groups)


def test_a_peer_without_groups_counts_for_every_subtree():
    """Terms from a peer that sent no groups (it does not take part) may be
    for anyone: they go under ``WILDCARD``, which every subtree includes."""
    sub = parse('Group == "g1"')
    groups = compute_groups(True, "r1", [], [(True, None, sub)], "r0")
    assert groups == {WILDCARD: sub}
    matcher = BehindMatchers(groups, True).for_subtree(frozenset({"r1"}), frozenset({"r1"}))
    assert matcher({"Group": "g1"}) and not matcher({"Group": "g2"})


def test_groups_round_trip_and_plain_peers_see_an_equivalent_filter():
    a, b = parse('Group == "g1"'), parse('Seq > 3 && Kind == "x"')
    plain = compute_pull_filter(True, [a, b], [])
    groups = {"r2": plain, "r3": True}
    pull = wire(with_groups(plain, groups))
    assert split_groups(pull) == (plain, groups)
    # a router that does not take part matches the whole filter as it is
    matcher = PullMatcher()
    matcher.update(pull)
    for attrs in ({"Group": "g1"}, {"Group": "g2"}, {"Seq": 4, "Kind": "x"}, {"Seq": 4}):
        plain_matcher = PullMatcher()
        plain_matcher.update(plain)
        assert matcher(attrs) == plain_matcher(attrs)
    assert split_groups(plain) == (plain, None)
    assert with_groups(False, {}) is False
