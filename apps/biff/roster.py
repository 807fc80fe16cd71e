"""The roster: who is there and in what state, as one biff instance sees it.

There is no central repository of biff state (see the Elvin paper on
awareness biffs): every instance keeps its own roster from the presence
messages it hears. An entry lives for the lifetime its sender promised and
is dropped unless refreshed, so an instance that crashed (and can no longer
say goodbye) disappears by itself. Pure and clock-driven (``now`` is passed
in), so it is tested without sleeping and used from asyncio or anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from elvin_apps.biff.protocol import PresenceMessage

__all__ = ["Member", "Roster"]


@dataclass(frozen=True, slots=True)
class Member:
    """One biff instance (or foreign presence client) in the roster.

    ``since`` and ``expires`` are clock readings (the roster's clock,
    monotonic seconds); ``local`` marks this instance's own entry, which
    never expires.
    """

    key: str
    user: str
    status: str
    text: str = ""
    since: float = 0.0
    expires: float = math.inf
    local: bool = False
    client_id: str = ""

    def visible(self) -> tuple:
        """What a user can see of the entry: a refresh that changes none of
        it is not a change worth redrawing for."""
        return (self.user, self.status, self.text, self.local)


class Roster:
    """Members by key, with expiry. ``max_members`` bounds memory against a
    flood of fake clients: beyond it the entry closest to expiry goes."""

    def __init__(self, max_members: int = 500) -> None:
        if max_members < 1:
            raise ValueError("max_members must be at least 1")
        self.max_members = max_members
        self._members: dict[str, Member] = {}

    # -- reading ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def get(self, key: str) -> Member | None:
        return self._members.get(key)

    def members(self) -> list[Member]:
        """Every member, by user name: the same order in every instance
        (arrival order differs from one instance to the next)."""
        return sorted(self._members.values(), key=lambda m: (m.user.casefold(), m.key))

    def with_status(self, status: str) -> list[Member]:
        """Members in ``status``, one per user (a user may run biffs on
        several machines; they count once: the local entry if it is one of
        them, else the one in that status longest)."""
        seen: dict[str, Member] = {}
        for member in self.members():
            if member.status == status:
                user = member.user.casefold()
                old = seen.get(user)
                if old is None or (member.local, -member.since) > (old.local, -old.since):
                    seen[user] = member
        return list(seen.values())

    def next_expiry(self) -> float | None:
        """The clock reading at which the next entry expires, if any does."""
        soonest = min((m.expires for m in self._members.values()), default=math.inf)
        return None if soonest == math.inf else soonest

    # -- changing (each returns whether anything visible changed) ---------------
    def set_local(self, key: str, user: str, status: str, text: str, since: float,
                  client_id: str = "") -> bool:
        """This instance's own entry (never expires)."""
        return self._put(Member(key, user, status, text, since, math.inf, True, client_id))

    def apply(self, message: PresenceMessage, now: float, lifetime: float) -> bool:
        """Take in a presence message heard at ``now``; an entry without a
        refresh for ``lifetime`` seconds expires. Departures remove."""
        key = message.key
        if message.departs:
            return self.remove(key)
        if not message.status:          # a bare request announces nothing
            return False
        old = self._members.get(key)
        if old is not None and old.local:
            return False                # nobody else speaks for this instance
        since = now - message.duration
        if old is not None and old.status == message.status:
            since = old.since           # a refresh: keep the first reading
        return self._put(Member(key, message.user, message.status, message.text, since,
                                now + lifetime, False, message.client_id))

    def remove(self, key: str) -> bool:
        return self._members.pop(key, None) is not None

    def expire(self, now: float) -> list[Member]:
        """Drop the entries whose time is up; returns them."""
        gone = [m for m in self._members.values() if m.expires <= now]
        for member in gone:
            del self._members[member.key]
        return gone

    def clear_remote(self) -> bool:
        """Forget everybody but ourselves (what we knew may be stale)."""
        remote = [k for k, m in self._members.items() if not m.local]
        for key in remote:
            del self._members[key]
        return bool(remote)

    def _put(self, member: Member) -> bool:
        old = self._members.get(member.key)
        if old is None and len(self._members) >= self.max_members:
            victim = min((m for m in self._members.values() if not m.local),
                         key=lambda m: m.expires, default=None)
            if not member.local and (victim is None or victim.expires >= member.expires):
                return False            # the newcomer would be the first to go
            if victim is not None:
                del self._members[victim.key]
        self._members[member.key] = member
        return old is None or old.visible() != member.visible()
