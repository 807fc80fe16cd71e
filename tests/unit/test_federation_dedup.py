"""``dedup.Recent``: copies of one notification told apart by their path."""

from __future__ import annotations

from elvin.federation.dedup import DEDUP_ENTRIES, PRUNE_STEP, Recent, content_key


def test_a_copy_by_another_path_is_dropped_within_the_window():
    recent = Recent(window=2.0)
    key = ("r0", content_key({"n": 1}))
    assert recent.first(key, ("r1", "r0"), 0.0)
    assert not recent.first(key, ("r2", "r0"), 1.0)     # the same, round another way
    assert recent.dropped == 1


def test_equal_content_by_the_same_path_is_a_repeat_not_a_copy():
    recent = Recent(window=2.0)
    key = ("r0", content_key({"n": 1}))
    for t in range(5):
        assert recent.first(key, ("r1", "r0"), t * 0.1)
    assert recent.dropped == 0


def test_past_the_window_another_path_is_taken():
    recent = Recent(window=2.0)
    key = ("r0", content_key({"n": 1}))
    assert recent.first(key, ("r1", "r0"), 0.0)
    assert recent.first(key, ("r2", "r0"), 2.5)
    assert not recent.first(key, ("r1", "r0"), 3.0)     # now r2's is the one held


def test_origins_and_contents_are_apart():
    recent = Recent(window=2.0)
    assert recent.first(("r0", content_key({"n": 1})), ("r1", "r0"), 0.0)
    assert recent.first(("r9", content_key({"n": 1})), ("r2", "r9"), 0.0)
    assert recent.first(("r0", content_key({"n": 2})), ("r2", "r0"), 0.0)


def test_memory_is_bounded():
    recent = Recent(window=100.0, entries=10)
    for n in range(50):
        recent.first(("r0", n), ("r1", "r0"), 0.0)
    assert len(recent) <= 10


def test_a_quiet_spell_is_forgotten_a_few_at_a_time_and_what_lingers_drops_nothing():
    """After a quiet spell every entry is past the window; forgetting all
    65,536 in the call that came next held the router's loop for some
    50 ms. One call forgets at most ``PRUNE_STEP``, and an entry that
    lingers past the window no longer tells a copy from anything."""
    recent = Recent(2.0)
    for i in range(DEDUP_ENTRIES):
        assert recent.first(("o", i), ("a",), 0.0)
    assert recent.first(("o", -1), ("a",), 10.0)
    assert len(recent) == DEDUP_ENTRIES - PRUNE_STEP + 1
    # lingering entries, by another path, past the window: taken
    assert all(recent.first(("o", i), ("b",), 10.0) for i in range(PRUNE_STEP, 1000))
    # and within the window of those just taken, a copy by another path is not
    assert not recent.first(("o", 500), ("c",), 11.0)


def test_forgetting_keeps_up_with_a_steady_rate():
    """Each call adds at most one entry and forgets up to ``PRUNE_STEP``
    past the window, so at a steady rate the memory holds about one
    window's worth, not everything ever seen."""
    recent = Recent(1.0)
    for i in range(20000):                      # 1,000 a second for 20 s
        recent.first(("o", i), ("a",), i / 1000)
    assert len(recent) <= 1001
