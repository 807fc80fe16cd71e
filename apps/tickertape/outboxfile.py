"""The outbox on disk: messages typed while no router answered survive a quit.

The controller keeps what waits for a router in memory and sends it on
reconnection; if the user quits (or the session ends) first, the messages
would be lost. So the outbox is written to a file after every change and
read at the next start, where the messages go out as soon as a router
answers — with the Message-Id they were given when typed, so a reply
already made to one still points at it.

The file is ec/ep text (one notification per ``---``), readable and
sendable with ``ep`` by hand. Keys are never written: a private group's
message is sent with the group's key from the config at the time it goes
out (a group whose key was removed meanwhile gets its message dropped
with a notice rather than sent in the clear). Written atomically and mode
0600, since private messages are in it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path

from elvin.fileutil import atomic_write
from elvin.text import TextFormatError, format_notification, parse_notifications

__all__ = ["OutboxError", "load_outbox", "save_outbox", "PRIVATE_MARK"]

# set on a message of a private group, so that it is never sent without a key
PRIVATE_MARK = "X-Tickertape-Private"


class OutboxError(OSError):
    """The outbox file cannot be read or written (the message says why)."""


def save_outbox(path: Path, messages: Iterable[Mapping[str, object]]) -> None:
    """Write ``messages`` (or remove the file when there are none)."""
    messages = list(messages)
    if not messages:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    text = "".join(format_notification(m) + "\n---\n" for m in messages)  # type: ignore[arg-type]
    try:
        atomic_write(path, text, mode=0o600)     # private, fsynced, replaced in one step
    except OSError as exc:
        raise OutboxError(f"cannot save the outbox to {path}: {exc.strerror or exc}") from None


def load_outbox(path: Path) -> list[dict[str, object]]:
    """The messages saved in ``path`` (none when there is no file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise OutboxError(f"cannot read the outbox {path}: {exc}") from None
    try:
        return parse_notifications(text)   # type: ignore[return-value]
    except (TextFormatError, ValueError) as exc:
        raise OutboxError(f"{path}: {exc}") from None
