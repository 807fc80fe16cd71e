"""Burst coalescing: one notification per change a person would name.

Saving a file produces a burst of kernel events: an editor that writes in
place gives several ``modified``; one that writes a temporary file and
renames it over the original gives ``created`` + ``modified`` of the
temporary and a ``moved`` onto the target; vim's default renames the
original away and writes a new file. Subscribers want one ``modified``.

So events are held per path until the path has been quiet for ``debounce``
seconds (trailing edge), or at most ``max_delay`` after its first event (so a
file written continuously is still reported), and merged:

==========  ===========  ==============================================
before      then         result
==========  ===========  ==============================================
(nothing)   X            X
created     modified     created
created     deleted      nothing (a temporary file)
modified    deleted      deleted
deleted     created      modified (the file was replaced)
created A   A moved to B nothing for A; B ``modified`` if B existed before,
                         else ``created`` (an atomic save)
A moved B   B moved C    A moved to C (and nothing if C is A)
A moved B   B deleted    A deleted
==========  ===========  ==============================================

Pure logic: the caller passes the time (``loop.time()``) and asks for what
is due, so tests need no clock and no file system. ``existed(path)`` says
whether a path existed before the burst (from the snapshots), for the atomic
save rule; None means unknown (then ``created``).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass

from elvin_apps.filewatcher.watches import CREATED, DELETED, MODIFIED, MOVED, RawEvent

__all__ = ["Coalescer"]


@dataclass(slots=True)
class _Pending:
    kind: str
    is_dir: bool
    first: float
    last: float
    rescan: bool = False
    dest: str | None = None     # moves only


_PATH, _MOVE = "p", "m"
_EPSILON = 1e-6     # next_due() + float rounding must count as due


class Coalescer:
    """Pending events are kept in one dict ordered by their last update (an
    update moves the entry to the end), plus a queue in order of first
    event, so that finding what is due costs O(due), not O(pending): a burst
    of 100,000 files stays cheap."""

    def __init__(self, debounce: float = 0.1, max_delay: float = 1.0,
                 existed: Callable[[str], bool | None] | None = None) -> None:
        self.debounce = debounce
        self.max_delay = max(max_delay, debounce)
        self.existed = existed or (lambda path: None)
        # OrderedDict, not dict: popping from the front of a plain dict leaves
        # holes that every later next(iter(...)) walks over (quadratic drains)
        self._pending: collections.OrderedDict[tuple[str, str], _Pending] = \
            collections.OrderedDict()
        self._firsts: collections.deque[tuple[float, tuple[str, str]]] = collections.deque()
        self._move_dest: dict[str, str] = {}     # dest -> source, for chains
        self.received = 0
        self.emitted = 0

    def __len__(self) -> int:
        return len(self._pending)

    # -- bookkeeping -----------------------------------------------------------------
    def _get(self, kind: str, path: str) -> _Pending | None:
        return self._pending.get((kind, path))

    def _put(self, kind: str, path: str, entry: _Pending) -> None:
        key = (kind, path)
        self._pending.pop(key, None)
        self._pending[key] = entry
        self._firsts.append((entry.first, key))

    def _touch(self, kind: str, path: str, entry: _Pending, now: float) -> None:
        entry.last = now
        self._pending.move_to_end((kind, path))     # ordered by last update

    def _pop(self, kind: str, path: str) -> _Pending | None:
        return self._pending.pop((kind, path), None)

    # -- input -----------------------------------------------------------------------
    def add(self, event: RawEvent, now: float) -> None:
        self.received += 1
        if event.kind == MOVED and event.dest is not None:
            self._add_move(event, now)
        else:
            self._add_path(event.path, event.kind, event.is_dir, now, event.rescan)

    def _add_path(self, path: str, kind: str, is_dir: bool, now: float,
                  rescan: bool = False) -> None:
        if kind == DELETED and path in self._move_dest:
            # A moved to B, then B deleted: A is gone -- and the deletion
            # happened at the move, before anything that followed on A (vim
            # renames A to A~, writes a new A, deletes A~)
            source = self._move_dest.pop(path)
            move = self._pop(_MOVE, source)
            after = self._get(_PATH, source)
            if move is None:
                return
            if after is None:
                self._put(_PATH, source, _Pending(DELETED, move.is_dir, move.first, now,
                                                  rescan or move.rescan))
            else:
                after.kind = _merge(DELETED, after.kind) or DELETED
                after.first = min(after.first, move.first)
                self._touch(_PATH, source, after, now)
            return
        prev = self._get(_PATH, path)
        if prev is None:
            self._put(_PATH, path, _Pending(kind, is_dir, now, now, rescan))
            return
        merged = _merge(prev.kind, kind)
        if merged is None:
            self._pop(_PATH, path)
            return
        prev.kind, prev.is_dir = merged, is_dir
        prev.rescan = prev.rescan or rescan
        self._touch(_PATH, path, prev, now)

    def _add_move(self, event: RawEvent, now: float) -> None:
        src, dest = event.path, event.dest
        assert dest is not None
        replaced = self._pop(_PATH, dest)          # whatever was pending for B is superseded
        if src in self._move_dest:                 # X moved to A, now A moved to B
            origin = self._move_dest.pop(src)
            move = self._get(_MOVE, origin)
            if move is None:
                return
            if dest == origin:                     # moved back where it came from
                self._pop(_MOVE, origin)
                return
            move.dest = dest
            self._move_dest[dest] = origin
            self._touch(_MOVE, origin, move, now)
            return
        prev = self._pop(_PATH, src)
        if prev is not None and prev.kind == CREATED:
            # a temporary file renamed into place: an atomic save
            if replaced is not None:
                existed = replaced.kind != CREATED
            else:
                existed = bool(self.existed(dest))
            kind = MODIFIED if existed else CREATED
            first = min(prev.first, replaced.first) if replaced is not None else prev.first
            self._put(_PATH, dest, _Pending(kind, event.is_dir, first, now,
                                            event.rescan or prev.rescan))
            return
        first = prev.first if prev is not None else now
        self._put(_MOVE, src, _Pending(MOVED, event.is_dir, first, now, event.rescan, dest))
        self._move_dest[dest] = src

    # -- output ----------------------------------------------------------------------
    def due(self, now: float) -> list[RawEvent]:
        """The merged events that are ready, oldest first."""
        ready: list[tuple[float, tuple[str, str], _Pending]] = []
        # quiet for `debounce`: from the front of the last-update order
        pending = self._pending
        while pending:
            key = next(iter(pending))
            entry = pending[key]
            if entry.last + self.debounce > now + _EPSILON:
                break
            del pending[key]
            ready.append((entry.first, key, entry))
        # busy for `max_delay`: from the front of the first-event order
        while self._firsts and self._firsts[0][0] + self.max_delay <= now + _EPSILON:
            first, key = self._firsts.popleft()
            entry = self._pending.get(key)
            if entry is not None and entry.first == first:
                del self._pending[key]
                ready.append((entry.first, key, entry))
        if len(self._firsts) > 4 * len(self._pending) + 1024:   # drop stale entries
            self._firsts = collections.deque(
                (f, k) for f, k in self._firsts
                if k in self._pending and self._pending[k].first == f)
        ready.sort(key=lambda item: item[0])
        out = []
        for _, (kind, path), entry in ready:
            if kind == _MOVE:
                if entry.dest is not None and self._move_dest.get(entry.dest) == path:
                    del self._move_dest[entry.dest]
                out.append(RawEvent(MOVED, path, entry.is_dir, entry.dest, rescan=entry.rescan))
            else:
                out.append(RawEvent(entry.kind, path, entry.is_dir, rescan=entry.rescan))
        self.emitted += len(out)
        return out

    def flush_all(self) -> list[RawEvent]:
        """Everything pending, due or not (shutdown)."""
        return self.due(float("inf"))

    def next_due(self) -> float | None:
        """When the next pending event becomes due, or None when idle (O(1)
        apart from skipping stale first-event records)."""
        if not self._pending:
            return None
        entry = self._pending[next(iter(self._pending))]
        when = entry.last + self.debounce
        while self._firsts:
            first, key = self._firsts[0]
            live = self._pending.get(key)
            if live is None or live.first != first:
                self._firsts.popleft()
                continue
            when = min(when, first + self.max_delay)
            break
        return when


def _merge(before: str, then: str) -> str | None:
    if before == CREATED:
        return None if then == DELETED else CREATED
    if before == DELETED:
        return DELETED if then == DELETED else MODIFIED
    # before is modified
    return DELETED if then == DELETED else MODIFIED
