"""Per-key bookkeeping for a consumer pane: what MQTT Explorer shows per topic.

Elvin has no topics, but most traffic has an attribute that plays the part
(``Group`` for chat, ``Symbol`` for prices, ``Host`` for status). With such
a *key attribute* chosen, a pane counts notifications per key value and
keeps the latest one of each; the detail compares a notification with the
previous one *of the same key* (comparing with the row above, an unrelated
key, shows nearly everything as changed); the plot draws one series per
key value. No Qt here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from elvin_apps.console.received import Received, display_value

__all__ = ["KeyIndex", "KeyStats", "key_of", "previous_of_key", "MISSING"]

MISSING = "(none)"          # the key value of notifications without the key attribute


def key_of(record: Received, key: str) -> str:
    """The key value of ``record`` as shown (``MISSING`` when absent)."""
    value = record.attributes.get(key)
    return MISSING if value is None else display_value(value)


@dataclass
class KeyStats:
    count: int
    first: Received
    latest: Received


class KeyIndex:
    """Counts and latest notification per key value, in order of first
    appearance. ``limit`` bounds the number of key values (a key with a
    distinct value per notification, like a sequence number, must not grow
    without bound); the notifications beyond are counted in ``overflow``."""

    def __init__(self, key: str = "", limit: int = 2000) -> None:
        self.key = key
        self.limit = limit
        self.stats: dict[str, KeyStats] = {}
        self.overflow = 0

    def clear(self) -> None:
        self.stats.clear()
        self.overflow = 0

    def feed(self, records: Iterable[Received]) -> list[str]:
        """Count ``records``; returns the key values that changed, in order
        of first appearance (so the tree lists new ones in that order)."""
        if not self.key:
            return []
        changed: dict[str, None] = {}
        stats = self.stats
        for record in records:
            value = key_of(record, self.key)
            entry = stats.get(value)
            if entry is None:
                if len(stats) >= self.limit:
                    self.overflow += 1
                    continue
                stats[value] = KeyStats(1, record, record)
            else:
                entry.count += 1
                entry.latest = record
            changed[value] = None
        return list(changed)

    def values(self) -> list[str]:
        return list(self.stats)


def previous_of_key(records: Sequence[Received], index: int, key: str) -> Received | None:
    """The nearest record before ``records[index]`` with the same key value
    (the row above when no key is chosen)."""
    if index <= 0:
        return None
    if not key:
        return records[index - 1]
    wanted = key_of(records[index], key)
    for n in range(index - 1, -1, -1):
        if key_of(records[n], key) == wanted:
            return records[n]
    return None
