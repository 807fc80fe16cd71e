"""The dedup store: which articles each feed has already published.

A small JSON file in the data dir, keyed by feed URL (renaming a feed in the
config must not republish it; pointing a name at another URL starts afresh).
Per feed it keeps the ids of recent articles, in the order seen, and the
HTTP validators (ETag, Last-Modified) so that conditional GET also works
after a restart. The ids are bounded (the newest ``max(MIN_KEEP, 3 x the
feed's size)``): an article that dropped out of a feed long ago and comes
back is rare, an ever-growing file is certain.

Writes are atomic (temporary file in the same directory, fsync, rename), so a
crash or a full disk leaves the old file or the new one, never half of one.
The daemon marks the store dirty after each poll and flushes it at most
once a second and on shutdown; a crash can therefore republish at most the
last second's articles, which the stable ``Message-Id`` lets consumers spot.
A corrupt file is set aside (``state.json.corrupt``) and the daemon starts
afresh rather than refusing to run; one it may not read stops the start
(``OSError``), since setting it aside would lose what it knows.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from elvin.fileutil import atomic_write

log = logging.getLogger("elvin_apps.newswatcher.state")

__all__ = ["FeedState", "StateStore", "atomic_write", "MIN_KEEP"]

MIN_KEEP = 500
VERSION = 1


@dataclass
class FeedState:
    seen: dict[str, None] = field(default_factory=dict)   # an ordered set
    etag: str | None = None
    last_modified: str | None = None
    last_success: float | None = None

    @property
    def first_poll(self) -> bool:
        """Never fetched successfully: its whole backlog counts as new, which
        a feed's ``initial_items`` can limit."""
        return self.last_success is None


class StateStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.feeds: dict[str, FeedState] = {}
        self.dirty = False

    # -- persistence ----------------------------------------------------------
    @classmethod
    def open(cls, path: Path) -> StateStore:
        store = cls(path)
        try:
            text = store.path.read_text("utf-8")
        except FileNotFoundError:
            return store
        # any other OSError (permission denied...) goes to the caller: the
        # file may be fine, and setting it aside would lose what it knows
        try:
            store.feeds = _decode(json.loads(text))
        except (ValueError, TypeError, AttributeError) as exc:
            aside = store.path.with_name(store.path.name + ".corrupt")
            log.error("state file %s is unreadable (%s); moved to %s, starting afresh",
                      store.path, exc, aside)
            try:
                os.replace(store.path, aside)
            except OSError:
                pass
        return store

    def save(self) -> None:
        data = {"version": VERSION, "saved": time.time(), "feeds": {
            url: {"seen": list(st.seen), "etag": st.etag, "last_modified": st.last_modified,
                  "last_success": st.last_success}
            for url, st in self.feeds.items()}}
        atomic_write(self.path, json.dumps(data, separators=(",", ":")).encode())
        self.dirty = False

    def flush(self) -> None:
        """Save if anything changed; log (do not raise) on failure, because
        losing dedup state is better than stopping the feeds."""
        if not self.dirty:
            return
        try:
            self.save()
        except OSError as exc:
            log.error("cannot write state file %s: %s", self.path, exc)

    # -- queries and updates ----------------------------------------------------
    def feed(self, url: str) -> FeedState:
        state = self.feeds.get(url)
        if state is None:
            state = self.feeds[url] = FeedState()
        return state

    def is_new(self, url: str, article_id: str) -> bool:
        state = self.feeds.get(url)
        return state is None or article_id not in state.seen

    def mark_seen(self, url: str, ids: Iterable[str]) -> None:
        seen = self.feed(url).seen
        for article_id in ids:
            seen.pop(article_id, None)
            seen[article_id] = None        # move to the newest end
        self.dirty = True

    def trim(self, url: str, feed_size: int) -> None:
        seen = self.feed(url).seen
        keep = max(MIN_KEEP, 3 * feed_size)
        if len(seen) > keep:
            for article_id in list(seen)[:len(seen) - keep]:
                del seen[article_id]
            self.dirty = True

    def set_validators(self, url: str, etag: str | None, last_modified: str | None,
                       when: float | None = None) -> None:
        state = self.feed(url)
        state.etag, state.last_modified = etag, last_modified
        state.last_success = time.time() if when is None else when
        self.dirty = True

    def forget_validators(self, url: str) -> None:
        state = self.feed(url)
        if state.etag or state.last_modified:
            state.etag = state.last_modified = None
            self.dirty = True


def _decode(raw: object) -> dict[str, FeedState]:
    if not isinstance(raw, dict) or not isinstance(raw.get("feeds"), dict):
        raise ValueError("not a newswatcher state file")
    feeds = {}
    for url, entry in raw["feeds"].items():
        seen = entry.get("seen", [])
        if not isinstance(seen, list):
            raise ValueError(f"feed {url}: 'seen' is not a list")
        feeds[url] = FeedState(
            dict.fromkeys(str(s) for s in seen),
            _opt_str(entry.get("etag")), _opt_str(entry.get("last_modified")),
            float(entry["last_success"]) if isinstance(entry.get("last_success"),
                                                       int | float) else None)
    return feeds


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


