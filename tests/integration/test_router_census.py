"""Elvin-Router-Attributes: the attribute names a router has seen, for
browsers, published only while someone subscribes (elvin.router.census).
A real router on loopback, real clients."""

from __future__ import annotations

import asyncio

import pytest

import elvin.client
from elvin import Keys
from elvin.census import CENSUS_ATTRIBUTE, read_census
from tests.waiting import until

CENSUS = f"require({CENSUS_ATTRIBUTE})"


async def census_listener(conn):
    """The censuses a connection receives, newest last."""
    seen: list[dict] = []
    await conn.subscribe(CENSUS, listener=lambda n: seen.append(dict(n.attributes)))
    return seen


def listed(seen: list[dict]) -> dict[str, int]:
    return read_census(seen[-1]) if seen else {}


async def test_names_in_use_are_listed_most_used_first(make_router):
    router = make_router(stats_interval=0.3)
    async with elvin.client.connect(router.url) as browser, \
            elvin.client.connect(router.url) as producer:
        seen = await census_listener(browser)
        await until(lambda: seen, 5, "a first census soon after subscribing")
        assert listed(seen) == {} and seen[0]["Router-Id"] == router.router.router_id
        for n in range(3):
            await producer.send({"Group": "Chat", "Message": f"hi {n}", "From": "ann"})
        await producer.send({"Symbol": "ACME", "Price": 12.5})
        await until(lambda: {"Group", "Symbol"} <= set(listed(seen)), 5, "the new names")
        await until(lambda: listed(seen).get("Group") == 3, 5, "the counts")
        names = list(listed(seen))
        assert names[:3] == ["From", "Group", "Message"]       # 3 each, then by name
        assert listed(seen)["Price"] == 1
        assert seen[-1]["Attribute-Names-Left-Out"] == 0
        assert seen[-1]["Attribute-Window"] > 0
        assert CENSUS_ATTRIBUTE not in listed(seen)             # never counts itself


async def test_secure_only_notifications_are_not_told(make_router):
    router = make_router(stats_interval=0.2)
    async with elvin.client.connect(router.url) as browser, \
            elvin.client.connect(router.url) as producer:
        seen = await census_listener(browser)
        await producer.send({"Secret-Plan": 1}, keys=Keys.producer(b"k"),
                            deliver_insecure=False)
        await producer.send({"Open": 1})
        await until(lambda: "Open" in listed(seen), 5)
        assert "Secret-Plan" not in listed(seen)


async def test_counting_stops_with_the_last_subscriber(make_router):
    router = make_router(stats_interval=0.2)
    census = router.router.census
    async with elvin.client.connect(router.url) as browser:
        sub = await browser.subscribe(CENSUS)
        await until(lambda: census.counting, 5)
        await sub.close()
        await until(lambda: not census.counting, 5)
        assert census.counts() == {} and census.shapes == {}


async def test_a_router_with_the_census_off_never_publishes(make_router):
    router = make_router(stats_interval=0.1, attribute_names=False)
    async with elvin.client.connect(router.url) as browser, \
            elvin.client.connect(router.url) as producer:
        seen = await census_listener(browser)
        stats: list = []
        await browser.subscribe("require(Elvin-Router-Stats)", listener=stats.append)
        await producer.send({"Group": "Chat"})
        await until(lambda: len(stats) >= 3, 5, "time for several censuses to go by")
        await asyncio.sleep(0)
        assert seen == []
        assert not router.router.census.counting


@pytest.mark.parametrize("attributes", [
    {},
    {CENSUS_ATTRIBUTE: 2, "Attribute-Names": "", "Attribute-Counts": ""},
    {CENSUS_ATTRIBUTE: 1, "Attribute-Names": 5, "Attribute-Counts": ""},
    {CENSUS_ATTRIBUTE: 1, "Attribute-Names": "a\nb", "Attribute-Counts": "1"},
    {CENSUS_ATTRIBUTE: 1, "Attribute-Names": "a", "Attribute-Counts": "-1"},
    {CENSUS_ATTRIBUTE: 1, "Attribute-Names": "\n", "Attribute-Counts": "1\n2"},
])
def test_a_malformed_census_is_not_read(attributes):
    assert read_census(attributes) is None


def test_an_empty_census_reads_as_no_names():
    assert read_census({CENSUS_ATTRIBUTE: 1, "Attribute-Names": "",
                        "Attribute-Counts": ""}) == {}


def test_shapes_past_the_bound_are_counted_by_name():
    """A producer that varies its attribute names does not grow the census
    without bound: past max_shapes, notifications are counted name by name."""
    from elvin.router.census import AttributeCensus

    census = AttributeCensus(lambda attrs: None, lambda: "r", lambda: 1.0, max_shapes=2)
    census.counting = True
    for n in range(5):
        census.note({"Common": 1, f"Only-{n}": 2})
    census.note({"Common": 1, "Only-0": 2})
    census.note({CENSUS_ATTRIBUTE: 1, "Router-Id": "r"})
    assert len(census.shapes) == 2
    counts = census.counts()
    assert counts["Common"] == 6 and counts["Only-0"] == 2 and counts["Only-4"] == 1
    assert CENSUS_ATTRIBUTE not in counts and "Router-Id" not in counts


def test_a_producer_inventing_names_keeps_the_census_bounded():
    """One name per notification, for ever: the names counted one by one
    stay within max_loose (what is already counted goes on being counted),
    and once the list is full no quick publish is started for names that
    would not be listed anyway (the whole census was summed and sorted
    every quarter of a second: 0.5 s of the loop each time)."""
    from elvin.router.census import AttributeCensus

    published: list[dict] = []

    async def run() -> AttributeCensus:
        census = AttributeCensus(published.append, lambda: "r", lambda: 3600.0,
                                 limit=3, max_shapes=2, max_loose=50)
        census.watch(True)
        for n in range(3):
            census.note({"Common": 1, f"Early-{n}": 2})
        async with asyncio.timeout(10):             # the quick publish lists them
            while not published:
                await asyncio.sleep(0.01)
        assert len(read_census(published[-1])) == 3
        for n in range(2_000):
            census.note({"Common": 1, f"Invented-{n}": 2})
        assert census._soon is None                 # nothing scheduled: the list is full
        assert len(census.loose) <= 50
        census.note({"Common": 1, "Early-0": 2})
        census.stop()
        return census

    asyncio.run(run())
    assert len(published) == 1


def test_the_routers_own_statistics_are_not_counted():
    """A console with a statistics pane open made the router's own
    statistics names (a dozen of them) show in Browse."""
    from elvin.router.census import AttributeCensus
    from elvin.router.stats import STATS_ATTRIBUTE

    census = AttributeCensus(lambda attrs: None, lambda: "r", lambda: 1.0)
    census.counting = True
    census.note({STATS_ATTRIBUTE: 1, "Router-Id": "r", "Notifications-In": 5})
    census.note({"Group": "Chat"})
    assert census.counts() == {"Group": 1}
