"""The status file: what the running daemon polls and why.

The daemon rewrites ``status.json`` in its data dir (atomically, at most
twice a second and whenever a feed's polled state flips), and
``newswatcher status`` reads it: no socket to secure, nothing to connect to,
and it still says something useful after the daemon died (the pid is checked
and a stale file is reported as such). The JSON is documented here because
monitoring scripts may read it too::

    {"version": 1, "newswatcher_version": "0.1.0", "pid": 1234,
     "started": 1700000000.0, "updated": ...,
     "running": true, "elvin": "elvin://...", "connected": true, "scoop": false,
     "no_quench": false, "config": "/etc/elvin/newswatcher.toml", "quench_terms": 3,
     "totals": {"published": 120, "dropped": 40, "requests": 30, "not_modified": 20, ...},
     "feeds": [{"name": "lwn", "url": "...", "groups": ["news"], "from": "lwn",
                "interval": 900.0, "polled": true, "scoop": false,
                "why": [{"term": 7, "expression": "News-Feed == \\"lwn\\""}],
                "last_poll": 1700000100.0, "last_result": "200: 3 new",
                "errors": 0, "last_error": null, "next_poll": 1700001000.0,
                "published": 12}]}

``no_quench`` is true when the router has no quench (subset C): the daemon
then polls every feed as in scoop mode, until it reconnects to one with it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from elvin.fileutil import atomic_write, pid_alive

__all__ = ["NO_QUENCH_NOTE", "StatusError", "format_status", "pid_alive", "read_status",
           "write_status", "STATUS_NAME"]

STATUS_NAME = "status.json"
VERSION = 1
#: what the daemon says, in the log and the status, at a router without quench
NO_QUENCH_NOTE = "router has no quench: scoop mode, every feed is polled"


class StatusError(Exception):
    """No readable status file."""


def write_status(path: Path, document: dict[str, Any]) -> None:
    document = dict(document, version=VERSION, updated=time.time())
    atomic_write(path, json.dumps(document, indent=1, sort_keys=False).encode())


def read_status(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise StatusError(f"{path}: no status file (is the newswatcher running with "
                          f"this data dir?)") from None
    except (OSError, ValueError) as exc:
        raise StatusError(f"{path}: unreadable status file: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("feeds"), list):
        raise StatusError(f"{path}: not a newswatcher status file")
    return document


def _ago(when: object, now: float) -> str:
    if not isinstance(when, int | float):
        return "never"
    return f"{_span(now - when)} ago"


def _span(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


def format_status(document: dict[str, Any], now: float | None = None, *,
                  verbose: bool = False) -> str:
    """The human-readable report of ``newswatcher status``."""
    now = time.time() if now is None else now
    alive = document.get("running") and pid_alive(document.get("pid"))
    lines = []
    if alive:
        state = "connected" if document.get("connected") else "NOT connected (reconnecting)"
        lines.append(f"newswatcher pid {document.get('pid')}, up "
                     f"{_span(now - float(document.get('started') or now))}, router "
                     f"{document.get('elvin')} ({state})")
    else:
        lines.append(f"newswatcher is NOT running (last status from pid "
                     f"{document.get('pid')}, updated {_ago(document.get('updated'), now)})")
    feeds = document.get("feeds", [])
    polled = [f for f in feeds if f.get("polled")]
    if document.get("no_quench"):
        mode = NO_QUENCH_NOTE
    elif document.get("scoop"):
        mode = "scoop mode: every feed is polled"
    else:
        mode = f"{document.get('quench_terms', 0)} subscription(s) seen by the quench"
    lines.append(f"{len(polled)} of {len(feeds)} feed(s) polled; {mode}")
    totals = document.get("totals") or {}
    if totals:
        lines.append("published {published}, dropped by auto-quench {dropped}, group copies "
                     "not needed {duplicates_avoided}; HTTP requests {requests}, 304s "
                     "{not_modified}, errors {errors}".format(
                         **{k: totals.get(k, 0) for k in (
                             "published", "dropped", "duplicates_avoided", "requests",
                             "not_modified", "errors")}))
    for feed in feeds:
        flag = "POLLED" if feed.get("polled") else "idle  "
        lines.append(f"  {flag} {feed.get('name')}  {feed.get('url')}  every "
                     f"{feed.get('interval', 0):g}s  groups {','.join(feed.get('groups', []))}")
        if feed.get("polled"):
            if feed.get("scoop"):
                lines.append("         why: scoop mode")
            why = feed.get("why") or []
            shown = why if verbose else why[:3]
            for reason in shown:
                lines.append(f"         why: term {reason.get('term')}: "
                             f"{reason.get('expression')}")
            if len(why) > len(shown):
                lines.append(f"         why: ... and {len(why) - len(shown)} more "
                             f"(--verbose lists them)")
        else:
            lines.append(f"         idle: no subscription can match News-Feed="
                         f"{json.dumps(feed.get('name'))}, From={json.dumps(feed.get('from'))}"
                         f", Group in {feed.get('groups')}")
        detail = f"last poll {_ago(feed.get('last_poll'), now)}"
        if feed.get("last_result"):
            detail += f" ({feed['last_result']})"
        if feed.get("errors"):
            detail += f"; {feed['errors']} error(s) in a row, last: {feed.get('last_error')}"
        if feed.get("polled") and isinstance(feed.get("next_poll"), int | float):
            detail += f"; next in {_span(feed['next_poll'] - now)}"
        detail += f"; published {feed.get('published', 0)}"
        lines.append(f"         {detail}")
    return "\n".join(lines)
