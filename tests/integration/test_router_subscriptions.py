"""Subscriptions and notification delivery."""

from __future__ import annotations

from elvin.errors import NackCode
from elvin.protocol import (
    Nack,
    NotifyDeliver,
    SubAddRqst,
    SubDelRqst,
    SubModRqst,
    SubRply,
)
from elvin.values import Int64

from .rawclient import RawClient


async def test_subscribe_and_receive(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    sub = await consumer.subscribe('Group == "chat" && contains(Message, "hello")')
    assert sub != 0
    producer.notify({"Group": "chat", "Message": "well hello there", "N": Int64(5)})
    producer.notify({"Group": "chat", "Message": "bye"})
    producer.notify({"Group": "other", "Message": "hello"})
    deliver = await consumer.expect(NotifyDeliver)
    assert deliver.attributes == {"Group": "chat", "Message": "well hello there",
                                  "N": Int64(5)}
    assert type(deliver.attributes["N"]) is Int64
    assert deliver.insecure_matches == (sub,) and deliver.secure_matches == ()
    await consumer.nothing(0.3)
    await producer.close()
    await consumer.close()


async def test_ids_are_unique_across_clients(router):
    a = await RawClient.connected(router.port)
    b = await RawClient.connected(router.port)
    ids = [await a.subscribe("x == 1"), await b.subscribe("x == 1"),
           await a.subscribe("y == 1"), await b.subscribe("x == 1")]
    assert len(set(ids)) == 4 and 0 not in ids
    await a.close()
    await b.close()


async def test_one_deliver_lists_all_matching_subscriptions(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    s1 = await consumer.subscribe("require(A)")
    s2 = await consumer.subscribe("A > 1")
    s3 = await consumer.subscribe("A > 100")
    s4 = await consumer.subscribe("A == 5 || B == 1")
    producer.notify({"A": 5})
    deliver = await consumer.expect(NotifyDeliver)
    assert sorted(deliver.insecure_matches) == sorted([s1, s2, s4])
    assert s3 not in deliver.insecure_matches
    await consumer.nothing(0.3)          # exactly one packet for the notification
    await producer.close()
    await consumer.close()


async def test_own_notifications_are_delivered_to_self(router):
    client = await RawClient.connected(router.port)
    sub = await client.subscribe("require(Self)")
    client.notify({"Self": 1})
    deliver = await client.expect(NotifyDeliver)
    assert deliver.insecure_matches == (sub,)
    await client.close()


async def test_others_subscriptions_are_not_listed(router):
    a = await RawClient.connected(router.port)
    b = await RawClient.connected(router.port)
    sa = await a.subscribe("require(X)")
    sb = await b.subscribe("require(X)")
    a.notify({"X": 1})
    assert (await a.expect(NotifyDeliver)).insecure_matches == (sa,)
    assert (await b.expect(NotifyDeliver)).insecure_matches == (sb,)
    await a.close()
    await b.close()


async def test_bad_subscription_nack_code_and_args(router):
    client = await RawClient.connected(router.port)
    reply = await client.request(SubAddRqst(client.xid(), "Group == "))
    assert isinstance(reply, Nack)
    assert 2101 <= reply.error <= 2112
    assert isinstance(reply.args[0], int) and isinstance(reply.args[1], str)
    reply = await client.request(SubAddRqst(client.xid(), "nosuchfunc(a)"))
    assert isinstance(reply, Nack) and reply.error == NackCode.UNKNOWN_FUNC
    assert reply.args[0] == 0 and reply.args[1] == "nosuchfunc"
    reply = await client.request(SubAddRqst(client.xid(), "a == 1 && (b == "))
    assert isinstance(reply, Nack) and reply.args[0] > 5
    await client.close()


async def test_no_such_sub(router):
    client = await RawClient.connected(router.port)
    other = await RawClient.connected(router.port)
    foreign = await other.subscribe("a == 1")
    for packet in (SubModRqst(client.xid(), 424242, "a == 2"), SubDelRqst(client.xid(), 424242),
                   SubDelRqst(client.xid(), foreign)):
        reply = await client.request(packet)
        assert isinstance(reply, Nack) and reply.error == NackCode.NO_SUCH_SUB
        assert reply.args == (Int64(packet.subscription_id),)
    await client.close()
    await other.close()


async def test_too_many_subscriptions_is_qos_limit(router):
    client = await RawClient.connected(router.port, {"Subscription.Max-Count": 16})
    for i in range(16):
        await client.subscribe(f"n == {i}")
    reply = await client.request(SubAddRqst(client.xid(), "n == 99"))
    assert isinstance(reply, Nack) and reply.error == NackCode.QOS_LIMIT
    assert reply.args == ("Subscription.Max-Count",)
    await client.close()


async def test_too_long_expression_is_qos_limit(router):
    client = await RawClient.connected(router.port, {"Subscription.Max-Length": 1024})
    long_expr = " || ".join(f'name == "value number {i}"' for i in range(60))
    assert len(long_expr) > 1024
    for packet in (SubAddRqst(client.xid(), long_expr),):
        reply = await client.request(packet)
        assert isinstance(reply, Nack) and reply.error == NackCode.QOS_LIMIT
        assert reply.args == ("Subscription.Max-Length",)
    sub = await client.subscribe("a == 1")
    reply = await client.request(SubModRqst(client.xid(), sub, long_expr))
    assert isinstance(reply, Nack) and reply.error == NackCode.QOS_LIMIT
    await client.close()


async def test_sub_mod_changes_expression(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    sub = await consumer.subscribe("n == 1")
    reply = await consumer.request(SubModRqst(consumer.xid(), sub, "n == 2"))
    assert isinstance(reply, SubRply) and reply.subscription_id == sub
    producer.notify({"n": 1})
    producer.notify({"n": 2})
    deliver = await consumer.expect(NotifyDeliver)
    assert deliver.attributes == {"n": 2}
    await consumer.nothing(0.3)
    await producer.close()
    await consumer.close()


async def test_sub_mod_empty_expression_keeps_it_and_invalid_one_changes_nothing(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    sub = await consumer.subscribe("n == 1")
    # invalid expression: Nack, the old one stays in place
    reply = await consumer.request(SubModRqst(consumer.xid(), sub, "n == == 2"))
    assert isinstance(reply, Nack) and reply.error >= 2101
    producer.notify({"n": 1})
    assert (await consumer.expect(NotifyDeliver)).insecure_matches == (sub,)
    # empty expression: only accept_insecure changes (to False: no more insecure deliveries)
    reply = await consumer.request(SubModRqst(consumer.xid(), sub, "", accept_insecure=False))
    assert isinstance(reply, SubRply)
    producer.notify({"n": 1})
    await consumer.nothing(0.3)
    reply = await consumer.request(SubModRqst(consumer.xid(), sub, "", accept_insecure=True))
    producer.notify({"n": 1})
    assert (await consumer.expect(NotifyDeliver)).insecure_matches == (sub,)
    await producer.close()
    await consumer.close()


async def test_sub_del_stops_delivery(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    sub = await consumer.subscribe("n == 1")
    keep = await consumer.subscribe("n == 2")
    reply = await consumer.request(SubDelRqst(consumer.xid(), sub))
    assert isinstance(reply, SubRply) and reply.subscription_id == sub
    producer.notify({"n": 1})
    producer.notify({"n": 2})
    deliver = await consumer.expect(NotifyDeliver)
    assert deliver.insecure_matches == (keep,)
    await consumer.nothing(0.3)
    await producer.close()
    await consumer.close()


async def test_evaluation_type_errors_do_not_disturb_others(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    await consumer.subscribe("n > 1")
    good = await consumer.subscribe("require(n)")
    producer.notify({"n": "a string"})
    deliver = await consumer.expect(NotifyDeliver)
    assert deliver.insecure_matches == (good,)
    await producer.close()
    await consumer.close()


async def test_router_reads_reals_precedence_and_constants_as_the_language(router):
    """Issue 18 at the router: -0.0 and 0.0 are different (so two
    subscriptions that differ only there are not one shared predicate), a
    NaN equals a NaN (and its index key finds it) and is above +inf, ``%``
    takes reals, the language page's precedence, and a partly constant
    subscription is accepted and evaluated."""
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    subs = {}
    for label, text in [("pos", "X == 0.0"), ("neg", "X == -0.0"),
                        ("nan", "X == 0.0 / 0.0 || X == 5.0"), ("big", "X > 1.0e308"),
                        ("shift", "X - 1 << 2 == 6"), ("partly", "X == 1 || 1 == 2"),
                        ("rem", "X % 2.5 == 2.0"), ("marker", "require(Marker)")]:
        subs[await consumer.subscribe(text)] = label
    for n, x in enumerate([-0.0, float("nan"), 0.0, 10, 1, 7.0], start=1):
        producer.notify({"N": n, "X": x})
    producer.notify({"Marker": 1})
    got = {}
    while True:
        deliver = await consumer.expect(NotifyDeliver)
        labels = sorted(subs[s] for s in deliver.insecure_matches)
        if labels == ["marker"]:
            break
        got[deliver.attributes["N"]] = labels
    assert got == {1: ["neg"], 2: ["big", "nan"], 3: ["pos"], 4: ["shift"], 5: ["partly"],
                   6: ["rem"]}
    await producer.close()
    await consumer.close()
