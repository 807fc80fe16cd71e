"""Quench (subset C): QnchAdd/Mod/DelRqst and SubAdd/Mod/DelNotify."""

from __future__ import annotations

from elvin.errors import NackCode
from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import (
    Nack,
    NotifyDeliver,
    QnchAddRqst,
    QnchDelRqst,
    QnchModRqst,
    QnchRply,
    SubAddNotify,
    SubDelNotify,
    SubDelRqst,
    SubModNotify,
    SubModRqst,
)
from elvin.subscription import parse

from .rawclient import RawClient


async def add_quench(client, names, deliver_insecure=True, keys=EMPTY_KEYS):
    reply = await client.request(QnchAddRqst(client.xid(), tuple(names), deliver_insecure,
                                             keys))
    assert isinstance(reply, QnchRply) and reply.quench_id != 0, reply
    return reply.quench_id


async def test_quench_is_told_about_new_subscriptions_it_concerns(router):
    quencher = await RawClient.connected(router.port)
    other = await RawClient.connected(router.port)
    consumer = await RawClient.connected(router.port)
    qid = await add_quench(quencher, ["File-Path"])
    other_qid = await add_quench(other, ["Size"])
    expr = 'File-Path == "/tmp/a" && require(Owner)'
    sub = await consumer.subscribe(expr)
    notify = await quencher.expect(SubAddNotify)
    assert notify.term_id == sub
    assert notify.insecure_quench_ids == (qid,) and notify.secure_quench_ids == ()
    assert notify.sub_expr == parse(expr)
    await other.nothing(0.3)           # not concerned: nothing
    assert other_qid
    for c in (quencher, other, consumer):
        await c.close()


async def test_new_quench_gets_existing_subscriptions(router):
    consumer = await RawClient.connected(router.port)
    s1 = await consumer.subscribe('Feed == "a"')
    s2 = await consumer.subscribe("Feed == 'b' || Other == 1")
    await consumer.subscribe("Unrelated == 1")
    quencher = await RawClient.connected(router.port)
    qid = await add_quench(quencher, ["Feed"])
    got = [await quencher.expect(SubAddNotify), await quencher.expect(SubAddNotify)]
    assert sorted(n.term_id for n in got) == sorted([s1, s2])
    assert all(n.insecure_quench_ids == (qid,) for n in got)
    await quencher.nothing(0.3)
    await consumer.close()
    await quencher.close()


async def test_modify_and_delete_notifications(router):
    quencher = await RawClient.connected(router.port)
    consumer = await RawClient.connected(router.port)
    qid = await add_quench(quencher, ["A"])
    sub = await consumer.subscribe("A == 1")
    assert (await quencher.expect(SubAddNotify)).term_id == sub
    # still refers to A: SubModNotify with the new tree
    await consumer.request(SubModRqst(consumer.xid(), sub, "A == 2"))
    mod = await quencher.expect(SubModNotify)
    assert mod.term_id == sub and mod.sub_expr == parse("A == 2")
    assert mod.insecure_quench_ids == (qid,)
    # no longer refers to A: SubDelNotify
    await consumer.request(SubModRqst(consumer.xid(), sub, "B == 2"))
    gone = await quencher.expect(SubDelNotify)
    assert gone.term_id == sub and gone.quench_ids == (qid,)
    # refers to A again: SubAddNotify
    await consumer.request(SubModRqst(consumer.xid(), sub, "A == 3 && B == 2"))
    back = await quencher.expect(SubAddNotify)
    assert back.term_id == sub and back.sub_expr == parse("A == 3 && B == 2")
    # deleted: SubDelNotify
    await consumer.request(SubDelRqst(consumer.xid(), sub))
    assert (await quencher.expect(SubDelNotify)).term_id == sub
    await quencher.nothing(0.3)
    await consumer.close()
    await quencher.close()


async def test_subscriber_leaving_deletes_its_subscriptions(router):
    quencher = await RawClient.connected(router.port)
    consumer = await RawClient.connected(router.port)
    await add_quench(quencher, ["A"])
    sub = await consumer.subscribe("require(A)")
    await quencher.expect(SubAddNotify)
    await consumer.close()
    assert (await quencher.expect(SubDelNotify)).term_id == sub


async def test_quench_keys_secure_and_insecure(router):
    keyed_quencher = await RawClient.connected(router.port)
    plain_quencher = await RawClient.connected(router.port)
    secure_only_quencher = await RawClient.connected(router.port)
    consumer = await RawClient.connected(router.port)
    kq = await add_quench(keyed_quencher, ["A"], True, Keys.producer("k"))
    pq = await add_quench(plain_quencher, ["A"], True)
    await add_quench(secure_only_quencher, ["A"], False)
    # accepts insecure, keyed: secure for the keyed quench, insecure for the plain one
    sub = await consumer.subscribe("require(A)", True, Keys.producer_subscription("k"))
    n = await keyed_quencher.expect(SubAddNotify)
    assert n.term_id == sub and n.secure_quench_ids == (kq,) and n.insecure_quench_ids == ()
    n = await plain_quencher.expect(SubAddNotify)
    assert n.secure_quench_ids == () and n.insecure_quench_ids == (pq,)
    await secure_only_quencher.nothing(0.3)       # no key match, deliver_insecure false
    # a subscription that refuses insecure delivery is only seen by the keyed quench
    sub2 = await consumer.subscribe("A == 2", False, Keys.producer_subscription("k"))
    assert (await keyed_quencher.expect(SubAddNotify)).term_id == sub2
    await plain_quencher.nothing(0.3)
    # the subscription drops its key: the keyed quench sees it go
    await consumer.request(SubModRqst(consumer.xid(), sub2, "", False,
                                      del_keys=Keys.producer_subscription("k")))
    assert (await keyed_quencher.expect(SubDelNotify)).term_id == sub2
    for c in (keyed_quencher, plain_quencher, secure_only_quencher, consumer):
        await c.close()


async def test_quench_modify(router):
    consumer = await RawClient.connected(router.port)
    sa = await consumer.subscribe("require(A)")
    sb = await consumer.subscribe("require(B)")
    quencher = await RawClient.connected(router.port)
    qid = await add_quench(quencher, ["A"])
    assert (await quencher.expect(SubAddNotify)).term_id == sa
    reply = await quencher.request(QnchModRqst(quencher.xid(), qid, names_add=("B",),
                                               names_del=("A",)))
    assert isinstance(reply, QnchRply) and reply.quench_id == qid
    assert (await quencher.expect(SubAddNotify)).term_id == sb
    assert (await quencher.expect(SubDelNotify)).term_id == sa
    # removing every name is refused and changes nothing
    reply = await quencher.request(QnchModRqst(quencher.xid(), qid, names_del=("B",)))
    assert isinstance(reply, Nack) and reply.error == NackCode.EMPTY_QUENCH
    reply = await quencher.request(QnchModRqst(quencher.xid(), 999999, names_add=("C",)))
    assert isinstance(reply, Nack) and reply.error == NackCode.NO_SUCH_QUENCH
    await quencher.nothing(0.3)
    await consumer.close()
    await quencher.close()


async def test_quench_delete_and_errors(router):
    quencher = await RawClient.connected(router.port)
    consumer = await RawClient.connected(router.port)
    reply = await quencher.request(QnchAddRqst(quencher.xid(), (), True))
    assert isinstance(reply, Nack) and reply.error == NackCode.EMPTY_QUENCH
    qid = await add_quench(quencher, ["A"])
    reply = await quencher.request(QnchDelRqst(quencher.xid(), qid))
    assert isinstance(reply, QnchRply) and reply.quench_id == qid
    await consumer.subscribe("require(A)")
    await quencher.nothing(0.3)
    reply = await quencher.request(QnchDelRqst(quencher.xid(), qid))
    assert isinstance(reply, Nack) and reply.error == NackCode.NO_SUCH_QUENCH
    await consumer.close()
    await quencher.close()


async def test_one_notify_per_quenching_session(router):
    quencher = await RawClient.connected(router.port)
    consumer = await RawClient.connected(router.port)
    q1 = await add_quench(quencher, ["A"])
    q2 = await add_quench(quencher, ["B"])
    sub = await consumer.subscribe("A == 1 && B == 2")
    n = await quencher.expect(SubAddNotify)
    assert n.term_id == sub and sorted(n.insecure_quench_ids) == sorted([q1, q2])
    await quencher.nothing(0.3)
    await consumer.close()
    await quencher.close()


async def test_quencher_connection_keys_from_sec_rqst(router):
    from elvin.protocol import SecRply, SecRqst

    quencher = await RawClient.connected(router.port)
    consumer = await RawClient.connected(router.port)
    qid = await add_quench(quencher, ["A"], deliver_insecure=False)
    sub = await consumer.subscribe("require(A)", False, Keys.producer_subscription("k"))
    await quencher.nothing(0.3)                     # no key: the quench cannot see it
    reply = await quencher.request(SecRqst(quencher.xid(), add_nfn_keys=Keys.producer("k")))
    assert isinstance(reply, SecRply)
    n = await quencher.expect(SubAddNotify)
    assert n.term_id == sub and n.secure_quench_ids == (qid,)
    # the subscriber's connection keys change too: its keyless subscription becomes visible
    sub2 = await consumer.subscribe("A == 2", False)
    await quencher.nothing(0.3)
    reply = await consumer.request(SecRqst(consumer.xid(),
                                           add_sub_keys=Keys.producer_subscription("k")))
    assert isinstance(reply, SecRply)
    n = await quencher.expect(SubAddNotify)
    assert n.term_id == sub2 and n.secure_quench_ids == (qid,)
    await quencher.close()
    await consumer.close()


async def test_no_quench_router_refuses_every_quench_request_as_avis_does(make_router):
    """``quench = false`` (elvind --no-quench): Nack NOT_IMPL "Quench not
    supported" to all three requests, as Avis answers, and never a
    protocol error: the session stays up however often it is asked."""
    router = make_router(quench=False)
    quencher = await RawClient.connected(router.port)
    consumer = await RawClient.connected(router.port)
    requests = [lambda xid: QnchAddRqst(xid, ("A",), True),
                lambda xid: QnchModRqst(xid, 1, names_add=("B",)),
                lambda xid: QnchDelRqst(xid, 1)]
    for _ in range(20):   # more than max_protocol_errors (16)
        for make in requests:
            reply = await quencher.request(make(quencher.xid()))
            assert isinstance(reply, Nack), reply
            assert (reply.error, reply.message) == (NackCode.NOT_IMPL, "Quench not supported")
    await consumer.subscribe("require(A)")
    await quencher.subscribe("require(Marker)")   # still connected and served
    consumer.notify({"Marker": 1})
    assert (await quencher.expect(NotifyDeliver)).attributes == {"Marker": 1}
    for c in (quencher, consumer):
        await c.close()


async def test_a_quench_on_thousands_of_subscriptions_is_told_over_many_turns(router):
    """Issue 42: the SubAddNotify for 5,000 existing subscriptions are told a
    slice per loop turn (the announcer's turns), not in one handler, and the
    QnchRply still comes after the last of them."""
    from elvin.protocol import SubAddRqst, SubRply

    subscriber = await RawClient.connected(router.port, {"Subscription.Max-Count": 6000})
    for i in range(5000):
        subscriber.send(SubAddRqst(subscriber.xid(), f"x == {i}"))
    await subscriber.drain()
    ids = []
    while len(ids) < 5000:
        packet = await subscriber.next(timeout=60)
        assert isinstance(packet, SubRply), packet
        ids.append(packet.subscription_id)
    quencher = await RawClient.connected(router.port)
    turns = router.call(lambda: router.router.announcer.turns)
    quencher.send(QnchAddRqst(quencher.xid(), ("x",), True, EMPTY_KEYS))
    told = []
    while True:
        packet = await quencher.next(timeout=60)
        if isinstance(packet, QnchRply):
            break
        assert isinstance(packet, SubAddNotify), packet
        told.append(packet.term_id)
    assert sorted(told) == sorted(ids)
    assert router.call(lambda: router.router.announcer.turns) - turns >= 2
    for client in (subscriber, quencher):
        await client.close()
