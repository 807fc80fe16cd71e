"""The newswatcher service: quench in, feeds fetched, notifications out.

One :class:`FeedRunner` task per feed sleeps until its feed is *polled*
(``selection``: some subscription could match it, or scoop mode) and *due*
(its interval, or its backoff after errors, has passed), then fetches
(``feeds``), parses in a worker thread (feedparser is CPU-bound and must not
stall the Elvin connection's keepalives), publishes the new articles
(``articles``) and records them (``state``). A subscription that appears
wakes the runners of the feeds it could match, so polling starts at once
(or when the interval since the last poll has passed, whichever is later);
when the last such subscription goes, the runner stops before its next poll.

The connection uses auto-quench (``elvin.client``): after the feed-level
decision, each article is still dropped on the client when no subscription
can match it (``contains(News-Title, "python")`` keeps every feed polled but
only Python articles cross the network). Scoop mode turns both off.

Connection loss: the client reconnects by itself. While it is down every feed
goes idle (the router's subscriptions are unknown); after reconnection the
quench reports the subscriptions again and polling resumes. An article is
marked seen only once it was handed to the connection, so an outage in the
middle of a feed republishes nothing and loses nothing.

A router without quench (subset C is optional; Avis lacks it) refuses the
quench with ``QuenchNotSupported``: nothing says which feeds are wanted, so
the service falls back to scoop mode (every feed polled, every article sent:
auto-quench sends everything there too), says so once in the log and in the
status, and asks for quench again after each reconnection, returning to
quench-driven polling when the router has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from elvin_apps.newswatcher import __version__
from elvin_apps.newswatcher.articles import PRODUCED, Article, FeedError, notifications, parse_feed
from elvin_apps.newswatcher.config import Config, FeedConfig
from elvin_apps.newswatcher.feeds import Fetcher, FetchError, backoff_delay
from elvin_apps.newswatcher.selection import Selection
from elvin_apps.newswatcher.state import StateStore
from elvin_apps.newswatcher.status import NO_QUENCH_NOTE, STATUS_NAME, write_status

import elvin
from elvin.cli_common import os_error
from elvin.client import ConnectionClosedError, OptionalQuench
from elvin.daemon.daemon_control import ReloadRecord
from elvin.tasks import stop_task

log = logging.getLogger("elvin_apps.newswatcher")

__all__ = ["FeedRunner", "NewsWatcher", "STATE_NAME"]

STATE_NAME = "state.json"
RETRY_WHILE_DISCONNECTED = 5.0
STOP_TIMEOUT = 10.0          # a task that outlives its cancellation this long is left



@dataclass
class FeedStats:
    """Per-feed figures for the status file."""

    polls: int = 0
    ok: int = 0
    not_modified: int = 0
    errors: int = 0              # consecutive errors (reset by a success)
    failures: int = 0            # all errors since start
    published: int = 0           # notifications sent (after auto-quench)
    dropped: int = 0             # notifications auto-quench dropped
    articles: int = 0            # new articles handled
    last_poll: float | None = None
    last_result: str | None = None
    last_error: str | None = None


class FeedRunner:
    """Polls one feed while it is wanted. ``poke()`` makes it re-read the
    selection and its due time now (after a quench change or a reload)."""

    def __init__(self, watcher: NewsWatcher, feed: FeedConfig) -> None:
        self.watcher = watcher
        self.feed = feed
        self.stats = FeedStats()
        self.next_due = 0.0                 # loop time; 0: as soon as polled
        self.next_due_wall: float | None = None
        self._wake = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.busy = False

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"newswatcher feed {self.feed.name}")

    def poke(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        if self.task is not None:
            await stop_task(self.task, STOP_TIMEOUT, f"feed {self.feed.name}")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()
            if not self.watcher.selection.polled(self.feed.name):
                await self._wake.wait()
                continue
            delay = self.next_due - loop.time()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                continue                        # re-check: still polled? due?
            try:
                self.busy = True
                await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # one feed must never stop the others
                log.exception("feed %s: unexpected error", self.feed.name)
                self._failed("internal error (see log)", None)
            finally:
                self.busy = False
                self.watcher.changed()

    async def poll_once(self) -> None:
        """Fetch, parse, publish the new articles, record them."""
        w = self.watcher
        feed = self.feed
        loop = asyncio.get_running_loop()
        st = w.state.feed(feed.url)
        self.stats.polls += 1
        self.stats.last_poll = time.time()
        try:
            result = await w.fetcher.fetch(feed.url, etag=st.etag, last_modified=st.last_modified)
            if result.not_modified:
                self.stats.not_modified += 1
                summary = "304 not modified"
            else:
                parsed = await asyncio.to_thread(parse_feed, result.body, result.url,
                                                 result.content_type)
                if parsed.warning:
                    log.warning("feed %s: malformed, recovered %d entries: %s", feed.name,
                                len(parsed.articles), parsed.warning)
                new = self._new_articles(parsed.articles, st.first_poll)
                await w.publish(feed, new, self.stats)
                w.state.trim(feed.url, len(parsed.articles))
                w.state.set_validators(feed.url, result.etag, result.last_modified)
                summary = f"200: {len(new)} new of {len(parsed.articles)}"
                self.stats.articles += len(new)
                if new:
                    log.info("feed %s: %d new article(s)", feed.name, len(new))
        except (FetchError, FeedError) as exc:
            self._failed(str(exc), getattr(exc, "retry_after", None))
            return
        except ConnectionClosedError as exc:
            # the router is away: not the feed's fault; what was not sent is
            # not marked seen and goes out on the next poll
            log.warning("feed %s: not published, no router connection: %s", feed.name, exc)
            self.stats.last_result = "not published: no router connection"
            self.next_due = loop.time() + min(feed.interval, RETRY_WHILE_DISCONNECTED)
            self._set_wall()
            return
        self.stats.ok += 1
        self.stats.errors = 0
        self.stats.last_error = None
        self.stats.last_result = summary
        self.next_due = loop.time() + feed.interval
        self._set_wall()

    def _new_articles(self, articles: list[Article], first_poll: bool) -> list[Article]:
        url = self.feed.url
        state = self.watcher.state
        seen_now: set[str] = set()
        new = []
        for article in articles:
            if article.id in seen_now or not state.is_new(url, article.id):
                continue
            seen_now.add(article.id)
            new.append(article)
        limit = self.feed.initial_items
        if first_poll and limit is not None and len(new) > limit:
            skipped = new[:len(new) - limit]
            state.mark_seen(url, (a.id for a in skipped))   # backlog: seen, not news
            new = new[len(new) - limit:]
        return new

    def _failed(self, message: str, retry_after: float | None) -> None:
        loop = asyncio.get_running_loop()
        self.stats.errors += 1
        self.stats.failures += 1
        self.stats.last_error = message
        self.stats.last_result = f"error: {message}"
        delay = backoff_delay(self.stats.errors, self.watcher.config.http,
                              interval=self.feed.interval, retry_after=retry_after)
        self.next_due = loop.time() + delay
        self._set_wall()
        log.warning("feed %s (%s): %s; retrying in %.1fs (%d error(s) in a row)",
                    self.feed.name, self.feed.url, message, delay, self.stats.errors)

    def _set_wall(self) -> None:
        loop = asyncio.get_running_loop()
        self.next_due_wall = time.time() + max(0.0, self.next_due - loop.time())


class NewsWatcher:
    """The service. ``await start()`` connects (raising
    ``elvin.ConnectError`` when the router cannot be reached, ``ToolError``
    when its data directory cannot be used), registers the
    quench and starts the feed runners; ``await stop()`` undoes it all and
    leaves the state and status files up to date.

    ``extra_feeds`` are feeds from the command line (``--feed``), kept across
    reloads of the config file.
    """

    def __init__(self, config: Config, *, url: str | list[str], data_dir: Path,
                 scoop: bool | None = None, extra_feeds: list[FeedConfig] | None = None,
                 status_interval: float = 0.5, state_interval: float = 1.0,
                 connect_timeout: float = 10.0) -> None:
        self.config = config
        self.url = url
        self.data_dir = Path(data_dir)
        self.scoop = config.scoop if scoop is None else scoop
        self.extra_feeds = list(extra_feeds or [])
        self.status_interval = status_interval
        self.state_interval = state_interval
        self.connect_timeout = connect_timeout
        self.state = StateStore(self.data_dir / STATE_NAME)
        self.status_path = self.data_dir / STATUS_NAME
        self.fetcher: Fetcher | None = None
        self.selection = Selection(scoop=self.scoop, on_change=self._selection_changed)
        self.runners: dict[str, FeedRunner] = {}
        self.conn: elvin.Connection | None = None
        self._quench: OptionalQuench | None = None
        #: the router refused quench: scoop mode until one has it (module doc)
        self.published = 0
        self.dropped = 0
        self.suppressed = 0          # group copies no subscription still needed
        self.started = time.time()
        self._dirty = True
        self._tasks: list[asyncio.Task] = []
        self._background: set[asyncio.Task] = set()
        self._stopped = asyncio.Event()
        self._running = False
        #: the last SIGHUP's verdict, for ``newswatcher reload`` (elvin.daemon.daemon_control)
        self.reload_record = ReloadRecord()

    # -- feeds -------------------------------------------------------------------
    @property
    def feeds(self) -> list[FeedConfig]:
        names = {f.name for f in self.config.feeds}
        return list(self.config.feeds) + [f for f in self.extra_feeds if f.name not in names]

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.state = StateStore.open(self.data_dir / STATE_NAME)
        except OSError as exc:      # not the router's fault: say which file and why
            raise os_error("use", exc) from None
        self.fetcher = Fetcher(self.config.http)
        self.selection.set_feeds(self.feeds)
        self.conn = await elvin.connect(self.url, reconnect=True, auto_quench=not self.scoop,
                                        timeout=self.connect_timeout, reconnect_max_delay=10.0)
        self.conn.add_connection_lost_listener(self._lost)
        self.conn.add_reconnect_listener(self._reconnected)
        if not self.scoop:
            self._quench = OptionalQuench(self.conn, sorted(PRODUCED), listener=self._quench_event,
                                          on_change=self._quench_changed,
                                          fallback=NO_QUENCH_NOTE, logger=log,
                                          resumed="polling what the quench asks for")
            # existing subscriptions are reported through the listener before
            # ask() returns, so the first selection is complete here
            await self._quench.ask()
        self._running = True
        for feed in self.feeds:
            self._start_runner(feed)
        self._tasks = [asyncio.create_task(self._status_loop(), name="newswatcher status"),
                       asyncio.create_task(self._state_loop(), name="newswatcher state")]
        log.info("newswatcher %s: %d feed(s), %s, router %s", __version__, len(self.feeds),
                 "scoop mode" if self.scoop or self.no_quench
                 else "polling what the quench asks for", self.conn.url)
        self._write_status()

    async def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        for runner in list(self.runners.values()):
            await runner.stop()
        for task in self._tasks:
            await stop_task(task, STOP_TIMEOUT, task.get_name())
        if self._quench is not None:
            await self._quench.close()
        self.state.flush()
        if self.conn is not None:
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                await asyncio.wait_for(self.conn.close(), 5.0)
        self._write_status(running=False)
        self._stopped.set()
        log.info("newswatcher stopped: %d notification(s) published", self.published)

    async def __aenter__(self) -> NewsWatcher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- reload ----------------------------------------------------------------------
    def reload(self, config: Config) -> tuple[list[str], list[str]]:
        """Apply a re-read config: feeds added, removed or changed, HTTP
        settings. The router URL and scoop mode need a restart. Returns
        (what was applied, what needs a restart), as ``reload`` reports them."""
        applied: list[str] = []
        restart: list[str] = []
        if config.elvin != self.config.elvin and config.elvin:
            log.warning("reload: the router URL changed; restart the newswatcher to use it")
            restart.append("elvin")
        if config.scoop != self.config.scoop:
            restart.append("scoop")
        old = {f.name: f for f in self.feeds}
        if config.http != self.config.http:
            applied.append("[http]")
            stats = self.fetcher.stats if self.fetcher else None
            self.fetcher = Fetcher(config.http)
            if stats is not None:
                self.fetcher.stats = stats
        self.config = config
        new = {f.name: f for f in self.feeds}
        self.selection.set_feeds(new.values())
        for name in old.keys() - new.keys():
            runner = self.runners.pop(name)
            task = asyncio.create_task(runner.stop())
            self._background.add(task)              # the loop keeps only weak refs
            task.add_done_callback(self._background.discard)
            log.info("reload: feed %s removed", name)
            applied.append(f"feed {name} removed")
        for name, feed in new.items():
            if name not in old:
                self._start_runner(feed)
                log.info("reload: feed %s added (%s)", name, feed.url)
                applied.append(f"feed {name} added")
            elif feed != old[name]:
                runner = self.runners[name]
                if feed.url != old[name].url or feed.interval < old[name].interval:
                    runner.next_due = 0.0
                runner.feed = feed
                runner.poke()
                log.info("reload: feed %s changed", name)
                applied.append(f"feed {name} changed")
        self.changed()
        return applied, restart

    def _start_runner(self, feed: FeedConfig) -> None:
        runner = FeedRunner(self, feed)
        self.runners[feed.name] = runner
        if self._running:
            runner.start()

    # -- Elvin ------------------------------------------------------------------------
    def _quench_changed(self, available: bool) -> None:
        self.selection.set_scoop(not available)   # no quench: poll every feed
        self.changed()

    @property
    def quench(self) -> elvin.Quench | None:
        return self._quench.current if self._quench is not None else None

    @property
    def no_quench(self) -> bool:
        """The router has no quench: every feed is polled (scoop mode)."""
        return self._quench is not None and self._quench.refused

    def _quench_event(self, event) -> None:
        self.selection.apply(event)
        self.changed()

    def _selection_changed(self, names: set[str]) -> None:
        for name in sorted(names):
            runner = self.runners.get(name)
            if runner is not None:
                runner.poke()
            choice = self.selection.choice(name)
            if choice.polled:
                why = "scoop mode" if choice.scoop else ", ".join(
                    f"term {t}: {self.selection.expression(t, 80)}" for t in choice.terms[:3])
                log.info("feed %s: polled (%s)", name, why)
            elif runner is not None:
                log.info("feed %s: idle (no subscription can match it)", name)
        self.changed()

    def _lost(self, reason) -> None:
        log.warning("lost the router connection (%s); reconnecting", reason)
        if not self.scoop:
            self.selection.clear_terms()      # unknown until the quench is restored
        self.changed()

    def _reconnected(self, _conn) -> None:
        log.info("reconnected to %s", self.conn.url if self.conn else self.url)
        self.changed()                        # the quench follows (OptionalQuench)

    async def publish(self, feed: FeedConfig, articles: list[Article],
                      stats: FeedStats | None = None) -> int:
        """Send the notifications for ``articles`` (oldest first) and mark
        each article seen once it has been handed over. Returns the number
        of notifications sent (not dropped by auto-quench)."""
        sent = 0
        now = time.time()
        for article in articles:
            for attrs in self._needed_copies(notifications(article, feed, now=now)):
                try:
                    ok = await self.conn.send(attrs)
                except (TypeError, ValueError) as exc:
                    # too big for the router's limits, say: skip this one
                    log.warning("feed %s: article %r not published: %s", feed.name,
                                article.id, exc)
                    continue
                if ok:
                    sent += 1
                    self.published += 1
                    if stats is not None:
                        stats.published += 1
                else:
                    self.dropped += 1
                    if stats is not None:
                        stats.dropped += 1
            self.state.mark_seen(feed.url, (article.id,))
        return sent

    def _needed_copies(self, copies: list[dict]) -> list[dict]:
        """A feed in several groups gives one copy of each article per group
        (a Group holds one name). A subscription that matches several copies
        (``News-Feed == "lwn"``) needs only one of them: a copy is sent only
        if some quench term that could match it is not matched by a copy
        already chosen. (A term still receives two copies when another term
        needs the second one: the router delivers a notification to every
        subscription it matches.) Scoop mode sends every copy."""
        if len(copies) < 2 or self.quench is None:
            return copies
        terms = list(self.quench.terms.values())
        covered: set[int] = set()
        chosen = []
        for attrs in copies:
            matching = {t.term_id for t in terms if t.could_match(attrs)}
            if matching and matching <= covered:
                self.suppressed += 1
                continue
            covered |= matching
            chosen.append(attrs)      # (none matching: auto-quench drops and counts it)
        return chosen

    # -- status -------------------------------------------------------------------------
    def changed(self) -> None:
        self._dirty = True

    def status(self) -> dict[str, Any]:
        feeds = []
        for feed in self.feeds:
            runner = self.runners.get(feed.name)
            choice = self.selection.choice(feed.name)
            st = runner.stats if runner else FeedStats()
            feeds.append({
                "name": feed.name, "url": feed.url, "groups": list(feed.groups),
                "from": feed.from_, "interval": feed.interval, "polled": choice.polled,
                "scoop": choice.scoop,
                "why": [{"term": t, "expression": self.selection.expression(t)}
                        for t in choice.terms],
                "last_poll": st.last_poll, "last_result": st.last_result,
                "errors": st.errors, "failures": st.failures, "last_error": st.last_error,
                "next_poll": runner.next_due_wall if runner and choice.polled else None,
                "polls": st.polls, "not_modified": st.not_modified,
                "published": st.published, "dropped": st.dropped, "articles": st.articles,
            })
        fetch = self.fetcher.stats.as_dict() if self.fetcher else {}
        return {
            "pid": os.getpid(), "started": self.started, "running": self._running,
            "newswatcher_version": __version__, "elvin": self.conn.url if self.conn else self.url,
            "connected": bool(self.conn and self.conn.is_open), "scoop": self.scoop,
            "no_quench": self.no_quench,
            "config": os.path.abspath(self.config.path) if self.config.path else None,
            "data_dir": str(self.data_dir), "quench_terms": len(self.selection.terms),
            "totals": {"published": self.published, "dropped": self.dropped,
                       "duplicates_avoided": self.suppressed, **fetch},
            "feeds": feeds, "reload": self.reload_record.as_dict(),
        }

    def _write_status(self, running: bool | None = None) -> None:
        self._dirty = False
        document = self.status()
        if running is not None:
            document["running"] = running
        try:
            write_status(self.status_path, document)
        except OSError as exc:
            log.error("cannot write status file %s: %s", self.status_path, exc)

    async def _status_loop(self) -> None:
        while True:
            await asyncio.sleep(self.status_interval)
            if self._dirty:
                self._write_status()

    async def _state_loop(self) -> None:
        while True:
            await asyncio.sleep(self.state_interval)
            self.state.flush()

    # -- for tests and the bench ---------------------------------------------------------------
    def feed_stats(self, name: str) -> FeedStats:
        return self.runners[name].stats

    def with_feeds(self, feeds: list[FeedConfig]) -> Config:
        """A copy of the config with other feeds (for ``reload``)."""
        return replace(self.config, feeds=list(feeds))
