"""The OS watches: which directories are watched, how, and for whom.

``plan()`` turns the interests of every subscription into OS watches
(``WatchKey``: a directory, recursive or not): a file is watched through a
non-recursive watch on its directory, a tree through a recursive watch; a
watch inside a recursive watch is folded into it, so two subscriptions on one
tree, or a file inside a watched tree, share one OS watch. A watch lives
while at least one interest (held by at least one subscription) needs it:
that is the reference count, and ``WatchManager.apply()`` adds and removes
watchdog watches as it changes.

When a wanted directory does not exist yet, its nearest existing ancestor
(inside the roots) is watched instead, non-recursively, and marked
*pending*: a directory created there makes the daemon plan again.

Backends: inotify through watchdog, with one change: when the kernel's
watch or instance limit is hit (``ENOSPC`` / ``EMFILE``) the watch falls back
to watchdog's ``PollingObserver`` (logged, and shown by ``filewatcher
status``), and a failed inotify set-up closes its descriptor instead of
leaking it (watchdog's ``Inotify`` would keep the watches it had added). An
inotify queue overflow (``IN_Q_OVERFLOW``, which watchdog drops silently) is
reported to ``on_overflow`` so the daemon can re-scan with snapshots.

watchdog delivers events on its own threads; they are converted to
``RawEvent`` there and handed to the event loop in batches
(``call_soon_threadsafe`` once per batch, not per event).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from elvin_apps.filewatcher.pathset import Interest
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
)
from watchdog.observers.polling import PollingObserver

__all__ = ["Plan", "RawEvent", "Watch", "WatchKey", "WatchManager", "inotify_watch_count",
           "plan"]

log = logging.getLogger("elvin_apps.filewatcher.watches")

SEP = "/"
CREATED, MODIFIED, DELETED, MOVED = "created", "modified", "deleted", "moved"

#: Only the events we report: lets watchdog leave IN_OPEN / IN_CLOSE_* out of
#: the kernel mask, which matters in busy directories.
EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent, DirCreatedEvent, FileModifiedEvent, FileDeletedEvent,
    DirDeletedEvent, FileMovedEvent, DirMovedEvent,
]


class WatchKey(NamedTuple):
    path: str
    recursive: bool

    def __str__(self) -> str:
        return self.path + (" (recursive)" if self.recursive else "")


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One file-system event as the daemon sees it (before coalescing)."""

    kind: str                 # created, modified, deleted, moved
    path: str                 # real path
    is_dir: bool = False
    dest: str | None = None   # moved only
    rescan: bool = False      # found by a snapshot re-scan, not by a live watch


# ---------------------------------------------------------------------------
# planning (pure, apart from isdir)
# ---------------------------------------------------------------------------

@dataclass
class Plan:
    watches: dict[WatchKey, set[Interest]] = field(default_factory=dict)
    pending: set[WatchKey] = field(default_factory=set)
    pending_interests: set[Interest] = field(default_factory=set)
    unplaceable: dict[Interest, str] = field(default_factory=dict)


def _ancestors(path: str) -> Iterable[str]:
    """``path``'s proper ancestors, nearest first ("/a/b/c" -> "/a/b", "/a", "/")."""
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return
        yield parent
        path = parent


def plan(interests: Iterable[Interest], roots: Iterable[str],
         isdir: Callable[[str], bool] = os.path.isdir) -> Plan:
    """The OS watches needed for ``interests`` (see the module docstring)."""
    roots = list(roots)
    result = Plan()
    wanted: dict[WatchKey, set[Interest]] = collections.defaultdict(set)
    pending: set[WatchKey] = set()

    def within(path: str) -> bool:
        return any(path == r or path.startswith(r + SEP) for r in roots)

    for interest in interests:
        directory = interest.watch_dir
        if isdir(directory):
            wanted[WatchKey(directory, interest.recursive)].add(interest)
            continue
        for ancestor in _ancestors(directory):
            if not within(ancestor):
                result.unplaceable[interest] = "no existing directory inside the roots"
                break
            if isdir(ancestor):
                key = WatchKey(ancestor, False)
                wanted[key].add(interest)
                pending.add(key)
                result.pending_interests.add(interest)
                break
        else:
            result.unplaceable[interest] = "no existing directory inside the roots"

    trees = {k.path for k in wanted if k.recursive}

    def outermost_tree(key: WatchKey) -> str | None:
        found = key.path if not key.recursive and key.path in trees else None
        for ancestor in _ancestors(key.path):     # nearest first: the last hit is outermost
            if ancestor in trees:
                found = ancestor
        return found

    for key, its in wanted.items():
        tree = outermost_tree(key)
        target = WatchKey(tree, True) if tree is not None else key
        result.watches.setdefault(target, set()).update(its)
        if target == key and key in pending:
            result.pending.add(key)
    return result


# ---------------------------------------------------------------------------
# watchdog plumbing
# ---------------------------------------------------------------------------

_overflow_callbacks: list[Callable[[], None]] = []
_hook_lock = threading.Lock()
_inotify_classes: tuple[type, type] | None = None


def _inotify_observer_class() -> type | None:
    """An inotify observer that closes its descriptor when set-up fails and
    reports queue overflows; None where inotify is not available."""
    global _inotify_classes
    if not sys.platform.startswith("linux"):
        return None
    try:
        from watchdog.observers.api import BaseObserver
        from watchdog.observers.inotify import InotifyEmitter
        from watchdog.observers.inotify_buffer import InotifyBuffer
        from watchdog.observers.inotify_c import Inotify, InotifyConstants
        from watchdog.utils import BaseThread
        from watchdog.utils.delayed_queue import DelayedQueue
    except Exception:  # noqa: BLE001 - no inotify (old kernel, odd libc)
        return None
    if _inotify_classes is not None:
        return _inotify_classes[0]

    class SafeInotify(Inotify):
        def __init__(self, path: bytes, *, recursive: bool = False,
                     event_mask: int | None = None) -> None:
            self.top = path
            self.unreadable: list[str] = []
            try:
                super().__init__(path, recursive=recursive, event_mask=event_mask)
            except BaseException:  # no descriptor leaks; re-raised
                for name in ("_inotify_fd", "_kill_r", "_kill_w"):
                    fd = getattr(self, name, None)
                    if fd is not None:
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                raise

        def _add_watch(self, path: bytes, mask: int) -> int:
            # watchdog ignores EACCES: it files the failed watch (-1) as if it
            # worked, and the daemon would claim to watch what it cannot read
            wd = super()._add_watch(path, mask)
            if wd != -1:
                return wd
            self._wd_for_path.pop(path, None)
            self._path_for_wd.pop(-1, None)
            shown = os.fsdecode(path)
            if path == self.top:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), shown)
            if shown not in self.unreadable:
                self.unreadable.append(shown)
                log.warning("cannot watch %s (inside the watched %s): %s; changes there are "
                            "not seen", shown, os.fsdecode(self.top),
                            os.strerror(errno.EACCES))
            return wd

    class SafeInotifyBuffer(InotifyBuffer):
        def __init__(self, path: bytes, *, recursive: bool = False,
                     event_mask: int | None = None) -> None:
            BaseThread.__init__(self)
            self._queue = DelayedQueue(self.delay)
            self._inotify = SafeInotify(path, recursive=recursive, event_mask=event_mask)
            self.start()

    class SafeInotifyEmitter(InotifyEmitter):
        def on_thread_start(self) -> None:
            path = os.fsencode(self.watch.path)
            self._inotify = SafeInotifyBuffer(path, recursive=self.watch.is_recursive,
                                              event_mask=self.get_event_mask_from_filter())

        def os_watch_count(self) -> int:
            buffer = self._inotify
            try:
                return len(buffer._inotify._wd_for_path)   # type: ignore[union-attr]
            except AttributeError:
                return 0

        def unreadable(self) -> list[str]:
            """Directories inside the watched tree that could not be watched."""
            buffer = self._inotify
            try:
                return list(buffer._inotify.unreadable)   # type: ignore[union-attr]
            except AttributeError:
                return []

    class SafeInotifyObserver(BaseObserver):
        def __init__(self, *, timeout: float = 1.0) -> None:
            super().__init__(SafeInotifyEmitter, timeout=timeout)

    # IN_Q_OVERFLOW arrives with wd == -1 and watchdog skips it; wrap the
    # parser (a static method) to see it. Process-wide, installed once.
    original = Inotify.__dict__["_parse_event_buffer"].__func__
    overflow_bit = InotifyConstants.IN_Q_OVERFLOW

    def parse_event_buffer(event_buffer: bytes):
        for wd, mask, cookie, name in original(event_buffer):
            if wd == -1 and mask & overflow_bit:
                with _hook_lock:
                    callbacks = list(_overflow_callbacks)
                for callback in callbacks:
                    try:
                        callback()
                    except Exception:  # never kill the reader thread
                        log.exception("overflow callback failed")
            yield wd, mask, cookie, name

    Inotify._parse_event_buffer = staticmethod(parse_event_buffer)
    _inotify_classes = (SafeInotifyObserver, SafeInotifyEmitter)
    return SafeInotifyObserver


def inotify_watch_count(pid: int | str = "self") -> int | None:
    """Kernel inotify watches held by a process (Linux: ``/proc/PID/fdinfo``),
    or None where that cannot be read."""
    base = f"/proc/{pid}"
    try:
        fds = os.listdir(f"{base}/fd")
    except OSError:
        return None
    total = 0
    for fd in fds:
        try:
            if os.readlink(f"{base}/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"{base}/fdinfo/{fd}", encoding="ascii") as info:
                total += sum(1 for line in info if line.startswith("inotify wd:"))
        except OSError:
            continue
    return total


def _convert(event: FileSystemEvent) -> RawEvent | None:
    src = os.fsdecode(event.src_path)
    if isinstance(event, (FileMovedEvent, DirMovedEvent)):
        dest = os.fsdecode(event.dest_path)
        if not src:
            return RawEvent(CREATED, dest, event.is_directory)
        if not dest:
            return RawEvent(DELETED, src, event.is_directory)
        return RawEvent(MOVED, src, event.is_directory, dest)
    if isinstance(event, (FileCreatedEvent, DirCreatedEvent)):
        return RawEvent(CREATED, src, event.is_directory)
    if isinstance(event, (FileDeletedEvent, DirDeletedEvent)):
        return RawEvent(DELETED, src, event.is_directory)
    if isinstance(event, FileModifiedEvent):
        return RawEvent(MODIFIED, src, False)
    return None     # directory "modified" (an entry changed): reported per entry


class _Handler:
    """watchdog calls ``dispatch`` on its threads; batch events to the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None,
                 deliver: Callable[[list[RawEvent]], None]) -> None:
        self.loop = loop          # set by WatchManager.start() when not known before
        self.deliver = deliver
        self.buffer: collections.deque[RawEvent] = collections.deque()
        self.scheduled = False
        self.lock = threading.Lock()

    def dispatch(self, event: FileSystemEvent) -> None:
        raw = _convert(event)
        if raw is None:
            return
        with self.lock:
            self.buffer.append(raw)
            if self.scheduled:
                return
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:   # the loop is closed: we are shutting down
            pass

    def _drain(self) -> None:
        with self.lock:
            batch = list(self.buffer)
            self.buffer.clear()
            self.scheduled = False
        if batch:
            self.deliver(batch)


# ---------------------------------------------------------------------------
# the manager
# ---------------------------------------------------------------------------

INOTIFY, POLLING, FAILED, REFUSED = "inotify", "polling", "failed", "refused"


@dataclass
class Watch:
    """One OS watch and why it exists."""

    key: WatchKey
    interests: set[Interest]
    pending: bool = False
    backend: str = INOTIFY
    error: str | None = None
    observed: Any = None          # watchdog ObservedWatch
    observer: Any = None
    dead: bool = False

    @property
    def active(self) -> bool:
        return self.observed is not None and not self.dead


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a thread; if the caller is cancelled meanwhile, the
    thread's work is still waited for before the cancellation goes on, so
    that nothing it schedules outlives the ``apply`` that started it (the
    lock is held until then, and ``stop`` takes the lock)."""
    work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        await asyncio.wait([work])
        raise


class WatchManager:
    """Holds the watchdog observers and the current set of watches."""

    def __init__(self, deliver: Callable[[list[RawEvent]], None], *,
                 loop: asyncio.AbstractEventLoop | None = None,
                 poll_interval: float = 2.0, max_watches: int = 256,
                 inotify_factory: Callable[[], Any] | None = None,
                 polling_factory: Callable[..., Any] = PollingObserver,
                 on_overflow: Callable[[], None] | None = None) -> None:
        # the loop is the running one at start() unless given: a manager can
        # be built (with the daemon that owns it) before any loop runs
        self.loop = loop
        self.poll_interval = poll_interval
        self.max_watches = max_watches
        self.handler = _Handler(self.loop, deliver)
        if inotify_factory is None:
            cls = _inotify_observer_class()
            if cls is None:
                from watchdog.observers import Observer
                inotify_factory = Observer
            else:
                inotify_factory = cls
        self._inotify_factory = inotify_factory
        self._polling_factory = polling_factory
        self._inotify: Any = None
        self._polling: Any = None
        self.watches: dict[WatchKey, Watch] = {}
        self._files: dict[str, list[Interest]] = {}
        self._trees: dict[str, list[Interest]] = {}
        #: one change of the watch set at a time: ``apply`` and ``stop``
        self._lock = asyncio.Lock()
        self._stopped = False
        self._on_overflow = on_overflow
        self._warned: dict[WatchKey, str] = {}      # the last warning said per watch

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        self.handler.loop = self.loop
        if self._on_overflow is not None:
            with _hook_lock:
                _overflow_callbacks.append(self._overflow)
        self._inotify = self._inotify_factory()
        self._inotify.start()

    async def stop(self) -> None:
        """Stop watching, for good. Waits for an ``apply`` in flight (the
        lock), so that no watch is scheduled -- and no polling observer
        started -- after the observers are stopped; a later ``apply`` does
        nothing."""
        async with self._lock:
            self._stopped = True
            with _hook_lock:
                if self._overflow in _overflow_callbacks:
                    _overflow_callbacks.remove(self._overflow)
            observers = [o for o in (self._inotify, self._polling) if o is not None]
            self._inotify = self._polling = None
            self.watches.clear()
            self._reindex()

            def stop_all() -> None:
                for observer in observers:
                    observer.stop()
                for observer in observers:
                    if observer.is_alive():
                        observer.join(timeout=5)

            await asyncio.to_thread(stop_all)

    def _overflow(self) -> None:
        log.warning("inotify event queue overflowed: re-scanning the watched directories")
        try:
            self.loop.call_soon_threadsafe(self._on_overflow)
        except RuntimeError:
            pass

    # -- queries ---------------------------------------------------------------------
    def route(self, real: str) -> list[Interest]:
        """The interests an event at ``real`` concerns (any backend)."""
        found = list(self._files.get(real, ()))
        if self._trees:
            candidate = real
            while True:
                for interest in self._trees.get(candidate, ()):
                    if interest.covers(real):
                        found.append(interest)
                parent = os.path.dirname(candidate)
                if parent == candidate:
                    break
                candidate = parent
        return found

    def needs_replan(self, event: RawEvent) -> bool:
        """True when ``event`` changes where watches must go: a directory
        appeared under a pending watch, or a watched directory went away."""
        if event.kind in (DELETED, MOVED) and any(
                key.path == event.path or key.path.startswith(event.path + SEP)
                for key in self.watches):
            return True
        if event.is_dir and event.kind in (CREATED, MOVED):
            new = event.dest if event.kind == MOVED else event.path
            parent = os.path.dirname(new or "")
            return any(w.pending and w.key.path == parent for w in self.watches.values())
        return False

    def mark_dead(self, path: str) -> None:
        """The watched directory ``path`` (or an ancestor) was deleted or
        moved: its watch no longer works, replace it at the next apply."""
        for key, watch in self.watches.items():
            if key.path == path or key.path.startswith(path + SEP):
                watch.dead = True

    def os_watch_count(self) -> int:
        """Kernel inotify watches plus polled directories held now."""
        total = 0
        for watch in self.watches.values():
            total += self.watch_os_count(watch)
        return total

    def watch_os_count(self, watch: Watch) -> int:
        if not watch.active:
            return 0
        if watch.backend == POLLING:
            return 1
        emitter = self._emitter(watch)
        if emitter is None:
            return 0
        count = getattr(emitter, "os_watch_count", None)
        return count() if count else 1

    def unreadable(self, watch: Watch) -> list[str]:
        """The directories inside ``watch`` that the kernel refused to watch."""
        emitter = self._emitter(watch) if watch.active else None
        found = getattr(emitter, "unreadable", None)
        return found() if found else []

    @staticmethod
    def _emitter(watch: Watch) -> Any:
        for emitter in list(getattr(watch.observer, "emitters", ())):
            if emitter.watch == watch.observed:
                return emitter
        return None

    # -- changing the watch set -------------------------------------------------------
    async def apply(self, new_plan: Plan) -> tuple[list[WatchKey], list[WatchKey]]:
        """Make the watches match ``new_plan``: add new watches first (so a
        change of watch never leaves a gap), then remove the unneeded ones.
        Returns (added, removed); nothing once stopped."""
        async with self._lock:
            if self._stopped:
                return [], []
            wanted = new_plan.watches
            current = self.watches
            for gone in [k for k in self._warned if k not in wanted]:
                del self._warned[gone]
            # failed, refused (over max-watches) and dead watches are retried
            to_remove = [k for k, w in current.items()
                         if k not in wanted or w.dead or not w.active]
            for key, watch in current.items():
                if key in wanted and key not in to_remove:
                    watch.interests = set(wanted[key])
                    watch.pending = key in new_plan.pending
            removed = [current.pop(k) for k in to_remove]
            # dead watches too: watchdog keeps the emitter of a deleted
            # directory, and would reuse it, dead, for a new watch on that path
            scheduled = [w for w in removed if w.observed is not None]
            # a watch replaced by one with the same key must go first: watchdog
            # identifies watches by (path, recursive, filter)
            first = [w for w in scheduled if w.key in wanted]
            later = [w for w in scheduled if w.key not in wanted]
            if first:
                await _in_thread(self._unschedule_all, first)
            to_add = sorted((k for k in wanted if k not in current),
                            key=lambda k: (not k.recursive, len(k.path), k.path))
            budget = self.max_watches - sum(1 for w in current.values() if w.active)
            new_watches = []
            for key in to_add:
                watch = Watch(key, set(wanted[key]), pending=key in new_plan.pending)
                if budget <= 0:
                    watch.backend = REFUSED
                    watch.error = f"not watched: max-watches ({self.max_watches}) reached"
                    current[key] = watch
                    continue
                budget -= 1
                new_watches.append(watch)
            if new_watches:
                await _in_thread(self._schedule_all, new_watches)
            for watch in new_watches:
                current[watch.key] = watch
            self._reindex()
            if later:
                await _in_thread(self._unschedule_all, later)
            added = [w.key for w in new_watches if w.active]
            gone = [w.key for w in removed if w.key not in current]
            if any(w.backend == REFUSED for w in current.values()):
                log.warning("max-watches (%d) reached: some subscriptions are not watched "
                            "(see filewatcher status)", self.max_watches)
            return added, gone

    def _reindex(self) -> None:
        files: dict[str, list[Interest]] = collections.defaultdict(list)
        trees: dict[str, list[Interest]] = collections.defaultdict(list)
        for watch in self.watches.values():
            if not watch.active:
                continue
            for interest in watch.interests:
                (files if interest.kind == "file" else trees)[interest.path].append(interest)
        self._files, self._trees = dict(files), dict(trees)

    def _schedule_all(self, watches: list[Watch]) -> None:
        for watch in watches:
            self._schedule(watch)

    def _schedule(self, watch: Watch) -> None:
        key = watch.key
        try:
            watch.observed = self._inotify.schedule(self.handler, key.path,
                                                    recursive=key.recursive,
                                                    event_filter=EVENT_FILTER)
            watch.observer, watch.backend = self._inotify, INOTIFY
            self._warned.pop(key, None)
            return
        except OSError as exc:
            self._forget_failed(self._inotify, key)
            if exc.errno not in (errno.ENOSPC, errno.EMFILE):
                watch.backend, watch.error = FAILED, f"cannot watch: {exc.strerror or exc}"
                self._warn_once(key, f"cannot watch {key}: {exc.strerror or exc}; "
                                     "subscriptions for it are not served")
                return
            log.warning("inotify limit reached (%s) for %s: polling it every %g s instead",
                        exc.strerror or exc, key, self.poll_interval)
            reason = exc.strerror or str(exc)
        try:
            if self._polling is None:
                self._polling = self._polling_factory(timeout=self.poll_interval)
                self._polling.start()
            watch.observed = self._polling.schedule(self.handler, key.path,
                                                    recursive=key.recursive,
                                                    event_filter=EVENT_FILTER)
            watch.observer, watch.backend = self._polling, POLLING
            watch.error = f"inotify: {reason}; polling every {self.poll_interval:g} s"
        except OSError as exc:
            self._forget_failed(self._polling, key)
            watch.backend, watch.error = FAILED, f"cannot poll: {exc.strerror or exc}"
            log.warning("cannot poll %s either: %s", key, exc.strerror or exc)

    def _warn_once(self, key: WatchKey, message: str) -> None:
        """A watch that fails is retried at every re-plan: say why once (per
        reason), then at debug level, so a standing problem does not flood."""
        if self._warned.get(key) != message:
            self._warned[key] = message
            log.warning("%s", message)
        else:
            log.debug("%s", message)

    def _forget_failed(self, observer: Any, key: WatchKey) -> None:
        """watchdog registers the handler before the emitter fails: undo it."""
        from watchdog.observers.api import ObservedWatch
        try:
            observer.remove_handler_for_watch(
                self.handler, ObservedWatch(key.path, recursive=key.recursive,
                                            event_filter=EVENT_FILTER))
        except (KeyError, AttributeError, ValueError):
            pass

    def _unschedule_all(self, watches: list[Watch]) -> None:
        for watch in watches:
            try:
                watch.observer.unschedule(watch.observed)
            except (KeyError, OSError, RuntimeError) as exc:
                log.debug("unscheduling %s: %s", watch.key, exc)
            watch.observed = None

    def snapshot_keys(self) -> Mapping[WatchKey, Watch]:
        return dict(self.watches)
