"""An index of entries by their necessary conditions (sans-IO).

``TermIndex`` files opaque *entries* (the router's shared predicates, a
federated peer's pull-filter terms) by their plans (``conditions.py``), and
``candidates(notification)`` returns the entries whose plan some
alternative of which the notification meets -- every entry that can match,
and as few others as it can. The caller evaluates those.

**Filing.** Each alternative of a plan is filed under one of its conditions,
the *access*: the most selective by kind (``EQ`` first, then a prefix or
suffix of three characters or more, a bounded range, a half-bounded one,
``PRESENT`` last; among ``PRESENT`` conditions the attribute least used so
far), as the best content-based matchers choose an access predicate. Per
dimension (an attribute, or a string transform of one):

* ``EQ``: a dict ``index_value -> slot``, probed with the value's key;
* ``RANGE`` bounded on one side: a sorted list of bounds (``bisect``): the
  slots of every bound at or below (above) the value;
* ``RANGE`` bounded on both sides: *bins*. A range of width ``w`` lies in
  at most two aligned bins of size ``2**L`` (``2 * w < 2**L``, so most lie
  in one): bin ``floor(x / 2**L)`` of *level* ``L``; a value is probed in
  one bin per level in use (windows of one width, ``Seq >= A && Seq < A + 10``, are
  all of one level wherever they are). ``L`` is at least the bounds'
  binary exponent less 60, so that a bin number fits 62 bits (a value
  beyond that is in no bin of the level). A bin may hold ranges that do
  not contain the value: the range is checked, a few comparisons, before
  anything is evaluated;
* ``PREFIX`` / ``SUFFIX``: a dict ``string -> slot`` and the lengths in use:
  the value's prefix (suffix) of each length is looked up;
* ``PRESENT``: one slot, every entry of which is evaluated when the
  attribute is present (the old "name index": ``regex``, ``contains``,
  arithmetic, comparisons of two attributes stay *scanned* here);
* entries with no condition at all (``!require(x)``) are in the *always*
  slot, evaluated for every notification.

A *slot* holds one entry (the usual case: it costs no container), or an
``(entry, checks)`` pair, or a bucket of several. *Checks* are the other
conditions of the alternative (and an inexact access, the bins'): a
candidate is handed out only if they hold, so ``Symbol == "X" && Price >
101.5`` reaches evaluation only for quotes of X at or above 101.5.
``PRESENT`` conditions are not kept as checks (evaluating costs about as
much).

**Nesting.** A bucket that grows beyond ``SPLIT`` entries with checks files
them in an index of its own, by their checks, recursively (a BE-Tree-like
partition: "thousands of subscriptions on one symbol" become one bucket of
the symbol that is itself indexed by price). The level below never chooses
the dimension its bucket came from (a bin of ranges would split into one
bin again).

**Removal.** An entry's ``place`` attribute (the index owns it) is the path
of its filing -- ``(kind, dimension, key)`` per level -- or a tuple of
paths: removal follows the path down and removes what it leaves empty on
its way back. No back-references: the index holds no reference cycle, so
an engine dropped whole is freed by reference counts.

**Repeats.** An entry filed under several alternatives, or under several
prefixes, may come out twice for one notification; ``repeats`` counts such
entries so that a caller can skip deduplication while there are none.
"""

from __future__ import annotations

import logging
import math
import unicodedata
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any, Final

from elvin.subscription.analysis import NAN_KEY, UNINDEXABLE
from elvin.subscription.ast import Node
from elvin.subscription.checker import fold
from elvin.subscription.conditions import ANY, EQ, PREFIX, PRESENT, RANGE, SUFFIX, plan_of
from elvin.values import INT64_MAX, INT64_MIN, Int64
from elvin.values import REAL64_EXACT as _EXACT

__all__ = ["LOOKUP_NAMES", "SPLIT", "TermIndex", "access_of", "filing", "plan_for", "transform"]

log = logging.getLogger(__name__)

#: entries with checks a bucket holds before it indexes them itself
SPLIT = 16

# how an entry is filed at one level (the first element of a path step)
_EQ, _LOWER, _UPPER, _BINS, _PREFIX, _SUFFIX, _PRESENT, _ALWAYS = range(8)
_STEP_NAMES = ("value", "lower bound", "upper bound", "range", "prefix", "suffix", "name",
               "always")
_INF = math.inf
_floor = math.floor
#: bin levels: 2.0 ** -level is a normal or subnormal double, and any range
#: of doubles fits two bins of the highest
_MIN_LEVEL, _MAX_LEVEL = -1000, 1025
_BIN_LIMIT = 2.0 ** 62
#: a bin's key packs its number and level in one int: number * _LEVELS + level offset
_LEVELS = 4096
_NO_KEY = (None,)
_NFD: Final = "NFD"
_NFKD: Final = "NFKD"
_normalize = unicodedata.normalize


def plan_for(tree: Node, plan: tuple[Any, ...] | None = None, folded: bool = False,
             evaluate: Callable[[Mapping[str, Any]], Any] | None = None,
             names: frozenset[str] | None = None) -> tuple[Any, ...]:
    """``plan``, or the plan of a checked ``tree`` (``folded`` already;
    ``evaluate``, its compiled form: a long expression's bounded analysis,
    see ``conditions.plan_of``); an analysis that fails leaves the tree to
    be evaluated for every notification (``conditions.ANY``): it must never
    stop a subscription."""
    if plan is not None:
        return plan
    try:
        return plan_of(tree if folded else fold(tree), evaluate, names=names)
    except Exception:  # an analysis bug files the entry everywhere (ANY: sound); logged
        log.exception("the index analysis failed for %r", tree)
        return ANY


def transform(transforms: tuple[str, ...], value: str) -> str:
    """A dimension's string transforms applied to a value (innermost first)."""
    for t in transforms:
        if t == "fold-case":
            value = value.casefold()
        elif t == "decompose":
            value = _normalize(_NFD, value)
        else:
            value = _normalize(_NFKD, value)
    return value


def _bins_of(lo: float, hi: float) -> tuple[int, int, int]:
    """``(level, first bin, last bin)`` of a finite range: ``last - first``
    is 0 or 1. Bin numbers are ``floor(x * 2.0 ** -level)``, monotonic in
    ``x``, so a value in the range is in one of its bins."""
    width = hi - lo
    level = _MAX_LEVEL if width == _INF else math.frexp(width)[1] + 1
    level = min(_MAX_LEVEL, max(level, math.frexp(max(-lo, hi, lo, -hi))[1] - 60, _MIN_LEVEL))
    while True:
        scale = math.ldexp(1.0, -level)
        first, last = _floor(lo * scale), _floor(hi * scale)
        if last - first <= 1 or level >= _MAX_LEVEL:
            return level, first, last
        level += 1                  # (rounding): one level up, the range is in two bins


def _position(value: Any) -> float | None:
    """A notification value's place among numbers, or None if it is none."""
    t = type(value)
    if t is float:
        return value if value == value else _INF
    if (t is int or t is Int64) and INT64_MIN <= value <= INT64_MAX:
        return float(value)
    return None


def _key(value: Any) -> Any:
    """``analysis.index_value``, inline for the usual types."""
    t = type(value)
    if t is str:
        return value
    if t is int or t is Int64:
        if -_EXACT <= value <= _EXACT:
            return int(value)
        if INT64_MIN <= value <= INT64_MAX:
            return float(value)
        return UNINDEXABLE
    if t is float:
        return value if value == value else NAN_KEY
    return UNINDEXABLE


def _rank(cond: tuple[Any, ...]) -> int:
    kind = cond[0]
    if kind == EQ:
        return 0
    if kind == PREFIX or kind == SUFFIX:
        shortest = min(map(len, cond[2]))
        return 1 if shortest >= 3 else (3 if shortest else 6)
    if kind == RANGE:
        lo, hi = cond[2], cond[3]
        if lo == -_INF and hi == _INF:
            return 6
        return 2 if lo != -_INF and hi != _INF else 4
    return 7


def _holds(checks: tuple[Any, ...], attrs: Mapping[str, Any]) -> bool:
    """Whether the notification meets every condition of ``checks`` (a
    tuple of conditions, or one condition: ``(kind, dim, ...)``)."""
    for cond in ((checks,) if type(checks[0]) is int else checks):
        dim = cond[1]
        if type(dim) is str:
            if dim not in attrs:
                return False
            value = attrs[dim]
        else:
            value = attrs.get(dim[0])
            if type(value) is not str:
                return False
            value = transform(dim[1], value)
        kind = cond[0]
        if kind == RANGE:
            position = _position(value)
            if position is None or not cond[2] <= position <= cond[3]:
                return False
        elif kind == EQ:
            if _key(value) not in cond[2]:
                return False
        elif kind == PREFIX:
            if type(value) is not str or not value.startswith(cond[2]):
                return False
        elif kind == SUFFIX:
            if type(value) is not str or not value.endswith(cond[2]):
                return False
    return True


class _Bucket(dict[Any, Any]):
    """Several entries in one slot, each mapped to its checks; those with
    checks move to ``level`` (an index of their own) once there are more
    than ``SPLIT`` of them. (A dict itself: a bucket of windows that share
    a bin costs no object besides its dict.) Change it only through
    ``put``, ``take`` and ``nest``, which keep ``plain`` true: whether
    every entry is handed out as it is (no checks, no level below), the
    usual equality bucket, which a probe then copies without a loop in
    Python."""

    __slots__ = ("level", "checked", "plain")

    def __init__(self, items: dict[Any, Any]) -> None:
        super().__init__(items)
        self.level: _Level | None = None
        #: entries with checks
        self.checked = sum(1 for checks in items.values() if checks)
        self.plain = not self.checked

    def put(self, entry: Any, checks: tuple[Any, ...]) -> None:
        old = self.get(entry)
        if old:
            self.checked -= 1
        if checks:
            self.checked += 1
        self[entry] = checks
        self.plain = self.level is None and not self.checked

    def take(self, entry: Any) -> None:
        if self.pop(entry, None):
            self.checked -= 1
        self.plain = self.level is None and not self.checked

    def nest(self, level: _Level | None) -> None:
        """Entries with checks are filed in ``level`` now (or none, when it emptied)."""
        self.level = level
        self.plain = level is None and not self.checked


def _emit(slot: Any, attrs: Mapping[str, Any], out: list[Any]) -> None:
    t = type(slot)
    if t is _Bucket:
        if slot.plain:
            out.extend(slot)        # (equality buckets: no checks, no loop in Python)
            return
        if slot.checked:
            for entry, checks in slot.items():
                if not checks or _holds(checks, attrs):
                    out.append(entry)
        else:
            out.extend(slot)
        if slot.level is not None:
            slot.level.probe(attrs, out)
    elif t is tuple:
        if _holds(slot[1], attrs):
            out.append(slot[0])
    else:
        out.append(slot)


def _emit_binned(slot: Any, position: float, attrs: Mapping[str, Any], out: list[Any]) -> None:
    """``_emit`` for a bin's slot, whose checks start with the range it is
    binned by (``TermIndex._file``): that range is compared with the
    value's ``position`` here, and ``_holds`` runs only for the rest. (A
    bin holds a few ranges that do not contain the value; this is most of
    the work for windows.)"""
    t = type(slot)
    if t is _Bucket:
        for entry, checks in slot.items():
            if not checks:
                out.append(entry)       # (filed twice in the slot: evaluated)
            elif type(checks[0]) is int:
                if checks[2] <= position <= checks[3]:
                    out.append(entry)
            else:
                bounds = checks[0]
                if bounds[2] <= position <= bounds[3] and _holds(checks[1:], attrs):
                    out.append(entry)
        if slot.level is not None:
            slot.level.probe(attrs, out)
    elif t is tuple:
        checks = slot[1]
        if type(checks[0]) is int:
            if checks[2] <= position <= checks[3]:
                out.append(slot[0])
        else:
            bounds = checks[0]
            if bounds[2] <= position <= bounds[3] and _holds(checks[1:], attrs):
                out.append(slot[0])
    else:
        out.append(slot)


class _Affixes:
    """Prefixes (or suffixes) of one dimension: a dict and the lengths in use."""

    __slots__ = ("slots", "lengths", "_counts")

    def __init__(self) -> None:
        self.slots: dict[str, Any] = {}
        self.lengths: list[int] = []
        self._counts: dict[int, int] = {}

    def added(self, key: str) -> None:
        n = len(key)
        count = self._counts.get(n, 0)
        if not count:
            insort(self.lengths, n)
        self._counts[n] = count + 1

    def removed(self, key: str) -> None:
        n = len(key)
        count = self._counts[n] - 1
        if count:
            self._counts[n] = count
        else:
            del self._counts[n]
            self.lengths.remove(n)


class _Bounds:
    """Ranges bounded on one side: a dict ``bound -> slot`` and the sorted bounds."""

    __slots__ = ("slots", "sorted")

    def __init__(self) -> None:
        self.slots: dict[float, Any] = {}
        self.sorted: list[float] = []

    def added(self, key: float) -> None:
        insort(self.sorted, key)

    def removed(self, key: float) -> None:
        del self.sorted[bisect_left(self.sorted, key)]


#: look-up kind -> (the ``_Dim`` attribute holding it, its type), for the
#: kinds kept as sorted keys: bounds of ranges, prefixes and suffixes
_HOLDERS: dict[int, tuple[str, type]] = {
    _LOWER: ("lower", _Bounds), _UPPER: ("upper", _Bounds),
    _PREFIX: ("prefix", _Affixes), _SUFFIX: ("suffix", _Affixes),
}


class _Dim:
    """The look-ups of one dimension (created as they are needed)."""

    __slots__ = ("eq", "lower", "upper", "bins", "levels", "prefix", "suffix", "present",
                 "more", "ranged")

    def __init__(self) -> None:
        self.eq: dict[Any, Any] | None = None
        self.lower: _Bounds | None = None      # x >= bound
        self.upper: _Bounds | None = None      # x <= bound
        self.bins: dict[Any, Any] | None = None          # (level, bin) -> slot
        #: level -> [bins in use, 2.0 ** -level, key offset], in level order
        self.levels: dict[int, list[Any]] | None = None
        self.prefix: _Affixes | None = None
        self.suffix: _Affixes | None = None
        self.present: Any = None
        #: anything but ``eq`` (the root's loop looks up ``eq`` itself)
        self.more = False
        #: bounds or bins (a number's look-ups)
        self.ranged = False

    def changed(self) -> None:
        self.ranged = self.lower is not None or self.upper is not None or bool(self.bins)
        self.more = (self.ranged or self.prefix is not None or self.suffix is not None
                     or self.present is not None)

    def empty(self) -> bool:
        return not self.eq and not self.more

    def probe(self, value: Any, attrs: Mapping[str, Any], out: list[Any]) -> None:
        eq = self.eq
        if eq:
            slot = eq.get(_key(value))
            if slot is not None:
                _emit(slot, attrs, out)
        if self.more:
            self.probe_more(value, attrs, out)

    def probe_more(self, value: Any, attrs: Mapping[str, Any], out: list[Any]) -> None:
        """``probe`` but for the ``eq`` look-up."""
        t = type(value)
        if t is str:
            affixes = self.prefix
            if affixes is not None:
                slots = affixes.slots
                n = len(value)
                for length in affixes.lengths:
                    if length > n:
                        break
                    slot = slots.get(value[:length])
                    if slot is not None:
                        if type(slot) is _Bucket or type(slot) is tuple:
                            _emit(slot, attrs, out)
                        else:
                            out.append(slot)
            affixes = self.suffix
            if affixes is not None:
                slots = affixes.slots
                n = len(value)
                for length in affixes.lengths:
                    if length > n:
                        break
                    slot = slots.get(value[n - length:])
                    if slot is not None:
                        if type(slot) is _Bucket or type(slot) is tuple:
                            _emit(slot, attrs, out)
                        else:
                            out.append(slot)
        elif self.ranged:
            # ``_position``, inline: this runs for every number a notification carries
            if t is float:
                position = value if value == value else _INF
            elif (t is int or t is Int64) and INT64_MIN <= value <= INT64_MAX:
                position = float(value)
            else:
                position = None
            if position is not None:
                bounds = self.lower
                if bounds is not None:
                    bound_slots = bounds.slots
                    for bound in bounds.sorted[:bisect_right(bounds.sorted, position)]:
                        _emit(bound_slots[bound], attrs, out)
                bounds = self.upper
                if bounds is not None:
                    bound_slots = bounds.slots
                    for bound in bounds.sorted[bisect_left(bounds.sorted, position):]:
                        _emit(bound_slots[bound], attrs, out)
                bins = self.bins
                if bins:
                    for _count, scale, offset in self.levels.values():  # type: ignore[union-attr]  # set with the bins, which are there
                        x = position * scale
                        if -_BIN_LIMIT < x < _BIN_LIMIT:
                            slot = bins.get(_floor(x) * _LEVELS + offset)
                            if slot is not None:
                                _emit_binned(slot, position, attrs, out)
        if self.present is not None:
            _emit(self.present, attrs, out)


class _Level:
    """One level of the index: dimensions, and the slot of entries with no
    condition left. ``exclude``: the dimensions of the buckets the level is
    in (never chosen again: a bin of ranges would split into one bin)."""

    __slots__ = ("dims", "variants", "always", "exclude")

    def __init__(self, exclude: frozenset[Any] = frozenset()) -> None:
        self.dims: dict[Any, _Dim] = {}
        #: attribute -> [(transforms, _Dim)] of its transformed dimensions
        self.variants: dict[str, list[tuple[tuple[Any, ...], _Dim]]] = {}
        self.always: Any = None
        self.exclude = exclude

    def empty(self) -> bool:
        return not self.dims and self.always is None

    def probe(self, attrs: Mapping[str, Any], out: list[Any]) -> None:
        dims = self.dims
        if len(dims) <= len(attrs):
            for dim, d in dims.items():
                if type(dim) is str:
                    if dim in attrs:
                        d.probe(attrs[dim], attrs, out)
                else:
                    value = attrs.get(dim[0])
                    if type(value) is str:
                        d.probe(transform(dim[1], value), attrs, out)
        else:
            variants = self.variants
            for name, value in attrs.items():
                found = dims.get(name)
                if found is not None:
                    found.probe(value, attrs, out)
                if variants and type(value) is str:
                    for transforms, vd in variants.get(name, ()):
                        vd.probe(transform(transforms, value), attrs, out)
        if self.always is not None:
            _emit(self.always, attrs, out)

    def dim(self, dim: Any) -> _Dim:
        d = self.dims.get(dim)
        if d is None:
            d = self.dims[dim] = _Dim()
            if type(dim) is not str:
                self.variants.setdefault(dim[0], []).append((dim[1], d))
        return d

    def drop_dim(self, dim: Any) -> None:
        d = self.dims.pop(dim)
        if type(dim) is not str:
            variants = self.variants[dim[0]]
            variants.remove((dim[1], d))
            if not variants:
                del self.variants[dim[0]]


def access_of(alternative: tuple[Any, ...], exclude: frozenset[Any] = frozenset(),
              present_load: Any = None) -> tuple[Any, ...] | None:
    """The condition an alternative is filed under (None: none it can use).
    ``present_load(dim)`` breaks ties between ``PRESENT`` conditions."""
    best = None
    best_rank = 99
    for cond in alternative:
        if cond[1] in exclude:
            continue
        rank = _rank(cond)
        if rank < best_rank or (rank == best_rank == 7 and present_load is not None
                                and present_load(cond[1]) < present_load(best[1])):  # type: ignore[index]  # best is set once best_rank is 7
            best, best_rank = cond, rank
    return best


def _steps(cond: tuple[Any, ...]) -> tuple[int, tuple[Any, ...] | list[Any]]:
    """How ``cond`` is filed: the step kind and the keys (one slot each)."""
    kind = cond[0]
    if kind == EQ:
        return _EQ, cond[2]
    if kind == PREFIX:
        return _PREFIX, cond[2]
    if kind == SUFFIX:
        return _SUFFIX, cond[2]
    if kind == RANGE:
        lo, hi = cond[2], cond[3]
        if hi == _INF:
            return _LOWER, [lo]
        if lo == -_INF:
            return _UPPER, [hi]
        level, first, last = _bins_of(lo, hi)
        offset = level - _MIN_LEVEL
        first = first * _LEVELS + offset
        return _BINS, (first,) if first == last * _LEVELS + offset else (first, first + _LEVELS)
    return _PRESENT, _NO_KEY


#: how each look-up is named to a user (``filing``)
LOOKUP_NAMES = {_EQ: "value index", _LOWER: "range index", _UPPER: "range index",
                _BINS: "range index", _PREFIX: "prefix index", _SUFFIX: "suffix index",
                _PRESENT: "name index (scanned)", _ALWAYS: "not indexed"}


def filing(plan: tuple[Any, ...]) -> list[tuple[str, tuple[Any, ...] | None, tuple[tuple[Any, ...], ...]]]:
    """How an entry with ``plan`` is filed at the top level, for people:
    per alternative, ``(look-up name, the access condition or None, the
    conditions checked before evaluating)``. (Among several "present"
    conditions the index takes the attribute least used at the time; here
    the first.) An empty list: never true, filed nowhere."""
    out: list[tuple[str, tuple[Any, ...] | None, tuple[tuple[Any, ...], ...]]] = []
    for alternative in plan:
        access = access_of(alternative) if alternative else None
        if access is None:
            out.append((LOOKUP_NAMES[_ALWAYS], None, ()))
            continue
        kind, _keys = _steps(access)
        checks = tuple(c for c in alternative if c[0] != PRESENT and c is not access)
        out.append((LOOKUP_NAMES[kind], access, checks))
    return out


class TermIndex:
    """Entries (objects with a writable ``place`` attribute, which the index
    owns) by their plans."""

    def __init__(self) -> None:
        self._root = _Level()
        #: entries that may come out of ``candidates`` more than once
        self.repeats = 0
        self._pending: list[Any] = []       # buckets to split once an add is done
        self._counts = [0] * 8         # filings by their top step kind

    # -- queries -------------------------------------------------------------------------
    def candidates(self, attrs: Mapping[str, Any]) -> list[Any]:
        """The entries the notification ``attrs`` may match (each once)."""
        # the root level's probe, with the usual case (a value look-up finding
        # one entry) written out: this runs for every notification
        out: list[Any] = []
        root = self._root
        dims = root.dims
        variants = root.variants
        for name, value in attrs.items():
            d = dims.get(name)
            if d is not None:
                eq = d.eq
                if eq:
                    slot = eq.get(value if type(value) is str else _key(value))
                    if slot is not None:
                        t = type(slot)
                        if t is _Bucket:
                            if slot.plain:
                                out.extend(slot)
                            else:
                                _emit(slot, attrs, out)
                        elif t is tuple:
                            _emit(slot, attrs, out)
                        else:
                            out.append(slot)
                if d.more:
                    d.probe_more(value, attrs, out)
            if variants and type(value) is str:
                for transforms, vd in variants.get(name, ()):
                    vd.probe(transform(transforms, value), attrs, out)
        if root.always is not None:
            _emit(root.always, attrs, out)
        if self.repeats and len(out) > 1:
            return list(dict.fromkeys(out))
        return out

    def stats(self) -> dict[str, int]:
        """Filings by the kind of look-up at the top level."""
        return {name: count for name, count in zip(_STEP_NAMES, self._counts, strict=True)}

    # -- changes -------------------------------------------------------------------------
    def add(self, entry: Any, plan: tuple[Any, ...]) -> None:
        """File ``entry`` by ``plan`` (``conditions``); an empty plan (never
        true) is filed nowhere."""
        if len(plan) == 1 and self._file_one(plan[0], entry):
            return
        for _ in self.add_steps(entry, plan, len(plan) + 1):
            pass

    def add_steps(self, entry: Any, plan: tuple[Any, ...], step: int) -> Iterator[None]:
        """``add``, yielding after each ``step`` alternatives (a plan of
        10,000 takes ~50 ms: the router files it over several loop turns).
        Between steps ``entry`` is filed by the alternatives done so far
        (``entry.place`` says which: ``remove`` takes them out), so it can
        be given up at any step."""
        if len(plan) == 1 and self._file_one(plan[0], entry):
            return
        paths: list[tuple[Any, ...]] = []
        settled = _Settled(entry.place)
        done = 0
        for alternative in plan:
            self._file(self._root, alternative, entry, (), paths, True)
            done += 1
            if done % step == 0 and done < len(plan):
                self._settle_filing(entry, paths, settled)
                yield
        self._settle_filing(entry, paths, settled)

    def _settle_filing(self, entry: Any, paths: list[tuple[Any, ...]],
                       settled: _Settled) -> None:
        """Make ``entry.place`` and the counts say ``paths`` (the filings so
        far), and split the buckets that grew too big. Counts only what was
        filed since the last call (``settled``): recounting every filing at
        each step made the last steps of a 10,000-name ``||`` 3-7 ms each
        whatever the step's size (issue 42: the loop's longest hold on a wide
        SubAddRqst/SubModRqst)."""
        counts = self._counts
        if settled.prior is not None:   # filed before: that goes (as ``remove`` would count)
            old = _paths(settled.prior)
            settled.prior = None
            self.repeats -= _may_repeat(old)
            for path in old:
                counts[path[0]] -= 1
        for path in paths[settled.counted:] if settled.counted else paths:
            counts[path[0]] += 1
        entry.place = paths[0] if len(paths) == 1 else tuple(paths)
        # whether two filings may meet one notification: once so, always so
        # (more paths only add heads); until then the new ones against the first
        repeat = settled.repeat or _may_repeat(
            paths if settled.counted == 0 else [paths[0], *paths[settled.counted:]])
        self.repeats += repeat - settled.repeat
        settled.repeat = repeat
        if self._pending:
            while self._pending:
                pending, self._pending = self._pending, []
                for bucket, path, exclude in pending:
                    self._split(bucket, path, exclude)
            paths[:] = _paths(entry.place)      # a split may have moved some deeper
            settled.repeat = _may_repeat(paths)  # (``_split`` counted the change)
        settled.counted = len(paths)

    def remove(self, entry: Any) -> None:
        for _ in self.remove_steps(entry, 1 << 62):
            pass

    def remove_steps(self, entry: Any, step: int) -> Generator[None, None, None]:
        """``remove``, yielding after each ``step`` filings; ``entry`` must
        not be filed again meanwhile."""
        place = entry.place
        entry.place = ()
        if not place:
            return
        paths = _paths(place)
        del place       # the list holds the paths alone: each goes as it is unfiled
        self.repeats -= _may_repeat(paths)
        total = len(paths)
        paths.reverse()     # (popped in filing order)
        for n in range(1, total + 1):
            path = paths.pop()
            self._counts[path[0]] -= 1
            self._unfile(self._root, path, 0, entry)
            if n % step == 0 and n < total:
                yield

    def clear(self) -> None:
        """Forget every entry at once (their ``place`` is left as it was)."""
        self._root = _Level()
        self.repeats = 0
        self._counts = [0] * 8

    # -- filing --------------------------------------------------------------------------
    def _file_one(self, alternative: tuple[Any, ...], entry: Any) -> bool:
        """File a plan of one alternative (nearly every plan: ``Group ==
        "g1" && require(Message)``, ``Seq >= a && Seq < b``,
        ``begins-with(Text, "p")``) at once; False (nothing done) for an
        entry filed before, whose old filings ``add_steps`` counts out. One
        filing and no bucket to split (the usual outcome) is settled here
        as ``_settle_filing`` would (one path cannot repeat): without its
        bookkeeping of steps, a fifth of filing a range or a prefix."""
        if alternative and self._file_alone(alternative, entry):
            return True
        if entry.place:
            return False
        paths: list[tuple[Any, ...]] = []
        self._file(self._root, alternative, entry, (), paths, True)
        if len(paths) == 1 and not self._pending:
            path = paths[0]
            self._counts[path[0]] += 1
            entry.place = path
        else:
            self._settle_filing(entry, paths, _Settled(()))
        return True

    def _file_alone(self, alternative: tuple[Any, ...], entry: Any) -> bool:
        """File the commonest plan the short way: one value look-up that the
        rest of the alternative only needs names for (``Group == "g1" &&
        require(Message)``), into an empty slot of the top level. False (and
        nothing done) for anything else: ``_file`` then. This is what
        ``_file`` does for it, without choosing a look-up or gathering
        checks (a tenth of an equality registration's cost)."""
        access = alternative[0]
        if access[0] != EQ or len(access[2]) != 1:
            return False
        for cond in alternative:
            if cond is not access and cond[0] != PRESENT:
                return False
        dim = access[1]
        key = access[2][0]
        root = self._root
        d = root.dims.get(dim) or root.dim(dim)
        eq = d.eq
        if eq is None:
            eq = d.eq = {}
        elif key in eq:
            return False                # a bucket's rules: ``_put``
        eq[key] = entry
        entry.place = (_EQ, dim, key)
        self._counts[_EQ] += 1
        return True

    def _file(self, level: _Level, alternative: tuple[Any, ...], entry: Any, path: tuple[Any, ...],
              paths: list[Any], top: bool) -> None:
        if not alternative:
            access = None
        else:
            access = alternative[0]
            if len(alternative) == 1:
                # a lone condition is its own access, unless excluded here
                # (what ``access_of`` says of it, without ranking it)
                if access[1] in level.exclude:
                    access = None
            # a value look-up first (the usual case) cannot be bettered
            elif access[0] != EQ or access[1] in level.exclude:
                access = access_of(alternative, level.exclude,
                                   self._present_load if top else None)
        if access is None:
            step = (_ALWAYS, None, None)
            checks: tuple[Any, ...] = tuple(c for c in alternative if c[0] != PRESENT)
            self._put_always(level, entry, checks[0] if len(checks) == 1 else checks,
                             path + step, paths)
            return
        kind, keys = _steps(access)
        # a bin's checks start with its own range (its probe compares that
        # inline: ``_emit_binned``)
        checks = (access,) if kind == _BINS else ()
        for cond in alternative:
            if cond[0] != PRESENT and cond is not access:
                checks = (*checks, cond)
        if len(checks) == 1:
            checks = checks[0]          # one condition: kept as itself
        dim = access[1]
        d = level.dims.get(dim) or level.dim(dim)
        below = (level, dim)
        for key in keys:
            step = (kind, dim, key)
            if kind == _EQ:
                if d.eq is None:
                    d.eq = {}
                container = d.eq
            elif kind == _PRESENT:
                d.present = self._put(d.present, entry, checks, path + step, paths, below)
                d.more = True
                continue
            elif kind == _BINS:
                if d.bins is None:
                    d.bins, d.levels = {}, {}
                container = d.bins
                if key not in container:
                    levels = d.levels
                    assert levels is not None       # (made with the bins, above)
                    bin_level = key % _LEVELS + _MIN_LEVEL
                    if bin_level not in levels:     # keep the levels in order
                        levels[bin_level] = [0, math.ldexp(1.0, -bin_level),
                                             bin_level - _MIN_LEVEL]
                        d.levels = dict(sorted(levels.items()))
                    d.levels[bin_level][0] += 1      # type: ignore[index]  # set with the bins, above
            else:
                # bounds (x >= b, x <= b) or affixes (prefixes, suffixes): the
                # dimension's holder for this kind, made on first use
                attribute, holder_type = _HOLDERS[kind]
                holder = getattr(d, attribute)
                if holder is None:
                    holder = holder_type()
                    setattr(d, attribute, holder)
                container = holder.slots
                if key not in container:
                    holder.added(key)
            container[key] = self._put(container.get(key), entry, checks, path + step, paths,
                                       below)
        if kind != _EQ:
            d.changed()

    def _put_always(self, level: _Level, entry: Any, checks: tuple[Any, ...], path: tuple[Any, ...],
                    paths: list[Any]) -> None:
        level.always = self._put(level.always, entry, checks, path, paths, (level, None))

    def _put(self, slot: Any, entry: Any, checks: tuple[Any, ...], path: tuple[Any, ...], paths: list[Any],
             below: tuple[Any, ...]) -> Any:
        """The slot with ``entry`` added (filed at ``path``; ``below``: the
        level of the slot and the dimension it looks up, which a level below
        it may not choose)."""
        if slot is None:
            paths.append(path)
            return (entry, checks) if checks else entry
        if type(slot) is _Bucket:
            if slot.level is not None and checks and _usable(checks, slot.level.exclude):
                self._file(slot.level, _conditions(checks), entry, path, paths, False)
                return slot
            # filed twice in one slot (two alternatives alike): no checks
            # then, the entry is evaluated whichever alternative holds
            slot.put(entry, () if entry in slot else checks)
            paths.append(path)
            size = len(slot)
            # (tried once it passes SPLIT, then at each power of two: a bucket
            # whose entries cannot move down is not scanned on every add)
            if slot.level is None and size > SPLIT and (size == SPLIT + 1
                                                        or not size & (size - 1)):
                level, dim = below
                self._pending.append((slot, path, level.exclude | {dim}))
            return slot
        old, old_checks = (slot[0], slot[1]) if type(slot) is tuple else (slot, ())
        paths.append(path)
        if old is entry:
            return entry
        return _Bucket({old: old_checks, entry: checks})

    def _split(self, bucket: _Bucket, path: tuple[Any, ...], exclude: frozenset[Any]) -> None:
        """Move the entries of an overfull bucket (at ``path``) that have
        checks on other dimensions than ``exclude`` into an index of their
        own, if there are enough of them."""
        if bucket.level is not None or len(bucket) <= SPLIT:
            return
        movable = [(e, c) for e, c in bucket.items() if c and _usable(c, exclude)]
        if len(movable) <= SPLIT // 2:
            return
        level = _Level(exclude)
        bucket.nest(level)
        for entry, checks in movable:
            bucket.take(entry)
            new_paths: list[tuple[Any, ...]] = []
            self._file(level, _conditions(checks), entry, path, new_paths, False)
            old_paths = _paths(entry.place)
            repeated = _may_repeat(old_paths)
            _replace_path(entry, path, new_paths)
            self._counts[path[0]] += len(new_paths) - 1     # (one filing became these)
            self.repeats += _may_repeat(_paths(entry.place)) - repeated

    def _present_load(self, dim: Any) -> int:
        d = self._root.dims.get(dim)
        if d is None or d.present is None:
            return 0
        slot = d.present
        return len(slot) if type(slot) is _Bucket else 1

    # -- removal ---------------------------------------------------------------------------
    def _unfile(self, level: _Level, path: tuple[Any, ...], i: int, entry: Any) -> None:
        kind, dim, key = path[i], path[i + 1], path[i + 2]
        deeper = len(path) > i + 3
        if kind == _ALWAYS:
            level.always = self._take(level.always, entry, path, i + 3, deeper)
            return
        d = level.dims.get(dim)
        if d is None:
            return
        if kind == _PRESENT:
            d.present = self._take(d.present, entry, path, i + 3, deeper)
        elif kind == _EQ:
            self._take_key(d.eq, key, entry, path, i + 3, deeper)
        elif kind == _BINS:
            if self._take_key(d.bins, key, entry, path, i + 3, deeper):
                levels = d.levels
                bin_level = key % _LEVELS + _MIN_LEVEL
                levels[bin_level][0] -= 1     # type: ignore[index]  # set with the bins, which this entry is in
                if not levels[bin_level][0]:  # type: ignore[index]  # as above
                    del levels[bin_level]  # type: ignore[union-attr]  # as above
                if not d.bins:
                    d.bins = d.levels = None
        else:
            attribute = _HOLDERS[kind][0]
            holder = getattr(d, attribute)
            if holder is not None and self._take_key(holder.slots, key, entry, path, i + 3,
                                                     deeper):
                holder.removed(key)
                if not holder.slots:
                    setattr(d, attribute, None)
        d.changed()
        if d.empty():
            level.drop_dim(dim)

    def _take_key(self, container: dict[Any, Any] | None, key: Any, entry: Any, path: tuple[Any, ...], i: int,
                  deeper: bool) -> bool:
        """Remove ``entry`` from ``container[key]``; True if the key went."""
        if container is None:
            return False
        slot = container.get(key)
        if slot is None:
            return False
        slot = self._take(slot, entry, path, i, deeper)
        if slot is None:
            del container[key]
            return True
        container[key] = slot
        return False

    def _take(self, slot: Any, entry: Any, path: tuple[Any, ...], i: int, deeper: bool) -> Any:
        """The slot without ``entry`` (None when empty)."""
        if slot is None:
            return None
        if type(slot) is _Bucket:
            if deeper and slot.level is not None:
                self._unfile(slot.level, path, i, entry)
                if slot.level.empty():
                    slot.nest(None)
            else:
                slot.take(entry)
            if slot.level is None:
                if not slot:
                    return None
                if len(slot) == 1:
                    ((only, checks),) = slot.items()
                    return (only, checks) if checks else only
            return slot
        if slot is entry or (type(slot) is tuple and slot[0] is entry):
            return None
        return slot


def _replace_path(entry: Any, old: tuple[Any, ...], new: list[tuple[Any, ...]]) -> None:
    """``entry``'s path ``old`` became ``new`` (one path: its bucket split)."""
    place = entry.place
    if type(place[0]) is int:
        entry.place = new[0] if len(new) == 1 else tuple(new)
        return
    paths = list(place)
    at = paths.index(old)
    paths[at:at + 1] = new
    entry.place = tuple(paths)


class _Settled:
    """What ``TermIndex.add_steps`` has counted of an entry's filings so far."""

    __slots__ = ("counted", "prior", "repeat")

    def __init__(self, prior: tuple[Any, ...]) -> None:
        self.prior: tuple[Any, ...] | None = prior or None  # its place before (uncounted)
        self.counted = 0        # paths counted in ``_counts``
        self.repeat = False     # what ``repeats`` holds for it


def _paths(place: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    if not place:
        return []
    return [place] if type(place[0]) is int else list(place)


def _conditions(checks: tuple[Any, ...]) -> tuple[Any, ...]:
    """Checks as a tuple of conditions (one is kept as the condition itself)."""
    return (checks,) if type(checks[0]) is int else checks


def _usable(checks: tuple[Any, ...], exclude: frozenset[Any]) -> bool:
    """Whether a level that may not choose ``exclude`` can file by ``checks``."""
    if type(checks[0]) is int:
        return checks[1] not in exclude
    for cond in checks:
        if cond[1] not in exclude:
            return True
    return False


def _may_repeat(paths: list[tuple[Any, ...]]) -> bool:
    """Whether one notification can reach two of ``paths``: not when they
    are one level deep and start with the same look-up on one dimension
    where a value has one key (an ``EQ`` key, a bin of one level). (Deeper
    paths are assumed to repeat: a few entries of split buckets.)"""
    if len(paths) < 2:
        return False
    first = None
    for path in paths:
        kind = path[0]
        if len(path) != 3:
            return True
        if kind != _EQ and kind != _BINS:
            return True
        head = (kind, path[1], path[2] % _LEVELS if kind == _BINS else None)
        if first is None:
            first = head
        elif head != first:
            return True
    return False
