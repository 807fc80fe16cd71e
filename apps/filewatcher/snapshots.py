"""Snapshots of the watched directories, so that no change is silently lost.

Live events can be lost: the kernel drops inotify events when its queue
overflows, and notifications cannot be sent while the router is away. So each
OS watch gets a *baseline* (``watchdog.utils.dirsnapshot.DirectorySnapshot``,
taken right after the watch is placed), and :meth:`Snapshots.rescan` compares
a fresh snapshot with it and returns the differences as events.

Without more, a re-scan would repeat every change already reported since the
baseline. So the daemon tells :meth:`Snapshots.note` what it has *handled*
(sent, or found that no subscriber wanted), with the file's state then; a
difference whose current state is the one already handled is skipped. A
re-scan therefore reports what was missed, at the cost of an occasional
duplicate when a file changes during the scan, never a loss.

The same memory answers "what did this file look like before?", which the
daemon needs to tell a metadata-only change (``attrib``: same size and
mtime) from a ``modified``, and a replacing move from a creating one.

Snapshots use ``lstat``: a symlink under a root is reported as a link, never
followed out of the roots.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass

from elvin_apps.filewatcher.watches import CREATED, DELETED, MODIFIED, MOVED, RawEvent, WatchKey
from watchdog.utils.dirsnapshot import DirectorySnapshot, DirectorySnapshotDiff

__all__ = ["Known", "Snapshots"]

log = logging.getLogger("elvin_apps.filewatcher.snapshots")

#: Above this many remembered paths, ask for a re-scan (which re-baselines
#: and forgets), so memory stays bounded on a busy tree.
MEMORY_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class Known:
    """A path's last known state."""

    exists: bool
    mtime_ns: int = 0
    size: int = 0
    handled: bool = False


def _take(key: WatchKey) -> DirectorySnapshot | None:
    try:
        return DirectorySnapshot(key.path, recursive=key.recursive, stat=os.lstat)
    except OSError as exc:
        log.debug("cannot snapshot %s: %s", key, exc)
        return None


class Snapshots:
    def __init__(self) -> None:
        self.baselines: dict[WatchKey, DirectorySnapshot | None] = {}
        self.memory: dict[str, Known] = {}

    # -- baselines -------------------------------------------------------------------
    async def add(self, keys: Iterable[WatchKey]) -> None:
        """Take baselines for new watches (in a worker thread: a tree can be big)."""
        keys = [k for k in keys if k not in self.baselines]
        if not keys:
            return
        taken = await asyncio.to_thread(lambda: [(k, _take(k)) for k in keys])
        self.baselines.update(taken)

    def drop(self, keys: Iterable[WatchKey]) -> None:
        for key in keys:
            self.baselines.pop(key, None)

    def _baseline_for(self, path: str) -> DirectorySnapshot | None:
        parent = os.path.dirname(path)
        snap = self.baselines.get(WatchKey(parent, False))
        if snap is not None:
            return snap
        candidate = path
        while True:
            snap = self.baselines.get(WatchKey(candidate, True))
            if snap is not None:
                return snap
            up = os.path.dirname(candidate)
            if up == candidate:
                return None
            candidate = up

    # -- memory ----------------------------------------------------------------------
    def known(self, path: str) -> Known | None:
        """The last known state of ``path``: from what we handled since the
        baseline, else from the baseline; None when we know nothing."""
        found = self.memory.get(path)
        if found is not None:
            return found
        snap = self._baseline_for(path)
        if snap is None:
            return None
        try:
            st = snap.stat_info(path)
        except KeyError:
            return Known(False)
        return Known(True, st.st_mtime_ns, st.st_size)

    def note(self, path: str, st: os.stat_result | None, handled: bool) -> None:
        if st is None:
            self.memory[path] = Known(False, handled=handled)
        else:
            self.memory[path] = Known(True, st.st_mtime_ns, st.st_size, handled)

    @property
    def over_limit(self) -> bool:
        return len(self.memory) > MEMORY_LIMIT

    # -- re-scan ---------------------------------------------------------------------
    async def rescan(self, keys: Iterable[WatchKey]) -> list[RawEvent]:
        """Changes under ``keys`` since their baselines that were not handled;
        the fresh snapshots become the new baselines and the memory restarts."""
        keys = list(keys)
        fresh = await asyncio.to_thread(lambda: [(k, _take(k)) for k in keys])
        events: list[RawEvent] = []
        for key, new in fresh:
            old = self.baselines.get(key)
            if old is None or new is None:
                self.baselines[key] = new
                continue
            events.extend(self._differences(old, new))
            self.baselines[key] = new
        self.memory.clear()
        return events

    def _differences(self, old: DirectorySnapshot, new: DirectorySnapshot) -> list[RawEvent]:
        diff = DirectorySnapshotDiff(old, new, ignore_device=True)
        out: list[RawEvent] = []

        def handled_as(path: str, exists: bool, snap: DirectorySnapshot | None = None) -> bool:
            known = self.memory.get(path)
            if known is None or not known.handled or known.exists != exists:
                return False
            if exists and snap is not None:
                st = snap.stat_info(path)
                return known.mtime_ns == st.st_mtime_ns and known.size == st.st_size
            return True

        for is_dir, created, deleted, modified, moved in (
                (False, diff.files_created, diff.files_deleted, diff.files_modified,
                 diff.files_moved),
                (True, diff.dirs_created, diff.dirs_deleted, diff.dirs_modified,
                 diff.dirs_moved)):
            created, deleted, modified = list(created), list(deleted), set(modified)
            moved = list(moved)
            for src, dest in list(moved):
                # snapshots pair paths by inode, and a deleted file's inode is
                # soon reused by a new one: a rename keeps size and mtime, so
                # a "move" that changed them is a deletion plus a creation
                if src in modified:
                    modified.discard(src)
                    moved.remove((src, dest))
                    deleted.append(src)
                    created.append(dest)
            if is_dir:
                modified = set()   # an entry changed: reported on the entry itself
            for path in created:
                if not handled_as(path, True):
                    out.append(RawEvent(CREATED, path, is_dir, rescan=True))
            for path in deleted:
                if not handled_as(path, False):
                    out.append(RawEvent(DELETED, path, is_dir, rescan=True))
            for path in modified:
                if not handled_as(path, True, new):
                    out.append(RawEvent(MODIFIED, path, is_dir, rescan=True))
            for src, dest in moved:
                if not (handled_as(src, False) and handled_as(dest, True)):
                    out.append(RawEvent(MOVED, src, is_dir, dest, rescan=True))
        return out
