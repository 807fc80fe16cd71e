"""Event-domain topologies (elvin.federation.domain): cycles and diamonds,
checked against brute-force enumerations on small random graphs."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elvin.errors import ElvinError
from elvin.federation.domain import (
    CycleError,
    Diamond,
    DiamondError,
    Domain,
    DuplicateLinkError,
    DuplicateMemberError,
    Policy,
    SelfLinkError,
    TopologyError,
    UnknownLinkError,
    UnknownMemberError,
    elementary_cycles,
)

NAMES = [chr(ord("a") + i) for i in range(8)]


ALLOW = {"cycles": "allow", "diamonds": "allow"}


def make(n: int, edges, cycles="forbid", diamonds="forbid") -> Domain:
    d = Domain("t", cycles=cycles, diamonds=diamonds)
    for name in NAMES[:n]:
        d.add_member(name)
    for u, v in edges:
        d.add_link(NAMES[u], NAMES[v])
    return d


def snapshot(d: Domain):
    return ([(m.id, m.name) for m in d.members],
            [(str(link), link.outgoing, link.incoming) for link in d.links],
            d.qos, d.default_supplier, d.default_consumer)


# --- brute force ------------------------------------------------------------

def bf_cycles(n: int, edges: set[tuple[int, int]]) -> set[tuple[int, ...]]:
    """Every elementary cycle, as a node sequence starting at its lowest node."""
    found = set()
    for k in range(2, n + 1):
        for seq in itertools.permutations(range(n), k):
            if seq[0] != min(seq):
                continue
            if all((seq[t], seq[(t + 1) % k]) in edges for t in range(k)):
                found.add(seq)
    return found


def bf_paths(n: int, edges: set[tuple[int, int]], x: int, y: int) -> set[tuple[int, ...]]:
    """Every directed simple path from x to y (x != y)."""
    others = [v for v in range(n) if v not in (x, y)]
    found = set()
    for k in range(len(others) + 1):
        for mid in itertools.permutations(others, k):
            seq = (x, *mid, y)
            if all((seq[t], seq[t + 1]) in edges for t in range(len(seq) - 1)):
                found.add(seq)
    return found


def bf_all_paths(n, edges):
    return {(x, y): bf_paths(n, edges, x, y)
            for x in range(n) for y in range(n) if x != y}


def bf_reach(n, edges, x):
    return {y for y in range(n) if y != x and bf_paths(n, edges, x, y)}


def names(seq) -> tuple[str, ...]:
    return tuple(NAMES[i] for i in seq)


graphs = st.integers(min_value=1, max_value=6).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))
                .filter(lambda e: e[0] != e[1]), max_size=n * (n - 1))))


# --- members, ids, defaults ---------------------------------------------------

def test_ids_increase_and_are_never_reused():
    d = Domain()
    a, b, c = (d.add_member(x) for x in "abc")
    assert [a.id, b.id, c.id] == [0, 1, 2]
    d.remove_member("c")
    d.remove_member(a)
    assert d.add_member("c").id == 3      # not 2, not 0
    assert d.add_member("a").id == 4
    assert [m.id for m in d.members] == [1, 3, 4]
    assert d.member(3).name == "c" and d.member("a").id == 4


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 30)), max_size=60))
def test_ids_never_reused_under_any_sequence(ops):
    d = Domain()
    issued = []
    for add, k in ops:
        if add or not d.members:
            issued.append(d.add_member(f"m{len(issued)}").id)
        else:
            d.remove_member(d.members[k % len(d.members)])
    assert issued == list(range(len(issued)))


def test_duplicate_and_unknown_members():
    d = make(2, [])
    with pytest.raises(DuplicateMemberError, match="'a'"):
        d.add_member("a")
    with pytest.raises(UnknownMemberError, match="'z'"):
        d.member("z")
    with pytest.raises(UnknownMemberError):
        d.remove_member(7)
    with pytest.raises(TopologyError):
        d.add_member("")
    assert "a" in d and 1 in d and "z" not in d and 9 not in d
    assert isinstance(DuplicateMemberError("x"), ElvinError)


def test_removing_a_member_removes_its_links():
    d = make(4, [(0, 1), (1, 2), (3, 1)])
    d.remove_member("b")
    assert d.links == []
    assert d.successors("a") == [] and d.predecessors("c") == []
    d.add_link("a", "c")
    assert [str(link) for link in d.links] == ["a -> c"]


def test_default_members_pass_to_the_next_lowest_id():
    d = Domain()
    assert d.default_supplier is None and d.default_consumer is None
    for x in "abcd":
        d.add_member(x)
    assert d.default_supplier.name == "a" and d.default_consumer.name == "a"
    d.remove_member("a")
    assert d.default_supplier.name == "b" and d.default_consumer.name == "b"
    d.set_default_consumer("d")
    d.remove_member("b")
    assert d.default_supplier.name == "c"           # next lowest id
    assert d.default_consumer.name == "d"           # not a default: untouched
    d.remove_member("d")
    assert d.default_consumer.name == "c"
    d.remove_member("c")
    assert d.default_supplier is None and d.default_consumer is None
    e = d.add_member("e")                           # first member of an empty domain
    assert d.default_supplier == e and d.default_consumer == e


def test_default_set_by_hand_passes_to_the_lowest_remaining_id():
    d = make(5, [])
    d.set_default_supplier("d")                     # id 3
    d.remove_member("a")
    assert d.default_supplier.name == "d"
    d.remove_member("d")
    assert d.default_supplier.name == "b"           # lowest remaining (id 1)


# --- links -------------------------------------------------------------------

def test_links_and_their_errors():
    d = make(3, [])
    link = d.add_link("a", "b", outgoing="require(X)", incoming="Y == 1")
    assert (link.source.name, link.target.name) == ("a", "b")
    assert d.link("a", "b").outgoing == "require(X)" and d.link(0, 1).incoming == "Y == 1"
    with pytest.raises(DuplicateLinkError):
        d.add_link("a", "b")
    with pytest.raises(SelfLinkError):
        d.add_link("c", "c")
    with pytest.raises(UnknownMemberError):
        d.add_link("a", "q")
    with pytest.raises(UnknownLinkError):
        d.remove_link("b", "a")
    d.remove_link("a", "b")
    assert not d.has_link("a", "b") and d.links == []


def test_a_cycle_is_refused_with_its_path():
    d = make(4, [(0, 1), (1, 2), (2, 3)])
    before = snapshot(d)
    with pytest.raises(CycleError) as info:
        d.add_link("d", "b")
    assert info.value.cycles == [("b", "c", "d")]
    assert info.value.link == ("d", "b")
    assert "b -> c -> d -> b" in str(info.value)
    assert snapshot(d) == before
    with pytest.raises(CycleError) as info:
        d.add_link("b", "a")                 # two-member cycle
    assert info.value.cycles == [("a", "b")]


def test_every_cycle_created_is_listed():
    # diamonds allowed: a -> b -> d and a -> c -> d; then d -> a closes two cycles
    d = make(4, [(0, 1), (0, 2), (1, 3), (2, 3)], cycles="forbid", diamonds="allow")
    with pytest.raises(CycleError) as info:
        d.add_link("d", "a")
    assert info.value.cycles == [("a", "b", "d"), ("a", "c", "d")]
    assert "a -> b -> d -> a" in str(info.value) and "a -> c -> d -> a" in str(info.value)


def test_a_diamond_is_refused_with_every_conflicting_path():
    d = make(5, [(0, 1), (1, 2), (2, 3), (4, 0)])
    before = snapshot(d)
    with pytest.raises(DiamondError) as info:
        d.add_link("a", "c")
    err = info.value
    assert err.link == ("a", "c")
    # every pair (upstream of a) x (downstream of c) gets a second path
    assert err.diamonds == [
        Diamond("a", "c", (("a", "b", "c"), ("a", "c"))),
        Diamond("a", "d", (("a", "b", "c", "d"), ("a", "c", "d"))),
        Diamond("e", "c", (("e", "a", "b", "c"), ("e", "a", "c"))),
        Diamond("e", "d", (("e", "a", "b", "c", "d"), ("e", "a", "c", "d"))),
    ]
    text = str(err)
    assert "from a to c:" in text and "a -> b -> c" in text and "e -> a -> c -> d" in text
    assert snapshot(d) == before


def test_diamonds_are_directed():
    # a -> c, b -> c, a -> d, b -> d: an undirected cycle but one directed
    # path between any two members, so no diamond
    d = make(4, [(0, 2), (1, 2), (0, 3), (1, 3)], cycles="forbid", diamonds="forbid")
    assert d.diamonds() == [] and d.cycles() == []
    e = make(3, [(0, 1), (0, 2)], cycles="forbid", diamonds="forbid")   # one feeds two
    with pytest.raises(DiamondError) as info:
        e.add_link("b", "c")                  # now a -> c and a -> b -> c
    assert info.value.diamonds == [Diamond("a", "c", (("a", "b", "c"), ("a", "c")))]
    f = make(3, [(0, 2), (1, 2)], cycles="forbid", diamonds="forbid")   # two feed one
    with pytest.raises(DiamondError) as info:
        f.add_link("b", "a")                  # b -> c and b -> a -> c
    assert info.value.diamonds == [Diamond("b", "c", (("b", "a", "c"), ("b", "c")))]


def test_both_forbidden_cycle_wins():
    d = make(3, [(0, 1), (1, 2)])
    with pytest.raises(CycleError):
        d.add_link("c", "a")


def test_allow_modes():
    d = make(3, [(0, 1), (1, 2)], cycles="allow", diamonds="forbid")
    d.add_link("c", "a")                      # a cycle: allowed
    assert d.cycles() == [("a", "b", "c")]
    with pytest.raises(DiamondError):
        d.add_link("a", "c")                  # a -> c and a -> b -> c
    d = make(3, [(0, 1), (1, 2)], cycles="forbid", diamonds="allow")
    d.add_link("a", "c")
    assert d.diamonds() == [Diamond("a", "c", (("a", "b", "c"), ("a", "c")))]
    with pytest.raises(CycleError):
        d.add_link("c", "a")
    d = make(3, [(0, 1), (1, 2), (2, 0), (0, 2)], **ALLOW)   # allow both
    assert d.cycles() == [("a", "b", "c"), ("a", "c")]


def test_qos_defaults_to_forbid_and_bad_values_are_refused():
    d = Domain()
    assert d.qos.cycles is Policy.FORBID and d.qos.diamonds is Policy.FORBID
    with pytest.raises(TopologyError, match="cycles"):
        Domain(cycles="sometimes")


def test_forbidding_what_exists_is_refused():
    d = make(3, [(0, 1), (1, 2), (2, 0), (0, 2)], **ALLOW)
    with pytest.raises(CycleError) as info:
        d.set_qos(cycles="forbid")
    assert info.value.cycles == [("a", "b", "c"), ("a", "c")]
    with pytest.raises(DiamondError):
        d.set_qos(diamonds="forbid")
    assert d.qos.cycles is Policy.ALLOW and d.qos.diamonds is Policy.ALLOW
    d.remove_link("c", "a")
    d.set_qos(cycles="forbid")
    assert d.qos.cycles is Policy.FORBID
    d.remove_link("a", "c")
    d.set_qos(diamonds="forbid")
    assert d.qos == type(d.qos)(Policy.FORBID, Policy.FORBID)


# --- reachability ------------------------------------------------------------

def test_downstream_and_upstream():
    d = make(6, [(0, 1), (1, 2), (0, 3), (4, 3)])
    assert d.downstream("a") == ["b", "c", "d"]
    assert d.downstream("c") == []
    assert d.upstream("d") == ["a", "e"]
    assert d.upstream("f") == [] and d.downstream("f") == []
    assert d.has_path("a", "c") and not d.has_path("c", "a")
    d.remove_link("a", "b")
    assert d.downstream("a") == ["d"]


@settings(max_examples=150, deadline=None)
@given(graphs)
def test_reachability_matches_brute_force(graph):
    n, edges = graph
    d = make(n, edges, **ALLOW)
    for x in range(n):
        assert d.downstream(NAMES[x]) == [NAMES[y] for y in sorted(bf_reach(n, edges, x))]
        up = {y for y in range(n) if x in bf_reach(n, edges, y)}
        assert d.upstream(NAMES[x]) == [NAMES[y] for y in sorted(up)]


# --- cycles() and diamonds() against brute force ---------------------------------

@settings(max_examples=300, deadline=None)
@given(graphs)
def test_cycles_match_brute_force(graph):
    n, edges = graph
    d = make(n, edges, **ALLOW)
    expected = sorted(bf_cycles(n, edges))
    assert d.cycles() == [names(c) for c in expected]


def test_nested_cycles():
    # complete digraph on 4 nodes: 6 two-cycles + 8 three-cycles + 6 four-cycles
    edges = {(u, v) for u in range(4) for v in range(4) if u != v}
    d = make(4, edges, **ALLOW)
    cycles = d.cycles()
    assert len(cycles) == 20 == len(set(cycles))
    assert sorted(cycles) == [names(c) for c in sorted(bf_cycles(4, edges))]
    # a figure eight sharing node a, plus the cycle around both
    d = make(5, [(0, 1), (1, 0), (0, 2), (2, 3), (3, 0), (3, 4), (4, 2)], **ALLOW)
    assert d.cycles() == [("a", "b"), ("a", "c", "d"), ("c", "d", "e")]


def test_elementary_cycles_reports_self_loops():
    assert sorted(elementary_cycles({0: [0, 1], 1: [0]})) == [(0,), (0, 1)]


@settings(max_examples=200, deadline=None)
@given(graphs)
def test_diamonds_match_brute_force(graph):
    n, edges = graph
    d = make(n, edges, **ALLOW)
    expected = []
    for (x, y), paths in sorted(bf_all_paths(n, edges).items()):
        if len(paths) > 1:
            expected.append(Diamond(NAMES[x], NAMES[y],
                                    tuple(names(p) for p in sorted(paths))))
    assert d.diamonds() == expected
    if expected:
        pair = expected[0]
        assert d.paths(pair.source, pair.target) == list(pair.paths)


# --- add_link refusals against brute force ------------------------------------------

def expected_refusal(n, edges, u, v, cycles, diamonds):
    """What add_link(u, v) must do on a graph that respects the QoS."""
    new = edges | {(u, v)}
    if cycles == "forbid":
        created = sorted(c for c in bf_cycles(n, new)
                         if any((c[t], c[(t + 1) % len(c)]) == (u, v) for t in range(len(c))))
        if created:
            return CycleError, [names(c) for c in created]
    if diamonds == "forbid":
        old_paths, new_paths = bf_all_paths(n, edges), bf_all_paths(n, new)
        created = []
        for pair in sorted(new_paths):
            if len(new_paths[pair]) > 1 and new_paths[pair] != old_paths[pair]:
                created.append(Diamond(NAMES[pair[0]], NAMES[pair[1]],
                                       tuple(names(p) for p in sorted(new_paths[pair]))))
        if created:
            return DiamondError, created
    return None, None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 6),
       attempts=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=25),
       qos=st.sampled_from([("forbid", "forbid"), ("allow", "forbid"), ("forbid", "allow")]))
def test_add_link_refusals_match_brute_force(n, attempts, qos):
    cycles, diamonds = qos
    d = make(n, [], cycles=cycles, diamonds=diamonds)
    edges: set[tuple[int, int]] = set()
    for u, v in attempts:
        u, v = u % n, v % n
        if u == v or (u, v) in edges:
            continue
        kind, listed = expected_refusal(n, edges, u, v, cycles, diamonds)
        before = snapshot(d)
        if kind is None:
            d.add_link(NAMES[u], NAMES[v])
            edges.add((u, v))
        else:
            with pytest.raises(kind) as info:
                d.add_link(NAMES[u], NAMES[v])
            got = info.value.cycles if kind is CycleError else info.value.diamonds
            assert got == listed
            assert snapshot(d) == before
    # the invariant the QoS promises
    if cycles == "forbid":
        assert d.cycles() == [] and not bf_cycles(n, edges)
    if diamonds == "forbid":
        assert d.diamonds() == []
        assert all(len(p) <= 1 for p in bf_all_paths(n, edges).values())


# --- size ------------------------------------------------------------------------

def test_thousand_member_graphs_without_recursion():
    n = 1000
    d = Domain(cycles="allow", diamonds="forbid")
    for i in range(n):
        d.add_member(f"r{i}")
    t0 = time.perf_counter()
    for i in range(n - 1):
        d.add_link(i, i + 1)
    with pytest.raises(DiamondError) as info:
        d.add_link(0, n - 1)
    assert info.value.diamonds[0].paths[1] == ("r0", f"r{n - 1}")
    d.add_link(n - 1, 0)                         # one ring of 1000
    cycles = d.cycles()
    assert len(cycles) == 1 and len(cycles[0]) == n and cycles[0][0] == "r0"
    assert len(d.downstream("r500")) == n - 1
    assert d.diamonds() == []
    assert time.perf_counter() - t0 < 60         # generous: a guard against O(n^3)


def test_johnson_on_a_large_strongly_connected_graph():
    # a ring of 1000 with chords i -> i+2 on the first 30 members: many cycles
    n = 1000
    adj = {i: [(i + 1) % n] for i in range(n)}
    for i in range(0, 30, 3):
        adj[i].append(i + 2)
    cycles = list(elementary_cycles(adj))
    assert len(cycles) == 2 ** 10 == len(set(cycles))


def test_cycle_reports_are_capped_when_paths_explode():
    # 12 diamonds in a row (allowed): 4096 paths from first to last member
    d = Domain(cycles="forbid", diamonds="allow")
    d.add_member("n0")
    for k in range(12):
        for x in (f"l{k}", f"r{k}", f"n{k + 1}"):
            d.add_member(x)
        for x in (f"l{k}", f"r{k}"):
            d.add_link(f"n{k}", x)
            d.add_link(x, f"n{k + 1}")
    with pytest.raises(CycleError) as info:
        d.add_link("n12", "n0")
    err = info.value
    assert err.truncated and len(err.cycles) == 1000 == len(set(err.cycles))
    assert "listing stopped at 1000" in str(err)
    assert len(d.cycles()) == 0
    assert len(d.diamonds(limit=5)) == 5
