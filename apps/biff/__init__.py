"""Biffs: small awareness applications over Elvin presence notifications.

* ``Biff`` (``core``): the Qt-free, asyncio core; one instance per domain
  and user, with a roster that every instance keeps by itself
* ``CoffeeBiff`` (``coffee``): who is having a coffee
* ``protocol``: the Presence-Protocol 1000 notification format
* ``qtbiff.QtBiff``: a Biff as a QObject with signals; ``window``, ``cli``:
  the coffee biff desktop app (``biff``); ``mailbiff``: a mail biff example
"""

from elvin_apps.biff.coffee import CoffeeBiff
from elvin_apps.biff.core import Biff, default_user
from elvin_apps.biff.protocol import PresenceMessage, quote
from elvin_apps.biff.roster import Member, Roster

from elvin._version import __version__

__all__ = ["Biff", "CoffeeBiff", "Member", "PresenceMessage", "Roster", "__version__",
           "default_user", "quote"]
