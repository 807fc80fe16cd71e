"""The filewatcher daemon: quench in, watches out, notifications back.

Data flow (all on one asyncio loop; watchdog's threads only hand events over)::

    router --quench events--> reconcile: pathset.analyse per subscription
                                         -> watches.plan -> WatchManager.apply
    kernel --watchdog--> RawEvent batches -> Coalescer (debounce)
                         -> route to interests, lstat, classify (attrib?)
                         -> outbox -> Connection.send (auto-quench drops the unwanted)

Reconnection: the client library restores the quench on a new session; it
reports every old subscription as removed and the restored ones as added.
Watches are not torn down meanwhile: while reconnecting nothing is
re-planned, and for ``reconnect_grace`` seconds afterwards (or until every
watched interest is wanted again, whichever is first) the watches from
before the outage are kept, so consumers that reconnect more slowly do not
lose theirs. At the end of the grace a snapshot re-scan reports what changed
while notifications could not be delivered. An inotify overflow triggers
the same re-scan.

A router without quench (subset C is optional; Avis lacks it) answers the
quench with ``QuenchNotSupported``: nothing can say what is wanted, so the
daemon falls back to the roots, as ``unbounded = "roots"`` does (one pseudo
subscription, ``NO_QUENCH``, that watches every root), announces every change
under them (auto-quench sends everything too), says so once in the log and
in the status, and asks for quench again after each reconnection, returning
to quench-driven watching when the router has it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import stat as stat_module
import time
from collections.abc import Iterable
from typing import Any

from elvin_apps.filewatcher import __version__
from elvin_apps.filewatcher.attributes import ALL_NAMES, ATTRIB, describe, notification
from elvin_apps.filewatcher.coalesce import Coalescer
from elvin_apps.filewatcher.config import Config
from elvin_apps.filewatcher.pathset import FILE, Interest, TermPaths, analyse
from elvin_apps.filewatcher.snapshots import Snapshots
from elvin_apps.filewatcher.status import NO_QUENCH_NOTE, remove_status, write_status
from elvin_apps.filewatcher.watches import (
    CREATED,
    DELETED,
    MODIFIED,
    MOVED,
    Plan,
    RawEvent,
    WatchManager,
    plan,
)

from elvin.client import ConnectionClosedError, OptionalQuench, connect
from elvin.errors import ElvinError
from elvin.subscription import parse, unparse
from elvin.subscription.ast import Node
from elvin.tasks import stop_task

__all__ = ["FileWatcher"]

log = logging.getLogger("elvin_apps.filewatcher")
STOP_TIMEOUT = 10.0          # a task that outlives its cancellation this long is left

BEFORE_RECONNECT = "before-reconnect"
OUTBOX_SIZE = 10_000
CATCH_UP_LIMIT = 10_000
STATUS_LIST_LIMIT = 50
#: the pseudo subscription that stands for "everything" at a router without quench
NO_QUENCH = "no-quench"


def _rebase(interest: Interest, real: str) -> str:
    """``real`` as the subscriber of ``interest`` spells it."""
    if interest.kind == FILE:
        base_real, base_shown = os.path.dirname(interest.path), os.path.dirname(interest.shown)
    else:
        base_real, base_shown = interest.path, interest.shown
    if base_real == base_shown:
        return real
    if real == base_real or real.startswith(base_real.rstrip("/") + "/"):
        return base_shown + real[len(base_real):]
    return real


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def list_existing(interests: Iterable[Interest], limit: int = CATCH_UP_LIMIT) -> list[RawEvent]:
    """``created`` events for what already exists of interests whose
    directory has just appeared (it was created after we started waiting for
    it, so everything in it is new)."""
    out: list[RawEvent] = []
    for interest in interests:
        if interest.kind == FILE:
            st = _lstat(interest.path)
            if st is not None:
                out.append(RawEvent(CREATED, interest.path, stat_module.S_ISDIR(st.st_mode)))
            continue
        for directory, dirs, files in os.walk(interest.path):
            for name in dirs:
                path = os.path.join(directory, name)
                if interest.covers(path):
                    out.append(RawEvent(CREATED, path, True))
            for name in files:
                path = os.path.join(directory, name)
                if interest.covers(path):
                    out.append(RawEvent(CREATED, path, False))
            if len(out) >= limit:
                log.warning("catch-up scan stopped after %d entries", limit)
                return out
    return out


class FileWatcher:
    """One daemon instance. ``await start()``, then ``await wait_stopped()``
    (or use ``async with``); ``request_stop()`` from a signal handler."""

    def __init__(self, config: Config, url: str, *, reconcile_delay: float = 0.02,
                 status_interval: float = 5.0, inotify_factory: Any = None,
                 connect_options: dict[str, Any] | None = None) -> None:
        self.config = config
        self.url = url
        self.reconcile_delay = reconcile_delay
        self.status_interval = status_interval
        self._inotify_factory = inotify_factory
        self._connect_options = dict(connect_options or {})
        self.conn: Any = None
        self._quench: OptionalQuench | None = None
        #: the router refused quench: watching the roots (see the module doc)
        self.manager: WatchManager | None = None
        self.snapshots = Snapshots()
        self.coalescer = Coalescer(config.debounce, config.max_delay, existed=self._existed)
        self.counters = {"events": 0, "sent": 0, "quenched": 0, "failed": 0,
                         "rescans": 0, "overflows": 0}
        self.terms: dict[Any, TermPaths] = {}
        self.term_asts: dict[Any, Node] = {}
        self.interest_terms: dict[Interest, set[Any]] = {}
        self.plan = Plan()
        self.exit_code = 0
        self.started = time.time()
        self._analysis_cache: dict[Node, TermPaths] = {}
        self._warned_terms: set[Any] = set()
        self._pending_interests: set[Interest] = set()
        self._grace_interests: dict[Interest, set[Any]] = {}
        self._grace_handle: asyncio.TimerHandle | None = None
        self._in_outage = False
        self._missed = False
        self._outbox: asyncio.Queue = asyncio.Queue(OUTBOX_SIZE)
        self._tick_handle: asyncio.TimerHandle | None = None
        self._status_handle: asyncio.TimerHandle | None = None
        self._reconcile_wanted = asyncio.Event()
        self._rescan_wanted = asyncio.Event()
        self._rescan_reasons: list[str] = []
        self._idle = asyncio.Event()
        self._stopped = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._last_counters: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------------------
    # lifecycle
    async def start(self) -> FileWatcher:
        """Connect, quench, plan the first watches. Raises ``ConnectError``
        (an ``OSError``) when the router cannot be reached."""
        self._loop = asyncio.get_running_loop()
        options = {"reconnect": True, "auto_quench": True, "reconnect_max_delay": 5.0,
                   "keepalive": 30.0, **self._connect_options}
        self.conn = await connect(self.url, **options)
        try:
            self.manager = WatchManager(self._on_raw, loop=self._loop,
                                        poll_interval=self.config.poll_interval,
                                        max_watches=self.config.max_watches,
                                        inotify_factory=self._inotify_factory,
                                        on_overflow=self._on_overflow)
            self.manager.start()
            self.conn.add_connection_lost_listener(self._on_lost)
            self.conn.add_reconnect_listener(self._on_reconnected)
            self.conn.add_close_listener(self._on_closed)
            self._quench = OptionalQuench(self.conn, ALL_NAMES, listener=self._on_quench_event,
                                          on_change=self._quench_changed,
                                          fallback=NO_QUENCH_NOTE, logger=log,
                                          resumed="watching only what subscriptions ask for")
            await self._quench.ask()
            await self._reconcile()
            for coro in (self._reconcile_loop(), self._rescan_loop(), self._send_loop(),
                         self._status_loop()):
                self._tasks.append(self._loop.create_task(coro))
            self._write_status()
        except BaseException:
            await self.close()
            raise
        log.info("filewatcher %s connected to %s; roots: %s; unbounded subscriptions: %s",
                 __version__, self.conn.url, ", ".join(self.config.roots),
                 self.config.unbounded)
        return self

    def request_stop(self, exit_code: int = 0) -> None:
        if not self._stopped.is_set():
            self.exit_code = exit_code
            self._stopped.set()

    async def wait_stopped(self) -> int:
        await self._stopped.wait()
        return self.exit_code

    async def close(self) -> None:
        """Stop watching, send what is pending (briefly), disconnect, remove
        the status file."""
        self._stopped.set()
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        if self._grace_handle is not None:
            self._grace_handle.cancel()
        if self._status_handle is not None:
            self._status_handle.cancel()
        # report what is pending (routing still needs the watch set), briefly
        for event in self.coalescer.flush_all():
            self._emit(event)
        if self._tasks and not self._outbox.empty() and self.conn is not None \
                and self.conn.is_open:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    while not self._outbox.empty():
                        await asyncio.sleep(0.01)
        if self.manager is not None:
            await self.manager.stop()
        for task in self._tasks:
            await stop_task(task, STOP_TIMEOUT, task.get_name())
        self._tasks.clear()
        if self._quench is not None:
            await self._quench.close()
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()
        remove_status(self.config.status_file)

    async def __aenter__(self) -> FileWatcher:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------------------
    # quench, or the roots at a router without it
    def _quench_changed(self, _available: bool) -> None:
        # quench-driven, or (refused) the roots as one pseudo-subscription:
        # either way the watches are planned again
        self._want_reconcile()
        self._status_changed()

    @property
    def quench(self) -> Any:
        # a quench the router ended (and no new one yet) is no guide to what is wanted
        quench = self._quench.quench if self._quench is not None else None
        return quench if quench is not None and not quench.closed else None

    @property
    def no_quench(self) -> bool:
        """The router has no quench: everything under the roots is announced."""
        return self._quench is not None and self._quench.refused

    # ------------------------------------------------------------------------------
    # connection events
    def _on_quench_event(self, _event: object) -> None:
        self._want_reconcile()

    def _on_lost(self, reason: object) -> None:
        log.warning("lost the router (%s): reconnecting; watches are kept", reason)
        if not self._in_outage:
            self._in_outage = True
            if not self._grace_interests:
                self._grace_interests = {i: set(t) for i, t in self.interest_terms.items()}
        self._status_changed()

    def _on_reconnected(self, _conn: object) -> None:
        log.info("reconnected to %s", self.conn.url)   # the quench follows (OptionalQuench)
        self._in_outage = False
        if self._grace_handle is not None:
            self._grace_handle.cancel()
        self._grace_handle = self._loop.call_later(self.config.reconnect_grace, self._end_grace,
                                                   "timeout")
        self._want_reconcile()
        self._status_changed()

    def _end_grace(self, why: str) -> None:
        if self._grace_handle is None:
            return      # already ended
        self._grace_handle.cancel()
        self._grace_handle = None
        log.info("reconnection settled (%s): re-planning and re-scanning", why)
        self._grace_interests = {}
        self._want_reconcile()
        self._want_rescan("reconnected")

    def _on_closed(self, reason: Any) -> None:
        if getattr(reason, "kind", "") != "closed" and not self._stopped.is_set():
            log.error("the connection to the router is closed for good: %s", reason)
            self.request_stop(2)

    @property
    def in_grace(self) -> bool:
        return self._in_outage or self._grace_handle is not None

    # ------------------------------------------------------------------------------
    # reconcile: subscriptions -> watches
    def _want_reconcile(self) -> None:
        self._idle.clear()
        self._reconcile_wanted.set()

    async def _reconcile_loop(self) -> None:
        while True:
            await self._reconcile_wanted.wait()
            await asyncio.sleep(self.reconcile_delay)
            self._reconcile_wanted.clear()
            try:
                await self._reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep the daemon alive, say why
                log.exception("re-planning the watches failed")
            if not self._reconcile_wanted.is_set():
                self._idle.set()

    def _analyse(self, term_id: Any, ast: Node) -> TermPaths:
        cached = self._analysis_cache.get(ast)
        if cached is None:
            cached = analyse(ast, self.config.roots, policy=self.config.unbounded,
                             max_paths=self.config.max_paths_per_subscription)
            if len(self._analysis_cache) > 10_000:
                self._analysis_cache.clear()
            self._analysis_cache[ast] = cached
        if cached.unbounded and term_id not in self._warned_terms:
            self._warned_terms.add(term_id)
            log.warning("subscription #%s: %s", term_id, "; ".join(cached.notes))
        return cached

    def _no_quench_term(self) -> TermPaths:
        """The roots, as ``unbounded = "roots"`` watches them."""
        paths = analyse(_ANY_PATH, self.config.roots, policy="roots")
        return TermPaths(paths.interests, True, (NO_QUENCH_NOTE,))

    async def _reconcile(self) -> None:
        if self.conn is None or self.manager is None:
            return
        if self.quench is None and not self.no_quench:
            return
        if self.conn.state != "open" or self._in_outage:
            return      # the reconnect listener re-plans once the quench is restored
        if self.quench is not None:
            asts = dict(self.quench.subscriptions)
            terms = {tid: self._analyse(tid, ast) for tid, ast in asts.items()}
        else:
            asts = {NO_QUENCH: _ANY_PATH}
            terms = {NO_QUENCH: self._no_quench_term()}
        self._warned_terms &= set(asts)
        interest_terms: dict[Interest, set[Any]] = collections.defaultdict(set)
        for tid, paths in terms.items():
            for interest in paths.interests:
                interest_terms[interest].add(tid)
        if self._grace_handle is not None and all(i in interest_terms
                                                  for i in self._grace_interests):
            self._loop.call_soon(self._end_grace, "all subscriptions are back")
        if self._grace_interests:
            for interest in self._grace_interests:
                if interest not in interest_terms:
                    interest_terms[interest].add(BEFORE_RECONNECT)
        new_plan = plan(interest_terms, self.config.roots)
        previously_pending = self._pending_interests
        added, removed = await self.manager.apply(new_plan)
        self.snapshots.drop(removed)
        await self.snapshots.add(added)
        self._pending_interests = set(new_plan.pending_interests)
        arrived = [i for i in previously_pending
                   if i in interest_terms and i not in new_plan.pending_interests
                   and i not in new_plan.unplaceable]
        self.terms, self.term_asts = terms, asts
        self.interest_terms = dict(interest_terms)
        self.plan = new_plan
        for key in added:
            watch = self.manager.watches.get(key)
            log.info("watching %s [%s]%s", key, watch.backend if watch else "?",
                     " (pending: waiting for a directory to appear)"
                     if watch and watch.pending else "")
        for key in removed:
            log.info("stopped watching %s", key)
        if arrived:
            events = await asyncio.to_thread(list_existing, arrived)
            self._ingest(events)
        self._status_changed()

    # ------------------------------------------------------------------------------
    # events: watchdog -> coalescer -> notifications
    def _existed(self, path: str) -> bool | None:
        known = self.snapshots.known(path)
        return None if known is None else known.exists

    def _on_raw(self, batch: list[RawEvent]) -> None:
        """A batch of live events from watchdog (on the loop thread)."""
        if self._stopped.is_set():
            return
        replan = False
        for event in batch:
            if self.manager is not None and self.manager.needs_replan(event):
                if event.kind in (DELETED, MOVED):
                    self.manager.mark_dead(event.path)
                replan = True
        if replan:
            self._analysis_cache.clear()    # symlinks may have changed too
            self._want_reconcile()
        self._ingest(batch)

    def _ingest(self, events: Iterable[RawEvent]) -> None:
        manager = self.manager
        if manager is None:
            return
        now = self._loop.time()
        count = 0
        for event in events:
            count += 1
            # the commonest event in a busy directory: drop early when unwanted
            if event.kind == MODIFIED and not manager.route(event.path):
                continue
            self.coalescer.add(event, now)
        self.counters["events"] += count
        self._arm()

    def _arm(self) -> None:
        when = self.coalescer.next_due()
        if when is None:
            return
        handle = self._tick_handle
        if handle is not None:
            if handle.when() <= when:
                return
            handle.cancel()
        self._tick_handle = self._loop.call_at(max(when, self._loop.time() + 0.002), self._tick)

    def _tick(self) -> None:
        self._tick_handle = None
        for event in self.coalescer.due(self._loop.time()):
            try:
                self._emit(event)
            except Exception:  # noqa: BLE001 - one odd event must not stop the rest
                log.exception("could not report %s", event)
        if self.snapshots.over_limit:
            self._want_rescan("memory limit")
        self._arm()

    def _emit(self, event: RawEvent) -> None:
        """Turn one coalesced event into notifications (one per spelling of
        the path among the subscriptions that want it) in the outbox."""
        manager = self.manager
        if manager is None:
            return
        host = self.config.host
        if event.kind == MOVED and event.dest is not None:
            interests = manager.route(event.path) + manager.route(event.dest)
            if not interests:
                return
            st = _lstat(event.dest)
            pairs = {(_rebase(i, event.path), _rebase(i, event.dest)) for i in interests}
            notes = [(event.path, None), (event.dest, st)]
            for src, dest in sorted(pairs):
                self._queue(notification(MOVED, src, dest=dest, host=host, is_dir=event.is_dir,
                                         st=st), notes)
            return
        interests = manager.route(event.path)
        if not interests:
            return
        kind = event.kind
        st = None if kind == DELETED else _lstat(event.path)
        if kind == MODIFIED and st is not None and not event.rescan \
                and not stat_module.S_ISDIR(st.st_mode):
            before = self.snapshots.known(event.path)
            if before is not None and before.exists and before.mtime_ns == st.st_mtime_ns \
                    and before.size == st.st_size:
                kind = ATTRIB
        notes = [(event.path, st)]
        for shown in sorted({_rebase(i, event.path) for i in interests}):
            self._queue(notification(kind, shown, host=host, is_dir=event.is_dir, st=st), notes)

    def _queue(self, attrs: dict, notes: list) -> None:
        for path, st in notes:      # known at once, for the next event's attrib check
            self.snapshots.note(path, st, False)
        try:
            self._outbox.put_nowait((attrs, notes))
        except asyncio.QueueFull:
            self.counters["failed"] += 1
            self._missed = True

    async def _send_loop(self) -> None:
        while True:
            attrs, notes = await self._outbox.get()
            handled = False
            if self.conn.state != "open":
                # do not wait for the router per notification: the re-scan
                # after the reconnection reports what was not handled
                self.counters["failed"] += 1
                self._missed = True
            else:
                try:
                    sent = await self.conn.send(attrs)
                except (ConnectionClosedError, ElvinError, OSError) as exc:
                    log.debug("could not send %s: %s", describe(attrs), exc)
                    self.counters["failed"] += 1
                    self._missed = True
                else:
                    if sent:
                        self.counters["sent"] += 1
                        handled = True
                        log.debug("sent %s", describe(attrs))
                    else:
                        self.counters["quenched"] += 1
                        # nobody wants it now; during the grace after a
                        # reconnection a subscriber may be on its way back
                        handled = not self.in_grace
            for path, st in notes:
                self.snapshots.note(path, st, handled)
            if self._missed and self._outbox.empty() and self.conn.state == "open" \
                    and not self.in_grace:
                self._missed = False
                self._want_rescan("notifications could not be sent")

    # ------------------------------------------------------------------------------
    # re-scans
    def _on_overflow(self) -> None:
        self.counters["overflows"] += 1
        self._want_rescan("inotify queue overflow")

    def _want_rescan(self, reason: str) -> None:
        self._rescan_reasons.append(reason)
        self._idle.clear()
        self._rescan_wanted.set()

    async def _rescan_loop(self) -> None:
        while True:
            await self._rescan_wanted.wait()
            await asyncio.sleep(self.reconcile_delay * 2)
            if self.conn.state != "open" or self.in_grace:
                # after the reconnection: _end_grace asks again
                self._rescan_wanted.clear()
                continue
            while self._reconcile_wanted.is_set():
                await asyncio.sleep(self.reconcile_delay)
            self._rescan_wanted.clear()
            reasons = ", ".join(dict.fromkeys(self._rescan_reasons))
            self._rescan_reasons.clear()
            try:
                await self.rescan(reasons)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001
                log.exception("re-scan failed")
            if not self._reconcile_wanted.is_set() and not self._rescan_wanted.is_set():
                self._idle.set()

    async def rescan(self, reason: str = "requested") -> int:
        """Compare every watched directory with its snapshot and report what
        was missed. Returns the number of differences found."""
        if self.manager is None:
            return 0
        keys = [k for k, w in self.manager.watches.items() if w.active]
        events = await self.snapshots.rescan(keys)
        self.counters["rescans"] += 1
        log.info("re-scan (%s): %d watched directories, %d changes not reported before",
                 reason, len(keys), len(events))
        self._ingest(events)
        self._status_changed()
        return len(events)

    async def settled(self, timeout: float = 10.0) -> None:
        """Wait until no re-planning or re-scan is pending (for tests and the
        benchmark)."""
        async with asyncio.timeout(timeout):
            while True:
                await asyncio.sleep(self.reconcile_delay * 3)
                if not self._reconcile_wanted.is_set() and not self._rescan_wanted.is_set():
                    await asyncio.sleep(self.reconcile_delay * 2)
                    if not self._reconcile_wanted.is_set() and not self._rescan_wanted.is_set():
                        return

    # ------------------------------------------------------------------------------
    # status
    def _status_changed(self) -> None:
        if self._loop is None or self._status_handle is not None:
            return
        self._status_handle = self._loop.call_later(0.05, self._write_status)

    async def _status_loop(self) -> None:
        while True:
            await asyncio.sleep(self.status_interval)
            if self.counters != self._last_counters:
                self._write_status()

    def _write_status(self) -> None:
        self._status_handle = None
        self._last_counters = dict(self.counters)
        try:
            write_status(self.config.status_file, self.status())
        except OSError as exc:
            log.warning("cannot write the status file %s: %s", self.config.status_file,
                        exc.strerror or exc)

    def connection_state(self) -> str:
        if self.conn is None:
            return "not connected"
        state = self.conn.state
        return {"open": "connected"}.get(state, state)

    def _quench_state(self) -> str:
        """For the status: "on", "off" (the router has no quench: roots), or
        "unknown" before the router answered."""
        if self.no_quench:
            return "off"
        return "on" if self.quench is not None else "unknown"

    def status(self) -> dict[str, Any]:
        """What is watched and why, as written to the status file."""
        manager = self.manager
        watches = []
        if manager is not None:
            for key, watch in sorted(manager.watches.items()):
                subs = set()
                for interest in watch.interests:
                    subs |= self.interest_terms.get(interest, set())
                interests = sorted(i.describe() for i in watch.interests)
                watches.append({
                    "path": key.path, "recursive": key.recursive, "backend": watch.backend,
                    "pending": watch.pending, "error": watch.error,
                    "os_watches": manager.watch_os_count(watch),
                    "subscriptions": sorted(subs, key=str),
                    "interests": _limit(interests),
                })
        subscriptions = []
        for tid, paths in sorted(self.terms.items(), key=lambda item: str(item[0])):
            ast = self.term_asts.get(tid)
            try:
                text = unparse(ast) if ast is not None else "?"
            except Exception:  # noqa: BLE001
                text = "?"
            if len(text) > 200:
                text = text[:197] + "..."
            notes = list(paths.notes)
            for interest in paths.interests:
                if interest in self.plan.unplaceable:
                    notes.append(f"{interest.describe()}: {self.plan.unplaceable[interest]}")
            if manager is not None:
                for watch in manager.watches.values():
                    if watch.error and watch.interests & paths.interests:
                        notes.append(f"{watch.key}: {watch.error}")
            subscriptions.append({
                "id": tid, "expression": text,
                "watching": _limit(sorted(i.describe() for i in paths.interests)),
                "unbounded": paths.unbounded, "notes": list(dict.fromkeys(notes)),
            })
        count = manager.os_watch_count() if manager is not None else 0
        return {
            "version": __version__, "pid": os.getpid(), "started": self.started,
            "updated": time.time(), "router": self.conn.url if self.conn else self.url,
            "connection": self.connection_state(), "roots": list(self.config.roots),
            "unbounded": self.config.unbounded,
            "quench": self._quench_state(),
            "os_watches": count,
            "watches": watches, "subscriptions": subscriptions,
            "counters": dict(self.counters),
        }


_ANY_PATH = parse("require(File-Path)")


def _limit(items: list[str]) -> list[str]:
    if len(items) <= STATUS_LIST_LIMIT:
        return items
    return items[:STATUS_LIST_LIMIT] + [f"... {len(items) - STATUS_LIST_LIMIT} more"]
