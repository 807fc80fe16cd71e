"""Who the biff knows: colleagues who are away, and when each last had a coffee.

The roster (``roster.Roster``) holds only the instances that are running
now; a colleague whose biff quit, crashed or was never started is not in
it. A roster a person reads at a glance also wants them: the colleagues
named in the configuration, and everyone seen before, each with their
state ("having a coffee", "around", "left 20 min ago", "not seen yet") and
when they last had a coffee ("last coffee 2 h ago").

``PeopleBook`` keeps that, by user (case folded), in wall-clock seconds so
it survives restarts: ``observe`` takes the roster's members after every
change; someone who was around and is no longer in the roster has left.
It is kept in ``$XDG_STATE_HOME/elvin/biff-people.json`` (a bounded number
of people, the least recently seen forgotten first). Pure apart from that
file; the clock is passed in.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from elvin_apps.biff.roster import Member

from elvin.fileutil import atomic_write
from elvin.statefile import number_in, read_json_state

__all__ = ["Acquaintance", "PeopleBook", "ago", "span"]

log = logging.getLogger("elvin_apps.biff")

#: people the book remembers at most (the least recently seen go first)
MAX_PEOPLE = 500
#: the longest user name taken from the file
MAX_USER = 1000
#: wall-clock times past this (the year 5138) are garbage
LATEST_TIME = 1e11
VERSION = 1


@dataclass
class Acquaintance:
    user: str                        # as they spell it
    colleague: bool = False          # named in the configuration
    seen: float | None = None        # wall clock: last in the roster
    left: float | None = None        # wall clock: when they left (None: here, or never seen)
    coffee: float | None = None      # wall clock: when their last coffee began
    here: bool = False               # in the roster now
    status: str = ""
    text: str = ""


def span(seconds: float, *, to_the_minute: bool = False) -> str | None:
    """How long ``seconds`` is, in the words of the biff's windows: ``"5 min"``,
    ``"2 h"`` (to the minute: ``"2 h 5 min"``), from two days ``"3 days"``;
    None under a minute, which each caller says its own way. Whole units,
    rounded down, so that a time shown never runs ahead of the clock."""
    minutes = int(max(0.0, seconds) // 60)
    if minutes < 1:
        return None
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours >= 48:
        return f"{hours // 24} days"
    return f"{hours} h {minutes} min" if to_the_minute and minutes else f"{hours} h"


def ago(seconds: float) -> str:
    """``"just now"``, ``"5 min ago"``, ``"2 h ago"``, ``"3 days ago"``."""
    words = span(seconds)
    return f"{words} ago" if words else "just now"


class PeopleBook:
    """The people this biff knows, by folded user name."""

    def __init__(self, colleagues: Iterable[str] = (), path: Path | None = None,
                 active_status: str = "coffee") -> None:
        self.path = path
        self.active_status = active_status
        self.people: dict[str, Acquaintance] = {}
        self._dirty = False
        if path is not None:
            self._load(path)
        for name in colleagues:
            name = name.strip()
            if name:
                person = self._person(name)
                person.colleague = True

    # -- changes ------------------------------------------------------------------------
    def _person(self, user: str) -> Acquaintance:
        key = user.casefold()
        person = self.people.get(key)
        if person is None:
            person = self.people[key] = Acquaintance(user)
        return person

    def observe(self, members: Iterable[Member], now: float, monotonic_now: float) -> bool:
        """Take the roster as it is at wall-clock ``now`` (``monotonic_now``
        is the same moment on the roster's clock, to convert its ``since``).
        Returns whether anything a person would see changed."""
        changed = False
        present: dict[str, Member] = {}
        for member in members:
            if member.local:
                continue
            key = member.user.casefold()
            old = present.get(key)
            if old is None or (member.status == self.active_status
                               and old.status != self.active_status):
                present[key] = member
        for member in present.values():
            person = self._person(member.user)
            before = (person.here, person.status, person.text, person.coffee)
            person.user = member.user              # as they spell it themselves
            person.here, person.seen, person.left = True, now, None
            person.status, person.text = member.status, member.text
            if member.status == self.active_status:
                began = now - max(0.0, monotonic_now - member.since)
                if person.coffee is None or abs(person.coffee - began) > 5:
                    person.coffee = began
            changed |= before != (person.here, person.status, person.text, person.coffee)
        for key, person in self.people.items():
            if person.here and key not in present:
                person.here, person.left = False, now
                changed = True
        self._dirty |= changed
        self._bound()
        return changed

    def _bound(self) -> None:
        if len(self.people) <= MAX_PEOPLE:
            return
        strangers = sorted((p for p in self.people.values() if not p.colleague and not p.here),
                           key=lambda p: p.seen or 0.0)
        for person in strangers[:len(self.people) - MAX_PEOPLE]:
            del self.people[person.user.casefold()]

    # -- reading ------------------------------------------------------------------------
    def away(self) -> list[Acquaintance]:
        """People not in the roster now: colleagues and those seen before,
        the most recently seen first, never-seen colleagues last by name."""
        gone = [p for p in self.people.values() if not p.here]
        return sorted(gone, key=lambda p: (p.seen is None, -(p.seen or 0.0),
                                           p.user.casefold()))

    def get(self, user: str) -> Acquaintance | None:
        return self.people.get(user.casefold())

    def last_coffee(self, user: str, now: float) -> str:
        """``"last coffee 2 h ago"``, or "" when none is known."""
        person = self.get(user)
        if person is None or person.coffee is None:
            return ""
        return f"last coffee {ago(now - person.coffee)}"

    # -- the file ------------------------------------------------------------------------
    def _load(self, path: Path) -> None:
        data = read_json_state(path, VERSION, log, "people the biff knew")
        if data is None:
            return
        people = data.get("people", [])
        if not isinstance(people, list):
            log.info("people the biff knew in %s ignored: people is not a list", path)
            return
        skipped = 0
        for entry in people:
            if not isinstance(entry, dict) or not isinstance(entry.get("user"), str) \
                    or not entry["user"] or len(entry["user"]) > MAX_USER:
                skipped += 1
                continue
            person = self._person(entry["user"])
            for name in ("seen", "left", "coffee"):
                value = number_in(entry.get(name), 0, LATEST_TIME)
                if value is not None:
                    setattr(person, name, value)
                elif entry.get(name) is not None:
                    skipped += 1
            if person.left is None and person.seen is not None:
                person.left = person.seen          # they were here when we last looked
        if skipped:
            log.info("people the biff knew in %s: %d bad entries or times ignored",
                     path, skipped)
        self._bound()                               # a file longer than the book holds

    def save(self) -> None:
        """Write the book if it changed (never raises: it is a nicety)."""
        if self.path is None or not self._dirty:
            return
        people = [{k: v for k, v in asdict(p).items()
                   if k in ("user", "seen", "left", "coffee") and v is not None}
                  for p in self.people.values() if p.seen is not None]
        try:
            atomic_write(self.path, json.dumps({"version": VERSION, "people": people},
                                               indent=1) + "\n")
            self._dirty = False
        except OSError as exc:
            log.info("cannot keep the people the biff knows in %s: %s", self.path, exc)
