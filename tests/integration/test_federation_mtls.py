"""Mutual TLS on federation links: ``require_authenticated`` (issue 31).

The accepting router asks the dialling router for a certificate; it must
chain to ``tls_ca`` and name one of the entry's hosts. Refused: no
certificate, one from another CA, one naming another host, and a dial over
plain TCP. Admitted: the dialling router's own ``tls-cert``, or its connect
entry's ``client_cert``, in either dial direction. Certificates are made
with ``openssl`` for this module (tls_certs.py).
"""

from __future__ import annotations

import itertools
import shutil

import pytest

from elvin.federation.config import AcceptSpec, ConnectSpec, FederationConfig
from elvin.federation.service import MAX_WAITING_PER_ADDRESS
from elvin.protocol import NotifyDeliver
from elvin.router.config import RouterConfig
from elvin.router.embedded import EmbeddedRouter
from tests.waiting import until, wait_until

from .federation_util import FAST, RawFederator, fed_stats, linked_domains, remote_pull
from .rawclient import RawClient
from .tls_certs import make_ca, make_certificate

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")

TLS_LISTEN = "ewaf:1.0/ssl,none,xdr/127.0.0.1:0"
PLAIN_LISTEN = "ewaf://127.0.0.1:0"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("mtls")
    ca = make_ca(d, "site-ca")
    other_ca = make_ca(d, "other-ca")
    return {
        "ca": ca[0],
        "hub": make_certificate(d, ca, "hub", ["DNS:hub.test", "IP:127.0.0.1"]),
        "edge": make_certificate(d, ca, "edge", ["DNS:edge.test", "IP:127.0.0.1"]),
        "edge-by-name": make_certificate(d, ca, "edge-name", ["DNS:edge.test"]),
        "other-host": make_certificate(d, ca, "other-host", ["DNS:other.test"]),
        "other-ca": make_certificate(d, other_ca, "edge-other-ca",
                                     ["DNS:edge.test", "IP:127.0.0.1"]),
    }


def start(domain: str, pki, cert: str | None, *, listen=(), connect=(), accept=(),
          **fed) -> EmbeddedRouter:
    tls = {"tls_cert": pki[cert][0], "tls_key": pki[cert][1]} if cert else {}
    config = FederationConfig(router_domain=domain, listen=list(listen), connect=list(connect),
                              accept=list(accept), tls_ca=pki["ca"], **{**FAST, **fed})
    return EmbeddedRouter(config=RouterConfig(federation=config, discovery=False,
                                              **tls)).start()


def hub_requiring(pki, hosts=("127.0.0.1", "edge.test")) -> EmbeddedRouter:
    return start("hub", pki, "hub", listen=[TLS_LISTEN, PLAIN_LISTEN],
                 accept=[AcceptSpec("edge", hosts=list(hosts), require_authenticated=True)])


def messages(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def tls_url(router: EmbeddedRouter) -> str:
    return next(u for u in router.federation_urls if u.startswith("ewaf:1.0/ssl"))


def plain_url(router: EmbeddedRouter) -> str:
    return next(u for u in router.federation_urls if u.startswith("ewaf://"))


def raw_tls_port(router: EmbeddedRouter) -> str:
    """The TLS listener as a plain URL: a raw peer opens TCP to it and says nothing."""
    return tls_url(router).replace("ewaf:1.0/ssl,none,xdr/", "ewaf://")


def refused_twice(hub: EmbeddedRouter, edge: EmbeddedRouter) -> None:
    """The edge tried, was refused, and tried again: never linked."""
    wait_until(lambda: fed_stats(hub)["links_refused"] >= 2, what="two refused attempts")
    for router in (hub, edge):
        stats = fed_stats(router)
        assert stats["links_established"] == 0 and linked_domains(router) == set()
        assert stats["fed_notify_sent"] == stats["fed_notify_received"] == 0


@pytest.mark.parametrize("case", ["no certificate", "certificate naming another host",
                                  "plain TCP"])
def test_refused_at_the_fedconnrqst(pki, case, caplog):
    caplog.set_level("WARNING", logger="elvin.federation")
    hub = hub_requiring(pki)
    cert, client, url = {
        "no certificate": (None, None, tls_url(hub)),
        "certificate naming another host": (None, pki["other-host"], tls_url(hub)),
        "plain TCP": ("edge", None, plain_url(hub)),
    }[case]
    spec = ConnectSpec(url, router="hub", client_cert=client[0] if client else None,
                       client_key=client[1] if client else None)
    edge = start("edge", pki, cert, connect=[spec])
    try:
        refused_twice(hub, edge)
        [reason, *_] = messages(caplog, "refused federation link from 127.0.0.1:")
        assert "'edge'" in reason
        assert {"no certificate": "presented no certificate",
                "certificate naming another host": "its certificate names DNS:other.test, "
                                                   "none of federation.accept #1, hosts",
                "plain TCP": "dialled without TLS"}[case] in reason
        assert messages(caplog, "refused our link: Nack 2500")     # the edge hears why
    finally:
        edge.stop()
        hub.stop()


def test_a_certificate_from_another_ca_fails_the_handshake_with_a_clear_line(pki, caplog):
    caplog.set_level("WARNING", logger="elvin.federation")
    hub = hub_requiring(pki)
    spec = ConnectSpec(tls_url(hub), router="hub", client_cert=pki["other-ca"][0],
                       client_key=pki["other-ca"][1])
    edge = start("edge", pki, None, connect=[spec])
    try:
        refused_twice(hub, edge)
        wait_until(lambda: messages(caplog, "its certificate does not verify"),
                   what="the hub saying why")
        lines = messages(caplog, "TLS handshake with 127.0.0.1:")
        assert all(line.endswith("refused") for line in lines)
        assert any("its certificate does not verify (unable to get local issuer" in line
                   for line in lines)
        # each reason is warned once, repeats go to debug: a loaded machine may
        # see another reason between two attempts (a reset), never one twice in a row
        reasons = [line.split(" failed: ", 1)[1] for line in lines]
        assert all(a != b for a, b in itertools.pairwise(reasons)), reasons
        wait_until(lambda: messages(caplog, "closed the connection without answering"),
                   what="the edge saying why")
    finally:
        edge.stop()
        hub.stop()


async def _delivers(a: EmbeddedRouter, a_name: str, b: EmbeddedRouter, b_name: str) -> None:
    sub = await RawClient.connected(b.port)
    await sub.subscribe("require(Secret)")
    await until(lambda: remote_pull(a, b_name) not in (False, None), what="the pull filter")
    producer = await RawClient.connected(a.port)
    producer.notify({"Secret": "over mutual tls"})
    assert (await sub.expect(NotifyDeliver)).attributes == {"Secret": "over mutual tls"}
    await sub.close()
    await producer.close()


@pytest.mark.parametrize("shown", ["the router's tls-cert", "the connect entry's client_cert"])
async def test_the_right_certificate_links_and_delivers(pki, shown):
    hub = hub_requiring(pki)
    if shown == "the router's tls-cert":
        edge = start("edge", pki, "edge", connect=[ConnectSpec(tls_url(hub), router="hub")])
    else:
        cert, key = pki["edge-by-name"]
        edge = start("edge", pki, None, connect=[ConnectSpec(
            tls_url(hub), router="hub", client_cert=cert, client_key=key)])
    try:
        await until(lambda: linked_domains(hub) == {"edge"}, what="the link")

        def peer_cert():
            return hub.router.federation.link_for("edge").transport.get_extra_info("peercert")
        assert ("DNS", "edge.test") in hub.call(peer_cert)["subjectAltName"]
        await _delivers(edge, "edge", hub, "hub")
        await _delivers(hub, "hub", edge, "edge")
    finally:
        edge.stop()
        hub.stop()


async def test_the_other_dial_direction(pki):
    """The edge listens and requires the hub to authenticate; the hub dials
    with its own certificate."""
    edge = start("edge", pki, "edge", listen=[TLS_LISTEN],
                 accept=[AcceptSpec("hub", hosts=["127.0.0.1"])], require_authenticated=True)
    hub = start("hub", pki, "hub", connect=[ConnectSpec(tls_url(edge), router="edge")])
    try:
        await until(lambda: linked_domains(edge) == {"hub"}, what="the link")
        await _delivers(hub, "hub", edge, "edge")
    finally:
        hub.stop()
        edge.stop()


def test_an_entry_that_does_not_require_authentication_still_links_without_a_certificate(pki):
    """One entry requires a certificate: the listener asks everyone, but a
    router whose own entry does not require one links without."""
    hub = start("hub", pki, "hub", listen=[TLS_LISTEN],
                accept=[AcceptSpec("edge", hosts=["127.0.0.1"], require_authenticated=True),
                        AcceptSpec("guest")])
    guest = start("guest", pki, None, connect=[ConnectSpec(tls_url(hub), router="hub")])
    try:
        wait_until(lambda: linked_domains(hub) == {"guest"}, what="the guest's link")
    finally:
        guest.stop()
        hub.stop()


async def test_one_address_may_hold_only_so_many_tls_handshakes(pki, caplog):
    """Connections to the TLS listener that never start their handshake
    count against their address's share of connections awaiting a
    FedConnRqst: beyond it one is dropped before any TLS work."""
    caplog.set_level("WARNING", logger="elvin.federation")
    hub = hub_requiring(pki)
    peers = []

    def handshaking() -> int:
        return hub.call(lambda: len(hub.router.federation._handshakes))
    try:
        for _ in range(MAX_WAITING_PER_ADDRESS):
            peers.append(await RawFederator.open(raw_tls_port(hub), "127.0.0.2"))
        await until(lambda: handshaking() == MAX_WAITING_PER_ADDRESS, what="the handshakes")
        extra = await RawFederator.open(raw_tls_port(hub), "127.0.0.2")
        assert await extra.until_closed() == []
        await extra.close()
        assert handshaking() == MAX_WAITING_PER_ADDRESS
        [line] = messages(caplog, "wait for their FedConnRqst")
        assert "refused a connection from 127.0.0.2" in line
    finally:
        for peer in peers:
            await peer.close()
        hub.stop()
