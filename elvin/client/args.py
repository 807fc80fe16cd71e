"""Checking what the application passes in, before anything goes on the wire.

A wrong argument is the application's mistake: it gets a TypeError naming
the argument here, rather than an encoding error (or a router's Nack) later.
"""

from __future__ import annotations

from collections.abc import Iterable

from elvin.keys import EMPTY_KEYS, Keys


def keys_arg(keys: Keys | None, what: str) -> Keys:
    """``keys`` (None: no keys), or TypeError naming the argument ``what``."""
    if keys is None:
        return EMPTY_KEYS
    if not isinstance(keys, Keys):
        raise TypeError(f"{what} must be elvin.Keys, not {type(keys).__name__}")
    return keys


def names_arg(names: Iterable[str], what: str) -> tuple[str, ...]:
    """Attribute names (one str is one name), without repeats, in order."""
    if isinstance(names, str):
        names = [names]
    out = []
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{what}: attribute names are non-empty strings, not {name!r}")
        out.append(name)
    return tuple(dict.fromkeys(out))
