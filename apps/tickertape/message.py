"""An incoming Tickertape message, read robustly from a notification.

Notifications come from anyone on the router, so :func:`from_notification`
accepts what the protocol says a robust user agent should: the v3 names
(Group, From, Message, Message-Id, ...) and the older ones (TICKERTAPE, USER,
TICKERTEXT, TIMEOUT in minutes, MIME_ARGS, REPLACEMENT), numbers of any
width (int32, int64, real64) where an int is expected, and values of the
wrong type turned into text rather than refused. It never raises: a
notification that is not a chat message at all gives ``None``.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from elvin_apps.tickertape.attachment import legacy_urls, urls_from_mime

#: Protocol version this app implements (org.tickertape.message).
PROTOCOL_VERSION = 3001

#: Longest text kept for display and history (characters); the rest is cut
#: with an ellipsis so that a huge string cannot make the scroller or the log
#: unusable.
MAX_TEXT = 4000
MAX_FIELD = 512


@dataclass(frozen=True)
class Message:
    """One chat message as the app shows and stores it.

    ``timeout`` is the sender's suggested lifetime in seconds, already
    converted from minutes where the protocol says so; ``None`` when the
    sender gave none (the group's default applies), ``0`` for "briefly",
    negative for "log only, do not scroll".
    """

    group: str
    sender: str
    text: str
    message_id: str
    received: float = field(default_factory=time.time)
    in_reply_to: str | None = None
    thread_id: str | None = None
    timeout: float | None = None
    replacement_id: str | None = None
    attachment: str | None = None
    urls: tuple[str, ...] = ()
    user_agent: str | None = None
    no_archive: bool = False
    distribution: str | None = None
    secure: bool = False
    version: int | None = None
    local_id: bool = False  # True when Message-Id was missing and we made one

    @property
    def thread_key(self) -> str:
        """The thread this message belongs to, as far as it says itself."""
        return self.thread_id or self.in_reply_to or self.message_id

    def with_received(self, when: float) -> Message:
        return replace(self, received=when)


def display_text(value: object, limit: int = MAX_TEXT) -> str:
    """Any Elvin value as one line of text: control characters and line
    breaks become spaces (the scroller is one line), long values are cut."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, bytes | bytearray):
        text = f"<{len(value)} bytes>"
    elif isinstance(value, float) and not math.isfinite(value):
        text = str(value)
    else:
        text = str(value)
    if len(text) > limit:
        text = text[:limit] + "…"
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text.strip()


def _string(attrs: Mapping[str, object], *names: str, limit: int = MAX_FIELD) -> str | None:
    for name in names:
        if name in attrs:
            value = attrs[name]
            if value is None:
                continue
            text = display_text(value, limit)
            return text
    return None


def _raw_string(attrs: Mapping[str, object], name: str, limit: int) -> str | None:
    value = attrs.get(name)
    if isinstance(value, str) and len(value) <= limit:
        return value
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def timeout_seconds(attrs: Mapping[str, object]) -> float | None:
    """The suggested lifetime in seconds, by the protocol's rules.

    ``Timeout`` is in seconds for messages that advertise version 3001 or
    later; for earlier or unversioned messages values below 60 (but above
    zero, since zero and negative values have their own meaning) and exactly
    1440 are minutes. The legacy ``TIMEOUT`` is always minutes.
    """
    version = _number(attrs.get("org.tickertape.message"))
    value = _number(attrs.get("Timeout"))
    if value is not None:
        if (version is None or version < PROTOCOL_VERSION) and (0 < value < 60 or value == 1440):
            value *= 60
        return value
    legacy = _number(attrs.get("TIMEOUT"))
    if legacy is not None:
        return legacy * 60
    return None


def from_notification(attrs: Mapping[str, object], *, secure: bool = False,
                      received: float | None = None) -> Message | None:
    """The chat message in a notification, or ``None`` if it has no group or
    no text (then it is not a Tickertape message and is ignored)."""
    try:
        return _from_notification(attrs, secure, received)
    except Exception:  # noqa: BLE001 - never let one odd notification hurt the app
        return None


def _from_notification(attrs: Mapping[str, object], secure: bool,
                       received: float | None) -> Message | None:
    group = _string(attrs, "Group", "TICKERTAPE")
    text = _string(attrs, "Message", "TICKERTEXT", limit=MAX_TEXT)
    if not group or text is None:
        return None
    sender = _string(attrs, "From", "USER") or "anonymous"
    message_id = _string(attrs, "Message-Id")
    local_id = not message_id
    if local_id:
        message_id = f"local-{uuid.uuid4()}"
    attachment = _raw_string(attrs, "Attachment", 256 * 1024)
    urls = urls_from_mime(attachment) if attachment else []
    if not urls:
        urls = legacy_urls(attrs.get("MIME_TYPE"), attrs.get("MIME_ARGS"))
    no_archive = _number(attrs.get("No-Archive"))
    version = _number(attrs.get("org.tickertape.message"))
    return Message(
        group=group,
        sender=sender,
        text=text,
        message_id=message_id,
        received=time.time() if received is None else received,
        in_reply_to=_string(attrs, "In-Reply-To") or None,
        thread_id=_string(attrs, "Thread-Id") or None,
        timeout=timeout_seconds(attrs),
        replacement_id=_string(attrs, "Replacement-Id", "REPLACEMENT") or None,
        attachment=attachment,
        urls=tuple(urls),
        user_agent=_string(attrs, "User-Agent") or None,
        no_archive=bool(no_archive),
        distribution=_string(attrs, "Distribution") or None,
        secure=bool(secure),
        version=int(version) if version is not None and abs(version) < 2**31 else None,
        local_id=local_id,
    )


def new_message_id() -> str:
    """A fresh globally unique Message-Id (a random UUID: no host or process
    details, as the protocol recommends for anonymity)."""
    return str(uuid.uuid4())
