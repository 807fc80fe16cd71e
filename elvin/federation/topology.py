"""The federation's topology as a router that takes part sees it, and the
shortest-path trees notifications follow over it (sans-IO).

Why: the Elvin Federation Protocol stops loops with routing lists, not
duplicates. On a cycle every router floods, so every subscriber gets a
notification once per path. Routers that take part learn the topology and
forward each notification only along the shortest-path tree rooted at the
router where it entered the federation (its *origin*: the last domain of the
routing list, since routers prepend their domain, as Avis does). Every router
computes the same tree, so each router gets each notification exactly once:
reverse-path forwarding, as multicast routing and PADRES's cyclic overlays do.

Announcements (link-state, ``Announcement``): each taking part router
announces its links (peer, whether the peer takes part, and this router's
outgoing and incoming filter for the link), a sequence number that only grows
(microseconds since the epoch at start, then +1), and the digests of the
graphs it holds. ``TopologyView.receive`` keeps the newest announcement of
each router; the federation service floods the new ones to the other taking
part peers.

The graph (``Graph``) is computed from the announcements, from this router
outwards, so that stale announcements of routers that went away do not
matter:

* a router *takes part* when it has an announcement and some neighbour that
  also takes part lists it as taking part (a router restarted without taking
  part is then no longer taken for one);
* a link between two taking part routers counts when both list it, each
  saying the other takes part;
* a link to a router that does not take part (Avis, an older ``elvind``) counts
  when the taking part end lists it as such; what that router does on its other
  links is unknown, and it is assumed to pass everything;
* a directed edge ``a -> b`` carries a notification when ``a``'s outgoing
  filter and ``b``'s incoming filter for the link both let it through, so a
  tree depends on the notification only through the filtered links (usually
  none, then one tree per origin).

Trees (``Graph.tree``): breadth-first from the origin over the edges that
carry the notification; a router's parent is, among its neighbours one step
closer to the origin, the one whose domain sorts first. Deterministic, so all
routers holding the same graph agree.

Agreement: a graph is named by its ``digest``. Each router keeps the last
``HISTORY`` graphs it computed and announces their digests; a graph is
*confirmed* at a router once every taking part router in it has announced
holding it. The origin routes a notification by its newest confirmed graph
and stamps the digest into the routing list (``stamp``), and every router on
the way routes by that same graph (also one it let go of from its history
within ``DEDUP_WINDOW`` agreement bounds, as a burst of changes turns the
history over in milliseconds): when the topology changes (a router dies
or comes back), each notification still follows exactly one tree that every
router on it knows, so the switch to the new trees loses and duplicates
nothing. Agreement has a bound (``TopologyView``, ``agreement_timeout``): a
router that does not answer within it is treated as gone for routing
(announced, so that everyone does at once) until it announces again, and a
router never agrees a graph alone while a peer it is linked to is unheard.
A notification that no graph held places is dropped, never flooded: on a
cycle, flooding is what duplicates. The stamp is one extra routing list
entry that no router domain has (``STAMP_PREFIX``): routers that do not take
part carry it along like any domain, which the protocol allows (they only
look for their own domain). ``elvin.federation.simulation`` plays random
fault schedules on this code and checks both promises.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elvin.errors import SubscriptionError
from elvin.federation.config import STAMP_PREFIX, Filter
from elvin.federation.dedup import Recent, content_key
from elvin.subscription.ast import Kind, Node, const, name, op

__all__ = ["AGREEMENT_TIMEOUT", "ANNOUNCEMENT_ATTR", "DEDUP_WINDOW", "HISTORY", "STAMP_PREFIX",
           "Announcement", "BadAnnouncement",
           "Graph", "LinkState", "Route", "TopologyView", "compute_graph", "decode_announcement",
           "encode_announcement", "split_markers", "split_routing", "with_marker"]

#: the one attribute of a FedNotify that carries an announcement; a
#: notification of a client that has it is never forwarded by a router that
#: takes part (it would read as an announcement at the next router)
ANNOUNCEMENT_ATTR = "Elvin-Federation-Topology"
#: (``STAMP_PREFIX``, in ``config``, starts the routing list entry that names
#: the graph a notification is routed by: no router domain starts so,
#: ``FederationConfig`` refuses one that does)
#: graphs a router keeps (and announces) so that notifications stamped with
#: a graph it has just replaced still find their tree
HISTORY = 8
#: announcements larger than this are refused (a 16-router mesh is ~2 KiB)
MAX_LINKS = 1024
MAX_FILTER_TEXT = 4096

FilterText = bool | str           # True, False or a subscription expression


class BadAnnouncement(ValueError):
    """An announcement that does not decode (the message says what is wrong)."""


@dataclass(frozen=True, slots=True)
class LinkState:
    peer: str
    #: the peer takes part (said so in its pull filter); None (``set_links``
    #: only, never announced): not known yet, the link is pending
    participant: bool | None
    outgoing: FilterText = True   # this router's filter on what it sends to the peer
    incoming: FilterText = True   # ... and on what it accepts from the peer


@dataclass(frozen=True, slots=True)
class Announcement:
    router: str
    sequence: int
    links: tuple[LinkState, ...] = ()
    held: tuple[str, ...] = ()
    #: routers this one treats as gone: (router, its sequence number then)
    gone: tuple[tuple[str, int], ...] = ()

    def link(self, peer: str) -> LinkState | None:
        for state in self.links:
            if state.peer == peer:
                return state
        return None


def encode_announcement(a: Announcement) -> dict[str, Any]:
    """The FedNotify attributes of an announcement."""
    body: dict[str, Any] = {
        "v": 1, "router": a.router, "seq": a.sequence, "held": list(a.held),
        "links": [[s.peer, s.participant, s.outgoing, s.incoming] for s in a.links]}
    if a.gone:                      # optional: older routers ignore it
        body["gone"] = [[r, seq] for r, seq in a.gone]
    return {ANNOUNCEMENT_ATTR: json.dumps(body, separators=(",", ":"), sort_keys=True)}


def decode_announcement(attrs: Mapping[str, Any]) -> Announcement:
    """``BadAnnouncement`` for anything but what ``encode_announcement`` makes."""
    text = attrs.get(ANNOUNCEMENT_ATTR)
    if not isinstance(text, str) or len(attrs) != 1:
        raise BadAnnouncement(f"{ANNOUNCEMENT_ATTR} must be the only attribute, a string")
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise BadAnnouncement(f"not JSON: {exc}") from None
    if not isinstance(body, dict) or body.get("v") != 1:
        raise BadAnnouncement("not a version 1 announcement")
    router, seq, held, links = (body.get(k) for k in ("router", "seq", "held", "links"))
    if not isinstance(router, str) or not router:
        raise BadAnnouncement("router must be a non-empty string")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise BadAnnouncement("seq must be a non-negative integer")
    if not isinstance(held, list) or len(held) > 4 * HISTORY or \
            not all(isinstance(d, str) and len(d) <= 64 for d in held):
        raise BadAnnouncement("held must be a short list of digests")
    if not isinstance(links, list) or len(links) > MAX_LINKS:
        raise BadAnnouncement(f"links must be a list of at most {MAX_LINKS}")
    states = []
    for entry in links:
        if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], str)
                and entry[0] and isinstance(entry[1], bool)
                and all(_filter_ok(f) for f in entry[2:])):
            raise BadAnnouncement(f"bad link entry {str(entry)[:80]}")
        states.append(LinkState(entry[0], entry[1], entry[2], entry[3]))
    states.sort(key=lambda s: s.peer)
    gone = body.get("gone", [])
    if not isinstance(gone, list) or len(gone) > MAX_LINKS or not all(
            isinstance(g, list) and len(g) == 2 and isinstance(g[0], str) and g[0]
            and isinstance(g[1], int) and not isinstance(g[1], bool) for g in gone):
        raise BadAnnouncement("gone must be a list of [router, sequence]")
    return Announcement(router, seq, tuple(states), tuple(held),
                        tuple(sorted((g[0], g[1]) for g in gone)))


def _filter_ok(f: Any) -> bool:
    return isinstance(f, bool) or (isinstance(f, str) and len(f) <= MAX_FILTER_TEXT)


def split_routing(routing: tuple[str, ...]) -> tuple[str | None, str | None]:
    """``(origin, digest)`` of a routing list (the digest None when not
    stamped; the origin None for an empty or malformed list)."""
    if not routing:
        return None, None
    last = routing[-1]
    if last.startswith(STAMP_PREFIX):
        if len(routing) < 2:
            return None, None
        return routing[-2], last[len(STAMP_PREFIX):]
    return last, None


# -- taking part, said in the pull filter ----------------------------------------------
# A router that takes part adds the term ``Elvin-Federation-Topology == "its
# domain"`` to every pull filter it sends: it asks for announcements, which is
# what the pull filter is for, and no notification of a client matches it
# (announcements never reach clients and a client's notification that names
# the attribute is not forwarded). A peer whose pull filter has the term with
# its own domain takes part; routers that don't take part may pass the terms
# of others on in their own pull filters (the protocol's union of
# subscriptions), which is why the domain must be the sender's.

def _marker(domain: str) -> Node:
    return op(Kind.EQUALS, name(ANNOUNCEMENT_ATTR), const(Kind.STRING, domain))


def _marker_domain(term: Node) -> str | None:
    if term.kind is Kind.EQUALS and len(term.children) == 2:
        left, right = term.children
        if left.kind is Kind.NAME and left.value == ANNOUNCEMENT_ATTR and \
                right.kind is Kind.STRING:
            return right.value
    return None


def with_marker(pull: Node | bool, domain: str, true_ast: Node) -> Node:
    """``pull`` OR the marker of ``domain`` (TRUE travels as ``true_ast``)."""
    marker = _marker(domain)
    if pull is False:
        return marker
    if pull is True:
        terms: tuple[Node, ...] = (true_ast,)
    else:
        terms = pull.children if pull.kind is Kind.OR else (pull,)
    return op(Kind.OR, *terms, marker)


def split_markers(pull: Node | bool, true_ast: Node) -> tuple[Node | bool, frozenset[str]]:
    """``(pull without marker terms, the domains they name)``."""
    if pull is True or pull is False:
        return pull, frozenset()
    terms = pull.children if pull.kind is Kind.OR else (pull,)
    domains = {d for d in map(_marker_domain, terms) if d is not None}
    if not domains:
        return pull, frozenset()
    rest = [t for t in terms if _marker_domain(t) is None]
    if not rest:
        return False, frozenset(domains)
    if len(rest) == 1:
        return (True if rest[0] == true_ast else rest[0]), frozenset(domains)
    return op(Kind.OR, *rest), frozenset(domains)


_filters: dict[str, Callable[[Mapping], bool] | None] = {}


def _compiled(text: str) -> Callable[[Mapping], bool] | None:
    """The matcher of a filter another router announced (None if this router
    cannot compile it: the edge then carries nothing, at every router)."""
    try:
        return _filters[text]
    except KeyError:
        pass
    try:
        matcher: Callable[[Mapping], bool] | None = Filter(text).matches
    except (SubscriptionError, ValueError, TypeError):
        matcher = None
    if len(_filters) > 4096:
        _filters.clear()
    _filters[text] = matcher
    return matcher


@dataclass(frozen=True, slots=True)
class _Edge:
    source: str
    target: str
    filters: tuple[str, ...]      # expressions that must all match (none: everything)


@dataclass
class Graph:
    """One computed topology: nodes, directed edges, who takes part."""

    nodes: tuple[str, ...]
    participants: frozenset[str]
    edges: tuple[_Edge, ...]
    digest: str = ""
    stamp: str = ""                   # the routing list entry naming this graph
    node_set: frozenset[str] = frozenset()
    _out: dict[str, list[_Edge]] = field(default_factory=dict, repr=False)
    _filtered: tuple[_Edge, ...] = field(default=(), repr=False)
    _trees: dict[tuple[str, tuple[bool, ...]], dict[str, str]] = field(
        default_factory=dict, repr=False)
    _routes: dict[tuple[str, str, tuple[bool, ...]], Route] = field(
        default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        canonical = json.dumps([sorted(self.nodes), sorted(self.participants),
                                sorted([e.source, e.target, list(e.filters)]
                                       for e in self.edges)], separators=(",", ":"))
        self.digest = hashlib.sha1(canonical.encode()).hexdigest()[:16]
        self.stamp = STAMP_PREFIX + self.digest
        self.node_set = frozenset(self.nodes)
        for edge in sorted(self.edges, key=lambda e: (e.source, e.target)):
            self._out.setdefault(edge.source, []).append(edge)
        self._filtered = tuple(e for e in sorted(self.edges, key=lambda e: (e.source, e.target))
                               if e.filters)

    def tree(self, origin: str, attrs: Mapping[str, Any] | None = None) -> dict[str, str]:
        """``{router: parent}`` of the shortest-path tree rooted at ``origin``
        for a notification with ``attrs`` (the origin maps to itself; routers
        it cannot reach are absent). ``attrs`` None: every edge carries it."""
        mask = self._mask(attrs)
        key = (origin, mask)
        tree = self._trees.get(key)
        if tree is None:
            tree = self._build(origin, mask)
            if len(self._trees) > 4096:
                self._trees.clear()
            self._trees[key] = tree
        return tree

    def _mask(self, attrs: Mapping[str, Any] | None) -> tuple[bool, ...]:
        if not self._filtered:
            return ()
        if attrs is None:
            return (True,) * len(self._filtered)
        return tuple(_passes(edge, attrs) for edge in self._filtered)

    def _build(self, origin: str, mask: tuple[bool, ...]) -> dict[str, str]:
        if origin not in self.nodes:
            return {}
        blocked = {(e.source, e.target) for e, ok in zip(self._filtered, mask, strict=True)
                   if not ok}
        parent = {origin: origin}
        layer = [origin]
        while layer:
            found: dict[str, str] = {}
            for node in layer:                     # sorted: the first parent found wins
                for edge in self._out.get(node, ()):
                    target = edge.target
                    if target in parent or target in found or \
                            (edge.source, target) in blocked:
                        continue
                    found[target] = node
            parent.update(found)
            layer = sorted(found)
        return parent

    def route(self, origin: str, router: str, attrs: Mapping[str, Any] | None = None,
              ) -> Route:
        """How a notification from ``origin`` with ``attrs`` goes on at
        ``router``: its parent and children in the tree (``Route.graph``
        None if ``router`` is not in it). Cached: the forwarding path asks
        this for every notification."""
        key = (origin, router, self._mask(attrs) if self._filtered else ())
        try:
            return self._routes[key]
        except KeyError:
            pass
        tree = self.tree(origin, attrs)
        if router in tree:
            children = tuple(sorted(node for node, up in tree.items()
                                    if up == router and node != router))
            route = Route(self, origin, tree[router] if origin != router else None, children)
        else:
            route = Route(None, origin)
        if len(self._routes) > 4096:
            self._routes.clear()
        self._routes[key] = route
        return route


def _passes(edge: _Edge, attrs: Mapping[str, Any]) -> bool:
    for text in edge.filters:
        matcher = _compiled(text)
        if matcher is None or not matcher(attrs):
            return False
    return True


def compute_graph(me: str, announcements: Mapping[str, Announcement]) -> Graph:
    """The graph ``me`` sees: the connected part around it (see the module
    docstring for which routers take part and which links count)."""
    def lists_as_participant(a: str, b: str) -> bool:
        ann = announcements.get(a)
        state = ann.link(b) if ann is not None else None
        return state is not None and state.participant is True

    def takes_part(router: str) -> bool:
        ann = announcements.get(router)
        return ann is not None and any(
            s.participant and lists_as_participant(s.peer, router) for s in ann.links)

    participant_cache: dict[str, bool] = {}

    def part(router: str) -> bool:
        if router not in participant_cache:
            participant_cache[router] = router == me and router in announcements \
                or takes_part(router)
        return participant_cache[router]

    if me not in announcements:
        return Graph((me,), frozenset({me}), ())
    edges: list[_Edge] = []
    seen = {me}
    queue = [me]
    while queue:
        node = queue.pop()
        if not part(node):
            continue          # what a router that doesn't take part links to is unknown
        for state in announcements[node].links:
            peer = state.peer
            if state.participant:
                if not part(peer):
                    continue
                back = announcements[peer].link(node)
                if back is None or not back.participant:
                    continue
                out_f = _edge_filters(state.outgoing, back.incoming)
                in_f = _edge_filters(back.outgoing, state.incoming)
            else:
                if part(peer):
                    continue            # the two ends disagree: until they agree, no link
                out_f = _edge_filters(state.outgoing, True)
                in_f = _edge_filters(True, state.incoming)
            # a link between two taking part routers is seen from both ends,
            # with the same filters: ``unique`` keeps one of each edge
            if out_f is not None:
                edges.append(_Edge(node, peer, out_f))
            if in_f is not None:
                edges.append(_Edge(peer, node, in_f))
            if peer not in seen:
                seen.add(peer)
                queue.append(peer)
    unique = {(e.source, e.target): e for e in edges}
    nodes = tuple(sorted(seen))
    return Graph(nodes, frozenset(n for n in nodes if part(n)), tuple(unique.values()))


def _edge_filters(outgoing: FilterText, incoming: FilterText) -> tuple[str, ...] | None:
    """The filters a directed edge applies; None if it carries nothing."""
    if outgoing is False or incoming is False:
        return None
    return tuple(f for f in (outgoing, incoming) if isinstance(f, str))


@dataclass(frozen=True, slots=True)
class Route:
    """How one notification travels at this router. ``graph`` None: it is
    not this router's to take or pass on (no agreed graph places it, or it
    names a graph this router does not hold): dropped, never flooded, since
    flooding a cycle duplicates. A router that publishes with no agreed graph
    holds its notifications until there is one (the federation service)."""

    graph: Graph | None
    origin: str
    parent: str | None = None         # the neighbour it must come from
    children: tuple[str, ...] = ()    # the neighbours it goes on to

    @property
    def stamp(self) -> str | None:
        return self.graph.stamp if self.graph is not None else None


#: seconds a router that takes part has to answer: a link whose peer has not
#: said whether it takes part, a peer that has not announced the link, a
#: router in the graph that does not announce holding it (silent: stopped,
#: hung) are waited for this long, then treated as not there for routing
AGREEMENT_TIMEOUT = 2.0
#: how long (in agreement bounds) a router remembers a notification that
#: came from or through a router that does not take part (``TopologyView.
#: first_copy``): about as long as a switch to a new graph takes (a pending
#: link, then a router waited for), shorter than the bound after which
#: "nothing lost" is promised, so a repeat of equal content published
#: after a change has settled is never taken for a copy
DEDUP_WINDOW = 2.0
#: graphs pushed out of the history that a router still routes by, at most
#: (for ``DEDUP_WINDOW`` agreement bounds: ``TopologyView._retire``)
RETIRED_GRAPHS = 64


class TopologyView:
    """One router's announcements, graphs and the routes they give.

    Sans-IO: the federation service (or a simulation) feeds it links
    (``set_links``), announcements (``receive``, ``refresh``) and the time
    (``tick`` at ``next_deadline``), and sends ``own`` to the taking part
    peers whenever a call says it changed.

    Waiting, and its bound (``timeout``): a link is *pending* while its peer
    has not yet said whether it takes part (``LinkState.participant`` None:
    no pull filter yet, or this router's pull filters not yet acknowledged);
    it is left out of the announcement, and after ``timeout`` announced as a
    link to a router that does not take part. A router is *waited for* while
    it is a taking part peer whose announcement does not list the link yet,
    or a participant of the current graph that has not announced holding it;
    after ``timeout`` without a newer announcement from it, it is *gone*:
    left out of the graph until it announces again. So a graph is confirmed
    within about ``timeout`` of a change, whatever the silent routers do.
    While a pending or waited-for peer is within its bound, a graph whose
    only participant is this router is not confirmed (it would be agreed by
    this router alone, with neighbours it has not heard from)."""

    def __init__(self, me: str, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 timeout: float = AGREEMENT_TIMEOUT) -> None:
        self.me = me
        self.timeout = timeout
        self._now = monotonic
        self.announcements: dict[str, Announcement] = {}
        self.graphs: OrderedDict[str, Graph] = OrderedDict()   # held, oldest first
        self._clock = clock
        self._sequence = int(clock() * 1e6)
        self._raw: tuple[LinkState, ...] = ()        # as set_links gave them
        self._links: tuple[LinkState, ...] = ()      # as announced
        self._pending: dict[str, float] = {}         # peer -> pending since
        self._expired: set[str] = set()              # ... past the bound (announced)
        self._waits: dict[str, tuple[int, float]] = {}  # router -> (its seq, since)
        self.gone: dict[str, int] = {}               # router -> its seq when it went
        self._all_gone: dict[str, int] = {}          # ... with what the others say
        self._blocking = False
        self._graph_key: tuple | None = None     # what ``current`` was computed from
        self.current = Graph((me,), frozenset({me}), ())
        self._confirmed: Graph | None = None
        self._dirty = self._reannounce = False
        self._stamped: dict[str, Graph] = {}
        #: graphs pushed out of the history, by stamp, with when (``_retire``)
        self._retired: OrderedDict[str, tuple[Graph, float]] = OrderedDict()
        self.recent = Recent(DEDUP_WINDOW * timeout)
        self.set_links(())

    # -- announcements -----------------------------------------------------------------
    @property
    def own(self) -> Announcement:
        return self.announcements[self.me]

    def set_links(self, links: Iterable[LinkState]) -> bool:
        """This router's links changed (or not): True if its announcement did,
        which then needs sending to the taking part peers. A link whose
        ``participant`` is None is pending (see the class docstring)."""
        self._raw = tuple(sorted(links, key=lambda s: s.peer))
        return self._apply_links(self._now(), recompute=False)

    def _apply_links(self, now: float, recompute: bool) -> bool:
        listed = []
        pending = {}
        self._expired = set()
        for state in self._raw:
            if state.participant is None:
                since = pending[state.peer] = self._pending.get(state.peer, now)
                if now < since + self.timeout:
                    continue
                self._expired.add(state.peer)
                state = LinkState(state.peer, False, state.outgoing, state.incoming)
            listed.append(state)
        if pending.keys() != self._pending.keys():
            recompute = True              # who blocks agreeing alone changed
        self._pending = pending
        links = tuple(listed)
        if self.me in self.announcements and links == self._links:
            if recompute:
                before = self.own
                self._recompute(now)      # waits move with time
                return self.own is not before
            return False
        self._links = links
        self._announce(now)
        return True

    def _announce(self, now: float) -> None:
        self._reannounce = False          # its number is above any named gone
        self._sequence += 1
        self.announcements[self.me] = Announcement(
            self.me, self._sequence, self._links, tuple(self.graphs),
            tuple(sorted(self.gone.items())))
        self._recompute(now)

    def receive(self, ann: Announcement) -> bool:
        """Take another router's announcement; True if it is newer than the
        one held (then it goes on to the other taking part peers). The
        graphs follow at the next ``refresh``, so that a burst of
        announcements costs one computation."""
        if ann.router == self.me:
            # a peer sends every announcement it holds when a link comes up,
            # this router's latest among them: that echo is not news. Taken
            # for an earlier life's, it set ``_reannounce``, and every
            # stamped notification read before the next ``refresh`` was
            # dropped: r0's stream lost at r2 while r1 rejoined a ring.
            if ann.sequence > self._sequence or (
                    ann.sequence == self._sequence and ann != self.announcements.get(self.me)):
                self._sequence = ann.sequence          # from an earlier life of this router
                self._dirty = self._reannounce = True
            return False
        held = self.announcements.get(ann.router)
        if held is not None and held.sequence >= ann.sequence:
            return False
        self.announcements[ann.router] = ann
        if held is None or held.links != ann.links:
            self._graph_key = None
        if self.gone.get(ann.router, ann.sequence) < ann.sequence:
            del self.gone[ann.router]               # it answered: back in the graph
        if any(router == self.me and seq >= self._sequence for router, seq in ann.gone):
            self._reannounce = True                 # taken for gone: say it is not
        self._dirty = True
        return True

    def life_mark(self) -> int:
        """Now, as a sequence number, for ``restarted_since``."""
        return int(self._clock() * 1e6)

    def restarted_since(self, mark: int) -> bool:
        """Whether another router began a new life after ``mark``
        (``life_mark``): its announcement's sequence number is above it (a
        life's numbers start at its clock's microseconds and grow by one per
        announcement). Why: a copy held meanwhile (``hold_from``) may have
        reached that router's earlier life by another path, and its new life
        has no memory of that (``first_copy``): released, it would arrive
        twice. A clock behind misses a restart (as without this); one ahead
        takes a recent start for one, which only drops a held copy."""
        return any(ann.sequence > mark for router, ann in self.announcements.items()
                   if router != self.me)

    def refresh(self) -> bool:
        """Recompute the graphs after ``receive``: True if this router's own
        announcement changed (it holds a new graph), to be sent to the peers."""
        if not self._dirty:
            return False
        before = self.own
        self._recompute(self._now())
        return self.own is not before

    def tick(self) -> bool:
        """Let time pass (call it at ``next_deadline``): pending links and
        waited-for routers past their bound. True if the own announcement
        changed, to be sent to the peers."""
        before = self.own
        self._apply_links(self._now(), recompute=True)
        return self.own is not before

    def next_deadline(self) -> float | None:
        """When ``tick`` next has something to do (the ``monotonic`` clock),
        None if nothing is waited for."""
        times = [since + self.timeout for peer, since in self._pending.items()
                 if peer not in self._expired]
        times.extend(since + self.timeout for _, since in self._waits.values())
        return min(times) if times else None

    # -- graphs ------------------------------------------------------------------------
    def _recompute(self, now: float) -> None:
        if self._reannounce:
            # whoever recomputes first (``refresh``, or ``tick`` and
            # ``set_links`` before it) announces anew: had it been left to
            # ``refresh``, a ``tick`` in between left nothing dirty, and the
            # router stayed taken for gone, dropping all it was sent (sim
            # seed 601493: for good)
            self._announce(now)
            return
        self._dirty = False
        for _ in range(len(self.announcements) + 1):   # each pass may declare some gone
            self._all_gone = self._gone_everywhere()
            # the graph depends on the links announced, not on what is held
            key = (self._links, tuple(sorted(self._all_gone.items())))
            if key == self._graph_key:
                graph = self.current
            else:
                graph = compute_graph(self.me, self._present())
                self._graph_key = key
            if graph.digest != self.current.digest or not self.graphs:
                self.current = self.graphs.pop(graph.digest, graph)
                self.graphs[graph.digest] = self.current
                while len(self.graphs) > HISTORY:
                    self._retire(self.graphs.popitem(last=False)[1], now)
                self._stamped = {g.stamp: g for g in self.graphs.values()}
            own = self.announcements[self.me]
            gone = tuple(sorted(self.gone.items()))
            if own.held != tuple(self.graphs) or own.gone != gone:
                self._sequence += 1
                self.announcements[self.me] = Announcement(
                    self.me, self._sequence, own.links, tuple(self.graphs), gone)
            if not self._wait(now):
                break
        self._confirm()

    def _retire(self, graph: Graph, now: float) -> None:
        """Keep routing by ``graph`` for the window after it left the
        history (no longer announced as held, so nothing new is stamped
        with it). Why: a burst of changes (links coming up after a restart
        or a heal) makes a graph per announcement that arrives, and pushes
        graphs out of the history within milliseconds, while notifications
        stamped with one of them (the origin saw everyone holding it) are
        on their way: without it they are dropped here (lost), or, if a
        router that does not take part passed them on, routed by another
        graph than on the way here (twice)."""
        retired = self._retired
        retired[graph.stamp] = (graph, now)
        retired.move_to_end(graph.stamp)
        window = DEDUP_WINDOW * self.timeout
        while retired and (next(iter(retired.values()))[1] + window < now
                           or len(retired) > RETIRED_GRAPHS):
            retired.popitem(last=False)

    def by_stamp(self, stamp: str) -> Graph | None:
        """The graph ``stamp`` names, held or retired within the window."""
        graph = self._stamped.get(stamp)
        if graph is not None:
            return graph
        retired = self._retired.get(stamp)
        if retired is not None and self._now() <= retired[1] + DEDUP_WINDOW * self.timeout:
            return retired[0]
        return None

    def _gone_everywhere(self) -> dict[str, int]:
        """The routers this one takes for gone, and those that the others
        it does not take for gone say are (unless they answered since): so
        that one router's bound is everyone's, and they agree at once."""
        gone = dict(self.gone)
        for router, ann in self.announcements.items():
            if router == self.me or router in self.gone or not ann.gone:
                continue
            for other, seq in ann.gone:
                if other == self.me:
                    continue
                held = self.announcements.get(other)
                if held is None or held.sequence <= seq:
                    gone[other] = max(seq, gone.get(other, seq))
        return gone

    def _present(self) -> Mapping[str, Announcement]:
        if not self._all_gone:
            return self.announcements
        return {r: a for r, a in self.announcements.items() if r not in self._all_gone}

    def _wait(self, now: float) -> bool:
        """Update who is waited for; True if some router just went (the
        graph must be computed again without it)."""
        waited: dict[str, int] = {}
        for state in self._links:
            if state.participant and state.peer not in self._all_gone:
                ann = self.announcements.get(state.peer)
                back = ann.link(self.me) if ann is not None else None
                if back is None or not back.participant:
                    waited[state.peer] = ann.sequence if ann is not None else -1
        digest = self.current.digest
        for router in self.current.participants:
            if router != self.me and digest not in self.announcements[router].held:
                waited[router] = self.announcements[router].sequence
        waits = {}
        went = False
        for router, seq in waited.items():
            old = self._waits.get(router)
            since = old[1] if old is not None and old[0] == seq else now
            if now >= since + self.timeout:
                self.gone[router] = seq
                went = True
            else:
                waits[router] = (seq, since)
        self._waits = waits
        links = {s.peer for s in self._links}
        self._blocking = any(now < since + self.timeout for since in self._pending.values()) \
            or any(r in links for r in waits)
        return went

    def _confirm(self) -> None:
        self._confirmed = None
        present = self._present()
        for graph in reversed(self.graphs.values()):
            if graph.participants == {self.me} and self._blocking:
                continue          # agreed by this router alone, with peers unheard
            if all(p in present and graph.digest in present[p].held
                   for p in graph.participants if p != self.me):
                self._confirmed = graph
                break

    @property
    def confirmed(self) -> Graph | None:
        """The newest graph every taking part router in it holds."""
        return self._confirmed

    @property
    def catching_up(self) -> bool:
        """Whether this router read that the others took it for gone (it
        hung) or of a later life of its own, and has not recomputed (and so
        announced anew) yet: what peers send it meanwhile has no route (``route``)
        and is dropped, never held for later (``hold_from``). Why: it is the
        backlog of a hang, which the others have routed around; held and
        routed once this router agrees again, it reached routers twice (a
        flooding router that had it by the others' tree: sim seed 600054)."""
        return self._reannounce

    # -- routes ------------------------------------------------------------------------
    def first_copy(self, routing: tuple[str, ...], from_participant: bool,
                   attrs: Mapping[str, Any]) -> bool:
        """Whether a notification this router's tree rule takes (``route``:
        it came from its parent) is the first copy of it here, to deliver
        and pass on. Always, for one stamped by a router that takes part
        with a graph this router holds, and sent by one that takes part: it
        follows one tree every router holds. Otherwise (unstamped: it
        entered at a router that does not take part, so each router routes
        it by its own graph, as it does one stamped with a graph it does not
        hold; or sent by a router that does not take part, which copies
        what it passes on to every link) it may reach this router again by
        another path, and a copy with the same ``attrs`` from the same
        origin that came by another routing list within the window is
        dropped (``dedup.Recent``)."""
        origin, digest = split_routing(routing)
        if digest is not None and from_participant and self.by_stamp(routing[-1]) is not None:
            return True
        return self.recent.first((origin, content_key(attrs)), routing, self._now())

    def route(self, routing: tuple[str, ...], attrs: Mapping[str, Any] | None,
              sender: str | None = None) -> Route:
        """How a notification with ``routing`` (empty: published here) goes on:
        by the graph its stamp names; unstamped (it entered the federation at
        a router that does not take part) or stamped with a graph this
        router does not hold, by the confirmed graph, rooted at the last
        router of the routing list that the graph has (the latter only when
        it comes from a ``sender`` that does not take part, or its origin is
        not in that graph). Anything else has no route (``Route.graph``
        None): dropped, never flooded."""
        if not routing:
            graph = self._confirmed
            if graph is None:
                return Route(None, self.me)
            return graph.route(self.me, self.me, attrs)
        if self._reannounce:
            # the others took this router for gone (it hung) or it heard of
            # a later life of its own, and ``refresh`` has not run yet: its
            # graphs are not the ones the others route by, and what it
            # passed on now (the backlog of a resumed hang) could reach a
            # router the others already reached by another tree: dropped
            return Route(None, routing[-1])
        last = routing[-1]
        if last.startswith(STAMP_PREFIX):
            routing = routing[:-1]
            if not routing:
                return Route(None, "")
            graph = self.by_stamp(last)
            if graph is not None:
                for domain in reversed(routing):
                    if domain in graph.node_set:
                        return graph.route(domain, self.me, attrs)
                return Route(None, routing[-1])
            # a graph this router does not hold. From a router that takes
            # part (``sender``), of an origin this router's graph has: the
            # origin agreed it on announcements this router has moved on
            # from (restarted, or churned it out of its history), and the
            # others may route it by other trees: dropped. Else this router
            # is not in it: it came round through routers that do not take
            # part (from one, or from one of ours that routed it so: its
            # origin is cut apart from this router's graph but for them);
            # routed as an unstamped one, with the same dedup (``first_copy``).
            graph = self._confirmed
            if graph is None or sender is None or (
                    sender in graph.participants and routing[-1] in graph.node_set):
                return Route(None, routing[-1])
        graph = self._confirmed
        if graph is None:
            return Route(None, routing[-1])
        for domain in reversed(routing):
            if domain in graph.node_set:
                return graph.route(domain, self.me, attrs)
        return Route(None, routing[-1])
