"""Auto-quench: drop, inside the client, notifications nobody can receive.

With ``connect(..., auto_quench=True)`` the connection keeps one internal
quench on every attribute name it has sent. The first time ``send()`` uses a
new name (or new keys) it extends the quench (QnchAddRqst, then QnchModRqst)
and waits for the QnchRply. The router reports the subscriptions that exist
already *before* that reply (an assumption the bundled router guarantees, see
``connection.py``), so from then on the quench knows every subscription
that refers to any name of the notification. A subscription that refers to
none of them can never be true for it (absent names are bottom).

A notification is sent when some known subscription term evaluates true for
it (``elvin.subscription.compile``). Keys are handled conservatively: the
quench carries every key used for sending plus the connection's
notification keys; a notification sent with ``deliver_insecure=False`` is
checked only against terms the router reported as matching the quench
securely. A term that cannot be compiled is assumed to match.

``Connection.wanted(attribute)`` answers the producer's question before it
builds a notification: which values of ``attribute`` could any subscription
match (``elvin.quenching.wanted`` over the internal quench's terms: exact
values, string prefixes, numeric intervals). A producer of readings asks it
once per change (it is cached until a subscription changes) and skips the
readings nobody wants: with only ``Temperature < 80`` subscribed,
``wanted.matches(85)`` is False and ``wanted.matches(70)`` True. It covers
``attribute`` in the internal quench first (as ``send()`` does for a new
name), so the answer is complete once it returns.

Quench is optional (protocol subset C; the Avis router lacks it). When the
router refuses it (``Connection.supports_quench`` is False) auto-quench
logs one warning and lets every notification through, as a producer with
nobody to tell it what is wanted must. Each new session asks again (its
internal quench is restored, or created at the next ``send()``), so
reconnecting to a router with quench turns filtering back on, with one
info line.
"""

from __future__ import annotations

import asyncio
import logging

from elvin.client.core import ClientCore
from elvin.client.errors import QuenchNotSupported
from elvin.client.quench import Quench, QuenchTable
from elvin.keys import EMPTY_KEYS, Keys
from elvin.quenching import UNBOUNDED, Wanted, wanted

log = logging.getLogger("elvin.client")


class AutoQuench:
    """The filter of one connection's ``send``: its internal quench, kept in
    ``quenches`` (the connection's table) and worked through ``core``."""

    def __init__(self, core: ClientCore, quenches: QuenchTable) -> None:
        self.core = core
        self.quenches = quenches
        self.quench: Quench | None = None
        self.sent = 0
        self.dropped = 0
        self._lock: asyncio.Lock | None = None
        #: the warning about a router without quench was logged (once per
        #: change from filtering to sending everything)
        self._off_logged = False
        #: attribute -> (quench, its version, Wanted): analyses of the terms
        self._wanted: dict[str, tuple[Quench, int, Wanted]] = {}

    def stats(self) -> dict[str, int]:
        terms = len(self.quench.terms) if self.quench is not None else 0
        return {"sent": self.sent, "dropped": self.dropped, "terms": terms}

    async def allow(self, attributes: dict, keys: Keys, deliver_insecure: bool) -> bool:
        """Whether a notification of ``attributes`` sent with ``keys`` may
        reach a subscriber (True), or is dropped here (False)."""
        core = self.core
        if core.state != "open":
            await core.live_session()   # wait for a reconnection to restore the quench
        if core.supports_quench is False:
            return self._unfiltered()
        needed_keys = keys | core.notification_keys if keys else core.notification_keys
        quench = self.quench
        if (quench is None or quench.closed or not attributes.keys() <= quench.names
                or (needed_keys and needed_keys - quench.keys)):
            try:
                await self._cover(attributes.keys(), needed_keys)
            except QuenchNotSupported:
                return self._unfiltered()
            quench = self.quench
            if core.supports_quench is False or quench is None or quench.closed:
                return self._unfiltered()
        if self._off_logged:
            self._off_logged = False
            log.info("auto-quench on again: %s supports quench", core.url)
        for term in quench.terms.values():
            if not deliver_insecure and not term.secure:
                continue
            if term.could_match(attributes):
                self.sent += 1
                return True
        self.dropped += 1
        return False

    async def wanted(self, attribute: str, keys: Keys = EMPTY_KEYS) -> Wanted:
        """The values of ``attribute`` some subscription at the router can
        match (``UNBOUNDED`` at a router without quench: nothing is known).
        Terms are not told apart by security here (an over-approximation)."""
        core = self.core
        if core.state != "open":
            await core.live_session()
        if core.supports_quench is False:
            return UNBOUNDED
        needed_keys = keys | core.notification_keys if keys else core.notification_keys
        quench = self.quench
        if (quench is None or quench.closed or attribute not in quench.names
                or (needed_keys and needed_keys - quench.keys)):
            try:
                await self._cover((attribute,), needed_keys)
            except QuenchNotSupported:
                return UNBOUNDED
            quench = self.quench
            if core.supports_quench is False or quench is None or quench.closed:
                return UNBOUNDED
        cached = self._wanted.get(attribute)
        if cached is not None and cached[0] is quench and cached[1] == quench.version:
            return cached[2]
        result = wanted([term.ast for term in quench.terms.values()], attribute)
        self._wanted[attribute] = (quench, quench.version, result)
        return result

    def _unfiltered(self) -> bool:
        """The router has no quench: nothing can be known, so send."""
        if not self._off_logged:
            self._off_logged = True
            log.warning("auto-quench off: %s does not support quench (protocol subset C); "
                        "sending every notification", self.core.url)
        self.sent += 1
        return True

    async def _cover(self, names, keys: Keys) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.core.supports_quench is False:
                return   # found out while this call waited for the lock
            quench = self.quench
            if quench is None or quench.closed:
                session = await self.core.live_session()
                quench = Quench(self.quenches, names, keys, True, buffer_size=0, internal=True)
                await self.quenches.register(session, quench)
                self.quench = quench
                return
            missing = tuple(sorted(set(names) - quench.names))
            new_keys = keys - quench.keys if keys else EMPTY_KEYS
            if missing or new_keys:
                await self.quenches.modify(quench, missing, (), new_keys, EMPTY_KEYS, None)
