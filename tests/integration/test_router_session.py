"""Session life cycle: connection, options, TestConn, DisconnRqst, UNotify, shutdown."""

from __future__ import annotations

import asyncio

import pytest

from elvin.errors import NackCode
from elvin.protocol import (
    ConfConn,
    ConnRply,
    ConnRqst,
    Disconn,
    DisconnRply,
    DisconnRqst,
    Nack,
    NotifyDeliver,
    NotifyEmit,
    QosRply,
    QosRqst,
    SubAddRqst,
    SubRply,
    TestConn,
    UNotify,
)

from .rawclient import RawClient

MANDATORY = (
    "Attribute.Max-Count", "Attribute.Name.Max-Length", "Attribute.Opaque.Max-Length",
    "Attribute.String.Max-Length", "Packet.Max-Length", "Receive-Queue.Drop-Policy",
    "Receive-Queue.Max-Length", "Send-Queue.Drop-Policy", "Send-Queue.Max-Length",
    "Subscription.Max-Count", "Subscription.Max-Length",
)


async def test_connect_reply_carries_options(router):
    client = await RawClient.open(router.port)
    reply = await client.connect()
    assert isinstance(reply, ConnRply) and reply.xid == 1
    assert reply.options["Supported-Key-Schemes"] == "SHA-1"
    assert isinstance(reply.options["Vendor-Identification"], str)
    for name in MANDATORY:
        assert name in reply.options, name
    await client.close()


async def test_bad_version_is_nacked_with_prot_incompat(router):
    client = await RawClient.open(router.port)
    reply = await client.connect(major=5)
    assert isinstance(reply, Nack) and reply.error == NackCode.PROT_INCOMPAT == 1
    # the channel is still usable for a ConnRqst in a version the router speaks
    reply = await client.connect()
    assert isinstance(reply, ConnRply)
    await client.close()


async def test_option_negotiation_legacy_and_out_of_range(router):
    client = await RawClient.open(router.port)
    reply = await client.connect({
        "router.packet.max-length": 4096,          # legacy spelling, accepted
        "Subscription.Max-Count": 1,               # below the minimum: clamped
        "Send-Queue.Drop-Policy": "sometimes",     # not a policy: router's value
        "Attribute.Max-Count": "many",             # wrong type: router's value
        "Bogus.Option": 3,                         # unknown: not echoed
        "router.vendor-identification": "?",
    })
    options = reply.options
    assert options["router.packet.max-length"] == 4096
    assert "Packet.Max-Length" not in options
    assert options["Subscription.Max-Count"] == 16
    assert options["Send-Queue.Drop-Policy"] == "oldest"
    assert isinstance(options["Attribute.Max-Count"], int)
    assert "Bogus.Option" not in options
    assert isinstance(options["router.vendor-identification"], str)
    await client.close()


async def test_qos_renegotiation(router):
    client = await RawClient.connected(router.port)
    reply = await client.request(QosRqst(client.xid(), {"Subscription.Max-Count": 20,
                                                       "Packet.Max-Length": 10**9}))
    assert isinstance(reply, QosRply)
    assert reply.options["Subscription.Max-Count"] == 20
    assert reply.options["Packet.Max-Length"] == 10 * 1024 * 1024
    assert "Send-Queue.Max-Length" in reply.options      # all active values
    await client.close()


async def test_negotiated_packet_limit_is_enforced(router):
    client = await RawClient.connected(router.port, {"Packet.Max-Length": 1024})
    assert client.conn_reply.options["Packet.Max-Length"] == 1024
    client.notify({"Big": "x" * 4000})
    got = await client.closed_by_router()
    assert any(isinstance(p, Disconn) and p.reason == 4 for p in got)
    # the router still serves others
    other = await RawClient.connected(router.port)
    await other.close()


async def test_notification_over_attribute_limit_is_ignored(router):
    consumer = await RawClient.connected(router.port)
    await consumer.subscribe("require(a0)")
    producer = await RawClient.connected(router.port, {"Attribute.Max-Count": 16})
    producer.notify({f"a{i}": i for i in range(20)})        # over the limit: ignored
    producer.notify({"a0": 1})
    deliver = await consumer.expect(NotifyDeliver)
    assert deliver.attributes == {"a0": 1}
    reply = await producer.request(SubAddRqst(producer.xid(), "a0 == 1"))
    assert isinstance(reply, SubRply)                          # session still fine
    await producer.close()
    await consumer.close()


async def test_test_conn_gets_conf_conn(router):
    client = await RawClient.connected(router.port)
    client.send(TestConn())
    assert isinstance(await client.next(), ConfConn)
    await client.close()


async def test_disconn_rqst_gets_reply_then_close(router):
    client = await RawClient.connected(router.port)
    client.send(DisconnRqst(77))
    got = await client.closed_by_router()
    assert len(got) == 1 and isinstance(got[0], DisconnRply) and got[0].xid == 77


async def test_unotify_is_delivered_and_nothing_is_sent_back(router):
    consumer = await RawClient.connected(router.port)
    await consumer.subscribe('Kind == "unotify"')
    sender = await RawClient.open(router.port)
    sender.send(UNotify(4, 0, {"Kind": "unotify", "N": 1}))
    sender.send(UNotify(3, 0, {"Kind": "unotify", "N": 2}))   # wrong version: discarded
    sender.send(UNotify(4, 0, {"Kind": "unotify", "N": 3}))
    first = await consumer.expect(NotifyDeliver)
    second = await consumer.expect(NotifyDeliver)
    assert [first.attributes["N"], second.attributes["N"]] == [1, 3]
    await sender.nothing(0.3)
    await consumer.nothing(0.2)
    # a session-less channel accepts nothing but UNotify
    sender.send(SubAddRqst(1, "N == 1"))
    assert await sender.closed_by_router() == []
    await consumer.close()


async def test_silent_channel_is_closed(make_router):
    router = make_router(connect_timeout=0.3)
    client = await RawClient.open(router.port)
    assert await client.closed_by_router(timeout=3) == []


@pytest.mark.parametrize("packet", [SubAddRqst(1, "a == 1"), TestConn(),
                                    NotifyEmit({"a": 1}), DisconnRqst(1)])
async def test_packets_before_conn_rqst_close_the_channel(router, packet):
    client = await RawClient.open(router.port)
    client.send(packet)
    assert await client.closed_by_router() == []


async def test_disconn_on_shutdown(make_router):
    router = make_router()
    clients = [await RawClient.connected(router.port) for _ in range(3)]
    await asyncio.get_running_loop().run_in_executor(None, router.stop)
    for client in clients:
        got = await client.closed_by_router()
        assert len(got) == 1 and isinstance(got[0], Disconn) and got[0].reason == 1


async def test_embedded_restart_keeps_the_port(make_router):
    router = make_router()
    port = router.port
    client = await RawClient.connected(router.port)
    await asyncio.get_running_loop().run_in_executor(None, router.restart)
    assert router.port == port
    got = await client.closed_by_router()
    assert isinstance(got[0], Disconn)
    again = await RawClient.connected(port)
    await again.close()


async def test_second_conn_rqst_is_a_protocol_error(router):
    client = await RawClient.connected(router.port)
    reply = await client.connect()
    assert isinstance(reply, Nack) and reply.error == NackCode.PROT_ERROR
    await client.close()


async def test_repeated_protocol_errors_disconnect_with_reason_4(make_router):
    router = make_router(max_protocol_errors=5)
    client = await RawClient.connected(router.port)
    for _ in range(5):
        client.send(ConnRqst(9))
    got = await client.closed_by_router()
    disconns = [p for p in got if isinstance(p, Disconn)]
    assert disconns and disconns[0].reason == 4
    assert sum(isinstance(p, Nack) for p in got) >= 4


async def test_request_over_negotiated_limit_is_qos_limit(router):
    from elvin.protocol import QnchAddRqst

    client = await RawClient.connected(router.port, {"Attribute.Name.Max-Length": 64})
    reply = await client.request(QnchAddRqst(client.xid(), ("n" * 100,), True))
    assert isinstance(reply, Nack) and reply.error == NackCode.QOS_LIMIT
    assert reply.args == ("Attribute.Name.Max-Length",)
    client.send(TestConn())
    assert isinstance(await client.next(), ConfConn)          # still connected
    await client.close()


async def test_router_wide_subscription_limit_is_impl_limit(make_router):
    router = make_router(max_subscriptions=2)
    a = await RawClient.connected(router.port)
    b = await RawClient.connected(router.port)
    await a.subscribe("x == 1")
    await b.subscribe("x == 2")
    reply = await b.request(SubAddRqst(b.xid(), "x == 3"))
    assert isinstance(reply, Nack) and reply.error == NackCode.IMPL_LIMIT
    await a.close()
    await b.close()
