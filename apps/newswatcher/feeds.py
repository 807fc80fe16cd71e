"""Fetching feeds: HTTP/1.1 on asyncio streams, and local files.

Why not urllib in a thread: a feed that trickles one byte a minute would pin
a worker thread for as long as the socket timeout allows, and a whole-request
deadline cannot be enforced from outside a blocking call. On asyncio streams
``asyncio.timeout`` bounds the whole request (connect to last byte) and
cancelling it closes the socket. The client is deliberately small: GET only,
``Connection: close``, chunked and gzip/deflate bodies, redirects, TLS with
certificate checks.

Being a good citizen is part of the job (a newswatcher polls the same sites
for months):

* conditional GET: ``If-None-Match`` / ``If-Modified-Since`` from the last
  200, so an unchanged feed costs a 304 and no body;
* a size cap, checked against ``Content-Length`` before reading and while
  reading (and while inflating, against compression bombs);
* per-host politeness: a minimum interval between request starts to one host
  and a cap on requests in flight to it (:class:`HostLimiter`);
* exponential backoff with jitter after errors (:func:`backoff_delay`),
  honouring ``Retry-After`` on 429/503.

Local feeds (``file://`` URLs) use the file's size and mtime as the
validator, so an unchanged file is "not modified" like a 304.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import random
import ssl
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from elvin_apps.newswatcher.config import HttpSettings

log = logging.getLogger("elvin_apps.newswatcher.feeds")

__all__ = ["FetchError", "FetchResult", "Fetcher", "FetchStats", "HostLimiter",
           "backoff_delay"]

ACCEPT = ("application/rss+xml, application/atom+xml, application/rdf+xml;q=0.9, "
          "application/xml;q=0.9, text/xml;q=0.9, */*;q=0.5")
MAX_HEADER_LINE = 16 * 1024
MAX_HEADERS = 200
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class FetchError(Exception):
    """A fetch failed. ``kind`` is one of ``"http"`` (an error status),
    ``"timeout"``, ``"too-large"``, ``"network"``, ``"protocol"`` (a reply we
    cannot read), ``"file"``; ``retry_after`` is the server's Retry-After in
    seconds, when it gave one."""

    def __init__(self, kind: str, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after


@dataclass
class FetchResult:
    """``status`` is 200 (``body`` holds the decoded bytes) or 304 (not
    modified, no body). ``etag`` / ``last_modified`` are the validators to
    send next time; ``url`` is the final URL after redirects."""

    status: int
    url: str
    body: bytes = b""
    etag: str | None = None
    last_modified: str | None = None
    content_type: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.status == 304


@dataclass
class FetchStats:
    """Counters for the status file and the bench."""

    requests: int = 0         # HTTP requests sent (each redirect hop counts) + file reads
    ok: int = 0
    not_modified: int = 0
    errors: int = 0
    bytes: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"requests": self.requests, "ok": self.ok, "not_modified": self.not_modified,
                "errors": self.errors, "bytes": self.bytes, "errors_by_kind": dict(self.by_kind)}


def backoff_delay(errors: int, settings: HttpSettings, *, interval: float = 0.0,
                  retry_after: float | None = None, rng: random.Random | None = None) -> float:
    """Seconds to wait after the ``errors``-th consecutive failure.

    ``base * 2**(errors-1)`` where ``base`` is the larger of the feed's
    ``interval`` and ``backoff_initial`` (a failing feed is never retried
    sooner than it would be polled), capped at ``backoff_max`` (or the
    interval, if that is longer), with +-10 % jitter so that feeds that failed
    together (one dead host) do not retry in lockstep. A server's Retry-After
    is honoured up to the cap.
    """
    errors = max(1, errors)
    base = max(interval, settings.backoff_initial)
    cap = max(settings.backoff_max, interval)
    delay = min(cap, base * 2.0 ** min(errors - 1, 40))
    delay *= 1.0 + ((rng or random).random() * 0.2 - 0.1)
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap))
    return max(0.0, delay)


class HostLimiter:
    """Politeness per host: at most ``max_per_host`` requests in flight and
    at least ``min_interval`` seconds between request starts.

    ``slot(host)`` is an async context manager held for the whole request.
    Start times are reserved in order under a per-host lock, so N feeds on
    one host are spread out instead of hitting it together when they fall due
    at the same moment."""

    def __init__(self, min_interval: float, max_per_host: int) -> None:
        self.min_interval = min_interval
        self.max_per_host = max_per_host
        self._hosts: dict[str, _Host] = {}

    def _host(self, host: str) -> _Host:
        entry = self._hosts.get(host)
        if entry is None:
            entry = self._hosts[host] = _Host(asyncio.Semaphore(self.max_per_host),
                                              asyncio.Lock())
        return entry

    @contextlib.asynccontextmanager
    async def slot(self, host: str) -> AsyncIterator[None]:
        entry = self._host(host.lower())
        async with entry.semaphore:
            async with entry.lock:
                loop = asyncio.get_running_loop()
                wait = entry.next_start - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                entry.next_start = loop.time() + self.min_interval
            yield


@dataclass
class _Host:
    semaphore: asyncio.Semaphore
    lock: asyncio.Lock
    next_start: float = 0.0


class Fetcher:
    """Fetches one URL at a time per call; share one instance so that the
    politeness and concurrency limits and the counters are daemon-wide."""

    def __init__(self, settings: HttpSettings, *, ssl_context: ssl.SSLContext | None = None
                 ) -> None:
        self.settings = settings
        self.limiter = HostLimiter(settings.min_host_interval, settings.max_per_host)
        self.stats = FetchStats()
        self._global = asyncio.Semaphore(settings.max_concurrent)
        self._ssl = ssl_context

    async def fetch(self, url: str, *, etag: str | None = None,
                    last_modified: str | None = None) -> FetchResult:
        """GET ``url`` conditionally. Raises :class:`FetchError`."""
        try:
            result = await self._fetch(url, etag, last_modified)
        except FetchError as exc:
            self.stats.errors += 1
            self.stats.by_kind[exc.kind] = self.stats.by_kind.get(exc.kind, 0) + 1
            raise
        if result.not_modified:
            self.stats.not_modified += 1
        else:
            self.stats.ok += 1
            self.stats.bytes += len(result.body)
        return result

    async def _fetch(self, url: str, etag: str | None, last_modified: str | None
                     ) -> FetchResult:
        scheme = urlsplit(url).scheme.lower()
        if scheme == "file":
            self.stats.requests += 1
            return await read_file(url, etag, self.settings.max_bytes)
        if scheme not in ("http", "https"):
            raise FetchError("protocol", f"unsupported URL scheme in {url!r}")
        async with self._global:
            for _hop in range(self.settings.max_redirects + 1):
                host = urlsplit(url).hostname or ""
                async with self.limiter.slot(host):
                    self.stats.requests += 1
                    try:
                        async with asyncio.timeout(self.settings.timeout):
                            status, headers, body = await self._request(url, etag,
                                                                        last_modified)
                    except TimeoutError:
                        raise FetchError("timeout", f"no complete answer within "
                                                    f"{self.settings.timeout:g}s") from None
                if status in _REDIRECTS and "location" in headers:
                    url = urljoin(url, headers["location"].strip())
                    if urlsplit(url).scheme.lower() not in ("http", "https"):
                        raise FetchError("protocol", f"redirect to unsupported URL {url!r}")
                    continue
                if status == 304:
                    return FetchResult(304, url, etag=headers.get("etag", etag),
                                       last_modified=headers.get("last-modified",
                                                                 last_modified))
                if 200 <= status < 300:
                    return FetchResult(200, url, body, headers.get("etag"),
                                       headers.get("last-modified"),
                                       headers.get("content-type"))
                raise FetchError("http", f"HTTP {status}", status=status,
                                 retry_after=_retry_after(headers.get("retry-after")))
            raise FetchError("http", f"more than {self.settings.max_redirects} redirects")

    async def _request(self, url: str, etag: str | None, last_modified: str | None
                       ) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(url)
        https = parts.scheme.lower() == "https"
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if https else 80)
        except ValueError:
            raise FetchError("protocol", f"bad port in {url!r}") from None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = parts.netloc.rsplit("@", 1)[-1]
        lines = [f"GET {target} HTTP/1.1", f"Host: {host_header}",
                 f"User-Agent: {self.settings.user_agent}", f"Accept: {ACCEPT}",
                 "Accept-Encoding: gzip, deflate", "Connection: close"]
        if etag:
            lines.append(f"If-None-Match: {etag}")
        if last_modified:
            lines.append(f"If-Modified-Since: {last_modified}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
        ssl_ctx = (self._ssl or ssl.create_default_context()) if https else None
        try:
            reader, writer = await asyncio.open_connection(
                host, port, ssl=ssl_ctx, server_hostname=host if https else None,
                limit=MAX_HEADER_LINE)
        except (OSError, ssl.SSLError) as exc:
            raise FetchError("network", f"cannot connect to {host}:{port}: "
                                        f"{getattr(exc, 'strerror', None) or exc}") from None
        try:
            writer.write(request)
            await writer.drain()
            status, headers = await _read_head(reader)
            while 100 <= status < 200:          # 100 Continue and friends
                status, headers = await _read_head(reader)
            if status in (204, 304) or status in _REDIRECTS:
                return status, headers, b""
            if not 200 <= status < 300:
                return status, headers, b""     # error bodies are not read
            body = await _read_body(reader, headers, self.settings.max_bytes)
            return status, headers, _decode(body, headers.get("content-encoding", ""),
                                            self.settings.max_bytes)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError) as exc:
            raise FetchError("network", f"connection to {host} failed: {exc}") from None
        finally:
            writer.close()
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await asyncio.wait_for(writer.wait_closed(), 1.0)


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise FetchError("protocol", "header line too long") from None
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise FetchError("network", "connection closed before the reply") from None
        raise FetchError("protocol", "connection closed in the reply headers") from None


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = (await _read_line(reader)).decode("latin-1").strip()
    fields = status_line.split(None, 2)
    if len(fields) < 2 or not fields[0].startswith("HTTP/") or not fields[1].isdigit():
        raise FetchError("protocol", f"not an HTTP reply: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        line = (await _read_line(reader)).decode("latin-1").strip()
        if not line:
            return int(fields[1]), headers
        name, sep, value = line.partition(":")
        if not sep:
            continue
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    raise FetchError("protocol", f"more than {MAX_HEADERS} header lines")


def _too_large(limit: int) -> FetchError:
    return FetchError("too-large", f"response larger than {limit} bytes")


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str], limit: int
                     ) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        total = 0
        while True:
            size_line = (await _read_line(reader)).split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise FetchError("protocol", f"bad chunk size {size_line[:20]!r}") from None
            if size == 0:
                break
            total += size
            if total > limit:
                raise _too_large(limit)
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        return b"".join(chunks)
    length = headers.get("content-length")
    if length is not None:
        try:
            size = int(length)
        except ValueError:
            raise FetchError("protocol", f"bad Content-Length {length[:20]!r}") from None
        if size > limit:
            raise _too_large(limit)
        return await reader.readexactly(size)
    data = bytearray()
    while chunk := await reader.read(65536):
        data += chunk
        if len(data) > limit:
            raise _too_large(limit)
    return bytes(data)


def _decode(body: bytes, encoding: str, limit: int) -> bytes:
    """Undo gzip/deflate, refusing to inflate past ``limit`` bytes."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        inflater = zlib.decompressobj()
    else:
        raise FetchError("protocol", f"unsupported Content-Encoding {encoding!r}")
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise FetchError("protocol", f"bad {encoding} body: {exc}") from None
    if len(data) > limit or inflater.unconsumed_tail:
        raise _too_large(limit)
    return data


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    with contextlib.suppress(TypeError, ValueError, IndexError, OverflowError):
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    return None


async def read_file(url: str, etag: str | None, limit: int) -> FetchResult:
    """A local feed; size and mtime stand in for an ETag."""
    path = Path(unquote(urlsplit(url).path))

    def read() -> FetchResult:
        try:
            info = path.stat()
            validator = f'"file-{info.st_mtime_ns}-{info.st_size}"'
            if etag == validator:
                return FetchResult(304, url, etag=etag)
            if info.st_size > limit:
                raise _too_large(limit)
            with open(path, "rb") as fh:
                data = fh.read(limit + 1)
        except OSError as exc:
            raise FetchError("file", f"cannot read {path}: {exc.strerror or exc}") from None
        if len(data) > limit:
            raise _too_large(limit)
        return FetchResult(200, url, data, validator)

    return await asyncio.to_thread(read)
