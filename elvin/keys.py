"""Elvin 4 security keys: the wire structure and the SHA-1 matching rules.

Sans-IO and shared by the codec (which carries ``Keys`` in packets), the
router (which matches notifications against subscriptions) and the client
(which builds keys from raw secrets). ``docs/keys.md`` states the rules
for the schemes:

==========  ==  ==============================  ====================
scheme      id  key sets on the wire            raw key held by
==========  ==  ==============================  ====================
SHA-1 dual   1  [producer keys, consumer keys]  both sides
producer     2  [keys]                          the producer
consumer     3  [keys]                          the consumer
==========  ==  ==============================  ====================
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum


class KeyScheme(IntEnum):
    """The Elvin 4 key schemes, numbered as on the wire (docs/keys.md says who holds which
    half).
    """
    SHA1_DUAL = 1
    SHA1_PRODUCER = 2
    SHA1_CONSUMER = 3

    @property
    def label(self) -> str:
        """The scheme's name as the protocol and the ec/ep key files spell it
        (``SHA-1-dual``).
        """
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
            sets = [frozenset(bytes(k) for k in ks) for ks in key_sets]
            while sets and not sets[-1]:
                sets.pop()  # a missing trailing set means the same as an empty one
            if sets:
                clean[int(scheme)] = tuple(sets)
        object.__setattr__(self, "sets", clean)

    # -- building ---------------------------------------------------------
    @classmethod
    def of(cls, scheme: KeyScheme | int, *key_sets: Iterable[bytes]) -> Keys:
        """Keys of one scheme from its key sets: ``Keys.of(KeyScheme.SHA1_DUAL,
        producer_keys, consumer_keys)``, or one set for the other schemes.
        """
        return cls({int(scheme): tuple(frozenset(ks) for ks in key_sets)})

    # -- client-side builders from raw keys ----------------------------------
    # Which side sends what (docs/keys.md): in the producer scheme the producer's
    # notifications carry the raw key and subscriptions carry SHA-1(raw); in
    # the consumer scheme subscriptions carry the raw key and notifications
    # carry SHA-1(raw); the dual scheme does both at once (set 0 = producer
    # keys, set 1 = consumer keys). Every builder takes raw keys (``bytes``,
    # or ``str`` encoded as UTF-8) and does the hashing where the scheme says.
    #
    # ======================  =========================  ====================
    # builder                 use it for                 wire content
    # ======================  =========================  ====================
    # producer_notification   send() / notification keys  producer: raw
    # producer_subscription   subscribe() / sub keys      producer: SHA-1
    # consumer_notification   send() / notification keys  consumer: SHA-1
    # consumer_subscription   subscribe() / sub keys      consumer: raw
    # dual_notification       send() / notification keys  dual: [raw, SHA-1]
    # dual_subscription       subscribe() / sub keys      dual: [SHA-1, raw]
    # ======================  =========================  ====================
    #
    # ``Keys.producer`` and ``Keys.consumer`` are short names for the side
    # that holds the raw key (producer_notification, consumer_subscription).

    @classmethod
    def producer_notification(cls, *raw: bytes | str) -> Keys:
        """Notification keys in the SHA-1 producer scheme (the raw keys)."""
        return cls.of(KeyScheme.SHA1_PRODUCER, _raw_keys(raw))

    @classmethod
    def producer_subscription(cls, *raw: bytes | str) -> Keys:
        """Subscription keys in the SHA-1 producer scheme (SHA-1 of each raw key)."""
        return cls.of(KeyScheme.SHA1_PRODUCER, [public_key(k) for k in _raw_keys(raw)])

    @classmethod
    def consumer_notification(cls, *raw: bytes | str) -> Keys:
        """Notification keys in the SHA-1 consumer scheme (SHA-1 of each raw key)."""
        return cls.of(KeyScheme.SHA1_CONSUMER, [public_key(k) for k in _raw_keys(raw)])

    @classmethod
    def consumer_subscription(cls, *raw: bytes | str) -> Keys:
        """Subscription keys in the SHA-1 consumer scheme (the raw keys)."""
        return cls.of(KeyScheme.SHA1_CONSUMER, _raw_keys(raw))

    @classmethod
    def dual_notification(cls, producer_raw: Iterable[bytes | str] = (),
                          consumer_raw: Iterable[bytes | str] = ()) -> Keys:
        """Notification keys in the SHA-1 dual scheme: [raw producer keys,
        SHA-1 of consumer keys]."""
        return cls.of(KeyScheme.SHA1_DUAL, _raw_keys(producer_raw),
                      [public_key(k) for k in _raw_keys(consumer_raw)])

    @classmethod
    def dual_subscription(cls, producer_raw: Iterable[bytes | str] = (),
                          consumer_raw: Iterable[bytes | str] = ()) -> Keys:
        """Subscription keys in the SHA-1 dual scheme: [SHA-1 of producer keys,
        raw consumer keys]."""
        return cls.of(KeyScheme.SHA1_DUAL, [public_key(k) for k in _raw_keys(producer_raw)],
                      _raw_keys(consumer_raw))

    @classmethod
    def producer(cls, *raw: bytes | str) -> Keys:
        """Alias of :meth:`producer_notification` (the producer holds the raw key)."""
        return cls.producer_notification(*raw)

    @classmethod
    def consumer(cls, *raw: bytes | str) -> Keys:
        """Alias of :meth:`consumer_subscription` (the consumer holds the raw key)."""
        return cls.consumer_subscription(*raw)

    @classmethod
    def for_notification(cls, *, producer: Iterable[bytes | str] = (),
                         consumer: Iterable[bytes | str] = (), dual: bool = True) -> Keys:
        """Everything a producer sends when it knows the given raw keys: the
        producer and consumer schemes, plus the dual scheme when ``dual``.

        This is what ``ep -P/-C`` does (as Avis's ep does)."""
        producer, consumer = _raw_keys(producer), _raw_keys(consumer)
        keys = cls.producer_notification(*producer) | cls.consumer_notification(*consumer)
        if dual:
            keys |= cls.dual_notification(producer, consumer)
        return keys

    @classmethod
    def for_subscription(cls, *, producer: Iterable[bytes | str] = (),
                         consumer: Iterable[bytes | str] = (), dual: bool = True) -> Keys:
        """Everything a consumer subscribes with when it knows the given raw
        keys (the counterpart of :meth:`for_notification`; ``ec -P/-C``)."""
        producer, consumer = _raw_keys(producer), _raw_keys(consumer)
        keys = cls.producer_subscription(*producer) | cls.consumer_subscription(*consumer)
        if dual:
            keys |= cls.dual_subscription(producer, consumer)
        return keys

    def __bool__(self) -> bool:
        return bool(self.sets)

    def __len__(self) -> int:
        return sum(len(ks) for sets in self.sets.values() for ks in sets)

    def key_set(self, scheme: int, index: int = 0) -> frozenset[bytes]:
        """The keys of set ``index`` of ``scheme`` (empty when there is none)."""
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
        """The keys of both, set by set (also ``a | b``): what a KeyAdd leaves."""
        return self._combine(other, frozenset.union)

    def difference(self, other: Keys) -> Keys:
        """These keys less ``other``'s, set by set (also ``a - b``): what a KeyDel leaves."""
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


def _raw_keys(raw: Iterable[bytes | str]) -> list[bytes]:
    """Raw keys as bytes (``str`` is UTF-8 encoded); refuses anything else."""
    if isinstance(raw, (bytes, str)):
        raw = [raw]
    out = []
    for key in raw:
        if isinstance(key, str):
            key = key.encode("utf-8")
        elif isinstance(key, (bytearray, memoryview)):
            key = bytes(key)
        elif not isinstance(key, bytes):
            raise TypeError(f"a raw key is bytes or str, not {type(key).__name__}")
        if not key:
            raise ValueError("a raw key may not be empty")
        out.append(key)
    return out


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
