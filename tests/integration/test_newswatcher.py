"""The newswatcher against a real router and feeds served on 127.0.0.1.

The feed server's access log is the witness: what the newswatcher fetched,
when, and whether conditionally.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from pathlib import Path

import pytest
from elvin_apps.newswatcher.config import Config, from_mapping
from elvin_apps.newswatcher.daemon import NewsWatcher
from elvin_apps.newswatcher.status import format_status, read_status
from elvin_apps.tickertape.groups import groups_expression
from elvin_apps.tickertape.message import from_notification

from elvin import Int64
from elvin.client import connect
from tests.feedserver import FeedServer, Item, atom, rss
from tests.waiting import until

T0 = 1_714_564_800          # 2024-05-01 12:00 UTC
INTERVAL = 0.3


def lwn_items(n: int = 2) -> list[Item]:
    items = [Item(f"tag:lwn.net,2024:{i}", f"LWN story {i}" + (" about Python" if i == 1 else ""),
                  f"https://lwn.net/Articles/{i}/", f"Author {i}", f"<p>Summary <i>{i}</i></p>",
                  ("Linux", "Kernel") if i % 2 == 0 else ("Python",), T0 + i * 60)
             for i in range(1, n + 1)]
    return list(reversed(items))               # newest first, as feeds do


PLANET = [Item("urn:planet:2", "Planet two", "https://planet.example/2", "Bea", "two",
               ("community",), T0 + 200),
          Item("urn:planet:1", "Planet one python", "https://planet.example/1", "Al", "one",
               (), T0 + 100)]
TECH = [Item("urn:tech:1", "Tech one", "https://tech.example/1", "Cy", "", (), T0)]


@pytest.fixture
def feeds():
    with FeedServer() as server:
        server.set("/lwn.rss", rss("LWN.net", lwn_items()))
        server.set("/planet.atom", atom("Planet", PLANET), content_type="application/atom+xml")
        server.set("/tech.rss", rss("Tech", TECH))
        yield server


def config(server: FeedServer, *feeds: dict, **http) -> Config:
    # a generous HTTP timeout: a loaded machine must not turn a local fetch into an error
    settings = {"timeout": 10.0, "min_host_interval": 0.0, "backoff_initial": INTERVAL,
                "backoff_max": 2.0, **http}
    return from_mapping({"http": settings, "feeds": [
        {"interval": INTERVAL, **f, "url": server.url(f["url"])} for f in feeds]})


LWN = {"name": "lwn", "url": "/lwn.rss", "groups": ["news", "linux"], "from": "LWN.net",
       "timeout": 900}
PLANET_FEED = {"name": "planet", "url": "/planet.atom"}
TECH_FEED = {"name": "tech", "url": "/tech.rss", "groups": ["tech"]}


@contextlib.asynccontextmanager
async def running(cfg: Config, url: str, data_dir: Path, **kwargs):
    watcher = NewsWatcher(cfg, url=url, data_dir=data_dir, status_interval=0.1, **kwargs)
    await watcher.start()
    try:
        yield watcher
    finally:
        await watcher.stop()


async def collect(sub, count: int, timeout: float = 10, *,
                  complete: NewsWatcher | None = None) -> list[dict]:
    """``count`` notifications; with ``complete``, then everything else that
    watcher's polls so far sent to ``sub`` (see :func:`the_rest`)."""
    out = [await next_article(sub, timeout) for _ in range(count)]
    if complete is not None:
        out += await the_rest(sub, complete, like=out[-1])
    return out


async def the_rest(sub, watcher: NewsWatcher, like: dict) -> list[dict]:
    """What ``sub`` got from ``watcher``'s finished polls beyond what was read.

    Proof by ordering, not by waiting a while: once no feed is mid-poll, a
    marker sent on the watcher's own connection (a copy of ``like``, which
    ``sub`` matches) reaches ``sub`` after everything the watcher sent before
    it."""
    await until(lambda: not any(r.busy for r in watcher.runners.values()))
    token = f"marker-{time.monotonic_ns()}"
    assert await watcher.conn.send({**like, "Test-Marker": token})
    rest = []
    while True:
        note = dict(await sub.get(timeout=10))
        if note.get("Test-Marker") == token:
            return rest
        if "Test-Marker" not in note:          # another test step's marker is not news
            rest.append(note)


async def next_article(sub, timeout: float = 10) -> dict:
    """The next notification that is not a marker (see :func:`the_rest`)."""
    while "Test-Marker" in (note := dict(await sub.get(timeout=timeout))):
        pass
    return note


def by_title(notes: list[dict]) -> dict[tuple[str, str], dict]:
    return {(n["News-Title"], n["Group"]): n for n in notes}


async def test_articles_arrive_with_the_documented_attributes(router_url, feeds, tmp_path):
    cfg = config(feeds, LWN, PLANET_FEED)
    async with connect(router_url) as consumer:
        everything = await consumer.subscribe("require(News-Feed)")
        linux = await consumer.subscribe(groups_expression(["linux"]))   # a tickertape's
        async with running(cfg, router_url, tmp_path) as w:
            notes = await collect(everything, 6, complete=w)
            ticker = await collect(linux, 2, complete=w)
    assert len(notes) == 6               # 2 LWN articles x 2 groups + 2 Planet articles
    got = by_title(notes)
    lwn1 = got[("LWN story 1 about Python", "news")]
    assert lwn1 == {
        "News-Feed": "lwn", "News-Feed-URL": feeds.url("/lwn.rss"),
        "News-Id": "tag:lwn.net,2024:1", "News-Title": "LWN story 1 about Python",
        "News-Author": "Author 1", "News-Link": "https://lwn.net/Articles/1/",
        "News-Summary": "Summary 1", "News-Categories": "|python|",
        "News-Published": T0 + 60,
        "Group": "news", "From": "LWN.net", "Message": "LWN story 1 about Python",
        "Attachment": "MIME-Version: 1.0\r\nContent-Type: text/uri-list\r\n\r\n"
                      "https://lwn.net/Articles/1/\r\n",
        "Message-Id": lwn1["Message-Id"], "Timeout": 900,
        "User-Agent": lwn1["User-Agent"], "org.tickertape.message": 3001,
    }
    assert type(lwn1["News-Published"]) is Int64 and len(lwn1["Message-Id"]) == 40
    assert got[("LWN story 2", "linux")]["News-Categories"] == "|linux|kernel|"
    planet = got[("Planet two", "news")]
    assert (planet["News-Feed"], planet["From"], planet["News-Author"]) == ("planet", "planet",
                                                                             "Bea")
    assert planet["News-Published"] == T0 + 200
    # oldest first within a feed
    lwn_order = [n["News-Title"] for n in notes if n["News-Feed"] == "lwn"]
    assert lwn_order.index("LWN story 1 about Python") < lwn_order.index("LWN story 2")
    # the tickertape's own subscription sees the linux copies and can show them
    assert {n["News-Title"] for n in ticker} == {"LWN story 1 about Python", "LWN story 2"}
    message = from_notification(ticker[0])
    assert message.group == "linux" and message.sender == "LWN.net"
    assert message.urls and message.urls[0].startswith("https://lwn.net/Articles/")


async def test_unsubscribed_feeds_are_not_fetched_and_polling_follows_subscriptions(
        router_url, feeds, tmp_path):
    cfg = config(feeds, LWN, PLANET_FEED, TECH_FEED)
    async with connect(router_url) as consumer, running(cfg, router_url, tmp_path) as w:
        assert w.selection.polled_names() == []
        subscribed_at = time.time()
        lwn = await consumer.subscribe('News-Feed == "lwn"')
        await until(lambda: feeds.count("/lwn.rss") >= 3)
        # nothing was fetched before something was subscribed, and only the
        # subscribed feed since (three polls of it prove the others had time)
        assert all(e.when >= subscribed_at for e in feeds.requests()), \
            "nothing is subscribed: nothing may be fetched"
        assert feeds.count("/planet.atom") == feeds.count("/tech.rss") == 0
        status = read_status(tmp_path / "status.json")
        entry = {f["name"]: f for f in status["feeds"]}
        assert entry["lwn"]["polled"] and not entry["tech"]["polled"]
        assert [r["expression"] for r in entry["lwn"]["why"]] == ['News-Feed == "lwn"']
        text = format_status(status)
        assert "POLLED lwn" in text and 'why: term' in text and "idle   tech" in text

        # a tickertape subscribed to group "tech" starts the tech feed
        ticker = await consumer.subscribe(groups_expression(["tech"]))
        await until(lambda: feeds.count("/tech.rss") >= 2)
        assert feeds.count("/planet.atom") == 0

        # unsubscribing stops polling: once the quench has told the watcher
        # and no poll is in flight, lwn and tech are not fetched again while
        # planet, subscribed now as the clock, is polled three more times
        await lwn.close()
        await ticker.close()
        await until(lambda: w.selection.polled_names() == [])
        await until(lambda: not any(r.busy for r in w.runners.values()))
        before = feeds.counts()
        await consumer.subscribe('News-Feed == "planet"')
        await until(lambda: feeds.count("/planet.atom") >= 3)
        after = feeds.counts()
        assert (after.get("/lwn.rss"), after.get("/tech.rss")) == \
            (before.get("/lwn.rss"), before.get("/tech.rss")), \
            "polling went on after the subscription went"
        await consumer.close()
        await until(lambda: w.selection.polled_names() == [])
        await until(lambda: not any(f["polled"] for f in
                                    read_status(tmp_path / "status.json")["feeds"]))


async def test_title_words_keep_every_feed_polled_but_send_only_matches(
        router_url, feeds, tmp_path):
    cfg = config(feeds, LWN, PLANET_FEED, TECH_FEED)
    async with connect(router_url) as consumer:
        sub = await consumer.subscribe('contains(fold-case(News-Title), "python")')
        async with running(cfg, router_url, tmp_path) as w:
            await until(lambda: all(w.feed_stats(f).ok >= 1 for f in ("lwn", "planet", "tech")))
            notes = await collect(sub, 2, complete=w)
            assert w.dropped >= 3               # auto-quench: the rest never left
            assert w.suppressed == 1            # the linux copy of the same article
    assert sorted((n["News-Title"], n["Group"]) for n in notes) == [
        ("LWN story 1 about Python", "news"), ("Planet one python", "news")]


async def test_a_restart_publishes_no_duplicates(router_url, feeds, tmp_path):
    cfg = config(feeds, LWN)
    async with connect(router_url) as consumer:
        sub = await consumer.subscribe('News-Feed == "lwn" && Group == "news"')
        async with running(cfg, router_url, tmp_path) as w:
            first = await collect(sub, 2, complete=w)
        assert len(first) == 2
        polls_before = feeds.count("/lwn.rss")

        # restarted with the same data dir, unchanged feed: nothing again,
        # and the saved ETag makes the first fetch conditional
        async with running(cfg, router_url, tmp_path) as w:
            await until(lambda: w.feed_stats("lwn").not_modified >= 3)
            assert await the_rest(sub, w, like=first[0]) == []
        after_restart = feeds.requests("/lwn.rss")[polls_before]
        assert after_restart.conditional and after_restart.status == 304

        # one new article while stopped: exactly that one after the restart
        feeds.set("/lwn.rss", rss("LWN.net", lwn_items(3)))
        async with running(cfg, router_url, tmp_path) as w:
            again = await collect(sub, 1, complete=w)
    assert [n["News-Title"] for n in again] == ["LWN story 3"]


async def test_conditional_get_is_used(router_url, feeds, tmp_path):
    cfg = config(feeds, LWN)
    async with connect(router_url) as consumer:
        await consumer.subscribe('News-Feed == "lwn"')
        async with running(cfg, router_url, tmp_path) as w:
            # wait on what the newswatcher has handled, not on the server's
            # log: the server logs a request before its answer reaches us
            await until(lambda: w.fetcher.stats.not_modified >= 3)
            feeds.set("/lwn.rss", rss("LWN.net", lwn_items(3)))
            await until(lambda: w.fetcher.stats.ok >= 2)
            await until(lambda: w.fetcher.stats.not_modified >= 5)
            log = feeds.requests("/lwn.rss")
            assert not log[0].conditional
            assert all(entry.conditional for entry in log[1:])
            assert feeds.count("/lwn.rss", status=304) >= 5
            assert w.feed_stats("lwn").articles == 3


async def test_bad_feeds_are_retried_with_backoff_and_do_not_stop_the_others(
        router_url, feeds, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="elvin_apps.newswatcher")
    good = rss("Good", [Item("g1", "Good one")])
    feeds.set("/good.rss", good)
    broken = rss("Broken", [Item("b1", "Broken one")])
    feeds.set("/broken.rss", broken[: len(broken) // 2])           # cut short
    feeds.set("/slow.rss", rss("Slow", [Item("s1", "Slow one")]), delay=60.0)
    feeds.set("/error.rss", "", status=500)
    feeds.set("/huge.rss", rss("Huge", [Item(f"h{i}", "x" * 400) for i in range(200)]))
    cfg = config(feeds, {"name": "good", "url": "/good.rss"},
                 {"name": "broken", "url": "/broken.rss"},
                 {"name": "slow", "url": "/slow.rss"},
                 {"name": "error", "url": "/error.rss"},
                 {"name": "huge", "url": "/huge.rss"},
                 {"name": "missing", "url": "/missing.rss"},
                 timeout=5.0, max_bytes=20_000)
    async with connect(router_url) as consumer:
        sub = await consumer.subscribe("require(News-Feed)")
        async with running(cfg, router_url, tmp_path) as w:
            (first,) = await collect(sub, 1)
            assert first["News-Title"] == "Good one"
            # a new good article arrives promptly although the slow feed hangs
            feeds.set("/good.rss", rss("Good", [Item("g2", "Good two"), Item("g1", "Good one")]))
            (second,) = await collect(sub, 1)
            assert second["News-Title"] == "Good two"
            # ... while the slow feed's first fetch is still waiting for its answer
            assert w.runners["slow"].busy and w.feed_stats("slow").errors == 0
            await until(lambda: feeds.count("/broken.rss") >= 4
                        and w.feed_stats("slow").errors >= 1, timeout=20)
            # the bad feeds published nothing (a marker after their polls comes first)
            assert await the_rest(sub, w, like=second) == []
            stats = {name: w.feed_stats(name) for name in
                     ("broken", "slow", "error", "huge", "missing")}
            assert all(s.errors >= 1 and s.published == 0 for s in stats.values()), stats
            assert "incomplete XML" in stats["broken"].last_error
            assert "HTTP 500" in stats["error"].last_error
            assert "HTTP 404" in stats["missing"].last_error
            assert "larger than" in stats["huge"].last_error
            assert "within" in stats["slow"].last_error
            assert w.feed_stats("good").errors == 0
            # backoff: the delays before the broken feed's retries double
            # (with +-10 % jitter), as the newswatcher scheduled and logged them
            delays = [float(m.group(1)) for r in caplog.records
                      if (m := re.search(r"feed broken \(.*retrying in ([0-9.]+)s",
                                         r.getMessage()))]
            assert len(delays) >= 3, delays
            assert delays[1] > delays[0] * 1.5 and delays[2] > delays[1] * 1.5, delays

            # once fixed, the broken feed is read on its next retry
            feeds.set("/broken.rss", broken)
            (fixed,) = await collect(sub, 1, timeout=8)
            assert fixed["News-Title"] == "Broken one"
            status = read_status(tmp_path / "status.json")
            assert {f["name"]: f["errors"] > 0 for f in status["feeds"]}["slow"]


async def test_reload_adds_and_removes_feeds(router_url, feeds, tmp_path):
    lwn_in_tech = {**LWN, "groups": ["tech"]}       # polled all along: the test's clock
    cfg = config(feeds, lwn_in_tech)
    async with connect(router_url) as consumer:
        sub = await consumer.subscribe('Group == "tech"')
        async with running(cfg, router_url, tmp_path) as w:
            await until(lambda: feeds.count("/lwn.rss") >= 2)
            assert feeds.count("/tech.rss") == 0
            w.reload(config(feeds, lwn_in_tech, TECH_FEED))
            notes = await collect(sub, 3)          # 2 from lwn, 1 from tech
            assert [n["News-Feed"] for n in notes].count("tech") == 1
            w.reload(config(feeds, lwn_in_tech))
            await until(lambda: "tech" not in w.runners and not w._background)  # stopped
            await until(lambda: not any(r.busy for r in w.runners.values()))
            before = feeds.count("/tech.rss")
            lwn_before = feeds.count("/lwn.rss")
            await until(lambda: feeds.count("/lwn.rss") >= lwn_before + 3)
            assert feeds.count("/tech.rss") == before


async def test_scoop_polls_and_publishes_everything(router_url, feeds, tmp_path):
    cfg = config(feeds, LWN, PLANET_FEED, TECH_FEED)
    async with connect(router_url) as consumer:
        sub = await consumer.subscribe('News-Feed == "tech"')     # narrow, but scoop ignores it
        async with running(cfg, router_url, tmp_path, scoop=True) as w:
            await until(lambda: w.published == 7)                   # 4 + 2 + 1, none dropped
            assert all(feeds.count(p) >= 1 for p in ("/lwn.rss", "/planet.atom", "/tech.rss"))
            assert w.dropped == 0
            (note,) = await collect(sub, 1, complete=w)
            assert note["News-Feed"] == "tech"
            assert "scoop" in format_status(read_status(tmp_path / "status.json"))


async def test_router_restart_resumes_polling(router, feeds, tmp_path):
    cfg = config(feeds, LWN)
    async with connect(router.url, reconnect=True) as consumer:
        sub = await consumer.subscribe('News-Feed == "lwn" && Group == "news"')
        async with running(cfg, router.url, tmp_path) as w:
            await collect(sub, 2)
            await asyncio.to_thread(router.restart)
            await until(lambda: w.conn.is_open and consumer.is_open, timeout=15)
            feeds.set("/lwn.rss", rss("LWN.net", lwn_items(3)))
            (note,) = await collect(sub, 1, timeout=10, complete=w)
            assert note["News-Title"] == "LWN story 3"
            assert w.selection.polled_names() == ["lwn"]


async def test_initial_items_limits_the_first_backlog(router_url, feeds, tmp_path):
    feeds.set("/lwn.rss", rss("LWN.net", lwn_items(3)))
    cfg = config(feeds, {**LWN, "groups": ["news"], "initial_items": 1})
    async with connect(router_url) as consumer:
        sub = await consumer.subscribe('News-Feed == "lwn"')
        async with running(cfg, router_url, tmp_path) as w:
            first = await collect(sub, 1, complete=w)
            assert [n["News-Title"] for n in first] == ["LWN story 3"]
            feeds.set("/lwn.rss", rss("LWN.net", lwn_items(4)))
            later = await collect(sub, 1, complete=w)
            assert [n["News-Title"] for n in later] == ["LWN story 4"]


async def test_a_feed_in_several_groups_sends_only_the_copies_needed(
        router_url, feeds, tmp_path):
    cfg = config(feeds, LWN)                         # groups news and linux
    async with connect(router_url) as reader, connect(router_url) as ticker:
        by_feed = await reader.subscribe('News-Feed == "lwn"')
        both = await ticker.subscribe(groups_expression(["news", "linux"]))
        async with running(cfg, router_url, tmp_path) as w:
            from_feed = await collect(by_feed, 2, complete=w)
            from_groups = await collect(both, 2, complete=w)
            assert w.suppressed == 2
    # one copy per article for each subscriber, not one per group
    assert sorted(n["News-Title"] for n in from_feed) == ["LWN story 1 about Python",
                                                          "LWN story 2"]
    assert sorted(n["News-Title"] for n in from_groups) == ["LWN story 1 about Python",
                                                            "LWN story 2"]


async def test_each_group_still_gets_its_copy(router_url, feeds, tmp_path):
    cfg = config(feeds, LWN)
    async with connect(router_url) as news, connect(router_url) as linux:
        news_sub = await news.subscribe(groups_expression(["news"]))
        linux_sub = await linux.subscribe(groups_expression(["linux"]))
        async with running(cfg, router_url, tmp_path) as w:
            got_news = await collect(news_sub, 2, complete=w)
            got_linux = await collect(linux_sub, 2, complete=w)
    assert {n["Group"] for n in got_news} == {"news"}
    assert {n["Group"] for n in got_linux} == {"linux"}


# -- a router without quench (elvind --no-quench, as Avis) -----------------------


async def restart_with(router, **settings) -> None:
    """``router.restart(**settings)`` off the event loop (it blocks)."""
    await asyncio.to_thread(lambda: router.restart(**settings))


async def test_no_quench_router_falls_back_to_scoop_mode(make_router, feeds, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    plain = make_router(quench=False)
    cfg = config(feeds, LWN, PLANET_FEED, TECH_FEED)
    async with connect(plain.url) as consumer:
        sub = await consumer.subscribe('News-Feed == "tech"')
        async with running(cfg, plain.url, tmp_path) as w:       # starts: no exit 3
            assert w.no_quench and not w.scoop
            # every feed, every copy (generous: a loaded machine may time a fetch out)
            await until(lambda: w.published == 7, timeout=30)
            assert all(feeds.count(p) >= 1 for p in ("/lwn.rss", "/planet.atom", "/tech.rss"))
            (note,) = await collect(sub, 1, complete=w)
            assert note["News-Feed"] == "tech"
            await until(lambda: read_status(tmp_path / "status.json")["no_quench"])
            text = format_status(read_status(tmp_path / "status.json"))
            assert "router has no quench: scoop mode, every feed is polled" in text
    said = [r for r in caplog.records if r.name == "elvin_apps.newswatcher"
            and "router has no quench" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING


async def test_quench_driven_polling_again_when_the_router_has_quench(make_router, feeds,
                                                                       tmp_path):
    router = make_router(quench=False)
    cfg = config(feeds, LWN, TECH_FEED)
    async with connect(router.url, reconnect=True, reconnect_delay=0.05) as consumer:
        await consumer.subscribe('News-Feed == "lwn"')
        async with running(cfg, router.url, tmp_path) as w:
            await until(lambda: w.selection.polled_names() == ["lwn", "tech"])
            reconnects = w.conn.reconnects
            await restart_with(router, quench=True)
            await until(lambda: w.conn.reconnects > reconnects and not w.no_quench,
                        timeout=15)
            await until(lambda: w.selection.polled_names() == ["lwn"])   # tech is idle
            await until(lambda: not read_status(tmp_path / "status.json")["no_quench"])

            reconnects = w.conn.reconnects
            await restart_with(router, quench=False)
            await until(lambda: w.conn.reconnects > reconnects and w.no_quench, timeout=15)
            assert w.selection.polled_names() == ["lwn", "tech"]
