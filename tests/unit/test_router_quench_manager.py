"""elvin.router.quench: the manager's announcements (issue 42)."""

from __future__ import annotations

from elvin.router.engine import Engine
from elvin.router.quench import Pending, QuenchManager
from elvin.subscription import compile


def _add(engine, text):
    c = compile(text)
    return engine.add("s", text, c.ast, c.matches)


def test_a_modified_quench_is_told_each_subscription_of_its_names_once():
    """A modified quench's ``pending`` is copies of the engine's per-name
    tables, not one dict merged on the loop (QnchModRqst x -> Group over
    90,000 subscriptions: 15 ms in its handler); a subscription under
    several of the names is told once, one removed meanwhile not at all."""
    engine = Engine()
    sent = []
    manager = QuenchManager(engine, lambda owner, packet: sent.append(packet))
    on_x = _add(engine, "x == 1")
    on_y = [_add(engine, f"y == {i}") for i in range(3)]
    both = _add(engine, "x == 1 && y == 2")
    quench = manager.add("q", ("x",), True)
    assert sorted(p.term_id for p in sent) == sorted([on_x.id, both.id])
    sent.clear()
    manager.modify(quench, names_add=("y",), names_del=("x",), announce=False)
    assert isinstance(quench.pending, Pending) and len(quench.pending) == 5
    assert sorted(quench.pending) == sorted([on_x.id, both.id, *(s.id for s in on_y)])
    engine.remove(on_y[0])
    manager.subscription_removed(on_y[0], {})
    assert on_y[0].id not in quench.pending
    assert manager.advance(quench, float("inf"))
    told = sorted((type(p).__name__, p.term_id) for p in sent)
    assert told == sorted([("SubDelNotify", on_x.id), ("SubAddNotify", on_y[1].id),
                           ("SubAddNotify", on_y[2].id)])
    assert not quench.pending and quench.indexed == frozenset({"y"})


def test_pending_copies_are_the_engines_tables_as_they_were():
    """The copies do not follow the engine: a subscription added after the
    quench started is told by its own change, not again by the announcement."""
    engine = Engine()
    sent = []
    manager = QuenchManager(engine, lambda owner, packet: sent.append(packet))
    first = _add(engine, "x == 1")
    quench = manager.add("q", ("x",), True, announce=False)
    later = _add(engine, "x == 2")
    manager.subscription_added(later)
    assert manager.advance(quench, float("inf"))
    assert sorted(p.term_id for p in sent) == sorted([first.id, later.id])
