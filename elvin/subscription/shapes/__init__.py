"""Register subscriptions by *shape*: parse, check, analyse and compile once per shape.

Most subscriptions a router sees differ only in their constants
(``Group == "g1" && require(Message)``, ``Group == "g2" && ...``). Their
*shape* is the token sequence with each literal replaced by its class
(string, int32, int64 or real64 literal): it decides everything the lark
parser does (LALR looks only at token types; the callbacks at operator,
function and name texts, which stay in the key), so one parse gives a
*template* that rebuilds the exact tree lark would make for any text of that
shape. Three parts, one module each:

* ``spelling``: *layouts* -- a text spelled as a known one but for its
  literals is matched as a whole, untokenised (``elvin.subscription.tokens``
  gives the shape key of a new one);
* ``template``: the tree template (``Shape``): rebuilding the tree from a
  text's tokens, which checks depend on the literals, and the index
  analysis of the shape (``conditions.analyse``, finalised per subscription);
* ``code``: code templates -- the shape's code generated once per
  combination of numeric value classes, with each literal a parameter of a
  factory (``compiler.Parameters``: the generator emits parameter names
  where the literals' values go), so that a subscription costs one call.

``ShapeCompiler.compile(text)`` therefore costs, for a known simple shape,
one regex match of the text, the literal conversions (the parser's own
``_Builder.number`` and ``unescape``), the tree, the checks that depend on
the literals (the checker's own ``leaf`` and ``string_predicate``), the
plan (a few microseconds) and one factory call. Shapes with a constant
sub-expression (``x + (1 + 2) > 3``) run the whole checker and compile per
subscription, from a template tree; shapes whose code holds sets of numbers
compile per subscription too.

Anything unusual -- a character the tokeniser does not know, a literal the
parser would reject, a shape the template cannot describe, a text longer than
``FAST_PATH_MAX`` -- goes the ordinary way (``parse`` + ``compiler.build``),
which also produces every error message. The result is the same either way;
``tests/unit/test_subscription_shapes.py`` checks it on random expressions.

Caches are bounded: at most ``MAX_SHAPES`` shapes and ``MAX_BYTES`` bytes
(least recently used dropped first), each shape with at most ``MAX_CODES``
code templates (one per combination of numeric value classes). The bytes are
an estimate made when a shape or a code template is added
(``shape_bytes``, ``code_bytes``: linear in the text's length, calibrated
with ``tracemalloc`` and checked to be on the high side by
``tests/unit/test_shape_cache_bytes.py``): a count alone let 4,096 shapes of
2 KiB texts hold about a gigabyte (issue 42).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from elvin.errors import SubscriptionError
from elvin.subscription import closures
from elvin.subscription.ast import Node
from elvin.subscription.cancel import checkpoint
from elvin.subscription.checker import _Checker, check, fold
from elvin.subscription.compiler import build
from elvin.subscription.index import plan_for
from elvin.subscription.parser import parse_tree
from elvin.subscription.shapes.code import CodeTemplate, code_template, number_class
from elvin.subscription.shapes.spelling import Layout
from elvin.subscription.shapes.template import Positions, Shape, learn
from elvin.subscription.tokens import Unusual, tokenise

__all__ = ["FAST_PATH_MAX", "LARGE", "MAX_BYTES", "MAX_CODES", "MAX_LITERALS", "MAX_SHAPES",
           "Registered", "ShapeCompiler", "code_bytes", "compile_text", "shape_bytes", "tokenise"]

#: texts longer than this (characters) skip the shape cache: they are rare,
#: and a shape is only worth learning if it comes back
FAST_PATH_MAX = 2048
#: More literals than this go the ordinary way: real subscriptions that
#: differ only in their constants have a few (a tickertape's one or two, a
#: geographic box four), and a shape's code templates multiply with its
#: numeric literals' value classes
MAX_LITERALS = 12
#: shapes remembered (least recently used forgotten first)
MAX_SHAPES = 4096
#: code templates per shape (numeric value classes seen)
MAX_CODES = 16
#: bytes the shapes and their code templates may hold in all (estimated:
#: ``shape_bytes``, ``code_bytes``)
MAX_BYTES = 64 * 1024 * 1024


def shape_bytes(text: str) -> int:
    """What learning the shape of ``text`` holds, on the high side: its key,
    tree template, checks, plan analysis and layout (a compiled ``re``)."""
    return 6 * 1024 + 192 * len(text)


def code_bytes(text: str) -> int:
    """What one code template of the shape of ``text`` holds, on the high
    side: the generated factory's code objects and constants."""
    return 6 * 1024 + 320 * len(text)

#: expressions longer than this (characters) are evaluated by closures, not
#: compiled to Python code (see ``compile_text``)
LARGE = 1024
#: spellings tried before tokenising (most recently used first)
_RECENT_LAYOUTS = 8


class Registered:
    """What the router keeps of a compiled subscription: the checked tree,
    ``matches(attrs) -> bool`` and ``evaluate(attrs) -> True/False/None``."""

    __slots__ = ("text", "ast", "matches", "evaluate", "names", "index", "placement")

    def __init__(self, text: str, ast: Node, matches: Callable[[Mapping[str, Any]], bool],
                 evaluate: Callable[[Mapping[str, Any]], bool | None],
                 names: frozenset[str] | None = None, index: tuple[Any, ...] | None = None) -> None:
        self.text = text
        self.ast = ast
        self.matches = matches
        self.evaluate = evaluate
        #: the attribute names the tree refers to, when the shape told
        self.names = names
        #: the tree's index plan (``elvin.subscription.conditions``) when the
        #: shape told
        self.index = index
        #: where the router's index files the tree, when worked out with the
        #: compile (``elvin.router.engine.place``, on the router's worker thread)
        self.placement: Any = None

    def __repr__(self) -> str:
        return f"Registered({self.text!r})"


def compile_text(text: str) -> Registered:
    """The ordinary way, with no cache: parse, check, fold, build, and the
    index plan. Shares no state, so a worker thread may run it (the router
    compiles long expressions so, off its loop). An expression longer than
    ``LARGE`` characters is evaluated by closures (``closures.build``: a
    millisecond to build where generating and compiling code takes tens)."""
    tree = parse_tree(text)
    check(tree, text)
    checkpoint()
    if len(text) > LARGE:
        # folding replaces only sub-expressions without names, so the folded
        # tree's names (which the closures gather) are the tree's: for the
        # plan and the engine, without a walk of their own
        folded, matches, evaluate, names = closures.build_checked(tree)
        plan = plan_for(folded, folded=True, evaluate=evaluate,     # (a bounded analysis)
                        names=names)
        checkpoint()
        return Registered(text, tree, matches, evaluate, names, plan)
    folded = fold(tree)
    matches, evaluate, _source = build(folded)
    plan = plan_for(folded, folded=True)
    checkpoint()
    return Registered(text, tree, matches, evaluate, None, plan)


class ShapeCompiler:
    """``compile(text) -> Registered`` (or ``SubscriptionError``), sharing
    parse templates, analyses and code across subscriptions of one shape.
    Sans-IO, not thread-safe: use one per thread."""

    def __init__(self, max_shapes: int = MAX_SHAPES, max_bytes: int = MAX_BYTES) -> None:
        self.max_shapes = max_shapes
        self.max_bytes = max_bytes
        self._shapes: dict[tuple[Any, ...], Shape | None] = {}
        #: key -> the bytes its shape holds (``shape_bytes`` + ``code_bytes`` each)
        self._costs: dict[tuple[Any, ...], int] = {}
        #: the estimated bytes all shapes hold (never above ``max_bytes``)
        self.bytes = 0
        self._recent: list[Layout] = []
        self.fast = 0        # texts compiled from a known shape (statistics, tests)
        self.slow = 0        # texts compiled the ordinary way

    def __len__(self) -> int:
        return len(self._shapes)

    def compile(self, text: str) -> Registered:
        if isinstance(text, str) and len(text) <= FAST_PATH_MAX:
            recent = self._recent
            for i, layout in enumerate(recent):
                match = layout.pattern.fullmatch(text)
                if match is not None:
                    if i:
                        recent.insert(0, recent.pop(i))
                    shapes = self._shapes
                    key = layout.shape.key
                    if key in shapes:               # used: least recently used last
                        shapes[key] = shapes.pop(key)
                    try:
                        return self._known(text, layout.shape, *layout.place(match.groups()))
                    except Unusual:
                        return self._slow(text)
            tokens = tokenise(text)
            if tokens is not None and len(tokens[3]) <= MAX_LITERALS:
                try:
                    return self._fast(text, *tokens)
                except Unusual:
                    pass
        return self._slow(text)

    def _slow(self, text: str) -> Registered:
        self.slow += 1
        return compile_text(text)

    def _fast(self, text: str, key: tuple[Any, ...], starts: list[int], texts: list[str],
              literals: list[int]) -> Registered:
        shapes = self._shapes
        found: Shape | None | Literal[False] = shapes.pop(key, False)
        shape: Shape | None
        if found is False:
            tree = parse_tree(text)     # errors: as from the ordinary way
            check(tree, text)
            try:
                shape = learn(tree, starts, texts, literals)
            except Unusual:
                shape = None
            cost = shape_bytes(text)
            self._make_room(cost)
            self._costs[key] = cost
            self.bytes += cost
            if shape is not None:
                shape.key = key
        else:
            shape = found
        shapes[key] = shape             # (re)inserted last: least recently used first
        if shape is None:
            raise Unusual
        if shape.layout is None:
            try:
                shape.layout = Layout(shape, text, starts, texts, literals, key)
            except re.error:            # cannot happen; then the shape has no layout
                pass
        if shape.layout is not None and shape.layout not in self._recent:
            self._recent.insert(0, shape.layout)
            del self._recent[_RECENT_LAYOUTS:]
        return self._known(text, shape, starts, texts)

    def _make_room(self, cost: int, new: bool = True) -> None:
        """Forget the least recently used shapes until ``cost`` more bytes
        (and, if ``new``, one more shape) fit the bounds."""
        shapes, costs = self._shapes, self._costs
        while shapes and ((new and len(shapes) >= self.max_shapes)
                          or self.bytes + cost > self.max_bytes):
            key = next(iter(shapes))
            gone = shapes.pop(key)
            self.bytes -= costs.pop(key, 0)
            if gone is not None:
                if gone.layout is not None and gone.layout in self._recent:
                    self._recent.remove(gone.layout)    # nothing keeps a forgotten shape
                gone.forget()       # freed now, not by a full collection (issue 42)

    def _known(self, text: str, shape: Shape, starts: list[int],
               texts: list[str] | dict[int, str]) -> Registered:
        """A text of a known shape (``texts``: at least its literal tokens)."""
        leaves = shape.leaves(starts, texts)
        tree = shape.build(starts, leaves)
        if shape.simple:
            checker = _Checker(text) if shape.checks else None
            try:
                for item in shape.checks:
                    if type(item) is int:       # a numeric literal: its leaf
                        checker.leaf(leaves[item])  # type: ignore[union-attr]  # a shape with checks has its checker
                        continue
                    node = tree
                    for i in item:  # type: ignore[union-attr]  # a path (type() is, for speed)
                        node = node.children[i]
                    checker.string_predicate(node)  # type: ignore[union-attr]  # as above
            except SubscriptionError:
                raise Unusual from None     # the ordinary way says it as the checker does
            code = self._code(shape, leaves, text)
            if code is not None:
                matches, evaluate = code.instantiate(leaves)
                self.fast += 1
                return Registered(text, tree, matches, evaluate, shape.names,
                                  shape.plan(leaves))
            self.fast += 1
            matches, evaluate, _source = build(tree)
            return Registered(text, tree, matches, evaluate, shape.names, shape.plan(leaves))
        check(tree, text)
        self.fast += 1
        matches, evaluate, _source = build(fold(tree))
        return Registered(text, tree, matches, evaluate, shape.names)

    def _code(self, shape: Shape, leaves: list[Node], text: str) -> CodeTemplate | None:
        classes = tuple(number_class(leaves[i].kind, leaves[i].value)
                        for i in shape.numeric_slots) if shape.numeric_slots else ()
        codes = shape.codes
        code: CodeTemplate | None | Literal[False] = codes.get(classes, False)
        if code is not False:
            return code
        if len(codes) >= MAX_CODES:
            return None
        cost = code_bytes(text)
        if self._shapes.get(shape.key, False) is not shape:
            return None         # (cannot happen: a shape in use is in the cache)
        self._make_room(cost, new=False)
        if self._shapes.get(shape.key, False) is not shape:
            return None         # too big for the cache alone: compiled by itself
        tree = shape.build(Positions(), leaves)
        code = codes[classes] = code_template(tree, leaves)
        self._costs[shape.key] += cost
        self.bytes += cost
        return code
