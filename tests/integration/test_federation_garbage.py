"""Bad federation peers over raw sockets: each gets a Nack or a Disconn and
the router goes on serving its clients and its good links."""

from __future__ import annotations

import asyncio
import random
import struct

import pytest

from elvin.federation.packets import (
    Ack,
    FedConnRqst,
    FedNotify,
    FedSubReplace,
    frame_fed_packet,
)
from elvin.keys import Keys
from elvin.protocol import Disconn, Nack, NotifyDeliver
from tests.waiting import until

from .federation_util import (
    RawFederator,
    agreed_topology,
    fed_stats,
    federated_routers,
    linked_domains,
    pull_wants,
    stop_all,
    wait_linked,
)
from .rawclient import RawClient


@pytest.fixture
def pair():
    """r0 <- r1, r0 also accepting "peer" (the raw test federator)."""
    routers = federated_routers(2)
    r0 = routers[0]

    def allow():
        from elvin.federation.config import AcceptSpec
        r0.router.federation.config.accept.append(AcceptSpec("peer"))
    r0.call(allow)
    wait_linked(routers)
    yield routers
    stop_all(routers)


async def still_works(routers) -> None:
    """A notification still crosses r1 -> r0 and reaches a client of r0."""
    r0, r1 = routers[:2]
    sub = await RawClient.connected(r0.port)
    await sub.subscribe("require(Alive)")
    await until(lambda: pull_wants(r1, "r0", "Alive"), what="the pull filter")
    producer = await RawClient.connected(r1.port)
    producer.notify({"Alive": 1})
    assert (await sub.expect(NotifyDeliver)).attributes == {"Alive": 1}
    assert linked_domains(r0) >= {"r1"}
    await sub.close()
    await producer.close()


def disconn_reason(packets) -> int | None:
    for p in packets:
        if isinstance(p, Disconn):
            return p.reason
    return None


async def test_random_bytes_are_disconnected(pair):
    rng = random.Random(7)
    for _ in range(5):
        peer = await RawFederator.open(pair[0].federation_urls[0])
        peer.send_raw(rng.randbytes(rng.randint(1, 200)))
        got = await peer.until_closed()
        assert disconn_reason(got) in (4, None)
    await still_works(pair)


async def test_bad_frame_header_is_disconnected(pair):
    peer = await RawFederator.open(pair[0].federation_urls[0])
    peer.send_raw(struct.pack(">I", 0x7FFFFFF0) + b"\0" * 16)
    assert disconn_reason(await peer.until_closed()) == 4
    await still_works(pair)


async def test_packet_before_handshake_is_disconnected(pair):
    peer = await RawFederator.open(pair[0].federation_urls[0])
    peer.send(FedNotify({"x": 1}, True, Keys(), ("peer",)))
    got = await peer.until_closed()
    assert disconn_reason(got) == 4
    assert "before FedConnRqst" in next(p for p in got if isinstance(p, Disconn)).args


@pytest.mark.parametrize("rqst, code", [
    (FedConnRqst(1, 2, 0, "peer"), 1),          # major version 2: PROT_INCOMPAT
    (FedConnRqst(1, 1, 5, "peer"), 1),          # minor version above ours
    (FedConnRqst(1, 1, 0, "stranger"), 2500),   # not in federation.accept
    (FedConnRqst(1, 1, 0, "r0"), 2500),         # the router's own domain
    (FedConnRqst(1, 1, 0, "r1"), 2500),         # already linked
])
async def test_refused_handshakes_get_a_nack(pair, rqst, code):
    peer = await RawFederator.open(pair[0].federation_urls[0])
    peer.send(rqst)
    got = await peer.until_closed()
    nack = next(p for p in got if isinstance(p, Nack))
    assert nack.xid == 1 and nack.error == code
    assert fed_stats(pair[0])["links_refused"] >= 1
    await still_works(pair)


async def test_bad_pull_filter_is_nacked_and_the_link_stays(pair):
    peer = await RawFederator.linked(pair[0].federation_urls[0], "peer")
    # an unknown SubAST typecode: not decodable
    peer.send_raw(struct.pack(">IiIii", 16, 194, 7, 99, 0))
    nack = await peer.expect(Nack)
    assert nack.xid == 7
    # decodable but not a valid expression (size() of a constant)
    from elvin.subscription.ast import Kind, Node, const
    peer.send(FedSubReplace(8, Node(Kind.FUNC_SIZE, (const(Kind.INT32, 1),))))
    nack = await peer.expect(Nack)
    assert nack.xid == 8
    # the link is still up: a good one is acknowledged
    peer.send(FedSubReplace(9, True))
    assert (await peer.expect(Ack)).xid == 9
    await peer.close()
    await still_works(pair)


@pytest.mark.parametrize("routing, why", [
    (("someone-else",), "lacks the sender's domain"),
    (tuple(f"d{i}" for i in range(100)) + ("peer",), "routing list of 101"),
])
async def test_bad_routing_lists_are_disconnected(pair, routing, why):
    peer = await RawFederator.linked(pair[0].federation_urls[0], "peer")
    peer.send(FedNotify({"x": 1}, True, Keys(), routing))
    got = await peer.until_closed()
    disconn = next(p for p in got if isinstance(p, Disconn))
    assert disconn.reason == 4 and why in disconn.args
    await still_works(pair)


async def test_own_domain_in_routing_list_is_dropped_silently(pair):
    r0 = pair[0]
    sub = await RawClient.connected(r0.port)
    await sub.subscribe("require(x)")
    peer = await RawFederator.linked(r0.federation_urls[0], "peer")
    peer.send(FedNotify({"x": 1}, True, Keys(), ("peer", "r0")))
    peer.send(FedNotify({"x": 2}, True, Keys(), ("peer",)))
    assert (await sub.expect(NotifyDeliver)).attributes == {"x": 2}
    assert fed_stats(r0)["fed_notify_looped"] == 1
    await peer.close()


async def test_truncated_and_mutated_packets_after_the_handshake(pair):
    rng = random.Random(99)
    good = frame_fed_packet(FedNotify({"x": 1, "y": "z" * 10}, True, Keys(), ("peer",)))
    for _ in range(10):
        peer = await RawFederator.linked(pair[0].federation_urls[0], "peer")
        body = bytearray(good[4:])
        for _k in range(3):
            body[rng.randrange(4, len(body))] = rng.randrange(256)
        peer.send_raw(struct.pack(">I", len(body)) + bytes(body))
        peer.send_raw(struct.pack(">I", 8) + struct.pack(">ii", 195, 5))   # truncated
        try:
            await asyncio.wait_for(peer.until_closed(), 5)
        finally:
            await peer.close()
    await still_works(pair)


async def test_good_packets_before_a_bad_frame_header_are_delivered(pair):
    """A peer's FedNotify that arrived whole in the same chunk as a broken
    frame header is a good packet: it is delivered before the link closes
    (as a router session does for a client's packets)."""
    r0 = pair[0]
    sub = await RawClient.connected(r0.port)
    await sub.subscribe("require(before_bad_header)")
    peer = await RawFederator.linked(r0.federation_urls[0], "peer")
    # a FedNotify first (it says the peer does not take part), then the
    # routers agree on its link: what it sends from then on has a route
    peer.send(FedNotify({"warm_up": 1}, True, Keys(), ("peer",)))
    await until(lambda: "peer" in str(agreed_topology(r0)),
                what="the routers agreeing on the peer's link")
    good = frame_fed_packet(FedNotify({"before_bad_header": 1}, True, Keys(), ("peer",)))
    peer.send_raw(good + struct.pack(">I", 0x7FFFFFF0) + b"\0" * 16)   # one write
    assert disconn_reason(await peer.until_closed()) == 4
    assert (await sub.expect(NotifyDeliver)).attributes == {"before_bad_header": 1}
    await sub.close()
    await still_works(pair)


async def test_fed_notify_with_keys_the_router_refuses_is_dropped(pair):
    """Keys the router would Nack from a client (an unknown scheme, a key set
    too many) make a FedNotify undeliverable: it is dropped, logged and not
    counted as delivered, and the link stays up for the next one."""
    r0 = pair[0]
    sub = await RawClient.connected(r0.port)
    await sub.subscribe("require(x)")
    peer = await RawFederator.linked(r0.federation_urls[0], "peer")
    before = fed_stats(r0)["fed_notify_delivered"]
    peer.send(FedNotify({"x": 1}, True, Keys({9: (frozenset({b"k"}),)}), ("peer",)))
    peer.send(FedNotify({"x": 2}, True, Keys({2: (frozenset({b"a"}), frozenset({b"b"}))}),
                        ("peer",)))
    peer.send(FedNotify({"x": 3}, True, Keys(), ("peer",)))
    assert (await sub.expect(NotifyDeliver)).attributes == {"x": 3}
    assert fed_stats(r0)["fed_notify_delivered"] == before + 1
    assert "peer" in linked_domains(r0)
    await sub.close()
    await peer.close()
