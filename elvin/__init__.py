"""The Elvin suite: content-based publish/subscribe in the Elvin 4 tradition.

The package's layers are described in docs/architecture.md; this module re-exports the
names most users need.
"""

from elvin._version import __version__
from elvin.errors import ElvinError, NackCode, ProtocolError, SubscriptionError
from elvin.keys import Keys, KeyScheme
from elvin.values import ElvinType, Int64

# The client API (elvin.client) is imported lazily: importing ``elvin`` stays
# cheap and free of asyncio for the sans-IO layers. elvin.client exports these
# names and a few more (its ``__all__`` is built from this tuple).
_CLIENT_NAMES = (
    "CloseReason", "ConnectError", "Connection", "ConnectionClosedError", "NackError",
    "Notification", "OptionsRejectedError", "Quench", "QuenchNotSupported", "Subscription",
    "SubscriptionAdded", "SubscriptionModified", "SubscriptionRemoved",
    "SubscriptionClosedError", "connect", "unotify",
)


# Router discovery (elvin.discovery), also imported lazily.
_DISCOVERY_NAMES = ("discover", "discover_sync")


def __getattr__(name: str):
    if name in _CLIENT_NAMES:
        import elvin.client
        return getattr(elvin.client, name)
    if name in _DISCOVERY_NAMES:
        import elvin.discovery
        return getattr(elvin.discovery, name)
    raise AttributeError(f"module 'elvin' has no attribute {name!r}")


__all__ = [
    *_CLIENT_NAMES,
    *_DISCOVERY_NAMES,
    "ElvinError",
    "ElvinType",
    "Int64",
    "KeyScheme",
    "Keys",
    "NackCode",
    "ProtocolError",
    "SubscriptionError",
    "__version__",
]
