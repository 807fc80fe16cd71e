"""What changed between two notifications, attribute by attribute.

The detail view shows every attribute of the selected notification with its
change against the previous one, so a developer sees at once which value
moved. Values compare by type *and* value: int32 ``1`` and int64 ``1L`` are
different (they match different subscriptions), and NaN equals NaN here
because for a human the value did not change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from elvin_apps.console.typed import type_name

from elvin.values import Value

__all__ = ["Change", "diff_notifications"]

ADDED, REMOVED, CHANGED, SAME = "added", "removed", "changed", "same"


@dataclass(frozen=True)
class Change:
    name: str
    kind: str               # added / removed / changed / same
    old: Value | None = None
    new: Value | None = None


def same_value(a: Value, b: Value) -> bool:
    if type_name(a) != type_name(b):
        return False
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def diff_notifications(previous: Mapping[str, Value] | None,
                       current: Mapping[str, Value]) -> list[Change]:
    """Every attribute of ``current`` in order (added, changed or same), then
    the attributes only ``previous`` had (removed). With no previous
    notification everything is "added"."""
    previous = previous or {}
    changes = []
    for name, value in current.items():
        if name not in previous:
            changes.append(Change(name, ADDED, None, value))
        elif same_value(previous[name], value):
            changes.append(Change(name, SAME, previous[name], value))
        else:
            changes.append(Change(name, CHANGED, previous[name], value))
    for name, value in previous.items():
        if name not in current:
            changes.append(Change(name, REMOVED, value, None))
    return changes
