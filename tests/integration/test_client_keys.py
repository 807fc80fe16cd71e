"""Security keys end to end: the three SHA-1 schemes, secure flags, SecRqst."""

from __future__ import annotations

import pytest

from elvin import Keys
from elvin.client import connect

SECRET = b"shared secret"
OTHER = b"someone else's"


def drain(sub) -> list:
    out = []
    while sub.pending:
        out.append(sub.get_nowait())
    return out


async def settle(probe, key: str, value, timeout: float = 10) -> None:
    """Wait until ``probe`` (a plain subscription on the consumer's
    connection, matching everything the test sends) has received the
    notification with ``key == value``: the router delivers to one
    connection in order and one NotifyDeliver names every subscription it
    matched, so by then every other subscription has all it will get."""
    while True:
        n = await probe.get(timeout=timeout)
        if n.get(key) == value:
            return


def scheme_keys(scheme: str, raw: bytes) -> tuple[Keys, Keys]:
    """(notification keys, subscription keys) for one raw key in one scheme."""
    if scheme == "producer":
        return Keys.producer_notification(raw), Keys.producer_subscription(raw)
    if scheme == "consumer":
        return Keys.consumer_notification(raw), Keys.consumer_subscription(raw)
    return (Keys.dual_notification([raw], [raw + b"-c"]),
            Keys.dual_subscription([raw], [raw + b"-c"]))


def test_builders_put_raw_and_public_keys_where_keys_md_says():
    from elvin.keys import KeyScheme, public_key
    assert Keys.producer(SECRET) == Keys.of(KeyScheme.SHA1_PRODUCER, [SECRET])
    assert Keys.producer_subscription(SECRET) == Keys.of(KeyScheme.SHA1_PRODUCER,
                                                         [public_key(SECRET)])
    assert Keys.consumer(SECRET) == Keys.of(KeyScheme.SHA1_CONSUMER, [SECRET])
    assert Keys.consumer_notification(SECRET) == Keys.of(KeyScheme.SHA1_CONSUMER,
                                                         [public_key(SECRET)])
    assert Keys.dual_notification([b"p"], [b"c"]) == Keys.of(
        KeyScheme.SHA1_DUAL, [b"p"], [public_key(b"c")])
    assert Keys.dual_subscription([b"p"], [b"c"]) == Keys.of(
        KeyScheme.SHA1_DUAL, [public_key(b"p")], [b"c"])
    assert Keys.producer("text") == Keys.producer(b"text")
    with pytest.raises(TypeError):
        Keys.producer(42)
    with pytest.raises(ValueError):
        Keys.producer(b"")


@pytest.mark.parametrize("scheme", ["producer", "consumer", "dual"])
async def test_secure_delivery_per_scheme(router_url, scheme):
    ntfn_keys, sub_keys = scheme_keys(scheme, SECRET)
    wrong_ntfn, _ = scheme_keys(scheme, OTHER)
    async with connect(router_url) as consumer, connect(router_url) as producer:
        secure_only = await consumer.subscribe("require(s)", keys=sub_keys,
                                               accept_insecure=False)
        open_sub = await consumer.subscribe("require(s)", keys=sub_keys)
        plain = await consumer.subscribe("require(s)")
        probe = await consumer.subscribe("require(s)", keys=sub_keys)
        # 1. matching keys, insecure delivery allowed
        await producer.send({"s": 1}, keys=ntfn_keys)
        # 2. wrong keys
        await producer.send({"s": 2}, keys=wrong_ntfn)
        # 3. no keys
        await producer.send({"s": 3})
        # 4. matching keys, secure delivery only
        await producer.send({"s": 4}, keys=ntfn_keys, deliver_insecure=False)
        # 5. wrong keys, secure delivery only
        await producer.send({"s": 5}, keys=wrong_ntfn, deliver_insecure=False)
        await producer.send({"s": 0}, keys=ntfn_keys)     # the end marker
        await settle(probe, "s", 0)

        got = {n["s"]: n.secure for n in drain(secure_only)}
        assert got == {1: True, 4: True, 0: True}
        got = {n["s"]: n.secure for n in drain(open_sub)}
        assert got == {1: True, 2: False, 3: False, 4: True, 0: True}
        got = {n["s"]: n.secure for n in drain(plain)}
        assert got == {1: False, 2: False, 3: False, 0: False}


async def test_connection_level_keys(router_url):
    ntfn_keys, sub_keys = scheme_keys("producer", SECRET)
    async with connect(router_url, subscription_keys=sub_keys) as consumer, \
            connect(router_url, notification_keys=ntfn_keys) as producer:
        sub = await consumer.subscribe("require(c)", accept_insecure=False)
        await producer.send({"c": 1})
        await producer.send({"c": 2}, deliver_insecure=False)
        assert [(n["c"], n.secure) for n in [await sub.get(timeout=10) for _ in range(2)]] \
            == [(1, True), (2, True)]


async def test_set_keys_changes_matching(router_url):
    ntfn_keys, sub_keys = scheme_keys("consumer", SECRET)
    async with connect(router_url) as consumer, connect(router_url) as producer:
        sub = await consumer.subscribe("require(k)", accept_insecure=False)
        probe = await consumer.subscribe("require(k)")
        await producer.send({"k": 1}, keys=ntfn_keys)
        await settle(probe, "k", 1)
        assert drain(sub) == []

        await consumer.set_keys(add_subscription=sub_keys)
        assert consumer.subscription_keys == sub_keys
        await producer.send({"k": 2}, keys=ntfn_keys)
        await settle(probe, "k", 2)
        assert [(n["k"], n.secure) for n in drain(sub)] == [(2, True)]

        await consumer.set_keys(del_subscription=sub_keys)
        assert not consumer.subscription_keys
        await producer.send({"k": 3}, keys=ntfn_keys)
        await settle(probe, "k", 3)
        assert drain(sub) == []

        # producer side: connection notification keys via SecRqst
        await consumer.set_keys(add_subscription=sub_keys)
        await producer.set_keys(add_notification=ntfn_keys)
        await producer.send({"k": 4}, deliver_insecure=False)
        n = await sub.get(timeout=10)
        assert (n["k"], n.secure) == (4, True)


async def test_subscription_keys_modify(router_url):
    ntfn_keys, sub_keys = scheme_keys("producer", SECRET)
    async with connect(router_url) as consumer, connect(router_url) as producer:
        sub = await consumer.subscribe("require(m)", accept_insecure=False)
        probe = await consumer.subscribe("require(m)")
        await producer.send({"m": 1}, keys=ntfn_keys)
        await settle(probe, "m", 1)
        assert drain(sub) == []
        await sub.modify(keys_add=sub_keys)
        assert sub.keys == sub_keys
        await producer.send({"m": 2}, keys=ntfn_keys)
        await settle(probe, "m", 2)
        assert [n["m"] for n in drain(sub)] == [2]
        await sub.modify(keys_del=sub_keys)
        await producer.send({"m": 3}, keys=ntfn_keys)
        await settle(probe, "m", 3)
        assert drain(sub) == []
