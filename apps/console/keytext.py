"""Raw Elvin keys written as text, one per line, and the Keys they make.

A developer types the *raw* (private) keys they hold exactly as in the
``ec``/``ep`` key files, read by the same code (``elvin.keytext``):
``[de ad be ef]`` for bytes in hex, ``"text"`` for a UTF-8 string (bare
text is refused, as ``ec`` refuses it). The console then applies the scheme rules itself
(``Keys.for_notification`` / ``Keys.for_subscription``: producer, consumer
and dual schemes at once, SHA-1 where the scheme wants a public key), so the
user never has to know which side hashes what.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from elvin.keys import Keys
from elvin.keytext import KeyTextError, parse_key_line, parse_key_lines

__all__ = ["KeyTextError", "KeySpec", "parse_key_line", "parse_key_lines"]


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
