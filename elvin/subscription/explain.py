"""Why a subscription does or does not match a notification.

For each predicate of the expression (every ``&&``/``||``/``^^``/``!``
operand, comparison and function), its three-valued result (true, false,
or bottom) and, where it is not true, why: an attribute is missing, a value
has the wrong type for the operation, or what the values were. A developer
sees which clause failed, or would fail.

There is no third evaluator here: the results are those of the reference
interpreter (``reference.py``), recorded as it walks the tree (a subclass
notes what each ``truth`` and ``value`` call returned). ``index_placement``
says where a router's index files the subscription (why it is evaluated
for a notification at all, or for every one). Sans-IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elvin.subscription.ast import LEAF_KINDS, Kind, Node, names_in_order
from elvin.subscription.conditions import describe_condition
from elvin.subscription.index import filing, plan_for
from elvin.subscription.reference import Tagged, _Interp
from elvin.subscription.unparse import unparse_brief

__all__ = ["Step", "explain", "failing", "format_explanation", "index_placement",
           "RESULT_WORDS"]

RESULT_WORDS = {True: "true", False: "false", None: "bottom"}
_MARKS = {True: "\N{CHECK MARK}", False: "\N{BALLOT X}", None: "\N{UP TACK}"}

_LOGICAL = frozenset({Kind.AND, Kind.OR, Kind.XOR, Kind.NOT})
_STRING_FUNCS = frozenset({Kind.FUNC_BEGINS_WITH, Kind.FUNC_ENDS_WITH, Kind.FUNC_CONTAINS,
                           Kind.FUNC_WILDCARD, Kind.FUNC_REGEX, Kind.FUNC_FOLD_CASE,
                           Kind.FUNC_DECOMPOSE, Kind.FUNC_DECOMPOSE_COMPAT})
_TYPE_FUNCS = frozenset({Kind.FUNC_INT32, Kind.FUNC_INT64, Kind.FUNC_REAL64, Kind.FUNC_STRING,
                         Kind.FUNC_OPAQUE, Kind.FUNC_NAN, Kind.FUNC_REQUIRE})
_NUMERIC = frozenset({Kind.ADD, Kind.SUBTRACT, Kind.MULTIPLY, Kind.DIVIDE, Kind.MODULO,
                      Kind.UNARY_MINUS, Kind.UNARY_PLUS, Kind.SHIFT_LEFT, Kind.SHIFT_RIGHT,
                      Kind.LOGICAL_SHIFT_RIGHT, Kind.BIT_AND, Kind.BIT_OR, Kind.BIT_XOR,
                      Kind.BIT_NEGATE})
_TYPE_NAMES = {"int32": "an int32", "int64": "an int64", "real64": "a real64",
               "string": "a string", "opaque": "an opaque", "other": "a value of no Elvin type"}


@dataclass(frozen=True)
class Step:
    """One predicate: its depth in the tree, its text, its result and why."""

    depth: int
    text: str
    result: bool | None
    reason: str = ""
    kind: Kind | None = None

    @property
    def logical(self) -> bool:
        """An ``&&``/``||``/``^^``/``!`` whose operands follow it."""
        return self.kind in _LOGICAL

    @property
    def word(self) -> str:
        return RESULT_WORDS[self.result]


class _Recorder(_Interp):
    """The reference interpreter, noting each node's result."""

    def __init__(self, attrs: Mapping[str, Any]) -> None:
        super().__init__(attrs)
        self.truths: dict[int, bool | None] = {}
        self.values: dict[int, object] = {}

    def truth(self, node: Node) -> bool | None:
        result = super().truth(node)
        self.truths[id(node)] = result
        return result

    def value(self, node: Node) -> Tagged:
        result = super().value(node)
        self.values[id(node)] = result
        return result


def explain(tree: Node | str, attrs: Mapping[str, object]) -> list[Step]:
    """The steps for ``tree`` (or subscription text) on ``attrs``, parents
    before their operands; the first step is the whole expression."""
    if isinstance(tree, str):
        from elvin.subscription import parse
        tree = parse(tree)
    recorder = _Recorder(attrs)
    recorder.truth(tree)
    steps: list[Step] = []

    def walk(node: Node, depth: int) -> None:
        if id(node) not in recorder.truths:
            return
        result = recorder.truths[id(node)]
        steps.append(Step(depth, unparse_brief(node, 80), result,
                          _why(node, result, recorder, attrs), node.kind))
        if node.kind in _LOGICAL:
            for child in node.children:
                walk(child, depth + 1)

    walk(tree, 0)
    return steps


def failing(steps: list[Step]) -> list[int]:
    """The indexes of the steps that make the whole expression fail: below
    a failed ``&&`` each operand that is not true, below a failed ``||``
    every operand, and otherwise the step itself (a comparison, a
    function, or a ``!``/``^^`` whose operands were fine). Empty when the
    expression matches. These are the clauses a developer has to change.
    """
    if not steps or steps[0].result is True:
        return []
    out: list[int] = []

    def children(index: int) -> list[int]:
        depth = steps[index].depth
        found = []
        for n in range(index + 1, len(steps)):
            if steps[n].depth <= depth:
                break
            if steps[n].depth == depth + 1:
                found.append(n)
        return found

    def mark(index: int) -> None:
        step = steps[index]
        if step.kind in (Kind.AND, Kind.OR):
            below = [n for n in children(index) if steps[n].result is not True]
            if below:
                for n in below:
                    mark(n)
                return
        out.append(index)

    mark(0)
    return out


def _type_of(value: object) -> str:
    from elvin.subscription.reference import _tag
    return _TYPE_NAMES.get(_tag(value)[0], "a value")


def _show(value: object) -> str:
    from elvin.text import format_value
    try:
        text = format_value(value)  # type: ignore[arg-type]  # any attribute value; format_value says what it cannot print
    except Exception:  # noqa: BLE001 - anything printable will do
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _why(node: Node, result: bool | None, recorder: _Recorder,
         attrs: Mapping[str, object]) -> str:
    kind = node.kind
    if result is True or kind in _LOGICAL:
        return ""
    names = names_in_order(node)
    missing = [n for n in names if n not in attrs]
    if kind in _TYPE_FUNCS:
        name = node.children[0].value
        if name not in attrs:
            return f"missing attribute {name}"
        return f"{name} is {_type_of(attrs[name])}"
    if result is None:
        if missing:
            return "missing attribute " + ", ".join(missing)
        wrong = _wrong_type(node, recorder, attrs)
        if wrong:
            return wrong
        if kind is Kind.FUNC_REGEX or kind is Kind.FUNC_WILDCARD:
            return "the pattern took too long to match"
        return "the values cannot be compared"
    present = [f"{n} = {_show(attrs[n])}" for n in names]
    return ", ".join(present)


def _wrong_type(node: Node, recorder: _Recorder, attrs: Mapping[str, object]) -> str:
    """The first operation in ``node`` that got a value of the wrong type."""
    for child in node.children:
        if child.kind in LEAF_KINDS:
            continue
        found = _wrong_type(child, recorder, attrs)
        if found:
            return found
    kind = node.kind
    operands = [c for c in node.children if c.kind not in LEAF_KINDS or c.kind is Kind.NAME]
    if kind in _STRING_FUNCS:
        for operand in operands[:1]:
            if operand.kind is Kind.NAME and operand.value in attrs \
                    and not isinstance(attrs[operand.value], str):
                return (f"wrong type: {operand.value} is {_type_of(attrs[operand.value])}, "
                        f"not a string")
    if kind in _NUMERIC:
        for operand in operands:
            if operand.kind is Kind.NAME and operand.value in attrs \
                    and not _numeric(attrs[operand.value]):
                return (f"wrong type: {operand.value} is {_type_of(attrs[operand.value])}, "
                        f"not a number")
    if kind in (Kind.EQUALS, Kind.NOT_EQUALS, Kind.LESS_THAN, Kind.LESS_THAN_EQUALS,
                Kind.GREATER_THAN, Kind.GREATER_THAN_EQUALS, Kind.FUNC_EQUALS):
        tags = [recorder.values.get(id(c)) for c in node.children]
        kinds = {t[0] for t in tags if isinstance(t, tuple)}
        if len(kinds) > 1 and not kinds <= {"int32", "int64", "real64"}:
            described = [f"{c.value} is {_TYPE_NAMES.get(t[0], 'a value')}"
                         if c.kind is Kind.NAME else f"{unparse_brief(c, 30)} is "
                         f"{_TYPE_NAMES.get(t[0], 'a value')}"
                         for c, t in zip(node.children, tags, strict=False)
                         if isinstance(t, tuple)]
            return "wrong type: " + " but ".join(described)
    return ""


def _numeric(value: object) -> bool:
    return type(value) in (int, float) or type(value).__name__ == "Int64"


def index_placement(tree: Node | str) -> list[str]:
    """Where a router's index files the subscription, and so which
    notifications it is evaluated for, in words (``elvin.subscription.index``):
    one line per way it is filed, e.g. ``range index: Seq in [10, 20]``,
    ``name index (scanned): Message is present``. A subscription in the name
    index is evaluated for every notification holding the attribute -- the
    expensive kind when thousands of them are (``regex``, ``contains``,
    arithmetic and comparisons of two attributes cannot be looked up)."""
    if isinstance(tree, str):
        from elvin.subscription import parse
        tree = parse(tree)
    placed = filing(plan_for(tree))
    if not placed:
        return ["not indexed: it can never be true, so it is never evaluated"]
    lines = []
    for lookup, access, checks in placed:
        if access is None:
            lines.append(f"{lookup}: evaluated for every notification (no condition that "
                         "every match meets could be found)")
            continue
        line = f"{lookup}: {describe_condition(access)}"
        if checks:
            line += "; then checked: " + " and ".join(describe_condition(c) for c in checks)
        lines.append(line)
    return lines


def format_explanation(steps: list[Step]) -> str:
    """The steps as indented text, one line each::

        ✗ false   (Price < 10 && Symbol == "ACME")
          ✗ false   Price < 10              Price = 12.5
          ⊥ bottom  Symbol == "ACME"        missing attribute Symbol
    """
    lines = []
    for step in steps:
        left = f"{'  ' * step.depth}{_MARKS[step.result]} {step.word:<7} {step.text}"
        lines.append(f"{left:<60}  {step.reason}".rstrip() if step.reason else left)
    return "\n".join(lines)
