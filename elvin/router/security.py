"""Key checks and pre-hashed keys for fast secure matching (docs/keys.md).

``elvin.keys.keys_match`` hashes raw keys on every call. The router matches
one notification against many subscriptions, so it hashes each side once:
``NotificationKeys`` and ``SubscriptionKeys`` hold, per scheme, the *public*
keys (SHA-1 of the raw ones where the scheme sends raw keys), and a secure
match becomes set intersections. ``prepared_match(n, s)`` is equivalent to
``keys_match(n_keys, s_keys)``; the unit tests check that.

``check_keys`` validates the schemes and key-set counts a client sent
(BAD_KEY_SCHEME / BAD_KEY_INDEX); ``key_delta_errors`` implements the SecRqst
rule of 7.4.8 (adding a registered key or removing an unregistered one is an
error).
"""

from __future__ import annotations

from elvin.errors import KeyRefused, NackCode
from elvin.keys import EMPTY_KEYS, Keys, KeyScheme, public_key
from elvin.values import Int64

__all__ = [
    "KeyRefused",
    "apply_delta",
    "id64",
    "NotificationKeys",
    "SubscriptionKeys",
    "check_keys",
    "key_totals",
    "key_delta_error",
    "prepare_notification",
    "prepare_subscription",
    "prepared_match",
    "prepared_match_pair",
]

_EMPTY: frozenset[bytes] = frozenset()


def _public(keys: frozenset[bytes]) -> frozenset[bytes]:
    return frozenset(public_key(k) for k in keys) if keys else _EMPTY


class NotificationKeys:
    """Public keys of a notification (or of a quench, which acts like one);
    ``raw`` keeps the keys as sent, for forwarding to federated routers."""

    __slots__ = ("prod", "cons", "dprod", "dcons", "raw")

    def __init__(self, keys: Keys) -> None:
        self.raw = keys
        self.prod = _public(keys.key_set(KeyScheme.SHA1_PRODUCER))
        self.cons = keys.key_set(KeyScheme.SHA1_CONSUMER)
        self.dprod = _public(keys.key_set(KeyScheme.SHA1_DUAL, 0))
        self.dcons = keys.key_set(KeyScheme.SHA1_DUAL, 1)


class SubscriptionKeys:
    """Public keys of a subscription (its own keys plus the connection's)."""

    __slots__ = ("prod", "cons", "dprod", "dcons")

    def __init__(self, keys: Keys) -> None:
        self.prod = keys.key_set(KeyScheme.SHA1_PRODUCER)
        self.cons = _public(keys.key_set(KeyScheme.SHA1_CONSUMER))
        self.dprod = keys.key_set(KeyScheme.SHA1_DUAL, 0)
        self.dcons = _public(keys.key_set(KeyScheme.SHA1_DUAL, 1))


def prepare_notification(keys: Keys) -> NotificationKeys | None:
    """None when there are no keys (nothing can match securely)."""
    return NotificationKeys(keys) if keys else None


def prepare_subscription(keys: Keys) -> SubscriptionKeys | None:
    return SubscriptionKeys(keys) if keys else None


def prepared_match(n: NotificationKeys | None, s: SubscriptionKeys | None) -> bool:
    """True when the notification's keys securely match the subscription's."""
    if n is None or s is None:
        return False
    if n.prod and not n.prod.isdisjoint(s.prod):
        return True
    if n.cons and not n.cons.isdisjoint(s.cons):
        return True
    return bool(n.dprod and n.dcons and not n.dprod.isdisjoint(s.dprod)
                and not n.dcons.isdisjoint(s.dcons))


def prepared_match_pair(n: NotificationKeys | None, a: SubscriptionKeys | None,
                        b: SubscriptionKeys | None) -> bool:
    """``prepared_match`` against the union of ``a`` and ``b`` (a subscription's
    own keys and its connection's), without building the union: the
    connection's keys are prepared once for all its subscriptions."""
    if b is None:
        return prepared_match(n, a)
    if a is None:
        return prepared_match(n, b)
    if n is None:
        return False
    if n.prod and not (n.prod.isdisjoint(a.prod) and n.prod.isdisjoint(b.prod)):
        return True
    if n.cons and not (n.cons.isdisjoint(a.cons) and n.cons.isdisjoint(b.cons)):
        return True
    return bool(n.dprod and n.dcons
                and not (n.dprod.isdisjoint(a.dprod) and n.dprod.isdisjoint(b.dprod))
                and not (n.dcons.isdisjoint(a.dcons) and n.dcons.isdisjoint(b.dcons)))


def check_keys(keys: Keys) -> None:
    """Refuse unknown schemes (BAD_KEY_SCHEME) and extra key sets (BAD_KEY_INDEX)."""
    if not keys:
        return
    for scheme, sets in keys.sets.items():
        try:
            kind = KeyScheme(scheme)
        except ValueError:
            raise KeyRefused(NackCode.BAD_KEY_SCHEME, "Unknown key scheme %1",
                            (_int32(scheme),)) from None
        if len(sets) > kind.set_count:
            raise KeyRefused(NackCode.BAD_KEY_INDEX, "Key scheme %1 has no key set %2",
                            (_int32(scheme), kind.set_count))


def key_totals(*key_sets: Keys) -> tuple[int, int]:
    """(number, bytes) of the keys in ``key_sets``, for the key limits."""
    count = size = 0
    for keys in key_sets:
        if not keys:
            continue
        for sets in keys.sets.values():
            for keyset in sets:
                count += len(keyset)
                size += sum(map(len, keyset))
    return count, size


def key_delta_error(current: Keys, add: Keys, delete: Keys, what: str) -> KeyRefused | None:
    """SecRqst rule (7.4.8): removing a key that is not registered or adding one
    that already is (after the removals) is a protocol error, answered with
    NO_SUCH_KEY / KEY_EXISTS; None when the change is valid."""
    for scheme, sets in delete.sets.items():
        for index, keyset in enumerate(sets):
            missing = keyset - current.key_set(scheme, index)
            if missing:
                return KeyRefused(NackCode.NO_SUCH_KEY,
                                 f"Cannot remove {what} key: not registered "
                                 f"(scheme {scheme}, key set {index})")
    remaining = current - delete if delete else current
    for scheme, sets in add.sets.items():
        for index, keyset in enumerate(sets):
            present = keyset & remaining.key_set(scheme, index)
            if present:
                return KeyRefused(NackCode.KEY_EXISTS,
                                 f"Cannot add {what} key: already registered "
                                 f"(scheme {scheme}, key set {index})")
    return None


def apply_delta(current: Keys, add: Keys, delete: Keys) -> Keys:
    """``(current - delete) | add``; empty results are ``EMPTY_KEYS``."""
    if not add and not delete:
        return current
    out = current
    if delete:
        out = out - delete
    if add:
        out = out | add
    return out if out else EMPTY_KEYS


def _int32(value: int) -> int:
    """An id32 as an int32 Value (same bit pattern)."""
    value = int(value) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def id64(value: int) -> Int64:
    """An id64 as a Nack argument (Value has no unsigned type: the bit pattern
    goes out as an int64)."""
    value &= 0xFFFFFFFFFFFFFFFF
    return Int64(value - (1 << 64) if value >= 1 << 63 else value)
