"""filewatcher.watches: planning OS watches, the watchdog plumbing, and
filewatcher.snapshots: re-scans that find what live events missed."""

from __future__ import annotations

import os
import struct
import sys

import pytest
from elvin_apps.filewatcher.pathset import FILE, TREE, Interest
from elvin_apps.filewatcher.snapshots import Snapshots
from elvin_apps.filewatcher.watches import (
    CREATED,
    DELETED,
    INOTIFY,
    MODIFIED,
    MOVED,
    POLLING,
    RawEvent,
    WatchKey,
    WatchManager,
    _convert,
    _inotify_observer_class,
    _overflow_callbacks,
    inotify_watch_count,
    plan,
)

from tests.waiting import until

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")


def f(path: str) -> Interest:
    return Interest(FILE, path, path)


def t(path: str, prefix: str | None = None) -> Interest:
    return Interest(TREE, path, path, prefix)


EXISTING = {"/r", "/r/a", "/r/a/b", "/r/c", "/q"}


def isdir(path: str) -> bool:
    return path in EXISTING


def test_a_file_is_a_watch_on_its_directory_and_files_share_it():
    p = plan([f("/r/a/x"), f("/r/a/y"), f("/r/c/z")], ["/r"], isdir)
    assert p.watches == {WatchKey("/r/a", False): {f("/r/a/x"), f("/r/a/y")},
                         WatchKey("/r/c", False): {f("/r/c/z")}}
    assert not p.pending


def test_watches_inside_a_tree_fold_into_it():
    p = plan([f("/r/a/b/x"), t("/r/a"), t("/r/a/b"), f("/r/a/y"), f("/r/c/z")], ["/r"], isdir)
    assert set(p.watches) == {WatchKey("/r/a", True), WatchKey("/r/c", False)}
    assert p.watches[WatchKey("/r/a", True)] == {f("/r/a/b/x"), t("/r/a"), t("/r/a/b"),
                                                  f("/r/a/y")}
    # a file directly in the tree's directory folds too
    p = plan([t("/r"), f("/r/x")], ["/r"], isdir)
    assert set(p.watches) == {WatchKey("/r", True)}


def test_a_missing_directory_is_pending_on_its_nearest_ancestor():
    p = plan([f("/r/a/new/deeper/x"), t("/r/zz")], ["/r"], isdir)
    assert set(p.watches) == {WatchKey("/r/a", False), WatchKey("/r", False)}
    assert p.pending == {WatchKey("/r/a", False), WatchKey("/r", False)}
    assert p.pending_interests == {f("/r/a/new/deeper/x"), t("/r/zz")}
    # but never above the roots
    p = plan([f("/gone/root/x")], ["/gone/root"], isdir)
    assert p.watches == {} and f("/gone/root/x") in p.unplaceable


def test_interest_coverage():
    tree = t("/r/a", prefix="/r/a/lo")
    assert tree.covers("/r/a/log") and tree.covers("/r/a/lo/x") and not tree.covers("/r/a/x")
    assert not tree.covers("/r/ab/log")
    assert f("/r/a").covers("/r/a") and not f("/r/a").covers("/r/a/b")
    assert t("/r").covers("/r/x/y/z") and not t("/r").covers("/rx")


def test_watchdog_events_are_converted():
    from watchdog.events import (
        DirModifiedEvent,
        FileCreatedEvent,
        FileDeletedEvent,
        FileModifiedEvent,
        FileMovedEvent,
    )
    assert _convert(FileCreatedEvent("/a")) == RawEvent(CREATED, "/a", False)
    assert _convert(FileModifiedEvent("/a")) == RawEvent(MODIFIED, "/a", False)
    assert _convert(FileDeletedEvent("/a")) == RawEvent(DELETED, "/a", False)
    assert _convert(FileMovedEvent("/a", "/b")) == RawEvent(MOVED, "/a", False, "/b")
    assert _convert(FileMovedEvent("", "/b")) == RawEvent(CREATED, "/b", False)
    assert _convert(DirModifiedEvent("/d")) is None


@linux_only
def test_overflow_is_reported():
    cls = _inotify_observer_class()
    assert cls is not None
    from watchdog.observers.inotify_c import Inotify, InotifyConstants

    seen = []
    _overflow_callbacks.append(lambda: seen.append(1))
    try:
        buffer = struct.pack("iIII", -1, InotifyConstants.IN_Q_OVERFLOW, 0, 0)
        buffer += struct.pack("iIII", 1, InotifyConstants.IN_MODIFY, 0, 0)
        parsed = list(Inotify._parse_event_buffer(buffer))
        assert [wd for wd, *_ in parsed] == [-1, 1]      # events still pass through
        assert seen == [1]
    finally:
        _overflow_callbacks.pop()


@linux_only
async def test_manager_adds_shares_and_removes_os_watches(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    got: list[RawEvent] = []
    manager = WatchManager(got.extend, poll_interval=0.1)
    manager.start()
    before = inotify_watch_count()
    try:
        root = str(tmp_path)
        interests = [f(f"{root}/c/x"), t(f"{root}/a")]
        added, removed = await manager.apply(plan(interests, [root]))
        assert set(added) == {WatchKey(f"{root}/c", False), WatchKey(f"{root}/a", True)}
        # a/ and a/b are two kernel watches, c/ one
        assert manager.os_watch_count() == 3
        assert inotify_watch_count() - before == 3
        assert manager.route(f"{root}/a/b/z") == [t(f"{root}/a")]
        assert manager.route(f"{root}/c/x") == [f(f"{root}/c/x")]
        assert manager.route(f"{root}/c/other") == []

        (tmp_path / "c" / "x").write_text("1")
        await until(lambda: RawEvent(CREATED, f"{root}/c/x") in got)

        added, removed = await manager.apply(plan([t(f"{root}/a")], [root]))
        assert added == [] and removed == [WatchKey(f"{root}/c", False)]
        assert manager.os_watch_count() == 2
        added, removed = await manager.apply(plan([], [root]))
        assert manager.watches == {} and inotify_watch_count() == before
    finally:
        await manager.stop()


@linux_only
async def test_a_directory_deleted_and_made_again_is_watched_again(tmp_path):
    """watchdog keeps the emitter of a deleted directory: the watch that
    replaces it must not inherit it (it would report nothing)."""
    d = tmp_path / "d"
    d.mkdir()
    got: list[RawEvent] = []
    manager = WatchManager(got.extend)
    manager.start()
    try:
        wanted = plan([f(f"{d}/x")], [str(tmp_path)])
        await manager.apply(wanted)
        d.rmdir()
        await until(lambda: RawEvent(DELETED, str(d), True) in got)   # its emitter stops
        manager.mark_dead(str(d))
        d.mkdir()
        added, _ = await manager.apply(wanted)
        assert added == [WatchKey(str(d), False)]
        (d / "x").write_text("again")
        await until(lambda: RawEvent(CREATED, f"{d}/x") in got)
    finally:
        await manager.stop()


def admitted_backend(watch) -> str:
    """The word "os" for a watch the manager holds with the operating system:
    inotify, or polling where the kernel had no inotify instance left (a limit per user, which other processes of
    the same user -- another test worker, another container -- may have used
    up); anything else as it is."""
    if watch.backend == INOTIFY:
        return "os"
    if watch.backend == POLLING and "inotify" in (watch.error or ""):
        return "os"
    return watch.backend


@linux_only
async def test_manager_respects_max_watches(tmp_path):
    for name in "abc":
        (tmp_path / name).mkdir()
    manager = WatchManager(lambda batch: None, max_watches=2)
    manager.start()
    try:
        root = str(tmp_path)
        await manager.apply(plan([f(f"{root}/{n}/x") for n in "abc"], [root]))
        backends = sorted(admitted_backend(w) for w in manager.watches.values())
        assert backends == ["os", "os", "refused"]
        assert manager.os_watch_count() == 2
        # when one goes away the refused one gets its turn
        await manager.apply(plan([f(f"{root}/{n}/x") for n in "bc"], [root]))
        assert sorted(admitted_backend(w) for w in manager.watches.values()) == ["os", "os"]
    finally:
        await manager.stop()


async def test_rescan_reports_unhandled_changes_only(tmp_path):
    (tmp_path / "keep").write_text("k")
    (tmp_path / "mod").write_text("m")
    (tmp_path / "gone").write_text("g")
    (tmp_path / "from").write_text("moving")
    key = WatchKey(str(tmp_path), False)
    snaps = Snapshots()
    await snaps.add([key])
    assert snaps.known(str(tmp_path / "keep")).exists
    assert snaps.known(str(tmp_path / "nope")) == snaps.known(str(tmp_path / "nope2"))
    assert not snaps.known(str(tmp_path / "nope")).exists

    os.utime(tmp_path / "mod", ns=(1, 10**18))        # content change as seen by mtime
    (tmp_path / "mod").write_text("mm")
    (tmp_path / "gone").unlink()
    (tmp_path / "new").write_text("n")      # likely reuses gone's inode: not a move
    (tmp_path / "handled").write_text("h")             # created, and already reported
    snaps.note(str(tmp_path / "handled"), os.lstat(tmp_path / "handled"), handled=True)
    os.rename(tmp_path / "from", tmp_path / "to")

    events = await snaps.rescan([key])
    found = {(e.kind, os.path.basename(e.path), e.dest and os.path.basename(e.dest))
             for e in events}
    assert found == {(MODIFIED, "mod", None), (DELETED, "gone", None), (CREATED, "new", None),
                     (MOVED, "from", "to")}
    assert all(e.rescan for e in events)
    # the fresh snapshot is the new baseline
    assert await snaps.rescan([key]) == []


@linux_only
async def test_stop_waits_for_an_apply_in_flight_and_nothing_outlives_it(tmp_path):
    """The daemon stops while a re-plan schedules hundreds of watches on a
    thread (and the re-plan is cancelled, as ``FileWatcher.close`` does):
    ``stop`` waits for it, so no kernel watch and no observer thread is left
    behind, and a later ``apply`` does nothing."""
    import asyncio
    import threading

    count = 150         # past the usual 128 inotify instances: some are polled
    for i in range(count):
        (tmp_path / f"d{i}").mkdir()
    threads_before = set(threading.enumerate())
    before = inotify_watch_count()
    manager = WatchManager(lambda batch: None, max_watches=1000, poll_interval=0.1)
    manager.start()
    root = str(tmp_path)
    wanted = plan([f(f"{root}/d{i}/x") for i in range(count)], [root])
    applying = asyncio.ensure_future(manager.apply(wanted))
    await until(lambda: inotify_watch_count() > before, what="scheduling to start",
                interval=0.001)
    applying.cancel()
    await manager.stop()
    await asyncio.gather(applying, return_exceptions=True)
    assert await manager.apply(wanted) == ([], [])
    await until(lambda: inotify_watch_count() == before, what="every kernel watch to go")
    # (asyncio's own executor threads, which ran the scheduling, stay for reuse)
    await until(lambda: not [t for t in threading.enumerate()
                             if t not in threads_before and t.is_alive()
                             and not t.name.startswith("asyncio_")],
                what="every observer thread to end")
