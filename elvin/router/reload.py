"""SIGHUP for ``elvind``: apply a re-read configuration to the running router.

The new configuration is read and validated whole first (a file with an
error changes nothing: the reload is refused and says why). Then each
setting that differs is either applied, or named as needing a restart:

* applied at once: the settings declared ``reloadable`` (``RELOADABLE``,
  from ``RouterConfig``'s declarations; the configuration reference marks
  them "applied on reload"): the log (its file reopened), ``stats-interval``,
  the ``[options]`` limits (for connections made from now on; a connected
  client keeps what it negotiated), ``[federation]`` (links dialled, closed
  or re-filtered, client sessions untouched), ``archive`` (opened, closed or
  moved), and the limits and timeouts read per request;
* needing a restart: the others (``listen``, the TLS files, discovery,
  mobility...): the running router keeps its old values, and the reload's
  message lists them.

Who applies a setting is the part of the router that owns it, registered
with its core (``elvin.router.services``: each says which settings it
``reloads``; ``elvin.router.core_settings`` for the core's own and the
log): this module only calls them, in ``ORDER``, and says what they did.

The verdict is one line naming what changed, down to the option and the
federation entry, e.g. ``applied log-level (info -> debug), [options]
Packet.Max-Length (1048576 -> 65536) (for new connections), [federation]
connect +edge2; needs a restart: listen``, logged and kept for
``elvind reload`` (``elvin.daemon.daemon_control``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from elvin.daemon.daemon_control import change, reload_verdict
from elvin.router.config import RELOADABLE, SETTINGS, RouterConfig
from elvin.router.core_settings import LogSettings

if TYPE_CHECKING:
    from elvin.federation.config import FederationConfig
    from elvin.router.options import OptionRanges
    from elvin.router.server import Router
    from elvin.router.services import Reconfigurable

__all__ = ["ORDER", "apply_config", "changed_settings", "federation_changes", "option_changes",
           "reload_parts"]

log = logging.getLogger("elvin.router")

def _shown(name: str) -> str:
    return {"options": "[options]", "federation": "[federation]"}.get(
        name, name.replace("_", "-"))


def changed_settings(old: RouterConfig, new: RouterConfig) -> list[str]:
    """The names of the settings that differ, in declaration order."""
    return [s.name for s in SETTINGS if getattr(old, s.name) != getattr(new, s.name)]


def option_changes(old: OptionRanges, new: OptionRanges) -> list[str]:
    """What differs between two ``OptionRanges``, as a reload says it:
    ``Packet.Max-Length (1048576 -> 65536)`` for a default, the whole
    ``min/default/max`` when a bound changed too."""
    out = []
    for name in sorted(set(old.ints) | set(new.ints)):
        before, after = old.ints.get(name), new.ints.get(name)
        if before == after:
            continue
        if before is not None and after is not None and \
                (before[0], before[2]) == (after[0], after[2]):
            out.append(change(name, before[1], after[1]))
        else:
            out.append(change(name, "/".join(map(str, before or ())) or None,
                              "/".join(map(str, after or ())) or None))
    for name, attr in (("Send-Queue.Drop-Policy", "send_drop_policy"),
                       ("Receive-Queue.Drop-Policy", "receive_drop_policy")):
        if getattr(old, attr) != getattr(new, attr):
            out.append(change(name, getattr(old, attr), getattr(new, attr)))
    return out


def federation_changes(old: FederationConfig | None, new: FederationConfig | None
                       ) -> list[str]:
    """What differs between two ``FederationConfig`` (either None: off), as
    a reload says it: ``connect +edge2 -edge1``, ``connect edge1 changed``,
    ``reconnect-max (30 -> 10)``..."""
    if old is None or new is None:
        return [] if old is new else ["on" if old is None else "off"]
    out = []
    for f in dataclasses.fields(new):
        before, after = getattr(old, f.name), getattr(new, f.name)
        if before == after:
            continue
        if f.name in ("connect", "accept"):
            out.append(f"{f.name} {_entries_changed(before, after)}")
        else:
            out.append(change(f.name, before, after))
    return out


def _entries_changed(before: Sequence[object], after: Sequence[object]) -> str:
    """``+b -c, a changed`` for two lists of connect or accept entries,
    named by their router (or URL)."""
    def named(entries: Sequence[object]) -> dict[str, Any]:
        return {str(getattr(e, "router", None) or getattr(e, "url", "?")): e for e in entries}
    old, new = named(before), named(after)
    parts = [f"+{name}" for name in new if name not in old]
    parts += [f"-{name}" for name in old if name not in new]
    parts += [f"{name} changed" for name in new if name in old and new[name] != old[name]]
    return " ".join(parts) or "reordered"


#: the order in which a reload reconfigures the parts (by name; any other
#: part after them, in the order of the router's registry): the log first, so
#: that what follows is said in the new one; then what the core reads as it
#: goes and the defaults of new connections; last what opens files or dials
#: (``archive``, ``[federation]``), which may fail
ORDER = ("log", "statistics", "settings", "connection options", "archive", "federation")


def _said(name: str, before: Any, after: Any) -> str:
    """How the verdict says that setting ``name`` went from ``before`` to
    ``after``."""
    if name == "options":
        return f"[options] {'; '.join(option_changes(before, after))} (for new connections)"
    if name == "federation":
        what = "; ".join(federation_changes(before, after))
        return f"[federation] {what}" if what else "[federation]"
    if name == "archive":
        return change("archive", before or "off", after or "off")
    return change(_shown(name), before, after)


def _failed_as(part: Reconfigurable, names: Sequence[str], new: RouterConfig) -> str:
    """What the verdict names as failed when ``part`` could not apply ``names``."""
    if part.name == "log":           # the level always applies: the file did not open
        return f"log-file {new.log_file!r}"
    return ", ".join(_shown(name) for name in names)


def reload_parts(router: Router, set_logging: Callable[[str, str | None], None]
                 ) -> list[Reconfigurable]:
    """The parts a reload reconfigures, in ``ORDER``: the router's (its
    registry's) and the process's log (``set_logging``)."""
    parts = [LogSettings(router.config, set_logging), *router.services.parts()]
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(parts, key=lambda part: rank.get(part.name, len(ORDER)))


async def apply_config(router: Router, new: RouterConfig,
                       set_logging: Callable[[str, str | None], None]) -> tuple[bool, str]:
    """Apply what can change of ``new`` to ``router``; ``(all applied,
    message)``. ``set_logging(level, file)`` switches the log (``OSError``
    when the new file cannot be opened). Each part (``reload_parts``) whose
    settings changed is reconfigured, and says what went wrong; this only
    orders the calls and says what they did."""
    old = router.config
    changed = changed_settings(old, new)
    if not changed:
        return True, "no changes"
    applied: list[str] = []
    failed: list[str] = []
    parts = reload_parts(router, set_logging)
    owned = {name for part in parts for name in part.reloads}
    # a reloadable setting no part applies would be lost: it is kept for a restart
    restart = [name for name in changed if name not in RELOADABLE or name not in owned]
    for part in parts:
        names = [name for name in changed if name in part.reloads and name in RELOADABLE]
        if not names:
            continue
        before = {name: getattr(old, name) for name in names}
        problem = await part.reconfigure(new)
        if problem:
            failed.append(f"{_failed_as(part, names, new)}: {problem}")
        else:
            applied += [_said(name, before[name], getattr(new, name)) for name in names]
    return reload_verdict(applied, [_shown(name) for name in restart], failed)
