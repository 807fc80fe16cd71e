"""What the Browse pane knows of everything flowing through a router.

MQTT Explorer shows a broker's traffic as a tree of topics. Elvin has no
topics: a notification is a set of named values. So the tree is by
attribute name, then by value: under ``Group`` one row per group seen
("Chat", "ops"), each with how many notifications had it, how many a
second, and the latest of them; under ``Price`` no rows per value (a real
number is a measurement, not a key) but the latest value. A notification
is counted under every attribute it has.

Memory is bounded: at most ``max_names`` attribute names are kept (the
first seen; a producer that makes up new names would otherwise grow the
tree without end: the names past the bound are counted, up to as many
again, as ``left_out_names``), at most ``max_values`` values per name (a
name with more distinct values, a sequence number or a message text, is a
measurement too: past the bound its rows per value go), and one
notification (the latest) per value. No Qt here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from elvin_apps.console.rate import RateMeter
from elvin_apps.console.received import Received, display_value

__all__ = ["BrowseIndex", "NameNode", "ValueNode", "MAX_NAMES", "MAX_VALUES"]

#: attribute names kept; notifications' other names are only counted
MAX_NAMES = 2000
#: names left out that are remembered to count them (past it: "over N")
LEFT_OUT_COUNTED = 10_000
#: values kept per attribute name; beyond, the name is treated as a measurement
MAX_VALUES = 100
#: a string longer than this is text, not a key
KEY_LENGTH = 80


@dataclass
class ValueNode:
    value: str                       # as shown (display_value)
    count: int = 0
    latest: Received | None = None
    previous: Received | None = None  # the one before the latest, for the diff
    rate: RateMeter = field(default_factory=lambda: RateMeter(window=10.0))


@dataclass
class NameNode:
    name: str
    count: int = 0
    latest: Received | None = None
    previous: Received | None = None
    values: dict[str, ValueNode] = field(default_factory=dict)
    keyed: bool = True              # False: a measurement (no rows per value)
    rate: RateMeter = field(default_factory=lambda: RateMeter(window=10.0))


def _key_like(value: object) -> bool:
    """Strings (short ones) and integers name things; reals and bytes measure."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return len(value) <= KEY_LENGTH and "\n" not in value
    return isinstance(value, int)


class BrowseIndex:
    """Counts, rates and the latest notification per name and per value."""

    def __init__(self, max_values: int = MAX_VALUES, max_names: int = MAX_NAMES) -> None:
        self.max_values = max_values
        self.max_names = max_names
        self.names: dict[str, NameNode] = {}
        #: names seen past ``max_names``, not kept (at most LEFT_OUT_COUNTED of
        #: them are remembered to count them: ``left_out_capped`` says there were more)
        self.left_out_names: set[str] = set()
        self.left_out_capped = False
        self.total = 0
        self.rate = RateMeter(window=10.0)

    def clear(self) -> None:
        self.names.clear()
        self.left_out_names.clear()
        self.left_out_capped = False
        self.total = 0
        self.rate.reset()

    def _leave_out(self, name: str) -> None:
        if name in self.left_out_names:
            return
        if len(self.left_out_names) < LEFT_OUT_COUNTED:
            self.left_out_names.add(name)
        else:
            self.left_out_capped = True

    def feed(self, records: Iterable[Received], now: float) -> dict[str, set[str]]:
        """Count ``records`` (seen at monotonic ``now``); returns, per name
        that changed, the values that changed (new names included)."""
        changed: dict[str, set[str]] = {}
        fed = 0
        for record in records:
            fed += 1
            for name, value in record.attributes.items():
                node = self.names.get(name)
                if node is None:
                    if len(self.names) >= self.max_names:
                        self._leave_out(name)
                        continue
                    node = self.names[name] = NameNode(name)
                node.count += 1
                node.previous, node.latest = node.latest, record
                node.rate.add(1, now)
                touched = changed.setdefault(name, set())
                if not node.keyed:
                    continue
                if not _key_like(value):
                    node.keyed = False        # one real or long text: a measurement
                    node.values.clear()
                    continue
                shown = display_value(value)
                child = node.values.get(shown)
                if child is None:
                    if len(node.values) >= self.max_values:
                        node.keyed = False    # too many values to be a key
                        node.values.clear()
                        continue
                    child = node.values[shown] = ValueNode(shown)
                child.count += 1
                child.previous, child.latest = child.latest, record
                child.rate.add(1, now)
                touched.add(shown)
        self.total += fed
        self.rate.add(fed, now)
        return changed
