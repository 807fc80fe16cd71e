"""A fixed-capacity ring of rows: append at the end, drop from the front.

The live table must answer ``row(i)`` in O(1) for whatever rows the view
paints, and must forget the oldest rows when a busy router sends more than
the user asked to keep. A ``deque`` indexes in O(n) in the middle and a list
drops from the front in O(n); a ring over a preallocated list does both in
O(1), and its capacity can change without losing the newest rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

__all__ = ["RingBuffer"]

T = TypeVar("T")


class RingBuffer(Generic[T]):
    """At most ``capacity`` items, oldest first."""

    __slots__ = ("_items", "_head", "_count", "_capacity")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._items: list[T | None] = [None] * capacity
        self._head = 0
        self._count = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> T:
        count = self._count
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError("ring index out of range")
        return self._items[(self._head + index) % self._capacity]  # type: ignore[return-value]

    def __iter__(self) -> Iterator[T]:
        for i in range(self._count):
            yield self._items[(self._head + i) % self._capacity]  # type: ignore[misc]

    def room(self) -> int:
        return self._capacity - self._count

    def drop_oldest(self, n: int) -> int:
        """Forget the ``n`` oldest items (fewer if there are fewer); returns how many."""
        n = max(0, min(n, self._count))
        items, capacity = self._items, self._capacity
        for i in range(n):
            items[(self._head + i) % capacity] = None   # let them be freed now
        self._head = (self._head + n) % capacity
        self._count -= n
        return n

    def extend(self, new: Iterable[T]) -> None:
        """Append items; the caller makes room first (``drop_oldest``)."""
        items, capacity = self._items, self._capacity
        for item in new:
            if self._count >= capacity:
                raise OverflowError("ring is full: drop_oldest() first")
            items[(self._head + self._count) % capacity] = item
            self._count += 1

    def append(self, item: T) -> None:
        self.extend((item,))

    def clear(self) -> None:
        self._items = [None] * self._capacity
        self._head = 0
        self._count = 0

    def resize(self, capacity: int) -> int:
        """Change the capacity, keeping the newest items; returns how many
        oldest items did not fit (and were dropped)."""
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        kept = list(self)
        dropped = max(0, len(kept) - capacity)
        kept = kept[dropped:]
        self._capacity = capacity
        self._items = kept + [None] * (capacity - len(kept))
        self._head = 0
        self._count = len(kept)
        return dropped
