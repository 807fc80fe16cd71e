"""A long expression's index analysis is bounded, and still never loses a match.

The analysis that picks a subscription's necessary conditions took as long
as parsing for a 4 KB expression (3.6 ms for 350 terms). For an expression
longer than ``shapes.LARGE`` it now stops after ``conditions.ANALYSIS_STEPS``
steps: conjuncts that do not fit are left out, and when nothing fits the
expression is filed under "one of its names is present" (sound because the
expression is not true of an empty notification). These tests pin the
plans that come out and check, on random long expressions and random
notifications, that the engine still delivers exactly what the expressions
say.
"""

from __future__ import annotations

import random

from elvin.router.compiling import compile_and_place
from elvin.router.engine import Engine
from elvin.subscription.conditions import EQ, PRESENT
from elvin.subscription.shapes import LARGE, compile_text

NAMES = [f"{c}{i}" for c in "abc" for i in range(10)]


def _term(rng: random.Random) -> str:
    name = rng.choice(NAMES)
    kind = rng.randrange(7)
    if kind == 0:
        return f'{name} == "v{rng.randrange(4)}"'
    if kind == 1:
        return f"{name} > {rng.randrange(20)}"
    if kind == 2:
        return f"{name} < {rng.randrange(20)}.5"
    if kind == 3:
        return f"require({name})"
    if kind == 4:
        return f"{name} != {rng.randrange(5)}"
    if kind == 5:
        return f'begins-with({name}, "v{rng.randrange(4)}")'
    return f"!({name} >= {rng.randrange(20)})"


def _long(rng: random.Random, terms: int) -> str:
    """Groups of one to three terms joined by ``&&`` or ``||``, or-ed."""
    parts = [_term(rng) for _ in range(terms)]
    out, i = [], 0
    while i < len(parts):
        size = rng.randrange(1, 4)
        piece = f" {rng.choice(['&&', '||'])} ".join(parts[i:i + size])
        out.append(f"({piece})" if size > 1 else piece)
        i += size
    return " || ".join(out)


def _notification(rng: random.Random) -> dict:
    note: dict = {}
    for name in rng.sample(NAMES, rng.randrange(0, 4)):
        note[name] = rng.choice([rng.randrange(-5, 25), rng.randrange(25) + 0.5,
                                 f"v{rng.randrange(5)}", "w"])
    return note


def test_a_long_or_is_filed_under_its_names_without_a_full_analysis() -> None:
    text = _long(random.Random(1), 300)
    assert len(text) > LARGE
    plan = compile_text(text).index
    names = sorted({n for n in NAMES if n in text})
    assert plan == tuple(((PRESENT, n),) for n in names)


def test_a_long_expression_keeps_a_conjunct_that_fits_on_either_side() -> None:
    long = _long(random.Random(2), 300)
    for text in (f'Group == "x" && ({long})', f'({long}) && Group == "x"'):
        assert compile_text(text).index == (((EQ, "Group", ("x",)),),)


def test_long_expressions_deliver_exactly_what_they_say() -> None:
    rng = random.Random(26)
    engine = Engine()
    compiled = {}
    for i in range(24):
        text = _long(rng, rng.randrange(90, 200))
        if i % 3 == 0:
            text = f"{rng.choice(NAMES)} > {rng.randrange(20)} && ({text})"
        assert len(text) > LARGE
        result = compile_and_place(text)
        sub = engine.add("owner", text, result.ast, result.matches,
                         placement=result.placement)
        compiled[sub.id] = result.evaluate
    matched = 0
    for _ in range(600):
        note = _notification(rng)
        insecure, _secure = engine.match(note)
        delivered = sorted(i for ids in insecure.values() for i in ids)
        expected = sorted(i for i, evaluate in compiled.items() if evaluate(note) is True)
        assert delivered == expected, note
        matched += len(expected)
    assert matched > 100        # the notifications do match (a test that can fail)
