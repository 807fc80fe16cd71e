"""The term index's structure, checked after every change (sans-IO, with
no engine): random entries on a few attributes (values, ranges, prefixes,
suffixes, presence, several alternatives, an alternative repeated) are
added and removed with buckets splitting at 2, 3 and 16, and after each
step:

* every bucket's ``checked`` count and ``plain`` flag are what its entries
  say (a bucket wrongly plain would hand out entries unchecked and skip
  its level below: a missed delivery);
* every entry in a bin has checks that start with a range on the bin's own
  attribute (``_emit_binned`` compares that one inline);
* ``candidates`` holds every entry that some alternative of whose the
  notification meets, and each once unless the index says repeats are
  possible;

and once everything is removed, nothing is left: no dimension, bucket or
level. (The engine-level tests check deliveries; these check what they
rest on.)"""

from __future__ import annotations

import math
import random

import pytest

import elvin.subscription.index as ix
from elvin.subscription.conditions import EQ, PREFIX, PRESENT, RANGE, SUFFIX


class Entry:
    __slots__ = ("place", "n", "plan")

    def __init__(self, n: int, plan: tuple) -> None:
        self.n, self.plan, self.place = n, plan, ()

    def __repr__(self) -> str:
        return f"Entry{self.n}"


ATTRIBUTES = ["a", "b", "c"]
VALUES = [0, 1, 2, 3, 5, 7, 10, 2.5, -1, float("nan"), -0.0, 2**60, "ab", "abc", "x", "b",
          "cab"]


def _condition(rng: random.Random, dim: str) -> tuple:
    kind = rng.choice([EQ, RANGE, RANGE, RANGE, PREFIX, SUFFIX, PRESENT])
    if kind == EQ:
        return (EQ, dim, tuple(rng.sample([0, 1, 2, 3, 5, "ab", "x"], rng.randint(1, 2))))
    if kind == RANGE:
        lo = rng.choice([-math.inf, 0, 1, 2, 3, 5])
        hi = rng.choice([math.inf, 2, 3, 5, 7, 10])
        lo, hi = min(lo, hi), max(lo, hi)
        return (RANGE, dim, float(lo), float(hi))
    if kind in (PREFIX, SUFFIX):
        return (kind, dim, tuple(rng.sample(["a", "ab", "abc", "b", "x"], rng.randint(1, 2))))
    return (PRESENT, dim)


def _holds(cond: tuple, attrs: dict) -> bool:
    if cond[1] not in attrs:
        return False
    value = attrs[cond[1]]
    if cond[0] == EQ:
        return ix._key(value) in cond[2]
    if cond[0] == RANGE:
        if type(value) is str:
            return False
        position = value if value == value else math.inf
        return cond[2] <= position <= cond[3]
    if cond[0] == PREFIX:
        return type(value) is str and value.startswith(cond[2])
    if cond[0] == SUFFIX:
        return type(value) is str and value.endswith(cond[2])
    return True


def _check_level(level) -> None:
    for dim, d in level.dims.items():
        slots = []
        if d.eq:
            slots += [("value", s) for s in d.eq.values()]
        if d.bins:
            slots += [("bin", s) for s in d.bins.values()]
        for holder in (d.lower, d.upper, d.prefix, d.suffix):
            if holder is not None:
                slots += [("sorted", s) for s in holder.slots.values()]
        if d.present is not None:
            slots.append(("present", d.present))
        for kind, slot in slots:
            _check_slot(kind, dim, slot)
    if level.always is not None:
        _check_slot("always", None, level.always)


def _first(checks: tuple) -> tuple:
    return checks if type(checks[0]) is int else checks[0]


def _check_slot(kind: str, dim, slot) -> None:
    if type(slot) is ix._Bucket:
        with_checks = sum(1 for checks in slot.values() if checks)
        assert slot.checked == with_checks
        assert slot.plain == (slot.level is None and with_checks == 0)
        if kind == "bin":
            for checks in slot.values():
                if checks:
                    assert _first(checks)[0] == RANGE and _first(checks)[1] == dim, checks
        if slot.level is not None:
            assert not slot.level.empty()
            _check_level(slot.level)
    elif type(slot) is tuple and kind == "bin":
        assert _first(slot[1])[0] == RANGE and _first(slot[1])[1] == dim, slot


@pytest.mark.parametrize("split", [2, 3, 16])
@pytest.mark.parametrize("seed", range(8))
def test_the_index_stays_sound_through_adds_and_removals(monkeypatch, seed, split):
    monkeypatch.setattr(ix, "SPLIT", split)
    rng = random.Random(seed)
    index = ix.TermIndex()
    live: list[Entry] = []
    for step in range(250):
        if live and rng.random() < 0.35:
            index.remove(live.pop(rng.randrange(len(live))))
        else:
            plan = [tuple(_condition(rng, dim) for dim in rng.sample(ATTRIBUTES, rng.randint(1, 3)))
                    for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.1:
                plan.append(plan[0])
            entry = Entry(step, tuple(plan))
            index.add(entry, entry.plan)
            live.append(entry)
        _check_level(index._root)
        for _ in range(4):
            attrs = {a: rng.choice(VALUES) for a in ATTRIBUTES if rng.random() < 0.8}
            got = index.candidates(attrs)
            wanted = {e for e in live
                      if any(all(_holds(c, attrs) for c in alt) for alt in e.plan)}
            assert not wanted - set(got), (step, attrs, wanted - set(got))
            if not index.repeats:
                assert len(got) == len(set(got)), (step, attrs)
    for entry in live:
        index.remove(entry)
    assert index._root.empty()
    assert not index._root.dims and index.repeats == 0


def test_a_bucket_splits_once_it_passes_split():
    """Thousands of quotes on one symbol: the symbol's bucket files its
    entries by price as soon as it holds more than SPLIT with checks (it
    once waited for the next power of two, 32 at SPLIT 16)."""
    index = ix.TermIndex()
    entries = [Entry(i, (((EQ, "Symbol", ("X",)), (RANGE, "Price", float(i), math.inf)),))
               for i in range(ix.SPLIT + 1)]
    for entry in entries[:-1]:
        index.add(entry, entry.plan)
    bucket = index._root.dims["Symbol"].eq["X"]
    assert bucket.level is None
    index.add(entries[-1], entries[-1].plan)
    assert bucket.level is not None
    found = index.candidates({"Symbol": "X", "Price": 3})
    assert sorted(found, key=lambda e: e.n) == entries[:4]     # prices at or below 3
