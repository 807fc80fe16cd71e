"""Security keys: the three SHA-1 schemes, secure-only delivery, connection keys."""

from __future__ import annotations

import pytest

from elvin.errors import NackCode
from elvin.keys import Keys
from elvin.protocol import (
    Nack,
    NotifyDeliver,
    SecRply,
    SecRqst,
    SubAddRqst,
    SubModRqst,
    SubRply,
)

from .rawclient import RawClient

SCHEMES = {
    "producer": (Keys.producer_notification("secret"), Keys.producer_subscription("secret")),
    "consumer": (Keys.consumer_notification("secret"), Keys.consumer_subscription("secret")),
    "dual": (Keys.dual_notification(["p"], ["c"]), Keys.dual_subscription(["p"], ["c"])),
}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
async def test_secure_delivery_with_each_scheme(router, scheme):
    ntfn_keys, sub_keys = SCHEMES[scheme]
    keyed = await RawClient.connected(router.port)
    unkeyed = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    secure = await keyed.subscribe("require(Secret)", accept_insecure=True, keys=sub_keys)
    await unkeyed.subscribe("require(Secret)")
    # producer requires a key holder
    producer.notify({"Secret": 1}, deliver_insecure=False, keys=ntfn_keys)
    deliver = await keyed.expect(NotifyDeliver)
    assert deliver.secure_matches == (secure,) and deliver.insecure_matches == ()
    await unkeyed.nothing(0.3)
    await keyed.close()
    await unkeyed.close()
    await producer.close()


async def test_wrong_key_does_not_match(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    await consumer.subscribe("require(S)", keys=Keys.producer_subscription("right"))
    producer.notify({"S": 1}, deliver_insecure=False, keys=Keys.producer("wrong"))
    await consumer.nothing(0.3)
    await consumer.close()
    await producer.close()


async def test_consumer_requiring_keys_ignores_insecure_notifications(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    sub = await consumer.subscribe("require(S)", accept_insecure=False,
                                   keys=Keys.consumer("ck"))
    producer.notify({"S": "plain"})
    producer.notify({"S": "keyed"}, keys=Keys.consumer_notification("ck"))
    deliver = await consumer.expect(NotifyDeliver)
    assert deliver.attributes == {"S": "keyed"} and deliver.secure_matches == (sub,)
    await consumer.nothing(0.3)
    await consumer.close()
    await producer.close()


async def test_insecure_and_secure_matches_in_one_deliver(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    keyed = await consumer.subscribe("require(S)", keys=Keys.producer_subscription("k"))
    plain = await consumer.subscribe("require(S)")
    producer.notify({"S": 1}, deliver_insecure=True, keys=Keys.producer("k"))
    deliver = await consumer.expect(NotifyDeliver)
    assert deliver.secure_matches == (keyed,) and deliver.insecure_matches == (plain,)
    await consumer.close()
    await producer.close()


async def test_connection_keys_from_conn_rqst(router):
    consumer = await RawClient.connected(router.port, sub_keys=Keys.producer_subscription("k"))
    producer = await RawClient.connected(router.port, nfn_keys=Keys.producer("k"))
    sub = await consumer.subscribe("require(S)", accept_insecure=False)
    producer.notify({"S": 1}, deliver_insecure=False)
    deliver = await consumer.expect(NotifyDeliver)
    assert deliver.secure_matches == (sub,)
    await consumer.close()
    await producer.close()


async def test_connection_keys_from_sec_rqst(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    sub = await consumer.subscribe("require(S)", accept_insecure=False)
    reply = await consumer.request(SecRqst(consumer.xid(),
                                           add_sub_keys=Keys.producer_subscription("k")))
    assert isinstance(reply, SecRply)
    reply = await producer.request(SecRqst(producer.xid(), add_nfn_keys=Keys.producer("k")))
    assert isinstance(reply, SecRply)
    producer.notify({"S": 1}, deliver_insecure=False)
    assert (await consumer.expect(NotifyDeliver)).secure_matches == (sub,)
    # remove the producer's key: no more secure match
    reply = await producer.request(SecRqst(producer.xid(), del_nfn_keys=Keys.producer("k")))
    assert isinstance(reply, SecRply)
    producer.notify({"S": 2}, deliver_insecure=False)
    await consumer.nothing(0.3)
    await consumer.close()
    await producer.close()


async def test_sec_rqst_errors_are_nacked_and_change_nothing(router):
    client = await RawClient.connected(router.port, nfn_keys=Keys.producer("a"))
    reply = await client.request(SecRqst(client.xid(), add_nfn_keys=Keys.producer("a")))
    assert isinstance(reply, Nack) and reply.error == NackCode.KEY_EXISTS
    reply = await client.request(SecRqst(client.xid(), del_sub_keys=Keys.consumer("x")))
    assert isinstance(reply, Nack) and reply.error == NackCode.NO_SUCH_KEY
    reply = await client.request(SecRqst(client.xid(),
                                         add_nfn_keys=Keys({9: (frozenset({b"k"}),)})))
    assert isinstance(reply, Nack) and reply.error == NackCode.BAD_KEY_SCHEME
    assert reply.args == (9,)
    # atomic: a valid part in a failed request is not applied
    reply = await client.request(SecRqst(client.xid(), add_nfn_keys=Keys.producer("b"),
                                         del_nfn_keys=Keys.producer("zzz")))
    assert isinstance(reply, Nack)
    reply = await client.request(SecRqst(client.xid(), del_nfn_keys=Keys.producer("b")))
    assert isinstance(reply, Nack) and reply.error == NackCode.NO_SUCH_KEY
    reply = await client.request(SecRqst(client.xid(), del_nfn_keys=Keys.producer("a")))
    assert isinstance(reply, SecRply)
    await client.close()


async def test_bad_key_scheme_on_subscription(router):
    client = await RawClient.connected(router.port)
    reply = await client.request(SubAddRqst(client.xid(), "a == 1", True,
                                            Keys({2: (frozenset({b"a"}), frozenset({b"b"}))})))
    assert isinstance(reply, Nack) and reply.error == NackCode.BAD_KEY_INDEX
    await client.close()


async def test_sub_mod_keys(router):
    consumer = await RawClient.connected(router.port)
    producer = await RawClient.connected(router.port)
    sub = await consumer.subscribe("require(S)", accept_insecure=False)
    reply = await consumer.request(SubModRqst(consumer.xid(), sub, "", False,
                                              add_keys=Keys.producer_subscription("k")))
    assert isinstance(reply, SubRply)
    producer.notify({"S": 1}, deliver_insecure=False, keys=Keys.producer("k"))
    assert (await consumer.expect(NotifyDeliver)).secure_matches == (sub,)
    # deleting a key that is not there is ignored; deleting the real one works
    reply = await consumer.request(SubModRqst(consumer.xid(), sub, "", False,
                                              del_keys=Keys.producer_subscription("k")
                                              | Keys.producer_subscription("nope")))
    assert isinstance(reply, SubRply)
    producer.notify({"S": 2}, deliver_insecure=False, keys=Keys.producer("k"))
    await consumer.nothing(0.3)
    await consumer.close()
    await producer.close()

