"""``elvind --metrics HOST:PORT``: the router's figures for Prometheus.

An HTTP endpoint (``GET /metrics``) in the Prometheus text exposition format
(version 0.0.4, which OpenMetrics scrapers read too), built from the same
``router_status`` picture as ``elvind status``, so the two never disagree.

Why our own small exposition rather than ``prometheus_client``: the core
install stays lark and regex only (elvind is a core command); the router
already keeps every figure, so a registry of metric objects would only copy
them; and ``prometheus_client``'s HTTP server runs in a thread of its own,
while this one is a few coroutines on the router's loop whose each request
costs one status snapshot (microseconds) -- nothing holds the loop. The
format is small and stable; the tests check our output with
``prometheus_client``'s own parser.

The server answers one request per connection (HTTP/1.0 style, ``Connection:
close``), reads at most 8 KiB of request within 5 s, and answers 404 for
other paths and 405 for other methods. It listens where it is told; bind it
to loopback unless the network in between is trusted, since the figures name
federation peers.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["CONTENT_TYPE", "MetricsServer", "exposition", "parse_metrics_address"]

log = logging.getLogger("elvin.router")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
REQUEST_LIMIT = 8192
REQUEST_TIMEOUT = 5.0
LINK_STATES = ("linked", "connecting", "down")


def parse_metrics_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9917`` for IPv6; port 0 picks a free one);
    ``ValueError`` naming what is wrong."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"metrics address {text!r}: expected HOST:PORT, e.g. "
                         "127.0.0.1:9917")
    host = host.strip("[]")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"metrics address {text!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"metrics address {text!r}: port {number} is out of range")
    return host, number


class _Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name, self.kind, self.help = name, kind, help_text
        self.samples: list[tuple[dict[str, str], float]] = []

    def add(self, value: float, **labels: str) -> None:
        self.samples.append((labels, value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _render(families: Iterable[_Family]) -> str:
    lines = []
    for family in families:
        help_text = family.help.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"# HELP {family.name} {help_text}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        suffix = "_total" if family.kind == "counter" else ""
        for labels, value in family.samples:
            shown = ",".join(f'{k}="{_escape_label(str(v))}"' for k, v in labels.items())
            lines.append(f"{family.name}{suffix}{{{shown}}} {_number(value)}" if shown
                         else f"{family.name}{suffix} {_number(value)}")
    return "\n".join(lines) + "\n"


def exposition(status: Mapping[str, Any]) -> str:
    """The text format for a ``router_status`` picture."""
    families: list[_Family] = []

    def family(name: str, kind: str, help_text: str) -> _Family:
        f = _Family(f"elvind_{name}", kind, help_text)
        families.append(f)
        return f

    counters = status.get("counters") or {}
    family("up", "gauge", "1 while the router runs").add(1)
    family("uptime_seconds", "gauge", "seconds since the router started").add(
        max(0.0, float(status.get("updated", 0)) - float(status.get("started", 0))))
    family("connections", "gauge", "client sessions connected now").add(
        status.get("connections", 0))
    family("subscriptions", "gauge", "subscriptions registered now").add(
        status.get("subscriptions", 0))
    family("quenches", "gauge", "quenches registered now").add(status.get("quenches", 0))
    for key, help_text in (
            ("connections", "client sessions accepted since start"),
            ("notifications_in", "notifications received from clients (NotifyEmit, UNotify)"),
            ("notifications_out", "NotifyDeliver packets queued to clients"),
            ("drops", "packets dropped from full send queues"),
            ("protocol_errors", "protocol errors by clients"),
            ("pattern_overruns", "regex()/wildcard() matches that ran out of their own time "
             "limit (each makes only its own subscription bottom)")):
        value = counters.get("connections_total" if key == "connections" else key, 0)
        family(f"{key}" if key != "connections" else "connections_accepted", "counter",
               help_text).add(value)
    fed = status.get("federation")
    links = family("federation_link_up", "gauge",
                   "1 when the federation link is in this state (linked, connecting, down)")
    failed = family("federation_redials_failed", "counter",
                    "outgoing federation dials that did not give a link, per peer")
    if fed:
        for link in fed.get("links") or []:
            peer = str(link.get("peer") or link.get("url") or "?")
            direction = str(link.get("direction", "?"))
            for state in LINK_STATES:
                links.add(1 if link.get("state") == state else 0, peer=peer,
                          direction=direction, state=state)
            if direction == "connect":
                failed.add(link.get("failed_dials", 0), peer=peer)
        fed_counters = fed.get("counters") or {}
        for key, help_text in (("fed_notify_sent", "notifications forwarded to peers"),
                               ("fed_notify_received", "notifications received from peers"),
                               ("links_established", "federation links established"),
                               ("links_refused", "federation links refused")):
            family(f"federation_{key.removeprefix('fed_')}", "counter", help_text).add(
                fed_counters.get(key, 0))
    mobility = status.get("mobility")
    family("mobility_clients_moved_out", "gauge",
           "clients the mobility proxy buffers for").add(
        (mobility or {}).get("clients_moved_out", 0))
    family("mobility_buffered", "gauge", "notifications the mobility proxy holds").add(
        (mobility or {}).get("buffered", 0))
    archive = status.get("archive")
    family("archive_up", "gauge", "1 while the traffic archive is being written").add(
        1 if archive and archive.get("state") == "writing" else 0)
    for key, help_text in (("received", "notifications handed to the archive"),
                           ("dropped", "notifications not archived (the writer was behind)"),
                           ("lost", "notifications lost by the archive")):
        family(f"archive_{key}", "counter", help_text).add((archive or {}).get(key, 0))
    reload = status.get("reload") or {}
    family("reloads", "counter", "configuration reloads asked for (SIGHUP)").add(
        reload.get("serial", 0))
    family("last_reload_ok", "gauge", "1 when the last reload was applied, 0 if refused").add(
        1 if reload.get("ok", True) else 0)
    return _render(families)


class MetricsServer:
    """``GET /metrics`` on ``host:port``, answered from ``snapshot()``."""

    def __init__(self, host: str, port: int, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self.host = host
        self.port = port
        self.snapshot = snapshot
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[asyncio.Task] = set()

    async def start(self) -> MetricsServer:
        """Listen; ``OSError`` (an address in use, say) as the system says it."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port,
                                                  reuse_address=True, limit=REQUEST_LIMIT)
        return self

    @property
    def url(self) -> str:
        if self._server is None or not self._server.sockets:
            return ""
        host, port = self._server.sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/metrics"

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._clients):
            task.cancel()
        if self._clients:
            await asyncio.gather(*self._clients, return_exceptions=True)
        if server is not None:
            try:
                await asyncio.wait_for(server.wait_closed(), 1.0)
            except (TimeoutError, Exception):  # noqa: BLE001 - closing anyway
                pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        try:
            status, body, kind = await self._answer(reader)
            head = (f"HTTP/1.0 {status}\r\nContent-Type: {kind}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
            writer.write(head.encode("ascii") + body)
            await asyncio.wait_for(writer.drain(), REQUEST_TIMEOUT)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            if task is not None:
                self._clients.discard(task)

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[str, bytes, str]:
        plain = "text/plain; charset=utf-8"
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        except asyncio.LimitOverrunError:
            return "431 Request Header Fields Too Large", b"request too large\n", plain
        except (asyncio.IncompleteReadError, TimeoutError):
            return "400 Bad Request", b"incomplete request\n", plain
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return "400 Bad Request", b"not an HTTP request\n", plain
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method != b"GET":
            return "405 Method Not Allowed", b"only GET\n", plain
        if target == b"/":
            return "200 OK", b"elvind: the metrics are at /metrics\n", plain
        if target != b"/metrics":
            return "404 Not Found", b"not found: try /metrics\n", plain
        try:
            text = exposition(self.snapshot())
        except Exception:  # noqa: BLE001 - a scrape must never hurt the router
            log.exception("building the metrics failed")
            return "500 Internal Server Error", b"cannot build the metrics (see the log)\n", \
                plain
        return "200 OK", text.encode("utf-8"), CONTENT_TYPE
