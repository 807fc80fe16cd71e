"""What the router replaces holds no reference cycle, so it is freed the
moment it is dropped, by its reference count alone.

elvind freezes what survives its young collections (gcpolicy), so an object
that dies in a cycle stays in memory until a rare full collection: a
modified subscription's code (its functions lived in their own globals), a
replaced pull filter (the matcher and its engine pointed at each other, and
every compiled term stayed in a cache), a closed session (it and its send
queue held each other's bound methods). Each check here drops the object with
the cyclic collector off and looks at a weak reference to it."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from elvin.federation.pullfilter import PullMatcher
from elvin.protocol import ConnRqst, SubAddRqst, frame
from elvin.router.config import RouterConfig
from elvin.router.engine import Engine
from elvin.router.server import Router
from elvin.subscription import parse
from elvin.subscription.shapes import ShapeCompiler, compile_text


@contextmanager
def no_cyclic_collector() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


TEXTS = [
    # more literals than the shape cache takes: compiled on its own
    'Group == "a" && Seq > 1 && Seq < 5 && Name == "x" && K == 3 && L == "q" && M == 1 '
    '&& N == 2 && O == 3 && P == 4 && Q == 5 && R == 6 && S == 7',
    # a shape's parameterised code with several literals
    'Group == "a" && Seq > 1 && Seq < 5 && Name == "x" && K == 3 && L == "q"',
    # a shape's parameterised code
    'Group == "g1" && require(Message)',
    # helpers (hoisted, exact values), a regex matcher
    'regex(M, "^a+$") || Price * 2 > 3 || !(A == 1 ^^ B == 2)',
    # a long chain: a tree of helper functions
    " || ".join(f'(G == "h{n}" && S > {n})' for n in range(300)),
]


def test_compiled_code_is_freed_when_dropped():
    shapes = ShapeCompiler()
    for text in TEXTS:
        for compile_ in (shapes.compile, compile_text):
            with no_cyclic_collector():
                compiled = compile_(text)
                refs = [weakref.ref(compiled.matches), weakref.ref(compiled.evaluate)]
                del compiled
                assert [r() for r in refs] == [None, None], (compile_.__name__, text[:40])


def test_a_modified_subscriptions_old_code_is_freed():
    shapes = ShapeCompiler()
    engine = Engine()
    with no_cyclic_collector():
        first = shapes.compile(TEXTS[0])
        sub = engine.add("owner", TEXTS[0], first.ast, first.matches)
        old = weakref.ref(first.matches)
        del first
        second = shapes.compile(TEXTS[0].replace('"x"', '"y"'))
        engine.modify(sub, ast=second.ast, evaluate=second.matches)
        del second
        assert old() is None


def test_a_replaced_pull_matcher_and_its_code_are_freed():
    pull = parse(" || ".join(f'(Group == "p{n}" && Seq > {n} && Host == "h{n}" '
                             f'&& Size != {n} && User == "u")' for n in range(20)))
    for dismantled in (True, False):
        with no_cyclic_collector():
            matcher = PullMatcher()
            matcher.update(pull)
            assert matcher({"Group": "p3", "Seq": 9, "Host": "h3", "Size": 1, "User": "u"})
            code = [weakref.ref(term.evaluate) for term in matcher.subs.values()]
            gone = weakref.ref(matcher)
            index = weakref.ref(matcher.index)
            if dismantled:
                matcher.dismantle()         # the peer's next FedSubReplace replaced it
            # the index holds no cycle: dropped whole, all of it goes at once
            matcher = PullMatcher()
            assert gone() is None and index() is None
            assert all(ref() is None for ref in code)


def test_a_dropped_engine_is_freed_with_its_index():
    """The index's filings hold no reference back (an entry's ``place`` is
    a path of keys, not of containers), so a predicate's code goes with its
    last subscription, nested buckets and all, and a dismantled engine's
    index with its reference count."""
    shapes = ShapeCompiler()
    with no_cyclic_collector():
        engine = Engine()
        texts = ([f'Group == "g{i % 3}" && Seq >= {i} && Seq < {i + 10}' for i in range(60)]
                 + [f'begins-with(Path, "/srv/{i}") && Size > {i}' for i in range(40)]
                 + ['regex(Message, "^a+$")', "x + 1 > y"])
        subs = []
        for text in texts:
            compiled = shapes.compile(text)
            subs.append(engine.add("owner", text, compiled.ast, compiled.matches,
                                   names=compiled.names, index=compiled.index))
        assert engine.match({"Group": "g1", "Seq": 15, "Path": "/srv/17x", "Size": 20})[0]
        del compiled
        code = [weakref.ref(sub.pred.evaluate) for sub in subs]      # type: ignore[union-attr]
        for sub in subs[:50]:
            engine.remove(sub)
        del sub
        assert all(ref() is None for ref in code[:50])
        assert not any(ref() is None for ref in code[50:])
        index = weakref.ref(engine.index)
        del subs
        engine.dismantle()      # (subscriptions and predicates point at each other)
        engine = Engine()
        assert index() is None
        assert all(ref() is None for ref in code)


async def test_a_closed_session_is_freed():
    router = Router(RouterConfig(listen=["elvin://127.0.0.1:0"]))
    await router.start()
    try:
        sessions: list[weakref.ref] = []
        for _ in range(3):
            _, writer = await asyncio.open_connection("127.0.0.1", router.ports[0])
            writer.write(frame(ConnRqst(1, 4, 0, {})) + frame(SubAddRqst(2, "require(X)")))
            await writer.drain()
            while len(router.engine) == 0:
                await asyncio.sleep(0.005)
            session = next(iter(router.sessions))
            sessions.append(weakref.ref(session))
            queue = weakref.ref(session.queue)
            del session
            with no_cyclic_collector():
                writer.close()
                while router.sessions or len(router.engine):
                    await asyncio.sleep(0.005)
                for _ in range(3):          # callbacks queued for it run
                    await asyncio.sleep(0)
                assert sessions[-1]() is None and queue() is None
    finally:
        await router.stop()


def test_learning_a_shape_leaves_no_cyclic_garbage():
    """Learning a new shape (its tree template, its builder) made recursive
    nested functions, each a cycle through its own cell: 16,384 subscriptions
    of distinct shapes, all unsubscribed, left 1.6 million blocks frozen in
    elvind until a full collection (issue 42)."""
    shapes = ShapeCompiler()
    texts = [f'A{i} == "v{i}" && require(M{i})' for i in range(20)]
    texts += [f'begins-with(S{i}, "t") || N{i} > {i} || (X == 1 && Y{i} < 2.5)' for i in range(20)]
    with no_cyclic_collector():
        for text in texts:
            shapes.compile(text)
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            left = [type(o).__qualname__ for o in gc.garbage]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert len(shapes) == len(texts)
    assert left == []


def test_a_forgotten_shape_leaves_no_cyclic_garbage():
    """A shape and its layout pointed at each other: each shape the cache
    forgot (least recently used) died in a cycle, with its trees and code
    templates -- 65,536 subscriptions of distinct shapes, all unsubscribed,
    left 7 million blocks until a full collection (issue 42)."""
    shapes = ShapeCompiler(max_shapes=4)
    texts = [f'A{i} == "v{i}" && require(M{i})' for i in range(40)]
    with no_cyclic_collector():
        for text in texts:
            shapes.compile(text)
            shapes.compile(text.replace('"v', '"w'))       # its layout, learnt
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            left = [type(o).__qualname__ for o in gc.garbage]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert len(shapes) == 4
    assert left == []
