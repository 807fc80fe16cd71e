"""The subscription store, its index, and notification matching.

Subscriptions with the same expression (equal ASTs) share one *predicate*:
the compiled expression is evaluated once per notification however many
clients registered it (tickertape users typically share ``Group == "..."``
subscriptions). Each predicate is filed in the ``TermIndex``
(``elvin.subscription.index``) by its plan (``elvin.subscription.
conditions``): the necessary conditions of the expression -- a value of
an attribute (``Group == "chat"``), a numeric range (``Seq >= a && Seq <
b``, ``Price > 101.5``), a string prefix or suffix (also of ``fold-case``
of an attribute), or only the presence of an attribute (``regex``,
``contains``, arithmetic: *scanned*). ``match`` evaluates a notification
only against the predicates whose conditions it meets, so the matching
cost grows with the subscriptions that can match, not with all of them
(docs/architecture.md, "The subscription index").

Matched predicates expand to subscriptions. Subscriptions with no keys of
their own that accept insecure delivery (nearly all of them) are pre-grouped
per owner, so a match costs one ``list.extend`` per owner; the others are
checked one by one for a secure key match (``security.prepared_match_pair``)
and the insecure rules of docs/keys.md.

An owner's connection-level subscription keys (SecRqst) are held once per
owner (``set_owner_keys``), not copied into each subscription: every
subscription of the owner has the same connection keys, so a change costs
one dict store whatever the owner holds (a client with 65,536 subscriptions
used to rekey each of them on the loop, 0.3-0.5 s a SecRqst). A grouped
subscription's effective keys are then exactly its owner's, and ``match``
checks them once per (predicate, owner) group.

The engine also keeps ``attribute name -> subscriptions that refer to it``
(every NAME in the AST, not only required ones): the quench manager uses it
to find the subscriptions a quench concerns, and ``watch(name, callback)``
reports when the first subscription starts, or the last stops, referring to
a name (the router's statistics publisher uses it for
``Elvin-Router-Stats``).

The engine is sans-IO: owners are opaque hashable objects (sessions).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Generator, Hashable, Iterable, Iterator, Mapping
from typing import Any

from elvin.keys import EMPTY_KEYS, Keys
from elvin.router.security import (
    NotificationKeys,
    SubscriptionKeys,
    prepare_subscription,
    prepared_match,
    prepared_match_pair,
)
from elvin.router.tofree import ToFree
from elvin.subscription.ast import Node, names_in
from elvin.subscription.index import TermIndex, plan_for
from elvin.subscription.patterns import mark, overruns
from elvin.subscription.suspension import charge_overrun
from elvin.subscription.unparse import unparse

log = logging.getLogger(__name__)

__all__ = ["LINK_STEP", "MATCH_SLICE", "RELEASE_STEP", "WIDE", "ConnectionKeys", "Engine",
           "Placement", "Predicate", "Subscription", "place"]


class ConnectionKeys:
    """An owner's connection-level subscription keys (SecRqst), raw and
    prepared (None: no keys); one object for all the owner's subscriptions."""

    __slots__ = ("raw", "prepared")

    def __init__(self) -> None:
        self.raw: Keys = EMPTY_KEYS
        self.prepared: SubscriptionKeys | None = None


#: a predicate's compiled test: attributes -> True, False or None (bottom)
_Evaluate = Callable[[Mapping[str, Any]], Any]
#: ``match``'s halves, {owner: ids}: a tuple while shared with a predicate's groups,
#: a list once extended
_Matched = dict[Hashable, Any]

#: what a subscription being linked in steps holds until its last step (never changed)
_NO_CONNECTION_KEYS = ConnectionKeys()

#: filings (alternatives of a plan, names) per step of ``add_steps`` and of
#: the deferred unlinking (about a millisecond)
LINK_STEP = 200
#: objects per step of letting go of what a wide subscription held (``ToFree``:
#: about a millisecond; freeing an ``||`` of 10,000 names at once took 2.6-6 ms)
RELEASE_STEP = 2000
#: seconds of evaluation per step of ``match_steps``
MATCH_SLICE = 0.001
#: subscriptions with more names or filings than this are unlinked in steps
#: (``deferred``) when the engine has an ``on_deferred``
WIDE = 1000

class Subscription:
    """One registered subscription (one SubAddRqst). ``keys`` and
    ``prepared`` are its own keys only; ``conn`` is its owner's
    ``ConnectionKeys``, shared by all the owner's subscriptions."""

    __slots__ = ("id", "owner", "ast", "accept_insecure", "keys", "prepared", "conn",
                 "names", "pred", "plain")

    def __init__(self, sub_id: int, owner: Hashable, text: str, ast: Node,
                 accept_insecure: bool, keys: Keys, conn: ConnectionKeys,
                 names: frozenset[str] | None = None) -> None:
        # ``text`` is not kept (~90 bytes a subscription): nothing needs the
        # client's spelling once the tree is checked; ``text`` unparses the tree
        self.id = sub_id
        self.owner = owner
        self.ast = ast
        self.accept_insecure = accept_insecure
        self.keys = keys
        self.conn = conn
        self.names = names_in(ast) if names is None else names
        self.pred: Predicate | None = None
        self._rekey()

    def _rekey(self) -> None:
        keys = self.keys
        # (no keys, the usual case, tested by identity first: Keys.__bool__ is Python)
        self.prepared: SubscriptionKeys | None = (None if keys is EMPTY_KEYS or not keys
                                                  else prepare_subscription(keys))
        # "plain": no keys of its own and accepts insecure delivery -> grouped
        # per owner (the owner's connection keys are checked per group)
        self.plain = self.prepared is None and self.accept_insecure

    @property
    def text(self) -> str:
        """The expression, written out from its tree."""
        return unparse(self.ast)

    def __repr__(self) -> str:
        return f"Subscription({self.id}, {self.text!r})"


class Placement:
    """What filing a tree in the index takes that does not depend on the
    engine's state: the tree and its hash (hashing a ``Node`` walks the
    whole tree), the names it refers to, and its plan
    (``elvin.subscription.conditions``: the necessary conditions the index
    files it by). ``place`` works it out on any thread: the router does so
    on its worker thread for a long expression, so that its loop only links
    the subscription in (a few dict operations per condition)."""

    __slots__ = ("ast", "tree_hash", "names", "plan")

    def __init__(self, ast: Node, tree_hash: int, names: frozenset[str],
                 plan: tuple[Any, ...]) -> None:
        self.ast = ast
        self.tree_hash = tree_hash
        self.names = names
        self.plan = plan


def place(ast: Node, names: frozenset[str] | None = None,
          index: tuple[Any, ...] | None = None) -> Placement:
    """The ``Placement`` of ``ast`` (thread-safe: reads the tree only);
    ``index``: its plan, when the caller knows it."""
    return Placement(ast, hash(ast), names_in(ast) if names is None else names,
                     plan_for(ast, index))


class _Predicates:
    """The engine's predicates by their tree's hash. The int is the key (a
    key object per predicate would cost 48 bytes of every subscription);
    trees that share a hash, which is rare, share a list."""

    __slots__ = ("_by_hash", "_count")

    def __init__(self) -> None:
        self._by_hash: dict[int, Predicate | list[Predicate]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Predicate]:
        for found in self._by_hash.values():
            if type(found) is list:
                yield from found
            else:
                yield found  # type: ignore[misc]  # type() is, for speed: mypy does not narrow the else

    def find(self, tree_hash: int, ast: Node) -> Predicate | None:
        found = self._by_hash.get(tree_hash)
        if found is None:
            return None
        if isinstance(found, Predicate):
            return found if found.ast == ast else None
        for pred in found:
            if pred.ast == ast:
                return pred
        return None

    def add(self, pred: Predicate) -> None:
        found = self._by_hash.get(pred.hash)
        if found is None:
            self._by_hash[pred.hash] = pred
        elif type(found) is list:
            found.append(pred)
        else:
            self._by_hash[pred.hash] = [found, pred]  # type: ignore[list-item]  # found is a lone Predicate here (type() is, as above)
        self._count += 1

    def remove(self, pred: Predicate) -> None:
        found = self._by_hash[pred.hash]
        if found is pred:
            del self._by_hash[pred.hash]
        else:
            found.remove(pred)  # type: ignore[union-attr]  # found is the shared list here
            if len(found) == 1:  # type: ignore[arg-type]  # as above
                self._by_hash[pred.hash] = found[0]  # type: ignore[index]  # as above
        self._count -= 1


class Predicate:
    """An expression shared by the subscriptions registered with it."""

    __slots__ = ("ast", "hash", "evaluate", "subs", "place", "_groups", "_special")

    def __init__(self, ast: Node, evaluate: Callable[[Mapping[str, Any]], Any],
                 tree_hash: int | None = None) -> None:
        self.ast = ast
        #: ``hash(ast)``, worked out once (the engine finds predicates by it)
        self.hash = hash(ast) if tree_hash is None else tree_hash
        self.evaluate = evaluate
        #: the subscription registered with it while it is alone (most
        #: predicates: a one-entry dict would cost 232 bytes), else a dict
        #: {id: subscription}; None when empty (see ``members``)
        self.subs: Subscription | dict[int, Subscription] | None = None
        #: where the index filed it (``TermIndex`` owns this)
        self.place: tuple[Any, ...] = ()
        self._groups: list[Any] | None = None
        self._special: list[Subscription] | None = None

    def invalidate(self) -> None:
        self._groups = None
        self._special = None

    def members(self) -> Iterable[Subscription]:
        subs = self.subs
        if subs is None:
            return ()
        return (subs,) if type(subs) is Subscription else subs.values()  # type: ignore[union-attr]  # type() is, for speed: subs is the dict in the else

    def add(self, sub: Subscription) -> None:
        subs = self.subs
        if subs is None:
            self.subs = sub
        elif type(subs) is Subscription:
            self.subs = {subs.id: subs, sub.id: sub}
        else:
            subs[sub.id] = sub  # type: ignore[index]  # subs is the dict here (type() is, as above)

    def discard(self, sub: Subscription) -> bool:
        """Forget ``sub``; True if no subscription is left."""
        subs = self.subs
        if subs is sub:
            self.subs = None
            return True
        if type(subs) is dict:
            subs.pop(sub.id, None)
            if len(subs) == 1:
                self.subs = next(iter(subs.values()))
            elif not subs:
                self.subs = None
        return self.subs is None

    def _build(self) -> None:
        groups: dict[Hashable, list[int]] = {}
        special = []
        for sub in self.members():
            if sub.plain:
                groups.setdefault(sub.owner, []).append(sub.id)
            else:
                special.append(sub)
        # tuples of ints: no allocation when handed out, and not tracked by the GC
        self._groups = [(owner, tuple(ids)) for owner, ids in groups.items()]
        self._special = special


class Engine:
    """Subscriptions, their index, and matching."""

    def __init__(self, first_id: int = 1, *,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._ids = itertools.count(first_id)
        #: the clock ``match_steps`` measures its ``MATCH_SLICE`` on: the
        #: router passes its sessions' (``SessionHost.clock``, the same
        #: function), a test one that moves only when it says
        self.clock = clock
        self.subs: dict[int, Subscription] = {}
        self.by_owner: dict[Hashable, dict[int, Subscription]] = {}
        #: owner -> its connection subscription keys (owners with
        #: subscriptions), shared by all its subscriptions; how many have keys
        self._conn: dict[Hashable, ConnectionKeys] = {}
        self._keyed_owners = 0
        self._preds = _Predicates()
        #: the predicates by their necessary conditions (elvin.subscription.index)
        self.index = TermIndex()
        self._refs: dict[str, dict[int, Subscription]] = {}
        self._watchers: dict[str, list[Callable[[bool], None]]] = {}
        self.evaluations = 0     # predicates evaluated (for tests and statistics)
        #: ``listener(ast, added)`` when a distinct subscription tree appears or
        #: goes (federation keeps its pull filters from this); None = nobody
        self.pred_listener: Callable[[Node, bool], None] | None = None
        #: pattern matches that ran out of their own time (statistics)
        self.pattern_overruns = 0
        #: ``listener(pred, count)`` when ``pred``'s pattern overran (the router
        #: logs it, naming the subscriptions' owners); None = nobody
        self.overrun_listener: Callable[[Predicate, int], None] | None = None
        self._overran_now: list[Predicate] = []     # in the match under way
        #: called with a generator of unlinking steps (a wide subscription's
        #: index filings and names) to run in later loop turns; None: at once
        self.on_deferred: Callable[[Generator[Any, Any, Any]], None] | None = None
        #: what wide subscriptions held, let go of a slice per deferred step
        self.to_free = ToFree()

    # -- queries ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.subs)

    def get(self, sub_id: int) -> Subscription | None:
        return self.subs.get(sub_id)

    def owned(self, owner: Hashable) -> dict[int, Subscription]:
        return self.by_owner.get(owner, {})

    def referring(self, names: Iterable[str]) -> dict[int, Subscription]:
        """Subscriptions whose expression refers to any of ``names``."""
        out: dict[int, Subscription] = {}
        refs = self._refs
        for name in names:
            subs = refs.get(name)
            if subs:
                out.update(subs)
        return out

    def refers(self, name: str) -> bool:
        return bool(self._refs.get(name))

    def referring_count(self, name: str) -> int:
        """How many subscriptions refer to ``name`` (no dict built)."""
        subs = self._refs.get(name)
        return len(subs) if subs else 0

    def watch(self, name: str, callback: Callable[[bool], None]) -> None:
        """``callback(True)`` when the first subscription starts referring to
        ``name``, ``callback(False)`` when the last one stops."""
        self._watchers.setdefault(name, []).append(callback)

    def predicate_asts(self) -> list[Node]:
        """The distinct subscription trees (one per shared predicate)."""
        return [pred.ast for pred in self._preds]

    @property
    def weight(self) -> int:
        """What the subscriptions hold, roughly in objects' worth: one per
        subscription plus one per index filing (a ``||`` of 10,000 names is
        10,000 filings and ~100,000 objects; an everyday subscription one or
        two). The GC policy's population (``gcpolicy``): counted as one
        member, a wide subscription looked like a quarter of a small heap of
        garbage and set off a full collection. A few integer adds."""
        return len(self.subs) + sum(self.index.stats().values())

    @property
    def predicate_count(self) -> int:
        return len(self._preds)

    def index_stats(self) -> dict[str, int]:
        """The number of predicates, and of their filings by look-up
        (``TermIndex.stats``: value, lower bound, upper bound, range, prefix,
        suffix, name, always)."""
        return {"predicates": len(self._preds), **self.index.stats()}

    # -- changes ------------------------------------------------------------------
    def add(self, owner: Hashable, text: str, ast: Node, evaluate: _Evaluate,
            accept_insecure: bool = True, keys: Keys = EMPTY_KEYS,
            owner_keys: Keys = EMPTY_KEYS, names: frozenset[str] | None = None,
            index: tuple[Any, ...] | None = None,
            placement: Placement | None = None) -> Subscription:
        """Register a subscription; ``evaluate(attrs)`` is its compiled form
        returning ``True`` for a match (``CompiledSubscription.matches``: the
        router does not need to tell false from bottom). When the caller
        knows them (``elvin.subscription.shapes`` does, per shape), ``names``
        are the attribute names the tree refers to and ``index`` is the
        tree's plan (``elvin.subscription.conditions``); a ``placement``
        (``place(ast)``, worked out elsewhere) stands for both and more."""
        if placement is not None:
            names = placement.names
        conn = self._owner_conn(owner, owner_keys)
        sub = Subscription(next(self._ids), owner, text, ast, accept_insecure, keys, conn,
                           names)
        self.subs[sub.id] = sub
        owned = self.by_owner.get(owner)
        if owned is None:
            owned = self.by_owner[owner] = {}
        owned[sub.id] = sub
        self._attach(sub, evaluate, index, placement)
        self._add_refs(sub)
        return sub

    def add_steps(self, owner: Hashable, text: str, ast: Node, evaluate: _Evaluate,
                  accept_insecure: bool, keys: Keys, owner_keys: Keys,
                  placement: Placement) -> Generator[None, None, Subscription]:
        """``add``, as a generator of steps of ``LINK_STEP`` filings (a wide
        expression, ``||`` of 10,000 names, takes ~50 ms to link in). The
        subscription is matched only from the last step on: until then its
        predicate is filed without members (a notification it meets costs an
        evaluation and goes to no one) and its names refer to it before it is
        registered (``referring`` is a superset: readers check ``sub.names``
        and ``subs``). Closed before its end, it gives up what it did."""
        # its owner's ConnectionKeys from the last step (given up before, it holds none)
        sub = Subscription(next(self._ids), owner, text, ast, accept_insecure, keys,
                           _NO_CONNECTION_KEYS, placement.names)
        fresh: Predicate | None = None
        if self._preds.find(placement.tree_hash, ast) is None:
            fresh = Predicate(ast, evaluate, placement.tree_hash)
        try:
            if fresh is not None:
                yield from self.index.add_steps(fresh, placement.plan, LINK_STEP)
            yield from self._add_refs_steps(sub)
        except GeneratorExit:
            if fresh is not None:
                self._defer(self._unfile_steps(fresh))
            self._defer(self._then_let_go(self._remove_refs_steps(sub, sub.names), sub))
            raise
        # the last step: registered and matched at once
        sub.conn = self._owner_conn(owner, owner_keys)
        self.subs[sub.id] = sub
        owned = self.by_owner.get(owner)
        if owned is None:
            owned = self.by_owner[owner] = {}
        owned[sub.id] = sub
        pred = self._join_predicate(sub, ast, evaluate, placement, fresh)
        pred.invalidate()
        sub.pred = pred
        self.let_go(placement)      # its plan: 20,000 tuples for 10,000 names
        return sub

    def modify_steps(self, sub: Subscription, *, text: str, ast: Node, evaluate: _Evaluate,
                     accept_insecure: bool, keys: Keys, placement: Placement,
                     before_swap: Callable[[], Any]) -> Generator[None, None, Any]:
        """``modify`` to a new (wide) tree, as a generator of steps as
        ``add_steps``: the new predicate is filed and the new names refer to
        the subscription first, then in the last step ``before_swap()`` runs
        (the router takes the quench view there), the subscription changes
        at once, and its old filings and names are let go of in deferred
        steps. Returns what ``before_swap`` returned, or ``NotImplemented``
        when the subscription went meanwhile."""
        fresh: Predicate | None = None
        if self._preds.find(placement.tree_hash, ast) is None:
            fresh = Predicate(ast, evaluate, placement.tree_hash)
        extra = placement.names - sub.names
        try:
            if fresh is not None:
                yield from self.index.add_steps(fresh, placement.plan, LINK_STEP)
            yield from self._add_refs_steps(sub, extra)
            yield       # the swap is a step of its own, not the last filings' too
        except GeneratorExit:
            self._give_up(fresh, sub, extra)
            raise
        if self.subs.get(sub.id) is not sub:
            self._give_up(fresh, sub, extra)
            return NotImplemented
        # the last step: the subscription changes at once
        result = before_swap()
        self._detach(sub)
        old_names = sub.names
        sub.ast = ast
        sub.names = placement.names
        pred = self._join_predicate(sub, ast, evaluate, placement, fresh)
        sub.pred = pred
        sub.accept_insecure = accept_insecure
        sub.keys = keys
        sub._rekey()
        pred.invalidate()
        # (the names it no longer has are found in those steps too: a set
        # difference of 10,000 names is not this step's work)
        self._defer(self._then_let_go(
            self._remove_refs_steps(sub, old_names, placement.names), old_names))
        self.let_go(placement)      # its plan, as in ``add_steps``
        return result

    def _join_predicate(self, sub: Subscription, ast: Node, evaluate: _Evaluate,
                        placement: Placement, fresh: Predicate | None) -> Predicate:
        """The last step of ``add_steps`` and ``modify_steps``: ``sub`` joins
        the predicate of its tree. A twin filed while the steps ran wins (our
        ``fresh`` one is let go of in deferred steps); if the twin went
        meanwhile and nothing was filed, the predicate is filed now."""
        pred = self._preds.find(placement.tree_hash, ast)
        if pred is None and fresh is None:      # its twin went meanwhile: file it now
            fresh = Predicate(ast, evaluate, placement.tree_hash)
            self.index.add(fresh, placement.plan)
        if pred is None:
            pred = fresh
            self._preds.add(pred)  # type: ignore[arg-type]  # fresh is set when no twin was found
            if self.pred_listener is not None:
                self.pred_listener(ast, True)
        else:
            if fresh is not None:               # a twin came meanwhile: ours goes
                self._defer(self._unfile_steps(fresh))
            sub.ast = pred.ast
        pred.add(sub)  # type: ignore[union-attr]  # pred is set on both branches above
        return pred  # type: ignore[return-value]  # as above

    def _give_up(self, fresh: Predicate | None, sub: Subscription,
                 extra: frozenset[str]) -> None:
        """What ``modify_steps`` filed before it was given up goes again."""
        if fresh is not None:
            self._defer(self._unfile_steps(fresh))
        self._defer(self._remove_refs_steps(sub, extra))

    def _add_refs_steps(self, sub: Subscription,
                        names: Iterable[str] | None = None) -> Generator[None, None, None]:
        refs = self._refs
        sub_id = sub.id
        for n, name in enumerate(sub.names if names is None else names, 1):
            subs = refs.get(name)
            if subs is None:
                refs[name] = {sub_id: sub}
                if name in self._watchers:
                    self._notify_watchers(name, True)
            else:
                subs[sub_id] = sub
            if n % LINK_STEP == 0:
                yield

    def _remove_refs_steps(self, sub: Subscription, names: Iterable[str],
                           keep: frozenset[str] = frozenset()) -> Generator[None, None, None]:
        """``sub`` no longer refers to ``names`` but those in ``keep``, in
        steps of ``LINK_STEP`` names looked at (kept ones too: 10,000 names
        a modification keeps were one step)."""
        refs = self._refs
        for n, name in enumerate(names, 1):
            if name not in keep:
                subs = refs.get(name)
                if subs is not None and subs.pop(sub.id, None) is not None and not subs:
                    del refs[name]
                    if name in self._watchers:
                        self._notify_watchers(name, False)
            if n % LINK_STEP == 0:
                yield

    def _unfile_steps(self, pred: Predicate) -> Generator[None, None, None]:
        """Unfile a predicate no one is registered with, then let go of it
        (``let_go``)."""
        yield from self.index.remove_steps(pred, LINK_STEP)
        self.let_go(pred)

    def _then_let_go(self, steps: Generator[None, None, None],
                     *objects: Any) -> Generator[None, None, None]:
        """``steps``, then let go of ``objects`` (``let_go``)."""
        yield from steps
        self.let_go(*objects)

    def let_go(self, *objects: Any) -> None:
        """What a wide subscription held (its tree, names, predicate: ~80,000
        blocks for an ``||`` of 10,000 names) goes on the to-free list, let
        go of ``RELEASE_STEP`` objects per deferred step, not all in the step
        that dropped the last reference (``ToFree``). The caller's frame
        must end right after: the list holds them alone once it has."""
        if self.on_deferred is None:
            return                  # no deferred steps: freed by reference counts now
        if self.to_free.put(*objects):
            self.on_deferred(self.to_free.steps(RELEASE_STEP))

    def _defer(self, steps: Generator[Any, Any, Any]) -> None:
        """Unlinking steps to run later (``on_deferred``), or now."""
        if self.on_deferred is not None:
            self.on_deferred(steps)
        else:
            for _ in steps:
                pass

    def remove(self, sub: Subscription) -> None:
        if self.subs.pop(sub.id, None) is None:
            return
        owned = self.by_owner.get(sub.owner)
        if owned is not None:
            owned.pop(sub.id, None)
            if not owned:
                del self.by_owner[sub.owner]
                conn = self._conn.pop(sub.owner, None)
                if conn is not None and conn.prepared is not None:
                    self._keyed_owners -= 1
        if self.on_deferred is not None and len(sub.names) > WIDE:
            self._detach(sub)
            self._defer(self._then_let_go(self._remove_refs_steps(sub, sub.names), sub))
            return
        self._detach(sub)
        self._remove_refs(sub)

    def modify(self, sub: Subscription, *, text: str | None = None, ast: Node | None = None,
               evaluate: _Evaluate | None = None, accept_insecure: bool | None = None,
               keys: Keys | None = None, placement: Placement | None = None) -> None:
        """Change a subscription in place (its id is kept; ``text`` is not kept,
        see ``Subscription``); ``placement`` as
        for ``add``. ``sub.ast`` stays the same object unless the tree changed."""
        if placement is not None:
            ast = placement.ast
        if ast is not None and evaluate is not None and (
                ast != sub.ast if placement is None or sub.pred is None
                else placement.tree_hash != sub.pred.hash or ast != sub.pred.ast):  # hashes first
            self._detach(sub)
            self._remove_refs(sub)
            sub.ast = ast
            sub.names = names_in(ast) if placement is None else placement.names
            self._attach(sub, evaluate, None, placement)
            self._add_refs(sub)
        if accept_insecure is not None:
            sub.accept_insecure = accept_insecure
        if keys is not None:
            sub.keys = keys
        sub._rekey()
        if sub.pred is not None:
            sub.pred.invalidate()

    def _owner_conn(self, owner: Hashable, owner_keys: Keys) -> ConnectionKeys:
        """The owner's ``ConnectionKeys`` (made with its first subscription),
        holding ``owner_keys`` (the session's current ones)."""
        conn = self._conn.get(owner)
        if conn is None:
            conn = self._conn[owner] = ConnectionKeys()
        if owner_keys is not conn.raw:
            self.set_owner_keys(owner, owner_keys)
        return conn

    def set_owner_keys(self, owner: Hashable, owner_keys: Keys) -> None:
        """The owner's connection-level subscription keys (the ones every
        subscription it holds has besides its own): one store, whatever the
        owner holds. ``add`` sets them too (the router passes the session's
        current keys), and they are forgotten with the owner's last
        subscription."""
        conn = self._conn.get(owner)
        if conn is None:            # no subscriptions: the next add brings the keys
            return
        had = conn.prepared is not None
        if owner_keys is EMPTY_KEYS or not owner_keys:
            conn.raw, conn.prepared = EMPTY_KEYS, None
        else:
            conn.raw, conn.prepared = owner_keys, prepare_subscription(owner_keys)
        self._keyed_owners += (conn.prepared is not None) - had

    def owner_keys(self, owner: Hashable) -> Keys:
        """The owner's connection subscription keys (EMPTY_KEYS: none)."""
        conn = self._conn.get(owner)
        return EMPTY_KEYS if conn is None else conn.raw

    @staticmethod
    def effective_keys(sub: Subscription) -> Keys:
        """A subscription's own keys plus its owner's connection keys."""
        raw = sub.conn.raw
        return sub.keys | raw if raw else sub.keys

    def dismantle(self) -> None:
        """This engine is being dropped whole (a federated peer's replaced
        pull filter): unlink its subscriptions from their predicates (each
        points at the other), so that all of it is freed by reference counts
        at once, not left as cycles for a full collection. O(n) attribute
        stores, no index maintenance: the engine is unusable afterwards."""
        for sub in self.subs.values():
            sub.pred = None
        for pred in self._preds:
            pred.subs = None
            pred.place = ()
            pred.invalidate()
        self.index.clear()

    def remove_owner(self, owner: Hashable) -> list[Subscription]:
        subs = list(self.by_owner.get(owner, {}).values())
        for sub in subs:
            self.remove(sub)
        return subs

    # -- index maintenance ---------------------------------------------------------
    def _attach(self, sub: Subscription, evaluate: _Evaluate,
                index: tuple[Any, ...] | None = None,
                placement: Placement | None = None) -> None:
        tree_hash = hash(sub.ast) if placement is None else placement.tree_hash
        pred = self._preds.find(tree_hash, sub.ast)
        if pred is None:
            pred = Predicate(sub.ast, evaluate, tree_hash)
            self._preds.add(pred)
            self.index.add(pred, plan_for(sub.ast, index) if placement is None
                           else placement.plan)
            if self.pred_listener is not None:
                self.pred_listener(sub.ast, True)
        else:
            sub.ast = pred.ast      # one tree per predicate in memory
        pred.add(sub)
        pred.invalidate()
        sub.pred = pred

    def _detach(self, sub: Subscription) -> None:
        pred = sub.pred
        sub.pred = None
        if pred is None:
            return
        empty = pred.discard(sub)
        pred.invalidate()
        if empty:
            self._preds.remove(pred)
            place = pred.place
            if self.on_deferred is not None and place and type(place[0]) is not int \
                    and len(place) > WIDE:
                # no member left: filed a while longer, it goes to no one
                self._defer(self._unfile_steps(pred))
            else:
                self.index.remove(pred)
            if self.pred_listener is not None:
                self.pred_listener(pred.ast, False)

    def _add_refs(self, sub: Subscription) -> None:
        refs = self._refs
        sub_id = sub.id
        for name in sub.names:
            subs = refs.get(name)
            if subs is None:
                refs[name] = {sub_id: sub}
                if name in self._watchers:
                    self._notify_watchers(name, True)
            else:
                subs[sub_id] = sub

    def _remove_refs(self, sub: Subscription) -> None:
        for name in sub.names:
            subs = self._refs.get(name)
            if subs is None:
                continue
            subs.pop(sub.id, None)
            if not subs:
                del self._refs[name]
                if name in self._watchers:
                    self._notify_watchers(name, False)

    def _notify_watchers(self, name: str, active: bool) -> None:
        for callback in self._watchers.get(name, ()):
            try:
                callback(active)
            except Exception:  # a watcher's bug must not stop matching; logged
                log.exception("watcher of %r failed", name)

    # -- matching --------------------------------------------------------------------
    def candidates(self, attrs: Mapping[str, Any]) -> list[Predicate]:
        """The predicates a notification must be evaluated against."""
        return self.index.candidates(attrs)

    def any_match(self, attrs: Mapping[str, Any]) -> bool:
        """Whether some expression is true for ``attrs``; a pattern that
        overruns its own time limit is charged to its predicate as in
        ``match``."""
        over = overruns()
        try:
            for pred in self.candidates(attrs):
                seen = over[0]
                try:
                    result = pred.evaluate(attrs)
                except Exception:       # evaluation never raises, by contract; be safe
                    log.exception("evaluating %r failed", pred.ast)
                    continue
                if over[0] != seen:
                    self._overran(pred)
                if result is True:
                    return True
            return False
        finally:
            if self._overran_now:
                self._restamp()

    def _restamp(self) -> None:
        """Start the suspensions of this match's overrunning predicates at its
        end: a notification that overran many patterns lasted a while, and a
        suspension that started at the first one must not be over by the next
        notification."""
        for pred in self._overran_now:
            charge_overrun(pred, again=False)
        self._overran_now.clear()

    def _overran(self, pred: Predicate) -> None:
        """``pred``'s pattern ran out of its own time: its account, not anyone
        else's (``charge_overrun``)."""
        count = charge_overrun(pred)
        self._overran_now.append(pred)
        self.pattern_overruns += 1
        listener = self.overrun_listener
        if listener is not None:
            try:
                listener(pred, count)
            except Exception:  # a listener's bug must not stop matching; logged
                log.exception("the overrun listener failed")

    def match(self, attrs: Mapping[str, Any], nkeys: NotificationKeys | None = None,
              deliver_insecure: bool = True,
              preds: list[Predicate] | None = None) -> tuple[_Matched, _Matched]:
        """``(insecure, secure)``: two dicts ``{owner: ids}`` of the subscriptions
        the notification is delivered to (docs/keys.md rules); ``secure`` is
        usually empty. The id sequences are tuples or lists: treat them as
        read-only. Allocation is kept to the minimum (an owner matched by one
        predicate gets that predicate's cached tuple) because this runs for
        every notification. ``preds``: ``candidates(attrs)``, when the caller
        has them."""
        if preds is None:
            preds = self.index.candidates(attrs)
        self.evaluations += len(preds)
        matched = self._evaluate(preds, attrs)
        return self._expand(matched, nkeys, deliver_insecure)

    def match_steps(self, attrs: Mapping[str, Any], nkeys: NotificationKeys | None,
                    deliver_insecure: bool,
                    preds: list[Predicate] | None = None
                    ) -> Generator[None, None, tuple[_Matched, _Matched]]:
        """``match`` as a generator of steps of about ``MATCH_SLICE`` seconds
        (a notification that 40,000 regex() subscriptions must be evaluated
        against takes 0.4-1.6 s); a step also ends right after a pattern
        overran its own limit, so a step costs at most one such limit more.
        The matched predicates expand to their members at the end: a
        subscription removed meanwhile gets nothing."""
        first = self.match_first(attrs, nkeys, deliver_insecure, preds)
        if isinstance(first, tuple):
            return first
        yield
        return (yield from first)

    def match_first(self, attrs: Mapping[str, Any], nkeys: NotificationKeys | None,
                    deliver_insecure: bool, preds: list[Predicate] | None = None
                    ) -> tuple[_Matched, _Matched] | Generator[None, None,
                                                               tuple[_Matched, _Matched]]:
        """The first step of ``match_steps`` run now: ``match``'s answer when
        that step was the only one (the usual case: a few candidates), else a
        generator of the steps after it, the first of which runs at its first
        ``next``. The router's hot path calls this rather than starting two
        generators for a notification that needs no second step."""
        if preds is None:
            preds = self.index.candidates(attrs)
        self.evaluations += len(preds)
        matched: list[Predicate] = []
        start = self._match_step(preds, 0, attrs, matched)
        if start < 0:
            return self._expand(matched, nkeys, deliver_insecure)
        return self._match_rest(preds, start, attrs, matched, nkeys, deliver_insecure)

    def _match_rest(self, preds: list[Predicate], start: int, attrs: Mapping[str, Any],
                    matched: list[Predicate], nkeys: NotificationKeys | None,
                    deliver_insecure: bool) -> Generator[None, None, tuple[_Matched, _Matched]]:
        """(``match_first``'s later steps, from ``preds[start]``.)"""
        while True:
            start = self._match_step(preds, start, attrs, matched)
            if start < 0:
                return self._expand(matched, nkeys, deliver_insecure)
            yield

    def _match_step(self, preds: list[Predicate], start: int, attrs: Mapping[str, Any],
                    matched: list[Predicate]) -> int:
        """One step of a match: ``preds[start:]`` evaluated, the true ones
        added to ``matched``, until ``MATCH_SLICE`` has passed or a pattern
        overran its own limit (charged to its own predicate). Where the next
        step starts, or -1 when none is needed."""
        over = overruns()
        clock = self.clock
        end = clock() + MATCH_SLICE
        mark()      # an overrun in this step costs one limit, not two
        for i in range(start, len(preds)):
            pred = preds[i]
            seen = over[0]
            try:
                result = pred.evaluate(attrs)
            except Exception:       # evaluation never raises, by contract; be safe
                log.exception("evaluating %r failed", pred.ast)
                continue
            if result is True:
                matched.append(pred)
            if over[0] != seen:     # its own account; and this step is over
                self._overran(pred)
                self._restamp()
                return i + 1
            if clock() > end:
                # the clock after every predicate (~0.1 us): sixteen patterns
                # each just under their limit were a step of 16 limits
                return i + 1
        return -1

    def _evaluate(self, preds: list[Predicate], attrs: Mapping[str, Any]) -> list[Predicate]:
        """The predicates of ``preds`` true for ``attrs``; a pattern overrun is
        charged to its own predicate."""
        matched = []
        over = overruns()
        seen = over[0]
        mark()
        for pred in preds:
            try:
                result = pred.evaluate(attrs)
            except Exception:       # evaluation never raises, by contract; be safe
                log.exception("evaluating %r failed", pred.ast)
                continue
            if over[0] != seen:     # this predicate's pattern overran: its account
                seen = over[0]
                self._overran(pred)
            if result is True:
                matched.append(pred)
        if self._overran_now:
            self._restamp()
        return matched

    def _expand(self, matched: list[Predicate], nkeys: NotificationKeys | None,
                deliver_insecure: bool) -> tuple[_Matched, _Matched]:
        insecure: _Matched = {}
        secure: _Matched = {}
        # some owner has connection keys and the notification has keys: the
        # groups are checked per owner (else the one-extend-per-owner path)
        keyed = nkeys is not None and self._keyed_owners > 0
        for pred in matched:
            groups = pred._groups
            if groups is None:
                pred._build()
                groups = pred._groups
            if keyed:
                self._match_keyed_groups(groups, nkeys, deliver_insecure,  # type: ignore[arg-type]  # built above
                                         insecure, secure)
            elif not insecure and deliver_insecure:
                # an owner has one group in a predicate: the first one's groups
                # go in as they are (for a fan-out, one C call)
                insecure.update(groups)  # type: ignore[arg-type]  # as above
            elif deliver_insecure:
                for owner, ids in groups:  # type: ignore[union-attr]  # as above
                    prev = insecure.get(owner)
                    if prev is None:
                        insecure[owner] = ids
                    elif type(prev) is tuple:
                        insecure[owner] = [*prev, *ids]
                    else:
                        prev.extend(ids)
            for sub in pred._special:  # type: ignore[union-attr]  # built with the groups
                if nkeys is not None and (
                        prepared_match_pair(nkeys, sub.prepared, sub.conn.prepared)
                        if keyed else prepared_match(nkeys, sub.prepared)):
                    target = secure
                elif deliver_insecure and sub.accept_insecure:
                    target = insecure
                else:
                    continue
                prev = target.get(sub.owner)
                if prev is None:
                    target[sub.owner] = [sub.id]
                elif type(prev) is tuple:
                    target[sub.owner] = [*prev, sub.id]
                else:
                    prev.append(sub.id)
        return insecure, secure

    def _match_keyed_groups(self, groups: list[Any], nkeys: NotificationKeys,
                            deliver_insecure: bool, insecure: _Matched,
                            secure: _Matched) -> None:
        """One predicate's groups when some owner has connection keys: an
        owner's group goes to ``secure`` when its keys match (the same
        answer for each subscription of the group), else to ``insecure``."""
        conns = self._conn
        for owner, ids in groups:
            conn = conns.get(owner)
            if conn is not None and conn.prepared is not None \
                    and prepared_match(nkeys, conn.prepared):
                prev = secure.get(owner)
                if prev is None:
                    secure[owner] = list(ids)
                else:
                    prev.extend(ids)
                continue
            if not deliver_insecure:
                continue
            prev = insecure.get(owner)
            if prev is None:
                insecure[owner] = ids
            elif type(prev) is tuple:
                insecure[owner] = [*prev, *ids]
            else:
                prev.extend(ids)

    def match_owners(self, attrs: Mapping[str, Any], nkeys: NotificationKeys | None = None,
                     deliver_insecure: bool = True
                     ) -> dict[Hashable, tuple[list[int], list[int]]]:
        """``{owner: (secure_ids, insecure_ids)}`` (convenient, slower)."""
        insecure, secure = self.match(attrs, nkeys, deliver_insecure)
        out: dict[Hashable, tuple[list[int], list[int]]] = {
            owner: ([], list(ids)) for owner, ids in insecure.items()}
        for owner, ids in secure.items():
            out.setdefault(owner, ([], []))[0].extend(ids)
        return out
