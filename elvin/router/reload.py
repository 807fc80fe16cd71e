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
from typing import Any

from elvin.daemon.daemon_control import change, reload_verdict
from elvin.router.config import RELOADABLE, SETTINGS, RouterConfig

__all__ = ["apply_config", "changed_settings", "federation_changes", "option_changes"]

log = logging.getLogger("elvin.router")

def _shown(name: str) -> str:
    return {"options": "[options]", "federation": "[federation]"}.get(
        name, name.replace("_", "-"))


def changed_settings(old: RouterConfig, new: RouterConfig) -> list[str]:
    """The names of the settings that differ, in declaration order."""
    return [s.name for s in SETTINGS if getattr(old, s.name) != getattr(new, s.name)]


def option_changes(old: Any, new: Any) -> list[str]:
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


def federation_changes(old: Any, new: Any) -> list[str]:
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


async def apply_config(router: Any, new: RouterConfig,
                       set_logging: Callable[[str, str | None], None]) -> tuple[bool, str]:
    """Apply what can change of ``new`` to ``router``; ``(all applied,
    message)``. ``set_logging(level, file)`` switches the log (``OSError``
    when the new file cannot be opened)."""
    old = router.config
    changed = changed_settings(old, new)
    if not changed:
        return True, "no changes"
    applied: list[str] = []
    failed: list[str] = []
    restart = [name for name in changed if name not in RELOADABLE]
    live = [name for name in changed if name in RELOADABLE]
    if "log_level" in live or "log_file" in live:
        try:
            set_logging(new.log_level, new.log_file)
        except OSError as exc:
            failed.append(f"log-file {new.log_file!r}: cannot open: {exc.strerror or exc}")
        else:
            for name in ("log_level", "log_file"):
                if name in live:
                    old_value, new_value = getattr(old, name), getattr(new, name)
                    setattr(old, name, new_value)
                    applied.append(change(_shown(name), old_value, new_value))
    for name in live:
        if name in ("log_level", "log_file", "options", "federation", "archive"):
            continue
        old_value = getattr(old, name)
        if name == "stats_interval":
            problem = await router.services["statistics"].reconfigure(new)
            if problem:
                failed.append(f"stats-interval: {problem}")
                continue
        else:
            setattr(old, name, getattr(new, name))
        applied.append(change(_shown(name), old_value, getattr(new, name)))
    if "options" in live:
        what = "; ".join(option_changes(old.options, new.options))
        router.set_option_ranges(new.options)
        applied.append(f"[options] {what} (for new connections)")
    if "archive" in live:
        before = old.archive
        problem = await router.services["archive"].reconfigure(new)
        if problem:
            failed.append(f"archive: {problem}")
        else:
            applied.append(change("archive", before or "off", new.archive or "off"))
    if "federation" in live:
        what = "; ".join(federation_changes(old.federation, new.federation))
        problem = await router.services["federation"].reconfigure(new)
        if problem:
            failed.append(f"[federation]: {problem}")
        else:
            applied.append(f"[federation] {what}" if what else "[federation]")
    return reload_verdict(applied, [_shown(name) for name in restart], failed)
