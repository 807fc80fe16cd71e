"""filewatcher.coalesce: bursts of kernel events -> one event per change."""

from __future__ import annotations

from elvin_apps.filewatcher.coalesce import Coalescer
from elvin_apps.filewatcher.watches import CREATED, DELETED, MODIFIED, MOVED, RawEvent


def run(events, existed=None, debounce=0.1, max_delay=1.0):
    """Feed (time, event) pairs; return (time, kind, path, dest) as they fall due."""
    c = Coalescer(debounce, max_delay, existed=existed)
    out = []
    for t, ev in events:
        for e in c.due(t):
            out.append((t, e.kind, e.path, e.dest))
        c.add(ev, t)
    t = events[-1][0] if events else 0
    while len(c):
        t = c.next_due()
        out.extend((t, e.kind, e.path, e.dest) for e in c.due(t))
    return out


def ev(kind, path, dest=None, is_dir=False):
    return RawEvent(kind, path, is_dir, dest)


def kinds(out):
    return [(k, p, d) for _, k, p, d in out]


def test_many_writes_are_one_modified_after_the_quiet_time():
    out = run([(0.00, ev(MODIFIED, "/f")), (0.01, ev(MODIFIED, "/f")),
               (0.05, ev(MODIFIED, "/f")), (0.08, ev(MODIFIED, "/f"))])
    assert kinds(out) == [(MODIFIED, "/f", None)]
    assert abs(out[0][0] - 0.18) < 1e-9          # trailing edge: last + debounce


def test_a_busy_file_is_still_reported_every_max_delay():
    events = [(i * 0.05, ev(MODIFIED, "/f")) for i in range(60)]     # 3 s of writes
    out = run(events, max_delay=1.0)
    assert len(out) == 3 and all(k == MODIFIED for _, k, _, _ in out)


def test_created_then_modified_is_created_and_transients_vanish():
    assert kinds(run([(0, ev(CREATED, "/f")), (0.01, ev(MODIFIED, "/f"))])) == [
        (CREATED, "/f", None)]
    assert run([(0, ev(CREATED, "/t")), (0.01, ev(MODIFIED, "/t")),
                (0.02, ev(DELETED, "/t"))]) == []


def test_deleted_then_created_is_modified():
    assert kinds(run([(0, ev(DELETED, "/f")), (0.01, ev(CREATED, "/f"))])) == [
        (MODIFIED, "/f", None)]
    assert kinds(run([(0, ev(MODIFIED, "/f")), (0.01, ev(DELETED, "/f"))])) == [
        (DELETED, "/f", None)]


def test_atomic_save_over_an_existing_file_is_modified():
    events = [(0, ev(CREATED, "/d/.f.tmp")), (0.01, ev(MODIFIED, "/d/.f.tmp")),
              (0.02, ev(MOVED, "/d/.f.tmp", "/d/f"))]
    assert kinds(run(events, existed=lambda p: p == "/d/f")) == [(MODIFIED, "/d/f", None)]
    # a new file written atomically is created
    assert kinds(run(events, existed=lambda p: False)) == [(CREATED, "/d/f", None)]


def test_vim_style_save_is_modified():
    events = [(0, ev(MOVED, "/d/f", "/d/f~")), (0.01, ev(CREATED, "/d/f")),
              (0.02, ev(MODIFIED, "/d/f")), (0.03, ev(DELETED, "/d/f~"))]
    assert kinds(run(events)) == [(MODIFIED, "/d/f", None)]


def test_moves_keep_both_paths_and_chain():
    assert kinds(run([(0, ev(MOVED, "/a", "/b"))])) == [(MOVED, "/a", "/b")]
    assert kinds(run([(0, ev(MOVED, "/a", "/b")), (0.01, ev(MOVED, "/b", "/c"))])) == [
        (MOVED, "/a", "/c")]
    assert run([(0, ev(MOVED, "/a", "/b")), (0.01, ev(MOVED, "/b", "/a"))]) == []
    assert kinds(run([(0, ev(MOVED, "/a", "/b")), (0.01, ev(DELETED, "/b"))])) == [
        (DELETED, "/a", None)]


def test_different_paths_are_independent_and_ordered_by_first_event():
    out = run([(0, ev(MODIFIED, "/b")), (0.01, ev(CREATED, "/a")), (0.02, ev(MODIFIED, "/b"))])
    assert sorted(kinds(out)) == [(CREATED, "/a", None), (MODIFIED, "/b", None)]


def test_next_due_and_large_bursts_stay_cheap():
    c = Coalescer(0.1, 1.0)
    assert c.next_due() is None
    for i in range(100_000):
        c.add(ev(CREATED, f"/d/{i}"), i * 1e-6)
    assert abs(c.next_due() - 0.1) < 1e-9
    assert c.due(0.05) == []
    out = c.due(0.2)
    assert len(out) == 100_000 and len(c) == 0 and c.next_due() is None
