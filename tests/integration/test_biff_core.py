"""The Biff core against a real router, with three instances.

Heartbeats are short (0.3 s) where expiry is the point, and long (5 s)
where the point is that something else (a reply, a departure, the
re-announcement after a reconnect) did the work, so that a heartbeat
cannot be what made the test pass.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from elvin_apps.biff import Biff, CoffeeBiff, protocol

import elvin
from tests.waiting import until

# A deadline only turns a hang into a failure; it is never the thing tested, so it is
# generous (a loaded machine may be slow). What a test proves comes from the setup:
# where "not by heartbeat" matters, heartbeats are made too slow to be the cause.
DEADLINE = 20.0
NEVER = 3600.0      # a heartbeat that cannot happen during a test


def users(biff: Biff) -> set[str]:
    return {m.user for m in biff.members}


def drinkers(biff: Biff) -> list[str]:
    return [m.user for m in biff.active_members]


class Pool:
    """Biffs (and their connections) made by a test, stopped at its end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.biffs: list[Biff] = []
        self.conns: list[elvin.Connection] = []

    async def connect(self, reconnect: bool = True):
        conn = await elvin.connect(self.url, reconnect=reconnect, reconnect_delay=0.05,
                                   reconnect_max_delay=0.2, timeout=5)
        self.conns.append(conn)
        return conn

    async def make(self, user: str, *, heartbeat: float = 5.0, reconnect: bool = True,
                   cls=CoffeeBiff, **kwargs) -> Biff:
        conn = await self.connect(reconnect)
        biff = cls(user=user, heartbeat=heartbeat, reply_delay=0.05, **kwargs)
        await biff.start(conn)
        self.biffs.append(biff)
        return biff

    async def close(self) -> None:
        for biff in self.biffs:
            if biff.started:
                await biff.stop()
        for conn in self.conns:
            await conn.close()


async def cut(router, conn: elvin.Connection) -> None:
    """The network fails under ``conn``: the router drops its end of the
    socket at once, and nobody sends anything more (no Disconn, no departure)."""
    local = conn.local_address

    def abort() -> int:
        sessions = [s for s in router.router.sessions if s.peer == local]
        for session in sessions:
            session.abort()
        return len(sessions)

    assert await asyncio.to_thread(router.call, abort) == 1


@pytest.fixture
async def pool(router_url):
    p = Pool(router_url)
    yield p
    await p.close()


async def test_join_and_answer_to_who_is_there(pool):
    a = await pool.make("alice", heartbeat=NEVER)
    b = await pool.make("bob", heartbeat=NEVER)
    await until(lambda: users(a) == users(b) == {"alice", "bob"}, what="a and b meet")
    await a.activate("in 5 minutes at the kitchen")
    await until(lambda: drinkers(b) == ["alice"], what="b sees alice's coffee")

    # carol starts later: nobody sends a heartbeat during the test, so what
    # she knows can only come from the answers to her "initial"
    c = await pool.make("carol", heartbeat=NEVER)
    await until(lambda: users(c) == {"alice", "bob", "carol"},
                what="carol learns who is there")
    assert drinkers(c) == ["alice"] and c.count == 1
    [alice] = c.active_members
    assert alice.text == "in 5 minutes at the kitchen" and not alice.local
    assert c.render(alice) == "alice — in 5 minutes at the kitchen"
    assert c.summary() == "1 having a coffee: alice — in 5 minutes at the kitchen"
    # and the others learned of carol from her announcement
    await until(lambda: "carol" in users(a) and "carol" in users(b))
    assert all(m.status == "online" for m in c.members if m.user != "alice")


async def test_state_changes_reach_everybody(pool):
    a, b, c = [await pool.make(u) for u in ("alice", "bob", "carol")]
    await until(lambda: all(len(x.members) == 3 for x in (a, b, c)))
    seen = []
    a.add_listener(lambda biff: seen.append(biff.count))
    await b.activate()
    await c.activate("kitchen")
    await until(lambda: all(x.count == 2 for x in (a, b, c)), what="two drinkers")
    assert sorted(drinkers(a)) == ["bob", "carol"]
    assert seen[-1] == 2
    await b.deactivate()
    await until(lambda: all(drinkers(x) == ["carol"] for x in (a, b, c)))
    assert b.status == "online" and not b.is_active


async def test_killed_instance_expires_within_the_heartbeat_window(pool, router):
    # a and b refresh every 0.5 s; carol, whose lifetime is what is tested,
    # every second (lifetime 3 s): "still there" right after her crash has
    # at least 2 s of margin on a loaded machine
    a = await pool.make("alice", heartbeat=0.5)
    b = await pool.make("bob", heartbeat=0.5)
    c = await pool.make("carol", heartbeat=1.0, reconnect=False)
    await c.activate()
    await until(lambda: a.count == b.count == 1 and len(a.members) == 3)
    assert c.lifetime == pytest.approx(3.0)

    # a crash: the socket goes away, no departure is ever sent
    conn = c.connection
    await cut(router, conn)
    await until(lambda: conn.state == "closed")
    # still there for a while (nobody was told) ...
    assert "carol" in users(a) and "carol" in users(b)
    # ... then gone once its lifetime (three heartbeats) passes without a refresh,
    # and not before: a and b hold her expiry time from her last heartbeat
    expiry = {x.user: next(m.expires for m in x.members if m.user == "carol") for x in (a, b)}
    await until(lambda: "carol" not in users(a) and "carol" not in users(b),
                what="carol expires")
    assert time.monotonic() >= max(expiry.values())
    assert a.count == b.count == 0
    # while a and b, who keep refreshing, stay: wait for a fresh heartbeat of each
    seen = {x.user: next(m.expires for m in y.members if m.user == x.user)
            for x, y in ((a, b), (b, a))}
    await until(lambda: all(next(m.expires for m in y.members if m.user == x.user)
                            > seen[x.user] for x, y in ((a, b), (b, a))),
                what="a and b refresh each other")
    assert users(a) == users(b) == {"alice", "bob"}


async def test_clean_departure_is_seen_at_once(pool):
    # nobody expires during the test (no heartbeats): the departure does it
    a, b, c = [await pool.make(u, heartbeat=NEVER) for u in ("alice", "bob", "carol")]
    await b.activate()
    await until(lambda: all(len(x.members) == 3 and x.count == 1 for x in (a, b, c)))
    await b.stop()
    await until(lambda: "bob" not in users(a) and "bob" not in users(c))
    assert a.count == c.count == 0
    assert users(b) == {"bob"} and not b.started


async def test_convergence_after_the_router_restarts(pool, router):
    # no heartbeats during the test: convergence can only come from
    # re-announcing and re-asking after the reconnection
    a, b, c = [await pool.make(u, heartbeat=NEVER) for u in ("alice", "bob", "carol")]
    await until(lambda: all(len(x.members) == 3 for x in (a, b, c)))
    loop = asyncio.get_running_loop()

    await loop.run_in_executor(None, router.stop)
    await until(lambda: not b.connection.is_open, what="b notices the outage")
    # while the router is away: bob starts a coffee (nobody can hear it)
    await b.activate("back soon")
    assert drinkers(b) == ["bob"] and a.count == 0
    await loop.run_in_executor(None, router.start)

    # all three reconnect; re-announcing and re-asking brings them together
    await until(lambda: all(drinkers(x) == ["bob"] for x in (a, b, c)),
                what="everybody sees bob's coffee")
    assert all(users(x) == {"alice", "bob", "carol"} for x in (a, b, c))
    assert all(x.connection.reconnects >= 1 for x in (a, b, c))
    # and it keeps working after the reconnection
    await c.activate()
    await until(lambda: all(x.count == 2 for x in (a, b, c)))


async def test_one_instance_reconnects_and_catches_up(pool, router):
    a, b, c = [await pool.make(u) for u in ("alice", "bob", "carol")]
    await until(lambda: all(len(x.members) == 3 for x in (a, b, c)))
    # c loses its connection (the router sees it vanish; c reconnects)
    reconnected = asyncio.Event()
    c.connection.add_reconnect_listener(lambda _conn: reconnected.set())
    await cut(router, c.connection)
    await a.activate("meanwhile")      # c may or may not hear this one
    await asyncio.wait_for(reconnected.wait(), 5)
    await until(lambda: drinkers(c) == ["alice"], what="c catches up")
    await until(lambda: all(len(x.members) == 3 for x in (a, b, c)))


async def test_active_timeout_returns_to_idle(pool):
    a = await pool.make("alice", active_timeout=0.3)
    b = await pool.make("bob")
    await a.activate()
    await until(lambda: b.count == 1)
    await until(lambda: b.count == 0 and not a.is_active, what="the coffee ends")
    assert a.status == "online"


async def test_same_user_on_two_machines_counts_once(pool):
    a1 = await pool.make("alice")
    a2 = await pool.make("alice")
    b = await pool.make("bob")
    await a1.activate()
    await a2.activate()
    await until(lambda: len(b.members) == 3)
    await until(lambda: b.count == 1 and drinkers(b) == ["alice"])


async def test_presence_clients_see_coffee_drinkers(pool, router_url):
    """A presence-aware tickertape's subscription (as in the Avis tools'
    example) receives the biff's messages in the Presence-Protocol format."""
    async with elvin.connect(router_url) as ticker:
        sub = await ticker.subscribe(
            "Presence-Protocol < 2000 && string (Groups) && string (User) && "
            "equals (Presence-Info, 'initial', 'update') && "
            "contains (fold-case (Groups), \"|coffee|\")")
        a = await pool.make("alice")
        first = await sub.get(timeout=DEADLINE)
        assert first["Presence-Info"] == "initial" and first["Status"] == "online"
        await a.activate("kitchen")
        n = await sub.get(timeout=DEADLINE)
        assert dict(n) | {"Client-Id": "x", "Status-Duration": 0, "Biff-Lifetime": 0} == {
            "Presence-Protocol": 1000, "Presence-Info": "update", "User": "alice",
            "Client-Id": "x", "Groups": "|coffee|", "Status": "coffee",
            "Status-Text": "kitchen", "Status-Duration": 0, "Biff-Lifetime": 0}
        assert n["Client-Id"] == a.client_id and n["Biff-Lifetime"] == 15000
        await a.stop()
        bye = await sub.get(timeout=DEADLINE)
        assert bye["Status"] == "offline" and bye["User"] == "alice"

        # and a tickertape user whose Status is "coffee" counts as a drinker
        b = await pool.make("bob")
        await ticker.send({"Presence-Protocol": 1000, "Presence-Info": "update",
                           "User": "tom@ticker", "Client-Id": "ticker-1",
                           "Groups": "|elvin|Coffee|", "Status": "Coffee",
                           "Status-Text": "espresso", "Status-Duration": 60})
        await until(lambda: drinkers(b) == ["tom@ticker"])
        tom = b.active_members[0]
        assert time.monotonic() - tom.since == pytest.approx(60, abs=10)  # it started 60 s ago
        assert tom.expires - time.monotonic() > 500   # foreign lifetime: 10 min


GARBAGE = [
    {"Presence-Protocol": "1000", "User": "s", "Status": "coffee", "Groups": "|coffee|"},
    {"Presence-Protocol": 1000, "Groups": "|coffee|", "Status": "coffee"},   # no User
    {"Presence-Protocol": 1000, "Groups": "|coffee|", "Status": "coffee", "User": 42},
    {"Presence-Protocol": 1000, "Groups": "|coffee|", "Status": "coffee", "User": b"\x00x"},
    {"Presence-Protocol": 1000, "Groups": "|coffee|", "Status": b"coffee", "User": "x"},
    {"Presence-Protocol": 1000, "Groups": "|coffee|", "User": "nostatus",
     "Presence-Info": "update"},
    {"Presence-Protocol": 1000, "Groups": "|coffee|", "Status": 7.5, "User": "y"},
    {"Presence-Protocol": 1000, "Groups": "|coffee|", "User": "   \t\n", "Status": "coffee"},
    {"Presence-Protocol": 1000, "Groups": "|coffee|", "User": "\u200b\u0007",
     "Status": "coffee"},
    {"Presence-Protocol": 99999, "Groups": "|coffee|", "User": "z", "Status": "coffee"},
]

ODD_BUT_USABLE = [
    # huge strings, odd numbers, odd types elsewhere: kept, cleaned up
    {"Presence-Protocol": 1000, "Groups": "|coffee|", "Status": "coffee",
     "User": "huge" + "u" * 200_000, "Client-Id": "c" * 100_000,
     "Status-Text": "t" * 300_000 + "\x1b[31m", "Presence-Info": "x" * 50_000,
     "Status-Duration": elvin.Int64(2**62), "Biff-Lifetime": -5},
    {"Presence-Protocol": elvin.Int64(1500), "Groups": "|coffee|", "Status": "coffee",
     "User": "evil\x1b[2J\r\nname", "Client-Id": 12, "Status-Text": b"bytes",
     "Status-Duration": -100, "Biff-Lifetime": 10.5},
]


async def test_garbage_never_breaks_a_biff(pool, router_url):
    a = await pool.make("alice")
    b = await pool.make("bob")
    await until(lambda: len(a.members) == 2)
    async with elvin.connect(router_url) as spammer:
        for junk in GARBAGE + ODD_BUT_USABLE:
            await spammer.send(junk)
        await spammer.send({"Presence-Protocol": 1000, "Groups": "|coffee|",
                            "Status": "coffee", "User": "marker", "Client-Id": "m"})
        await until(lambda: "marker" in users(a), what="the marker after the junk")
    names = users(a)
    assert "marker" in names and "alice" in names and "bob" in names
    huge = [n for n in names if n.startswith("huge")]
    assert len(huge) == 1 and len(huge[0]) <= protocol.MAX_USER
    assert "evil name" in names           # control characters gone, one line
    assert all(len(m.text) <= protocol.MAX_TEXT and m.text.isprintable()
               for m in a.members)
    assert len(a.members) == 5 and a.ignored >= len(GARBAGE) - 2   # 2 filtered by router
    # the biff still works both ways
    await b.activate()
    await until(lambda: "bob" in drinkers(a))
    await a.activate()
    await until(lambda: "alice" in drinkers(b))
    # direct calls with worse junk than the wire can carry
    for junk in (None, 42, "text", [], {"Presence-Protocol": 1000, "User": object()},
                 {object(): 1}):
        assert a.handle(junk) is False
    assert "alice" in drinkers(b)


async def test_a_flood_of_fake_clients_is_bounded(pool, router_url):
    a = await pool.make("alice", max_members=20)
    async with elvin.connect(router_url) as spammer:
        for i in range(100):
            await spammer.send({"Presence-Protocol": 1000, "Groups": "|coffee|",
                                "Status": "coffee", "User": f"fake{i}",
                                "Client-Id": f"f{i}"})
        await spammer.send({"Presence-Protocol": 1000, "Groups": "|coffee|",
                            "Status": "online", "User": "last", "Client-Id": "last"})
        await until(lambda: "last" in users(a))
    assert len(a.members) <= 20 and "alice" in users(a)


async def test_a_new_biff_is_a_few_lines(pool):
    class XpilotBiff(Biff):
        domain = "xpilot"
        active_label = "playing xpilot"

        def render(self, member):
            return f"{member.user} on {member.text}" if member.text else member.user

    x1 = await pool.make("ann", cls=XpilotBiff)
    x2 = await pool.make("ben", cls=XpilotBiff)
    coffee = await pool.make("cat")
    await x1.activate("server-3")
    await until(lambda: x2.count == 1)
    assert x2.summary() == "1 playing xpilot: ann on server-3"
    assert x1.status == "xpilot"
    # domains do not mix: a coffee marker sent after the xpilot traffic
    # reaches cat, and by then nothing of ann's or ben's did
    await pool.make("dan")
    await until(lambda: "dan" in users(coffee))
    assert users(coffee) == {"cat", "dan"}
    assert users(x2) == {"ann", "ben"}


def test_configuration_errors_are_clear():
    with pytest.raises(ValueError, match="domain"):
        Biff("a|b", "u")
    with pytest.raises(ValueError, match="user"):
        Biff("coffee", "")
    with pytest.raises(ValueError, match="heartbeat"):
        Biff("coffee", "u", heartbeat=0)
    with pytest.raises(ValueError, match="active status"):
        Biff("online", "u")
