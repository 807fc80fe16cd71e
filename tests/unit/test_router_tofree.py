"""The to-free list: a dropped structure let go of a bounded slice per step."""

from __future__ import annotations

import gc
import sys

from elvin.router.tofree import ToFree


def _tree(depth: int, fan: int) -> list:
    """Nested lists, ``fan`` children a level: a wide tree's shape."""
    if depth == 0:
        return [object()]
    return [_tree(depth - 1, fan) for _ in range(fan)]


def _steps(to_free: ToFree, step: int) -> list[int]:
    """Run ``steps`` to their end; objects taken off the list per step."""
    counts = []
    steps = to_free.steps(step)
    while True:
        before = to_free.released
        try:
            next(steps)
        except StopIteration:
            counts.append(to_free.released - before)
            return counts
        counts.append(to_free.released - before)


def test_a_structure_held_alone_is_freed_a_bounded_slice_per_step():
    """Each step takes at most ``step`` work units (objects taken off the
    list, referents put on it), and the blocks a step gives back stay
    about that, where dropping the tree at once gave back all of them."""
    gc.collect()
    gc.disable()
    try:
        to_free = ToFree()
        tree = _tree(4, 8)                  # 4,681 lists, 4,096 leaves
        baseline = sys.getallocatedblocks()
        assert to_free.put(tree)
        del tree
        steps = to_free.steps(500)
        worst = 0
        units = []
        while True:
            before, released = sys.getallocatedblocks(), to_free.released
            try:
                next(steps)
            except StopIteration:
                break
            finally:
                worst = max(worst, before - sys.getallocatedblocks())
                units.append(to_free.released - released)
    finally:
        gc.enable()
    assert len(units) > 10
    assert max(units) <= 500
    assert worst <= 500, worst
    assert sys.getallocatedblocks() < baseline - 8000      # all of it went
    assert not to_free.running and not len(to_free)


def test_what_someone_else_holds_is_let_go_of_untouched():
    """A subtree another structure shares is neither walked nor freed nor
    changed: only its share of the dropped structure goes."""
    to_free = ToFree()
    shared = _tree(3, 10)
    mine = [shared, _tree(2, 10), (shared, "x")]
    snapshot = repr(shared)
    to_free.put(mine)
    del mine
    counts = _steps(to_free, 50)
    assert repr(shared) == snapshot
    # the shared tree's 1,111 lists were never taken onto the list
    assert sum(counts) < 400, sum(counts)


def test_put_says_when_steps_must_be_started():
    to_free = ToFree()
    assert to_free.put([1], [2]) is True         # none running: start them
    assert to_free.put([3]) is False             # running: they take it too
    assert len(to_free) == 3
    _steps(to_free, 1)
    assert not to_free.running and not len(to_free)
    assert to_free.put([4]) is True              # over: the next put starts them again
