"""The three-valued logic of the subscription language: True, False and
``None`` for bottom (a missing attribute, a wrong type, a failed match).

``&&`` is false when either side is false whatever the other, ``||`` is true
when either side is true, and otherwise bottom on either side makes the
result bottom; ``^^`` and ``!`` are bottom whenever an operand is (Kleene's
strong logic). The reference interpreter and the quench analyses combine
outcomes with these; the compiled evaluator writes the same rules out as
Python expressions instead, and the tests check it against the interpreter.
"""

from __future__ import annotations

__all__ = ["and3", "not3", "or3", "xor3"]

Truth = bool | None


def not3(a: Truth) -> Truth:
    return None if a is None else not a


def and3(a: Truth, b: Truth) -> Truth:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def or3(a: Truth, b: Truth) -> Truth:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def xor3(a: Truth, b: Truth) -> Truth:
    return None if a is None or b is None else a != b
