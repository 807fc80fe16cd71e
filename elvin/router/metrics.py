"""``elvind --metrics HOST:PORT``: the router's figures for Prometheus.

An HTTP endpoint (``GET`` or ``HEAD /metrics``) in the Prometheus text
exposition format (version 0.0.4), or in OpenMetrics 1.0 when the scraper's
``Accept`` header prefers it (Prometheus does), built from the same
``router_status`` picture as ``elvind status``, so the two never disagree.
Every family has its HELP and TYPE lines, naming it as each format wants.

Why our own small exposition rather than ``prometheus_client``: the core
install stays lark and regex only (elvind is a core command); the router
already keeps every figure, so a registry of metric objects would only copy
them; and ``prometheus_client``'s HTTP server runs in a thread of its own,
while this one is a few coroutines on the router's loop whose each request
costs one status snapshot (microseconds) -- nothing holds the loop. The
format is small and stable; the tests check our output with
``prometheus_client``'s text and OpenMetrics parsers, and with ``promtool
check metrics`` where it is installed.

The server answers one request per connection (HTTP/1.0 style, ``Connection:
close``), reads at most 8 KiB of request within 5 s, and answers 404 for
other paths and 405 (with ``Allow``) for other methods. It listens where it is told; bind it
to loopback unless the network in between is trusted, since the figures name
federation peers.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

__all__ = ["CONTENT_TYPE", "OPENMETRICS_CONTENT_TYPE", "MetricsServer", "exposition",
           "parse_metrics_address", "wants_openmetrics"]

log = logging.getLogger("elvin.router")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
ALLOWED = "GET, HEAD"
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


def _escape_help(text: str, openmetrics: bool) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if openmetrics else text


def _render(families: Iterable[_Family], openmetrics: bool = False) -> str:
    """The families in the text format (0.0.4) or, with ``openmetrics``,
    OpenMetrics 1.0. They differ in how a counter is named: the samples are
    ``NAME_total`` in both, but 0.0.4's HELP and TYPE lines name the samples
    (``NAME_total``, or a parser takes the samples for another, untyped
    family) while OpenMetrics names the family (``NAME``); and OpenMetrics
    ends with ``# EOF``."""
    lines = []
    for family in families:
        counter = family.kind == "counter"
        named = family.name + ("_total" if counter and not openmetrics else "")
        lines.append(f"# HELP {named} {_escape_help(family.help, openmetrics)}")
        lines.append(f"# TYPE {named} {family.kind}")
        sample = family.name + ("_total" if counter else "")
        for labels, value in family.samples:
            shown = ",".join(f'{k}="{_escape_label(str(v))}"' for k, v in labels.items())
            lines.append(f"{sample}{{{shown}}} {_number(value)}" if shown
                         else f"{sample} {_number(value)}")
    if openmetrics:
        lines.append("# EOF")
    return "\n".join(lines) + "\n"


def exposition(status: Mapping[str, Any], openmetrics: bool = False) -> str:
    """The text format (or OpenMetrics) for a ``router_status`` picture."""
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
    family("throttled", "counter", "notifications dropped because their publisher was over "
           "its publish limit (publish-rate)").add(counters.get("throttled", 0))
    _clients(status, family)
    refused = family("refused", "counter",
                     "sockets, channels and requests refused by the router's limits, by kind")
    for kind, value in sorted((counters.get("refused") or {}).items()):
        refused.add(value, kind=kind)
    door = status.get("door") or {}
    family("pre_session_sockets", "gauge", "sockets that have not sent ConnRqst yet").add(
        door.get("pre_session", 0))
    family("partial_frame_bytes", "gauge", "bytes held in unfinished frames").add(
        door.get("partial_bytes", 0))
    family("open_files", "gauge", "descriptors in use (-1: unknown)").add(
        door.get("descriptors", -1))
    family("open_files_limit", "gauge", "the soft open-files limit (-1: unknown)").add(
        door.get("descriptor_limit", -1))
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
    storage = (mobility or {}).get("storage") or {}
    family("mobility_storage_failing", "gauge",
           "1 while the mobility proxy cannot write its buffers (full or failing disk)").add(
        1 if storage.get("state") == "failing" else 0)
    family("mobility_dropped", "gauge",
           "notifications the moved-out clients lost (quota, full disk, damage)").add(
        storage.get("dropped", 0))
    # damage found at start (a ledger or state file that did not read back
    # whole): logged once, and kept here so that an alert needs no log scan
    family("mobility_storage_damaged", "gauge",
           "damage the mobility proxy found in its state files at start (one per damaged "
           "file: see the status's storage warnings)").add(
        len(storage.get("warnings") or ()))
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
    expiry = family("tls_certificate_expiry_timestamp_seconds", "gauge",
                    "when each TLS certificate the router uses expires (Unix time)")
    for cert in status.get("certificates") or []:
        expiry.add(float(cert.get("not_after") or 0), what=str(cert.get("what")),
                   file=str(cert.get("file")))
    return _render(families, openmetrics)


#: the figures shown for each of the busiest clients: (status key, help)
_CLIENT_FIGURES = (
    ("notifications_in", "notifications received from the client"),
    ("bytes_in", "bytes received from the client"),
    ("notifications_out", "NotifyDeliver packets queued to the client"),
    ("bytes_out", "bytes queued to the client"),
    ("drops", "packets dropped from the client's full send queue"),
    ("throttled", "the client's notifications dropped by the publish limit"),
    ("subscriptions", "the client's subscriptions now"),
    ("match_seconds", "seconds spent matching the client's notifications"))


def _clients(status: Mapping[str, Any], family: Callable[[str, str, str], _Family]) -> None:
    """The busiest clients' figures, labelled ``client="HOST:PORT"``:
    bounded (``elvin.router.clientstats.TOP_CLIENTS`` series a family, the
    set changing as clients get busier), so gauges of the figures since each
    client connected, not counters."""
    rows = status.get("clients") or []
    for key, help_text in _CLIENT_FIGURES:
        f = family(f"client_{key}", "gauge",
                   f"{help_text}, since it connected (the busiest clients only)")
        for row in rows:
            f.add(row.get(key, 0), client=str(row.get("client")))


class MetricsServer:
    """``GET /metrics`` on ``host:port``, answered from ``snapshot()``."""

    def __init__(self, host: str, port: int, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self.host = host
        self.port = port
        self.snapshot = snapshot
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[Any]] = set()

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
            except (TimeoutError, Exception):  # closing anyway
                log.debug("metrics: the listener did not close cleanly", exc_info=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        try:
            reply = await self._answer(reader)
            head = (f"HTTP/1.0 {reply.status}\r\nContent-Type: {reply.kind}\r\n"
                    f"Content-Length: {len(reply.body)}\r\n"
                    + (f"Allow: {ALLOWED}\r\n" if reply.status.startswith("405") else "")
                    + "Connection: close\r\n\r\n")
            # HEAD: the headers GET would have, Content-Length included, no body
            writer.write(head.encode("ascii") + (b"" if reply.head_only else reply.body))
            await asyncio.wait_for(writer.drain(), REQUEST_TIMEOUT)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            if task is not None:
                self._clients.discard(task)

    async def _answer(self, reader: asyncio.StreamReader) -> _Reply:
        plain = "text/plain; charset=utf-8"
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        except asyncio.LimitOverrunError:
            return _Reply("431 Request Header Fields Too Large", b"request too large\n", plain)
        except (asyncio.IncompleteReadError, TimeoutError):
            return _Reply("400 Bad Request", b"incomplete request\n", plain)
        request_line, _, header_text = head.partition(b"\r\n")
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return _Reply("400 Bad Request", b"not an HTTP request\n", plain)
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            return _Reply("405 Method Not Allowed", f"only {ALLOWED}\n".encode(), plain)
        head_only = method == b"HEAD"
        if target == b"/":
            return _Reply("200 OK", b"elvind: the metrics are at /metrics\n", plain, head_only)
        if target != b"/metrics":
            return _Reply("404 Not Found", b"not found: try /metrics\n", plain, head_only)
        openmetrics = wants_openmetrics(_header(header_text, b"accept"))
        try:
            text = exposition(self.snapshot(), openmetrics)
        except Exception:  # a scrape must never hurt the router
            log.exception("building the metrics failed")
            return _Reply("500 Internal Server Error",
                          b"cannot build the metrics (see the log)\n", plain, head_only)
        return _Reply("200 OK", text.encode("utf-8"),
                      OPENMETRICS_CONTENT_TYPE if openmetrics else CONTENT_TYPE, head_only)


class _Reply(NamedTuple):
    status: str
    body: bytes
    kind: str
    head_only: bool = False


def _header(text: bytes, name: bytes) -> str:
    """The value of header ``name`` (lower case) in the request's header
    lines, several joined with commas as HTTP allows; "" when absent."""
    values = []
    for line in text.split(b"\r\n"):
        key, sep, value = line.partition(b":")
        if sep and key.strip().lower() == name:
            values.append(value.strip().decode("latin-1"))
    return ", ".join(values)


def wants_openmetrics(accept: str) -> bool:
    """Whether an ``Accept`` header prefers OpenMetrics to the 0.0.4 text
    format: OpenMetrics when it is offered with a quality at least that of
    ``text/plain`` (Prometheus asks for it first, at q=1); 0.0.4 for no
    header, ``*/*`` or a browser."""
    best = {"openmetrics": -1.0, "text": -1.0}
    for item in accept.split(","):
        kind, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        kind = kind.lower()
        which = ("openmetrics" if kind == "application/openmetrics-text" else
                 "text" if kind in ("text/plain", "text/*", "*/*") else None)
        if which is not None and quality > 0:
            best[which] = max(best[which], quality)
    return best["openmetrics"] >= 0 and best["openmetrics"] >= best["text"]
