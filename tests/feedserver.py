"""A local feed server for the newswatcher's tests and benchmark.

A fixture, not part of the app: it lives with the tests, and
``bench/newswatcher.py`` imports it as ``tests.feedserver`` (the repository
is on its path).

``http.server`` in a thread on 127.0.0.1 (never another interface), serving
feeds held in memory with real ETag / Last-Modified handling, plus the
misbehaviours a newswatcher must survive: a delay before answering (a slow
server), an error status, a body larger than announced limits. Every request
is logged (path, status, If-None-Match sent or not), so a test can prove
what was fetched and what was not.

``rss()`` and ``atom()`` write small but complete feed documents.
"""

from __future__ import annotations

import email.utils
import gzip
import hashlib
import http.server
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from xml.sax.saxutils import escape

__all__ = ["FeedServer", "Item", "Logged", "atom", "rss"]


@dataclass(frozen=True)
class Item:
    id: str
    title: str
    link: str = ""
    author: str = ""
    summary: str = ""
    categories: tuple[str, ...] = ()
    published: int | None = None


def rss(title: str, items: Iterable[Item], link: str = "http://example.org/") -> str:
    """An RSS 2.0 document (items as given, conventionally newest first)."""
    parts = ['<?xml version="1.0" encoding="utf-8"?>',
             '<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel>',
             f"<title>{escape(title)}</title><link>{escape(link)}</link>"
             f"<description>{escape(title)}</description>"]
    for item in items:
        parts.append("<item>")
        parts.append(f'<guid isPermaLink="false">{escape(item.id)}</guid>')
        parts.append(f"<title>{escape(item.title)}</title>")
        if item.link:
            parts.append(f"<link>{escape(item.link)}</link>")
        if item.author:
            parts.append(f"<dc:creator>{escape(item.author)}</dc:creator>")
        if item.summary:
            parts.append(f"<description>{escape(item.summary)}</description>")
        for category in item.categories:
            parts.append(f"<category>{escape(category)}</category>")
        if item.published is not None:
            parts.append(f"<pubDate>{email.utils.formatdate(item.published, usegmt=True)}"
                         f"</pubDate>")
        parts.append("</item>")
    parts.append("</channel></rss>")
    return "\n".join(parts)


def atom(title: str, items: Iterable[Item], feed_id: str = "urn:example:feed") -> str:
    """An Atom 1.0 document."""
    def stamp(epoch: int | None) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch or 0))

    items = list(items)
    updated = max((i.published or 0 for i in items), default=0)
    parts = ['<?xml version="1.0" encoding="utf-8"?>',
             '<feed xmlns="http://www.w3.org/2005/Atom">',
             f"<title>{escape(title)}</title><id>{escape(feed_id)}</id>"
             f"<updated>{stamp(updated)}</updated>"]
    for item in items:
        parts.append("<entry>")
        parts.append(f"<id>{escape(item.id)}</id><title>{escape(item.title)}</title>")
        if item.link:
            parts.append(f'<link rel="alternate" href="{escape(item.link)}"/>')
        if item.author:
            parts.append(f"<author><name>{escape(item.author)}</name></author>")
        if item.summary:
            parts.append(f'<summary type="html">{escape(item.summary)}</summary>')
        for category in item.categories:
            parts.append(f'<category term="{escape(category)}"/>')
        if item.published is not None:
            parts.append(f"<published>{stamp(item.published)}</published>"
                         f"<updated>{stamp(item.published)}</updated>")
        parts.append("</entry>")
    parts.append("</feed>")
    return "\n".join(parts)


@dataclass
class _Resource:
    body: bytes
    content_type: str
    etag: str | None
    last_modified: str | None
    status: int = 200
    delay: float = 0.0
    gzip: bool = False
    chunked: bool = False
    location: str | None = None


@dataclass(frozen=True)
class Logged:
    path: str
    status: int
    conditional: bool
    when: float


class FeedServer:
    """``with FeedServer() as server: server.set("/a.xml", rss(...))``."""

    def __init__(self) -> None:
        self._resources: dict[str, _Resource] = {}
        self._lock = threading.Lock()
        self.log: list[Logged] = []
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- content --------------------------------------------------------------
    def set(self, path: str, body: str | bytes, *, content_type: str = "application/rss+xml",
            status: int = 200, delay: float = 0.0, etag: bool = True,
            last_modified: bool = True, gzip: bool = False, chunked: bool = False) -> None:
        """Serve ``body`` at ``path``. ``delay`` seconds pass before the
        answer (a slow server); ``status`` other than 200 answers with no
        body; ``etag`` / ``last_modified`` say which validators to send."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        tag = f'"{hashlib.sha1(data).hexdigest()[:16]}"' if etag else None
        modified = email.utils.formatdate(time.time(), usegmt=True) if last_modified else None
        with self._lock:
            self._resources[path] = _Resource(data, content_type, tag, modified, status,
                                              delay, gzip, chunked)

    def redirect(self, path: str, target: str, status: int = 301) -> None:
        with self._lock:
            self._resources[path] = _Resource(b"", "text/plain", None, None, status,
                                              location=target)

    def remove(self, path: str) -> None:
        with self._lock:
            self._resources.pop(path, None)

    # -- the access log ---------------------------------------------------------
    def requests(self, path: str | None = None, status: int | None = None) -> list[Logged]:
        with self._lock:
            return [e for e in self.log if (path is None or e.path == path)
                    and (status is None or e.status == status)]

    def count(self, path: str | None = None, status: int | None = None) -> int:
        return len(self.requests(path, status))

    def counts(self) -> Mapping[str, int]:
        out: dict[str, int] = {}
        for entry in self.requests():
            out[entry.path] = out.get(entry.path, 0) + 1
        return out

    # -- lifecycle ----------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> FeedServer:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:   # quiet: the log list is the record
                pass

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with server._lock:
                    res = server._resources.get(path)
                conditional = bool(self.headers.get("If-None-Match")
                                   or self.headers.get("If-Modified-Since"))
                status = 404 if res is None else res.status
                if res is not None and status == 200 and _not_modified(self.headers, res):
                    status = 304
                with server._lock:
                    server.log.append(Logged(path, status, conditional, time.time()))
                if res is not None and res.delay:
                    time.sleep(res.delay)
                try:
                    self._answer(res, status)
                except (BrokenPipeError, ConnectionResetError):
                    pass          # the client gave up (timeout): fine

            def _answer(self, res: _Resource | None, status: int) -> None:
                self.send_response(status)
                if res is not None and res.etag:
                    self.send_header("ETag", res.etag)
                if res is not None and res.last_modified:
                    self.send_header("Last-Modified", res.last_modified)
                self.send_header("Connection", "close")
                if res is not None and res.location:
                    self.send_header("Location", res.location)
                if status != 200 or res is None:
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = res.body
                self.send_header("Content-Type", res.content_type)
                if res.gzip:
                    body = gzip.compress(body)
                    self.send_header("Content-Encoding", "gzip")
                if res.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for start in range(0, len(body), 4096):
                        chunk = body[start:start + 4096]
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                    return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="feedserver",
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FeedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _not_modified(headers, res: _Resource) -> bool:
    etag = headers.get("If-None-Match")
    if etag is not None:
        return res.etag is not None and res.etag in [t.strip() for t in etag.split(",")]
    since = headers.get("If-Modified-Since")
    if since and res.last_modified:
        try:
            return (email.utils.parsedate_to_datetime(res.last_modified)
                    <= email.utils.parsedate_to_datetime(since))
        except (TypeError, ValueError):
            return False
    return False
