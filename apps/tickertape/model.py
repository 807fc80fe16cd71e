"""The live messages of the scroller: what is shown, for how long, in what colour.

Kept apart from the widget so that the rules (Replacement-Id replaces in
place, Timeout expires, negative Timeout is log-only, hidden messages and
killed threads stay away) are testable without painting, and so that the
widget only has to draw what the model holds.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from elvin_apps.tickertape.groups import (
    DEFAULT_MAX_TIME,
    DEFAULT_MIN_TIME,
    Group,
    GroupList,
    fold,
)
from elvin_apps.tickertape.message import Message
from elvin_apps.tickertape.palette import Palette
from elvin_apps.tickertape.qtcompat import emit
from PySide6.QtCore import QObject, QTimer, Signal

#: Seconds for a message whose Timeout is 0 ("shown briefly").
BRIEF_SECONDS = 8.0
#: Default lifetime when the sender suggests none (classic tickertape: 10 min).
DEFAULT_LIFETIME = 600.0
#: Most messages held at once; older ones leave first (a flood guard).
MAX_ENTRIES = 500

_uids = itertools.count(1)


@dataclass(eq=False)
class Entry:
    """A message in the scroller and its timing (monotonic clock)."""

    message: Message
    colour: str
    shown_at: float
    expires_at: float
    mention: bool = False
    #: who the message answers (the referent's sender) when that is known
    replied_to: str | None = None
    uid: int = field(default_factory=lambda: next(_uids))
    version: int = 0  # bumped on replacement: the widget re-lays the text out

    @property
    def lifetime(self) -> float:
        return self.expires_at - self.shown_at

    def age_fraction(self, now: float) -> float:
        """0 when new, 1 at expiry: how far the message has faded."""
        span = self.expires_at - self.shown_at
        if span <= 0:
            return 1.0
        return min(1.0, max(0.0, (now - self.shown_at) / span))


class ScrollerModel(QObject):
    """The ordered live entries, with signals the scroller widget follows."""

    added = Signal(object)      # Entry
    replaced = Signal(object)   # Entry (same uid, new message)
    removed = Signal(object)    # Entry
    cleared = Signal()

    def __init__(self, groups: GroupList | None = None, palette: Palette | None = None, *,
                 default_lifetime: float = DEFAULT_LIFETIME,
                 clock: Callable[[], float] = time.monotonic,
                 max_entries: int = MAX_ENTRIES, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.groups = groups or GroupList()
        self.palette = palette or Palette(self.groups)
        self.default_lifetime = default_lifetime
        self.clock = clock
        self.max_entries = max_entries
        self.is_mention: Callable[[Message], bool] = lambda _m: False
        #: the sender of a message no longer shown, by Message-Id (the
        #: controller asks the history), so a reply can say whom it answers
        self.sender_of: Callable[[str], str | None] = lambda _id: None
        #: muted senders and groups: (kind, folded name) -> until (model clock)
        self.mutes: dict[tuple[str, str], float] = {}
        self._entries: dict[int, Entry] = {}          # uid -> entry, in arrival order
        self._by_replacement: dict[tuple[str, str], int] = {}
        self._killed: set[str] = set()
        self._timer = QTimer(self)
        self._timer.setInterval(250)
        self._timer.timeout.connect(self.expire)

    # -- queries -------------------------------------------------------------
    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, uid: int) -> Entry | None:
        return self._entries.get(uid)

    def find(self, message_id: str) -> Entry | None:
        for entry in self._entries.values():
            if entry.message.message_id == message_id:
                return entry
        return None

    def is_killed(self, message: Message) -> bool:
        killed = self._killed
        return bool(killed) and (
            message.message_id in killed
            or (message.thread_id is not None and message.thread_id in killed)
            or (message.in_reply_to is not None and message.in_reply_to in killed))

    # -- settings ------------------------------------------------------------
    def set_groups(self, groups: GroupList) -> None:
        """New group settings: colours and lifetimes of entries follow."""
        self.groups = groups
        self.palette.set_groups(groups)
        for entry in self._entries.values():
            colour = self.palette.colour(entry.message.group)
            if colour != entry.colour:
                entry.colour = colour
                entry.version += 1
                emit(self.replaced, entry)

    def lifetime_of(self, message: Message) -> float:
        group = self.groups.find(message.group) or Group(
            message.group, min_time=DEFAULT_MIN_TIME, max_time=DEFAULT_MAX_TIME)
        suggested = message.timeout
        if suggested == 0:
            suggested = BRIEF_SECONDS
        return group.lifetime(suggested, self.default_lifetime)

    # -- changes -------------------------------------------------------------
    def add(self, message: Message) -> Entry | None:
        """Show ``message`` (or replace the one it updates). ``None`` when it
        is not shown: log-only (negative Timeout) or in a killed thread."""
        if self.is_killed(message):
            self._killed.add(message.message_id)  # replies to it die too
            return None
        if message.timeout is not None and message.timeout < 0:
            return None
        if self.is_muted(message):
            return None
        now = self.clock()
        replied_to = self.referent_sender(message)
        lifetime = self.lifetime_of(message)
        colour = self.palette.colour(message.group)
        mention = self.is_mention(message)
        if message.replacement_id:
            key = (self.groups_key(message.group), message.replacement_id)
            uid = self._by_replacement.get(key)
            old = self._entries.get(uid) if uid is not None else None
            if old is not None:
                old.message = message
                old.colour = colour
                old.mention = mention
                old.replied_to = replied_to
                old.shown_at = now
                old.expires_at = now + lifetime
                old.version += 1
                emit(self.replaced, old)
                return old
        entry = Entry(message, colour, now, now + lifetime, mention, replied_to)
        self._entries[entry.uid] = entry
        if message.replacement_id:
            self._by_replacement[(self.groups_key(message.group), message.replacement_id)] = \
                entry.uid
        emit(self.added, entry)
        while len(self._entries) > self.max_entries:
            self._remove(next(iter(self._entries.values())))
        if not self._timer.isActive():
            self._timer.start()
        return entry

    @staticmethod
    def groups_key(group: str) -> str:
        return fold(group)

    def expire(self) -> list[Entry]:
        """Drop entries whose lifetime is over; returns them."""
        now = self.clock()
        gone = [e for e in self._entries.values() if e.expires_at <= now]
        for entry in gone:
            self._remove(entry)
        if not self._entries:
            self._timer.stop()
        return gone

    def hide(self, uid: int) -> None:
        entry = self._entries.get(uid)
        if entry is not None:
            self._remove(entry)

    def kill_thread(self, message: Message) -> int:
        """Hide the thread of ``message`` now and its later messages for the
        rest of the session; returns how many entries went."""
        self._killed.update(k for k in (message.message_id, message.thread_id,
                                        message.in_reply_to) if k)
        # follow the reply chain both ways among the shown messages
        changed = True
        while changed:
            changed = False
            for entry in self._entries.values():
                m = entry.message
                if self.is_killed(m) and m.message_id not in self._killed:
                    self._killed.add(m.message_id)
                    changed = True
        doomed = [e for e in self._entries.values() if self.is_killed(e.message)]
        for entry in doomed:
            self._remove(entry)
        return len(doomed)

    def referent_sender(self, message: Message) -> str | None:
        """The sender of the message ``message`` replies to, if we have it."""
        if not message.in_reply_to:
            return None
        shown = self.find(message.in_reply_to)
        if shown is not None:
            return shown.message.sender
        try:
            return self.sender_of(message.in_reply_to)
        except Exception:  # noqa: BLE001 - a lookup failure only loses the name
            return None

    # -- muting ----------------------------------------------------------------
    def mute(self, kind: str, name: str, seconds: float | None = None) -> int:
        """Stop showing messages from a sender (``kind`` "sender") or in a
        group ("group") for ``seconds``, or until the app quits (None).
        Those shown now go at once; returns how many."""
        if kind not in ("sender", "group"):
            raise ValueError(f"mute: unknown kind {kind!r}")
        until = math.inf if seconds is None else self.clock() + seconds
        self.mutes[(kind, fold(name))] = until
        doomed = [e for e in self._entries.values() if self.is_muted(e.message)]
        for entry in doomed:
            self._remove(entry)
        return len(doomed)

    def unmute_all(self) -> None:
        self.mutes.clear()

    def is_muted(self, message: Message) -> bool:
        mutes = self.mutes
        if not mutes:
            return False
        now = self.clock()
        for key in (("sender", fold(message.sender)), ("group", fold(message.group))):
            until = mutes.get(key)
            if until is not None:
                if until > now:
                    return True
                del mutes[key]   # the while is over
        return False

    def clear(self) -> None:
        self._entries.clear()
        self._by_replacement.clear()
        emit(self.cleared)

    def _remove(self, entry: Entry) -> None:
        if self._entries.pop(entry.uid, None) is None:
            return
        rid = entry.message.replacement_id
        if rid:
            key = (self.groups_key(entry.message.group), rid)
            if self._by_replacement.get(key) == entry.uid:
                del self._by_replacement[key]
        emit(self.removed, entry)
