"""MIME attachments of Tickertape messages: which URLs a message carries.

Protocol v3 puts a whole MIME document in ``Attachment`` (usually
``text/uri-list``, several objects as ``multipart/mixed``); older clients sent
``MIME_TYPE: "x-elvin/url"`` and the bare URL in ``MIME_ARGS``. Both arrive
from strangers, so parsing never raises and only URLs with a scheme we are
willing to hand to the desktop are returned: a click on a message must not
run a local program or open a local file that a sender chose (the protocol's
security considerations).
"""

from __future__ import annotations

import email.parser
import email.policy
from urllib.parse import urlsplit

#: Schemes a click may open with the desktop's handler.
SAFE_SCHEMES = frozenset({"http", "https", "ftp", "mailto", "gopher", "news"})

#: Attachments longer than this are not parsed (a denial-of-service guard).
MAX_ATTACHMENT = 256 * 1024
MAX_URLS = 20
_URL_TYPES = ("text/uri-list", "x-elvin/url", "text/x-url", "message/external-body")


def safe_url(text: str) -> str | None:
    """``text`` stripped, if it is a URL with a safe scheme and a target."""
    text = text.strip()
    if not text or len(text) > 4096 or any(ch.isspace() for ch in text):
        return None
    try:
        parts = urlsplit(text)
    except ValueError:
        return None
    if parts.scheme.lower() not in SAFE_SCHEMES:
        return None
    if parts.scheme.lower() == "mailto":
        return text if parts.path else None
    return text if parts.netloc else None


def _uri_list(body: str) -> list[str]:
    urls = []
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue  # RFC 2483: '#' lines are comments
        url = safe_url(line)
        if url:
            urls.append(url)
    return urls


def urls_from_mime(document: str) -> list[str]:
    """The safe URLs in a MIME ``Attachment`` value (text/uri-list parts)."""
    if not document or len(document) > MAX_ATTACHMENT:
        return []
    try:
        msg = email.parser.Parser(policy=email.policy.compat32).parsestr(document)
        urls: list[str] = []
        parts = msg.walk() if msg.is_multipart() else [msg]
        for part in parts:
            if part.is_multipart():
                continue
            ctype = part.get_content_type()
            if ctype not in _URL_TYPES and not (ctype == "text/plain" and part is msg
                                                and "content-type" not in msg):
                continue
            payload = part.get_payload(decode=True)
            if isinstance(payload, bytes):
                body = payload.decode(part.get_content_charset() or "utf-8", "replace")
            else:
                body = str(part.get_payload())
            urls.extend(_uri_list(body))
            if len(urls) >= MAX_URLS:
                break
        if not urls and "content-type" not in msg:
            # not MIME at all: some senders put a bare URL in Attachment
            urls = _uri_list(document)
        return list(dict.fromkeys(urls))[:MAX_URLS]
    except Exception:  # noqa: BLE001 - malformed MIME from the network: no URLs
        return []


def legacy_urls(mime_type: object, mime_args: object) -> list[str]:
    """URLs from the pre-v3 ``MIME_TYPE`` / ``MIME_ARGS`` pair."""
    if not isinstance(mime_args, str):
        return []
    if isinstance(mime_type, str) and mime_type.strip().lower() not in _URL_TYPES:
        return []
    url = safe_url(mime_args)
    return [url] if url else []


def uri_list_attachment(urls: list[str]) -> str:
    """A v3 ``Attachment`` value carrying ``urls`` as text/uri-list (as in the
    protocol's Appendix A, with CRLF line ends)."""
    body = "".join(f"{u}\r\n" for u in urls)
    return "MIME-Version: 1.0\r\nContent-Type: text/uri-list\r\n\r\n" + body
