"""Elvin 4 security keys: the wire structure and the SHA-1 matching rules.

Sans-IO and shared by the codec (which carries ``Keys`` in packets), the
router (which matches notifications against subscriptions) and the client
(which builds keys from raw secrets). ``../shared/reference/KEYS.md`` is the
authority for the schemes:

=========  ==  ==============================  ====================
scheme     id  key sets on the wire            raw key held by
=========  ==  ==============================  ====================
SHA-1 dual  1  [producer keys, consumer keys]  both sides
producer    2  [keys]                          the producer
consumer    3  [keys]                          the consumer
=========  ==  ==============================  ====================
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum


class KeyScheme(IntEnum):
    SHA1_DUAL = 1
    SHA1_PRODUCER = 2
    SHA1_CONSUMER = 3

    @property
    def label(self) -> str:
        return {1: "SHA-1-dual", 2: "SHA-1-producer", 3: "SHA-1-consumer"}[int(self)]

    @property
    def set_count(self) -> int:
        """How many key sets the scheme carries on the wire."""
        return 2 if self is KeyScheme.SHA1_DUAL else 1


DUAL_PRODUCER = 0
DUAL_CONSUMER = 1


def public_key(raw: bytes) -> bytes:
    """The public form of a raw ("private") key: its SHA-1 digest."""
    return hashlib.sha1(raw).digest()


KeySets = tuple[frozenset[bytes], ...]


@dataclass(frozen=True)
class Keys:
    """An immutable set of keys per scheme, as carried by a packet.

    ``sets[scheme]`` is a tuple of key sets (two for the dual scheme, one for
    the others). Schemes with only empty sets are dropped, so two ``Keys``
    that hold the same keys always compare equal.
    """

    sets: Mapping[int, KeySets] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clean: dict[int, KeySets] = {}
        for scheme, key_sets in self.sets.items():
            sets = tuple(frozenset(bytes(k) for k in ks) for ks in key_sets)
            if any(sets):
                clean[int(scheme)] = sets
        object.__setattr__(self, "sets", clean)

    # -- building ---------------------------------------------------------
    @classmethod
    def of(cls, scheme: KeyScheme | int, *key_sets: Iterable[bytes]) -> Keys:
        return cls({int(scheme): tuple(frozenset(ks) for ks in key_sets)})

    def __bool__(self) -> bool:
        return bool(self.sets)

    def __len__(self) -> int:
        return sum(len(ks) for sets in self.sets.values() for ks in sets)

    def key_set(self, scheme: int, index: int = 0) -> frozenset[bytes]:
        sets = self.sets.get(scheme, ())
        return sets[index] if index < len(sets) else frozenset()

    def _combine(self, other: Keys, op) -> Keys:
        out: dict[int, KeySets] = {}
        for scheme in set(self.sets) | set(other.sets):
            mine, theirs = self.sets.get(scheme, ()), other.sets.get(scheme, ())
            width = max(len(mine), len(theirs))
            out[scheme] = tuple(
                op(mine[i] if i < len(mine) else frozenset(),
                   theirs[i] if i < len(theirs) else frozenset())
                for i in range(width)
            )
        return Keys(out)

    def union(self, other: Keys) -> Keys:
        return self._combine(other, frozenset.union)

    def difference(self, other: Keys) -> Keys:
        return self._combine(other, frozenset.difference)

    def __or__(self, other: Keys) -> Keys:
        return self.union(other)

    def __sub__(self, other: Keys) -> Keys:
        return self.difference(other)

    def __repr__(self) -> str:
        parts = []
        for scheme, sets in sorted(self.sets.items()):
            try:
                label = KeyScheme(scheme).label
            except ValueError:
                label = f"scheme-{scheme}"
            parts.append(f"{label}: {[sorted(k.hex() for k in s) for s in sets]}")
        return f"Keys({', '.join(parts)})"


EMPTY_KEYS = Keys()


def _producer_half(ntfn: frozenset[bytes], sub: frozenset[bytes]) -> bool:
    return any(public_key(raw) in sub for raw in ntfn)


def _consumer_half(ntfn: frozenset[bytes], sub: frozenset[bytes]) -> bool:
    return any(public_key(raw) in ntfn for raw in sub)


def keys_match(notification_keys: Keys, subscription_keys: Keys) -> bool:
    """True when a notification's keys securely match a subscription's keys.

    Both arguments already include the connection-level keys of the producer
    and of the consumer respectively.
    """
    if not notification_keys or not subscription_keys:
        return False
    n, s = notification_keys, subscription_keys
    if KeyScheme.SHA1_PRODUCER in n.sets and KeyScheme.SHA1_PRODUCER in s.sets:
        if _producer_half(n.key_set(2), s.key_set(2)):
            return True
    if KeyScheme.SHA1_CONSUMER in n.sets and KeyScheme.SHA1_CONSUMER in s.sets:
        if _consumer_half(n.key_set(3), s.key_set(3)):
            return True
    if KeyScheme.SHA1_DUAL in n.sets and KeyScheme.SHA1_DUAL in s.sets:
        if _producer_half(n.key_set(1, DUAL_PRODUCER), s.key_set(1, DUAL_PRODUCER)) and \
                _consumer_half(n.key_set(1, DUAL_CONSUMER), s.key_set(1, DUAL_CONSUMER)):
            return True
    return False
