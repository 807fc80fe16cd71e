"""From feed bytes to notification attributes.

``parse_feed`` runs feedparser (RSS 0.9x/1.0/2.0, Atom 0.3/1.0, and broken
markup it can recover) and returns :class:`Article` s, oldest first, so the
ticker shows them in the order they were written. ``notifications`` turns one
article into the notifications the daemon sends: one per group of the feed,
each with the documented ``News-*`` attributes and the Tickertape Chat
Protocol v3 attributes (Group, From, Message, Message-Id, Attachment as a
``text/uri-list`` MIME document, Timeout, User-Agent,
org.tickertape.message) so that a tickertape shows it with no extra work.

Feeds come from strangers: text is stripped of markup and control characters,
cut to sane lengths (the router refuses huge strings), and links that are not
http(s) are not attached (a click must not open a local file a feed chose).
"""

from __future__ import annotations

import calendar
import hashlib
import html
import html.parser
import re
import time
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from elvin_apps.newswatcher import USER_AGENT
from elvin_apps.newswatcher.config import FeedConfig

from elvin.values import Int64

__all__ = ["Article", "FeedError", "ParsedFeed", "article_id", "notifications",
           "parse_feed", "FEED_ATTRIBUTES", "PRODUCED", "TICKERTAPE_VERSION"]

TICKERTAPE_VERSION = 3001
MAX_TITLE = 500
MAX_SUMMARY = 1000
MAX_FIELD = 300
MAX_LINK = 2048
MAX_ID = 1024
MAX_CATEGORIES = 30

#: Every attribute a newswatcher notification can carry: the names the
#: quench is registered on, and the only names it can ever have (any other
#: name in a subscription is absent from our notifications, see selection).
PRODUCED = frozenset({
    "News-Feed", "News-Feed-URL", "News-Id", "News-Title", "News-Author", "News-Link",
    "News-Summary", "News-Categories", "News-Published",
    "Group", "From", "Message", "Message-Id", "Attachment", "Timeout", "User-Agent",
    "org.tickertape.message",
})

#: The attributes whose values are fixed per feed (known before fetching it).
FEED_ATTRIBUTES = ("News-Feed", "News-Feed-URL", "Group", "From", "Timeout", "User-Agent",
                   "org.tickertape.message")


class FeedError(Exception):
    """The document is not a feed we can read (malformed beyond recovery,
    HTML, empty...)."""


@dataclass(frozen=True)
class Article:
    id: str
    title: str
    link: str | None = None
    author: str | None = None
    summary: str | None = None
    categories: tuple[str, ...] = ()
    published: int | None = None     # epoch seconds (UTC)


@dataclass(frozen=True)
class ParsedFeed:
    title: str
    articles: list[Article]
    warning: str | None = None       # feedparser recovered from bad markup


def parse_feed(body: bytes, url: str = "", content_type: str | None = None) -> ParsedFeed:
    """Parse a feed document. CPU-bound: the daemon runs it in a thread.

    Raises :class:`FeedError` when feedparser finds neither a feed nor any
    entry (a well-formed but empty feed is fine: no articles).
    """
    import feedparser

    headers = {"content-location": url}
    if content_type:
        headers["content-type"] = content_type
    try:
        parsed = feedparser.parse(body, response_headers=headers,
                                  sanitize_html=True, resolve_relative_uris=True)
    except Exception as exc:  # noqa: BLE001 - feedparser on hostile input
        raise FeedError(f"feedparser failed: {exc}") from None
    warning = None
    problem = parsed.get("bozo_exception") if parsed.get("bozo") else None
    if parsed.get("bozo") and type(problem).__name__ not in _BENIGN:
        warning = f"{type(problem).__name__}: {problem}" if problem else "malformed feed"
        if not parsed.entries and not parsed.get("version"):
            raise FeedError(f"not a feed ({warning})")
        if _truncated(problem):
            # feedparser's loose parser would still guess entries from the
            # part it got; publishing half an item would make it permanent
            # (dedup), so wait for the whole document
            raise FeedError(f"incomplete XML document ({warning})")
    if not parsed.get("version") and not parsed.entries:
        raise FeedError("not a feed (no RSS or Atom root element)")
    articles = [_article(entry) for entry in parsed.entries]
    articles.reverse()                       # feeds list newest first
    if articles and all(a.published is not None for a in articles):
        articles.sort(key=lambda a: a.published)   # stable: ties keep document order
    title = _text(parsed.feed.get("title", ""), MAX_FIELD)
    return ParsedFeed(title, articles, warning)


#: bozo reasons that say nothing about the content (a server's wrong
#: Content-Type, an encoding declared twice): not worth a warning.
_BENIGN = frozenset({"NonXMLContentType", "CharacterEncodingOverride"})
#: expat's words for a document that stops inside an element or a tag.
_TRUNCATED = ("no element found", "unclosed token", "unclosed cdata section")


def _truncated(problem: object) -> bool:
    """Is this parse error a document cut short (as opposed to a sloppy but
    complete one, like an unescaped ``&``, which feedparser recovers well)?"""
    text = str(problem).lower()
    return type(problem).__name__ == "SAXParseException" and any(t in text for t in _TRUNCATED)


def article_id(entry: Mapping) -> str:
    """The dedup key: the entry's id (guid), else its link, else a hash of
    its title and summary (a feed with neither id nor link still must not
    repeat itself)."""
    for key in ("id", "link"):
        value = entry.get(key)
        if isinstance(value, str) and value.strip():
            return _valid(value.strip()[:MAX_ID])
    digest = hashlib.sha1()
    for key in ("title", "summary"):
        digest.update(str(entry.get(key, "")).encode("utf-8", "replace") + b"\0")
    return "sha1:" + digest.hexdigest()


def _article(entry: Mapping) -> Article:
    title = _text(entry.get("title", ""), MAX_TITLE)
    summary = _plain(entry.get("summary", "") or _content(entry), MAX_SUMMARY) or None
    author = _text(entry.get("author", ""), MAX_FIELD) or None
    link = _link(entry.get("link"))
    categories = []
    for tag in entry.get("tags", []) or []:
        term = tag.get("term") if isinstance(tag, Mapping) else None
        term = _text(term or "", 100).replace("|", "/").lower()
        if term and term not in categories:
            categories.append(term)
    return Article(article_id(entry), title, link, author, summary,
                   tuple(categories[:MAX_CATEGORIES]), _published(entry))


def _content(entry: Mapping) -> str:
    content = entry.get("content")
    if isinstance(content, list) and content and isinstance(content[0], Mapping):
        return str(content[0].get("value", ""))
    return ""


def _published(entry: Mapping) -> int | None:
    for key in ("published_parsed", "updated_parsed", "created_parsed"):
        value = entry.get(key)
        if isinstance(value, time.struct_time):
            try:
                return calendar.timegm(value)
            except (OverflowError, ValueError):
                continue
    return None


def _valid(text: str) -> str:
    """Elvin strings are UTF-8: lone surrogates (which XML parsers can hand
    over from bad character references) become U+FFFD."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _link(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    value = _valid(value.strip())
    if not value or len(value) > MAX_LINK or any(c.isspace() or ord(c) < 32 for c in value):
        return None
    return value


_SPACE = re.compile(r"\s+")


def _text(value: object, limit: int) -> str:
    """One line of clean text: entities decoded, control characters and
    runs of whitespace collapsed, lone surrogates replaced, cut at ``limit``."""
    if not isinstance(value, str):
        value = "" if value is None else str(value)
    value = html.unescape(value)
    value = "".join(" " if unicodedata.category(c) in ("Cc", "Cs") else c for c in value)
    value = _SPACE.sub(" ", value).strip()
    if len(value) > limit:
        value = value[:limit - 1].rstrip() + "\u2026"
    return value


class _TextOnly(html.parser.HTMLParser):
    _SKIP = {"script", "style"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag in ("br", "p", "div", "li"):
            self.parts.append(" ")

    def handle_endtag(self, tag) -> None:
        if tag in self._SKIP and self._skip:
            self._skip -= 1

    def handle_data(self, data) -> None:
        if not self._skip:
            self.parts.append(data)


def _plain(value: object, limit: int) -> str:
    """Summaries are HTML: keep the text, drop the markup."""
    if not isinstance(value, str) or not value:
        return ""
    if "<" in value:
        parser = _TextOnly()
        try:
            parser.feed(value[:200_000])
            parser.close()
            value = "".join(parser.parts)
        except Exception:  # noqa: BLE001, S110 - any parser failure: fall back to the raw text
            pass
    return _text(value, limit)


def uri_list_attachment(link: str) -> str:
    """The protocol's URL attachment: a MIME document of type text/uri-list."""
    return f"MIME-Version: 1.0\r\nContent-Type: text/uri-list\r\n\r\n{link}\r\n"


def message_id(feed: FeedConfig, article: Article, group: str) -> str:
    """Globally unique and stable: the same article in the same group always
    gets the same id (a re-publication after a crash is recognisable), and
    the protocol's advice to hash the inputs is followed."""
    key = f"{feed.url}\n{article.id}\n{group}".encode("utf-8", "replace")
    return hashlib.sha1(key).hexdigest()


def feed_attributes(feed: FeedConfig, group: str) -> dict[str, object]:
    """The attributes that are the same for every article of ``feed`` in
    ``group``: what the quench analysis knows before fetching."""
    return {
        "News-Feed": feed.name,
        "News-Feed-URL": feed.url,
        "Group": group,
        "From": feed.from_,
        "Timeout": feed.timeout,
        "User-Agent": USER_AGENT,
        "org.tickertape.message": TICKERTAPE_VERSION,
    }


def notifications(article: Article, feed: FeedConfig, *, now: float | None = None,
                  groups: Iterable[str] | None = None) -> list[dict[str, object]]:
    """The notifications for one article: one per group of the feed (a
    tickertape subscribes by Group, and a Group holds one name)."""
    published = article.published if article.published is not None else int(
        now if now is not None else time.time())
    message = article.title or (article.summary or "")[:200] or article.link or "(untitled)"
    common: dict[str, object] = {
        "News-Id": article.id,
        "News-Title": article.title,
        "News-Published": Int64(published),
        "Message": message,
    }
    if article.link:
        common["News-Link"] = article.link
        if urlsplit(article.link).scheme.lower() in ("http", "https"):
            common["Attachment"] = uri_list_attachment(article.link)
    if article.author:
        common["News-Author"] = article.author
    if article.summary:
        common["News-Summary"] = article.summary
    if article.categories:
        common["News-Categories"] = "|" + "|".join(article.categories) + "|"
    out = []
    for group in (groups if groups is not None else feed.groups):
        attrs = feed_attributes(feed, group)
        attrs.update(common)
        attrs["Message-Id"] = message_id(feed, article, group)
        out.append(attrs)
    return out
