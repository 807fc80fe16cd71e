"""The coffee biff: who is having a coffee right now.

The original Elvin biff (from the DSTC): a coffee cup to click, a one-line
scrolling list of current drinkers and their count. All of that is the
generic ``Biff`` plus this configuration; the window is in ``window``.
"""

from __future__ import annotations

from elvin_apps.biff.core import Biff
from elvin_apps.biff.roster import Member

__all__ = ["CoffeeBiff"]


class CoffeeBiff(Biff):
    """Status ``coffee`` in group ``|coffee|``; a coffee lasts
    ``active_timeout`` seconds (15 minutes unless configured) unless the
    drinker says they are done earlier."""

    domain = "coffee"
    active_label = "having a coffee"
    empty_text = "Nobody is having a coffee right now"

    def __init__(self, user: str | None = None, **kwargs) -> None:
        kwargs.setdefault("active_timeout", 15 * 60)
        super().__init__("coffee", user, **kwargs)

    def render(self, member: Member) -> str:
        """``alice — in 5 minutes at the kitchen``"""
        return f"{member.user} — {member.text}" if member.text else member.user
