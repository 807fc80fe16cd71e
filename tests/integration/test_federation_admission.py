"""Who may link: host rules on the routers that dial in (issue 31).

A router that dials in only *claims* its router domain, so an accept entry's
``hosts`` says where that router may dial from, and ``accept_any_hosts`` the
same for ``accept_any``. The address outside the rules is a second loopback
address, 127.0.0.2 (Linux routes all of 127/8 to the loopback interface
without setup): real routers dial from it with ``source_address``, raw peers
bind it.

"Nothing crosses" is counted, never timed: a refused peer reads every packet
the router sends it until the router closes the connection, and that is one
Nack; a refused real router is refused several times while notifications
flow on the router it dials, and neither side's counters move.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading

import pytest

from elvin.federation.config import AcceptSpec, ConnectSpec, FederationConfig
from elvin.federation.packets import FedConnRply, FedConnRqst, FedNotify
from elvin.protocol import Nack, NotifyDeliver
from elvin.router.config import RouterConfig
from elvin.router.embedded import EmbeddedRouter
from tests.waiting import until, wait_until

from .federation_util import (
    FAST,
    RawFederator,
    RawListener,
    fed_stats,
    linked_domains,
    remote_pull,
)
from .rawclient import RawClient

OTHER = "127.0.0.2"          # an address of this machine outside the rules


def start(domain: str, *, accept=(), connect=(), listen: bool = True,
          router_settings=None, **fed) -> EmbeddedRouter:
    config = FederationConfig(router_domain=domain,
                              listen=["ewaf://127.0.0.1:0"] if listen else [],
                              connect=list(connect), accept=list(accept), **{**FAST, **fed})
    return EmbeddedRouter(config=RouterConfig(federation=config, discovery=False,
                                              **dict(router_settings or {}))).start()


def refusals(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.getMessage().startswith("refused federation link from")]


async def refused_raw(url: str, domain: str, source: str | None) -> list[object]:
    """Every packet the router sends a raw peer that dials from ``source``
    as ``domain``, until it closes the connection."""
    peer = await RawFederator.open(url, source)
    try:
        peer.send(FedConnRqst(1, 1, 0, domain))
        return await peer.until_closed()
    finally:
        await peer.close()


async def links_raw(url: str, domain: str, source: str | None) -> bool:
    peer = await RawFederator.open(url, source)
    try:
        peer.send(FedConnRqst(1, 1, 0, domain))
        return isinstance(await peer.next(), FedConnRply)
    finally:
        await peer.close()


# -- a listed domain from the wrong address ------------------------------------------

async def test_a_listed_domain_from_outside_its_hosts_gets_one_nack_and_nothing_else(caplog):
    caplog.set_level("WARNING", logger="elvin.federation")
    hub = start("hub", accept=[AcceptSpec("edge", hosts=["127.0.0.1"])])
    try:
        url = hub.federation_urls[0]
        # traffic on the hub while the impostor knocks: a subscriber there,
        # a producer publishing
        sub = await RawClient.connected(hub.port)
        await sub.subscribe("require(Secret)")
        producer = await RawClient.connected(hub.port)
        for i in range(5):
            producer.notify({"Secret": i})
        got = await refused_raw(url, "edge", OTHER)
        for i in range(5, 10):
            producer.notify({"Secret": i})
        for i in range(10):           # the hub routed all ten (to its own subscriber)
            assert (await sub.expect(NotifyDeliver)).attributes == {"Secret": i}
        assert len(got) == 1 and isinstance(got[0], Nack), got
        assert got[0].error == 2500 and OTHER in got[0].message
        assert "127.0.0.1" not in got[0].message          # the peer is not told the rules
        [line] = refusals(caplog)
        assert f"from {OTHER}:" in line and "'edge'" in line
        assert "federation.accept #1, hosts (127.0.0.1)" in line
        stats = fed_stats(hub)
        assert stats["links_refused"] == 1 and stats["links_established"] == 0
        assert stats["fed_notify_sent"] == stats["announcements_sent"] == 0
        # the same domain from the allowed address links
        assert await links_raw(url, "edge", "127.0.0.1")
        await sub.close()
        await producer.close()
    finally:
        hub.stop()


@pytest.mark.parametrize("direction", ["edge dials hub", "hub dials edge"])
async def test_a_real_router_from_outside_the_hosts_is_refused_and_nothing_crosses(
        direction, caplog):
    """The accepting side's rule lists 127.0.0.1; the dialling router dials
    from 127.0.0.2: refused, again and again, while both routers carry
    traffic; then the same router dialling from 127.0.0.1 links and
    delivers both ways."""
    caplog.set_level("WARNING", logger="elvin.federation")
    dialler, acceptor = ("edge", "hub") if direction == "edge dials hub" else ("hub", "edge")
    accepting = start(acceptor, accept=[AcceptSpec(dialler, hosts=["127.0.0.1"])])
    url = accepting.federation_urls[0]
    dialling = start(dialler, listen=False,
                     connect=[ConnectSpec(url, router=acceptor, source_address=OTHER)])
    try:
        subs, producers = {}, {}
        for name, router in ((acceptor, accepting), (dialler, dialling)):
            subs[name] = await RawClient.connected(router.port)
            await subs[name].subscribe("require(Secret)")
            producers[name] = await RawClient.connected(router.port)
        wait_until(lambda: fed_stats(accepting)["links_refused"] >= 1, what="a refusal")
        sent = 0
        for _ in range(3):            # refusals keep coming while traffic flows
            for name in producers:
                producers[name].notify({"Secret": sent, "From": name})
            sent += 1
            before = fed_stats(accepting)["links_refused"]
            wait_until(lambda b=before: fed_stats(accepting)["links_refused"] > b,
                       what="another refused attempt")
        for name in subs:             # each subscriber got its own router's three only
            for i in range(sent):
                deliver = await subs[name].expect(NotifyDeliver)
                assert deliver.attributes == {"Secret": i, "From": name}
        for router in (accepting, dialling):
            stats = fed_stats(router)
            assert stats["links_established"] == 0
            assert stats["fed_notify_sent"] == stats["fed_notify_received"] == 0
            assert stats["announcements_sent"] == stats["sub_replace_sent"] == 0
            assert linked_domains(router) == set()
        assert all(f"from {OTHER}:" in line and repr(dialler) in line
                   for line in refusals(caplog))
        # the same router from the allowed address links and delivers
        dialling.call(lambda: dialling.router.federation.config.connect[0].__setattr__(
            "source_address", "127.0.0.1"))
        wait_until(lambda: linked_domains(accepting) == {dialler}, what="the link")
        await until(lambda: remote_pull(dialling, acceptor) not in (False, None)
                    and remote_pull(accepting, dialler) not in (False, None),
                    what="pull filters both ways")
        producers[dialler].notify({"Secret": "across", "From": dialler})
        producers[acceptor].notify({"Secret": "back", "From": acceptor})
        for name in subs:             # each gets the other router's and its own
            got = {(await subs[name].expect(NotifyDeliver)).attributes["Secret"]
                   for _ in range(2)}
            assert got == {"across", "back"}
        for client in (*subs.values(), *producers.values()):
            await client.close()
    finally:
        dialling.stop()
        accepting.stop()


# -- accept_any ------------------------------------------------------------------------

async def test_accept_any_without_hosts_admits_any_address_and_says_so(caplog):
    caplog.set_level("INFO", logger="elvin.federation")
    hub = start("hub", accept_any=True)
    try:
        notes = [r.getMessage() for r in caplog.records
                 if "accept_any admits any router" in r.getMessage()]
        assert len(notes) == 1 and "loopback only" in notes[0]
        assert await links_raw(hub.federation_urls[0], "anyone", OTHER)
    finally:
        hub.stop()


async def test_accept_any_hosts_limit_where_unlisted_routers_may_dial_from(caplog):
    caplog.set_level("WARNING", logger="elvin.federation")
    hub = start("hub", accept_any=True, accept_any_hosts=["127.0.0.0/31"],
                accept=[AcceptSpec("edge", hosts=["127.0.0.1"])])
    try:
        url = hub.federation_urls[0]
        assert await links_raw(url, "anyone", "127.0.0.1")
        got = await refused_raw(url, "someone", OTHER)
        assert len(got) == 1 and isinstance(got[0], Nack)
        assert "federation.accept_any_hosts (127.0.0.0/31)" in refusals(caplog)[-1]
        # a listed domain is admitted through its own entry only: from an
        # address its hosts refuse it does not fall back to accept_any
        hub.call(lambda: hub.router.federation.config.__setattr__(
            "accept_any_hosts", ["127.0.0.0/8"]))
        got = await refused_raw(url, "edge", OTHER)
        assert len(got) == 1 and isinstance(got[0], Nack)
        assert "federation.accept #1, hosts" in refusals(caplog)[-1]
        assert await links_raw(url, "another", OTHER)      # accept_any_hosts now allow it
    finally:
        hub.stop()


async def test_accept_any_does_not_admit_a_domain_this_router_dials(caplog):
    """The hub dials "edge" and accepts any router: someone dialling in as
    "edge" while the hub's own link to the real edge is still being set up
    is refused (it would hold the name, and the real link be refused as
    "already linked"); the real link then comes up."""
    caplog.set_level("WARNING", logger="elvin.federation")
    real_edge = await RawListener.start()
    hub = start("hub", accept_any=True,
                connect=[ConnectSpec(real_edge.url, router="edge")])
    try:
        dialled = await real_edge.accept()            # the hub's dial, not answered yet
        rqst = await dialled.expect(FedConnRqst)
        assert rqst.router_domain == "hub"
        impostor = await RawFederator.open(hub.federation_urls[0], "127.0.0.1")
        impostor.send(FedConnRqst(1, 1, 0, "edge"))
        answer = await impostor.next()
        assert isinstance(answer, Nack), f"took the domain the hub dials: {answer}"
        assert await impostor.until_closed() == []
        await impostor.close()
        line = refusals(caplog)[-1]
        assert "router domain 'edge' is the router federation.connect #1" in line
        assert real_edge.url in line and "federation.accept_any does not admit it" in line
        assert await links_raw(hub.federation_urls[0], "someone-else", "127.0.0.1")
        dialled.send(FedConnRply(rqst.xid, "edge"))
        await until(lambda: "edge" in linked_domains(hub), what="the real link")
        assert hub.call(lambda: hub.router.federation.linked["edge"].role) == "connect"
        await dialled.close()
    finally:
        hub.stop()
        await real_edge.close()


# -- host names --------------------------------------------------------------------------

def _localhost_is_127_0_0_1() -> bool:
    try:
        return socket.gethostbyaddr("127.0.0.1")[0] == "localhost" and \
            "127.0.0.1" in {i[4][0] for i in socket.getaddrinfo("localhost", None)}
    except OSError:
        return False


@pytest.mark.skipif(not _localhost_is_127_0_0_1(),
                    reason="needs localhost <-> 127.0.0.1 both ways in the resolver")
@pytest.mark.parametrize("pattern", ["localhost", "LOCAL*", "@localhost"])
async def test_host_names_are_resolved_and_reverse_names_confirmed(pattern, caplog):
    """``localhost`` resolves to 127.0.0.1: admitted; 127.0.0.2 has no name:
    refused. A wildcard matches the forward-confirmed reverse name."""
    caplog.set_level("WARNING", logger="elvin.federation")
    hub = start("hub", accept=[AcceptSpec("edge", hosts=[pattern])])
    try:
        url = hub.federation_urls[0]
        assert await links_raw(url, "edge", "127.0.0.1")
        await until(lambda: linked_domains(hub) == set(), what="the peer gone")
        got = await refused_raw(url, "edge", OTHER)
        assert len(got) == 1 and isinstance(got[0], Nack)
        assert "federation.accept #1, hosts" in refusals(caplog)[-1]
    finally:
        hub.stop()


async def test_packets_behind_a_fedconnrqst_wait_for_the_lookup():
    """A peer that sends more right behind its FedConnRqst while its address
    is looked up: held until the answer, then acted on in order (here: a
    refusal, so nothing of it is acted on and nothing is sent back but the
    Nack)."""
    hub = start("hub", accept=[AcceptSpec("edge", hosts=["no-such-host.invalid"])])
    try:
        peer = await RawFederator.open(hub.federation_urls[0], OTHER)
        peer.send(FedConnRqst(1, 1, 0, "edge"))
        peer.send(FedNotify({"Secret": 1}, routing=("edge",)))
        got = await peer.until_closed()
        assert len(got) == 1 and isinstance(got[0], Nack), got
        assert fed_stats(hub)["fed_notify_received"] == 0
        await peer.close()
    finally:
        hub.stop()


# -- a reload applies the rules to links already up ----------------------------------

async def test_a_reload_closes_a_link_its_new_hosts_no_longer_allow():
    hub = start("hub", accept=[AcceptSpec("edge")])
    try:
        peer = await RawFederator.linked(hub.federation_urls[0], "edge", OTHER)
        await until(lambda: linked_domains(hub) == {"edge"}, what="linked")
        def reload(hosts):
            service = hub.router.federation
            config = dataclasses.replace(service.config,
                                         accept=[AcceptSpec("edge", hosts=hosts)])
            return asyncio.ensure_future(hub.router.services["federation"].reconfigure(
                dataclasses.replace(hub.router.config, federation=config)))

        done = hub.call(reload, [OTHER, "10.0.0.0/8"])
        await until(lambda: hub.call(done.done), what="the reload")
        assert linked_domains(hub) == {"edge"}             # still allowed
        done = hub.call(reload, ["127.0.0.1"])
        await until(lambda: hub.call(done.done), what="the second reload")
        assert linked_domains(hub) == set()
        await peer.until_closed()
        await peer.close()
    finally:
        hub.stop()


async def test_a_reload_during_a_peers_lookup_decides_it_by_the_new_rules(monkeypatch, caplog):
    """The rules change while the peer's host name is being looked up: the
    answer is about the old rules, so the peer is checked again under the
    new ones (here: refused) instead of admitted under the old. The name's
    lookup is held back by replacing ``socket.getaddrinfo`` for that one
    name, in this process, for this test (a slow DNS server cannot be
    arranged here); the router runs asyncio's loop, not uvloop, whose
    getaddrinfo would not go through ``socket``."""
    caplog.set_level("WARNING", logger="elvin.federation")
    real, release, asked = socket.getaddrinfo, threading.Event(), threading.Event()

    def getaddrinfo(host, *args, **kwargs):
        if host != "edge.test":
            return real(host, *args, **kwargs)
        asked.set()
        release.wait(30)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (OTHER, 0))]
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    hub = start("hub", accept=[AcceptSpec("edge", hosts=["edge.test"])],
                router_settings={"use_uvloop": False})
    try:
        peer = await RawFederator.open(hub.federation_urls[0], OTHER)
        peer.send(FedConnRqst(1, 1, 0, "edge"))
        await until(asked.is_set, what="the lookup of edge.test")

        def reload():
            service = hub.router.federation
            config = dataclasses.replace(service.config,
                                         accept=[AcceptSpec("edge", hosts=["127.0.0.1"])])
            return asyncio.ensure_future(hub.router.services["federation"].reconfigure(
                dataclasses.replace(hub.router.config, federation=config)))
        done = hub.call(reload)
        await until(lambda: hub.call(done.done), what="the reload")
        release.set()
        answer = await peer.next()
        assert isinstance(answer, Nack), f"admitted under the old rules: {answer}"
        assert await peer.until_closed() == []
        await peer.close()
        assert "federation.accept #1, hosts (127.0.0.1)" in refusals(caplog)[-1]
        assert linked_domains(hub) == set() and fed_stats(hub)["links_established"] == 0
    finally:
        release.set()
        hub.stop()


async def test_a_flood_of_refused_links_is_a_few_lines_and_a_count(caplog):
    """Each refused FedConnRqst is counted and answered, but only the first
    few a minute are logged one by one (elvin.ratelog): a stranger dialling
    in a loop does not fill the log."""
    caplog.set_level("WARNING", logger="elvin.federation")
    hub = start("hub", accept=[AcceptSpec("edge")])
    try:
        url = hub.federation_urls[0]
        for _ in range(12):
            got = await refused_raw(url, "stranger", None)
            assert len(got) == 1 and isinstance(got[0], Nack)
        assert len(refusals(caplog)) == 5
        assert hub.call(lambda: hub.router.federation.notes.pending(
            "refused federation links")) == 7
        assert fed_stats(hub)["links_refused"] == 12
    finally:
        hub.stop()
