"""The biff's list of people: who is in the domain (having a coffee), and
who is merely around, in a fixed list that can be read at a glance.

One row per user: the short name (the part before ``@``, unless two users
share it), their note, and for how long ("for 4 min", from the Status-Duration
they announced). People in the domain come first, those online but idle
after them, in grey. :func:`people_rows` is pure (the clock is passed in);
:class:`PeopleList` draws the rows and refreshes the durations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from elvin_apps.biff.core import Biff
from elvin_apps.biff.roster import Member
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

__all__ = ["PeopleList", "PersonRow", "for_how_long", "people_rows", "short_name"]

IDLE = QColor("#8a8f95")
#: How often the "for N min" column is brought up to date (ms).
REFRESH_MS = 20_000


@dataclass(frozen=True)
class PersonRow:
    name: str          # as shown
    user: str          # in full (the tooltip)
    note: str
    duration: str      # "for 4 min", "" for idle people
    active: bool
    local: bool


def short_name(user: str, others: set[str] | frozenset[str] = frozenset()) -> str:
    """``alice@host`` -> ``alice``, unless another user in ``others`` would
    read the same (then the full name)."""
    name = user.partition("@")[0] or user
    clash = any(o != user and (o.partition("@")[0] or o).casefold() == name.casefold()
                for o in others)
    return user if clash else name


def for_how_long(seconds: float) -> str:
    """``"just now"``, ``"for 4 min"``, ``"for 1 h 5 min"``."""
    minutes = int(max(0.0, seconds) // 60)
    if minutes < 1:
        return "just now"
    if minutes < 60:
        return f"for {minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"for {hours} h {minutes} min" if minutes else f"for {hours} h"


def people_rows(biff: Biff, now: float) -> list[PersonRow]:
    """The rows to show: active people (longest first), then idle ones by
    name. ``now`` is a reading of the biff's clock."""
    active = sorted(biff.active_members, key=lambda m: (m.since, m.user.casefold()))
    active_users = {m.user.casefold() for m in active}
    idle: dict[str, Member] = {}
    for member in biff.members:
        user = member.user.casefold()
        if member.status == biff.idle_status and user not in active_users:
            if user not in idle or member.local:
                idle[user] = member
    users = {m.user for m in active} | {m.user for m in idle.values()}
    rows = [PersonRow(short_name(m.user, users), m.user, m.text,
                      for_how_long(now - m.since), True, m.local) for m in active]
    rows += [PersonRow(short_name(m.user, users), m.user, m.text, "", False, m.local)
             for m in sorted(idle.values(), key=lambda m: m.user.casefold())]
    return rows


class PeopleList(QTreeWidget):
    """The rows of :func:`people_rows` in three columns (name, note, how
    long), without a header; ``set_stale(True)`` greys the list and says it
    may be out of date (while not connected)."""

    def __init__(self, biff: Biff, parent: QWidget | None = None, *,
                 clock: Callable[[], float] | None = None) -> None:
        super().__init__(parent)
        self.biff = biff
        self.clock = clock or biff.now
        self.stale = False
        self.setColumnCount(3)
        self.setHeaderHidden(True)
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(True)
        self.setSelectionMode(QTreeWidget.SelectionMode.NoSelection)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        header = self.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.setAccessibleName("people")
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()
        self.refresh()

    def rows(self) -> list[PersonRow]:
        return people_rows(self.biff, self.clock())

    def refresh(self) -> None:
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
                    item.setForeground(column, QBrush(IDLE))
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
