"""Colours per group: stable across runs and machines, overridable per group.

The colour is derived from a hash of the folded group name (not Python's
``hash``, which changes per process), so "Chat" is the same colour for every
user with the same groups and "chat" is the same group and colour. The hash
picks from a curated palette rather than the whole colour wheel, so two
groups never get confusingly close colours, and the user's own groups share
the palette out without collisions (see :class:`Palette`); a user can
override any group's colour.
"""

from __future__ import annotations

import hashlib

from elvin_apps.tickertape.groups import GroupList, fold

#: A categorical palette chosen to read well on the ticker's dark background
#: and to be told apart from one another (hue and lightness both vary);
#: a hash picks one, so a handful of groups rarely share a colour.
PALETTE = (   # 12 hues ~30 degrees apart; neighbours here differ a lot,
    "#ff6b6b",  # red           so probing to the next free entry jumps hue
    "#38d9a9",  # teal
    "#ffe066",  # yellow
    "#91a7ff",  # indigo
    "#b5e853",  # lime
    "#e599f7",  # magenta
    "#66d9e8",  # cyan
    "#ffa94d",  # orange
    "#b197fc",  # violet
    "#69db7c",  # green
    "#faa2c1",  # pink
    "#74c0fc",  # blue
)


def palette_index(name: str) -> int:
    """Which palette entry a group name gets (stable across runs)."""
    digest = hashlib.sha1(fold(name).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % len(PALETTE)


def hash_colour(name: str) -> str:
    """The default ``#rrggbb`` colour of a group."""
    return PALETTE[palette_index(name)]


def text_colour_on(colour: str) -> str:
    """Black or white, whichever reads better on ``colour`` (WCAG luminance)."""
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))

    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    luminance = 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
    return "#111111" if luminance > 0.22 else "#ffffff"


class Palette:
    """Group name -> colour.

    A group's colour is its own override if it has one; otherwise the
    configured groups share out the palette: each takes its hash-preferred
    colour, or the next one not yet taken by a group earlier in the list, so
    up to ``len(PALETTE)`` configured groups never share a colour. Appending
    a group never changes the colours of the groups before it. Groups that
    are not configured (seen through threads or the extra subscription) use
    their hash colour.
    """

    def __init__(self, groups: GroupList | None = None) -> None:
        self._cache: dict[str, str] = {}
        self._assigned: dict[str, str] = {}
        if groups is not None:
            self.set_groups(groups)

    def set_groups(self, groups: GroupList) -> None:
        assigned: dict[str, str] = {}
        taken = {g.colour for g in groups if g.colour}
        for group in groups:
            if group.colour:
                assigned[group.folded] = group.colour
                continue
            start = palette_index(group.name)
            for step in range(len(PALETTE)):
                colour = PALETTE[(start + step) % len(PALETTE)]
                if colour not in taken:
                    break
            else:
                colour = PALETTE[start]  # more groups than colours
            taken.add(colour)
            assigned[group.folded] = colour
        self._assigned = assigned
        self._cache.clear()

    def colour(self, group: str) -> str:
        key = fold(group)
        colour = self._cache.get(key)
        if colour is None:
            colour = self._assigned.get(key) or hash_colour(group)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = colour
        return colour
