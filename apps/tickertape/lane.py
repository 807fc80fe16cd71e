"""Scroller geometry: where each message is on the one scrolling line.

Pure Python (no Qt) so that the behaviour users notice — new messages enter
next from the right, messages that scroll off the left come round again
until they expire, dragging back brings earlier ones back, removed messages
fade out where they are — is testable without a screen.

Items that have entered the view have an ``x`` (left edge, view
coordinates); the others wait in two queues: fresh messages (shown next, in
arrival order) and recycled ones (already shown, waiting to come round again).
Only the visible items are ever moved or painted, so the cost of a frame
does not grow with the number of queued messages.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: Seconds a removed (expired, hidden, killed) visible message takes to fade out.
FADE_OUT = 0.6


@dataclass(eq=False)
class Item:
    uid: int
    width: float | None  # None: not measured yet (measured when it enters)
    x: float = 0.0
    dying_since: float | None = None
    opacity: float = 1.0  # the widget's opacity when it started to fade out
    #: seconds it has waited to enter, not counting while the line was paused
    waited: float = 0.0
    #: it waited through a pause: the user held it back, so it is shown late
    #: rather than skipped
    held: bool = False

    @property
    def right(self) -> float:
        return self.x + (self.width or 0.0)


class Lane:
    """The positions of the messages on the line."""

    def __init__(self, view_width: float = 800.0, gap: float = 48.0,
                 measure: Callable[[int], float] | None = None) -> None:
        self.view_width = float(view_width)
        self.gap = float(gap)
        #: width of an item by uid, asked only when the item is about to
        #: enter the view: under a flood most queued messages are replaced or
        #: expire before they would be shown, and are never laid out
        self.measure = measure
        self.visible: list[Item] = []          # left to right
        self.fresh: deque[Item] = deque()      # never shown yet, arrival order
        self.recycled: deque[Item] = deque()   # shown, waiting to come round
        self._items: dict[int, Item] = {}

    # -- queries -------------------------------------------------------------
    def __contains__(self, uid: int) -> bool:
        return uid in self._items

    def __len__(self) -> int:
        return len(self._items)

    def item(self, uid: int) -> Item | None:
        return self._items.get(uid)

    @property
    def idle(self) -> bool:
        """Nothing to show and nothing fading: the animation can stop."""
        return not self._items

    def item_at(self, x: float) -> Item | None:
        for item in self.visible:
            if item.x <= x < item.right and item.dying_since is None:
                return item
        return None

    def room_needed(self) -> float:
        """Pixels the line must still move before the next waiting message
        can enter at the right edge (0 when nothing waits or it fits now)."""
        if not self.fresh or not self.visible:
            return 0.0
        return max(0.0, self.visible[-1].right + self.gap - self.view_width)

    def speed_for_deadline(self, deadline: float, floor: float = 0.25,
                           look_ahead: int = 8) -> float:
        """The speed (px/s) at which each of the first ``look_ahead``
        waiting messages enters by ``deadline`` seconds after it arrived:
        the k-th can enter once the line has moved the room the first needs
        plus the widths of the k-1 before it, and has ``deadline - waited``
        seconds left (at least ``floor``). A burst is spread over its
        deadlines instead of the first being brought in just in time and the
        rest being late."""
        room = self.room_needed()
        if not self.fresh or (room <= 0 and len(self.fresh) == 1):
            return 0.0
        speed = 0.0
        for k, item in enumerate(self.fresh):
            if k >= look_ahead:
                break
            if k:
                before = self.fresh[k - 1]
                if before.width is None:
                    before.width = self._measure(before)
                room += before.width + self.gap
            if room > 0:
                speed = max(speed, room / max(deadline - item.waited, floor))
        return speed

    def wait(self, seconds: float) -> None:
        """The waiting messages waited ``seconds`` more (not while paused)."""
        for item in self.fresh:
            item.waited += seconds

    def as_shown(self) -> None:
        """What waits now counts as shown before (messages put back from
        the history at start): it comes round at the user's speed instead
        of being hurried in as a backlog."""
        while self.fresh:
            self.recycled.append(self.fresh.popleft())

    def hold(self) -> None:
        """The line is paused: what waits now is never skipped."""
        for item in self.fresh:
            item.held = True

    def skip_overdue(self, limit: float) -> list[int]:
        """Take out of the line the waiting messages that waited more than
        ``limit`` seconds (a flood the line cannot show in time), except
        those held through a pause; they stay in the model and the history.
        Returns their uids."""
        overdue = [item for item in self.fresh if item.waited > limit and not item.held]
        for item in overdue:
            self._forget(item)
        return [item.uid for item in overdue]

    def is_visible(self, uid: int) -> bool:
        item = self._items.get(uid)
        return item is not None and item in self.visible

    # -- changes -------------------------------------------------------------
    def add(self, uid: int, width: float | None = None) -> Item:
        """A new message: it is the next to enter from the right (``width``
        None: measured with ``measure`` when it enters)."""
        item = Item(uid, None if width is None else max(1.0, float(width)))
        self._items[uid] = item
        self.fresh.append(item)
        self._fill()
        return item

    def resize_item(self, uid: int, width: float | None) -> None:
        """A message's text changed (Replacement-Id): keep it where it is and
        push the ones after it along if it grew (a waiting item is just
        measured again when it enters)."""
        item = self._items.get(uid)
        if item is None:
            return
        if item not in self.visible:
            item.width = None if width is None else max(1.0, float(width))
            return
        if width is None:
            width = self._measure(item)
        item.width = max(1.0, float(width))
        if item in self.visible:
            index = self.visible.index(item)
            for before, after in zip(self.visible[index:], self.visible[index + 1:],
                                     strict=False):
                after.x = max(after.x, before.right + self.gap)
            self._drop_beyond_right()

    def remove(self, uid: int, now: float) -> None:
        """The message left the model: fade it out if it is on screen."""
        item = self._items.get(uid)
        if item is None:
            return
        if item in self.visible:
            if item.dying_since is None:
                item.dying_since = now
            return
        self._forget(item)

    def clear(self) -> None:
        self.visible.clear()
        self.fresh.clear()
        self.recycled.clear()
        self._items.clear()

    def set_view_width(self, width: float) -> None:
        self.view_width = max(1.0, float(width))
        self._drop_beyond_right()
        self._fill()

    def advance(self, dx: float, now: float = 0.0) -> None:
        """Move the line by ``dx`` pixels (negative: the normal leftward
        scroll; positive: dragging back to earlier messages)."""
        if dx:
            for item in self.visible:
                item.x += dx
        self._reap(now)
        if dx < 0:
            self._drop_beyond_left()
        elif dx > 0:
            self._drop_beyond_right()
            self._bring_back()
        self._fill()

    # -- internals -----------------------------------------------------------
    def _measure(self, item: Item) -> float:
        width = self.measure(item.uid) if self.measure is not None else 1.0
        return max(1.0, float(width))

    def _forget(self, item: Item) -> None:
        self._items.pop(item.uid, None)
        for queue in (self.fresh, self.recycled):
            try:
                queue.remove(item)
            except ValueError:
                pass
        if item in self.visible:
            self.visible.remove(item)

    def _reap(self, now: float) -> None:
        for item in [i for i in self.visible if i.dying_since is not None
                     and now - i.dying_since >= FADE_OUT]:
            self._forget(item)

    def _drop_beyond_left(self) -> None:
        while self.visible and self.visible[0].right < 0:
            item = self.visible.pop(0)
            if item.dying_since is not None:
                self._forget(item)
            else:
                self.recycled.append(item)

    def _drop_beyond_right(self) -> None:
        # items pushed past the right edge wait again, first in line
        while self.visible and self.visible[-1].x > self.view_width:
            item = self.visible.pop()
            if item.dying_since is not None:
                self._forget(item)
            else:
                self.fresh.appendleft(item)

    def _bring_back(self) -> None:
        # dragging right: the last message that left on the left comes back
        while self.recycled and (not self.visible or self.visible[0].x - self.gap > 0):
            item = self.recycled.pop()
            edge = self.visible[0].x if self.visible else self.view_width
            item.x = edge - self.gap - item.width
            self.visible.insert(0, item)

    def _fill(self) -> None:
        # room on the right: the next message enters there
        while self.fresh or self.recycled:
            if self.visible:
                right = self.visible[-1].right + self.gap
                if right > self.view_width:
                    return
                x = self.view_width if right < self.view_width else right
            else:
                x = self.view_width
            item = self.fresh.popleft() if self.fresh else self.recycled.popleft()
            if item.width is None:
                item.width = self._measure(item)
            item.x = x
            self.visible.append(item)
