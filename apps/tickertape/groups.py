"""The user's groups and the subscription expressions that follow from them.

Subscriptions follow the Tickertape Chat Protocol: only messages with all the
required attributes, groups matched with
``fold-case(decompose-compat(Group)) == fold-case(decompose-compat("Chat"))``
so that case and Unicode representation do not split a group, the older
attribute names (TICKERTAPE / USER / TICKERTEXT) for messages from pre-v3
clients, ``Thread-Id == "..."`` for extra-group threads we started, and an
optional free-form expression of the user's own.

A private group has a key: it gets a subscription of its own with that key and
``accept_insecure`` off, and is left out of the public subscription, so a
message that merely claims the group's name without the key is never shown.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

DEFAULT_MIN_TIME = 10        # seconds a message stays at least
DEFAULT_MAX_TIME = 3600      # seconds a message stays at most
MAX_GROUP_NAME = 256


class GroupError(ValueError):
    """A group setting is invalid (the message says which and why)."""


def fold(name: str) -> str:
    """The local equivalent of ``fold-case(decompose-compat(name))``: how we
    decide that two group names are the same group."""
    return unicodedata.normalize("NFKD", name).casefold()


def quote(text: str) -> str:
    """``text`` as an Elvin subscription string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Group:
    """One configured group.

    ``min_time`` / ``max_time`` bound how long its messages stay in the
    scroller whatever Timeout the sender asked for; ``key`` makes the group
    private (messages are sent and received only with that key); ``colour``
    overrides the hash-derived colour (``#rrggbb``).
    """

    name: str                        # the Group attribute of its messages
    subscribe: bool = True           # receive its messages (false: send only)
    min_time: int = DEFAULT_MIN_TIME  # seconds a message stays at least
    max_time: int = DEFAULT_MAX_TIME  # seconds at most (0: no limit)
    key: str | None = None           # makes the group private
    colour: str | None = None        # #rrggbb (default: derived from the name)

    def __post_init__(self) -> None:
        name = self.name.strip() if isinstance(self.name, str) else self.name
        if not isinstance(name, str) or not name:
            raise GroupError("a group needs a name")
        if len(name) > MAX_GROUP_NAME:
            raise GroupError(f"group name longer than {MAX_GROUP_NAME} characters")
        if not name.isprintable():
            raise GroupError(f"group name {name!r} contains control characters")
        object.__setattr__(self, "name", name)
        for label in ("min_time", "max_time"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise GroupError(f"group {name!r}: {label} must be a whole number of "
                                 f"seconds ≥ 0, not {value!r}")
        if self.max_time and self.min_time > self.max_time:
            raise GroupError(f"group {name!r}: min_time ({self.min_time}) is more than "
                             f"max_time ({self.max_time})")
        if self.key is not None and (not isinstance(self.key, str) or not self.key):
            object.__setattr__(self, "key", None)
        if self.colour is not None:
            colour = str(self.colour).strip()
            if not is_hex_colour(colour):
                raise GroupError(f"group {name!r}: colour must look like #3a7bd5, "
                                 f"not {self.colour!r}")
            object.__setattr__(self, "colour", colour.lower())

    @property
    def private(self) -> bool:
        return self.key is not None

    @property
    def folded(self) -> str:
        return fold(self.name)

    def lifetime(self, suggested: float | None, default: float) -> float:
        """How long (seconds) a message of this group stays in the scroller."""
        seconds = default if suggested is None else suggested
        seconds = max(seconds, float(self.min_time))
        if self.max_time:
            seconds = min(seconds, float(self.max_time))
        return seconds

    def with_(self, **changes: object) -> Group:
        return replace(self, **changes)


def is_hex_colour(text: str) -> bool:
    return (len(text) == 7 and text[0] == "#"
            and all(c in "0123456789abcdefABCDEF" for c in text[1:]))


@dataclass
class GroupList:
    """The ordered list of groups, looked up by folded name."""

    groups: list[Group] = field(default_factory=list)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        unique = []
        for group in self.groups:
            if group.folded not in seen:
                seen.add(group.folded)
                unique.append(group)
        self.groups = unique

    def __iter__(self):
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)

    def find(self, name: str) -> Group | None:
        key = fold(name)
        for group in self.groups:
            if group.folded == key:
                return group
        return None

    def names(self) -> list[str]:
        return [g.name for g in self.groups]

    def subscribed(self) -> list[Group]:
        return [g for g in self.groups if g.subscribe]

    def public(self) -> list[Group]:
        return [g for g in self.groups if g.subscribe and not g.private]

    def private(self) -> list[Group]:
        return [g for g in self.groups if g.subscribe and g.private]

    def upsert(self, group: Group) -> None:
        for i, existing in enumerate(self.groups):
            if existing.folded == group.folded:
                self.groups[i] = group
                return
        self.groups.append(group)

    def remove(self, name: str) -> None:
        key = fold(name)
        self.groups = [g for g in self.groups if g.folded != key]


def group_clause(names: Sequence[str], attribute: str = "Group") -> str:
    """The protocol's folded comparison of ``attribute`` with each name."""
    subject = f"fold-case(decompose-compat({attribute}))"
    terms = [f"{subject} == fold-case(decompose-compat({quote(n)}))" for n in names]
    return terms[0] if len(terms) == 1 else "(" + " || ".join(terms) + ")"


#: v3 messages must carry all of these (protocol: base attributes).
V3_REQUIRED = ("Message", "From", "Message-Id")
#: what a pre-v3 message has at least
LEGACY_REQUIRED = ("TICKERTEXT", "USER")


def _require(names: Iterable[str]) -> str:
    return " && ".join(f"require({n})" for n in names)


def groups_expression(names: Sequence[str], *, legacy: bool = True) -> str | None:
    """Messages to any of ``names``, new-style and (with ``legacy``) old-style."""
    if not names:
        return None
    terms = [f"({_require(V3_REQUIRED)} && {group_clause(names)})"]
    if legacy:
        terms.append(f"({_require(LEGACY_REQUIRED)} && {group_clause(names, 'TICKERTAPE')})")
    return " || ".join(terms)


def threads_expression(thread_ids: Iterable[str]) -> str | None:
    """Messages in extra-group threads we started (protocol: Threads)."""
    ids = list(dict.fromkeys(thread_ids))
    if not ids:
        return None
    if len(ids) == 1:
        match = f"Thread-Id == {quote(ids[0])}"
    else:
        match = "equals(Thread-Id, " + ", ".join(quote(i) for i in ids) + ")"
    return f"(require(Message) && {match})"


def public_expression(groups: GroupList, *, threads: Iterable[str] = (),
                      extra: str = "", legacy: bool = True) -> str | None:
    """The one subscription for public groups, our threads and the user's
    extra expression (``None`` when there is nothing to subscribe to)."""
    parts = []
    names = [g.name for g in groups.public()]
    expr = groups_expression(names, legacy=legacy)
    if expr:
        parts.append(expr)
    expr = threads_expression(threads)
    if expr:
        parts.append(expr)
    if extra.strip():
        parts.append(f"({extra.strip()})")
    if not parts:
        return None
    return " || ".join(parts)


def private_expression(group: Group, *, legacy: bool = True) -> str:
    """The subscription of one private group (used with its key)."""
    expr = groups_expression([group.name], legacy=legacy)
    assert expr is not None
    return expr
