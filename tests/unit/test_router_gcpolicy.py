"""elvind's garbage-collection policy (elvin.router.gcpolicy), on this process's
real collector: automatic full passes are off, what survives a managed pass
is frozen (never examined again), the young generations' passes schedule
managed ones on the loop, and cycles of frozen objects are reclaimed once
enough churn allows a thaw."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from elvin.router import gcpolicy
from elvin.router.gcpolicy import GcPolicy


class Cell:
    """A tracked object that can sit in a reference cycle."""

    def __init__(self) -> None:
        self.other: object = None


@pytest.fixture
def policy():
    loop = asyncio.new_event_loop()
    counts = {"population": 0, "churn": 0}
    made = GcPolicy(loop, lambda: counts["population"], lambda: counts["churn"])
    made.counts = counts  # type: ignore[attr-defined]
    before = gc.get_threshold()
    made.install()
    try:
        yield made
    finally:
        made.uninstall()
        loop.close()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_no_automatic_full_pass_and_survivors_are_frozen(policy):
    assert gc.get_threshold()[2] == gcpolicy._NEVER
    frozen = gc.get_freeze_count()
    kept = [Cell() for _ in range(1000)]
    policy.collect()
    assert gc.get_freeze_count() >= frozen + len(kept)
    tracked = {id(o) for g in range(3) for o in gc.get_objects(generation=g)}
    assert not any(id(c) in tracked for c in kept)      # a full pass never sees them


def test_young_passes_schedule_a_managed_pass_on_the_loop(policy):
    async def grow():
        kept = []
        while policy.passes == 0:
            kept.extend(Cell() for _ in range(1000))    # survivors: gen-1 passes
            await asyncio.sleep(0)
        return kept

    policy.loop.run_until_complete(asyncio.wait_for(grow(), 30))
    assert policy.passes >= 1


def test_frozen_cycles_are_reclaimed_after_enough_churn(policy):
    a, b = Cell(), Cell()
    a.other, b.other = b, a
    alive = weakref.ref(a)
    policy.collect()                # the cycle is frozen
    del a, b
    policy.collect()
    assert alive() is not None      # frozen: not reclaimed yet
    policy.counts["churn"] += gcpolicy.THAW_CHURN_MIN + 1
    policy.collect()
    assert alive() is None
    assert policy.thaws == 1


def test_young_passes_that_find_no_garbage_freeze_at_once(policy):
    """A registration burst: its objects are frozen after their first young
    pass instead of being examined again by generation 1 and the managed pass."""
    frozen = gc.get_freeze_count()
    kept = [Cell() for _ in range(5 * gc.get_threshold()[0])]
    assert gc.get_freeze_count() >= frozen + len(kept) - gc.get_threshold()[0]
    assert policy.passes == 0


def test_young_garbage_is_collected_not_frozen(policy):
    """A young pass that finds garbage freezes nothing: what was there when
    it ran is left to generation 1 and the managed pass."""
    for _ in range(3):
        a, b = Cell(), Cell()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        frozen = gc.get_freeze_count()
        gc.collect(0)
        assert alive() is None
        assert gc.get_freeze_count() == frozen
