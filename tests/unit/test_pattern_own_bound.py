"""Issue 42: a regex()/wildcard() pattern's time limit is its own.

The router once gave all the pattern matches of one notification a shared
25 ms of wall clock: whatever ran first (other clients' slow patterns, a
garbage collection, another thread) made a cheap pattern evaluated later
*bottom*, and its subscriber silently missed the notification. Now each
match has its own limit (``patterns.MATCH_TIMEOUT`` of its own CPU time), a
pattern that overruns it is charged to its own subscription (suspended a
while, counted), and nobody else is affected."""

from __future__ import annotations

import time

from elvin.router.engine import Engine
from elvin.subscription import compile, patterns
from elvin.subscription.patterns import MATCH_TIMEOUT, regex_matcher
from elvin.subscription.suspension import Suspended

SLOW = 'regex(Message, "^(a|aa|a{%d})+$")'       # backtracks until its limit on VALUE
VALUE = {"Message": "a" * 40 + "b"}


def add(engine, owner, text):
    c = compile(text)
    return engine.add(owner, text, c.ast, c.matches)


def delivered(engine, attrs, owner):
    return sorted(engine.match_owners(attrs).get(owner, ([], []))[1])


def test_a_cheap_regex_beside_costly_ones_never_misses():
    """Five subscriptions whose patterns each run out of their time come
    first; the cheap ``regex(Message, "b$")`` after them still matches (with
    the shared budget it was bottom: 5 x 20 ms is past 25 ms)."""
    engine = Engine()
    slow = [add(engine, f"slow{k}", SLOW % (k + 1)) for k in range(5)]
    cheap = add(engine, "cheap", 'regex(Message, "b$")')
    assert delivered(engine, VALUE, "cheap") == [cheap.id]
    assert engine.pattern_overruns == len(slow)        # each charged to itself
    # the costly ones are suspended (their own account): not run again now,
    # so the next notification costs the loop nothing for them
    assert all(type(sub.pred.evaluate) is Suspended for sub in slow)
    assert type(cheap.pred.evaluate) is not Suspended
    for _ in range(3):
        assert delivered(engine, VALUE, "cheap") == [cheap.id]
    assert engine.pattern_overruns == len(slow)


def test_a_cheap_regex_beside_thousands_of_other_subscriptions_never_misses():
    """The issue's case: ``regex(t, "a")`` beside many other pattern
    subscriptions of other clients, every one of which is evaluated for the
    notification; it matches every time."""
    engine = Engine()
    for i in range(4000):
        add(engine, f"o{i % 20}", f'regex(t, "^[a-z]+{i}$") || regex(t, "(x|y)+z{i % 7}")')
    for slow in range(3):
        add(engine, "slowpoke", SLOW.replace("Message", "t") % (slow + 1))
    mine = add(engine, "me", 'regex(t, "a")')
    for n in range(5):
        assert delivered(engine, {"t": "a" * 40 + "b" + str(n)}, "me") == [mine.id], n


def test_a_suspended_pattern_is_evaluated_again_later():
    engine = Engine()
    sub = add(engine, "o", SLOW % 1)
    add(engine, "o", 'regex(Message, "b$")')
    engine.match_owners(VALUE)
    wrapper = sub.pred.evaluate
    assert type(wrapper) is Suspended and wrapper.count == 1
    wrapper.until = time.monotonic() - 1            # its suspension is over
    assert delivered(engine, {"Message": "aaa"}, "o") == [sub.id]   # cheap value: runs, true
    engine.match_owners(VALUE)                      # overruns again: twice as long
    assert wrapper.count == 2 and engine.pattern_overruns == 2


def test_a_match_interrupted_from_outside_is_tried_again():
    """A try that ran out of ``regex``'s time (the process's CPU time)
    without this thread spending it (another thread of the process, a
    compile worker, ran meanwhile) says nothing about the pattern: it is
    tried again and its answer stands."""
    compiled = patterns.compile_regex(["b$"])
    calls = []

    def preempted_once(value, timeout):
        calls.append(timeout)
        if len(calls) == 1:
            time.sleep(timeout * 1.5)       # this thread off the CPU all that time
            raise TimeoutError("regex timed out")
        return compiled.search(value, timeout=timeout)

    patterns._THREAD.others = None      # no mark (the sleep spends no CPU time)
    patterns._THREAD.pending = False
    before = patterns.overruns()[0]
    assert patterns._run(preempted_once, "aab") is True
    assert len(calls) == 2 and patterns.overruns()[0] == before


def test_a_match_that_spends_its_time_on_the_cpu_is_bottom_and_counted():
    matcher = regex_matcher(["^(a|aa|a{2})+$"])
    before = patterns.overruns()[0]
    start = time.thread_time()
    assert matcher("a" * 40 + "b") is None
    assert patterns.overruns()[0] == before + 1
    assert time.thread_time() - start >= MATCH_TIMEOUT / 2
    assert matcher("aaaa") is True                  # no state left behind


def test_an_overrun_after_a_mark_costs_one_try():
    """Issue 42: each overrun used to cost two limits (the first try ran out
    of the process's CPU time, and a second try measured this thread's), so a
    step that ended at an overrun held the loop ~40 ms. After ``mark()``
    (the engine marks each step) with no other thread busy, the first try is
    this thread's own: bottom at once."""
    compiled = patterns.compile_regex(["^(a|aa|a{2})+$"])
    calls = []

    def counted(value, timeout):
        calls.append(timeout)
        return compiled.search(value, timeout=timeout)

    before = patterns.overruns()[0]
    patterns.mark()
    assert patterns._run(counted, "a" * 41 + "b") is None
    assert len(calls) == 1 and patterns.overruns()[0] == before + 1


def test_a_try_cut_short_by_another_thread_after_a_mark_is_tried_again():
    """The mark shows another thread's CPU time since: the try is not
    taken as the pattern's own (it is tried again, as without a mark)."""
    import threading

    compiled = patterns.compile_regex(["b$"])
    calls = []

    def preempted_once(value, timeout):
        calls.append(timeout)
        if len(calls) == 1:
            busy = threading.Thread(target=_spin, args=(MATCH_TIMEOUT,))
            busy.start()
            busy.join()
            raise TimeoutError("regex timed out")
        return compiled.search(value, timeout=timeout)

    patterns.mark()
    assert patterns._run(preempted_once, "aab") is True
    assert len(calls) == 2


def _spin(seconds):
    """Spend ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
