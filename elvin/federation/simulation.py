"""A deterministic simulation of the topology agreement (issue 40), on the
sans-IO ``TopologyView``: no sockets, no clock, one seed per schedule.

Why: exactly-once routing on trees depends on how the routers agree on a
graph while routers die, come back, hang and links come and go. Real
processes find such bugs only by luck; a simulation can run thousands of
random schedules a minute and replay a failing one from its seed.

What is simulated, as the federation service does it (``service.py``):

* routers ``r00``..: each a ``TopologyView`` on the simulated clock, with
  the agreement bound ``timeout``;
* links: messages in each direction arrive in order after a random delay
  (one TCP connection); a closed link loses what is in flight. When a link
  comes up each end sends its marker (the term of its pull filter saying it
  takes part); the peer is *pending* (``LinkState.participant`` None) until
  the marker has arrived and this router's pull filters are acknowledged
  (a round trip later, or ``timeout`` later when a peer is silent);
  on the marker, the router sends the peer every announcement it holds;
* announcements: a newer one goes on to every other taking part peer, and
  each router recomputes once per turn (``set_links`` then ``refresh``), and
  calls ``tick`` at ``next_deadline``;
* notifications: published at a router (held while it has no confirmed
  graph, then sent in order), stamped, forwarded to the route's children,
  taken only from the route's parent, as ``forward`` and ``on_tree`` do
  (one from a peer that the agreed graph does not have yet is held until a
  graph is agreed, as ``hold_from`` does, and dropped if a router restarted
  meanwhile);
  a router that does not take part (``flood``) floods by routing lists;
* faults: kills and restarts (a new life, links redialled), silences
  (SIGSTOP: messages wait, nothing is sent; after ``keepalive`` the
  neighbours close its links), link closes and heals, partitions, links
  added and removed (SIGHUP), publishing right after a restart; with
  ``streams``, a producer per round publishing every quarter of the
  largest delay (at most 200 times) through the faults.

Checked: **never twice** (every delivery, at every moment, but for the
README's three exceptions at routers that do not take part, each counted in
``Outcome``: cut apart, held up past the window, or during a switch), and **nothing
lost after detection**: in the quiet part of each round (no fault for
``bound`` seconds), a notification from every live router that is not
silent (those that do not take part too) reaches every router it is
connected to, those that do not take part too (through links that are up,
routers alive and not silent, not through one that the origin's tree
reaches through a silent router not yet detected (for an unstamped one,
the tree each router takes it by: ``expected_unstamped``), nor, where a silent router is on the side of
routers that others cut apart but for routers that do not take part,
beyond that side: ``expected``, ``hears_stale``); and **per-producer order
among the notifications routed by one graph** (the same stamp) at every
router that takes part. One that overtakes an earlier one on another graph
(across a switch) is counted (``Outcome.reordered``), not a violation.

``run(seed)`` plays one schedule and returns its ``Outcome``; the
violations it lists name the seed, which replays it.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from elvin.federation.dedup import Recent
from elvin.federation.topology import (
    DEDUP_WINDOW,
    STAMP_PREFIX,
    Announcement,
    LinkState,
    TopologyView,
    split_routing,
)

__all__ = ["Outcome", "Simulation", "run"]


@dataclass
class _End:
    """One end of a link that is up, at one router."""
    epoch: int
    marker: bool = False              # the peer's marker arrived (it takes part)
    participant: bool | None = None   # as set_links gets it (None: pending)


@dataclass
class _Router:
    name: str
    flood: bool = False               # routing = "flood": takes no part
    view: TopologyView | None = None  # None: dead (or a flooding router)
    alive: bool = False               # until started
    silent: bool = False
    life: int = 0
    silence: int = 0
    backlog: list[tuple[str, int, tuple]] = field(default_factory=list)
    ends: dict[str, _End] = field(default_factory=dict)
    held: list[int] = field(default_factory=list)
    #: (sender, link epoch, notification, routing, life mark when first held)
    held_in: list[tuple[str, int, int, tuple[str, ...], int]] = field(default_factory=list)
    agreed: Any = None                # the confirmed graph last seen
    #: a flooding elvind's memory of the copies it delivered (it passes every
    #: copy on, but delivers one: ``FederationService.first_here``); None for
    #: a flooding router without one (Avis)
    recent: Recent | None = None
    tick_at: float | None = None
    update_due: bool = False


@dataclass
class Outcome:
    seed: int
    routers: int
    events: int = 0
    published: int = 0
    checked: int = 0                  # notifications held to "nothing lost"
    deliveries: int = 0
    #: copies at a router that does not take part while those that do are
    #: cut apart but for it (the README's exception), not violations
    cut_duplicates: int = 0
    #: copies that came more than the window after the first (held up in a
    #: hung router's buffers), of what entered at or came through a
    #: router that does not take part: the README's other exception
    late_duplicates: int = 0
    #: copies at a router that does not take part of what entered at one that
    #: does not either, within the bound after a change among ours (each of
    #: ours routes it by its own graph until they agree, and it has no memory
    #: to tell the copies apart): the README's third exception
    switch_duplicates: int = 0
    #: deliveries after a later one of the same producer (on another graph)
    reordered: int = 0
    #: copies of a publication that a router took for copies of an earlier
    #: one with the same content and origin, delivered there within the
    #: window by another routing list (its path changed: a switch; or the
    #: repeat may still come by the path the earlier one came): the
    #: federation guide's "only when its path changes within the window can
    #: such a repeat be dropped"; where it never arrived, excused from
    #: "nothing lost"
    repeats_dropped: int = 0
    violations: list[str] = field(default_factory=list)


class Simulation:
    """One schedule: ``run()`` plays it (see the module docstring)."""

    def __init__(self, seed: int, max_routers: int = 32, rounds: int = 3,
                 flood_share: float = 0.0, timeout: float = 1.0, keepalive: float = 30.0,
                 trace: Callable[[str], None] | None = None,
                 links: list[tuple[int, int]] | None = None, streams: bool = False,
                 flood_memory: bool = False) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        rng = self.rng
        n = 2 + int((max_routers - 1) * rng.random() ** 3)
        n = min(n, max_routers)
        self.names = [f"r{i:02d}" for i in range(n)]
        self.config: set[frozenset[str]] = set()
        for i in range(1, n):                      # a spanning tree, then chords
            self.config.add(frozenset((self.names[i], self.names[rng.randrange(i)])))
        for _ in range(rng.randrange(0, n + 1)):
            a, b = rng.sample(self.names, 2) if n > 1 else (self.names[0],) * 2
            if a != b:
                self.config.add(frozenset((a, b)))
        if links is not None:                      # a given graph (tests)
            n = 1 + max(max(pair) for pair in links)
            self.names = [f"r{i:02d}" for i in range(n)]
            self.config = {frozenset((self.names[a], self.names[b])) for a, b in links}
        self.max_delay = rng.choice((0.0005, 0.002, 0.01, 0.05))
        self.timeout = timeout
        self.keepalive = keepalive
        self.rounds = rounds
        self.streams = streams
        self.flood_memory = flood_memory
        self.trace = trace
        self.now = 0.0
        self.round_end = 0.0
        self.last_change = 0.0
        self.last_cut = -1e9                       # when they were last cut apart
        self.events: list[tuple[float, int, Callable[[], object]]] = []
        self._order = itertools.count()
        self.epochs = itertools.count(1)
        self.up: dict[frozenset[str], int] = {}    # link -> epoch
        self.last: dict[tuple[str, str], float] = {}
        self.routers = {name: _Router(name) for name in self.names}
        if flood_share and n > 2:
            # no two linked to each other (the README's condition for
            # exactly once at them: nobody announces a link between them)
            # and not cutting the others apart
            for name in self.names:
                if rng.random() < flood_share and not any(
                        self.routers[p].flood for p in self.peers(name)):
                    self.routers[name].flood = True
                    if not self.participants_connected(self.config):
                        self.routers[name].flood = False
        self.outcome = Outcome(seed, n)
        self.counts: dict[int, dict[str, int]] = {}
        self.origin: dict[int, str] = {}
        self.content: dict[int, int] = {}          # notification -> its content
        self.repeats = random.Random(seed + 1)     # its own: the schedule stays the seed's
        self.last_content: dict[str, int] = {}     # origin -> what it published last
        self.notifications = itertools.count()
        self.first_at: dict[tuple[int, str], float] = {}     # first delivery
        #: (router, life, origin, content) -> what was delivered there: when,
        #: which publication, by which routing list
        self.delivered_same: dict[tuple[str, int, str | None, int],
                                  list[tuple[float, int, tuple[str, ...]]]] = {}
        #: notification -> routers of ours that took it for a copy of another
        #: publication (neither delivered nor passed on), and flooding ones
        #: that did (passed on, not delivered)
        self.repeat_stopped: dict[int, set[str]] = {}
        self.repeat_undelivered: dict[int, set[str]] = {}
        self.latest: dict[tuple[str, str], int] = {}           # (origin, at) -> newest
        self.latest_on: dict[tuple[str, str, str], int] = {}   # ... per graph
        #: copies (notification, routing list) that a router on their way
        #: routed by another graph than their stamp names (it does not hold
        #: it): not routed by one graph, so not held to its order
        self.rerouted: set[tuple[int, tuple[str, ...]]] = set()
        #: notifications a copy of which was so rerouted somewhere
        self.rerouted_any: set[int] = set()

    def participants_connected(self, links: Any) -> bool:
        """Whether the routers that take part (alive ones once started) are
        connected by ``links`` between themselves, not through one that
        does not take part."""
        started = any(r.alive for r in self.routers.values())
        parts = [n for n in self.names if not self.routers[n].flood
                 and (not started or (self.routers[n].alive and not self.routers[n].silent))]
        if not parts:
            return True
        seen = {parts[0]}
        todo = [parts[0]]
        while todo:
            node = todo.pop()
            for link in links:
                if node in link:
                    peer = next(iter(link - {node}))
                    if peer in parts and peer not in seen:
                        seen.add(peer)
                        todo.append(peer)
        return len(seen) == len(parts)

    def cut_lately(self) -> bool:
        """Whether the routers that take part are cut apart but for routers
        that do not, or were less than ``bound`` ago (until they agree on
        the links that join them again)."""
        return self.now < self.last_cut + self.bound() or \
            not self.participants_connected(self.up)

    def peers(self, name: str) -> list[str]:
        return sorted(p for link in self.config if name in link for p in link if p != name)

    # -- the event queue ---------------------------------------------------------------
    def at(self, when: float, action: Callable[[], object]) -> None:
        heapq.heappush(self.events, (when, next(self._order), action))

    def run_until(self, end: float) -> None:
        while self.events and self.events[0][0] <= end:
            when, _, action = heapq.heappop(self.events)
            self.now = when
            action()
        self.now = max(self.now, end)

    def note(self, text: str) -> None:
        """Trace a fault or repair (the topology changes: the quiet part of a
        round starts after the last one)."""
        self.last_change = self.now
        if not self.participants_connected(self.up):    # as things stood until now
            self.last_cut = self.now
        if self.trace is not None:
            self.trace(f"{self.now:9.4f} {text}")

    def delay(self) -> float:
        return self.rng.uniform(self.max_delay / 20, self.max_delay)

    # -- routers -----------------------------------------------------------------------
    def start(self, name: str) -> None:
        r = self.routers[name]
        self.note(f"start {name}")
        r.alive, r.silent, r.life = True, False, r.life + 1
        r.ends, r.held, r.backlog, r.tick_at, r.update_due = {}, [], [], None, False
        r.held_in, r.agreed = [], None
        r.recent = Recent(DEDUP_WINDOW * self.timeout) if r.flood and self.flood_memory else None
        if not r.flood:
            r.view = TopologyView(name, clock=lambda: 1000.0 + self.now,
                                  monotonic=lambda: self.now, timeout=self.timeout)
        for link in sorted(self.config, key=sorted):
            if name in link:
                peer = next(iter(link - {name}))
                self.at(self.now + self.delay(), functools.partial(self.connect, name, peer))
        self.update_soon(r)

    def kill(self, name: str) -> None:
        r = self.routers[name]
        if not r.alive:
            return
        self.note(f"kill {name}")
        for peer in sorted(r.ends):
            self.close(name, peer)
        r.alive, r.silent, r.view, r.held, r.held_in = False, False, None, [], []

    def stop(self, name: str) -> None:
        r = self.routers[name]
        if not r.alive or r.silent:
            return
        self.note(f"SIGSTOP {name}")
        r.silent = True
        r.silence += 1
        episode = r.silence
        self.at(self.now + self.keepalive, lambda: self.keepalive_due(name, episode))

    def keepalive_due(self, name: str, episode: int) -> None:
        r = self.routers[name]
        if r.alive and r.silent and r.silence == episode:
            self.note(f"keepalive closes the links of silent {name}")
            for peer in sorted(r.ends):
                self.close(name, peer)

    def resume(self, name: str) -> None:
        r = self.routers[name]
        if not r.alive or not r.silent:
            return
        self.note(f"SIGCONT {name}")
        r.silent = False
        backlog, r.backlog = r.backlog, []
        for sender, epoch, message in backlog:
            self.receive(name, sender, epoch, message)
        for link in sorted(self.config, key=sorted):
            if name in link:
                peer = next(iter(link - {name}))
                self.at(self.now + self.delay(), functools.partial(self.connect, name, peer))
        self.update_soon(r)
        self.schedule_tick(r)

    # -- links -------------------------------------------------------------------------
    def connect(self, a: str, b: str) -> None:
        link = frozenset((a, b))
        ra, rb = self.routers[a], self.routers[b]
        if link in self.up or link not in self.config or not (ra.alive and rb.alive) \
                or ra.silent or rb.silent:
            return
        self.note(f"link {a}-{b} up")       # first: the state it ends is checked
        epoch = self.up[link] = next(self.epochs)
        for me, peer in ((ra, b), (rb, a)):
            me.ends[peer] = _End(epoch, participant=False if me.flood else None)
            if not me.flood:
                self.send(me.name, peer, ("marker",))
            self.update_soon(me)

    def close(self, a: str, b: str) -> None:
        link = frozenset((a, b))
        if self.up.pop(link, None) is None:
            return
        self.note(f"link {a}-{b} down")
        for me, peer in ((a, b), (b, a)):
            r = self.routers[me]
            r.ends.pop(peer, None)
            self.update_soon(r)

    def send(self, a: str, b: str, message: tuple) -> None:
        epoch = self.up.get(frozenset((a, b)))
        if epoch is None:
            return
        when = max(self.now + self.delay(), self.last.get((a, b), 0.0))
        self.last[(a, b)] = when
        self.at(when, lambda: self.arrive(b, a, epoch, message))

    def arrive(self, to: str, sender: str, epoch: int, message: tuple) -> None:
        if self.up.get(frozenset((to, sender))) != epoch:
            return                     # the link closed: lost in flight
        r = self.routers[to]
        if r.silent:
            r.backlog.append((sender, epoch, message))
            return
        self.receive(to, sender, epoch, message)

    def receive(self, to: str, sender: str, epoch: int, message: tuple) -> None:
        r = self.routers[to]
        end = r.ends.get(sender)
        if end is None or end.epoch != epoch or not r.alive:
            return
        kind = message[0]
        if kind == "marker":
            if r.flood:
                return
            end.marker = True
            view = r.view
            assert view is not None
            for router in sorted(view.announcements):
                self.send(to, sender, ("ann", view.announcements[router]))
            # ready once this router's pull filters are acknowledged: a
            # round trip, or the bound when a peer does not answer
            others = [p for p in r.ends if p != sender]
            wait = 2 * self.max_delay
            if any(self.routers[p].silent for p in others):
                wait = self.timeout
            life = r.life
            self.at(self.now + self.rng.uniform(0, wait),
                    lambda: self.ready(to, sender, epoch, life))
        elif kind == "ann":
            if r.flood or not end.marker:
                return
            view = r.view
            assert view is not None
            ann: Announcement = message[1]
            if view.receive(ann):
                for peer in sorted(r.ends):
                    if peer != sender and r.ends[peer].marker:
                        self.send(to, peer, ("ann", ann))
            self.update_soon(r)
        elif kind == "notify":
            self.take(r, sender, message[1], message[2])

    def ready(self, name: str, peer: str, epoch: int, life: int) -> None:
        r = self.routers[name]
        end = r.ends.get(peer)
        if r.life != life or end is None or end.epoch != epoch:
            return
        end.participant = True
        self.update_soon(r)

    # -- the service's turn ------------------------------------------------------------
    def update_soon(self, r: _Router) -> None:
        if r.flood or r.update_due:
            return
        r.update_due = True
        life = r.life
        self.at(self.now, lambda: self.update(r, life))

    def update(self, r: _Router, life: int) -> None:
        r.update_due = False
        if r.life != life or not r.alive or r.view is None:
            return
        if r.silent:
            return                     # resume() updates
        view = r.view
        states = [LinkState(peer, end.participant) for peer, end in sorted(r.ends.items())]
        changed = view.set_links(states)
        if view.refresh() or changed:
            self.announce(r)
        self.after_change(r)

    def announce(self, r: _Router) -> None:
        assert r.view is not None
        own = r.view.own
        for peer in sorted(r.ends):
            if r.ends[peer].marker:
                self.send(r.name, peer, ("ann", own))

    def after_change(self, r: _Router) -> None:
        self.release(r)
        assert r.view is not None
        if r.view.confirmed is not r.agreed:
            r.agreed = r.view.confirmed
            if r.agreed is not None and r.held_in:
                held, r.held_in = r.held_in, []
                for sender, epoch, k, routing, mark in held:
                    end = r.ends.get(sender)
                    if end is not None and end.epoch == epoch and \
                            not r.view.restarted_since(mark):
                        self.take(r, sender, k, routing, mark)
        self.schedule_tick(r)

    def schedule_tick(self, r: _Router) -> None:
        if r.view is None:
            return
        deadline = r.view.next_deadline()
        if deadline is None or (r.tick_at is not None and r.tick_at <= deadline
                                and r.tick_at > self.now):
            return
        r.tick_at = max(deadline, self.now)
        life = r.life
        self.at(r.tick_at, lambda: self.tick(r, life))

    def tick(self, r: _Router, life: int) -> None:
        if r.life != life or not r.alive or r.silent or r.view is None:
            return
        if r.tick_at is not None and r.tick_at > self.now:
            return
        r.tick_at = None
        if r.view.tick():
            self.announce(r)
        self.after_change(r)

    # -- notifications -----------------------------------------------------------------
    def publish(self, name: str) -> int | None:
        """Publish at ``name``; a third of the time the same content as its
        last notification (a repeat must not be taken for a copy)."""
        r = self.routers[name]
        if not r.alive or r.silent:
            return None
        k = next(self.notifications)
        self.outcome.published += 1
        self.origin[k] = name
        if name in self.last_content and self.repeats.random() < 1 / 3:
            self.content[k] = self.last_content[name]
        else:
            self.content[k] = self.last_content[name] = k
        self.counts[k] = {name: 1}
        if r.flood:
            for peer in sorted(r.ends):
                self.send(name, peer, ("notify", k, (name,)))
            return k
        r.held.append(k)
        self.release(r)
        return k

    def release(self, r: _Router) -> None:
        """Send what was published with no agreed graph, in order, once there is one."""
        if r.view is None or r.view.confirmed is None:
            return
        held, r.held = r.held, []
        for k in held:
            route = r.view.route((), None)
            assert route.graph is not None
            out = (r.name, route.graph.stamp)
            for child in route.children:
                if child in r.ends:
                    self.send(r.name, child, ("notify", k, out))

    def take(self, r: _Router, sender: str, k: int, routing: tuple[str, ...],
             mark: int | None = None) -> None:
        if r.name in routing:
            return
        if r.flood:
            targets = [p for p in sorted(r.ends) if p not in routing]
            if (k, routing) in self.rerouted:
                self.reroute(k, (r.name, *routing))
            if r.recent is not None and not r.recent.first(
                    (split_routing(routing)[0], self.content[k]), routing, self.now):
                self.note_repeat(r, k, routing, self.repeat_undelivered)
                out = (r.name, *routing)     # passed on, not delivered here
                for peer in targets:
                    self.send(r.name, peer, ("notify", k, out))
                return
        else:
            assert r.view is not None
            route = r.view.route(routing, None, sender)
            if route.graph is None:
                graph = r.view.confirmed
                if not routing[-1].startswith(STAMP_PREFIX) and not r.view.catching_up and (
                        graph is None or sender not in graph.node_set):
                    r.held_in.append((sender, r.ends[sender].epoch, k, routing,  # its link
                                      r.view.life_mark() if mark is None else mark))  # not agreed yet
                return
            if route.parent != sender:
                return                 # off the tree: dropped
            if not r.view.first_copy(routing, r.ends[sender].marker,
                                       {"content": self.content[k]}):
                self.note_repeat(r, k, routing, self.repeat_stopped)
                return                 # a copy of one taken by another path
            targets = [p for p in route.children if p in r.ends and p not in routing]
            stamp = routing[-1]
            if (k, routing) in self.rerouted or (
                    stamp.startswith(STAMP_PREFIX) and r.view.by_stamp(stamp) is None):
                self.reroute(k, (r.name, *routing))
        got = self.counts[k].get(r.name, 0) + 1
        self.counts[k][r.name] = got
        self.delivered_same.setdefault(
            (r.name, r.life, split_routing(routing)[0], self.content[k]), []).append(
            (self.now, k, routing))
        self.outcome.deliveries += 1
        first = self.first_at.setdefault((k, r.name), self.now)
        if got > 1 and r.flood and r.recent is None and self.cut_lately():
            # the README's exception: routers that do not take part cut
            # the others apart (a fault did), as on any cycle of theirs
            self.outcome.cut_duplicates += 1
        elif got > 1 and self.now > first + DEDUP_WINDOW * self.timeout and (
                not routing[-1].startswith(STAMP_PREFIX) or any(
                    d in self.routers and self.routers[d].flood for d in routing)):
            # the other exception: a copy held up past the window (in the
            # buffers of a hung router that then resumed), of what entered
            # at or came through a router that does not take part (one of
            # ours may route it on as an unstamped one: 711720)
            self.outcome.late_duplicates += 1
        elif got > 1 and r.flood and r.recent is None and self.now < self.last_change + self.bound() and (
                not routing[-1].startswith(STAMP_PREFIX) or k in self.rerouted_any):
            # the third: not routed by one graph (unstamped, or a copy whose
            # stamp a router of ours did not hold, routed on by its own),
            # while two of ours still route by different ones (500473: r05
            # by the graph with its link to flooding r13 back, r04 by the
            # one before, both sending r13's notification to flooding r06;
            # 800970: r04, whose graph lost r09 with link r06-r09 a moment
            # before r09-r07 was agreed, routed r09's copy that flooding r11
            # passed it on to flooding r02, which r00 had sent it by r09's tree)
            self.outcome.switch_duplicates += 1
        elif got > 1:
            self.violation(f"notification {k} from {self.origin[k]} reached {r.name} "
                           f"{got} times (routing {list(routing)})")
        self.check_order(r, k, routing)
        out = (r.name, *routing)
        for peer in targets:
            self.send(r.name, peer, ("notify", k, out))

    def note_repeat(self, r: _Router, k: int, routing: tuple[str, ...],
                    where: dict[int, set[str]]) -> None:
        """A copy ``r`` did not deliver as one of what it delivered: if
        ``k`` itself never reached it, it must be a repeat (another
        publication with the same content and origin, delivered there
        within the window) that came by another routing list, and ``k`` is
        dropped at ``r`` by the rule (``Outcome.repeats_dropped``); anything
        else (a repeat that came the same way, or no such delivery) is a
        violation. Judged from what the simulation saw delivered, not from
        the router's memory, which is what is checked."""
        if self.counts[k].get(r.name, 0):
            return                     # a real copy: k was delivered here
        window = DEDUP_WINDOW * self.timeout
        same = [(kk, rr) for t, kk, rr in self.delivered_same.get(
            (r.name, r.life, split_routing(routing)[0], self.content[k]), [])
            if t + window >= self.now]
        if not any(rr != routing for _, rr in same):
            self.violation(f"notification {k} from {self.origin[k]} dropped at {r.name} as a "
                           f"copy of {[kk for kk, _ in same] or 'nothing delivered there'}, "
                           f"which came by the same routing list {list(routing)}")
            return
        if r.name not in where.setdefault(k, set()):
            where[k].add(r.name)
            self.outcome.repeats_dropped += 1

    def reroute(self, k: int, routing: tuple[str, ...]) -> None:
        self.rerouted.add((k, routing))
        self.rerouted_any.add(k)

    def check_order(self, r: _Router, k: int, routing: tuple[str, ...]) -> None:
        """Per-producer order (notifications are numbered in publishing
        order): kept among those routed by one graph (the same stamp, held
        by the router: one it does not hold came round through routers that
        do not take part and is routed by its own) to a router that takes part; one that overtakes an earlier one of the
        same producer on another graph (a switch) is counted, not a
        violation (the README says so)."""
        origin = self.origin[k]
        latest = self.latest.get((origin, r.name), -1)
        if k < latest:
            self.outcome.reordered += 1
        self.latest[(origin, r.name)] = max(latest, k)
        stamp = routing[-1]
        if r.flood or not stamp.startswith(STAMP_PREFIX) or r.view is None \
                or r.view.by_stamp(stamp) is None or (k, routing) in self.rerouted:
            return        # not routed here (or on the way) by the graph it names
        key = (origin, r.name, stamp)
        same = self.latest_on.get(key, -1)
        if k < same:
            self.violation(f"notification {k} from {origin} reached {r.name} after {same}, "
                           f"routed by the same graph {stamp}")
        self.latest_on[key] = max(same, k)

    def violation(self, text: str) -> None:
        if self.trace is not None:
            self.trace(f"{self.now:9.4f} VIOLATION {text}")
        if len(self.outcome.violations) < 20:
            self.outcome.violations.append(f"seed {self.seed} at t={self.now:.4f}: {text}")

    # -- the schedule ------------------------------------------------------------------
    def reachable(self, origin: str, avoid: frozenset[str] | set[str] = frozenset()) -> set[str]:
        def usable(name: str) -> bool:
            r = self.routers[name]
            return r.alive and not r.silent and name not in avoid
        seen = {origin}
        todo = [origin]
        while todo:
            node = todo.pop()
            for link in self.up:
                if node in link:
                    peer = next(iter(link - {node}))
                    if peer not in seen and usable(peer):
                        seen.add(peer)
                        todo.append(peer)
        return seen

    def expected(self, origin: str) -> set[str]:
        """Where a notification published now at ``origin`` must arrive: every
        router it is connected to (routers that do not take part too),
        except those its tree reaches through a silent router that was not
        detected (its links are still up and nothing changed since that
        made the routers wait for it): what is sent to a hung router is lost
        until the keepalive notices it; and except where a router knows the
        topology only as it was when such a router hung (``hears_stale``)."""
        want = self.reachable(origin)
        view = self.routers[origin].view
        if self.routers[origin].flood:
            return self.expected_unstamped(origin, want)
        graph = view.confirmed if view is not None else None
        if graph is None:
            return want
        # such a router's notifications follow that topology's tree: only its
        # own side (which agrees on itself) is sure to get what it publishes;
        # and it routes what reaches it by that topology: a router beyond
        # its side is not sure to reach it
        if self.hears_stale(origin):
            want &= self.hearing(origin)
            behind = set()
        else:
            behind = {name for name in want if self.routers[name].view is not None
                      and self.hears_stale(name)}
        tree = graph.tree(origin)
        behind |= {name for name in want      # on the tree below a silent router
                   if self.below_silent(tree, origin, name)}
        # and what the graph does not have (behind a router that does not
        # take part) is reached only through routers not behind one
        return self.reachable(origin, avoid=behind) & want

    def expected_unstamped(self, origin: str, want: set[str]) -> set[str]:
        """``expected`` for a notification published at a router that does
        not take part: it carries no stamp, so each router of ours takes it
        by its own graph's tree from ``origin``; one whose tree reaches it
        through a silent router not yet detected expects it from that
        router, and may miss it until the keepalive notices the hang (the
        README's "only what the trees send through that hung router is
        lost"); so may one that does not take part whose neighbours' trees
        reach it so, one that knows the topology only as it was when such a
        router hung (``hears_stale``), and what is reached only through
        such routers.
        (Checked since a 16-router run with 30% of them flooding: before,
        the notifications of routers that do not take part were held to
        nothing.)"""
        if not any(self.routers[n].silent for n in self.names):
            return want
        # one that knows the topology only as it was when a silent router
        # hung routes what reaches it by that topology (as in ``expected``)
        behind = {name for name in want if self.routers[name].view is not None
                  and self.hears_stale(name)}
        behind |= self.behind_unstamped(origin, want, lambda node: self.routers[node].silent)
        return self.reachable(origin, avoid=behind) & want

    def behind_unstamped(self, origin: str, want: set[str],
                         stuck: Callable[[str], bool]) -> set[str]:
        """The routers of ``want`` that a notification from ``origin``
        routed by each router's own graph (unstamped) reaches only through
        a router that is ``stuck``: by their own graph's tree, or for a
        router that does not take part, by those of the routers of ours
        next to it."""
        behind = set()
        for name in sorted(want):
            holders = [name] if not self.routers[name].flood else sorted(
                p for link in self.up if name in link for p in link
                if p != name and not self.routers[p].flood)
            for holder in holders:
                view = self.routers[holder].view
                graph = view.confirmed if view is not None else None
                if graph is None or origin not in graph.node_set:
                    continue
                if self.below_silent(graph.tree(origin), origin, name, stuck):
                    behind.add(name)
        return behind

    def below_silent(self, tree: dict[str, str], origin: str, name: str,
                     stuck: Callable[[str], bool] | None = None) -> bool:
        """Whether ``tree`` (rooted at ``origin``) reaches ``name`` through a
        silent router (or one that is ``stuck``)."""
        node = name
        while node in tree and node != origin:
            node = tree[node]
            if self.routers[node].silent if stuck is None else stuck(node):
                return True
        return False

    def hearing(self, name: str) -> set[str]:
        """The routers whose announcements reach ``name``: those that take
        part, alive and not silent, through links that are up between them."""
        def passes(peer: str) -> bool:
            r = self.routers[peer]
            return r.alive and not r.flood and not r.silent
        seen = {name}
        todo = [name]
        while todo:
            node = todo.pop()
            for link in self.up:
                if node in link:
                    peer = next(iter(link - {node}))
                    if peer not in seen and passes(peer):
                        seen.add(peer)
                        todo.append(peer)
        return seen

    def hears_stale(self, name: str) -> bool:
        """Whether ``name`` may know the topology as it was when a silent
        router not yet detected hung: it is cut apart from routers that take
        part but for routers that do not (which carry no announcements), and
        the silent one is on its side. What changed at the silent one, or
        beyond it, is not announced to its side until the keepalive notices
        it (a link of the silent router that closed meanwhile is announced by
        its other end only, on the other side)."""
        heard = self.hearing(name)
        if not any(self.routers[p].silent for link in self.up if link & heard for p in link):
            return False
        return heard != {n for n in self.reachable(name) if not self.routers[n].flood}

    def fault(self) -> None:
        """One random fault (or repair)."""
        rng = self.rng
        names = self.names
        alive = [n for n in names if self.routers[n].alive]
        dead = [n for n in names if not self.routers[n].alive]
        silent = [n for n in names if self.routers[n].silent]
        down = sorted(sorted(link) for link in self.config if link not in self.up)
        up = sorted(sorted(link) for link in self.up)
        choice = rng.random()
        self.outcome.events += 1
        if choice < 0.15 and len(alive) > 1:
            victim = rng.choice(alive)
            self.kill(victim)
            if rng.random() < 0.7:
                self.at(self.now + rng.uniform(0.001, self.left()),
                        lambda: self.restart(victim))
        elif choice < 0.25 and dead:
            self.restart(rng.choice(dead))
        elif choice < 0.35 and len(alive) > 1:
            victim = rng.choice(alive)
            self.stop(victim)
            if rng.random() < 0.5:
                self.at(self.now + rng.uniform(0.001, self.left()),
                        lambda: self.resume(victim))
        elif choice < 0.42 and silent:
            self.resume(rng.choice(silent))
        elif choice < 0.6 and up:
            a, b = rng.choice(up)
            self.close(a, b)
            if rng.random() < 0.6:
                self.at(self.now + rng.uniform(0.0, self.left()),
                        lambda: self.connect(a, b))
        elif choice < 0.72 and down:
            a, b = rng.choice(down)
            self.connect(a, b)
        elif choice < 0.8 and len(names) > 2:     # a partition, healed later or not
            side = set(rng.sample(names, rng.randrange(1, len(names))))
            cut = [sorted(link) for link in sorted(self.up, key=sorted)
                   if len(link & side) == 1]
            self.note(f"partition {sorted(side)}")
            for a, b in cut:
                self.close(a, b)
            if rng.random() < 0.7:
                def heal() -> None:
                    self.note("heal")
                    for a, b in cut:
                        self.connect(a, b)
                self.at(self.now + rng.uniform(0.0, self.left()), heal)
        elif choice < 0.9 and len(names) > 2:     # SIGHUP: a link added
            a, b = rng.sample(names, 2)
            link = frozenset((a, b))
            if link not in self.config and not (self.routers[a].flood and self.routers[b].flood):
                self.note(f"link {a}-{b} added")
                self.config.add(link)
                self.at(self.now + self.delay(), lambda: self.connect(a, b))
        elif self.config:                         # SIGHUP: a link removed
            a, b = sorted(rng.choice(sorted(self.config, key=sorted)))
            self.note(f"link {a}-{b} removed")
            self.config.discard(frozenset((a, b)))
            self.close(a, b)

    def left(self) -> float:
        """What is left of this round's faulty part (repairs happen in it:
        what is still broken at its end stays broken through the quiet part)."""
        return max(0.001, self.round_end - self.now)

    def restart(self, name: str, publish: bool = True) -> None:
        r = self.routers[name]
        if r.alive:
            return
        self.start(name)
        if publish and self.rng.random() < 0.7:    # publish at once
            self.publish(name)
            self.at(self.now + self.max_delay * self.rng.random(),
                    lambda: self.publish(name))

    def bound(self) -> float:
        """How long after the last fault everything must work again: the
        agreement bound twice (a pending link, then a router waited for),
        and announcements across the federation and back a few times."""
        return 3 * self.timeout + 8 * len(self.names) * self.max_delay

    def run(self) -> Outcome:
        rng = self.rng
        for name in self.names:
            self.at(rng.uniform(0, 0.01), functools.partial(self.restart, name, publish=False))
        for _ in range(self.rounds):
            start = self.now
            span = rng.uniform(0.0, 4 * self.timeout)
            self.round_end = start + span
            for _ in range(rng.randrange(0, 8)):
                self.at(start + rng.uniform(0, span), self.fault)
            for _ in range(rng.randrange(0, 12)):
                self.at(start + rng.uniform(0, span),
                        lambda: self.publish(rng.choice(self.names)))
            if self.streams:             # a producer publishing through the faults
                name = rng.choice(self.names)
                gap = max(self.max_delay / 4, span / 200)
                for i in range(int(span / gap) if gap else 0):
                    self.at(start + i * gap, functools.partial(self.publish, name))
            self.run_until(start + span)
            # quiet: no fault from here on in this round (repairs scheduled
            # meanwhile, such as a restart, count as changes too)
            while self.now < self.last_change + self.bound():
                self.run_until(self.last_change + self.bound())
            checked = []
            for name in self.names:
                k = self.publish(name)
                if k is not None:
                    checked.append((k, self.expected(name)))
            self.run_until(self.now + 4 * len(self.names) * self.max_delay + 0.01)
            for k, want in checked:
                self.outcome.checked += 1
                got = {n for n, c in self.counts[k].items() if c}
                if k in self.repeat_stopped or k in self.repeat_undelivered:
                    # a repeat taken for a copy (the rule's exception): not
                    # delivered there, and for a router of ours not passed on
                    stopped = {n for n in self.repeat_stopped.get(k, ()) if n not in got}
                    want -= self.repeat_undelivered.get(k, set()) | stopped
                    want -= self.behind_unstamped(self.origin[k], want, stopped.__contains__)
                if not want <= got:
                    missing = sorted(want - got)
                    self.violation(f"notification {k} from {self.origin[k]}, published "
                                   f"{self.bound():.2f}s after the last fault, missed "
                                   f"{missing[:8]}")
        return self.outcome


def run(seed: int, **settings: Any) -> Outcome:
    """Play the schedule of ``seed`` (see ``Simulation``)."""
    return Simulation(seed, **settings).run()
