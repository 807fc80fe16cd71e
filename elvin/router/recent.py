"""The last notifications of each shape, replayed to a browser that asks.

MQTT Explorer shows a broker's retained values the moment it connects; an
Elvin browser (the console's Browse pane) subscribes to the names the
router lists (``elvin.router.census``) and would otherwise see only what
flows after that: a one-off event, or the first notification that carried
a new name, never appears. So the router keeps the last notification of
each *shape* (its set of attribute names: one dictionary update per
notification, whatever its size), at most ``max_shapes`` of them and only
those whose attributes' XDR is at most ``max_bytes`` (memory stays under
``max_shapes * max_bytes``), and a client may ask for them:

    a notification ``{Elvin-Router-Recent: <subscription id>}`` (and
    optionally ``Elvin-Router-Recent-Names``: names, one per line) sent to
    the router is taken by the router, not delivered, and the router
    delivers to that subscription of that client each kept notification
    (with one of those names) that the subscription matches now.

The replay goes through the router's own matching with the notification's
own keys and its ``deliver_insecure`` flag, for the asking client's
subscription only: a client is replayed exactly what it could have been
delivered had it been subscribed then, never a notification its keys
could not open. The router's own notifications (statistics, the census;
they have no XDR block from a client) are not kept. A replay runs in
slices of at most ``SLICE`` seconds of the loop; one per client at a time
(a second request for the same subscription while one runs adds its names
to it; one for another subscription replaces it). Kept while the
census is enabled (``attribute-names``): an administrator who does not
tell which names are in use does not tell their values either.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from elvin.census import RECENT_NAMES, RECENT_REQUEST
from elvin.protocol.xdr import frame_notify_deliver

__all__ = ["RecentValues"]

log = logging.getLogger("elvin.router")

#: shapes kept at most (the least recently seen go first)
MAX_SHAPES = 500
#: bytes of a notification's attributes (XDR) kept at most
MAX_BYTES = 8192
#: names in a request at most
MAX_REQUEST_NAMES = 2000
#: seconds of the loop one slice of a replay may take
SLICE = 0.002


class RecentValues:
    """The kept notifications, and the replays in progress. ``match`` is
    the engine's ``match(attrs, nkeys, deliver_insecure)``."""

    def __init__(self, match: Callable[..., tuple[dict[Any, Any], dict[Any, Any]]], *,
                 max_shapes: int = MAX_SHAPES, max_bytes: int = MAX_BYTES) -> None:
        self._match = match
        self.max_shapes = max_shapes
        self.max_bytes = max_bytes
        #: shape -> (attrs, block, deliver_insecure, nkeys)
        self.kept: OrderedDict[tuple[str, ...], tuple[Mapping[str, Any], bytes, bool, Any]] = \
            OrderedDict()
        self._replays: dict[Hashable, _Replay] = {}
        #: the shape ``note`` put last at the end of ``kept``
        self._newest: tuple[str, ...] | None = None
        self.replayed = 0             # notifications replayed (figures, tests)

    def note(self, attrs: Mapping[str, Any], block: bytes, deliver_insecure: bool,
             nkeys: Any) -> None:
        """A client's notification went through the router (hot path)."""
        if len(block) > self.max_bytes:
            return
        shape = tuple(attrs)
        kept = self.kept
        if shape != self._newest:
            # (a stream repeats its shape: then it is the newest kept already,
            # or the only one since a ``clear``, and the look-ups are spared)
            if shape in kept:
                kept.move_to_end(shape)
            elif len(kept) >= self.max_shapes:
                kept.popitem(last=False)
            self._newest = shape
        kept[shape] = (attrs, block, deliver_insecure, nkeys)

    def census_watch(self, census: Any) -> Callable[[bool], None]:
        """The census's engine callback, which also counts the kept
        notifications when the census starts: a browser that opens lists
        the names of what flowed before it came (and is replayed them)."""
        def watch(active: bool) -> None:
            starting = active and not census.counting
            census.watch(active)
            if starting and census.counting:
                for attrs, _block, deliver_insecure, _nkeys in self.kept.values():
                    if deliver_insecure:      # as the census counts: never a secret's names
                        census.note(attrs)
        return watch

    @staticmethod
    def is_request(attrs: Mapping[str, Any]) -> bool:
        return RECENT_REQUEST in attrs

    def request(self, owner: Hashable, attrs: Mapping[str, Any]) -> None:
        """``owner`` (a client's session) asked for a replay."""
        sub_id = attrs.get(RECENT_REQUEST)
        if not isinstance(sub_id, int) or isinstance(sub_id, bool):
            log.debug("a replay request without a subscription id ignored")
            return
        names_text = attrs.get(RECENT_NAMES)
        names = frozenset(names_text.split("\n")[:MAX_REQUEST_NAMES]) \
            if isinstance(names_text, str) and names_text else None
        running = self._replays.get(owner)
        if running is not None and running.sub_id == sub_id:
            running.widen(names, self._entries(names))
            return
        if running is not None:          # one replay per client: the newest request
            running.cancel()
        replay = _Replay(self, owner, int(sub_id), names, self._entries(names))
        self._replays[owner] = replay
        replay.start()

    def _entries(self, names: frozenset[str] | None) -> list[Any]:
        """The kept notifications with one of ``names`` (all without),
        oldest first."""
        return [entry for shape, entry in self.kept.items()
                if names is None or not names.isdisjoint(shape)]

    def forget(self, owner: Hashable) -> None:
        """``owner`` went away: its replay stops."""
        replay = self._replays.pop(owner, None)
        if replay is not None:
            replay.cancel()

    def stop(self) -> None:
        for replay in list(self._replays.values()):
            replay.cancel()
        self._replays.clear()
        self.kept.clear()


class _Replay:
    """One client's replay, run in slices on the loop."""

    def __init__(self, recent: RecentValues, owner: Hashable, sub_id: int,
                 names: frozenset[str] | None, entries: list[Any]) -> None:
        self.recent, self.owner, self.sub_id = recent, owner, sub_id
        self.names = names
        self.entries = entries
        self.position = 0
        self._handle: asyncio.Handle | None = None

    def widen(self, names: frozenset[str] | None, entries: list[Any]) -> None:
        pending = self.entries[self.position:]
        seen = {id(e) for e in pending}
        self.entries = pending + [e for e in entries if id(e) not in seen]
        self.position = 0

    def start(self) -> None:
        self._handle = asyncio.get_running_loop().call_soon(self._slice)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _slice(self) -> None:
        self._handle = None
        deadline = time.perf_counter() + SLICE
        entries = self.entries
        send = getattr(self.owner, "send_bytes", None)
        while self.position < len(entries) and send is not None:
            attrs, block, deliver_insecure, nkeys = entries[self.position]
            self.position += 1
            insecure, secure = self.recent._match(attrs, nkeys, deliver_insecure)
            secure_ids = [i for i in secure.get(self.owner, ()) if i == self.sub_id]
            insecure_ids = [i for i in insecure.get(self.owner, ())
                            if i == self.sub_id and i not in secure_ids]
            if secure_ids or insecure_ids:
                send(frame_notify_deliver(block, secure_ids, insecure_ids), True)
                self.recent.replayed += 1
            if time.perf_counter() >= deadline:
                break
        if send is not None and self.position < len(entries):
            self._handle = asyncio.get_running_loop().call_soon(self._slice)
        elif self.recent._replays.get(self.owner) is self:
            del self.recent._replays[self.owner]
