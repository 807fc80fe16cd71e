"""Code templates: one shape's compiled code, with its literals as parameters.

The compiler writes the same code for every literal of one *value class*
(``number_class``: the sign, zero, integral or not, magnitudes beyond exact
doubles -- what ``compiler.numeric_comparison`` decides by) and of one
kind, so a shape's code is generated once per combination of classes with
each literal a *parameter* (``compiler.Parameters``): the generator emits
the parameter's name wherever the literal's value, its real64 conversion, a
set or tuple of several literals, or a matcher built from them would go.
``CodeTemplate.make(*arguments)`` then gives a subscription its functions in
one call, its literals bound as the functions' defaults.

Code whose objects depend on literal values in ways no parameter stands for
(a set of numbers: which keys it holds depends on their types and values)
raises ``NotParameterisable``, and the shape's subscriptions of those classes
are compiled one by one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from elvin.subscription.ast import Kind, Node
from elvin.subscription.compiler import (
    NotParameterisable,
    Parameters,
    build_factory,
)
from elvin.subscription.patterns import PatternError, glob_matcher, literal_search, regex_matcher
from elvin.subscription.runtime import make_int64
from elvin.values import REAL64_EXACT as _EXACT

__all__ = ["CodeTemplate", "code_template", "number_class"]



def number_class(kind: Kind, value: Any) -> tuple[Any, ...]:
    """Everything ``compiler.py`` decides from a numeric literal's value (the
    sign, zero, integral reals, magnitudes beyond exact doubles), so that one
    code template serves every value of a class."""
    if kind is Kind.REAL64:
        return ("r", math.copysign(1.0, value) < 0, value == 0, float(value).is_integer(),
                abs(value) < _EXACT)
    return ("i" if kind is Kind.INT32 else "l", value < 0, value == 0, abs(value) > _EXACT)


def _values(leaves: list[Node], slots: tuple[int, ...]) -> tuple[Any, ...]:
    return tuple(leaves[s].value for s in slots)


#: how an argument is made from a subscription's literals, by parameter form
#: (``compiler.PARAMETER_FORMS``)
_ARGUMENTS: dict[str, Callable[[list[Node], tuple[int, ...]], Any]] = {
    "v": lambda leaves, slots: leaves[slots[0]].value,
    "f": lambda leaves, slots: float(leaves[slots[0]].value),
    "q": lambda leaves, slots: make_int64(int(leaves[slots[0]].value)),
    "T": _values,
    "S": lambda leaves, slots: frozenset(_values(leaves, slots)),
    "C": lambda leaves, slots: literal_search(_values(leaves, slots)),
    "r": lambda leaves, slots: regex_matcher(_values(leaves, slots)),
    "w": lambda leaves, slots: glob_matcher(_values(leaves, slots)),
}


class CodeTemplate:
    """A factory ``make(*arguments) -> (matches, evaluate)`` for one shape and
    numeric value classes, with how to make each argument."""

    __slots__ = ("make", "arguments")

    def __init__(self, make: Callable[..., tuple[Any, ...]],
                 arguments: tuple[tuple[Callable[..., Any], tuple[int, ...]], ...]) -> None:
        self.make = make
        self.arguments = arguments

    def instantiate(self, leaves: list[Node]) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """``(matches, evaluate)`` of the subscription with ``leaves``."""
        return self.make(*[argument(leaves, slots) for argument, slots in self.arguments])


def code_template(tree: Node, leaves: list[Node]) -> CodeTemplate | None:
    """The code template of a simple shape's tree whose literal nodes are
    ``leaves`` (slot order); None when its code cannot be parameterised."""
    params = Parameters({id(leaf): slot for slot, leaf in enumerate(leaves)})
    try:
        make = build_factory(tree, params)
    except (NotParameterisable, PatternError):
        return None
    return CodeTemplate(make, tuple((_ARGUMENTS[form], slots)
                                    for form, slots in params.used.values()))
