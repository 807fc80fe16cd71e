"""Tree templates: what one text of a shape teaches about every other.

A shape's *template* is the tree lark made of the first text, with each
node tied to the token it starts at and each literal to its *slot* (the
literals in the order the tree holds them). ``Shape.build(starts, leaves)``
rebuilds the exact tree lark would make of any text of the shape -- every
node, value and character offset -- from that text's token starts and
literal leaves, as one generated expression.

A shape is *simple* when no node has only literal operands: nothing in it
folds, the checker's verdict depends on the literals only through the range
checks of numbers and the syntax of regex/wildcard patterns
(``Shape.checks``), and the index analysis depends on them only through
``conditions.finalise`` (``Shape.raw_plan``): a subscription of a simple
shape needs neither the whole checker nor the analysis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elvin.subscription.ast import LITERAL_KINDS, Kind, Node, names_in
from elvin.subscription.conditions import analyse, finalise, instantiator
from elvin.subscription.shapes.spelling import Layout, literal_leaf
from elvin.subscription.tokens import Unusual, node

__all__ = ["Positions", "Shape", "learn"]

#: position sets per literal-free subtree of a shape whose nodes are shared
_SHARED = 64


class Shape:
    """What one shape's first text taught: how to rebuild the tree, which
    checks depend on the constants, the index analysis, and code templates
    (``code.CodeTemplate`` by numeric value classes, filled in as they are
    met)."""

    __slots__ = ("template", "build", "slot_tokens", "negated", "simple", "checks", "codes",
                 "numeric_slots", "names", "slot_kinds", "raw_plan", "slot_of", "plan_maker",
                 "layout", "key")

    def __init__(self) -> None:
        self.template: tuple[Any, ...] = ()
        self.build: Callable[[Any, list[Node]], Node] = _no_build
        self.slot_tokens: list[int] = []    # literal slot -> token index of its value
        self.negated: list[bool] = []       # literal slot -> written with a leading '-'
        self.simple = False
        #: what to re-check per text: a literal's slot (its leaf), or the
        #: template path of a regex / wildcard call
        self.checks: list[int | tuple[Any, ...]] = []
        self.codes: dict[tuple[Any, ...], Any] = {}
        self.numeric_slots: list[int] = []
        self.slot_kinds: list[Kind] = []
        self.names: frozenset[str] = frozenset()
        #: ``conditions.analyse`` of the first tree (simple shapes only)
        self.raw_plan: list[Any] | None = None
        #: id of a literal node of the first tree -> its slot
        self.slot_of: dict[int, int] = {}
        #: ``conditions.instantiator`` of the raw plan, when it has one
        self.plan_maker: Callable[[list[Node]], tuple[Any, ...]] | None = None
        #: the Layout of the first text compiled with this shape
        self.layout: Layout | None = None
        #: the shape cache's key of this shape (``ShapeCompiler`` sets it)
        self.key: tuple[Any, ...] = ()

    def forget(self) -> None:
        """The shape cache forgot this shape: break the cycles it holds (its
        layout points back at it; its builder's helper functions live in
        the namespace that holds them), so that it is freed by reference
        counts at once, not by a full collection that a quiet router may
        never make (issue 42). Trees it built share nodes, never the
        namespace, so subscriptions compiled with it are untouched."""
        self.layout = None
        build, self.build = self.build, _no_build
        if build is not _no_build:
            build.__globals__.clear()   # (a function made by ``_builder``)

    def leaves(self, starts: list[int], texts: list[str] | dict[int, str]) -> list[Node]:
        """The literal leaves of a text of this shape (``texts``: at least
        its literal tokens)."""
        if True not in self.negated:    # (the usual case, without a strict zip)
            return [literal_leaf(texts[lit], starts[lit]) for lit in self.slot_tokens]
        leaves = []
        for lit, negated in zip(self.slot_tokens, self.negated, strict=True):
            leaf = literal_leaf(texts[lit], starts[lit])
            if negated:
                leaf = Node(leaf.kind, value=-leaf.value, pos=starts[lit - 1])
            leaves.append(leaf)
        return leaves

    def plan(self, leaves: list[Node]) -> tuple[Any, ...] | None:
        """The index plan of the subscription with ``leaves``, when simple."""
        if self.raw_plan is None:
            return None
        if self.plan_maker is not None:
            return self.plan_maker(leaves)
        slot_of = self.slot_of
        return finalise(self.raw_plan, lambda n: leaves[slot_of[id(n)]])


def _no_build(starts: Any, leaves: list[Node]) -> Node:
    raise Unusual


class Positions:
    """Any index -> -1: a tree without positions (code does not depend on them)."""

    def __getitem__(self, index: int) -> int:
        return -1


def _unbound(*_: Any, **__: Any) -> Any:
    """What a recursive nested function's name is rebound to once it is done
    (``_builder``, ``learn``): its cell then no longer holds the function."""
    raise AssertionError("called after its use")


def _builder(template: tuple[Any, ...]) -> Callable[[Any, list[Node]], Node]:
    """``build(starts, leaves)``: the template's tree as one generated
    expression (no recursion, positional ``Node`` arguments).

    A subtree holding no literal (a name, ``require(Message)``) is the same
    for every text of the shape up to its tokens' positions, so it is made
    once per set of positions and shared (up to ``_SHARED`` sets per subtree):
    nodes are immutable, and most subscriptions of a shape place it alike."""
    namespace: dict[str, object] = {"Node": node, "_NAME": Kind.NAME}
    helpers: list[str] = []

    def constant(t: tuple[Any, ...]) -> bool:
        return t[0] == "N" or (t[0] == "O" and all(constant(c) for c in t[2]))

    def positions(t: tuple[Any, ...]) -> list[int]:
        return [t[2]] if t[0] == "N" else [t[3], *(i for c in t[2] for i in positions(c))]

    def make(t: tuple[Any, ...], inner: Callable[[tuple[Any, ...]], str]) -> str:
        if t[0] == "L":
            return f"L[{t[1]}]"
        if t[0] == "N":
            name = f"_n{len(namespace)}"
            namespace[name] = t[1]
            return f"Node(_NAME, (), {name}, s[{t[2]}])"
        kind = f"_k{int(t[1])}"
        namespace[kind] = t[1]
        children = "".join(inner(c) + ", " for c in t[2])
        return f"Node({kind}, ({children}), None, s[{t[3]}])"

    def whole(t: tuple[Any, ...]) -> str:         # inside a shared subtree: made as one
        return make(t, whole)

    def expr(t: tuple[Any, ...]) -> str:
        if not constant(t):
            return make(t, expr)
        j = len(helpers)
        namespace[f"_c{j}"] = {}
        at = positions(t)
        key = f"s[{at[0]}]" if len(at) == 1 else "(" + "".join(f"s[{i}], " for i in at) + ")"
        helpers.append(f"def _m{j}(s):\n"
                       f"    node = {whole(t)}\n"
                       f"    if len(_c{j}) < {_SHARED}:\n"
                       f"        _c{j}[{key}] = node\n"
                       "    return node\n")
        return f"(_c{j}.get({key}) or _m{j}(s))"

    try:
        body = expr(template)
    finally:
        # nested functions that call themselves are reference cycles (each
        # holds its own cell): broken here, freed now, not left to a full
        # collection that a quiet router may never make (issue 42)
        constant = positions = whole = expr = _unbound
    source = "".join(helpers) + f"def _build(s, L):\n    return {body}\n"
    exec(compile(source, "<subscription shape>", "exec"), namespace)
    return namespace.pop("_build")  # type: ignore[return-value]  # exec just defined it


def learn(tree: Node, starts: list[int], texts: list[str], literals: list[int]) -> Shape:
    """A shape from a parsed and checked tree and its tokens (``Unusual`` if
    the tree cannot be described by its tokens)."""
    at = {start: i for i, start in enumerate(starts)}
    literal_set = set(literals)
    shape = Shape()
    slots_by_token: dict[int, int] = {}

    def visit(n: Node) -> tuple[Any, ...]:
        ti = at.get(n.pos)
        if ti is None:
            raise Unusual
        if n.kind in LITERAL_KINDS:
            negated = texts[ti] == "-"
            lit = ti + 1 if negated else ti
            if lit not in literal_set or lit in slots_by_token:
                raise Unusual
            made = literal_leaf(texts[lit], starts[lit])
            value = -made.value if negated else made.value
            if made.kind is not n.kind or type(value) is not type(n.value) \
                    or value != n.value:
                raise Unusual
            slot = len(shape.slot_tokens)
            shape.slot_kinds.append(n.kind)
            shape.slot_of[id(n)] = slot
            slots_by_token[lit] = slot
            shape.slot_tokens.append(lit)
            shape.negated.append(negated)
            return ("L", slot, ti)
        if n.kind is Kind.NAME:
            return ("N", n.value, ti)
        return ("O", n.kind, tuple(visit(c) for c in n.children), ti)

    try:
        shape.template = visit(tree)
    finally:
        visit = _unbound    # a cycle through its own cell, as in ``_builder``
    if len(slots_by_token) != len(literals):
        raise Unusual
    shape.build = _builder(shape.template)
    shape.simple = _no_constant_operands(tree)
    if shape.simple:
        shape.checks = _constant_checks(shape.template, shape.slot_kinds)
        shape.raw_plan = analyse(tree)
        shape.plan_maker = instantiator(shape.raw_plan, shape.slot_of)
    else:
        shape.slot_of = {}
    shape.numeric_slots = [i for i, lit in enumerate(shape.slot_tokens)
                           if texts[lit][0] not in "\"'"]
    shape.names = names_in(tree)
    return shape


def _no_constant_operands(tree: Node) -> bool:
    """No node has only literal operands: nothing folds, and the checker's
    verdict depends on the literals only through ``_constant_checks``."""
    for n in tree.walk():
        if n.children and all(c.kind in LITERAL_KINDS for c in n.children):
            return False
    return True


def _constant_checks(template: tuple[Any, ...],
                     slot_kinds: list[Kind]) -> list[int | tuple[Any, ...]]:
    """The nodes whose check depends on a constant's value: numeric literals
    (ranges), by their slot (a text's leaf is its tree's node: no walk to
    it), and regex / wildcard calls (their patterns), by their template
    path; a string literal alone is never wrong."""
    out: list[int | tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = [(template, ())]
    while stack:
        t, path = stack.pop()
        if t[0] == "O":
            if t[1] in (Kind.FUNC_REGEX, Kind.FUNC_WILDCARD):
                out.append(path)
            for i, child in reversed(list(enumerate(t[2]))):
                stack.append((child, (*path, i)))
        elif t[0] == "L" and slot_kinds[t[1]] is not Kind.STRING:
            out.append(t[1])
    return out
