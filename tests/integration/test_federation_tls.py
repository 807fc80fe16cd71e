"""Federation over TLS: ``ewaf:1.0/ssl,none,xdr/host:port`` links.

The listener serves the router's tls-cert/tls-key; the dialling router
verifies the peer against ``federation.tls_ca`` (a self-signed certificate
made here), and refuses a certificate from any other CA.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from elvin.errors import RouterStartError
from elvin.federation.config import ConnectSpec, FederationConfig, FederationConfigError
from elvin.protocol import NotifyDeliver
from elvin.router.config import ConfigError, RouterConfig
from elvin.router.embedded import EmbeddedRouter
from elvin.router.server import Router
from tests.waiting import until, wait_until

from .federation_util import (
    federated_routers,
    linked_domains,
    pull_wants,
    stop_all,
    wait_linked,
)
from .rawclient import RawClient

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")

TLS_LISTEN = "ewaf:1.0/ssl,none,xdr/127.0.0.1:0"


def self_signed(directory, name: str) -> tuple[str, str]:
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1",
                    "-subj", f"/CN=127.0.0.1/O={name}", "-addext",
                    "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return str(cert), str(key)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fedtls")
    return {"router": self_signed(directory, "router"), "other": self_signed(directory, "other")}


def tls_pair(certs, ca: str) -> list[EmbeddedRouter]:
    cert, key = certs["router"]
    return federated_routers(2, router_settings={"tls_cert": cert, "tls_key": key},
                             fed_listen=TLS_LISTEN, tls_ca=ca)


async def test_routers_link_over_tls(certs):
    routers = tls_pair(certs, ca=certs["router"][0])
    r0, r1 = routers
    try:
        assert r0.federation_urls[0].startswith("ewaf:1.0/ssl,none,xdr/127.0.0.1:")
        wait_linked(routers)

        def cipher():
            link = r1.router.federation.link_for("r0")
            return link.transport.get_extra_info("cipher")
        assert r1.call(cipher)           # the link really is TLS

        sub = await RawClient.connected(r0.port)
        await sub.subscribe("require(Secret)")
        await until(lambda: pull_wants(r1, "r0", "Secret"), what="the pull filter")
        producer = await RawClient.connected(r1.port)
        producer.notify({"Secret": "over tls"})
        assert (await sub.expect(NotifyDeliver)).attributes == {"Secret": "over tls"}
        await sub.close()
        await producer.close()
    finally:
        stop_all(routers)


def test_wrong_ca_fails_the_handshake_and_says_which_link(certs, caplog):
    caplog.set_level("WARNING", logger="elvin.federation")
    routers = tls_pair(certs, ca=certs["other"][0])
    r0, r1 = routers
    try:
        url = r0.federation_urls[0]

        def handshake_warning():
            return [r.getMessage() for r in caplog.records
                    if "TLS handshake failed" in r.getMessage()]
        found = wait_until(handshake_warning, what="the handshake failure warning")
        assert url in found[0] and "certificate verify failed" in found[0]
        assert linked_domains(r1) == set() and linked_domains(r0) == set()
    finally:
        stop_all(routers)


def test_tls_listener_needs_the_router_certificate():
    fed = FederationConfig(router_domain="a", listen=[TLS_LISTEN])
    with pytest.raises(ConfigError, match=r"federation.listen #1.*--tls-cert"):
        RouterConfig(federation=fed).validate()
    with pytest.raises(RouterStartError, match="federation listener .*--tls-cert"):
        EmbeddedRouter(config=RouterConfig(federation=fed, discovery=False)).start()


async def test_a_certificate_that_does_not_load_names_the_listener(tmp_path, certs):
    """Client and federation TLS listeners load the router's certificate the
    same way: a bad file stops the start with an error naming the listener."""
    garbage = tmp_path / "garbage-cert.pem"
    garbage.write_text("not a certificate\n")
    tls = {"tls_cert": str(garbage), "tls_key": certs["router"][1], "discovery": False}
    client_tls = "elvin:4.0/ssl,none,xdr/127.0.0.1:0"
    fed = FederationConfig(router_domain="a", listen=[TLS_LISTEN])
    for config, listener in (
            (RouterConfig(listen=[client_tls], **tls), f"listen URI {client_tls}"),
            (RouterConfig(listen=["elvin://127.0.0.1:0"], federation=fed, **tls),
             f"federation listener {TLS_LISTEN}")):
        router = Router(config)
        with pytest.raises(RouterStartError) as raised:
            await router.start()
        await router.stop()
        message = str(raised.value)
        assert message.startswith(f"{listener}: cannot load TLS certificate")
        assert "garbage-cert.pem" in message


def test_bad_ca_file_is_a_clear_error(tmp_path):
    with pytest.raises(FederationConfigError, match="federation.tls_ca.*no such file"):
        FederationConfig(tls_ca=str(tmp_path / "missing.pem")).validate()
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    url = "ewaf:1.0/ssl,none,xdr/127.0.0.1:1"
    fed = FederationConfig(router_domain="a", connect=[ConnectSpec(url)],
                           tls_ca=str(garbage)).validate()
    with pytest.raises(RouterStartError, match=rf"federation.tls_ca .*garbage.pem.*{url}"):
        EmbeddedRouter(config=RouterConfig(federation=fed, discovery=False)).start()


def test_tls_ca_setting_from_toml_and_flag(tmp_path, certs):
    from elvin.router.cli import build_parser, make_config
    from elvin.router.config import load_config
    ca = certs["router"][0]
    path = tmp_path / "elvind.toml"
    path.write_text(f'[federation]\nrouter_domain = "a"\ntls_ca = "{ca}"\n'
                    'request_retries = 3\n')
    fed = load_config(path).federation
    assert fed.tls_ca == ca and fed.request_retries == 3
    args = build_parser().parse_args(["--federation-connect", "ewaf:1.0/ssl,none,xdr/h:1",
                                      "--federation-tls-ca", ca])
    assert make_config(args).federation.tls_ca == ca
