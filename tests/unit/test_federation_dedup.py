"""``dedup.Recent``: copies of one notification told apart by their path."""

from __future__ import annotations

from elvin.federation.dedup import Recent, content_key


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
