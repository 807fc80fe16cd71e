"""A fault harness for federations of real ``elvind`` processes (not a bench itself).

Why: the federation's promise (never twice, in order, nothing lost once the
survivors noticed a failure) has to hold under *combined* faults, which no
single-fault test reaches. This module runs a seeded random federation and a
seeded random schedule of faults against it, and checks every subscriber;
``bench/chaos.py`` is its command line, ``tests/integration/test_chaos_short.py``
a short run of it, and other work (mobility) can reuse ``Federation``,
``Proxy``, ``Schedule`` and ``Checker`` as they are. It uses only the client
protocol (``elvin.protocol``) and signals, so it runs against any ``elvind``.

The federation (``Federation``): ``n`` routers ``r0..r{n-1}``, each an
``elvind`` process with its own ports; the links a seeded random connected
graph (a random spanning tree plus ``extra`` random chords). Every link is
dialled through a ``Proxy`` that this process owns (an asyncio TCP relay that
``cut`` closes and keeps closed until ``heal``), so a link can fail without a
router failing. Every router accepts every other (``accept`` entries for
all), so a link added by a configuration reload needs only its dialler's
file rewritten and SIGHUP.

Faults (``Schedule``, from the seed): ``kill`` (SIGKILL, later restarted with
the same configuration; its producer publishes ``RESTART_BURST`` at once as
soon as it accepts clients again, then goes on at its rate), ``hang`` (SIGSTOP, later SIGCONT), ``cut`` (one link's proxy),
``partition`` (every link of the initial graph between a random set of
routers and the rest),
``drop`` (a link removed by a reload, later put back), ``add`` (a link added
by a reload, later removed). Up to ``overlap`` faults are under way at once.

Traffic: a producer at every router publishes ``{Chaos-Origin, Chaos-Seq}``
at ``rate`` per second, its sequence numbers going on across restarts of its
router; a subscriber at every router (``require(Chaos-Seq)``) records each
delivery. ``Checker`` then counts, per subscriber:

* duplicates: a (origin, seq) delivered more than once (never allowed);
* out of order: a delivery of an origin's seq lower than one already had
  (a notification that took an old tree can arrive after a later one that
  took the new, shorter one: order across a tree switch is not promised,
  the README's "Order", so this is a figure; ``final_out_of_order`` is the same for the
  final batch, published with no switch under way);
* lost: published, never delivered, and published *outside every window*.

The window of a fault (``Window``) runs from ``start - EARLY`` (what was
published just before a kill may still sit in the dead router's buffers)
until ``end + detect + bound``: ``end`` is when the fault was undone (restart,
SIGCONT, heal, link back), ``detect`` the time the routers take to notice
it (``2 * keepalive`` for a hang: a TestConn after ``keepalive`` of silence,
closed after another; 0 for a closed socket), and ``bound`` the agreement
bound given to the harness (by default ``reconnect_max + 2 * request_timeout
+ 1`` s: redial, handshake, pull filters and the new topology agreed).
A notification published inside any window may be lost anywhere; one
published outside all windows must reach every subscriber whose router was
up. After the schedule, once every fault is undone, the harness waits until
a probe from every router reaches every subscriber (a condition, not a
time), then a final batch from every producer must arrive everywhere exactly
once and in order (``final_lost``, ``final_out_of_order``): that part holds on
a loaded machine too.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from _common import free_port, open_peer, wait_listening

from elvin.protocol import NotifyEmit, SubAddRqst, decode_packet, frame

__all__ = ["EARLY", "Checker", "Fault", "Federation", "Proxy", "Schedule", "Window",
           "random_graph", "run"]

#: what was published this long before a fault started may be lost to it
EARLY = 0.2
#: notifications a restarted router's producer publishes the moment it is back
RESTART_BURST = 20
FAULTS = ("kill", "hang", "cut", "partition", "drop", "add")


def random_graph(rng: random.Random, n: int, extra: int) -> list[tuple[int, int]]:
    """A connected graph: a random spanning tree plus ``extra`` chords;
    ``(a, b)``: router ``a`` dials ``b``."""
    order = list(range(n))
    rng.shuffle(order)
    links = []
    for i in range(1, n):
        links.append((order[i], order[rng.randrange(i)]))
    pairs = {frozenset(p) for p in links}
    candidates = [(a, b) for a in range(n) for b in range(n)
                  if a != b and frozenset((a, b)) not in pairs and a > b]
    rng.shuffle(candidates)
    links += candidates[:extra]
    return links


class Proxy:
    """A TCP relay from a port of its own to ``target``, that ``cut`` closes
    (every connection through it, and every new one at once) until ``heal``."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.is_cut = False
        self._server: asyncio.AbstractServer | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.is_cut:
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.target), 5)
        except (OSError, TimeoutError):
            _abort(writer)
            return
        if self.is_cut:
            _abort(writer)
            _abort(up_writer)
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        finally:
            self._pairs.discard(pair)
            _abort(writer)
            _abort(up_writer)

    def cut(self) -> None:
        self.is_cut = True
        for a, b in list(self._pairs):
            _abort(a)
            _abort(b)

    def heal(self) -> None:
        self.is_cut = False

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError, RuntimeError):
        pass
    finally:
        _abort(writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    transport = writer.transport
    if not transport.is_closing():
        transport.abort()


class PortTaken(RuntimeError):
    """A router could not listen: another program has its port (the seed is
    worth running again on new ports, which is not a router's fault)."""


class Federation:
    """``n`` elvind processes over ``links``, every link through a ``Proxy``."""

    def __init__(self, tmp: Path, n: int, links: list[tuple[int, int]], keepalive: float,
                 settings: dict[str, object] | None = None,
                 flood: frozenset[int] = frozenset()) -> None:
        self.tmp, self.n = tmp, n
        self.flood = flood                      # routers with routing = "flood"
        self.links = set(links)
        self.keepalive = keepalive
        self.settings = {"debounce": 0.01, "reconnect_min": 0.05, "reconnect_max": 0.5,
                         "keepalive": keepalive, "request_timeout": 2.0, **(settings or {})}
        self.client_ports = [free_port() for _ in range(n)]
        self.fed_ports = [free_port() for _ in range(n)]
        self.proxies: dict[tuple[int, int], Proxy] = {}
        self.procs: list[subprocess.Popen | None] = [None] * n
        self.stopped: set[int] = set()           # SIGSTOPped
        self.starting: set[int] = set()          # restarted, not listening yet
        self._reload_due: set[int] = set()       # SIGHUP once it listens
        self.logs = [tmp / f"r{i}.log" for i in range(n)]
        self._log_start = [0] * n                # where each one's latest start logs from

    async def start(self) -> None:
        for a in range(self.n):
            for b in range(self.n):
                if a != b:              # any router may dial any (after a reload)
                    self.proxies[(a, b)] = await Proxy(self.fed_ports[b]).start()
        for i in range(self.n):
            self.write_config(i)
        for i in range(self.n):
            self.procs[i] = self._spawn(i)
        await asyncio.get_running_loop().run_in_executor(None, self._wait_all)

    def _wait_all(self) -> None:
        """RuntimeError (not the bench's SystemExit, which would end a loop
        of runs) if one does not start; ``PortTaken`` if another program
        has one of its ports."""
        deadline = time.monotonic() + 60
        for i in range(self.n):
            self._wait_started(i, deadline)

    def _wait_started(self, i: int, deadline: float) -> None:
        """Until router ``i`` says it listens on its port (in its own log, from
        where its latest start began) and accepts there. Why its log: a
        port another program took (a test run beside this one) accepts
        connections too, and a client would then wait on that program."""
        proc, port = self.procs[i], self.client_ports[i]
        assert proc is not None
        mark = f"listening on elvin://127.0.0.1:{port}"
        while True:
            if proc.poll() is not None:
                text = self.logs[i].read_text(errors="replace")[self._log_start[i]:]
                if "Address already in use" in text:
                    raise PortTaken(f"r{i}: another program has one of its ports ({port} "
                                    f"or {self.fed_ports[i]}; its log: {self.logs[i]})")
                raise RuntimeError(f"r{i} did not start (exit status {proc.returncode}; "
                                   f"its log: {self.logs[i]})")
            if mark in self.logs[i].read_text(errors="replace")[self._log_start[i]:]:
                try:
                    wait_listening(proc, port, deadline)
                except SystemExit as exc:
                    raise RuntimeError(f"r{i} did not start ({exc}; its log: "
                                       f"{self.logs[i]})") from None
                return
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"r{i} did not start within 60 s (its log: {self.logs[i]})")
            time.sleep(0.05)

    def exited(self) -> list[str]:
        """The routers that ended by themselves (not killed by a fault):
        each with its exit status and log."""
        return [f"r{i} exited with status {proc.returncode} (its log: {self.logs[i]})"
                for i, proc in enumerate(self.procs)
                if proc is not None and proc.poll() is not None]

    def write_config(self, i: int) -> None:
        text = [f'listen = "elvin://127.0.0.1:{self.client_ports[i]}"', "discovery = false",
                "[federation]", f'router_domain = "r{i}"',
                f'listen = "ewaf://127.0.0.1:{self.fed_ports[i]}"']
        text += [f"{k} = {v}" for k, v in self.settings.items()]
        if i in self.flood:
            text.append('routing = "flood"')
        for a, b in sorted(self.links):
            if a == i:
                text += ["[[federation.connect]]", f'router = "r{b}"',
                         f'url = "ewaf://127.0.0.1:{self.proxies[(a, b)].port}"']
        for j in range(self.n):
            if j != i:
                text += ["[[federation.accept]]", f'router = "r{j}"']
        (self.tmp / f"r{i}.toml").write_text("\n".join(text) + "\n")

    def _spawn(self, i: int) -> subprocess.Popen:
        self._log_start[i] = self.logs[i].stat().st_size if self.logs[i].exists() else 0
        log = open(self.logs[i], "a")  # the child holds it
        return subprocess.Popen(
            [sys.executable, "-m", "elvin.router", "--config", str(self.tmp / f"r{i}.toml"),
             "--log-level", os.environ.get("CHAOS_LOG", "info")],
            stdout=log, stderr=log, text=True)

    # -- faults --------------------------------------------------------------------------
    def kill(self, i: int) -> None:
        proc = self.procs[i]
        if proc is not None:
            if i in self.stopped:
                self.stopped.discard(i)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            self.procs[i] = None

    async def restart(self, i: int) -> None:
        """Start router ``i`` again on its ports. RuntimeError if it cannot
        (on a shared machine another program may have taken a port it freed)."""
        self.procs[i] = proc = self._spawn(i)
        self.starting.add(i)
        try:
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: self._wait_started(i, time.monotonic() + 60))
        except RuntimeError as exc:
            self.procs[i] = None
            raise RuntimeError(f"r{i} did not start again: {exc}") from None
        finally:
            self.starting.discard(i)
        if i in self._reload_due:          # its file changed while it started
            self._reload_due.discard(i)
            proc.send_signal(signal.SIGHUP)

    def hang(self, i: int) -> None:
        proc = self.procs[i]
        if proc is not None:
            proc.send_signal(signal.SIGSTOP)
            self.stopped.add(i)

    def resume(self, i: int) -> None:
        proc = self.procs[i]
        if proc is not None and i in self.stopped:
            proc.send_signal(signal.SIGCONT)
        self.stopped.discard(i)

    def cut(self, a: int, b: int) -> None:
        """Cut the link between ``a`` and ``b`` (whichever dials)."""
        self.proxies[(a, b)].cut()
        self.proxies[(b, a)].cut()

    def heal(self, a: int, b: int) -> None:
        self.proxies[(a, b)].heal()
        self.proxies[(b, a)].heal()

    def relink(self, link: tuple[int, int], present: bool) -> None:
        """Add or remove a link by rewriting its dialler's file and SIGHUP."""
        if present:
            self.links.add(link)
        else:
            self.links.discard(link)
        dialler = link[0]
        self.write_config(dialler)
        proc = self.procs[dialler]
        if dialler in self.starting:
            # a SIGHUP before its handler is installed would end it
            self._reload_due.add(dialler)
        elif proc is not None:
            proc.send_signal(signal.SIGHUP)

    async def stop(self) -> None:
        for i, proc in enumerate(self.procs):
            if proc is not None:
                if i in self.stopped:
                    proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.procs:
            if proc is not None:
                try:
                    await asyncio.get_running_loop().run_in_executor(None, proc.wait, 10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for p in self.proxies.values():
            await p.close()


@dataclass
class Fault:
    kind: str
    at: float                       # seconds from the schedule's start
    hold: float                     # how long until it is undone
    target: tuple = ()              # router(s) or link(s)

    def __str__(self) -> str:
        return f"{self.at:6.2f}s {self.kind:<9} {self.target} for {self.hold:.2f}s"


class Schedule:
    """A seeded random schedule of ``steps`` faults over ``links``."""

    def __init__(self, rng: random.Random, n: int, links: list[tuple[int, int]], steps: int,
                 kinds: tuple[str, ...] = FAULTS, overlap: int = 2,
                 hold: tuple[float, float] = (1.0, 3.0), gap: tuple[float, float] = (0.5, 4.0),
                 ) -> None:
        self.faults: list[Fault] = []
        t = 1.0
        present = set(links)
        absent = [(a, b) for a in range(n) for b in range(n) if a > b
                  and (a, b) not in present and (b, a) not in present]
        busy_until: list[float] = []
        routers_busy: dict[int, float] = {}          # a router has one fault at a time
        for _ in range(steps):
            kind = rng.choice(kinds)
            h = rng.uniform(*hold)
            free = [i for i in range(n) if routers_busy.get(i, 0.0) < t]
            if kind in ("kill", "hang") and not free:
                kind = "cut"
            if kind in ("kill", "hang"):
                target: tuple = (rng.choice(free),)
                routers_busy[target[0]] = t + h + 1.0
            elif kind in ("cut", "drop"):
                target = (rng.choice(sorted(present)),)
            elif kind == "add":
                if not absent:
                    kind, target = "cut", (rng.choice(sorted(present)),)
                else:
                    target = (rng.choice(absent),)
            else:                                   # partition: a random side
                side = set(rng.sample(range(n), rng.randint(1, max(1, n // 2))))
                target = tuple(sorted(link for link in present
                                      if (link[0] in side) != (link[1] in side)))
            self.faults.append(Fault(kind, t, h, target))
            busy_until = [b for b in busy_until if b > t] + [t + h]
            if len(busy_until) >= overlap:
                t = min(busy_until) + rng.uniform(*gap)
            else:
                t += rng.uniform(0.2, 1.0)          # the next one starts while this one lasts
        self.length = max((f.at + f.hold for f in self.faults), default=0.0)


@dataclass
class Window:
    start: float
    end: float
    fault: Fault


@dataclass
class Checker:
    """Deliveries of every subscriber, and what was published when."""

    n: int
    published: dict[str, dict[int, float]] = field(default_factory=lambda: defaultdict(dict))
    counts: list[Counter] = field(default_factory=list)
    last: list[dict[str, int]] = field(default_factory=list)
    out_of_order: list[int] = field(default_factory=list)
    up_since: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.counts = [Counter() for _ in range(self.n)]
        self.last = [{} for _ in range(self.n)]
        self.out_of_order = [0] * self.n
        self.down: list[list[tuple[float, float]]] = [[] for _ in range(self.n)]
        self.disorder: list[str] = []
        self.arrivals: list[list[tuple[str, int]]] = [[] for _ in range(self.n)]

    def delivered(self, at: int, body: bytes) -> None:
        attrs = decode_packet(body).attributes
        origin, seq = attrs.get("Chaos-Origin"), attrs.get("Chaos-Seq")
        if not isinstance(origin, str) or not isinstance(seq, int):
            return
        self.counts[at][(origin, seq)] += 1
        self.arrivals[at].append((origin, seq))
        if seq >= 0:
            last = self.last[at].get(origin, -1)
            if seq < last:
                self.out_of_order[at] += 1
                if len(self.disorder) < 10:
                    self.disorder.append(f"r{at} got {origin}#{seq} (published at "
                                         f"{self.published[origin].get(seq, -1):.2f}s) after "
                                         f"#{last}")
            else:
                self.last[at][origin] = seq

    def verdict(self, windows: list[Window], final: set[tuple[str, int]]) -> dict:
        duplicates = sum(c - 1 for counts in self.counts for c in counts.values() if c > 1)
        lost = excused = final_lost = 0
        examples: list[str] = []
        for origin, seqs in self.published.items():
            for seq, t in seqs.items():
                for s in range(self.n):
                    if self.counts[s][(origin, seq)]:
                        continue
                    if (origin, seq) in final:
                        final_lost += 1
                        examples.append(f"final {origin}#{seq} never reached r{s}")
                    elif any(w.start <= t <= w.end for w in windows) or \
                            any(a <= t <= b for a, b in self.down[s]):
                        excused += 1
                    else:
                        lost += 1
                        if len(examples) < 10:
                            examples.append(f"{origin}#{seq} (published at {t:.2f}s) never "
                                            f"reached r{s}")
        final_out_of_order = 0
        for s in range(self.n):
            last: dict[str, int] = {}
            for origin, seq in self.arrivals[s]:
                if (origin, seq) in final:
                    if seq < last.get(origin, -1):
                        final_out_of_order += 1
                    last[origin] = max(seq, last.get(origin, -1))
        dup_examples = [f"r{s} got {k[0]}#{k[1]} {c} times" for s in range(self.n)
                        for k, c in self.counts[s].items() if c > 1][:10]
        return {"published": sum(len(s) for s in self.published.values()),
                "deliveries": sum(sum(c.values()) for c in self.counts),
                "duplicates": duplicates, "out_of_order": sum(self.out_of_order),
                "lost": lost, "lost_in_windows": excused, "final_lost": final_lost,
                "final_out_of_order": final_out_of_order,
                "examples": dup_examples + self.disorder + examples[:10]}


class _Client:
    """One router's producer and subscriber, reconnected after a restart."""

    def __init__(self, fed: Federation, i: int, checker: Checker, clock) -> None:
        self.fed, self.i, self.checker, self.clock = fed, i, checker, clock
        self.sub = self.pub = None
        self.seq = 0

    async def connect(self) -> None:
        """RuntimeError (a failed run, not a traceback that ends the loop of
        runs) if the router does not answer."""
        port = self.fed.client_ports[self.i]
        try:
            self.sub = await open_peer(port, {"Send-Queue.Max-Length": 64 * 1024 * 1024})
            self.sub.on_deliver = lambda body: self.checker.delivered(self.i, body)
            await self.sub.request(SubAddRqst(2, "require(Chaos-Seq)"))
            self.pub = await open_peer(port)
        except (TimeoutError, OSError) as exc:
            raise RuntimeError(f"r{self.i} did not answer a client on port {port} "
                               f"({type(exc).__name__}; its log: {self.fed.logs[self.i]})"
                               ) from None

    def drop(self) -> None:
        for peer in (self.sub, self.pub):
            if peer is not None and peer.transport is not None:
                peer.transport.abort()
        self.sub = self.pub = None

    def publish(self, seq: int | None = None) -> None:
        """One numbered notification (``seq`` None: the next), recorded as
        published only if its router was up and connected."""
        pub = self.pub
        if pub is None or pub.transport is None or pub.transport.is_closing():
            return
        if seq is None:
            seq, self.seq = self.seq, self.seq + 1
        origin = f"r{self.i}"
        pub.transport.write(frame(NotifyEmit({"Chaos-Origin": origin, "Chaos-Seq": seq})))
        if seq >= 0:
            self.checker.published[origin][seq] = self.clock()


def flooding_routers(seed: int, n: int, links: list[tuple[int, int]], count: int) -> frozenset[int]:
    """Up to ``count`` routers to run with ``routing = "flood"`` (their own
    seeded choice: the graph and schedule stay the seed's), as the README
    asks for exactly once: no two linked, the others connected without them."""
    rng = random.Random(seed * 7919 + 1)
    chosen: set[int] = set()
    for i in rng.sample(range(n), n):
        if len(chosen) >= count:
            break
        if any(i in link and (set(link) - {i}) & chosen for link in links):
            continue
        rest = [j for j in range(n) if j not in chosen | {i}]
        seen, todo = {rest[0]}, [rest[0]]
        while todo:
            node = todo.pop()
            for a, b in links:
                for x, y in ((a, b), (b, a)):
                    if x == node and y in rest and y not in seen:
                        seen.add(y)
                        todo.append(y)
        if len(seen) == len(rest):
            chosen.add(i)
    return frozenset(chosen)


async def run(seed: int, n: int = 5, extra: int = 2, steps: int = 8, rate: float = 20.0,
              keepalive: float = 1.0, bound: float | None = None, flood: int = 0,
              kinds: tuple[str, ...] = FAULTS, final_batch: int = 20,
              tmp: Path | None = None, say=print) -> dict:
    """One seeded run; returns the totals (``Checker.verdict``) with the
    seed, the graph, the schedule and the windows' definition."""
    import tempfile

    rng = random.Random(seed)
    links = random_graph(rng, n, extra)
    settings = {"request_timeout": 2.0, "reconnect_max": 0.5}
    if bound is None:
        bound = float(settings["reconnect_max"]) + 2 * float(settings["request_timeout"]) + 1
    # some gaps outlast a window, so that loss outside the windows is checked
    schedule = Schedule(rng, n, links, steps, kinds,
                        gap=(0.5, bound + 2 * keepalive + 3.0))
    own_tmp = None
    if tmp is None:
        own_tmp = tmp = Path(tempfile.mkdtemp(prefix="chaos-"))   # kept if the run fails
    flooding = flooding_routers(seed, n, links, flood)
    fed = Federation(tmp, n, links, keepalive, settings, flooding)
    checker = Checker(n)
    t0 = time.monotonic()
    clock = lambda: time.monotonic() - t0  # noqa: E731
    clients = [_Client(fed, i, checker, clock) for i in range(n)]
    windows: list[Window] = []
    say(f"seed {seed}: {n} routers, links {sorted(links)}"
        + (f", routing = flood at {sorted(f'r{i}' for i in flooding)}" if flooding else ""))
    for f in schedule.faults:
        say(f"  {f}")
    say(f"  window of a fault: [start - {EARLY}s, end + detect + {bound:.1f}s], detect = "
        f"{2 * keepalive:.1f}s for a hang (2 x keepalive), 0 for a closed socket")
    try:
        await fed.start()
        for c in clients:
            await c.connect()
        await _converge(clients, checker, fed, limit=60)
        t0 = time.monotonic()
        stop = asyncio.Event()

        async def produce() -> None:
            while not stop.is_set():
                for c in clients:
                    c.publish()
                await asyncio.sleep(1 / rate)

        producer = asyncio.create_task(produce())
        pending = []
        for fault in schedule.faults:
            delay = fault.at - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            pending.append(asyncio.create_task(
                _apply(fault, fed, clients, checker, windows, clock, keepalive, bound)))
        await asyncio.gather(*pending)
        await asyncio.sleep(bound)
        stop.set()
        await producer
        # every fault undone: wait (a condition) until the federation carries
        # everything everywhere, then a final batch must arrive everywhere once
        converged = await _converge(clients, checker, fed, limit=120)
        final = set()
        for c in clients:
            for _ in range(final_batch):
                final.add((f"r{c.i}", c.seq))
                c.publish()
        await _wait_for(lambda: all(checker.counts[s][k] for s in range(n) for k in final),
                        limit=60)
        await asyncio.sleep(0.5)           # a late duplicate would show now
        exited = fed.exited()
        if exited:
            # a router that died under the faults is a failure of the run,
            # whatever the subscribers got
            raise RuntimeError("; ".join(exited))
        result = checker.verdict(windows, final)
        result["converged"] = converged
    except BaseException:
        own_tmp = None                    # kept: the routers' logs say what went wrong
        raise
    finally:
        for c in clients:
            c.drop()
        await fed.stop()
        if own_tmp is not None:
            shutil.rmtree(own_tmp, ignore_errors=True)
    result.update(seed=seed, n=n, links=sorted(links), faults=[str(f) for f in schedule.faults],
                  bound=bound, keepalive=keepalive, seconds=round(clock(), 1))
    return result


async def _apply(fault: Fault, fed: Federation, clients: list[_Client], checker: Checker,
                 windows: list[Window], clock, keepalive: float, bound: float) -> None:
    start = clock()
    detect = 0.0
    if fault.kind == "kill":
        (i,) = fault.target
        clients[i].drop()
        fed.kill(i)
        await asyncio.sleep(fault.hold)
        down_from = start
        await fed.restart(i)
        await clients[i].connect()
        for _ in range(RESTART_BURST):      # publishing as soon as it accepts clients
            clients[i].publish()
        checker.down[i].append((down_from - EARLY, clock() + bound))
    elif fault.kind == "hang":
        (i,) = fault.target
        detect = 2 * keepalive
        fed.hang(i)
        await asyncio.sleep(fault.hold)
        fed.resume(i)
    elif fault.kind in ("cut", "partition"):
        for a, b in fault.target:
            fed.cut(a, b)
        await asyncio.sleep(fault.hold)
        for a, b in fault.target:
            fed.heal(a, b)
    elif fault.kind in ("drop", "add"):
        (link,) = fault.target
        fed.relink(link, fault.kind == "add")
        await asyncio.sleep(fault.hold)
        fed.relink(link, fault.kind == "drop")
    windows.append(Window(start - EARLY, clock() + detect + bound, fault))


async def _wait_for(condition, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def _converge(clients: list[_Client], checker: Checker, fed: Federation,
                    limit: float) -> bool:
    """Probes (negative seqs) from every router until every subscriber has
    had one from every router published after the previous ones."""
    n = len(clients)
    probe = -1 - max((k[1] * -1 for c in checker.counts for k in c if k[1] < 0), default=0)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        for c in clients:
            c.publish(probe)
        wanted = [(s, (f"r{i}", probe)) for s in range(n) for i in range(n)]
        if await _wait_for(lambda w=wanted: all(checker.counts[s][k] for s, k in w), 0.5):
            return True
        probe -= 1
    return False
