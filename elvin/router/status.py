"""What a running ``elvind`` is doing, for ``elvind status`` and the metrics.

``router_status(router)`` is the one picture of a router: clients,
subscriptions, counters, federation links with their state and last error,
the mobility proxy and the archive. Three things show it, so that they
cannot disagree: the status file (``StatusFile``: rewritten atomically every
few seconds and after a reload, read by ``elvind status``), the metrics
endpoint (``elvin.router.metrics``) and, for its counters, the
``Elvin-Router-Stats`` notification (``elvin.router.stats``).

A file rather than a control socket, as the filewatcher does: no protocol,
readable by any user the admin lets read it, and left for a post-mortem; the
``pid`` in it tells a running router from a stale file. Format
(``"format": 1``)::

    {"format": 1, "program": "elvind", "version": "0.1.0", "pid": 123,
     "started": 1700000000.0, "updated": 1700000005.0, "router_id": "...",
     "config": "/etc/elvind.toml", "listen": ["elvin://127.0.0.1:2917"],
     "metrics": "http://127.0.0.1:9917/metrics", "connections": 3,
     "subscriptions": 12, "quenches": 1,
     "counters": {"notifications_in": 10, "notifications_out": 30, "drops": 0,
                  "protocol_errors": 0, "connections_total": 5},
     "federation": {"domain": "hub", "listen": ["ewaf://..."],
                    "links": [{"peer": "edge", "url": "ewaf://...", "direction": "connect",
                               "state": "down", "failed_dials": 4,
                               "last_error": "Connection refused"}],
                    "counters": {...}} or null,
     "mobility": {"id": "...", "clients_moved_out": 1, "buffered": 20,
                  "counters": {...}} or null,
     "archive": {"directory": "/var/lib/elvind/archive", "state": "writing",
                 "received": 10, "dropped": 0, "lost": 0} or null,
     "reload": {"serial": 1, "at": 1700000003.0, "ok": true, "message": "..."}}
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from elvin.cli_common import duration
from elvin.daemon_control import read_status_file
from elvin.fileutil import atomic_write, runtime_file

__all__ = ["StatusError", "StatusFile", "default_status_file", "format_status", "read_status",
           "router_status"]

log = logging.getLogger("elvin.router")

FORMAT = 1
#: seconds between rewrites of the status file
STATUS_INTERVAL = 5.0


class StatusError(Exception):
    """No usable status file; the message says why and what to try."""


def default_status_file() -> str:
    """``/run/elvind/status.json`` for root and the systemd unit
    (``RuntimeDirectory=elvind``), else in the user's runtime directory."""
    return runtime_file("elvind")


def router_status(router: Any, *, version: str = "", config_path: str | None = None,
                  metrics_url: str | None = None,
                  reload: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The picture of ``router`` (a running ``elvin.router.server.Router``)."""
    stats = router.stats
    fed = router.federation
    federation = None
    if fed is not None:
        federation = {"domain": fed.domain, "listen": list(fed.urls),
                      "links": fed.link_report(), "counters": fed.stats.as_dict()}
    mobility = None
    proxy = router.mobility
    if proxy is not None:
        handlers = list(getattr(proxy, "handlers", {}).values())
        mobility = {"id": proxy.id, "clients_moved_out": len(handlers),
                    "buffered": sum(len(getattr(h, "buffer", ())) for h in handlers),
                    "counters": dict(getattr(proxy, "stats", {}))}
    archive = None
    writer = router.archive
    if writer is not None:
        archive = {"directory": str(writer.directory),
                   "state": "writer process died" if writer.dead else "writing",
                   "received": writer.received_rows, "dropped": writer.dropped_rows,
                   "lost": writer.lost_rows}
    elif router.config.archive:
        archive = {"directory": router.config.archive, "state": "not open", "received": 0,
                   "dropped": 0, "lost": 0}
    return {
        "format": FORMAT, "program": "elvind", "version": version, "pid": os.getpid(),
        "started": time.time() - stats.uptime, "updated": time.time(),
        "router_id": router.router_id, "config": config_path, "listen": list(router.urls),
        "metrics": metrics_url,
        "connections": router.connection_count, "subscriptions": len(router.engine),
        "quenches": len(router.quench),
        "counters": {"notifications_in": stats.notifications_in,
                     "notifications_out": stats.notifications_out, "drops": stats.drops,
                     "protocol_errors": stats.protocol_errors,
                     "connections_total": stats.connections_total,
                     "pattern_overruns": stats.pattern_overruns},
        "federation": federation, "mobility": mobility, "archive": archive,
        "reload": dict(reload) if reload is not None else None,
    }


class StatusFile:
    """Keeps ``path`` up to date with ``build()``: every ``interval``
    seconds, and at once after ``changed()``. Owned by elvind's main task,
    which ``close()``s it (the file goes, if it is still ours)."""

    def __init__(self, path: str, build: Callable[[], Mapping[str, Any]],
                 interval: float = STATUS_INTERVAL) -> None:
        self.path = path
        self.build = build
        self.interval = interval
        self._task: asyncio.Task | None = None
        self._warned = False

    def start(self) -> StatusFile:
        """Write the first status now: ``OSError`` when it cannot be written
        (elvind says so and does not start)."""
        self._write(raise_errors=True)
        self._task = asyncio.get_running_loop().create_task(self._run(),
                                                            name="elvind status file")
        return self

    def changed(self) -> None:
        self._write()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self._write()

    def _write(self, raise_errors: bool = False) -> None:
        try:
            text = json.dumps(self.build(), indent=1, default=str) + "\n"
            atomic_write(self.path, text, mode=0o644)
        except OSError as exc:
            if raise_errors:
                raise
            if not self._warned:
                log.warning("cannot write the status file %s: %s", self.path,
                            exc.strerror or exc)
                self._warned = True
            return
        self._warned = False

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        try:
            data = json.loads(Path(self.path).read_text("utf-8"))
            if isinstance(data, dict) and data.get("pid") == os.getpid():
                os.unlink(self.path)      # another router may have taken the path since
        except (OSError, ValueError):
            pass


def read_status(path: str) -> dict[str, Any]:
    """The status a router wrote, with ``running`` added; ``StatusError``
    with a clear message when there is none to read."""
    return read_status_file(path, "elvind", StatusError,
                            lambda data: data.get("program") == "elvind"
                            and data.get("format") == FORMAT)


def format_status(data: Mapping[str, Any], out: TextIO, now: float | None = None) -> None:
    """The human-readable report of ``elvind status``."""
    now = time.time() if now is None else now
    state = "running" if data.get("running") else "NOT RUNNING (stale status file)"
    started = float(data.get("started") or now)
    updated = float(data.get("updated") or now)
    out.write(f"elvind {data.get('version', '?')}  pid {data.get('pid')}  {state}  "
              f"up {duration(max(0.0, updated - started))}  "
              f"(updated {duration(max(0.0, now - updated))} ago)\n")
    out.write(f"listening on: {' '.join(data.get('listen') or []) or '-'}\n")
    if data.get("config"):
        out.write(f"config: {data['config']}\n")
    if data.get("metrics"):
        out.write(f"metrics: {data['metrics']}\n")
    counters = data.get("counters") or {}
    out.write(f"clients: {data.get('connections', 0)} connected "
              f"({counters.get('connections_total', 0)} since start)   "
              f"subscriptions: {data.get('subscriptions', 0)}   "
              f"quenches: {data.get('quenches', 0)}\n")
    out.write(f"notifications: {counters.get('notifications_in', 0)} in, "
              f"{counters.get('notifications_out', 0)} delivered, "
              f"{counters.get('drops', 0)} dropped; "
              f"protocol errors: {counters.get('protocol_errors', 0)}; "
              f"pattern overruns: {counters.get('pattern_overruns', 0)}\n")
    fed = data.get("federation")
    if fed:
        links = fed.get("links") or []
        up = sum(1 for link in links if link.get("state") == "linked")
        out.write(f"federation: domain {fed.get('domain')!r}, listening on "
                  f"{' '.join(fed.get('listen') or []) or '-'}; {up} of {len(links)} "
                  "link(s) up\n")
        for link in links:
            line = (f"  {link.get('direction', '?'):7}  {link.get('peer') or '?'}  "
                    f"{link.get('url') or '-'}  {str(link.get('state', '?')).upper()}")
            if link.get("failed_dials"):
                line += f"  ({link['failed_dials']} failed dials)"
            if link.get("last_error"):
                line += f"  last error: {link['last_error']}"
            out.write(line + "\n")
    else:
        out.write("federation: off\n")
    _optional_part(out, "mobility", data.get("mobility"), lambda mobility: (
        f"proxy {mobility.get('id')!r}, "
        f"{mobility.get('clients_moved_out', 0)} client(s) moved out, "
        f"{mobility.get('buffered', 0)} notification(s) buffered"))
    _optional_part(out, "archive", data.get("archive"), lambda archive: (
        f"{archive.get('directory')} ({archive.get('state')}): "
        f"{archive.get('received', 0)} archived, {archive.get('dropped', 0)} "
        f"dropped, {archive.get('lost', 0)} lost"))
    reload = data.get("reload")
    if reload and reload.get("serial"):
        verdict = "applied" if reload.get("ok") else "REFUSED"
        at = float(reload.get("at") or now)
        out.write(f"last reload: {verdict} {duration(max(0.0, now - at))} ago: "
                  f"{reload.get('message')}\n")


def _optional_part(out: TextIO, name: str, part: Mapping[str, Any] | None,
                   describe: Callable[[Mapping[str, Any]], str]) -> None:
    """The line of a part a router may run without: its figures, or "off",
    so that the report always says whether the part is there."""
    out.write(f"{name}: {describe(part) if part else 'off'}\n")
