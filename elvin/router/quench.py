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

The manager is sans-IO: ``send(owner, packet)`` is supplied by the router.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Hashable, Iterable

from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import SubAddNotify, SubDelNotify, SubModNotify
from elvin.router.engine import Engine, Subscription
from elvin.router.security import NotificationKeys, prepare_notification, prepared_match_pair

log = logging.getLogger(__name__)

__all__ = ["Quench", "QuenchManager"]

SECURE = 1
INSECURE = 2


class Quench:
    __slots__ = ("id", "owner", "names", "deliver_insecure", "keys", "owner_keys", "prepared")

    def __init__(self, quench_id: int, owner: Hashable, names: frozenset[str],
                 deliver_insecure: bool, keys: Keys, owner_keys: Keys) -> None:
        self.id = quench_id
        self.owner = owner
        self.names = names
        self.deliver_insecure = deliver_insecure
        self.keys = keys
        self.owner_keys = owner_keys
        self.prepared: NotificationKeys | None = None
        self.rekey()

    def rekey(self) -> None:
        self.prepared = prepare_notification(self.keys | self.owner_keys
                                             if self.owner_keys else self.keys)

    def status(self, sub: Subscription) -> int:
        """SECURE, INSECURE or 0 for a subscription that concerns this quench."""
        if self.prepared is not None and prepared_match_pair(self.prepared, sub.prepared,
                                                             sub.conn.prepared):
            return SECURE
        if sub.accept_insecure and self.deliver_insecure:
            return INSECURE
        return 0

    def __repr__(self) -> str:
        return f"Quench({self.id}, {sorted(self.names)})"


# the view a set of quenches has of one subscription: {quench: status}
View = dict


class QuenchManager:
    def __init__(self, engine: Engine, send: Callable[[Hashable, object], None],
                 first_id: int = 1) -> None:
        self.engine = engine
        self.send = send
        self._ids = itertools.count(first_id)
        self.quenches: dict[int, Quench] = {}
        self.by_owner: dict[Hashable, dict[int, Quench]] = {}
        self._by_name: dict[str, dict[int, Quench]] = {}
        self.notifications_sent = 0

    def __len__(self) -> int:
        return len(self.quenches)

    def owned(self, owner: Hashable) -> dict[int, Quench]:
        return self.by_owner.get(owner, {})

    def quenched_names(self) -> Iterable[str]:
        """The attribute names some quench names (a live view)."""
        return self._by_name.keys()

    # -- views ------------------------------------------------------------------------
    def _concerned(self, names: Iterable[str]) -> dict[int, Quench]:
        out: dict[int, Quench] = {}
        by_name = self._by_name
        for name in names:
            quenches = by_name.get(name)
            if quenches:
                out.update(quenches)
        return out

    def view(self, sub: Subscription) -> View:
        """{quench: status} for the quenches that see ``sub``."""
        if not self.quenches:
            return {}
        out = {}
        for quench in self._concerned(sub.names).values():
            status = quench.status(sub)
            if status:
                out[quench] = status
        return out

    def _emit_changes(self, sub: Subscription, before: View, after: View,
                      expr_changed: bool) -> None:
        """Send Add/Mod/Del per quenching session for one subscription."""
        if not before and not after:
            return
        per_owner: dict[Hashable, list[list]] = {}

        def slot(quench: Quench) -> list[list]:
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

    def _send(self, owner: Hashable, packet: object) -> None:
        self.notifications_sent += 1
        try:
            self.send(owner, packet)
        except Exception:
            log.exception("sending %s to a quencher failed", type(packet).__name__)

    # -- subscription changes (called by the router) ----------------------------------
    def subscription_added(self, sub: Subscription) -> None:
        if self.quenches:
            self._emit_changes(sub, {}, self.view(sub), False)

    def subscription_removed(self, sub: Subscription, before: View | None = None) -> None:
        if before is None:
            before = self.view(sub)
        if before:
            self._emit_changes(sub, before, {}, False)

    def subscription_modified(self, sub: Subscription, before: View,
                              expr_changed: bool) -> None:
        """``before`` is ``view(sub)`` taken before the change."""
        if self.quenches or before:
            self._emit_changes(sub, before, self.view(sub), expr_changed)

    # -- quench requests ------------------------------------------------------------------
    def add(self, owner: Hashable, names: Iterable[str], deliver_insecure: bool,
            keys: Keys = EMPTY_KEYS, owner_keys: Keys = EMPTY_KEYS,
            announce: bool = True) -> Quench:
        """Register a quench; with ``announce`` send it the subscriptions that
        already concern it (the session does so before its QnchRply)."""
        quench = Quench(next(self._ids), owner, frozenset(names), deliver_insecure, keys,
                        owner_keys)
        self.quenches[quench.id] = quench
        self.by_owner.setdefault(owner, {})[quench.id] = quench
        self._index(quench)
        if announce:
            self.announce(quench)
        return quench

    def announce(self, quench: Quench) -> None:
        """SubAddNotify to the quencher for each existing subscription it sees."""
        owner = quench.owner
        for sub in self.engine.referring(quench.names).values():
            status = quench.status(sub)
            if status == SECURE:
                self._send(owner, SubAddNotify((quench.id,), (), sub.id, sub.ast))
            elif status == INSECURE:
                self._send(owner, SubAddNotify((), (quench.id,), sub.id, sub.ast))

    def modify(self, quench: Quench, names_add: Iterable[str] = (),
               names_del: Iterable[str] = (), deliver_insecure: bool | None = None,
               add_keys: Keys = EMPTY_KEYS, del_keys: Keys = EMPTY_KEYS,
               owner_keys: Keys | None = None) -> None:
        """Apply a QnchModRqst (adding a present name or removing an absent one is
        ignored, as SubModRqst does for keys). The caller checks that the
        result is not empty (EMPTY_QUENCH)."""
        before = self._quench_view(quench)
        self._unindex(quench)
        quench.names = (quench.names - frozenset(names_del)) | frozenset(names_add)
        if deliver_insecure is not None:
            quench.deliver_insecure = deliver_insecure
        if add_keys or del_keys:
            quench.keys = (quench.keys - del_keys) | add_keys
        if owner_keys is not None:
            quench.owner_keys = owner_keys
        quench.rekey()
        self._index(quench)
        after = self._quench_view(quench)
        self._emit_quench_changes(quench, before, after)

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
        self._unindex(quench)

    def remove_owner(self, owner: Hashable) -> None:
        for quench in list(self.by_owner.get(owner, {}).values()):
            self.remove(quench)

    # -- helpers --------------------------------------------------------------------------
    def _quench_view(self, quench: Quench) -> dict[int, tuple[Subscription, int]]:
        out = {}
        for sub in self.engine.referring(quench.names).values():
            status = quench.status(sub)
            if status:
                out[sub.id] = (sub, status)
        return out

    def _emit_quench_changes(self, quench: Quench, before: dict, after: dict) -> None:
        owner, qid = quench.owner, (quench.id,)
        for sub_id, (sub, status) in after.items():
            old = before.get(sub_id)
            ids = (qid, ()) if status == SECURE else ((), qid)
            if old is None:
                self._send(owner, SubAddNotify(ids[0], ids[1], sub.id, sub.ast))
            elif old[1] != status:
                self._send(owner, SubModNotify(ids[0], ids[1], sub.id, sub.ast))
        for sub_id, (sub, _status) in before.items():
            if sub_id not in after:
                self._send(owner, SubDelNotify(qid, sub.id))

    def _index(self, quench: Quench) -> None:
        for name in quench.names:
            self._by_name.setdefault(name, {})[quench.id] = quench

    def _unindex(self, quench: Quench) -> None:
        for name in quench.names:
            quenches = self._by_name.get(name)
            if quenches is not None:
                quenches.pop(quench.id, None)
                if not quenches:
                    del self._by_name[name]
