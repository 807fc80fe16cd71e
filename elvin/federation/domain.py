"""Event domains: the topology of a federation of routers, as a directed graph.

This follows the OMG Management of Event Domains as implemented by MEDIator
(``reference/event-domains-mediator-paper.md``), applied to Elvin routers:

* A *member* is a router (the paper's event channel). Members get increasing
  integer ids starting at 0 that are never reused, even after a removal (the
  paper's "incremented variable"). Member names are unique.
* A *link* ``a -> b`` is a federation link over which notifications flow from
  ``a`` (the supplier side) to ``b`` (the consumer side), with optional filters:
  ``outgoing`` (applied by ``a`` to what it forwards to ``b``) and ``incoming``
  (applied by ``b`` to what it accepts from ``a``). ``None`` means everything.
* Links are **directed for every purpose**, diamonds included: a diamond is a
  pair of distinct members ``(x, y)`` with more than one *directed* simple path
  from ``x`` to ``y`` (the same notification can reach ``y`` from ``x`` twice),
  as in the paper, where event flow goes from suppliers to consumers. Two
  routers that each feed a third (``a -> c``, ``b -> c``) are not a diamond; a
  link in both directions (``a -> b``, ``b -> a``) is a cycle, not a diamond.
* QoS ``cycles`` and ``diamonds`` are each ``forbid`` (the default, as the paper
  recommends, unlike the MED specification) or ``allow``. A link that would
  create a forbidden cycle raises ``CycleError`` listing every cycle it would
  create; one that would create a forbidden diamond raises ``DiamondError``
  listing, for every affected pair, all of that pair's paths. If a link would
  create both, ``CycleError`` is raised. A refused operation changes nothing.
* The first member is the default supplier and default consumer member; when a
  default member is removed, the remaining member with the lowest id takes its
  place (the paper's choice, "next lowest id"; the lowest remaining id, so a
  default set by hand to a high id passes back to the oldest member).

Cycles are listed as tuples of member names in link order, starting at the
member with the lowest id (``("a", "b", "c")`` is ``a -> b -> c -> a``); paths
as tuples of names from source to target, both included. Lists are sorted by
member ids. Every algorithm is iterative (no recursion limit), so domains of
thousands of members work; ``cycles()`` is Johnson's algorithm, O((V+E)(C+1))
for C cycles. Listing *every* cycle or path is exponential in the worst case by
nature, so errors keep at most ``REPORT_LIMIT`` items (``truncated`` is then
true) and ``cycles()``/``diamonds()`` accept a ``limit``.

Self-links are always refused: a router cannot federate with itself (the
federation protocol Nacks a FedConnRqst carrying the router's own domain).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

from elvin.errors import ElvinError

__all__ = [
    "REPORT_LIMIT",
    "CycleError",
    "Diamond",
    "DiamondError",
    "Domain",
    "DuplicateLinkError",
    "DuplicateMemberError",
    "Link",
    "Member",
    "Policy",
    "QoS",
    "SelfLinkError",
    "TopologyError",
    "UnknownLinkError",
    "UnknownMemberError",
    "format_cycle",
    "format_path",
]

#: Most cycles/paths an error carries (and the message shows at most
#: ``MESSAGE_LIMIT`` of them); the rest is summarised.
REPORT_LIMIT = 1000
MESSAGE_LIMIT = 20


class Policy(StrEnum):
    FORBID = "forbid"
    ALLOW = "allow"

    @classmethod
    def parse(cls, value: str | Policy, setting: str) -> Policy:
        try:
            return cls(value)
        except ValueError:
            raise TopologyError(f"bad value {value!r} for QoS {setting!r} (expected "
                                f"'forbid' or 'allow')") from None


@dataclass(frozen=True)
class QoS:
    cycles: Policy = Policy.FORBID
    diamonds: Policy = Policy.FORBID


@dataclass(frozen=True)
class Member:
    id: int
    name: str


@dataclass(frozen=True)
class Link:
    source: Member
    target: Member
    outgoing: str | None = None
    incoming: str | None = None

    def __str__(self) -> str:
        return f"{self.source.name} -> {self.target.name}"


@dataclass(frozen=True)
class Diamond:
    """More than one directed path from ``source`` to ``target``."""
    source: str
    target: str
    paths: tuple[tuple[str, ...], ...]


# --- errors ---------------------------------------------------------------

class TopologyError(ElvinError):
    """Base class of the errors of event-domain topologies."""


class UnknownMemberError(TopologyError, LookupError):
    pass


class DuplicateMemberError(TopologyError):
    pass


class UnknownLinkError(TopologyError, LookupError):
    pass


class DuplicateLinkError(TopologyError):
    pass


class SelfLinkError(TopologyError):
    pass


def format_path(path: Iterable[str]) -> str:
    return " -> ".join(path)


def format_cycle(cycle: tuple[str, ...]) -> str:
    return format_path((*cycle, cycle[0]))


def _counted(n: int, truncated: bool, one: str, many: str) -> str:
    """``one`` for a single thing, else ``"3 many"`` (``"3+ many"`` when
    the search stopped before finding them all)."""
    return one if n == 1 and not truncated else f"{n}{'+' if truncated else ''} {many}"


class _ForbiddenShapeError(TopologyError):
    """A link (or, with ``link`` None, the existing graph) that makes a
    forbidden shape: a headline, then at most ``MESSAGE_LIMIT`` of the
    ``total`` shapes found (``lines``), then how many more there are."""

    def __init__(self, head: str, lines: list[str], total: int,
                 link: tuple[str, str] | None, truncated: bool) -> None:
        self.link = link
        self.truncated = truncated
        shown = min(total, MESSAGE_LIMIT)
        if truncated:
            more = f"\n  ... and more (listing stopped at {total})"
        elif total > shown:
            more = f"\n  ... and {total - shown} more"
        else:
            more = ""
        super().__init__(head + ":\n" + "\n".join(lines) + more)


class CycleError(_ForbiddenShapeError):
    """A link refused because it would create cycles (the paper's
    ``CycleCreationForbidden``). ``cycles`` lists them (tuples of member
    names, see the module docstring); ``link`` is ``(source, target)`` or
    ``None`` when the error is about the existing graph (``set_qos``)."""

    def __init__(self, cycles: list[tuple[str, ...]], link: tuple[str, str] | None = None,
                 truncated: bool = False) -> None:
        self.cycles = cycles
        noun = _counted(len(cycles), truncated, "a cycle", "cycles")
        if link is not None:
            head = f"link {format_path(link)} would create {noun} (cycles are forbidden)"
        else:
            head = f"the domain has {noun} (cannot forbid cycles)"
        lines = [f"  {format_cycle(c)}" for c in cycles[:MESSAGE_LIMIT]]
        super().__init__(head, lines, len(cycles), link, truncated)


class DiamondError(_ForbiddenShapeError):
    """A link refused because it would create diamonds (the paper's
    ``DiamondCreationForbidden``, carrying every conflicting path as the
    paper asks). ``diamonds`` is a list of ``Diamond`` (one per affected
    pair of members, with all of that pair's paths)."""

    def __init__(self, diamonds: list[Diamond], link: tuple[str, str] | None = None,
                 truncated: bool = False) -> None:
        self.diamonds = diamonds
        pairs = _counted(len(diamonds), truncated, "1 pair", "pairs")
        what = f"more than one path between {pairs} of members"
        if link is not None:
            head = f"link {format_path(link)} would create a diamond ({what}; diamonds are forbidden)"
        else:
            head = f"the domain has diamonds ({what}; cannot forbid diamonds)"
        lines = []
        for d in diamonds[:MESSAGE_LIMIT]:
            lines.append(f"  from {d.source} to {d.target}:")
            lines.extend(f"    {format_path(p)}" for p in d.paths)
        super().__init__(head, lines, len(diamonds), link, truncated)


# --- graph algorithms on integer ids (iterative) ---------------------------

Adjacency = Mapping[int, Collection[int]]


def strongly_connected_components(nodes: Iterable[int], adj: Adjacency) -> list[set[int]]:
    """Tarjan's algorithm, iterative. ``adj[v]`` must only name nodes in
    ``nodes``."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    components: list[set[int]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work: list[tuple[int, Iterator[int]]] = [(root, iter(adj[root]))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(adj[w])))
                    break
                if w in on_stack and index[w] < low[v]:
                    low[v] = index[w]
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    if low[v] < low[u]:
                        low[u] = low[v]
                if low[v] == index[v]:
                    component = set()
                    while True:
                        x = stack.pop()
                        on_stack.discard(x)
                        component.add(x)
                        if x == v:
                            break
                    components.append(component)
    return components


def _restrict(adj: Adjacency, nodes: set[int]) -> Adjacency:
    return {v: [w for w in adj[v] if w in nodes] for v in nodes}


def _circuits(start: int, adj: Adjacency) -> Iterator[tuple[int, ...]]:
    """Johnson's CIRCUIT procedure from ``start`` in a strongly connected
    subgraph ``adj`` in which ``start`` has the lowest id; iterative."""
    blocked = {start}
    blocked_by: defaultdict[int, set[int]] = defaultdict(set)   # Johnson's B lists
    path = [start]
    found = [False]
    stack: list[tuple[int, Iterator[int]]] = [(start, iter(adj[start]))]
    while stack:
        v, it = stack[-1]
        for w in it:
            if w == start:
                yield tuple(path)
                found[-1] = True
            elif w not in blocked:
                path.append(w)
                blocked.add(w)
                found.append(False)
                stack.append((w, iter(adj[w])))
                break
        else:
            stack.pop()
            path.pop()
            closed = found.pop()
            if closed:
                pending = [v]          # UNBLOCK(v)
                while pending:
                    u = pending.pop()
                    if u in blocked:
                        blocked.discard(u)
                        pending.extend(blocked_by[u])
                        blocked_by[u].clear()
                if found:
                    found[-1] = True
            else:
                for w in adj[v]:
                    blocked_by[w].add(v)


def elementary_cycles(adj: Adjacency) -> Iterator[tuple[int, ...]]:
    """Every elementary cycle of the graph (Johnson 1975), each starting at
    its lowest node. ``adj`` has an entry for every node. Self-loops are
    reported as 1-cycles."""
    for v, succ in adj.items():
        if v in succ:
            yield (v,)
    plain = {v: [w for w in succ if w != v] for v, succ in adj.items()}
    work = [c for c in strongly_connected_components(sorted(plain), plain) if len(c) > 1]
    while work:
        component = work.pop()
        start = min(component)
        yield from _circuits(start, _restrict(plain, component))
        rest = component - {start}
        sub = _restrict(plain, rest)
        work.extend(c for c in strongly_connected_components(sorted(rest), sub) if len(c) > 1)


def _walk_simple_paths(adj: Adjacency, source: int, within: set[int] | None = None,
                       stop: int | None = None) -> Iterator[list[int]]:
    """Every directed simple path from ``source``, each yielded as it is
    reached (the list is the walk's own: copy it to keep it), by an iterative
    DFS. Paths stay inside ``within`` (when given) and end at ``stop``."""
    path = [source]
    on_path = {source}
    stack = [iter(adj[source])]
    while stack:
        for w in stack[-1]:
            if w in on_path or (within is not None and w not in within):
                continue
            path.append(w)
            yield path
            if w == stop:
                path.pop()
                continue
            on_path.add(w)
            stack.append(iter(adj[w]))
            break
        else:
            stack.pop()
            on_path.discard(path.pop())


def _simple_paths(adj: Adjacency, source: int, target: int,
                  within: set[int] | None = None) -> Iterator[list[int]]:
    """Every directed simple path from ``source`` to ``target`` (distinct),
    optionally only through nodes of ``within``."""
    for path in _walk_simple_paths(adj, source, within, stop=target):
        if path[-1] == target:
            yield list(path)


def _path_counts(adj: Adjacency, source: int, cap: int | None = None) -> dict[int, int]:
    """Number of directed simple paths from ``source`` to every other node
    (counts stop growing at ``cap`` for nodes that reached it, without
    pruning the walk)."""
    counts: dict[int, int] = defaultdict(int)
    for path in _walk_simple_paths(adj, source):
        w = path[-1]
        if cap is None or counts[w] < cap:
            counts[w] += 1
    return counts


def _bfs_tree(adj: Adjacency, root: int) -> dict[int, int | None]:
    """Parent pointers of a breadth-first tree from ``root``."""
    parent: dict[int, int | None] = {root: None}
    queue = deque([root])
    while queue:
        v = queue.popleft()
        for w in adj[v]:
            if w not in parent:
                parent[w] = v
                queue.append(w)
    return parent


def _tree_path(parent: dict[int, int | None], node: int) -> list[int]:
    """The path from the tree's root to ``node``."""
    path = []
    cur: int | None = node
    while cur is not None:
        path.append(cur)
        cur = parent[cur]
    path.reverse()
    return path


# --- the domain ------------------------------------------------------------

MemberRef = Member | int | str


class Domain:
    """A topology of routers and directed links with cycle/diamond QoS."""

    def __init__(self, name: str = "domain", *, cycles: Policy | str = Policy.FORBID,
                 diamonds: Policy | str = Policy.FORBID) -> None:
        self.name = name
        self._qos = QoS(Policy.parse(cycles, "cycles"), Policy.parse(diamonds, "diamonds"))
        self._next_id = 0
        self._members: dict[int, Member] = {}
        self._ids: dict[str, int] = {}
        self._succ: dict[int, dict[int, Link]] = {}
        self._pred: dict[int, dict[int, Link]] = {}
        self._links: dict[tuple[int, int], Link] = {}
        self._default_supplier: int | None = None
        self._default_consumer: int | None = None

    def __repr__(self) -> str:
        return (f"<Domain {self.name!r}: {len(self._members)} members, "
                f"{len(self._links)} links, cycles {self._qos.cycles}, "
                f"diamonds {self._qos.diamonds}>")

    # --- members ---------------------------------------------------------

    @property
    def members(self) -> list[Member]:
        """The members, by increasing id."""
        return list(self._members.values())

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, ref: object) -> bool:
        try:
            self._id(ref)   # type: ignore[arg-type]
        except (UnknownMemberError, TypeError):
            return False
        return True

    def member(self, ref: MemberRef) -> Member:
        """The member with this name, id (int) or ``Member``."""
        return self._members[self._id(ref)]

    def _id(self, ref: MemberRef) -> int:
        if isinstance(ref, Member):
            if self._members.get(ref.id) != ref:
                raise UnknownMemberError(f"{ref.name!r} (id {ref.id}) is not a member of "
                                         f"domain {self.name!r}")
            return ref.id
        if isinstance(ref, bool):
            raise TypeError("a member is a name (str), an id (int) or a Member")
        if isinstance(ref, int):
            if ref not in self._members:
                raise UnknownMemberError(f"no member with id {ref} in domain {self.name!r}")
            return ref
        if isinstance(ref, str):
            try:
                return self._ids[ref]
            except KeyError:
                raise UnknownMemberError(f"no member named {ref!r} in domain "
                                         f"{self.name!r}") from None
        raise TypeError("a member is a name (str), an id (int) or a Member, not "
                        f"{type(ref).__name__}")

    def _name(self, i: int) -> str:
        return self._members[i].name

    def add_member(self, name: str) -> Member:
        """Add a router; it gets the next id (ids are never reused). The
        first member of an empty domain becomes the default supplier and
        default consumer."""
        if not isinstance(name, str) or not name.strip():
            raise TopologyError(f"a member name must be a non-empty string, not {name!r}")
        if name in self._ids:
            raise DuplicateMemberError(f"domain {self.name!r} already has a member named "
                                       f"{name!r} (id {self._ids[name]})")
        member = Member(self._next_id, name)
        self._next_id += 1
        self._members[member.id] = member
        self._ids[name] = member.id
        self._succ[member.id] = {}
        self._pred[member.id] = {}
        if self._default_supplier is None:
            self._default_supplier = member.id
        if self._default_consumer is None:
            self._default_consumer = member.id
        return member

    def remove_member(self, ref: MemberRef) -> Member:
        """Remove a router and all its links. A removed default member is
        replaced by the remaining member with the lowest id."""
        i = self._id(ref)
        for j in list(self._succ[i]):
            del self._links[(i, j)]
            del self._pred[j][i]
        for j in list(self._pred[i]):
            del self._links[(j, i)]
            del self._succ[j][i]
        del self._succ[i], self._pred[i]
        member = self._members.pop(i)
        del self._ids[member.name]
        successor = min(self._members, default=None)
        if self._default_supplier == i:
            self._default_supplier = successor
        if self._default_consumer == i:
            self._default_consumer = successor
        return member

    @property
    def default_supplier(self) -> Member | None:
        """The member a supplier joins when it names none (None when empty)."""
        return None if self._default_supplier is None else self._members[self._default_supplier]

    @property
    def default_consumer(self) -> Member | None:
        return None if self._default_consumer is None else self._members[self._default_consumer]

    def set_default_supplier(self, ref: MemberRef) -> None:
        self._default_supplier = self._id(ref)

    def set_default_consumer(self, ref: MemberRef) -> None:
        self._default_consumer = self._id(ref)

    # --- QoS -------------------------------------------------------------

    @property
    def qos(self) -> QoS:
        return self._qos

    def set_qos(self, *, cycles: Policy | str | None = None,
                diamonds: Policy | str | None = None) -> None:
        """Change the QoS. Forbidding what the domain already has is refused
        (``CycleError``/``DiamondError`` listing it) and changes nothing."""
        new_cycles = self._qos.cycles if cycles is None else Policy.parse(cycles, "cycles")
        new_diamonds = (self._qos.diamonds if diamonds is None
                        else Policy.parse(diamonds, "diamonds"))
        if new_cycles is Policy.FORBID and self._qos.cycles is Policy.ALLOW:
            found = self.cycles(limit=REPORT_LIMIT + 1)
            if found:
                raise CycleError(found[:REPORT_LIMIT], truncated=len(found) > REPORT_LIMIT)
        if new_diamonds is Policy.FORBID and self._qos.diamonds is Policy.ALLOW:
            found_d = self.diamonds(limit=REPORT_LIMIT + 1)
            if found_d:
                raise DiamondError(found_d[:REPORT_LIMIT],
                                   truncated=len(found_d) > REPORT_LIMIT)
        self._qos = QoS(new_cycles, new_diamonds)

    # --- links -----------------------------------------------------------

    @property
    def links(self) -> list[Link]:
        """The links, in the order they were added."""
        return list(self._links.values())

    def link(self, source: MemberRef, target: MemberRef) -> Link:
        i, j = self._id(source), self._id(target)
        try:
            return self._links[(i, j)]
        except KeyError:
            raise UnknownLinkError(f"no link {self._name(i)} -> {self._name(j)} in domain "
                                   f"{self.name!r}") from None

    def has_link(self, source: MemberRef, target: MemberRef) -> bool:
        return (self._id(source), self._id(target)) in self._links

    def check_link(self, source: MemberRef, target: MemberRef) -> None:
        """Raise what ``add_link`` would raise, without adding anything."""
        i, j = self._id(source), self._id(target)
        if i == j:
            raise SelfLinkError(f"cannot link {self._name(i)!r} to itself (a router does "
                                "not federate with itself)")
        if (i, j) in self._links:
            raise DuplicateLinkError(f"link {self._name(i)} -> {self._name(j)} already "
                                     "exists")
        if self._qos.cycles is Policy.FORBID:
            cycles, truncated = self._cycles_created(i, j)
            if cycles:
                raise CycleError(cycles, (self._name(i), self._name(j)), truncated)
        if self._qos.diamonds is Policy.FORBID:
            diamonds = self._diamonds_created(i, j)
            if diamonds:
                raise DiamondError(diamonds, (self._name(i), self._name(j)))

    def add_link(self, source: MemberRef, target: MemberRef, *, outgoing: str | None = None,
                 incoming: str | None = None) -> Link:
        """Link ``source -> target`` (notifications flow from source to
        target). Refused (nothing changes) with ``CycleError``/``DiamondError``
        when the QoS forbids what it would create."""
        self.check_link(source, target)
        i, j = self._id(source), self._id(target)
        link = Link(self._members[i], self._members[j], outgoing, incoming)
        self._links[(i, j)] = link
        self._succ[i][j] = link
        self._pred[j][i] = link
        return link

    def remove_link(self, source: MemberRef, target: MemberRef) -> Link:
        link = self.link(source, target)
        i, j = link.source.id, link.target.id
        del self._links[(i, j)], self._succ[i][j], self._pred[j][i]
        return link

    def successors(self, ref: MemberRef) -> list[str]:
        """Members this one links to directly, by id."""
        return [self._name(j) for j in sorted(self._succ[self._id(ref)])]

    def predecessors(self, ref: MemberRef) -> list[str]:
        return [self._name(j) for j in sorted(self._pred[self._id(ref)])]

    # --- reachability ------------------------------------------------------

    # The algorithms read the link dicts directly (iterating a dict gives its
    # keys, the neighbour ids); they never mutate them.
    def _adj(self) -> Adjacency:
        return self._succ

    def _radj(self) -> Adjacency:
        return self._pred

    @staticmethod
    def _reach(adj: Adjacency, root: int) -> set[int]:
        seen = {root}
        todo = [root]
        found: set[int] = set()
        while todo:
            v = todo.pop()
            for w in adj[v]:
                found.add(w)
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        return found

    @staticmethod
    def _reach_all(adj: Adjacency, roots: Iterable[int]) -> set[int]:
        """Nodes reachable from some root by at least one link."""
        found: set[int] = set()
        todo = [w for r in roots for w in adj[r]]
        while todo:
            v = todo.pop()
            if v not in found:
                found.add(v)
                todo.extend(adj[v])
        return found

    def downstream(self, ref: MemberRef) -> list[str]:
        """Members reachable from this one along links (the paper's
        subscription channels), by id. The member itself is never listed,
        even when it is on a cycle."""
        i = self._id(ref)
        return [self._name(j) for j in sorted(self._reach(self._adj(), i) - {i})]

    def upstream(self, ref: MemberRef) -> list[str]:
        """Members from which this one is reachable (the paper's offer
        channels), by id; never the member itself."""
        i = self._id(ref)
        return [self._name(j) for j in sorted(self._reach(self._radj(), i) - {i})]

    def has_path(self, source: MemberRef, target: MemberRef) -> bool:
        i, j = self._id(source), self._id(target)
        return j in self._reach(self._adj(), i)

    def paths(self, source: MemberRef, target: MemberRef) -> list[tuple[str, ...]]:
        """Every directed simple path from source to target (distinct)."""
        i, j = self._id(source), self._id(target)
        if i == j:
            return []
        within = self._reach(self._radj(), j) | {j}
        found = [tuple(p) for p in _simple_paths(self._adj(), i, j, within)]
        found.sort()
        return [tuple(self._name(k) for k in p) for p in found]

    # --- cycles and diamonds ---------------------------------------------

    def cycles(self, limit: int | None = None) -> list[tuple[str, ...]]:
        """Every elementary cycle (Johnson's algorithm), each starting at its
        member with the lowest id, sorted by ids; at most ``limit`` of them
        (then which ones is unspecified)."""
        found: list[tuple[int, ...]] = []
        for cycle in elementary_cycles(self._adj()):
            found.append(cycle)
            if limit is not None and len(found) >= limit:
                break
        found.sort()
        return [tuple(self._name(k) for k in c) for c in found]

    def diamonds(self, limit: int | None = None) -> list[Diamond]:
        """Every pair of distinct members with more than one directed simple
        path between them, with all those paths (sorted by ids); at most
        ``limit`` pairs."""
        adj = self._adj()
        radj = self._radj()
        result: list[Diamond] = []
        for x in sorted(adj):
            counts = _path_counts(adj, x, cap=2)
            targets = sorted(y for y, n in counts.items() if n > 1 and y != x)
            for y in targets:
                within = self._reach(radj, y) | {y}
                paths = sorted(tuple(p) for p in _simple_paths(adj, x, y, within))
                result.append(Diamond(self._name(x), self._name(y),
                                      tuple(tuple(self._name(k) for k in p) for p in paths)))
                if limit is not None and len(result) >= limit:
                    return result
        return result

    def _cycles_created(self, i: int, j: int) -> tuple[list[tuple[str, ...]], bool]:
        """Cycles a link i -> j would create: i followed by each simple path
        j ~> i of the current graph."""
        within = self._reach(self._radj(), i) | {i}
        if j not in within:
            return [], False
        cycles: list[tuple[int, ...]] = []
        truncated = False
        for path in _simple_paths(self._adj(), j, i, within):
            if len(cycles) >= REPORT_LIMIT:
                truncated = True
                break
            cycle = [i, *path[:-1]]
            k = cycle.index(min(cycle))
            cycles.append(tuple(cycle[k:] + cycle[:k]))
        cycles.sort()
        return [tuple(self._name(k) for k in c) for c in cycles], truncated

    def _diamonds_created(self, i: int, j: int) -> list[Diamond]:
        """Pairs that a link i -> j would give a second path, assuming (as
        the QoS guarantees when diamonds are forbidden) that the current graph
        has at most one simple path between any two members.

        Then a new path x ~> i -> j ~> y is the unique path x ~> i followed by
        the unique path j ~> y, when the two share no member, and it conflicts
        with the old path x ~> y if there is one. The unique paths are those
        of breadth-first trees."""
        adj = self._adj()
        up = _bfs_tree(self._radj(), i)        # x -> next hop towards i
        down = _bfs_tree(adj, j)               # y -> previous hop from j
        children: defaultdict[int, list[int]] = defaultdict(list)
        for y, p in down.items():
            if p is not None:
                children[p].append(y)
        creates_cycle = j in up
        # only members with an old path into the tree of j can conflict
        # (one reverse search, so that an accepted link costs O(V + E))
        candidates = self._reach_all(self._radj(), down) & up.keys()
        found: list[Diamond] = []
        for x in sorted(candidates):
            head: list[int] = []                  # x ~> i
            cur: int | None = x
            while cur is not None:
                head.append(cur)
                cur = up[cur]
            blocked = set(head) if creates_cycle else set()
            if j in blocked:
                continue
            old = _bfs_tree(adj, x)
            todo = [j]
            while todo:                           # walk the tree of j, pruned
                y = todo.pop()
                if y != x and y in old:
                    new_path = head + _tree_path(down, y)
                    old_path = _tree_path(old, y)
                    paths = sorted((tuple(old_path), tuple(new_path)))
                    found.append(Diamond(self._name(x), self._name(y),
                                         tuple(tuple(self._name(k) for k in p) for p in paths)))
                todo.extend(c for c in children[y] if c not in blocked)
        found.sort(key=lambda d: (self._ids[d.source], self._ids[d.target]))
        return found
