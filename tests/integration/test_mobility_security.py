"""Mobility's secrets stay private, against real routers on loopback.

Eavesdroppers at every router subscribe to everything mobility-related (and
to everything at all) during whole move-outs and move-ins: at the same
router, at another router with the direct download, and at a federated
router over the bus with ping and delay. They must never see a download
secret, a subscription's raw key, buffered notification content, or a
notification that was sent only for key holders. Subscriptions with keys
of every scheme move out and back, and buffer only what their keys allow.
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

import pytest

from elvin.client import connect
from elvin.keys import Keys
from elvin.mobility import MobileConnection, MobilityError
from elvin.mobility import protocol as P
from elvin.mobility.client import request_move_in
from tests.waiting import until

from .federation_util import federated_routers, stop_all, wait_linked
from .test_mobility import buffered, proxy_of

SENTINEL = "Test.Sentinel"

#: What the eavesdroppers subscribe to: every attribute of the protocol, one
#: by one and all at once, the content attributes of the test's own
#: notifications (so a notification meant for key holders only would show),
#: and the sentinels. (Elvin has no match-everything expression: a test on a
#: missing attribute is undecided, so even ``!require(x)`` needs ``x``.)
MOBILITY_NAMES = sorted(name for name in vars(P).values() if isinstance(name, str)
                        and name.startswith(P.PREFIX) and name != P.PREFIX)
SNOOP = [f"require({name})" for name in MOBILITY_NAMES]
SNOOP += [" || ".join(f"require({name})" for name in MOBILITY_NAMES),
          "require(Text)", "require(Kind)", "require(Seq)", f"require({SENTINEL})"]


def as_bytes(attrs: dict[str, Any]) -> bytes:
    """Every name and value of a notification, so a secret shows up
    wherever it hides (an opaque blob of buffered notifications included)."""
    out = bytearray()
    for name, value in attrs.items():
        out += name.encode()
        out += value if isinstance(value, bytes) else str(value).encode()
    return bytes(out)


class Eavesdropper:
    """A client at one router subscribed to everything it can see."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.seen: list[dict[str, Any]] = []
        self.sentinels: set[str] = set()

    @classmethod
    async def at(cls, url: str) -> Eavesdropper:
        spy = cls(await connect(url))
        for expression in SNOOP:
            # a key of its own, to see whatever a key holder would see by accident
            await spy.conn.subscribe(expression, keys=Keys.consumer(secrets.token_bytes(20)),
                                     buffer_size=0, listener=spy._on)
        return spy

    def _on(self, notification: Any) -> None:
        attrs = notification.attributes
        if any(seen is attrs for seen in self.seen[-len(SNOOP):]):
            return          # the same notification through another subscription
        self.seen.append(attrs)
        if isinstance(attrs.get(SENTINEL), str):
            self.sentinels.add(attrs[SENTINEL])

    def check(self, forbidden: list[bytes], public_marks: list[bytes]) -> None:
        """Nothing forbidden anywhere; public content (which anyone may
        receive when it is published) never inside a mobility message."""
        for attrs in self.seen:
            data = as_bytes(attrs)
            for secret in forbidden:
                assert secret not in data, f"leaked {secret!r} in {attrs!r}"
            for name in (P.SECRET, P.NOTIFICATIONS, P.SUBSCRIPTIONS):
                assert name not in attrs, f"saw {name} in {attrs!r}"
            if any(name.startswith(P.PREFIX) for name in attrs):
                for mark in public_marks:
                    assert mark not in data, f"buffered {mark!r} leaked in {attrs!r}"

    def kinds(self) -> set[str]:
        return {a[P.REQUEST] for a in self.seen if isinstance(a.get(P.REQUEST), str)}


async def settle(spies: list[Eavesdropper], urls: list[str], tag: str,
                 federated: bool) -> None:
    """Publish a sentinel at every router and wait until every eavesdropper
    has the ones it can receive (its own router's, or all when federated):
    whatever was published before at those routers has reached it by then
    (a router delivers one connection's notifications in order, also across
    a federation link), so checking afterwards misses nothing."""
    conns = [await connect(url) for url in urls]
    try:
        wants = [{f"{tag}@{u}" for u in (urls if federated else [url])} for url in urls]
        for _attempt in range(50):
            # repeated until every one has arrived: a new subscription takes a
            # moment to reach the other routers of a federation
            for url, conn in zip(urls, conns, strict=True):
                await conn.send({SENTINEL: f"{tag}@{url}"})
            try:
                for spy, want in zip(spies, wants, strict=True):
                    await until(lambda spy=spy, want=want: want <= spy.sentinels,
                                timeout=0.2)
                return
            except AssertionError:
                continue
        raise AssertionError(f"sentinel {tag} never reached every eavesdropper")
    finally:
        for conn in conns:
            await conn.close()


async def scenario(old_url: str, new_url: str, spy_urls: list[str], *, sync: str = "none",
                   via: str = P.VIA_DIRECT, old_router: Any = None,
                   federated: bool = False) -> tuple[list, list]:
    """A client with a public and a keyed subscription moves out at
    ``old_url`` and in at ``new_url`` while public and secure notifications
    are published; returns (eavesdroppers, what the client received)."""
    spies = [await Eavesdropper.at(url) for url in spy_urls]
    await settle(spies, spy_urls, "ready", federated)   # subscribed everywhere
    raw = secrets.token_bytes(20) + b"\x00\xffraw-key"
    mc = await MobileConnection.open(old_url, dedup=("Producer", "Seq"))
    got: list[tuple[dict, bool]] = []
    await mc.subscribe('Kind == "public"', listener=lambda n: got.append((dict(n), n.secure)))
    await mc.subscribe('Kind == "private"', keys=Keys.consumer(raw), accept_insecure=False,
                       listener=lambda n: got.append((dict(n), n.secure)))
    pub = await connect(old_url)
    try:
        ticket = await mc.move_out()
        for seq in range(5):
            await pub.send({"Producer": "pub", "Seq": seq, "Kind": "public",
                            "Text": f"PUBLIC-MARK-{seq}"})
            await pub.send({"Producer": "priv", "Seq": seq, "Kind": "private",
                            "Text": f"SECRET-MARK-{seq}"},
                           keys=Keys.consumer_notification(raw), deliver_insecure=False)
        if old_router is not None:
            await until(lambda: buffered(old_router, mc.client_id) == 10)
        report = await mc.move_in(new_url, sync=sync, delay=0.2, via=via)
        await settle(spies, spy_urls, "done", federated)
        assert report.caught_up == 10 and report.dropped == 0
        if sync == "ping":
            assert report.ping_ok is True
        forbidden = [ticket.secret.encode(), raw, b"SECRET-MARK"]
        for spy in spies:
            spy.check(forbidden, [b"PUBLIC-MARK"])
        return spies, got
    finally:
        await mc.close()
        await pub.close()
        for spy in spies:
            await spy.conn.close()


def delivered(got: list[tuple[dict, bool]]) -> dict[str, list[tuple[int, bool]]]:
    out: dict[str, list[tuple[int, bool]]] = {"pub": [], "priv": []}
    for attrs, secure in got:
        out[attrs["Producer"]].append((attrs["Seq"], secure))
    return out


async def test_nothing_leaks_moving_at_the_same_router(make_router):
    router = make_router(mobility=True)
    spies, got = await scenario(router.url, router.url, [router.url], old_router=router)
    assert delivered(got) == {"pub": [(s, False) for s in range(5)],
                              "priv": [(s, True) for s in range(5)]}
    # the eavesdropper was listening: it saw the public hello (nothing secret)
    assert spies[0].kinds() == {P.HELLO}
    assert proxy_of(router).stats["insecure"] == 0


async def test_nothing_leaks_moving_to_another_router_direct(make_router):
    old, new = make_router(mobility=True), make_router(mobility=True)
    spies, got = await scenario(old.url, new.url, [old.url, new.url], old_router=old)
    assert delivered(got) == {"pub": [(s, False) for s in range(5)],
                              "priv": [(s, True) for s in range(5)]}
    assert proxy_of(old).stats["download"] == 1 and proxy_of(new).stats["move_in"] == 1
    assert P.HELLO in spies[0].kinds() | spies[1].kinds()


@pytest.fixture
def federated():
    routers = federated_routers(2, router_settings={"mobility": True})
    try:
        wait_linked(routers)
        yield routers
    finally:
        stop_all(routers)


@pytest.mark.parametrize("sync, via", [("ping", "bus"), ("delay", "bus"),
                                       ("ping", "direct"), ("delay", "direct")])
async def test_nothing_leaks_moving_between_federated_routers(federated, sync, via):
    r0, r1 = federated
    spies, got = await scenario(r0.url, r1.url, [r0.url, r1.url], sync=sync, via=via,
                                old_router=r0, federated=True)
    # with dedup, every buffered notification exactly once, secure ones flagged
    by = delivered(got)
    assert sorted(by["pub"]) == [(s, False) for s in range(5)]
    assert sorted(by["priv"]) == [(s, True) for s in range(5)]
    if sync == "ping":
        assert any(a.get(P.PING) == "request" for spy in spies for a in spy.seen)
    await until(lambda: proxy_of(r0).handlers == {})
    assert proxy_of(r0).stats["download"] == 1


@pytest.mark.parametrize("scheme", ["consumer", "producer", "dual"])
async def test_keyed_subscriptions_move_and_buffer_only_what_their_keys_allow(
        make_router, scheme):
    old, new = make_router(mobility=True), make_router(mobility=True)
    raw = b"\x00\x01raw key \xff" + secrets.token_bytes(8)
    sub_keys = {"consumer": Keys.consumer_subscription(raw),
                "producer": Keys.producer_subscription(raw),
                "dual": Keys.dual_subscription([raw], [raw])}[scheme]
    ntfn_keys = {"consumer": Keys.consumer_notification(raw),
                 "producer": Keys.producer_notification(raw),
                 "dual": Keys.dual_notification([raw], [raw])}[scheme]
    wrong = Keys.for_notification(producer=[b"wrong"], consumer=[b"wrong"])
    mc = await MobileConnection.open(old.url)
    keyed = await mc.subscribe("require(Seq)", keys=sub_keys, accept_insecure=False)
    pub_old, pub_new = await connect(old.url), await connect(new.url)
    try:
        await pub_old.send({"Seq": 0}, keys=ntfn_keys, deliver_insecure=False)
        assert (await keyed.get(timeout=5))["Seq"] == 0
        await mc.move_out()
        # the proxy subscribed with exactly the client's keys
        handler = proxy_of(old).handlers[mc.client_id]
        assert [s.keys for s in handler.subscriptions] == [sub_keys]
        await pub_old.send({"Seq": 1}, keys=ntfn_keys, deliver_insecure=False)
        await pub_old.send({"Seq": 2})                                  # no key
        await pub_old.send({"Seq": 3}, keys=wrong, deliver_insecure=False)
        await pub_old.send({"Seq": 4}, keys=ntfn_keys)                  # key, insecure ok
        await pub_old.send({"Seq": 5}, keys=wrong)                      # wrong key, insecure
        await until(lambda: buffered(old, mc.client_id) == 2)
        # a probe after the others: once it is buffered, the rest were judged
        await pub_old.send({"Seq": 6}, keys=ntfn_keys, deliver_insecure=False)
        await until(lambda: buffered(old, mc.client_id) == 3)
        report = await mc.move_in(new.url)
        assert report.caught_up == 3
        caught = [keyed.get_nowait() for _ in range(keyed.pending)]
        assert [(n["Seq"], n.secure) for n in caught] == [(1, True), (4, True), (6, True)]
        # at the new router the subscription has its keys again (from the
        # client's own state): secure notifications arrive live
        assert mc.subscriptions[0].keys == sub_keys
        await pub_new.send({"Seq": 7})
        await pub_new.send({"Seq": 8}, keys=ntfn_keys, deliver_insecure=False)
        live = await keyed.get(timeout=5)
        assert (live["Seq"], live.secure) == (8, True)
    finally:
        await mc.close()
        await pub_old.close()
        await pub_new.close()


async def test_a_wrong_secret_sent_privately_downloads_nothing(make_router):
    old, new = make_router(mobility=True), make_router(mobility=True)
    mc = await MobileConnection.open(old.url)
    await mc.subscribe("require(Seq)")
    pub, thief = await connect(old.url), await connect(new.url)
    try:
        ticket = await mc.move_out()
        await pub.send({"Seq": 1})
        await until(lambda: buffered(old, mc.client_id) == 1)
        # a thief that knows everything but the secret, through the new
        # router's proxy, sent privately as it should be: refused
        forged = dataclasses.replace(ticket, secret="guess")
        with pytest.raises(MobilityError) as info:
            await request_move_in(thief, forged, timeout=10)
        assert info.value.code == "bad-secret"
        assert proxy_of(old).stats["bad_secret"] == 1
        assert buffered(old, mc.client_id) == 1
        report = await mc.move_in(new.url)
        assert report.caught_up == 1
    finally:
        await mc.close()
        await pub.close()
        await thief.close()


@pytest.mark.parametrize("via", [P.VIA_DIRECT, P.VIA_BUS])
async def test_without_the_old_proxys_key_the_new_proxy_asks_for_it(router, via):
    """A ticket without the move-out proxy's key (from an older client): the
    move-in proxy learns it with a hello along the download's path, and the
    download still travels privately."""
    from elvin.mobility import MobilityProxy, ProxyConfig
    async with MobilityProxy(router.url, ProxyConfig(id="proxy-A")) as a, \
            MobilityProxy(router.url, ProxyConfig(id="proxy-B")) as b:
        spy = await Eavesdropper.at(router.url)
        mc = await MobileConnection.open(router.url, proxy="proxy-A")
        sub = await mc.subscribe("require(Seq)")
        pub = await connect(router.url)
        try:
            ticket = await mc.move_out()
            await pub.send({"Seq": 1})
            await until(lambda: a.handlers[mc.client_id].buffered == 1)
            mc.ticket = dataclasses.replace(ticket, proxy_key=b"")
            mc.proxy = "proxy-B"
            report = await mc.move_in(router.url, via=via)
            assert report.caught_up == 1 and (await sub.get(timeout=5))["Seq"] == 1
            # the release goes to A the same way (B asks for A's key again)
            await until(lambda: a.stats["released"] == 1)
            # client, client; B for the download, B for the release
            assert a.stats["hello"] == 3 and b.stats["hello"] == 1
            await settle([spy], [router.url], "done", False)
            spy.check([ticket.secret.encode()], [])
            assert sum(1 for n in spy.seen if n.get(P.REQUEST) == P.HELLO) == 4
        finally:
            await mc.close()
            await pub.close()
            await spy.conn.close()


@pytest.mark.parametrize("where, opened_with_keys", [
    ("same", False), ("other", False), ("other", True)])
async def test_connection_level_keys_move(make_router, where, opened_with_keys):
    """A private group keyed only at connection level (``set_keys``, or the
    keys the wrapped connection was opened with): while away the proxy
    buffers what carries the key and nothing else, and at the new router
    the keys are set again from the client's state, so secure notifications
    keep arriving live."""
    old = make_router(mobility=True)
    new = old if where == "same" else make_router(mobility=True)
    raw = b"group key \x00\xff" + secrets.token_bytes(8)
    sub_keys = Keys.consumer_subscription(raw)
    ntfn_keys = Keys.consumer_notification(raw)
    own_ntfn = Keys.producer_notification(b"my producer key")
    wrong = Keys.consumer_notification(b"wrong")
    if opened_with_keys:
        mc = MobileConnection(await connect(old.url, subscription_keys=sub_keys,
                                            notification_keys=own_ntfn))
    else:
        mc = await MobileConnection.open(old.url)
        await mc.set_keys(add_subscription=sub_keys, add_notification=own_ntfn)
    assert mc.subscription_keys == sub_keys and mc.notification_keys == own_ntfn
    keyed = await mc.subscribe("require(Seq)", accept_insecure=False)
    assert keyed.keys == Keys()                      # no keys of its own
    pub_old, pub_new = await connect(old.url), await connect(new.url)
    try:
        await pub_old.send({"Seq": 0}, keys=ntfn_keys, deliver_insecure=False)
        first = await keyed.get(timeout=5)
        assert (first["Seq"], first.secure) == (0, True)
        await mc.move_out()
        with pytest.raises(MobilityError) as info:
            await mc.set_keys(add_subscription=Keys.consumer_subscription(b"later"))
        assert info.value.code == "state"
        # the proxy subscribed with the connection's keys merged in
        handler = proxy_of(old).handlers[mc.client_id]
        assert [s.keys for s in handler.subscriptions] == [sub_keys]
        await pub_old.send({"Seq": 1}, keys=ntfn_keys, deliver_insecure=False)
        await pub_old.send({"Seq": 2})                                   # no key
        await pub_old.send({"Seq": 3}, keys=wrong, deliver_insecure=False)
        await pub_old.send({"Seq": 4}, keys=wrong)                      # wrong, insecure
        # a probe after the others: once it is buffered, the rest were judged
        await pub_old.send({"Seq": 5}, keys=ntfn_keys, deliver_insecure=False)
        await until(lambda: buffered(old, mc.client_id) == 2)
        report = await mc.move_in(new.url)
        assert report.caught_up == 2 and report.abbreviated == (where == "same")
        caught = [keyed.get_nowait() for _ in range(keyed.pending)]
        assert [(n["Seq"], n.secure) for n in caught] == [(1, True), (5, True)]
        # the new connection has the keys again, from the client's state
        assert mc.connection.subscription_keys == sub_keys
        assert mc.connection.notification_keys == own_ntfn
        assert mc.subscription_keys == sub_keys
        await pub_new.send({"Seq": 6})
        await pub_new.send({"Seq": 7}, keys=wrong, deliver_insecure=False)
        await pub_new.send({"Seq": 8}, keys=ntfn_keys, deliver_insecure=False)
        live = await keyed.get(timeout=5)
        assert (live["Seq"], live.secure) == (8, True)
        # and they can change again, and move again
        await mc.set_keys(del_subscription=sub_keys)
        assert mc.subscription_keys == Keys() and mc.connection.subscription_keys == Keys()
    finally:
        await mc.close()
        await pub_old.close()
        await pub_new.close()


async def test_router_proxy_with_a_key_file_can_be_pinned(make_router, tmp_path):
    """``mobility_key_file`` gives the proxy inside the router a fixed key:
    clients that pin it move out and in with no hello at all (the exchange
    an active attacker could answer), at the same router and at another."""
    from elvin.keys import public_key
    raw_a, raw_b = secrets.token_bytes(32), b"\x00key b\xff" * 3
    (tmp_path / "a.key").write_bytes(raw_a)
    (tmp_path / "b.key").write_bytes(raw_b)
    old = make_router(mobility=True, mobility_key_file=str(tmp_path / "a.key"))
    new = make_router(mobility=True, mobility_key_file=str(tmp_path / "b.key"))
    assert proxy_of(old).public_key == public_key(raw_a)
    assert proxy_of(new).public_key == public_key(raw_b)
    pinned = {old.url: public_key(raw_a), new.url: public_key(raw_b)}
    mc = await MobileConnection.open(old.url, proxy_keys=pinned)
    sub = await mc.subscribe("require(Seq)")
    pub = await connect(old.url)
    try:
        ticket = await mc.move_out()
        assert ticket.proxy_key == public_key(raw_a)
        await pub.send({"Seq": 1})
        await until(lambda: buffered(old, mc.client_id) == 1)
        report = await mc.move_in(old.url)
        assert report.abbreviated and report.caught_up == 1
        assert (await sub.get(timeout=5))["Seq"] == 1
        await mc.move_out()
        await pub.send({"Seq": 2})
        await until(lambda: buffered(old, mc.client_id) == 1)
        report = await mc.move_in(new.url)
        assert not report.abbreviated and report.caught_up == 1
        assert (await sub.get(timeout=5))["Seq"] == 2
        # nobody asked either proxy for its key
        assert proxy_of(old).stats["hello"] == 0 and proxy_of(new).stats["hello"] == 0
        assert proxy_of(old).stats["download"] == 1 and proxy_of(new).stats["move_in"] == 1
    finally:
        await mc.close()
        await pub.close()
