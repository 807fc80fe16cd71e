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
                  "protocol_errors": 0, "connections_total": 5,
                  "throttled": 0,
                  "refused": {"connections-per-address": 2, "keys": 1}},
     "publish_limit": {"rate": 100.0, "burst": 100.0, "per": "address"} or null,
     "clients": [{"client": "127.0.0.1:40112", "state": "connected",
                  "notifications_in": 10, "bytes_in": 900, "notifications_out": 0,
                  "bytes_out": 40, "drops": 0, "throttled": 0, "match_seconds": 0.001,
                  "subscriptions": 0, "quenches": 0}],
     "door": {"pre_session": 0, "partial_bytes": 0, "descriptors": 40,
              "descriptor_limit": 65536},
     "federation": {"domain": "hub", "listen": ["ewaf://..."],
                    "links": [{"peer": "edge", "url": "ewaf://...", "direction": "connect",
                               "state": "down", "failed_dials": 4,
                               "last_error": "Connection refused"}],
                    "counters": {...}} or null,
     "mobility": {"id": "...", "clients_moved_out": 1, "buffered": 20,
                  "counters": {...}} or null,
     "archive": {"directory": "/var/lib/elvind/archive", "state": "writing",
                 "received": 10, "dropped": 0, "lost": 0} or null,
     "reload": {"serial": 1, "at": 1700000003.0, "ok": true, "message": "..."},
     "certificates": [{"what": "tls-cert", "file": "/etc/elvin/router.pem",
                       "not_after": 1710000000.0}]}

``elvind status`` warns about a certificate that expires within 30 days
(``elvin.certcheck``), as the router's log did at start.

``clients`` is bounded: the ``TOP_CLIENTS`` busiest channels
(``elvin.router.clientstats``), never one entry per client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from elvin.certcheck import Validity, expiry_note
from elvin.cli_common import duration
from elvin.daemon.daemon_control import read_status_file
from elvin.fileutil import atomic_write, runtime_file

__all__ = ["StatusError", "StatusFile", "default_status_file", "format_status", "link_states",
           "listen_port", "other_router_pid", "read_status", "router_status",
           "status_file_for", "status_files"]

log = logging.getLogger("elvin.router")

FORMAT = 1
#: the client port a router listens on when told nothing (elvin.router.config)
DEFAULT_PORT = 2917
#: seconds between rewrites of the status file
STATUS_INTERVAL = 5.0
#: seconds between looks at what must not wait for the next rewrite (link states)
WATCH_INTERVAL = 0.25


class StatusError(Exception):
    """No usable status file; the message says why and what to try."""


def default_status_file(port: int | None = None) -> str:
    """``/run/elvind/status-PORT.json`` for root and the systemd unit
    (``RuntimeDirectory=elvind``), else in the user's runtime directory;
    PORT is the router's (first) client port, default 2917. Named after the
    port so that two routers on one machine never share the file (they
    cannot share a port), and so that ``elvind status --config FILE`` finds
    the router FILE configures without FILE naming a status file."""
    return runtime_file("elvind", f"status-{port or DEFAULT_PORT}.json")


def status_file_for(config: Any, port: int | None = None) -> str:
    """Where the router ``config`` (a ``RouterConfig``) keeps its status:
    its ``status-file``, else the default for ``port`` (the port it
    listens on; when None, the port of its first listen URI)."""
    if config.status_file:
        return str(config.status_file)
    if port is None:
        port = listen_port(config.listen[0]) if config.listen else None
    return default_status_file(port)


def listen_port(uri: str) -> int | None:
    """The port of a listen URI (None when it does not parse, or is 0)."""
    from elvin.router.config import parse_listen_uri
    try:
        return parse_listen_uri(uri).port or None
    except ValueError:
        return None


def status_files() -> list[str]:
    """The default status files in the runtime directory, of any port."""
    directory = os.path.dirname(default_status_file())
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [os.path.join(directory, name) for name in names
            if name.startswith("status-") and name.endswith(".json")]


def router_status(router: Any, *, version: str = "", config_path: str | None = None,
                  metrics_url: str | None = None,
                  reload: Mapping[str, Any] | None = None,
                  certificates: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
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
                    "buffered": sum(getattr(h, "buffered", 0) for h in handlers),
                    "counters": dict(getattr(proxy, "stats", {}))}
        if hasattr(proxy, "storage"):
            mobility["storage"] = proxy.storage()
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
        "router_id": router.router_id,
        "config": os.path.abspath(config_path) if config_path else None,
        "listen": list(router.urls),
        "metrics": metrics_url,
        "connections": router.connection_count, "subscriptions": len(router.engine),
        "quenches": len(router.quench),
        "counters": {"notifications_in": stats.notifications_in,
                     "notifications_out": stats.notifications_out, "drops": stats.drops,
                     "protocol_errors": stats.protocol_errors,
                     "connections_total": stats.connections_total,
                     "pattern_overruns": stats.pattern_overruns,
                     "throttled": stats.throttled,
                     "refused": dict(sorted(stats.refused.items()))},
        "publish_limit": _publish_limit(router.config),
        "clients": router.top_clients(),
        "door": _door(router),
        "federation": federation, "mobility": mobility, "archive": archive,
        "reload": dict(reload) if reload is not None else None,
        "certificates": [dict(c) for c in certificates or ()],
    }


def _publish_limit(config: Any) -> dict[str, Any] | None:
    """The publish limit in force (``publish-rate``), or None when there is none."""
    rate = config.publish_rate
    if not rate:
        return None
    return {"rate": float(rate), "burst": float(config.publish_burst or max(rate, 1)),
            "per": "address"}


def _door(router: Any) -> dict[str, Any]:
    """What the door holds now (elvin.router.door)."""
    from elvin.router.door import descriptors_in_use

    door = getattr(router, "door", None)
    if door is None:
        return {}
    return {"pre_session": door.pre_session, "partial_bytes": door.partial_bytes,
            "descriptors": descriptors_in_use(), "descriptor_limit": door.fd_limit}


class StatusFile:
    """Keeps ``path`` up to date with ``build()``: every ``interval``
    seconds, at once after ``changed()``, and within ``WATCH_INTERVAL`` of
    a change in ``watch()`` (the federation links' states: a link that came
    up must not read DOWN for seconds; counters may wait). Owned by
    elvind's main task, which ``close()``s it (the file goes, if it is
    still ours)."""

    def __init__(self, path: str, build: Callable[[], Mapping[str, Any]],
                 interval: float = STATUS_INTERVAL,
                 watch: Callable[[], Any] | None = None,
                 watch_interval: float = WATCH_INTERVAL) -> None:
        self.path = path
        self.build = build
        self.interval = interval
        self.watch = watch
        self.watch_interval = watch_interval
        self._task: asyncio.Task[None] | None = None
        self._warned = False
        self._watched: Any = None

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
        loop = asyncio.get_running_loop()
        due = loop.time() + self.interval
        while True:
            step = self.interval if self.watch is None else self.watch_interval
            await asyncio.sleep(max(0.0, min(step, due - loop.time())))
            if loop.time() >= due or self._watch_changed():
                self._write()
                due = loop.time() + self.interval

    def _watch_changed(self) -> bool:
        if self.watch is None:
            return False
        try:
            seen = self.watch()
        except Exception:  # noqa: BLE001 - the periodic rewrite still comes
            return False
        return bool(seen != self._watched)

    def _write(self, raise_errors: bool = False) -> None:
        if self.watch is not None:
            try:
                self._watched = self.watch()
            except Exception:  # noqa: BLE001 - written anyway
                self._watched = None
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


def link_states(router: Any) -> tuple[tuple[Any, Any, Any, Any], ...]:
    """What the status file must show without delay: each federation link's
    peer and state (``StatusFile``'s ``watch``)."""
    fed = router.federation
    if fed is None:
        return ()
    return tuple((link.get("direction"), link.get("peer"), link.get("url"), link.get("state"))
                 for link in fed.link_report())


def other_router_pid(path: str) -> int | None:
    """The pid of another running elvind whose status is at ``path``, or None
    (no file, a stale one, our own): a start must not take it over."""
    try:
        data = read_status(path)
    except StatusError:
        return None
    pid = data.get("pid")
    return pid if data["running"] and pid != os.getpid() else None


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
    _clients(out, data, counters)
    refused = counters.get("refused") or {}
    door = data.get("door") or {}
    if refused or door:
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(refused.items()))
        out.write(f"refused: {kinds or 'none'}; {door.get('pre_session', 0)} socket(s) before "
                  f"ConnRqst, {door.get('partial_bytes', 0)} bytes in partial frames, "
                  f"{door.get('descriptors', '?')} of {door.get('descriptor_limit', '?')} "
                  "open files\n")
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
        f"{mobility.get('buffered', 0)} notification(s) buffered"
        + _mobility_storage(mobility.get("storage"))))
    _optional_part(out, "archive", data.get("archive"), lambda archive: (
        f"{archive.get('directory')} ({archive.get('state')}): "
        f"{archive.get('received', 0)} archived, {archive.get('dropped', 0)} "
        f"dropped, {archive.get('lost', 0)} lost"))
    for cert in data.get("certificates") or []:
        _, warning = expiry_note(str(cert.get("what")), str(cert.get("file")),
                                 Validity(0.0, float(cert.get("not_after") or 0)), now)
        if warning:
            out.write(f"WARNING: {warning}\n")
    reload = data.get("reload")
    if reload and reload.get("serial"):
        verdict = "applied" if reload.get("ok") else "REFUSED"
        at = float(reload.get("at") or now)
        out.write(f"last reload: {verdict} {duration(max(0.0, now - at))} ago: "
                  f"{reload.get('message')}\n")


def _clients(out: TextIO, data: Mapping[str, Any], counters: Mapping[str, Any]) -> None:
    """The publish limit, and the busiest clients' table."""
    limit = data.get("publish_limit")
    if limit:
        out.write(f"publish limit: {limit.get('rate'):g}/s, burst {limit.get('burst'):g}, "
                  f"per {limit.get('per', 'address')}; {counters.get('throttled', 0)} "
                  "notification(s) throttled\n")
    else:
        out.write(f"publish limit: off ({counters.get('throttled', 0)} throttled)\n")
    rows = data.get("clients") or []
    if not rows:
        return
    out.write(f"busiest clients ({len(rows)}):\n")
    out.write(f"  {'client':<24} {'in':>9} {'bytes in':>11} {'out':>9} {'bytes out':>11} "
              f"{'drops':>7} {'throttled':>9} {'subs':>5} {'match s':>8}\n")
    for row in rows:
        out.write(f"  {str(row.get('client')):<24} {row.get('notifications_in', 0):>9} "
                  f"{row.get('bytes_in', 0):>11} {row.get('notifications_out', 0):>9} "
                  f"{row.get('bytes_out', 0):>11} {row.get('drops', 0):>7} "
                  f"{row.get('throttled', 0):>9} {row.get('subscriptions', 0):>5} "
                  f"{float(row.get('match_seconds', 0)):>8.3f}\n")


def _mobility_storage(storage: Mapping[str, Any] | None) -> str:
    if not storage:
        return ""
    text = f", {storage.get('dropped', 0)} dropped"
    if storage.get("state") == "failing":
        text += f", state NOT WRITTEN ({storage.get('error')})"
    return text


def _optional_part(out: TextIO, name: str, part: Mapping[str, Any] | None,
                   describe: Callable[[Mapping[str, Any]], str]) -> None:
    """The line of a part a router may run without: its figures, or "off",
    so that the report always says whether the part is there."""
    out.write(f"{name}: {describe(part) if part else 'off'}\n")
