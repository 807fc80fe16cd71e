"""Quench (protocol subset C): tell quenchers about the subscriptions that
refer to the attribute names they registered.

A quench is a set of attribute names plus ``deliver_insecure`` and keys. A
subscription *concerns* a quench when the names its expression refers to
intersect the quench's names. Whether the quench sees the subscription, and
how, follows the notification rules of docs/keys.md with the quench acting as the
notification: its keys (QnchAddRqst keys plus the quencher's connection
notification keys) are matched against the subscription's keys (SubAddRqst
keys plus the subscriber's connection subscription keys):

* **secure** when the keys match (``secure_quench_ids``);
* **insecure** when they do not, but the subscription accepts insecure
  delivery and the quench has ``deliver_insecure`` (``insecure_quench_ids``);
* invisible otherwise.

Every change is sent incrementally, only to the quenchers concerned, as
SubAddNotify / SubModNotify / SubDelNotify with ``term_id`` = the
subscription id and ``sub_expr`` = the subscription's AST: one packet per
quenching session per change, listing that session's quench ids. A change
that makes a subscription visible to a quench is an Add, one that hides it a
Del, and one that changes the expression (or secure/insecure status) of a
subscription that stays visible is a Mod.

**Announcements are sliced.** Telling a quench about the subscriptions that
already concern it (QnchAddRqst) or about what a change of the quench did to
them (QnchModRqst) may walk tens of thousands of subscriptions: a quench
being told has ``pending`` (the ids not told yet) and ``old`` (what its owner
knows of them: nothing for a new quench, the quench's previous names, keys and
``deliver_insecure`` for a modified one), and ``advance(quench, deadline)``
tells it a slice at a time (the router's ``QuenchAnnouncer`` calls it once
per loop turn; the session sends the QnchRply when it is done, and its later
packets wait). Meanwhile every change of a subscription is judged against
what the quencher knows: a pending subscription's ``view`` is its old status,
and a change *settles* it (drops it from ``pending``: the change itself tells
the quencher the difference), so nothing is told twice or out of order. A
modified quench stays filed under its old names too until it is told.

**Fan-out is sliced too.** One subscription change concerns every session
quenching on its names: with 500 of them a SubAddRqst sent 500 packets in
its handler (4-24 ms, issue 42). ``_send`` sends for at most ``FANOUT_STEP``
seconds per change (``begin``); after that, and while anything waits, packets
go to ``outbox``, in order, and ``flush(deadline)`` sends them (the
announcer's turns; ``on_outbox`` asks for one). Everything the manager sends
goes through that one queue, so a quencher gets its packets in the order of
the changes; ``queued`` and ``flushed`` count them, so that a QnchRply can
wait until what its announcement queued is out (``QuenchAnnouncer``).

The manager is sans-IO: ``send(owner, packet)`` and ``clock()`` (the seconds
its budgets are measured in) are supplied by the router, which passes the
clock of its sessions' deadlines (``SessionHost.clock``): the deadlines a
session hands to ``advance`` come from that clock, so the manager must read
the same one, and a test can pass a clock that stands still, so that whether
an announcement fits its first step does not depend on the machine's load.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import SubAddNotify, SubDelNotify, SubModNotify
from elvin.router.engine import Engine, Subscription
from elvin.router.security import NotificationKeys, prepare_notification, prepared_match_pair

log = logging.getLogger(__name__)

__all__ = ["FANOUT_STEP", "Pending", "Quench", "QuenchManager"]

SECURE = 1
INSECURE = 2


#: what an owner knows of a quench before its change: (names, prepared, deliver_insecure)
_Before = tuple[frozenset[str], NotificationKeys | None, bool]

#: subscriptions looked at between two looks at the clock while telling a quench
_CLOCK_EVERY = 4
#: seconds of sending one subscription change may take at once; the rest of
#: its fan-out waits in ``outbox``
FANOUT_STEP = 0.001


def _status(prepared: NotificationKeys | None, deliver_insecure: bool,
            sub: Subscription) -> int:
    if prepared is not None and prepared_match_pair(prepared, sub.prepared,
                                                    sub.conn.prepared):
        return SECURE
    if sub.accept_insecure and deliver_insecure:
        return INSECURE
    return 0


class Pending:
    """The ids of the subscriptions a quench is still to be told of: copies
    of the engine's tables of the subscriptions referring to each of its
    names (copying a dict is a copy of memory: 100,000 ids in a few ms;
    merging them into one dict took 15 ms on the loop, issue 42). An id in
    several copies is told once."""

    __slots__ = ("parts",)

    def __init__(self, parts: Iterable[dict[Any, Any]]) -> None:
        self.parts = [part for part in parts if part]

    def __bool__(self) -> bool:
        parts = self.parts
        while parts and not parts[-1]:
            parts.pop()
        return any(parts)

    def __contains__(self, sub_id: object) -> bool:
        return any(sub_id in part for part in self.parts)

    def __iter__(self) -> Iterator[int]:
        seen: set[int] = set()
        for part in self.parts:
            for sub_id in part:
                if sub_id not in seen:
                    seen.add(sub_id)
                    yield sub_id

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def pop(self, sub_id: int, default: object = None) -> None:
        for part in self.parts:
            part.pop(sub_id, None)

    def popitem(self) -> tuple[int, None]:
        """An id, gone from every copy (KeyError: none left)."""
        parts = self.parts
        while parts:
            last = parts[-1]
            if last:
                sub_id = last.popitem()[0]
                for i in range(len(parts) - 1):
                    parts[i].pop(sub_id, None)
                return sub_id, None
            parts.pop()
        raise KeyError("popitem(): no ids left")


class Quench:
    __slots__ = ("id", "owner", "names", "deliver_insecure", "keys", "owner_keys", "prepared",
                 "pending", "old", "indexed")

    def __init__(self, quench_id: int, owner: Hashable, names: frozenset[str],
                 deliver_insecure: bool, keys: Keys, owner_keys: Keys) -> None:
        self.id = quench_id
        self.owner = owner
        self.names = names
        self.deliver_insecure = deliver_insecure
        self.keys = keys
        self.owner_keys = owner_keys
        self.prepared: NotificationKeys | None = None
        #: ids of subscriptions not told yet (None: nothing to tell)
        self.pending: Pending | None = None
        #: what the owner knows of the pending ones: (names, prepared,
        #: deliver_insecure) of the quench before its change, or None (nothing)
        self.old: _Before | None = None
        #: the names the manager files it under (its names, and its old ones
        #: while it is being told of a change)
        self.indexed: frozenset[str] = self.names
        self.rekey()

    def rekey(self) -> None:
        self.prepared = prepare_notification(self.keys | self.owner_keys
                                             if self.owner_keys else self.keys)

    def status(self, sub: Subscription) -> int:
        """SECURE, INSECURE or 0 for a subscription that concerns this quench."""
        return _status(self.prepared, self.deliver_insecure, sub)

    def known(self, sub: Subscription) -> int:
        """The status the owner knows ``sub`` by (``view``): for one not told
        yet, its status before the quench's change (0 for a new quench)."""
        pending = self.pending
        if pending is not None and sub.id in pending:
            old = self.old
            if old is None or old[0].isdisjoint(sub.names):
                return 0
            return _status(old[1], old[2], sub)
        if self.indexed is not self.names and self.names.isdisjoint(sub.names):
            return 0            # filed here only under a name being phased out
        return self.status(sub)

    def __repr__(self) -> str:
        return f"Quench({self.id}, {sorted(self.names)})"


# the view a set of quenches has of one subscription: {quench: status}
View = dict[Quench, int]


class QuenchManager:
    def __init__(self, engine: Engine, send: Callable[[Hashable, object], None],
                 clock: Callable[[], float], first_id: int = 1) -> None:
        self.engine = engine
        self.send = send
        #: the host's clock, which every deadline given here is on (see the
        #: module's docstring); read for the fan-out and announcement budgets
        self.clock = clock
        self._ids = itertools.count(first_id)
        self.quenches: dict[int, Quench] = {}
        self.by_owner: dict[Hashable, dict[int, Quench]] = {}
        self._by_name: dict[str, dict[int, Quench]] = {}
        self.notifications_sent = 0
        #: quenches being told (``pending``), by id
        self.announcing: dict[int, Quench] = {}
        #: (owner, packet) not sent yet, in order (see the module's docstring)
        self.outbox: deque[tuple[Hashable, object]] = deque()
        self.queued = 0         # packets ever put in the outbox
        self.flushed = 0        # ... and ever sent from it
        #: called when the outbox gets its first packet (the router's announcer)
        self.on_outbox: Callable[[], None] | None = None
        #: writes what an owner was sent, now rather than at the end of the
        #: loop iteration (the router's sessions); see ``_deliver``
        self.write_now: Callable[[Hashable], None] | None = None
        self._until = float("inf")      # when sending at once ends (``begin``)
        self._last_owner: Hashable | None = None   # the owner sent to last (``_deliver``)

    def __len__(self) -> int:
        return len(self.quenches)

    def owned(self, owner: Hashable) -> dict[int, Quench]:
        return self.by_owner.get(owner, {})

    def quenched_names(self) -> Iterable[str]:
        """The attribute names some quench names (a live view)."""
        return self._by_name.keys()

    # -- views ------------------------------------------------------------------------
    def _concerned(self, names: Iterable[str]) -> dict[int, Quench]:
        """The quenches on any of ``names``, walking the smaller side: the
        subscription's names, or the names some quench is on. A wide ``||``
        (10,000 names) looked each name up, twice per SubModRqst, in the
        step that swaps it (issue 42); the quenched names are usually few."""
        out: dict[int, Quench] = {}
        by_name = self._by_name
        if isinstance(names, (set, frozenset)) and len(by_name) < len(names):
            for name, on_name in by_name.items():
                if name in names:
                    out.update(on_name)
            return out
        for name in names:
            quenches = by_name.get(name)
            if quenches:
                out.update(quenches)
        return out

    def view(self, sub: Subscription) -> View:
        """{quench: status} for the quenches that see ``sub``."""
        if not self.quenches:
            return {}
        out: View = {}
        for quench in self._concerned(sub.names).values():
            status = quench.known(sub)
            if status:
                out[quench] = status
        return out

    def _settle(self, sub: Subscription) -> None:
        """``sub`` changes now: the change tells every quencher the difference
        from what it knows, so no announcement under way tells it again."""
        for quench in self.announcing.values():
            quench.pending.pop(sub.id, None)  # type: ignore[union-attr]  # an announcing quench has its pending

    def _emit_changes(self, sub: Subscription, before: View, after: View,
                      expr_changed: bool) -> None:
        """Send Add/Mod/Del per quenching session for one subscription."""
        if not before and not after:
            return
        per_owner: dict[Hashable, list[list[Any]]] = {}

        def slot(quench: Quench) -> list[list[Any]]:
            lists = per_owner.get(quench.owner)
            if lists is None:
                # add: secure, insecure; mod: secure, insecure; del: ids
                lists = per_owner[quench.owner] = [[], [], [], [], []]
            return lists

        for quench, status in after.items():
            old = before.get(quench)
            if old is None:
                slot(quench)[0 if status == SECURE else 1].append(quench.id)
            elif old != status or expr_changed:
                slot(quench)[2 if status == SECURE else 3].append(quench.id)
        for quench in before:
            if quench not in after:
                slot(quench)[4].append(quench.id)
        for owner, (add_s, add_i, mod_s, mod_i, dels) in per_owner.items():
            if dels:
                self._send(owner, SubDelNotify(tuple(dels), sub.id))
            if add_s or add_i:
                self._send(owner, SubAddNotify(tuple(add_s), tuple(add_i), sub.id, sub.ast))
            if mod_s or mod_i:
                self._send(owner, SubModNotify(tuple(mod_s), tuple(mod_i), sub.id, sub.ast))

    def _begin(self) -> None:
        """A change's fan-out starts: it may send for ``FANOUT_STEP`` at once."""
        self._until = self.clock() + FANOUT_STEP
        self._last_owner = None

    def _send(self, owner: Hashable, packet: object) -> None:
        outbox = self.outbox
        if outbox or self.clock() > self._until:
            outbox.append((owner, packet))
            self.queued += 1
            if len(outbox) == 1 and self.on_outbox is not None:
                self.on_outbox()
            return
        self._deliver(owner, packet)

    def _deliver(self, owner: Hashable, packet: object) -> None:
        """Send one packet. When the owner changes, what the previous one was
        sent is written at once (``write_now``): a fan-out's cost is mostly
        those writes (a system call per session, 3 ms of 500 sessions' at the
        end of one loop turn, issue 42), and written here it is inside the
        budget the clock measures. Packets to one owner (an announcement's)
        still go out together, in one write."""
        self.notifications_sent += 1
        last = self._last_owner
        if last is not owner:
            if last is not None and self.write_now is not None:
                try:
                    self.write_now(last)
                except Exception:  # as for a send: logged, the rest go on
                    log.exception("writing to a quencher failed")
            self._last_owner = owner
        try:
            self.send(owner, packet)
        except Exception:  # one quencher's failure must not stop the rest; logged
            log.exception("sending %s to a quencher failed", type(packet).__name__)

    def flush(self, deadline: float) -> bool:
        """Send from the outbox until the clock passes ``deadline``; True
        once it is empty."""
        outbox = self.outbox
        clock = self.clock
        while outbox:
            owner, packet = outbox.popleft()
            self.flushed += 1
            self._deliver(owner, packet)
            if clock() > deadline:
                break
        self._last_owner = None
        return not outbox

    # -- subscription changes (called by the router) ----------------------------------
    def subscription_added(self, sub: Subscription) -> None:
        if self.announcing:
            self._settle(sub)   # (a wide one is referred to before it is added)
        if self.quenches:
            self._begin()
            self._emit_changes(sub, {}, self.view(sub), False)

    def subscription_removed(self, sub: Subscription, before: View | None = None) -> None:
        if before is None:
            before = self.view(sub)
        if self.announcing:
            self._settle(sub)
        if before:
            self._begin()
            self._emit_changes(sub, before, {}, False)

    def subscription_modified(self, sub: Subscription, before: View,
                              expr_changed: bool) -> None:
        """``before`` is ``view(sub)`` taken before the change."""
        if self.announcing:
            self._settle(sub)
        if self.quenches or before:
            self._begin()
            self._emit_changes(sub, before, self.view(sub), expr_changed)

    # -- quench requests ------------------------------------------------------------------
    def add(self, owner: Hashable, names: Iterable[str], deliver_insecure: bool,
            keys: Keys = EMPTY_KEYS, owner_keys: Keys = EMPTY_KEYS,
            announce: bool = True) -> Quench:
        """Register a quench, to be told of the subscriptions that already
        concern it (``pending``): at once with ``announce``, else by
        ``advance`` (the session does so before its QnchRply)."""
        quench = Quench(next(self._ids), owner, frozenset(names), deliver_insecure, keys,
                        owner_keys)
        self.quenches[quench.id] = quench
        self.by_owner.setdefault(owner, {})[quench.id] = quench
        self._index(quench)
        self._start(quench, None)
        if announce:
            self.advance(quench, float("inf"))
        return quench

    def _start(self, quench: Quench, old: _Before | None) -> None:
        """``quench`` is to be told about every subscription filed under its
        names (``indexed``), knowing them by ``old``."""
        refs = self.engine._refs
        quench.old = old
        quench.pending = Pending(refs[name].copy() for name in quench.indexed
                                 if name in refs)
        self.announcing[quench.id] = quench

    def advance(self, quench: Quench, deadline: float) -> bool:
        """Tell ``quench`` about pending subscriptions until the clock
        (``self.clock``) passes ``deadline``; True once it is told all
        (or was removed)."""
        pending = quench.pending
        if pending is None:
            return True
        self._until = deadline      # (its sends go at once unless others wait)
        owner, qid = quench.owner, (quench.id,)
        engine_get = self.engine.subs.get
        clock = self.clock
        done = 0
        while pending:
            sub_id, _ = pending.popitem()
            sub = engine_get(sub_id)
            if sub is None:
                continue
            old = quench.old
            before = 0 if old is None or old[0].isdisjoint(sub.names) else \
                _status(old[1], old[2], sub)
            after = 0 if quench.names.isdisjoint(sub.names) else quench.status(sub)
            if after != before:
                ids = (qid, ()) if after == SECURE else ((), qid)
                if not before:
                    self._send(owner, SubAddNotify(ids[0], ids[1], sub.id, sub.ast))
                elif not after:
                    self._send(owner, SubDelNotify(qid, sub.id))
                else:
                    self._send(owner, SubModNotify(ids[0], ids[1], sub.id, sub.ast))
            done += 1
            if done % _CLOCK_EVERY == 0 and clock() > deadline:
                return False
        self._told(quench)
        return True

    def _told(self, quench: Quench) -> None:
        quench.pending = None
        quench.old = None
        self.announcing.pop(quench.id, None)
        if quench.indexed is not quench.names:
            self._unindex(quench)
            quench.indexed = quench.names
            self._index(quench)

    def modify(self, quench: Quench, names_add: Iterable[str] = (),
               names_del: Iterable[str] = (), deliver_insecure: bool | None = None,
               add_keys: Keys = EMPTY_KEYS, del_keys: Keys = EMPTY_KEYS,
               owner_keys: Keys | None = None, announce: bool = True) -> None:
        """Apply a QnchModRqst (adding a present name or removing an absent one is
        ignored, as SubModRqst does for keys). The caller checks that the
        result is not empty (EMPTY_QUENCH). What it changed is told at once,
        or with ``announce=False`` by ``advance``."""
        if quench.pending is not None:
            self.advance(quench, float("inf"))      # (a session's requests wait for it)
        old = (quench.names, quench.prepared, quench.deliver_insecure)
        quench.names = (quench.names - frozenset(names_del)) | frozenset(names_add)
        if deliver_insecure is not None:
            quench.deliver_insecure = deliver_insecure
        if add_keys or del_keys:
            quench.keys = (quench.keys - del_keys) | add_keys
        if owner_keys is not None:
            quench.owner_keys = owner_keys
        quench.rekey()
        if quench.names != old[0]:
            quench.indexed = quench.names | old[0]
            self._index(quench)
        else:
            quench.names = quench.indexed = old[0]
        self._start(quench, old)
        if announce:
            self.advance(quench, float("inf"))

    def set_owner_keys(self, owner: Hashable, owner_keys: Keys) -> None:
        """The quencher's connection notification keys changed."""
        for quench in list(self.by_owner.get(owner, {}).values()):
            self.modify(quench, owner_keys=owner_keys)

    def remove(self, quench: Quench) -> None:
        if self.quenches.pop(quench.id, None) is None:
            return
        owned = self.by_owner.get(quench.owner)
        if owned is not None:
            owned.pop(quench.id, None)
            if not owned:
                del self.by_owner[quench.owner]
        self.announcing.pop(quench.id, None)
        quench.pending = None
        self._unindex(quench)

    def remove_owner(self, owner: Hashable) -> None:
        for quench in list(self.by_owner.get(owner, {}).values()):
            self.remove(quench)

    # -- helpers --------------------------------------------------------------------------
    def _index(self, quench: Quench) -> None:
        for name in quench.indexed:
            self._by_name.setdefault(name, {})[quench.id] = quench

    def _unindex(self, quench: Quench) -> None:
        for name in quench.indexed:
            quenches = self._by_name.get(name)
            if quenches is not None:
                quenches.pop(quench.id, None)
                if not quenches:
                    del self._by_name[name]
