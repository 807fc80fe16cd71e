"""The asyncio Elvin client library.

::

    import elvin

    async with elvin.connect("elvin://127.0.0.1") as conn:
        sub = await conn.subscribe('require(Greeting)')
        await conn.send({"Greeting": "hello", "Count": 1})
        async for notification in sub:
            print(notification["Greeting"], notification.secure)

See ``Connection`` for the whole API (send, subscribe, quench, set_keys,
set_options, close, listeners for close / connection lost / reconnected).

Quench (protocol subset C) is optional: a router without it (Avis) makes
``conn.quench()`` raise :class:`QuenchNotSupported` and
``conn.supports_quench`` False; ``auto_quench`` then sends everything.
"""

from elvin import _CLIENT_NAMES
from elvin.client.connection import DEFAULT_URL, Connection, connect
from elvin.client.errors import (
    ConnectError,
    ConnectionClosedError,
    NackError,
    OptionsRejectedError,
    QuenchNotSupported,
    SubscriptionClosedError,
)
from elvin.client.events import (
    CloseReason,
    QuenchEvent,
    SubscriptionAdded,
    SubscriptionModified,
    SubscriptionRemoved,
)
from elvin.client.optional_quench import OptionalQuench
from elvin.client.quench import Quench, QuenchTerm
from elvin.client.sessionless import unotify
from elvin.client.subscription import Notification, Subscription

# the names ``elvin`` re-exports (lazily), and the ones only found here
__all__ = [*_CLIENT_NAMES, "DEFAULT_URL", "OptionalQuench", "QuenchEvent", "QuenchTerm"]
