"""The biff's roster: who is having a coffee, who is around, who is away,
in a fixed list that can be read at a glance.

One row per user: the short name (the part before ``@``, unless two users
share it), their note, and a time: for how long they have had their coffee
("for 4 min", from the Status-Duration they announced), or when they last
had one ("last coffee 2 h ago"). People having a coffee come first, those
around after them, then those away, in grey: colleagues named in the
configuration and everyone seen before, with when they were last seen
("seen 20 min ago", "not seen yet"), from the ``PeopleBook``
(``acquaintances``). :func:`people_rows` is pure (the clocks are passed
in); :class:`PeopleList` draws the rows and keeps the times up to date.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from elvin_apps.biff.acquaintances import PeopleBook, ago, span
from elvin_apps.biff.core import Biff
from elvin_apps.biff.roster import Member
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

from elvin.qt import flat_table

__all__ = ["PeopleList", "PersonRow", "for_how_long", "people_rows", "short_name"]

IDLE = QColor("#8a8f95")
AWAY = QColor("#b0b4b9")
#: How often the "for N min" column is brought up to date (ms).
REFRESH_MS = 20_000
#: How often the people known are written down (seconds), besides at the end.
SAVE_EVERY = 60.0


@dataclass(frozen=True)
class PersonRow:
    name: str          # as shown
    user: str          # in full (the tooltip)
    note: str
    duration: str      # "for 4 min" while having a coffee, else "last coffee 2 h ago" or ""
    active: bool
    local: bool
    away: bool = False  # not running a biff now (left, or not seen yet)


def short_name(user: str, others: set[str] | frozenset[str] = frozenset()) -> str:
    """``alice@host`` -> ``alice``, unless another user in ``others`` would
    read the same (then the full name)."""
    name = user.partition("@")[0] or user
    clash = any(o != user and (o.partition("@")[0] or o).casefold() == name.casefold()
                for o in others)
    return user if clash else name


def for_how_long(seconds: float) -> str:
    """``"just now"``, ``"for 4 min"``, ``"for 1 h 5 min"``: to the minute,
    since the column is brought up to date while it is shown."""
    words = span(seconds, to_the_minute=True)
    return f"for {words}" if words else "just now"


def people_rows(biff: Biff, now: float, book: PeopleBook | None = None,
                wall: float | None = None) -> list[PersonRow]:
    """The rows to show: active people (longest first), then idle ones by
    name, then (with a ``book``) those away, the most recently seen first.
    ``now`` is a reading of the biff's clock, ``wall`` of the wall clock."""
    wall = time.time() if wall is None else wall
    active = sorted(biff.active_members, key=lambda m: (m.since, m.user.casefold()))
    active_users = {m.user.casefold() for m in active}
    idle: dict[str, Member] = {}
    for member in biff.members:
        user = member.user.casefold()
        if member.status == biff.idle_status and user not in active_users:
            if user not in idle or member.local:
                idle[user] = member
    away = [] if book is None else [p for p in book.away()
                                    if p.user.casefold() not in active_users
                                    and p.user.casefold() not in idle]
    users = {m.user for m in active} | {m.user for m in idle.values()} | \
        {p.user for p in away}

    def last_coffee(member: Member) -> str:
        return "" if book is None or member.local else book.last_coffee(member.user, wall)

    rows = [PersonRow(short_name(m.user, users), m.user, m.text,
                      for_how_long(now - m.since), True, m.local) for m in active]
    rows += [PersonRow(short_name(m.user, users), m.user, m.text, last_coffee(m), False,
                       m.local)
             for m in sorted(idle.values(), key=lambda m: m.user.casefold())]
    for person in away:
        last = person.left if person.left is not None else person.seen
        seen = f"seen {ago(wall - last)}" if last is not None else "not seen yet"
        coffee = f"last coffee {ago(wall - person.coffee)}" if person.coffee is not None \
            else ""
        rows.append(PersonRow(short_name(person.user, users), person.user, seen, coffee,
                              False, False, True))
    return rows


class PeopleList(QTreeWidget):
    """The rows of :func:`people_rows` in three columns (name, note, time),
    without a header; ``set_stale(True)`` greys the list and says it may be
    out of date (while not connected). With a ``book``, every refresh
    shows it the roster first (who left is noted) and it is written down
    now and then."""

    def __init__(self, biff: Biff, parent: QWidget | None = None, *,
                 clock: Callable[[], float] | None = None, book: PeopleBook | None = None,
                 wall_clock: Callable[[], float] = time.time) -> None:
        super().__init__(parent)
        self.biff = biff
        self.clock = clock or biff.now
        self.wall_clock = wall_clock
        self.book = book
        self._saved = wall_clock()
        self.stale = False
        fit, stretch = QHeaderView.ResizeMode.ResizeToContents, QHeaderView.ResizeMode.Stretch
        flat_table(self, 3, [fit, stretch, fit])
        self.setSelectionMode(QTreeWidget.SelectionMode.NoSelection)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setAccessibleName("people")
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()
        self.refresh()

    def rows(self) -> list[PersonRow]:
        return people_rows(self.biff, self.clock(), self.book, self.wall_clock())

    def refresh(self) -> None:
        if self.book is not None and self.biff.started:
            wall = self.wall_clock()
            self.book.observe(self.biff.members, wall, self.clock())
            if wall - self._saved >= SAVE_EVERY:
                self._saved = wall
                self.book.save()
        rows = self.rows()
        self.clear()
        bold = QFont(self.font())
        bold.setBold(True)
        for row in rows:
            name = row.name + (" (you)" if row.local else "")
            item = QTreeWidgetItem([("\N{HOT BEVERAGE} " if row.active else "   ") + name,
                                    row.note, row.duration])
            item.setToolTip(0, row.user)
            item.setToolTip(1, row.note)
            item.setTextAlignment(2, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if row.active:
                item.setFont(0, bold)
            if not row.active or self.stale:
                for column in range(3):
                    item.setForeground(column, QBrush(AWAY if row.away else IDLE))
            if row.away:
                italic = QFont(self.font())
                italic.setItalic(True)
                item.setFont(1, italic)
            self.addTopLevelItem(item)
        if not any(r.active for r in rows):
            empty = QTreeWidgetItem([self.biff.empty_text or "Nobody right now", "", ""])
            empty.setForeground(0, QBrush(IDLE))
            empty.setFirstColumnSpanned(True)
            self.insertTopLevelItem(0, empty)
            empty.setFirstColumnSpanned(True)

    def set_stale(self, stale: bool) -> None:
        if stale != self.stale:
            self.stale = stale
            self.refresh()

    def texts(self) -> list[tuple[str, str, str]]:
        """The rows as shown (tests, accessibility)."""
        return [tuple(self.topLevelItem(i).text(c) for c in range(3))
                for i in range(self.topLevelItemCount())]
