"""From a subscription's AST to the paths the daemon must watch for it.

This is the filewatcher's use of quenching (the Elvin 3 paper's file
monitor): the router tells us each subscription that mentions our attribute
names, and we watch only what those subscriptions can match.

An :class:`Interest` is one thing to watch: a single ``file`` (watched by a
non-recursive watch on its directory, filtered to the file) or a ``tree``
(a recursive watch on a directory, optionally filtered to paths with a given
prefix). :func:`analyse` maps one subscription to a set of interests:

* ``File-Path == "/a/b"`` and ``equals(File-Path, "/a", "/b")``: those files;
* ``begins-with(File-Path, "/srv/www/")``: the tree ``/srv/www``; a prefix that
  does not end in ``/`` (``"/srv/ww"``) watches the tree of its directory
  (``/srv``) filtered to the prefix, because ``/srv/www2/x`` matches too;
* ``wildcard`` and anchored ``regex`` (``^/srv/logs/.*\\.log$``): the tree of
  the directory of their literal prefix (a ``*`` matches ``/`` in Elvin
  wildcards, so one directory level would not be enough); a pattern with no
  wildcard characters is an exact file;
* ``File-Dest-Path`` constraints count too (a move *to* a watched path);
* ``&&`` keeps the cheapest side that can be bounded (the other side only
  narrows the matches further), ``||`` needs every side bounded.

Everything else (``require(File-Path)``, ``ends-with``, ``contains``,
``fold-case``, an unanchored regex, negations, or no path constraint at all)
cannot be bounded: the configured policy decides (``ignore``, or ``roots``:
watch every root). So do more than ``max_paths`` paths in one subscription
(a huge ``equals`` list), so that a subscriber cannot make the daemon do
unbounded work.

Every path is resolved (symlinks, ``..``) and clipped to the configured
roots *before* it is watched: a subscription for ``/etc/passwd``, or for a
symlink under a root that points to ``/etc``, watches nothing, and a tree
that contains a root (``begins-with(File-Path, "/")``) watches just the roots.
Notifications carry paths as the subscription spells them (``shown``), so
that a subscription through a symlink still matches.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from elvin_apps.filewatcher.attributes import PATH_NAMES

from elvin.quenching import Constraint, Match, is_browsing, wanted
from elvin.subscription.ast import Kind, Node

__all__ = ["Interest", "TermPaths", "analyse", "regex_prefix", "wildcard_prefix"]

log = logging.getLogger("elvin_apps.filewatcher.pathset")

SEP = "/"
FILE, TREE = "file", "tree"

Resolver = Callable[[str], str]


@dataclass(frozen=True)
class Interest:
    """One thing to watch. ``path`` is resolved (real); ``shown`` is the same
    path as the subscription spells it; ``prefix`` (trees only, real) narrows
    the tree to paths starting with it."""

    kind: str
    path: str
    shown: str
    prefix: str | None = None

    @property
    def watch_dir(self) -> str:
        """The directory the OS watch is placed on."""
        return os.path.dirname(self.path) if self.kind == FILE else self.path

    @property
    def recursive(self) -> bool:
        return self.kind == TREE

    def covers(self, real: str) -> bool:
        """Is an event at ``real`` (a resolved path) wanted by this interest?"""
        if self.kind == FILE:
            return real == self.path
        if real != self.path and not real.startswith(self.path + SEP):
            return False
        return self.prefix is None or real.startswith(self.prefix)

    def show(self, real: str) -> str:
        """``real`` as the subscriber spells it (through their symlinks)."""
        if self.shown == self.path:
            return real
        return self.shown + real[len(self.path):]

    def describe(self) -> str:
        if self.kind == FILE:
            return self.shown
        text = self.shown.rstrip(SEP) + SEP + "**"
        if self.prefix is not None:
            text += f" (names starting {self.prefix!r})"
        return text


@dataclass(frozen=True)
class TermPaths:
    """What one subscription needs: its interests, whether the policy for
    unbounded subscriptions was applied, and notes for the status report."""

    interests: frozenset[Interest]
    unbounded: bool = False
    notes: tuple[str, ...] = ()


class _TooMany(Exception):
    pass


@dataclass(frozen=True)
class _Bound:
    interests: frozenset[Interest]
    notes: tuple[str, ...] = ()

    @property
    def cost(self) -> int:
        # a tree can hold any number of files: prefer files, then filtered trees
        return sum(1 if i.kind == FILE else (500 if i.prefix else 1000)
                   for i in self.interests)


def analyse(ast: Node, roots: Sequence[str], *, policy: str = "ignore",
            max_paths: int = 10_000, resolve: Resolver = os.path.realpath) -> TermPaths:
    """The interests of one subscription. Never raises: a subscription we
    cannot analyse is treated as unbounded (and the policy applies). A
    browser's (the console's Browse, ``elvin.quenching.is_browsing``) looks
    at what flows and watches nothing: under ``policy = "roots"`` it would
    otherwise have every root watched."""
    if is_browsing(ast):
        return TermPaths(frozenset(), False, ("a browser's subscription: watches nothing",))
    try:
        bound = _Analysis(roots, max_paths, resolve).bound(ast)
        why = "its paths cannot be bounded (no ==, equals, begins-with, anchored regex " \
              "or wildcard on File-Path/File-Dest-Path in every alternative)"
    except _TooMany:
        bound, why = None, f"it names more than {max_paths} paths"
    except RecursionError:
        bound, why = None, "it is nested too deeply to analyse"
    except Exception as exc:  # noqa: BLE001 - a garbage AST must not stop the daemon
        log.warning("could not analyse a subscription (%s): treating it as unbounded", exc)
        bound, why = None, f"it could not be analysed ({exc})"
    if bound is not None:
        return TermPaths(bound.interests, False, bound.notes)
    if policy == "roots":
        interests = frozenset(Interest(TREE, r, r) for r in roots)
        return TermPaths(interests, True, (f"unbounded: {why}; watching the roots (policy)",))
    return TermPaths(frozenset(), True, (f"unbounded: {why}; ignored (policy)",))


class _Analysis:
    def __init__(self, roots: Sequence[str], max_paths: int, resolve: Resolver) -> None:
        self.roots = list(roots)
        self.max_paths = max_paths
        self.resolve = resolve
        self.seen = 0

    # -- the walk over && / || -------------------------------------------------------
    def bound(self, node: Node) -> _Bound | None:
        if node.kind is Kind.AND:
            best: _Bound | None = None
            for child in node.children:
                part = self.bound(child)
                if part is not None and (best is None or part.cost < best.cost):
                    best = part
            return best
        if node.kind is Kind.OR:
            interests: set[Interest] = set()
            notes: list[str] = []
            for child in node.children:
                part = self.bound(child)
                if part is None:
                    return None
                interests |= part.interests
                notes.extend(part.notes)
            return _Bound(frozenset(interests), tuple(dict.fromkeys(notes)))
        return self.leaf(node)

    def leaf(self, node: Node) -> _Bound | None:
        for attribute in PATH_NAMES:
            result = wanted(node, attribute)
            if result.unbounded:
                continue
            if len(result.constraints) > self.max_paths:
                raise _TooMany
            return self.place_all(result.constraints)
        return None

    # -- constraint -> interests, resolved and clipped to the roots -----------------------
    def place_all(self, constraints: Iterable[Constraint]) -> _Bound | None:
        interests: set[Interest] = set()
        outside: list[str] = []
        for constraint in constraints:
            wanted_here = _interests_for(constraint)
            if wanted_here is None:
                return None
            for kind, path, prefix in wanted_here:
                self.seen += 1
                if self.seen > self.max_paths:
                    raise _TooMany
                placed = self.place(kind, path, prefix)
                if placed:
                    interests.update(placed)
                else:
                    outside.append(path if kind == FILE else path.rstrip(SEP) + SEP)
        notes = ()
        if outside:
            shown = ", ".join(sorted(outside)[:5]) + (" ..." if len(outside) > 5 else "")
            notes = (f"outside the roots, not watched: {shown}",)
        return _Bound(frozenset(interests), notes)

    def place(self, kind: str, path: str, prefix: str | None) -> list[Interest]:
        real = self.resolve(path)
        if kind == FILE:
            return [Interest(FILE, real, path)] if self._within(real) else []
        real_prefix = None
        if prefix is not None:
            real_prefix = _join(real, prefix[len(path.rstrip(SEP)) + 1:])
        if self._within(real):
            return [Interest(TREE, real, path, real_prefix)]
        placed = []
        for root in self.roots:     # a tree that contains roots watches those roots
            if real == SEP or root.startswith(real + SEP):
                if real_prefix is not None and not root.startswith(real_prefix):
                    continue
                shown = path.rstrip(SEP) + root[len(real.rstrip(SEP)):] if real != path \
                    else root
                placed.append(Interest(TREE, root, shown))
        return placed

    def _within(self, real: str) -> bool:
        return any(real == r or real.startswith(r + SEP) for r in self.roots)


def _join(directory: str, name: str) -> str:
    return directory.rstrip(SEP) + SEP + name


def _interests_for(c: Constraint) -> list[tuple[str, str, str | None]] | None:
    """(kind, path, prefix) triples for one constraint (unresolved), [] when
    it cannot match any absolute path, None when it cannot be bounded."""
    if c.transforms:
        return None            # fold-case etc.: any spelling of any directory
    value = c.value
    if c.match is Match.EQUALS:
        if isinstance(value, str) and value.startswith(SEP):
            return [(FILE, value, None)]
        return []              # a number or a relative path is never a File-Path
    if not isinstance(value, str):
        return []
    if c.match is Match.BEGINS_WITH:
        return _prefix_tree(value or SEP)
    if c.match is Match.WILDCARD:
        prefix, exact = wildcard_prefix(value)
        if exact:
            return [(FILE, prefix, None)] if prefix.startswith(SEP) else []
        return _prefix_tree(prefix or SEP)
    if c.match is Match.REGEX:
        found = regex_prefix(value)
        if found is None:
            return None
        prefix, exact = found
        if exact:
            return [(FILE, prefix, None)] if prefix.startswith(SEP) else []
        return _prefix_tree(prefix or SEP)
    return None                # ends-with, contains: anywhere


def _prefix_tree(prefix: str) -> list[tuple[str, str, str | None]]:
    """The tree holding every path that starts with ``prefix``."""
    if not prefix.startswith(SEP):
        return []
    head, _, rest = prefix.rpartition(SEP)
    directory = head or SEP
    return [(TREE, directory, prefix if rest else None)]


_GLOB_META = frozenset("*?[")


def wildcard_prefix(pattern: str) -> tuple[str, bool]:
    """The literal text every match of an Elvin wildcard starts with, and
    whether the pattern is all literal (then it matches exactly that)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c in _GLOB_META:
            return "".join(out), False
        if c == "\\" and i + 1 < n:
            out.append(pattern[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out), True


_RE_META = frozenset(".[]()*+?{}|^$\\")


def regex_prefix(pattern: str) -> tuple[str, bool] | None:
    """For an anchored POSIX ERE (``^...``): the literal text every match
    starts with, and whether the pattern is exactly that text (``^lit$``).
    None when the pattern is unanchored or has a top-level ``|`` (then a
    match can start anywhere). Conservative: when in doubt, a shorter prefix."""
    if not pattern.startswith("^") or _top_level_alternation(pattern):
        return None
    out: list[str] = []
    i, n = 1, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n or pattern[i + 1].isalnum():
                break          # \d, \w, \n ...: not one literal character
            out.append(pattern[i + 1])
            i += 2
            continue
        if c in _RE_META:
            break
        out.append(c)
        i += 1
    if i < n and pattern[i] in "*?{" and out:
        out.pop()              # the last character may be absent or repeated
    if i == n - 1 and pattern[i] == "$":
        return "".join(out), True
    return "".join(out), False


def _top_level_alternation(pattern: str) -> bool:
    depth, i, n = 0, 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _skip_bracket(pattern, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(depth - 1, 0)
        elif c == "|" and depth == 0:
            return True
        i += 1
    return False


def _skip_bracket(p: str, i: int) -> int:
    """Index just past the POSIX bracket expression starting at ``p[i]``."""
    j, n = i + 1, len(p)
    if j < n and p[j] == "^":
        j += 1
    if j < n and p[j] == "]":
        j += 1
    while j < n:
        if p[j] == "[" and j + 1 < n and p[j + 1] in ":.=":
            end = p.find(p[j + 1] + "]", j + 2)
            j = n if end < 0 else end + 2
            continue
        if p[j] == "]":
            return j + 1
        j += 1
    return n
