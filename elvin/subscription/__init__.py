"""The Elvin 4 subscription language: parse, check, compile, analyse.

>>> from elvin.subscription import compile
>>> sub = compile('require(Message) && fold-case(Group) == "chat" || Group == "elvin"')
>>> sub.evaluate({"Group": "Chat", "Message": "hi"})
True
>>> sub.evaluate({"Group": 1}) is None
True

* ``parse(text)`` -> checked ``Node`` tree in the shape of the source
  (``SubscriptionError`` with the spec's code and the character offset).
* ``unparse(node)`` -> canonical text, ``parse(unparse(n)) == n``.
* ``compile(text_or_node)`` -> ``CompiledSubscription`` whose ``evaluate``
  gives True / False / None (bottom) and ``matches`` gives a bool; both are
  generated Python functions and never raise.
* ``validate(node)`` checks a tree that arrived from the wire.
* ``required_names``, ``index_constraint``, ``index_value`` feed the
  router's index and the quench helpers.

See ``parser.py`` (syntax decisions), ``checker.py`` (static rules),
``runtime.py`` (value semantics), ``patterns.py`` (regex and wildcard
dialects) and ``compiler.py`` (code generation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from elvin.errors import SubscriptionError
from elvin.subscription.analysis import index_constraint, index_value, required_names
from elvin.subscription.ast import Kind, Node
from elvin.subscription.checker import check, fold, validate_tree
from elvin.subscription.compiler import build, build_unguarded
from elvin.subscription.parser import MAX_DEPTH, parse_tree
from elvin.subscription.unparse import unparse

__all__ = [
    "MAX_DEPTH",
    "CompiledSubscription",
    "Kind",
    "Node",
    "SubscriptionError",
    "compile",
    "index_constraint",
    "index_value",
    "parse",
    "required_names",
    "unparse",
    "validate",
]


def parse(text: str) -> Node:
    """Parse and check a subscription expression."""
    tree = parse_tree(text)
    check(tree, text)
    return tree


def validate(node: Node) -> Node:
    """Check a tree built elsewhere (e.g. decoded from a quench or federation
    packet); returns it (normalised: ``Kind`` kinds, tuple children) or raises
    ``SubscriptionError``."""
    node = validate_tree(node)
    check(node)
    return node


class CompiledSubscription:
    """A subscription compiled to Python.

    ``evaluate(attrs)`` -> True | False | None, ``matches(attrs)`` -> bool;
    ``ast`` is the checked tree, ``text`` the source (or the canonical text
    of a tree), ``source`` the generated Python (for the curious).
    """

    __slots__ = ("ast", "text", "source", "evaluate", "matches", "_folded", "_unguarded")

    def __init__(self, subscription: str | Node) -> None:
        if isinstance(subscription, str):
            self.ast = parse(subscription)
            self.text = subscription
        elif isinstance(subscription, Node):
            self.ast = validate(subscription)
            self.text = unparse(self.ast)
        else:
            raise TypeError("compile() takes subscription text or a Node, not "
                            f"{type(subscription).__name__}")
        self._folded = fold(self.ast)
        self.matches, self.evaluate, self.source = build(self._folded)
        self._unguarded: Callable[[Mapping[str, Any]], bool | None] | None = None

    @property
    def _evaluate_raw(self) -> Callable[[Mapping[str, Any]], bool | None]:
        """``evaluate`` without its exception net (for tests)."""
        if self._unguarded is None:
            self._unguarded = build_unguarded(self._folded)
        return self._unguarded

    def __call__(self, attrs: Mapping[str, Any]) -> bool | None:
        result: bool | None = self.evaluate(attrs)
        return result

    def __repr__(self) -> str:
        return f"CompiledSubscription({self.text!r})"


def compile(subscription: str | Node) -> CompiledSubscription:
    """Parse (or validate) and compile a subscription."""
    return CompiledSubscription(subscription)
