"""A federated peer's large pull filter is compiled off the router's loop.

A FedSubReplace longer than ``link.OFF_LOOP_BYTES`` is decoded and compiled
on the router's compile worker: local clients are served meanwhile, and the
link's later packets still take effect after it, in the order the peer sent
them. Only orderings are asserted, never timings.
"""

from __future__ import annotations

import asyncio
import struct

from elvin.federation.packets import Ack, FedNotify, FedSubReplace, frame_fed_packet
from elvin.keys import Keys
from elvin.protocol import Nack, NotifyDeliver
from elvin.subscription import parse
from elvin.subscription.ast import Kind, Node, const
from tests.waiting import until

from .federation_util import RawFederator, link_stats, remote_pull, single_router
from .rawclient import RawClient


def huge_term(n: int = 20_000) -> Node:
    """One term (an AND holding an OR): compiled in one piece, ~1 MiB encoded."""
    return parse("Kind == 1 && (" + " || ".join(f'Group == "g{i:05d}"' for i in range(n)) + ")")


def compiling(router, domain: str) -> bool:
    def get() -> bool:
        link = router.router.federation.link_for(domain)
        return link is not None and link.compiling
    return router.call(get)


async def test_local_clients_are_served_while_a_huge_pull_filter_compiles():
    router = single_router(accept=["peer"])
    try:
        sub = await RawClient.connected(router.port)
        await sub.subscribe("require(Bystander)")
        pub = await RawClient.connected(router.port)
        peer = await RawFederator.linked(router.federation_urls[0], "peer")
        pull = huge_term()
        peer.send(FedSubReplace(5, pull))
        await until(lambda: compiling(router, "peer"), what="the compile to start")
        answered = asyncio.ensure_future(peer.expect(Ack, timeout=120))
        pub.notify({"Bystander": 1})
        assert (await sub.expect(NotifyDeliver)).attributes == {"Bystander": 1}
        assert not answered.done()        # delivered before the filter was Acked
        assert (await answered).xid == 5
        assert remote_pull(router, "peer") == pull
        for each in (sub, pub, peer):
            await each.close()
    finally:
        router.stop()


async def test_packets_after_a_huge_pull_filter_wait_for_it():
    router = single_router(accept=["peer"])
    try:
        sub = await RawClient.connected(router.port)
        await sub.subscribe("require(x)")
        peer = await RawFederator.linked(router.federation_urls[0], "peer")
        pull = huge_term()
        peer.send_raw(frame_fed_packet(FedSubReplace(5, pull))
                      + frame_fed_packet(FedNotify({"x": 1}, True, Keys(), ("peer",)))
                      + frame_fed_packet(FedSubReplace(6, True)))
        assert (await sub.expect(NotifyDeliver, timeout=120)).attributes == {"x": 1}
        # the FedNotify was acted on only after the FedSubReplace before it
        assert link_stats(router, "peer")["sub_replace_received"] >= 1
        assert (await peer.expect(Ack, timeout=120)).xid == 5
        assert (await peer.expect(Ack, timeout=120)).xid == 6
        assert remote_pull(router, "peer") is True
        for each in (sub, peer):
            await each.close()
    finally:
        router.stop()


async def test_bad_large_pull_filters_are_nacked_and_the_link_stays():
    router = single_router(accept=["peer"])
    try:
        peer = await RawFederator.linked(router.federation_urls[0], "peer")
        # not decodable: an unknown SubAST typecode, in a body too long for the loop
        body = struct.pack(">iIii", FedSubReplace.ID, 7, 99, 0) + bytes(4096)
        peer.send_raw(struct.pack(">I", len(body)) + body)
        assert (await peer.expect(Nack, timeout=60)).xid == 7
        # decodable, but one of its many terms is not a valid expression
        bad = Node(Kind.FUNC_SIZE, (const(Kind.INT32, 1),))
        terms = tuple(parse(f'Group == "g{i}"') for i in range(200)) + (bad,)
        peer.send(FedSubReplace(8, Node(Kind.OR, terms)))
        assert (await peer.expect(Nack, timeout=60)).xid == 8
        assert remote_pull(router, "peer") is False       # the old filter stays
        peer.send(FedSubReplace(9, Node(Kind.OR, terms[:-1])))
        assert (await peer.expect(Ack, timeout=60)).xid == 9
        assert remote_pull(router, "peer") == Node(Kind.OR, terms[:-1])
        await peer.close()
    finally:
        router.stop()
