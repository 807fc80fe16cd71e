"""The filewatcher daemon: quench in, watches out, notifications back.

``FileWatcher`` composes parts that each do one job, all on one asyncio loop
(watchdog's threads only hand events over)::

    router --quench--> link --> reconcile: pathset.analyse per subscription
                                -> watches.plan -> WatchManager.apply
    kernel --watchdog--> WatchManager --> intake: coalesce, route, classify
                                          -> outbox -> router (auto-quench
                                             drops what nobody wants)
    overflow, failed sends, reconnection --> rescan (snapshots) --> intake
    any of it --> report (the status file)

* ``link``       the router connection and its quench (``OptionalQuench``)
* ``grace``      the watches kept through a reconnection
* ``reconcile``  what the subscriptions want -> what is watched
* ``intake``     file-system events -> notifications
* ``outbox``     notifications -> the router, and what became of them
* ``rescan``     the changes live events missed, from the snapshots
* ``report``     the status file's content, and when it is written
* ``chores``     re-plan and re-scan requests between the parts

Reconnection: the client library restores the quench on a new session; it
reports every old subscription as removed and the restored ones as added.
The watches are not torn down meanwhile (``grace``). At the end of the grace
a snapshot re-scan reports what changed while notifications could not be
delivered. An inotify overflow triggers the same re-scan.

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
import dataclasses
import logging
import time
from typing import Any

from elvin_apps.filewatcher import __version__
from elvin_apps.filewatcher.chores import Chores
from elvin_apps.filewatcher.config import SETTINGS, Config
from elvin_apps.filewatcher.grace import ReconnectGrace
from elvin_apps.filewatcher.intake import Intake
from elvin_apps.filewatcher.link import RouterLink
from elvin_apps.filewatcher.outbox import Outbox
from elvin_apps.filewatcher.reconcile import Reconciler
from elvin_apps.filewatcher.report import StatusReporter, daemon_status
from elvin_apps.filewatcher.rescan import Rescanner
from elvin_apps.filewatcher.snapshots import Snapshots
from elvin_apps.filewatcher.watches import RawEvent, WatchManager

from elvin.client import Connection
from elvin.daemon.daemon_control import ReloadRecord
from elvin.tasks import stop_task

__all__ = ["FileWatcher"]

log = logging.getLogger("elvin_apps.filewatcher")
STOP_TIMEOUT = 10.0          # a task that outlives its cancellation this long is left
#: reloadable settings the command line applies (reload_logging), not the daemon
_LOGGING = ("log_level", "log_file")
DRAIN_TIMEOUT = 1.0          # at shutdown, for what is still in the outbox


def _task_name(loop: str) -> str:
    return f"filewatcher {loop}"


#: the loops that change the watch set: stopped before the watches are
_PLANNERS = frozenset({_task_name("reconcile"), _task_name("rescan")})


class FileWatcher:
    """One daemon instance. ``await start()``, then ``await wait_stopped()``
    (or use ``async with``); ``request_stop()`` from a signal handler."""

    def __init__(self, config: Config, url: str | list[str], *, reconcile_delay: float = 0.02,
                 status_interval: float = 5.0, inotify_factory: Any = None,
                 connect_options: dict[str, Any] | None = None) -> None:
        self.config = config
        self.url = url
        self.exit_code = 0
        self.started = time.time()
        self.counters = {"events": 0, "sent": 0, "quenched": 0, "failed": 0,
                         "rescans": 0, "overflows": 0}
        self.chores = Chores()
        self.snapshots = Snapshots()
        self.link = RouterLink(url, connect_options, on_wanted=self._wanted,
                               on_lost=self._lost, on_back=self._back, on_gone=self._gone)
        self.grace = ReconnectGrace(config.reconnect_grace, on_end=self._grace_over)
        self.reporter = StatusReporter(config.status_file, self.status, self.counters,
                                       status_interval)
        self.manager = WatchManager(self._on_raw, poll_interval=config.poll_interval,
                                    max_watches=config.max_watches,
                                    inotify_factory=inotify_factory,
                                    on_overflow=self._on_overflow)
        self.outbox = Outbox(self.link, self.snapshots, self.grace, self.chores, self.counters)
        self.intake = Intake(self.manager, self.snapshots, self.outbox, self.chores,
                             self.counters, host=config.host, debounce=config.debounce,
                             max_delay=config.max_delay)
        self.reconciler = Reconciler(config, self.link, self.manager, self.snapshots,
                                     self.grace, self.chores, ingest=self.intake.ingest,
                                     on_changed=self.reporter.changed, delay=reconcile_delay)
        self.rescanner = Rescanner(self.link, self.manager, self.snapshots, self.grace,
                                   self.chores, self.counters, ingest=self.intake.ingest,
                                   on_changed=self.reporter.changed,
                                   delay=reconcile_delay * 2)
        self._stopped = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        #: the last SIGHUP's verdict, for ``filewatcher reload`` (elvin.daemon.daemon_control)
        self.reload_record = ReloadRecord()

    # ------------------------------------------------------------------------------
    # lifecycle
    async def start(self) -> FileWatcher:
        """Connect, quench, plan the first watches. Raises ``ConnectError``
        (an ``OSError``) when the router cannot be reached."""
        await self.link.open()
        try:
            self.manager.start()
            await self.reconciler.reconcile()
            loops = {"reconcile": self.reconciler.run(), "rescan": self.rescanner.run(),
                     "send": self.outbox.run(), "status": self.reporter.run()}
            self._tasks = [asyncio.create_task(coro, name=_task_name(name))
                           for name, coro in loops.items()]
            self.reporter.write()
        except BaseException:  # closed however; re-raised
            await self.close()
            raise
        log.info("filewatcher %s connected to %s; roots: %s; unbounded subscriptions: %s",
                 __version__, self.link.shown_url, ", ".join(self.config.roots),
                 self.config.unbounded)
        return self

    def reload(self, config: Config) -> tuple[list[str], list[str]]:
        """Apply a re-read configuration (SIGHUP) to the running daemon: the
        roots and subscription limits (every subscription is planned again),
        timings, ``max-watches``, ``host``. The router URL and the status
        file need a restart and are kept. Returns (what was applied, what
        needs a restart), as ``reload`` reports them; the log settings are
        the command line's business."""
        from elvin.daemon.daemon_control import change

        old = self.config
        changed = [s for s in SETTINGS if getattr(old, s.name) != getattr(config, s.name)]
        restart = [s.name for s in changed if not s.reloadable]
        if restart:
            config = dataclasses.replace(config, **{name: getattr(old, name) for name in restart})
        applied = [change(s.key, getattr(old, s.name), getattr(config, s.name))
                   for s in changed if s.reloadable and s.name not in _LOGGING]
        self.config = config
        self.reconciler.reconfigure(config)
        self.intake.host = config.host
        self.intake.coalescer.debounce = config.debounce
        self.intake.coalescer.max_delay = max(config.max_delay, config.debounce)
        self.manager.max_watches = config.max_watches
        self.manager.poll_interval = config.poll_interval
        self.grace.seconds = config.reconnect_grace
        self.reporter.changed()
        return applied, [name.replace("_", "-") for name in restart]

    def request_stop(self, exit_code: int = 0) -> None:
        if not self._stopped.is_set():
            self.exit_code = exit_code
            self._stopped.set()

    async def wait_stopped(self) -> int:
        await self._stopped.wait()
        return self.exit_code

    async def close(self) -> None:
        """Shut down, in one order, owned here: nothing new is planned (the
        grace timer and the reconcile and rescan loops stop first, so no
        ``apply`` is in flight or starts), what is pending is sent (briefly,
        while the watches still route events), the watches stop, then the
        sending and status loops, the connection and the status file."""
        self._stopped.set()
        self.grace.cancel()
        planners = [t for t in self._tasks if t.get_name() in _PLANNERS]
        for task in planners:
            await stop_task(task, STOP_TIMEOUT, task.get_name())
        self.intake.flush()          # before the watches go: routing needs them
        if self._tasks:
            await self.outbox.drain(DRAIN_TIMEOUT)
        await self.manager.stop()
        for task in self._tasks:
            if task not in planners:
                await stop_task(task, STOP_TIMEOUT, task.get_name())
        self._tasks.clear()
        await self.link.close()
        self.reporter.close()

    async def __aenter__(self) -> FileWatcher:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------------------
    # state, for the command and tests
    @property
    def conn(self) -> Connection | None:
        return self.link.conn

    @property
    def no_quench(self) -> bool:
        """The router has no quench: everything under the roots is announced."""
        return self.link.no_quench

    @property
    def in_grace(self) -> bool:
        """Reconnecting, or keeping the watches from before a reconnection."""
        return self.grace.active

    def status(self) -> dict[str, Any]:
        """What is watched and why, as written to the status file."""
        return {**daemon_status(self.config, self.link, self.manager, self.reconciler,
                                self.counters, self.started),
                "reload": self.reload_record.as_dict()}

    async def rescan(self, reason: str = "requested") -> int:
        """Report what live events missed now; the number of changes found."""
        return await self.rescanner.rescan(reason)

    async def settled(self, timeout: float = 10.0) -> None:
        """Wait until no re-planning or re-scan is pending or running (for
        tests and the benchmark)."""
        async with asyncio.timeout(timeout):
            await self.chores.settled()

    # ------------------------------------------------------------------------------
    # wiring: what one part reports, the others act on
    def _on_raw(self, batch: list[RawEvent]) -> None:
        """A batch of live events from watchdog (on the loop thread)."""
        if self._stopped.is_set():
            return
        self.reconciler.notice(batch)
        self.intake.ingest(batch)

    def _on_overflow(self) -> None:
        self.rescanner.overflowed()

    def _wanted(self) -> None:
        self.chores.want_replan()
        self.reporter.changed()

    def _lost(self) -> None:
        self.grace.lost(self.reconciler.interest_terms)
        self.reporter.changed()

    def _back(self) -> None:
        self.grace.back()
        self._wanted()

    def _grace_over(self) -> None:
        self.chores.want_replan()
        self.chores.want_rescan("reconnected")

    def _gone(self, reason: object) -> None:
        if not self._stopped.is_set():
            log.error("the connection to the router is closed for good: %s", reason)
            self.request_stop(2)
