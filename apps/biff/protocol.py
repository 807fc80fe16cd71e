"""The biff wire format: the Presence-Protocol (1000) notification, both ways.

Biffs speak the presence format that presence-aware Tickertape clients
already use (see the Avis ``ec`` example in the reference), so that a
tickertape subscribed to presence in the ``coffee`` group sees coffee
drinkers, and a biff sees a tickertape user whose Status is ``coffee``.
This module is pure: dicts in, dataclasses out, no I/O, no asyncio.

Decoding is where untrusted input enters a biff, so ``decode`` never
raises: anything malformed (wrong types, missing User, absurd sizes) is
either cleaned up (control characters removed, strings truncated, numbers
clamped) or rejected as ``None``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PROTOCOL",
    "INITIAL",
    "UPDATE",
    "REQUEST",
    "REPLY",
    "INFO_VALUES",
    "OFFLINE",
    "PresenceMessage",
    "decode",
    "encode",
    "format_groups",
    "parse_groups",
    "quote",
    "clean",
    "subscription",
]

PROTOCOL = 1000
"""Presence-Protocol version; receivers accept 1000 <= v < 2000."""

INITIAL = "initial"   # "I have just started: here is my state, who is there?"
UPDATE = "update"     # a state change, a heartbeat refresh, or (Status offline) departure
REQUEST = "request"   # "who is there?" without announcing a state
REPLY = "reply"       # the answer to an initial or a request
INFO_VALUES = frozenset({INITIAL, UPDATE, REQUEST, REPLY})

OFFLINE = "offline"   # the Status a departing client announces

# Bounds on what we keep from the wire; longer values are truncated.
MAX_USER = 64
MAX_CLIENT_ID = 64
MAX_STATUS = 32
MAX_TEXT = 140
MAX_GROUPS = 32
MAX_GROUP = 64
MAX_DURATION = 2**31 - 1          # seconds; Status-Duration is an int32
MIN_LIFETIME_MS = 100
MAX_LIFETIME_MS = 86_400_000      # one day

LIFETIME_ATTRIBUTE = "Biff-Lifetime"

# terminal escape sequences (CSI and OSC), removed whole, not just their ESC
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?")


@dataclass(frozen=True, slots=True)
class PresenceMessage:
    """One presence notification, cleaned up.

    ``status`` is empty for a ``request`` that announces nothing;
    ``lifetime`` (seconds) is how long the sender promises its entry stays
    valid without a refresh, or None when the sender did not say (a
    foreign presence client).
    """

    info: str
    user: str
    client_id: str
    status: str = ""
    text: str = ""
    duration: int = 0
    groups: tuple[str, ...] = ()
    lifetime: float | None = None

    @property
    def key(self) -> str:
        """Whom this message is about: the client instance, or the user when
        a foreign client sends no Client-Id."""
        return self.client_id or f"user:{self.user}"

    @property
    def asks(self) -> bool:
        """Does the sender want everybody to answer?"""
        return self.info in (INITIAL, REQUEST)

    @property
    def departs(self) -> bool:
        return self.status == OFFLINE


def quote(text: str) -> str:
    """``text`` as a string literal of the subscription language."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_groups(groups: tuple[str, ...] | list[str]) -> str:
    """``("coffee", "elvin")`` -> ``"|coffee|elvin|"``, the Groups format."""
    return "|" + "|".join(groups) + "|"


def parse_groups(value: Any) -> tuple[str, ...]:
    """The groups of a Groups attribute (anything not a string: none)."""
    if not isinstance(value, str):
        return ()
    out = []
    for part in value[: MAX_GROUPS * (MAX_GROUP + 1) + 1].split("|"):
        part = clean(part, MAX_GROUP)
        if part and part not in out:
            out.append(part)
        if len(out) >= MAX_GROUPS:
            break
    return tuple(out)


def subscription(domain: str) -> str:
    """The subscription a biff for ``domain`` uses: any presence message of
    protocol 1xxx whose Groups include the domain (case-insensitively, as
    presence clients fold group names)."""
    return ("Presence-Protocol >= 1000 && Presence-Protocol < 2000 && "
            f"contains(fold-case(Groups), {quote('|' + domain.casefold() + '|')})")


def encode(info: str, *, user: str, client_id: str, groups: tuple[str, ...],
           status: str = "", text: str = "", duration: float = 0,
           lifetime: float | None = None) -> dict[str, Any]:
    """The notification for one presence message. A ``request`` carries no
    Status (it announces nothing); every other kind does."""
    if info not in INFO_VALUES:
        raise ValueError(f"Presence-Info must be one of {sorted(INFO_VALUES)}, not {info!r}")
    attrs: dict[str, Any] = {
        "Presence-Protocol": PROTOCOL,
        "Presence-Info": info,
        "User": user,
        "Client-Id": client_id,
        "Groups": format_groups(groups),
    }
    if info != REQUEST:
        if not status:
            raise ValueError(f"a {info!r} presence message needs a Status")
        attrs["Status"] = status
        attrs["Status-Text"] = text
        attrs["Status-Duration"] = max(0, min(int(duration), MAX_DURATION))
    if lifetime is not None:
        ms = int(lifetime * 1000)
        attrs[LIFETIME_ATTRIBUTE] = max(MIN_LIFETIME_MS, min(ms, MAX_LIFETIME_MS))
    return attrs


def decode(attrs: Mapping[str, Any]) -> PresenceMessage | None:
    """The presence message in ``attrs``, cleaned up, or None if it is not
    one we can use. Never raises, whatever ``attrs`` holds."""
    try:
        return _decode(attrs)
    except Exception:  # noqa: BLE001 - untrusted input must never break a biff
        return None


def _decode(attrs: Mapping[str, Any]) -> PresenceMessage | None:
    version = attrs.get("Presence-Protocol")
    if not _is_int(version) or not PROTOCOL <= version < 2 * PROTOCOL:
        return None
    user = clean(attrs.get("User"), MAX_USER)
    if not user:
        return None
    client_id = clean(attrs.get("Client-Id"), MAX_CLIENT_ID)
    info = attrs.get("Presence-Info")
    # Foreign clients may use other Presence-Info values: treat any message
    # that carries a Status as an update, anything else as unusable.
    info = info if isinstance(info, str) and info in INFO_VALUES else UPDATE
    status = clean(attrs.get("Status"), MAX_STATUS).casefold()
    if not status and info != REQUEST:
        return None
    text = clean(attrs.get("Status-Text"), MAX_TEXT)
    duration = attrs.get("Status-Duration")
    duration = max(0, min(int(duration), MAX_DURATION)) if _is_int(duration) else 0
    lifetime_ms = attrs.get(LIFETIME_ATTRIBUTE)
    lifetime = (max(MIN_LIFETIME_MS, min(int(lifetime_ms), MAX_LIFETIME_MS)) / 1000
                if _is_int(lifetime_ms) else None)
    return PresenceMessage(info=info, user=user, client_id=client_id, status=status,
                           text=text, duration=duration,
                           groups=parse_groups(attrs.get("Groups")), lifetime=lifetime)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def clean(value: Any, limit: int) -> str:
    """A string fit for display: no control or format characters, runs of
    white space as one space, at most ``limit`` characters (with an
    ellipsis when cut). Not a string: empty."""
    if not isinstance(value, str):
        return ""
    # look at a bounded prefix only: a multi-megabyte value costs nothing more
    head = _ESCAPES.sub("", value[: limit * 4 + 16])
    chars = []
    for ch in head:
        if ch.isspace():
            ch = " "
        elif unicodedata.category(ch)[0] == "C":
            continue
        chars.append(ch)
    text = " ".join("".join(chars).split())
    if len(text) > limit or len(value) > len(head) and len(text) == limit:
        text = text[: limit - 1].rstrip() + "…"
    return text
