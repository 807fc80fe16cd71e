"""The status file: what the daemon watches and why, for ``filewatcher status``.

The daemon rewrites one JSON file (atomically: write a temporary file, then
rename) whenever its watch set, subscriptions or connection change, and every
few seconds for the counters. A file rather than a control socket because it
needs no protocol, works for any user who can read it, and survives for a
post-mortem; the ``pid`` in it lets ``status`` tell a running daemon from a
stale file.

Format (``"format": 1``)::

    {"format": 1, "version": "0.1.0", "pid": 123, "started": 1700000000.0,
     "updated": 1700000005.0, "router": "elvin://...", "config": "/etc/elvin/fw.toml",
     "connection": "connected",
     "roots": ["/srv/www"], "unreadable_roots": {}, "unbounded": "ignore",
     "quench": "on", "os_watches": 3,
     "watches": [{"path": "/srv/www", "recursive": true, "backend": "inotify",
                  "pending": false, "error": null, "unreadable": [], "os_watches": 2,
                  "subscriptions": [5], "interests": ["/srv/www/**"]}],
     "subscriptions": [{"id": 5, "expression": "begins-with(File-Path, \\"/srv/www/\\")",
                        "watching": ["/srv/www/**"], "unbounded": false, "notes": []}],
     "counters": {"events": 10, "sent": 4, "quenched": 6, "failed": 0,
                  "rescans": 0, "overflows": 0},
     "reload": {"serial": 0, "at": null, "ok": true, "message": "..."}}

A watch whose ``backend`` is ``failed`` (the kernel refused it: permission
denied...) or ``refused`` (over ``max-watches``) is NOT watched, and
``error`` says why; ``unreadable`` lists directories inside a watched tree
that could not be watched; ``unreadable_roots`` maps a root the daemon
cannot list to the reason. ``reload`` is the last SIGHUP's verdict
(``elvin.daemon.daemon_control``).

``quench`` is ``"on"``, or ``"off"`` when the router has no quench (the
daemon then watches the roots, under the pseudo subscription ``no-quench``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any, TextIO

from elvin.cli_common import duration
from elvin.daemon.daemon_control import read_status_file
from elvin.fileutil import atomic_write

__all__ = ["NO_QUENCH_NOTE", "StatusError", "format_status", "read_status", "write_status"]

FORMAT = 1
#: what the daemon says, in the log and here, at a router without quench
NO_QUENCH_NOTE = "router has no quench: announcing everything under the roots"


class StatusError(Exception):
    """No usable status file (daemon not running, or never started)."""


def write_status(path: str, status: Mapping[str, Any]) -> None:
    """Replace the status file atomically (readers never see half a file)."""
    text = json.dumps({"format": FORMAT, **status}, indent=1, sort_keys=False) + "\n"
    atomic_write(path, text, mode=0o644)


def remove_status(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def read_status(path: str) -> dict[str, Any]:
    """The status as written by the daemon; ``running`` is added (is the
    writing process alive?). Raises StatusError with a clear message."""
    return read_status_file(path, "the filewatcher", StatusError,
                            lambda data: data.get("format") == FORMAT)


def _table(rows: list[list[str]], out: TextIO) -> None:
    if not rows:
        return
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        out.write("  ".join(cells).rstrip() + "\n")


def format_status(data: Mapping[str, Any], out: TextIO, now: float | None = None) -> None:
    """The human-readable report: a header, the watches (with the
    subscriptions holding each), then each subscription and what it watches."""
    now = time.time() if now is None else now
    state = "running" if data.get("running") else "NOT RUNNING (stale status file)"
    out.write(f"filewatcher {data.get('version', '?')}  pid {data.get('pid')}  {state}  "
              f"(updated {duration(max(0.0, now - float(data.get('updated', now))))} ago)\n")
    out.write(f"router: {data.get('router')}  ({data.get('connection')})\n")
    out.write(f"roots: {', '.join(data.get('roots', [])) or '-'}   "
              f"unbounded subscriptions: {data.get('unbounded')}\n")
    for root, problem in (data.get("unreadable_roots") or {}).items():
        out.write(f"root {root} is NOT READABLE ({problem}): nothing under it can be "
                  "watched\n")
    if data.get("quench") == "off":
        out.write(f"quench: {NO_QUENCH_NOTE}\n")
    watches = data.get("watches", [])
    missing = sum(1 for w in watches if w.get("backend") in ("failed", "refused"))
    watched = len(watches) - missing
    out.write(f"OS watches: {data.get('os_watches', '?')} in {watched} watched "
              f"director{'y' if watched == 1 else 'ies'}"
              + (f"; {missing} NOT WATCHED (see below)" if missing else "") + "\n")
    counters = data.get("counters", {})
    if counters:
        out.write("counters: " + ", ".join(f"{k} {v}" for k, v in counters.items()) + "\n")
    out.write("\n")
    if watches:
        rows = [["WATCH", "MODE", "BACKEND", "OS", "SUBSCRIPTIONS", "FOR"]]
        for w in watches:
            mode = "recursive" if w.get("recursive") else "directory"
            if w.get("pending"):
                mode += " (pending)"
            backend = w.get("backend", "?")
            if backend in ("failed", "refused"):
                backend = f"NOT WATCHED [{w.get('error') or backend}]"
            elif w.get("error"):
                backend += f" [{w['error']}]"
            if w.get("unreadable"):
                backend += f" [not readable inside: {', '.join(w['unreadable'])}]"
            subs = ", ".join(f"#{s}" for s in w.get("subscriptions", [])) or "-"
            rows.append([w.get("path", "?"), mode, backend, str(w.get("os_watches", "")),
                         subs, "; ".join(w.get("interests", []))])
        _table(rows, out)
    else:
        out.write("nothing is watched\n")
    subs = data.get("subscriptions", [])
    out.write("\n")
    if subs:
        rows = [["SUBSCRIPTION", "WATCHING", "EXPRESSION"]]
        for s in subs:
            watching = ", ".join(s.get("watching", [])) or "-"
            expr = s.get("expression", "")
            notes = s.get("notes", [])
            if notes:
                expr += "   -- " + "; ".join(notes)
            rows.append([f"#{s.get('id')}", watching, expr])
        _table(rows, out)
    else:
        out.write("no subscriptions refer to the filewatcher's attributes\n")
