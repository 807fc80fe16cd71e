"""The sync facade's thread-safe buffer (``elvin.sync._BlockingStream``):
order, drop-oldest bound, end after the buffered items, timeouts, and a
blocked reader woken by a push from another thread."""

from __future__ import annotations

import threading

import pytest

from elvin.client import SubscriptionClosedError
from elvin.sync import _BlockingStream


def test_items_come_out_in_order():
    stream = _BlockingStream(0)
    for i in range(5):
        stream.push(i)
    assert [stream.get(None, "subscription") for _ in range(5)] == list(range(5))


def test_a_full_buffer_drops_the_oldest_and_counts_it():
    stream = _BlockingStream(3)
    for i in range(5):
        stream.push(i)
    assert stream.dropped == 2
    assert [stream.get(0, "subscription") for _ in range(3)] == [2, 3, 4]


def test_end_hands_out_what_was_buffered_then_closes_every_reader():
    stream = _BlockingStream(10)
    stream.push("a")
    stream.end()
    assert stream.get(None, "subscription") == "a"
    for _ in range(2):
        with pytest.raises(SubscriptionClosedError, match="subscription is closed"):
            stream.get(None, "subscription")


def test_an_empty_get_times_out():
    stream = _BlockingStream(10)
    with pytest.raises(TimeoutError, match="no quench event within 0 s"):
        stream.get(0, "quench")
    with pytest.raises(ValueError, match="non-negative"):
        stream.get(-1, "quench")


def test_a_blocked_reader_is_woken_by_a_push_and_by_end():
    stream = _BlockingStream(10)
    got: list = []
    started = threading.Event()

    def reader() -> None:
        started.set()
        got.append(stream.get(None, "subscription"))
        try:
            stream.get(None, "subscription")
        except SubscriptionClosedError as exc:
            got.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    started.wait()
    stream.push("hello")
    stream.end()
    thread.join(30)
    assert not thread.is_alive()
    assert got[0] == "hello" and isinstance(got[1], SubscriptionClosedError)


def test_two_blocked_readers_both_get_an_item():
    # one notify may be pending while more items arrive: the reader that
    # wakes must pass the wake-up on, or the other would sleep forever
    stream = _BlockingStream(0)
    got: list = []
    waiting = threading.Barrier(3)

    def reader() -> None:
        waiting.wait()
        got.append(stream.get(None, "subscription"))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    waiting.wait()
    for _ in range(200):          # let both readers reach cond.wait (no timing assertion)
        with stream._cond:
            if stream._waiting == 2:
                break
        threading.Event().wait(0.01)
    stream.push("a")
    stream.push("b")
    for thread in threads:
        thread.join(30)
    assert sorted(got) == ["a", "b"]
