"""The router's recent notifications, replayed to a browser that asks
(``elvin.router.recent``): what flowed before the subscription is
delivered to that subscription alone, only what its keys could have
received, and the request itself reaches no one."""

from __future__ import annotations

from elvin.census import RECENT_REQUEST, recent_request
from elvin.keys import Keys
from elvin.protocol import NotifyDeliver
from elvin.router.recent import RecentValues

from .rawclient import RawClient


async def _flushed(client: RawClient) -> None:
    """What ``client`` sent has been handled (the router reads a
    connection's packets in order, and answers this one after them)."""
    await client.subscribe("require(Flush-Barrier)")


async def test_what_flowed_before_is_replayed_to_the_asking_subscription(router):
    producer = await RawClient.connected(router.port)
    producer.notify({"Group": "Chat", "Message": "first"})
    producer.notify({"Group": "Chat", "Message": "second"})    # same shape: the last kept
    producer.notify({"Sensor": "attic", "Temperature": 21.5})
    await _flushed(producer)
    browser = await RawClient.connected(router.port)
    other = await browser.subscribe("require(Message)")        # its own: not replayed to
    sub = await browser.subscribe("require(Group) || require(Sensor)")
    listener = await RawClient.connected(router.port)
    await listener.subscribe(f"require({RECENT_REQUEST})")
    browser.notify(recent_request(sub))
    got = [await browser.expect(NotifyDeliver) for _ in range(2)]
    assert sorted(d.attributes.get("Message", d.attributes.get("Sensor")) for d in got) \
        == ["attic", "second"]
    assert all(d.insecure_matches == (sub,) and d.secure_matches == () for d in got)
    assert other not in {i for d in got for i in d.insecure_matches}
    await browser.nothing(0.3)
    await listener.nothing(0.3)                   # the request was the router's
    # by name: only what carries one of them
    browser.notify(recent_request(sub, ["Sensor"]))
    only = await browser.expect(NotifyDeliver)
    assert only.attributes["Sensor"] == "attic"
    await browser.nothing(0.3)
    for client in (producer, browser, listener):
        await client.close()


async def test_a_replay_respects_keys(router):
    key = Keys.producer_notification("secret")
    producer = await RawClient.connected(router.port)
    producer.notify({"Secret": "plans"}, deliver_insecure=False, keys=key)
    await _flushed(producer)
    unkeyed = await RawClient.connected(router.port)
    plain = await unkeyed.subscribe("require(Secret)")
    unkeyed.notify(recent_request(plain))
    await unkeyed.nothing(0.5)                    # it could not have received it
    keyed = await RawClient.connected(router.port)
    secure = await keyed.subscribe("require(Secret)", keys=Keys.producer_subscription("secret"))
    keyed.notify(recent_request(secure))
    deliver = await keyed.expect(NotifyDeliver)
    assert deliver.attributes["Secret"] == "plans" and deliver.secure_matches == (secure,)
    for client in (producer, unkeyed, keyed):
        await client.close()


def test_the_kept_notifications_are_bounded():
    recent = RecentValues(lambda *a: ({}, {}), max_shapes=3, max_bytes=100)
    for n in range(10):
        recent.note({f"Name{n}": n}, b"x" * 10, True, None)
    recent.note({"Big": 1}, b"x" * 101, True, None)        # too large to keep
    assert list(recent.kept) == [("Name7",), ("Name8",), ("Name9",)]


def test_a_repeated_shape_keeps_the_newest_values_and_the_order_of_use():
    """A stream repeating its shape (``note``'s shortcut for the newest)
    replaces its kept values and stays the newest; a shape seen again after
    others moves back to the end; after ``stop`` the same shape is kept anew."""
    recent = RecentValues(lambda *a: ({}, {}), max_shapes=2, max_bytes=100)
    for n in range(3):
        recent.note({"A": n}, b"a", True, None)
    recent.note({"B": 0}, b"b", True, None)
    recent.note({"A": 9}, b"a", True, None)
    recent.note({"A": 10}, b"a", True, None)
    assert [(shape, entry[0]) for shape, entry in recent.kept.items()] == \
        [(("B",), {"B": 0}), (("A",), {"A": 10})]
    recent.note({"C": 0}, b"c", True, None)                # the oldest (B) goes
    assert list(recent.kept) == [("A",), ("C",)]
    recent.stop()
    recent.note({"C": 1}, b"c", True, None)
    assert list(recent.kept) == [("C",)] and recent.kept[("C",)][0] == {"C": 1}


async def test_one_replay_per_client_at_a_time():
    """A client asking again (for another subscription) replaces its
    running replay: a client cannot pile up replays."""
    import asyncio

    sent = []

    class Owner:
        def send_bytes(self, data, droppable=False):
            sent.append(data)

    owner = Owner()
    recent = RecentValues(lambda attrs, nkeys, insecure: ({owner: (1, 2)}, {}))
    for n in range(50):
        recent.note({f"N{n}": n}, b"\0\0\0\0", True, None)
    recent.request(owner, recent_request(1))
    recent.request(owner, recent_request(2))
    assert len(recent._replays) == 1
    while recent._replays:
        await asyncio.sleep(0)
    assert len(sent) == 50                      # the second replay's, not both
    recent.request(owner, {RECENT_REQUEST: "not an id"})     # ignored
    assert not recent._replays
