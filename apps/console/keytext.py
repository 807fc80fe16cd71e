"""Raw Elvin keys written as text, one per line, and the Keys they make.

A developer types the *raw* (private) keys they hold, as the ``ec``/``ep``
key files do: ``[de ad be ef]`` for bytes in hex, ``"text"`` or plain text
for a UTF-8 string. The console then applies the scheme rules itself
(``Keys.for_notification`` / ``Keys.for_subscription``: producer, consumer
and dual schemes at once, SHA-1 where the scheme wants a public key), so the
user never has to know which side hashes what.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from elvin.keys import Keys

__all__ = ["KeyTextError", "KeySpec", "parse_key_line", "parse_key_lines"]


class KeyTextError(ValueError):
    """A key line that cannot be read; the message names the line."""


def parse_key_line(line: str) -> bytes:
    """One raw key: ``[hex bytes]``, ``"quoted string"`` or plain text."""
    text = line.strip()
    if text.startswith("[") and text.endswith("]"):
        digits = "".join(text[1:-1].split())
        try:
            key = bytes.fromhex(digits)
        except ValueError:
            raise KeyTextError(f"{text!r} is not hex bytes (e.g. [de ad be ef])") from None
    elif len(text) >= 2 and text[0] == text[-1] == '"':
        out, escaped = [], False
        for ch in text[1:-1]:
            if escaped or ch != "\\":
                out.append(ch)
                escaped = False
            else:
                escaped = True
        key = "".join(out).encode("utf-8")
    else:
        key = text.encode("utf-8")
    if not key:
        raise KeyTextError("empty key")
    return key


def parse_key_lines(lines: Iterable[str], what: str = "key") -> list[bytes]:
    """Every key in ``lines`` (blank lines and ``//`` comments skipped)."""
    keys = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.strip().startswith("//"):
            continue
        try:
            keys.append(parse_key_line(line))
        except KeyTextError as exc:
            raise KeyTextError(f"{what} line {number}: {exc}") from None
    return keys


@dataclass
class KeySpec:
    """Raw producer and consumer keys as the user wrote them (kept as text
    so that a workspace file shows them as typed)."""

    producer: list[str] = field(default_factory=list)
    consumer: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return any(line.strip() for line in self.producer + self.consumer)

    def raw(self) -> tuple[list[bytes], list[bytes]]:
        return (parse_key_lines(self.producer, "producer key"),
                parse_key_lines(self.consumer, "consumer key"))

    def notification_keys(self) -> Keys | None:
        """Keys to send notifications with (None when there are none)."""
        producer, consumer = self.raw()
        if not producer and not consumer:
            return None
        return Keys.for_notification(producer=producer, consumer=consumer)

    def subscription_keys(self) -> Keys | None:
        """Keys to subscribe with (None when there are none)."""
        producer, consumer = self.raw()
        if not producer and not consumer:
            return None
        return Keys.for_subscription(producer=producer, consumer=consumer)

    def describe(self) -> str:
        """``"2 producer, 1 consumer"`` or ``"none"`` (button labels)."""
        producer = sum(1 for line in self.producer if line.strip())
        consumer = sum(1 for line in self.consumer if line.strip())
        parts = [f"{producer} producer"] if producer else []
        parts += [f"{consumer} consumer"] if consumer else []
        return ", ".join(parts) or "none"
