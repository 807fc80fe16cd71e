"""Values the client hands to the application: delivered notifications,
quench events and the reason a connection closed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elvin.subscription.ast import Node
from elvin.values import Value

if TYPE_CHECKING:
    from elvin.client.subscription import Subscription

__all__ = [
    "CloseReason",
    "Notification",
    "QuenchEvent",
    "SubscriptionAdded",
    "SubscriptionModified",
    "SubscriptionRemoved",
]


class Notification(Mapping):
    """A delivered notification: a read-only mapping of its attributes.

    ``secure`` says whether it matched ``subscription`` securely (with keys)
    rather than by content alone. ``attributes`` is the plain dict (shared by
    every subscription the notification matched: do not modify it).
    """

    __slots__ = ("attributes", "secure", "subscription")

    def __init__(self, attributes: dict[str, Value], secure: bool = False,
                 subscription: Subscription | None = None) -> None:
        self.attributes = attributes
        self.secure = secure
        self.subscription = subscription

    def __getitem__(self, name: str) -> Value:
        return self.attributes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.attributes)

    def __len__(self) -> int:
        return len(self.attributes)

    def __contains__(self, name: object) -> bool:
        return name in self.attributes

    def get(self, name, default=None):
        return self.attributes.get(name, default)

    def __repr__(self) -> str:
        return f"Notification({self.attributes!r}, secure={self.secure})"


@dataclass(frozen=True)
class SubscriptionAdded:
    """A subscription (term) referring to the quenched names appeared."""

    term_id: int
    ast: Node
    secure: bool


@dataclass(frozen=True)
class SubscriptionModified:
    """A known subscription term changed (its expression or key match)."""

    term_id: int
    ast: Node
    secure: bool


@dataclass(frozen=True)
class SubscriptionRemoved:
    """A subscription term no longer refers to the quenched names (or went)."""

    term_id: int


QuenchEvent = SubscriptionAdded | SubscriptionModified | SubscriptionRemoved


@dataclass(frozen=True)
class CloseReason:
    """Why a connection (or one session of a reconnecting connection) ended.

    ``kind`` is one of:

    * ``"closed"``: the application closed it (DisconnRqst/DisconnRply);
    * ``"shutdown"``: the router sent Disconn reason 1 (closing down);
    * ``"redirect"``: Disconn reason 2, ``redirect`` holds the new URL;
    * ``"protocol-errors"``: Disconn reason 4 (repeated protocol errors);
    * ``"disconnected"``: a Disconn with another reason code;
    * ``"lost"``: the channel closed without Disconn, or no reply to TestConn;
    * ``"protocol-violation"``: the router sent bytes we could not decode;
    * ``"reconnect-failed"``: reconnecting gave up (``reconnect_attempts``).
    """

    kind: str
    message: str = ""
    disconn_reason: int | None = None
    redirect: str | None = None
    error: BaseException | None = None

    def __str__(self) -> str:
        text = self.kind
        if self.message:
            text += f": {self.message}"
        return text
