"""Peers that stop answering: FedSubReplace request timeouts and keepalives.

Raw test peers (``RawListener`` for links the router dials, ``RawFederator``
for links it accepts) misbehave on purpose; the router gives up on them after
the configured (small) timeouts, says why in its log, and redials its
outgoing links. No timing is asserted: every wait is a poll with a timeout.
"""

from __future__ import annotations

import asyncio

import pytest

from elvin.federation.config import FederationConfig, FederationConfigError
from elvin.federation.packets import Ack, FedSubReplace
from elvin.protocol import ConfConn, TestConn
from tests.waiting import until

from .federation_util import (
    RawFederator,
    RawListener,
    linked_domains,
    single_router,
)
from .rawclient import RawClient


def warnings_with(caplog, *words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("elvin.federation")
            and all(word in r.getMessage() for word in words)]


def link_acked(router, domain: str) -> bool:
    def get() -> bool:
        link = router.router.federation.link_for(domain)
        return bool(link is not None and link.acked_pull)
    return router.call(get)


async def test_unanswered_sub_replace_closes_the_link_and_redials(caplog):
    caplog.set_level("WARNING", logger="elvin.federation")
    listener = await RawListener.start()
    router = single_router(connect=[listener.url], request_timeout=0.3, request_retries=1)
    sub = None
    try:
        peer = await listener.accept_linked("peer")
        sub = await RawClient.connected(router.port)
        await sub.subscribe("require(Fed)")     # gives the peer a pull filter to send
        first = await peer.expect(FedSubReplace)
        while "FUNC_REQUIRE" not in repr(first.pull_filter):   # the one before it
            first = await peer.expect(FedSubReplace)           # (taking part) is superseded
        again = await peer.expect(FedSubReplace)   # no Ack: Avis-style retry
        assert again.xid != first.xid
        assert again.pull_filter == first.pull_filter
        await peer.until_closed(timeout=10)       # retries used up: the router hangs up
        await until(lambda: warnings_with(caplog, "FedSubReplace", "request timeout"),
                    what="the request timeout warning")
        assert warnings_with(caplog, "sending it again")

        # the router redials; this time the peer answers and the link stays up
        behaved = await listener.accept_linked("peer")
        replace = await behaved.expect(FedSubReplace)
        behaved.send(Ack(replace.xid))
        await until(lambda: link_acked(router, "peer"), what="the Ack")
        await asyncio.sleep(1.0)                  # several request timeouts
        assert linked_domains(router) == {"peer"}
        assert len(warnings_with(caplog, "request timeout")) == 1
        await behaved.close()
        await peer.close()
    finally:
        if sub is not None:
            await sub.close()
        router.stop()
        await listener.close()


async def test_silent_outgoing_peer_is_dropped_and_redialled(caplog):
    caplog.set_level("WARNING", logger="elvin.federation")
    listener = await RawListener.start()
    router = single_router(connect=[listener.url], keepalive=0.2)
    try:
        peer = await listener.accept_linked("peer")
        await peer.expect(TestConn, timeout=10)   # ... and never a ConfConn
        await peer.until_closed(timeout=10)
        await until(lambda: warnings_with(caplog, "stopped responding"),
                    what="the keepalive warning")
        again = await listener.accept_linked("peer", timeout=10)
        await until(lambda: linked_domains(router) == {"peer"}, what="the new link")
        await again.close()
        await peer.close()
    finally:
        router.stop()
        await listener.close()


async def test_silent_incoming_peer_is_dropped(caplog):
    caplog.set_level("WARNING", logger="elvin.federation")
    router = single_router(accept=["peer"], keepalive=0.2)
    try:
        url = router.federation_urls[0]
        answering = await RawFederator.linked(url, "peer")
        # a peer that answers TestConn stays linked across several keepalives
        for _ in range(3):
            await answering.expect(TestConn, timeout=10)
            answering.send(ConfConn())
        assert linked_domains(router) == {"peer"}
        await answering.close()
        await until(lambda: linked_domains(router) == set(), what="the unlink")

        silent = await RawFederator.linked(url, "peer")
        await silent.expect(TestConn, timeout=10)
        await silent.until_closed(timeout=10)
        await until(lambda: warnings_with(caplog, "stopped responding"),
                    what="the keepalive warning")
        await until(lambda: linked_domains(router) == set(), what="the unlink")
        await silent.close()
    finally:
        router.stop()


def test_request_settings_are_validated():
    with pytest.raises(FederationConfigError, match="federation.request_retries"):
        FederationConfig(request_retries=-1).validate()
    with pytest.raises(FederationConfigError, match="federation.request_timeout"):
        FederationConfig(request_timeout=0).validate()
    assert FederationConfig(request_retries=0).validate().request_retries == 0
