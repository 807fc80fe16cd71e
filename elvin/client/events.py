"""Values the client hands to the application: quench events and the
reason a connection closed. (A delivered ``Notification`` lives with the
``Subscription`` it came through, in ``subscription.py``.)"""

from __future__ import annotations

from dataclasses import dataclass

from elvin.subscription.ast import Node

__all__ = [
    "CloseReason",
    "QuenchEvent",
    "SubscriptionAdded",
    "SubscriptionModified",
    "SubscriptionRemoved",
]


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
