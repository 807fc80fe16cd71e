"""Mobility under faults: a seeded chaos run with a checker per client.

Two federated ``elvind --mobility --state-dir`` routers (A and B); a
producer publishes numbered notifications at A, a round trip after each
batch (what it has had answered is *acknowledged*); mobile clients move out
and in, at A and at B (full move-ins with ``sync="ping"``), at random.
Meanwhile, at random moments, a router is killed with SIGKILL and started
again, sometimes with a stored notification's bytes changed or a byte of
its WAL flipped while it is down, and (``--full-disk``, as root) A's state
directory is on a small tmpfs that fills up. ``--crash-points P`` starts a
router, with chance P, armed to kill itself (``ELVIN_CRASH_AT``) at one
named point of a move picked at random (``elvin.daemon.crashpoints``): the windows
of milliseconds a kill from outside would almost never hit. ``--no-answer P``:
a move-out, with chance P, goes with a stale key of the proxy, which the
router hands to nobody, so it times out with the client attached: after a
restart, a resumed move-out that fails before its take-over, whose restored
buffer the client must then collect.

The checker, per client: nothing delivered twice; every acknowledged
notification delivered, or counted in what a move-in reported as dropped
(``report.dropped``), or told by an ``unknown-client`` error, or by a
reply that named federation peers which may not know yet what the client
subscribes to (``unannounced``: until its next move). Notifications
acknowledged while the client was attached to a router that had died (its
connection dead until its next move-out) are lost with the connection, as
for any client: counted apart ("unprotected"), never as a mobility loss;
so is what was published while the federation link to the client's router
was down, and what A had acknowledged in the last ``LINK_FLIGHT`` seconds
before a router died, for a client at B (on its way over the link: A's
acknowledgement says A has it, not B; "in flight", printed apart). A
notification was routed somewhere between its batch's first send and its
acknowledgement: a window that overlaps that span excuses it (the harness's
own loop can stamp an acknowledgement after a client's move-out returned,
for a notification routed before that move-out's reply). And never
stalled: a client whose move-outs are all refused ``in-use`` for longer
than ``--lock-out`` seconds (a buffer it lost track of, at a proxy that
keeps it until it expires) fails.
Exit status 1 when a check fails.

    .venv/bin/python bench/mobility_chaos.py --seed 1 --duration 30
    .venv/bin/python bench/mobility_chaos.py --seed 7 --duration 120 --full-disk
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import dataclasses
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import free_port, wait_listening

from elvin.client import connect
from elvin.errors import ElvinError
from elvin.mobility import MobileConnection, MobilityError
from elvin.mobility.proxy import canonical
from elvin.mobility.store import FILE_NAME

BODY = "x" * 600
#: seconds before a router dies in which what A acknowledged may still be on
#: its way over the federation link to B (counted apart: "in flight")
LINK_FLIGHT = 0.3
#: the named points of a move a router may be armed to kill itself at
CRASH_POINTS = ["mobility-move-out-received", "mobility-move-out-committed",
                "mobility-move-in-handed", "mobility-download-received",
                "mobility-release-received", "mobility-released", "mobility-take-over"]
#: after a kill at a point, the points of what the client does next: a
#: kill at a release leaves a restored buffer, taken over at the next move-out
FOLLOW = {"mobility-release-received": ["mobility-take-over", "mobility-move-out-committed"],
          "mobility-released": ["mobility-take-over", "mobility-move-out-committed"],
          "mobility-download-received": ["mobility-move-in-handed", "mobility-download-received"]}
INF = float("inf")


class Router:
    """One elvind with a state directory, killed and started again at will."""

    def __init__(self, name: str, base: Path, state: Path, peer: tuple[str, int] | None,
                 fed_port: int) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"elvin://127.0.0.1:{self.port}"
        self.state = state
        self.log = base / f"elvind-{name}.log"
        lines = ["[federation]", f'router_domain = "{name}"',
                 f'listen = "ewaf://127.0.0.1:{fed_port}"', "debounce = 0.01",
                 "reconnect_min = 0.05", "reconnect_max = 0.3"]
        if peer is None:
            lines += ["[[federation.accept]]", 'router = "B"']
        else:
            lines += ["[[federation.connect]]", f'router = "{peer[0]}"',
                      f'url = "ewaf://127.0.0.1:{peer[1]}"']
        config = base / f"{name}.toml"
        config.write_text("\n".join(lines) + "\n")
        self.args = [sys.executable, "-m", "elvin.router", "--no-discovery", "--listen",
                     self.url, "--mobility", "--state-dir", str(state), "--config",
                     str(config), "--log-level", "info"]
        self.proc: subprocess.Popen | None = None
        self.kills = 0
        self.refused = 0
        #: starts refused with a damaged state file, then done with --state-reset
        self.reset = 0
        #: the crash point this run is armed with (None: none)
        self.armed: str | None = None
        self.lock = asyncio.Lock()

    def start(self, crash_at: str | None = None) -> None:
        """Start it; when it refuses its state file as damaged (one line
        naming the file and ``--state-reset``, as promised), do what that
        line says once, as a user would: its buffers are gone, and each
        client is then told so (``unknown-client``) at its move-in."""
        try:
            try:
                self._start(crash_at, [])
            except SystemExit:
                self.refused += 1
                if "--state-reset" not in self.log.read_text()[-2000:]:
                    raise
                self.reset += 1
                try:
                    self._start(crash_at, ["--state-reset"])
                except SystemExit:
                    # the file moved aside fills the small disk, and the new
                    # one cannot be made ("the disk is full", said at once):
                    # an admin removes the old one and starts it again
                    if "the disk is full" not in self.log.read_text()[-2000:]:
                        raise
                    for aside in self.state.glob(f"{FILE_NAME}.reset-*"):
                        aside.unlink()
                    self._start(crash_at, [])
        except SystemExit as exc:
            # an ordinary failure of the harness, not one that unwinds the
            # event loop from inside a task (a run hung cancelling the rest)
            raise RuntimeError(f"{self.name} did not start: {exc} (see {self.log})") from None

    def _start(self, crash_at: str | None, extra: list[str]) -> None:
        env = dict(os.environ)
        env.pop("ELVIN_CRASH_AT", None)
        if crash_at:
            env["ELVIN_CRASH_AT"] = crash_at
        self.armed = crash_at
        with open(self.log, "a") as log:
            log.write(f"--- start {crash_at or ''} {' '.join(extra)}\n")
            log.flush()
            self.proc = subprocess.Popen([*self.args, *extra], stdout=subprocess.DEVNULL,
                                         stderr=log, stdin=subprocess.DEVNULL, env=env)
        try:
            wait_listening(self.proc, self.port, time.monotonic() + 30)
        except SystemExit:
            if crash_at and self.proc.poll() == -signal.SIGKILL:
                # it killed itself at its crash point as soon as it listened
                # (a download retried at once), between two looks: started,
                # and the watcher restarts it (a 30-minute run ended here)
                return
            raise

    @property
    def up(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        self.armed = None          # killed from outside, not at its point
        if self.up:
            self.proc.send_signal(signal.SIGKILL)   # type: ignore[union-attr]
            self.proc.wait()                        # type: ignore[union-attr]
            self.kills += 1

    def stop(self) -> None:
        self.armed = None
        if self.up:
            self.proc.terminate()                   # type: ignore[union-attr]
            try:
                self.proc.wait(10)                  # type: ignore[union-attr]
            except subprocess.TimeoutExpired:
                self.proc.kill()                    # type: ignore[union-attr]
                self.proc.wait()                    # type: ignore[union-attr]


def damage_entry(state: Path, rng: random.Random) -> bool:
    """Change one byte inside a stored notification (the router is down)."""
    path = state / FILE_NAME
    if not path.exists():
        return False
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT rowid, data FROM entries").fetchall()
        if not rows:
            return False
        rowid, data = rng.choice(rows)
        if len(data) < 8:
            return False
        changed = bytearray(data)
        changed[rng.randrange(4, len(changed))] ^= 1 << rng.randrange(8)
        with db:
            db.execute("UPDATE entries SET data = ? WHERE rowid = ?", (bytes(changed), rowid))
        return True
    except sqlite3.Error:       # a full disk: no damage this time
        return False
    finally:
        db.close()


def tear_wal(state: Path, rng: random.Random) -> bool:
    """Flip a byte in the last quarter of the WAL, as a torn write leaves it."""
    wal = state / (FILE_NAME + "-wal")
    if not wal.exists() or wal.stat().st_size < 4096:
        return False
    data = bytearray(wal.read_bytes())
    data[rng.randrange(len(data) * 3 // 4, len(data))] ^= 0xFF
    wal.write_bytes(bytes(data))
    return True


@dataclass
class Checker:
    """What one client got, was told, and could not be promised."""

    name: str
    seen: Counter = field(default_factory=Counter)
    reported: int = 0
    told_unknown: int = 0
    no_answer: int = 0          # move-outs sent with a stale key of the proxy
    owed_after_restart: int = 0  # ... resumed (after a restart): a restored buffer owed
    duplicates_suppressed: int = 0
    #: [start, end) (monotonic) when it was attached to a dead router
    unprotected: list[list[float]] = field(default_factory=list)
    moves: int = 0
    errors: Counter = field(default_factory=Counter)
    #: [start, end] of each time it was told unknown-client: from its last
    #: move-out to that answer, what was published is lost, and it knows
    told: list[tuple[float, float]] = field(default_factory=list)
    last_move_out: float = 0.0
    #: when a reply last named federation peers that may not know what the
    #: client subscribes to (``unannounced``): what is published from then
    #: to its next move may be missing, and it was told (None: not now)
    unannounced_since: float | None = None
    unannounced_replies: int = 0
    #: since when every move-out was refused ``in-use`` (None: not now), and
    #: the longest such streak: a client locked out of a proxy is stalled
    refused_since: float | None = None
    longest_refused: float = 0.0

    def end_refusals(self) -> None:
        if self.refused_since is not None:
            self.longest_refused = max(self.longest_refused,
                                       time.monotonic() - self.refused_since)
            self.refused_since = None

    def __call__(self, n) -> None:
        if n.get("Producer") == "p":
            self.seen[n["Seq"]] += 1

    def unprotected_open(self) -> bool:
        return any(w[1] == INF for w in self.unprotected)



class Overlaps:
    """Windows ``(start, end, ...)``; ``meets(a, b)``: does any of them meet
    the interval ``[a, b]`` (start <= b and a <= end)? Sorted by start with a
    running maximum of the ends, each question is a bisection: the check of a
    40-minute run (a million notifications, thousands of windows per client)
    took minutes per client walking every window for each."""

    def __init__(self, windows: list) -> None:
        ordered = sorted((w[0], w[1]) for w in windows)
        self.starts = [start for start, _ in ordered]
        self.reach: list[float] = []
        furthest = float("-inf")
        for _, end in ordered:
            furthest = max(furthest, end)
            self.reach.append(furthest)

    def meets(self, a: float, b: float) -> bool:
        i = bisect.bisect_right(self.starts, b)     # the windows starting by b
        return i > 0 and self.reach[i - 1] >= a

class Chaos:
    def __init__(self, args, base: Path) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.base = base
        fed_a, fed_b = free_port(), free_port()
        state_a = base / "state-A"
        self.mount: Path | None = None
        self.watchers: list[asyncio.Future] = []
        self.crash_points_hit = 0
        self.traced: list[str] = []
        if args.full_disk:
            self.mount = base / "small"
            self.mount.mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.disk_kib}k", "tmpfs",
                            str(self.mount)], check=True)
            state_a = self.mount / "state-A"
        self.a = Router("A", base, state_a, None, fed_a)
        self.b = Router("B", base, base / "state-B", ("A", fed_a), fed_b)
        self.routers = [self.a, self.b]
        self.acked: list[tuple[int, float]] = []       # (seq, when acknowledged)
        #: seq -> when its batch began to be sent: a notification was routed
        #: somewhere in [sent, acknowledged] (the harness's own loop may
        #: stamp the acknowledgement late), so a window it overlaps excuses it
        self.sent_at: dict[int, float] = {}
        self.published = 0
        self.clients: list[tuple[MobileConnection, Checker]] = []
        self.stop = asyncio.Event()
        #: set once every router is up for the end (no crash point armed)
        self.routers_back = asyncio.Event()
        self.faults = Counter()
        self.link_down = False

    def router_of(self, url: str | None) -> Router | None:
        for router in self.routers:
            if url is not None and f":{router.port}" in url:
                return router
        return None

    # -- the producer ---------------------------------------------------------------------
    async def produce(self) -> None:
        seq = 0
        while not self.stop.is_set():
            try:
                pub = await connect(self.a.url)
            except (ElvinError, OSError):
                await asyncio.sleep(0.05)
                continue
            try:
                while not self.stop.is_set():
                    batch = range(seq, seq + self.args.batch)
                    sent = time.monotonic()
                    for s in batch:
                        await pub.send({"Producer": "p", "Seq": s, "Body": BODY})
                    seq = batch.stop
                    self.published = seq
                    await asyncio.wait_for(pub.set_keys(), 10)
                    now = time.monotonic()
                    self.acked.extend((s, now) for s in batch)
                    self.sent_at.update((s, sent) for s in batch)
                    await asyncio.sleep(self.rng.uniform(0.0, 0.05))
            except (ElvinError, OSError, TimeoutError):
                pass            # A died: the unacknowledged batch is a "maybe"
            finally:
                try:
                    await pub.close()
                except (ElvinError, OSError):
                    pass

    # -- the faults -----------------------------------------------------------------------
    async def faults_loop(self) -> None:
        while not self.stop.is_set():
            try:
                await asyncio.wait_for(self.stop.wait(),
                                       self.rng.uniform(0.5, 1.5) * self.args.fault_every)
                return
            except TimeoutError:
                pass
            router = self.rng.choice(self.routers)
            async with router.lock:
                if not router.up:
                    continue            # it killed itself at a crash point: being restarted
                router.kill()
                self.died(router, "kill " + router.name)
                await self.restart(router)
            await self.wait_link()      # not holding the lock: it may die again meanwhile

    def since(self) -> float:
        """Seconds since the first acknowledgement (the debug lines' clock)."""
        return round(time.monotonic() - self.acked[0][1], 3) if self.acked else 0.0

    def died(self, router: Router, fault: str) -> None:
        """``router`` is dead (killed, or at its crash point): whose
        notifications go where nobody can be told, from now on."""
        self.trace("--", self.since(), fault)
        self.link_down = True
        self.faults[fault] += 1
        now = time.monotonic()
        for mc, checker in self.clients:
            conn = mc.connection
            if mc.state == "connected" and conn is not None and \
                    self.router_of(conn.url) is router:
                # attached to a dead router: until its next move-out
                checker.unprotected.append([now, INF, "dead"])
            if self.location(mc) is not self.a:
                # fed from A through a link that is down, and what A had
                # acknowledged but not yet sent over it (in flight)
                checker.unprotected.append([now, INF, "link"])
                checker.unprotected.append([now - LINK_FLIGHT, now, "flight"])

    async def restart(self, router: Router, last: str | None = None) -> None:
        """Damage its files maybe, start it again (armed at a crash point,
        maybe); the caller then waits for the federation link."""
        roll = self.rng.random()
        if roll < self.args.damage:
            if damage_entry(router.state, self.rng):
                self.faults["damaged entry"] += 1
        elif roll < 2 * self.args.damage:
            if tear_wal(router.state, self.rng):
                self.faults["torn WAL"] += 1
        await asyncio.sleep(self.rng.uniform(0.05, 0.5))
        point = None
        follow = FOLLOW.get(last or "")
        if not self.stop.is_set() and self.rng.random() < self.args.crash_points:
            # after a kill at one point, the points the next move meets
            # then are likelier: they are what a second crash would hit
            point = self.rng.choice(follow if follow and self.rng.random() < 0.5
                                    else CRASH_POINTS)
        await asyncio.to_thread(router.start, point)
        self.trace("--", self.since(), "started", router.name, point or "")
        if point is not None:
            self.watch(router)

    def watch(self, router: Router) -> None:
        """A router armed at a crash point: when it kills itself there, note
        it at once (the same bookkeeping as a kill) and start it again."""
        proc = router.proc
        assert proc is not None

        async def watching() -> None:
            await asyncio.to_thread(proc.wait)
            if router.proc is not proc or router.armed is None \
                    or proc.returncode != -signal.SIGKILL:
                return              # killed from outside (counted there), or stopped
            point = router.armed
            self.died(router, f"{point} {router.name}")    # at once
            router.kills += 1
            self.crash_points_hit += 1
            async with router.lock:
                if router.proc is proc:
                    await self.restart(router, point)
            await self.wait_link()

        self.watchers.append(asyncio.ensure_future(watching()))

    def location(self, mc: MobileConnection) -> Router | None:
        """Where the client's notifications go now: the router it is
        attached to, or whose proxy buffers for it (None: moving)."""
        if mc.state == "connected" and mc.connection is not None:
            return self.router_of(mc.connection.url)
        if mc.state == "moved-out" and mc.ticket is not None:
            return self.router_of(mc.ticket.router_url)
        return None

    async def wait_link(self) -> None:
        """Until a probe published at A reaches a subscriber at B: the
        federation carries A's notifications to B again."""
        arrived = asyncio.Event()
        deadline = time.monotonic() + 60
        probe = sub = pub = None
        try:
            while time.monotonic() < deadline and not arrived.is_set():
                try:
                    if sub is None or not sub.is_open:
                        sub = await connect(self.b.url)
                        await sub.subscribe('Producer == "probe"',
                                            listener=lambda _n: arrived.set())
                    if pub is None or not pub.is_open:
                        pub = await connect(self.a.url)
                    probe = (probe or 0) + 1
                    await pub.send({"Producer": "probe", "Seq": probe})
                    await asyncio.wait_for(arrived.wait(), 0.2)
                except (ElvinError, OSError, TimeoutError):
                    await asyncio.sleep(0.05)
        finally:
            for conn in (sub, pub):
                if conn is not None:
                    try:
                        await conn.close()
                    except (ElvinError, OSError):
                        pass
        now = time.monotonic()
        self.link_down = False
        for _mc, checker in self.clients:
            for window in checker.unprotected:
                if window[2] == "link" and window[1] == INF:
                    window[1] = now

    # -- the clients ----------------------------------------------------------------------
    async def client(self, index: int) -> None:
        checker = Checker(f"c{index}")
        mc = None
        while mc is None:
            try:
                mc = await MobileConnection.open(self.rng.choice(self.routers).url,
                                                 dedup=("Producer", "Seq"), timeout=5,
                                                 download_timeout=10)
            except (ElvinError, OSError):
                await asyncio.sleep(0.1)
        mc.add_listener(checker)
        await mc.subscribe('Producer == "p"', buffer_size=0)
        self.clients.append((mc, checker))
        while not self.stop.is_set():
            await asyncio.sleep(self.rng.uniform(0.05, 0.4))
            await self.step(mc, checker)
        await self.settle(mc, checker)

    def told_unannounced(self, checker: Checker, peers: tuple[str, ...]) -> None:
        """A move's reply named peers that may not know what the client
        subscribes to: from then to its next move, told."""
        now = time.monotonic()
        if checker.unannounced_since is not None:
            checker.told.append((checker.unannounced_since, now))
            checker.unannounced_since = None
        if peers:
            checker.unannounced_since = now
            checker.unannounced_replies += 1

    async def step(self, mc: MobileConnection, checker: Checker) -> None:
        try:
            if mc.state == "connected" and mc.ticket is not None:
                report = await mc.collect()
                self.note(checker, report)
                self.told_unannounced(checker, report.unannounced)
            elif mc.state == "connected" and self.rng.random() < self.args.no_answer:
                await self.unanswered_move_out(mc, checker)
            elif mc.state == "connected":
                checker.last_move_out = time.monotonic()
                ticket = await mc.move_out()
                checker.end_refusals()
                self.close_unprotected(checker)
                self.told_unannounced(checker, ticket.unannounced)
                where = self.location(mc)
                self.trace(checker.name, self.since(), "moved out at",
                           where.name if where else "?")
            elif mc.state == "moved-out":
                target = self.rng.choice(self.routers)
                if self.link_down and target is self.b:
                    checker.unprotected.append([time.monotonic(), INF, "link"])
                from_router = self.router_of(mc.ticket.router_url if mc.ticket else None)
                sync = "none" if target is from_router else "ping"
                report = await mc.move_in(target.url, sync=sync, ping_timeout=2)
                self.note(checker, report)
                self.told_unannounced(checker, report.unannounced)
                self.trace(checker.name, self.since(), "moved in at", target.name,
                           report.caught_up, report.dropped)
            checker.moves += 1
        except MobilityError as exc:
            checker.errors[exc.code] += 1
            self.trace(checker.name, self.since(), mc.state, exc.code, exc)
            if exc.code == "unconfirmed":
                self.close_unprotected(checker)
            if exc.code == "in-use" and checker.refused_since is None:
                checker.refused_since = time.monotonic()
            self.told_unannounced(checker, ())
            if exc.code == "unknown-client":
                checker.told_unknown += 1
                checker.told.append((checker.last_move_out, time.monotonic()))
        except (ElvinError, OSError) as exc:
            checker.errors[type(exc).__name__] += 1

    async def unanswered_move_out(self, mc: MobileConnection, checker: Checker) -> None:
        """A move-out the proxy never reads (a stale key of it): it times
        out, the client still attached (``--no-answer``)."""
        url = canonical(mc.proxy or (mc.connection.url if mc.connection else ""))
        real, timeout = mc.proxy_keys.get(url), mc.timeout
        stale = os.urandom(20)
        mc.proxy_keys[url], mc.timeout = stale, 1.0
        checker.no_answer += 1
        try:
            await mc.move_out()
        finally:
            if real is None:
                mc.proxy_keys.pop(url, None)
            else:
                mc.proxy_keys[url] = real
            mc.timeout = timeout
            # the fault is a proxy that does not answer, not a wrong pin:
            # a ticket the router's death left (unconfirmed) keeps no stale key
            if mc.ticket is not None and mc.ticket.proxy_key == stale:
                mc.ticket = dataclasses.replace(mc.ticket, proxy_key=real or b"")
            if mc.ticket is not None and mc.ticket.since_restart:
                checker.owed_after_restart += 1     # a resumed one: collected next

    def note(self, checker: Checker, report) -> None:
        checker.reported += report.dropped
        checker.duplicates_suppressed += report.duplicates

    def close_unprotected(self, checker: Checker) -> None:
        now = time.monotonic()
        for window in checker.unprotected:
            if window[2] == "dead" and window[1] == INF:
                window[1] = now

    async def settle(self, mc: MobileConnection, checker: Checker) -> None:
        """End connected at A, with every buffer collected: once every
        router is back for good (a crash point may have killed one just
        before the end), trying for up to a minute."""
        await self.routers_back.wait()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if mc.state == "connected" and mc.ticket is None and mc.connection is not None \
                    and mc.connection.is_open and not checker.unprotected_open():
                return
            if mc.state == "connected" and mc.ticket is None:
                await self.step(mc, checker)          # a move-out
            await self.step(mc, checker)              # move in / collect
            await asyncio.sleep(0.1)
        self.trace(checker.name, self.since(), "NOT SETTLED", mc.state, mc.ticket)

    # -- the run --------------------------------------------------------------------------
    async def run(self) -> int:
        for router in self.routers:
            router.start()
        tasks = [asyncio.ensure_future(self.client(i)) for i in range(self.args.clients)]
        await asyncio.sleep(0.5)
        producer = asyncio.ensure_future(self.produce())
        faults = asyncio.ensure_future(self.faults_loop())
        await asyncio.sleep(self.args.duration)
        self.stop.set()
        await faults
        for router in self.routers:        # the end runs without crash points
            async with router.lock:
                if router.up and router.armed is not None:
                    router.kill()
                    self.died(router, "kill " + router.name)
                if not router.up:
                    await asyncio.to_thread(router.start)
        await self.wait_link()
        self.routers_back.set()
        await producer
        await asyncio.gather(*tasks)
        # a last batch through A, live to every client: the end of every stream
        await self.final_batch()
        return self.check()

    async def final_batch(self) -> None:
        pub = await connect(self.a.url)
        last = self.published + 1000
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                await pub.send({"Producer": "p", "Seq": last})
                await pub.set_keys()
                if all(checker.seen[last] for _, checker in self.clients):
                    break
                await asyncio.sleep(0.2)
                last += 1
        finally:
            await pub.close()
        self.final_seq = last

    def check(self) -> int:
        failed = 0
        acked = dict(self.acked)
        total_lost = total_reported = total_unprotected = total_flight = 0
        print(f"seed {self.args.seed}: {self.published} published, {len(acked)} acknowledged; "
              f"faults: {dict(self.faults)}; kills A {self.a.kills}, B {self.b.kills} "
              f"({self.crash_points_hit} at crash points); state files refused as damaged "
              f"and reset: A {self.a.reset}, B {self.b.reset}")
        for _mc, checker in self.clients:
            twice = sorted(s for s, n in checker.seen.items() if n > 1 and s < self.published)
            sent_at = self.sent_at
            dead = Overlaps([w for w in checker.unprotected if w[2] != "flight"])
            on_link = Overlaps([w for w in checker.unprotected if w[2] == "flight"])
            told_at = Overlaps([(a, b) for a, b in checker.told])
            unprotected = {s for s, t in acked.items()
                           if dead.meets(sent_at[s], t) or on_link.meets(sent_at[s], t)}
            told = {s for s, t in acked.items() if told_at.meets(t, t)}
            missing = {s for s in acked if not checker.seen[s]}
            in_flight = len({s for s in missing - told
                             if on_link.meets(sent_at[s], acked[s])
                             and not dead.meets(sent_at[s], acked[s])})
            total_flight += in_flight
            lost = len(missing - unprotected - told)
            total_lost += lost
            total_reported += checker.reported
            total_unprotected += len(missing & unprotected)
            t0 = self.acked[0][1] if self.acked else 0
            self.trace(checker.name, [(round(w[0] - t0, 2), round(w[1] - t0, 2), w[2])
                                      for w in checker.unprotected])
            self.trace(checker.name, "missing", [(s, round(acked[s] - t0, 2))
                                                 for s in sorted(missing)[::100]])
            self.trace(checker.name, "lost unexcused", [
                (s, round(acked[s] - t0, 3)) for s in sorted(missing - unprotected - told)[:60]])
            checker.end_refusals()
            locked_out = checker.longest_refused > self.args.lock_out
            ok = not twice and lost <= checker.reported and not locked_out
            failed += not ok
            print(f"  {checker.name}: moves {checker.moves}, got {len(checker.seen)}, "
                  f"lost {lost}, reported {checker.reported}, unknown-client "
                  f"{checker.told_unknown} ({len(missing & told - unprotected)} lost, told), "
                  f"lost with a dead connection "
                  f"{len(missing & unprotected)} (of which in flight on the link {in_flight}), "
                  f"twice {len(twice)}, replies naming unannounced peers "
                  f"{checker.unannounced_replies}, duplicates suppressed "
                  f"{checker.duplicates_suppressed}, unanswered move-outs "
                  f"{checker.no_answer} ({checker.owed_after_restart} resumed), "
                  f"errors {dict(checker.errors)}, longest refused in-use "
                  f"{checker.longest_refused:.1f} s{' (LOCKED OUT)' if locked_out else ''}"
                  f"{'' if ok else '  <-- FAIL'}")
        print(f"total: lost {total_lost}, reported {total_reported}, lost with a dead "
              f"connection or link {total_unprotected} (in flight on the link {total_flight}): "
              f"{'OK' if not failed else 'FAILED'}")
        if failed or self.args.keep:    # what happened when, for the one who looks
            (self.base / "trace.txt").write_text("\n".join(self.traced) + "\n")
            print(f"trace: {self.base / 'trace.txt'}")
        return 1 if failed else 0

    def trace(self, *parts: object) -> None:
        """A line of what happened (the seconds since the first
        acknowledgement first); kept, printed with ``CHAOS_DEBUG``, written
        to the run's directory when a check fails."""
        line = " ".join(str(p) for p in parts)
        self.traced.append(line)
        if os.environ.get("CHAOS_DEBUG"):
            print(line, file=sys.stderr)

    async def close(self) -> None:
        for watcher in self.watchers:
            watcher.cancel()
        for mc, _ in self.clients:
            try:
                await mc.close()
            except (ElvinError, OSError):
                pass
        for router in self.routers:
            router.stop()
        if self.mount is not None:
            subprocess.run(["umount", "-l", str(self.mount)], capture_output=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of chaos")
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--batch", type=int, default=20, help="notifications per round trip")
    parser.add_argument("--fault-every", type=float, default=2.0,
                        help="mean seconds between two router kills")
    parser.add_argument("--damage", type=float, default=0.2,
                        help="chance that a kill also changes a stored notification (and "
                             "the same again for a torn WAL)")
    parser.add_argument("--crash-points", type=float, default=0.0,
                        help="chance that a restart arms the router to kill itself at a "
                             "named point of a move, picked at random")
    parser.add_argument("--no-answer", type=float, default=0.1,
                        help="chance that a move-out goes with a stale key of the proxy "
                             "and times out, the client still attached")
    parser.add_argument("--full-disk", action="store_true",
                        help="A's state directory on a small tmpfs (root: mount)")
    parser.add_argument("--disk-kib", type=int, default=768)
    parser.add_argument("--lock-out", type=float, default=10.0, metavar="S",
                        help="fail a client whose move-outs are all refused in-use for "
                             "longer than S seconds (locked out of a proxy)")
    parser.add_argument("--keep", metavar="DIR",
                        help="run in DIR and keep the logs and the trace")
    return parser


async def main_async(args) -> int:
    base = Path(args.keep or tempfile.mkdtemp(prefix="mobility-chaos-"))
    base.mkdir(parents=True, exist_ok=True)
    chaos = Chaos(args, base)
    try:
        return await chaos.run()
    except (Exception, SystemExit):  # noqa: BLE001 -- the harness failed: printed, exit 1
        # now, not when asyncio.run has cancelled the clients' tasks (a
        # client stuck in a call can hold that up for as long as it waits)
        traceback.print_exc()
        return 1
    finally:
        await chaos.close()
        print(f"logs: {base}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.full_disk and os.geteuid() != 0:
        print("mobility_chaos: --full-disk mounts a tmpfs: run as root", file=sys.stderr)
        return 2
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
