"""Host patterns, admission rules and their warnings, and the settings that
carry them (issue 31). The router-level behaviour is in
tests/integration/test_federation_admission.py and test_federation_mtls.py."""

from __future__ import annotations

import pytest

from elvin.federation.admission import (
    NEEDS_DNS,
    Peer,
    accept_rule,
    admission_warnings,
    check_peer,
    check_peer_names,
    not_accepted,
)
from elvin.federation.config import (
    AcceptSpec,
    ConnectSpec,
    FederationConfig,
    FederationConfigError,
    federation_from_dict,
)
from elvin.federation.domain_cli import main as domain_main
from elvin.federation.hosts import HostRules, Resolver, parse_host_pattern


@pytest.mark.parametrize("text, kind", [
    ("10.1.2.3", "address"), ("::1", "address"), ("[::1]", "address"),
    ("10.1.0.0/16", "network"), ("fd00::/8", "network"), ("10.1.2.3/16", "network"),
    ("edge.example.com", "name"), ("EDGE.example.com.", "name"), ("*.example.com", "wildcard"),
    ("10.1.*", "wildcard"), ("fe80::*", "wildcard"), ("@edge", "name"),
    ("@.elvin.org", "wildcard")])
def test_patterns(text, kind):
    assert parse_host_pattern(text).kind == kind


@pytest.mark.parametrize("text, problem", [
    ("", "empty"), ("two hosts", "contains a space"), ("10.1.0.0/33", "bad network"),
    ("-edge", "bad host pattern"), ("é.com", "bad host pattern"), ("a:b", "bad host pattern"),
    (5, "is a string")])
def test_bad_patterns(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_host_pattern(text)


def test_address_matching_without_dns():
    rules = HostRules.parse(["10.1.0.0/16", "192.168.1.??", "::1"])
    assert rules.match_address("10.1.200.3").text == "10.1.0.0/16"
    assert rules.match_address("::ffff:10.1.0.9").text == "10.1.0.0/16"   # IPv4-mapped
    assert rules.match_address("192.168.1.42").text == "192.168.1.??"
    assert rules.match_address("192.168.1.200") is None
    assert rules.match_address("::1").text == "::1"
    assert rules.match_address("10.2.0.1") is None
    assert not rules.needs_dns


def resolver(forward: dict[str, list[str]], reverse: dict[str, list[str]]) -> Resolver:
    async def addresses(name):
        if name not in forward:
            raise OSError(f"no such name {name}")
        return forward[name]

    async def names(address):
        if address not in reverse:
            raise OSError(f"no name for {address}")
        return reverse[address]
    return Resolver(addresses, names)


async def test_names_match_forward_and_forward_confirmed_reverse():
    dns = resolver({"edge.example.com": ["10.0.0.5"], "gw.example.com": ["10.0.0.7"]},
                   {"10.0.0.7": ["gw.example.com"],
                    "10.0.0.9": ["edge.example.com"],           # a lying PTR record
                    "10.0.0.8": ["x.example.com"]})              # unconfirmed
    rules = HostRules.parse(["edge.example.com", "*.example.com"])
    assert (await rules.match("10.0.0.5", dns)).text == "edge.example.com"   # forward
    assert (await rules.match("10.0.0.7", dns)).text == "*.example.com"      # confirmed
    assert await rules.match("10.0.0.9", dns) is None     # PTR says edge: it is not
    assert await rules.match("10.0.0.8", dns) is None     # x.example.com does not resolve
    assert await rules.match("10.0.0.1", dns) is None     # no PTR at all


def test_certificate_names():
    rules = HostRules.parse(["edge.example.com", "*.lab.example.com", "10.1.0.0/16"])
    assert rules.names_certificate(["EDGE.example.com"], [])
    assert rules.names_certificate(["a.lab.example.com"], [])
    assert rules.names_certificate(["*.lab.example.com"], [])
    assert rules.names_certificate([], ["10.1.4.4"])
    assert not rules.names_certificate(["other.example.com"], ["10.2.0.1", "garbage"])


def test_address_wildcards_match_a_certificates_addresses_never_its_names():
    rules = HostRules.parse(["10.1.*", "192.168.1.??", "fe80::*"])
    assert rules.names_certificate([], ["10.1.2.3"])
    assert rules.names_certificate([], ["192.168.1.42"])
    assert rules.names_certificate([], ["fe80::1"])
    for name in ("10.1.evil.com", "10.1.2.3", "192.168.1.ab", "fe80::evil"):
        assert not rules.names_certificate([name], []), name


def config(**kw) -> FederationConfig:
    return FederationConfig(router_domain="hub", listen=["ewaf://0.0.0.0:2916"], **kw).validate()


async def test_check_peer():
    cfg = config(accept=[AcceptSpec("edge", hosts=["10.0.0.0/8", "edge.example.com"]),
                         AcceptSpec("lab", hosts=["10.9.9.9"], require_authenticated=True),
                         AcceptSpec("open")])
    edge, lab, open_ = (accept_rule(cfg, d) for d in ("edge", "lab", "open"))
    assert accept_rule(cfg, "stranger") is None
    assert check_peer(edge, "edge", Peer("10.3.3.3")) is None
    assert check_peer(edge, "edge", Peer("192.0.2.1")) is NEEDS_DNS
    refusal = await check_peer_names(edge, "edge", Peer("192.0.2.1"), resolver({}, {}))
    assert "192.0.2.1" in refusal.log and "federation.accept #1, hosts" in refusal.log
    assert "10.0.0.0/8" not in refusal.nack
    assert check_peer(open_, "open", Peer("192.0.2.1")) is None
    assert "without TLS" in check_peer(lab, "lab", Peer("10.9.9.9")).log
    assert "no certificate" in check_peer(lab, "lab", Peer("10.9.9.9", tls=True)).log
    cert = {"subjectAltName": (("DNS", "lab.example.com"), ("IP Address", "10.1.1.1"))}
    refusal = check_peer(lab, "lab", Peer("10.9.9.9", tls=True, certificate=cert))
    assert "DNS:lab.example.com, IP:10.1.1.1, none of federation.accept #2, hosts" in refusal.log
    cert = {"subjectAltName": (("IP Address", "10.9.9.9"),)}
    assert check_peer(lab, "lab", Peer("10.9.9.9", tls=True, certificate=cert)) is None


def test_accept_any_leaves_the_domains_this_router_dials_alone():
    cfg = config(accept=[AcceptSpec("lab")], accept_any=True,
                 connect=[ConnectSpec("ewaf://edge:2916", router="edge"),
                          ConnectSpec("ewaf://lab:2916", router="lab"),
                          ConnectSpec("ewaf://x:2916")])
    assert accept_rule(cfg, "edge") is None
    assert "router domain 'edge' is the router federation.connect #1 (ewaf://edge:2916) " \
        "dials" in not_accepted(cfg, "edge")
    assert accept_rule(cfg, "lab").key == "federation.accept #1"   # listed: its entry
    assert accept_rule(cfg, "other").key == "federation.accept_any"
    no_any = config(connect=[ConnectSpec("ewaf://edge:2916", router="edge")])
    assert not_accepted(no_any, "edge") == \
        "router domain 'edge' is not in this router's federation.accept"


def test_warnings_about_open_doors():
    assert admission_warnings(FederationConfig(listen=["ewaf://127.0.0.1:2916"],
                                               accept=[AcceptSpec("a")], accept_any=True),
                              ["ewaf://127.0.0.1:2916", "ewaf://[::1]:2917",
                               "ewaf://localhost:1"]) == []
    cfg = config(accept=[AcceptSpec("edge"), AcceptSpec("lab", hosts=["10.0.0.1"]),
                         AcceptSpec("all", hosts=["0.0.0.0/0"])], accept_any=True)
    warnings = admission_warnings(cfg, cfg.listen)
    assert len(warnings) == 3
    assert warnings[0].startswith("federation.accept #1 (router 'edge') has no hosts")
    assert "ewaf://0.0.0.0:2916 can be reached from other machines" in warnings[0]
    assert "match every address" in warnings[1]
    assert "accept_any admits any router" in warnings[2]
    cfg = config(accept_any=True, accept_any_hosts=["10.0.0.0/8"])
    [warning] = admission_warnings(cfg, cfg.listen)
    assert "from 10.0.0.0/8 (accept_any_hosts)" in warning
    cfg = config(accept=[AcceptSpec("edge", hosts=["e"], require_authenticated=True)])
    [warning] = admission_warnings(cfg, ["ewaf://127.0.0.1:1"])
    assert "no federation listener uses TLS" in warning
    assert admission_warnings(cfg, ["ewaf:1.0/ssl,none,xdr/127.0.0.1:1"]) == []


def test_settings_from_toml_tables():
    fed = federation_from_dict({
        "router_domain": "hub", "require_authenticated": True,
        "accept_any": True, "accept_any_hosts": "10.0.0.0/8",
        "accept": [{"router": "edge", "hosts": "edge.example.com"},
                   {"router": "lab", "hosts": ["10.1.1.1"], "require_authenticated": False}],
        "connect": [{"url": "ewaf://x:1", "source_address": "10.0.0.2"}]})
    assert fed.accept[0].hosts == ["edge.example.com"] and fed.accept_any_hosts == ["10.0.0.0/8"]
    assert fed.authenticates(fed.accept[0]) and not fed.authenticates(fed.accept[1])
    assert fed.authenticates(None) and fed.asks_for_certificates
    assert fed.connect[0].source_address == "10.0.0.2"


@pytest.mark.parametrize("table, key, problem", [
    ({"accept": [{"router": "e", "hosts": ["10.0.0.0/40"]}]}, "federation.accept #1, hosts",
     "bad network"),
    ({"accept": [{"router": "e", "hosts": 5}]}, "federation.accept #1, hosts",
     "list of host patterns"),
    ({"accept": [{"router": "e", "require_authenticated": True}]},
     "federation.accept #1, hosts", "require_authenticated needs the hosts"),
    ({"accept": [{"router": "e", "require_authenticated": "yes"}]},
     "federation.accept #1, require_authenticated", "true or false"),
    ({"accept_any": True, "require_authenticated": True}, "federation.accept_any_hosts",
     "missing"),
    ({"accept_any_hosts": [1]}, "federation.accept_any_hosts", "string or a list"),
    ({"connect": [{"url": "ewaf://x:1", "client_cert": "/nonexistent.pem",
                   "client_key": "/nonexistent.key"}]}, "federation.connect #1, client_cert",
     "no such file"),
    ({"connect": [{"url": "ewaf://x:1", "client_cert": "/etc/hostname"}]},
     "federation.connect #1, client_cert", "go together"),
    ({"connect": [{"url": "ewaf://x:1", "source_address": "here"}]},
     "federation.connect #1, source_address", "not an IP address"),
    ({"accept": [{"router": "e", "host": ["x"]}]}, "federation.accept #1, host",
     "unknown setting"),
])
def test_bad_settings_name_the_key(table, key, problem):
    with pytest.raises(FederationConfigError) as raised:
        federation_from_dict(table)
    assert raised.value.key == key and problem in raised.value.problem


def test_connect_spec_defaults_are_unchanged():
    spec = ConnectSpec("ewaf://x:1")
    assert (spec.client_cert, spec.client_key, spec.source_address) == (None, None, None)


# -- elvin-domain check ----------------------------------------------------------------

PLAIN, TLS = "ewaf://0.0.0.0:2916", "ewaf:1.0/ssl,none,xdr/0.0.0.0:2916"
TOPOLOGY = """
[[routers]]
name = "hub"
url = "{url}"
{hub}
[[routers]]
name = "edge"
url = "ewaf://edge.example.com:2916"
hosts = ["edge.example.com", "10.1.2.3"]

[[routers]]
name = "lab"
url = "ewaf://lab.example.com:2916"
{lab}
[[links]]
from = "edge"
to = "hub"

[[links]]
from = "lab"
to = "hub"
"""


def check(tmp_path, capsys, status: int, url: str, hub: str = "", lab: str = "") -> str:
    """Run ``elvin-domain check`` on the topology; its stdout (or stderr)."""
    path = tmp_path / "domain.toml"
    path.write_text(TOPOLOGY.format(url=url, hub=hub, lab=lab))
    assert domain_main(["check", str(path)]) == status
    captured = capsys.readouterr()
    return captured.out if status == 0 else captured.err


def test_domain_check_warns_about_routers_any_address_may_claim(tmp_path, capsys):
    out = check(tmp_path, capsys, 0, PLAIN)
    assert "hub: accepts 'edge' from edge.example.com, 10.1.2.3" in out
    assert "hub: accepts 'lab' from any address" in out
    assert "warning: router 'hub': federation.accept #2 (router 'lab') has no hosts" in out
    assert "'edge') has no hosts" not in out
    # with hosts everywhere, nothing to warn about; apply writes them
    out = check(tmp_path, capsys, 0, TLS, hub="require_authenticated = true",
                lab='hosts = ["10.9.0.0/16"]')
    assert "warning" not in out
    assert "with a certificate naming one of them" in out
    path = tmp_path / "domain.toml"
    assert domain_main(["apply", str(path), "--out", str(tmp_path / "out")]) == 0
    fragment = (tmp_path / "out" / "hub.toml").read_text()
    assert 'hosts = ["10.9.0.0/16"]' in fragment and "require_authenticated = true" in fragment


def test_domain_check_refuses_authentication_without_the_diallers_hosts(tmp_path, capsys):
    err = check(tmp_path, capsys, 1, TLS, hub="require_authenticated = true")
    assert "router 'lab', which dials it, has no hosts" in err


def test_domain_check_refuses_bad_hosts(tmp_path, capsys):
    err = check(tmp_path, capsys, 1, PLAIN, lab='hosts = ["10.0.0.0/99"]')
    assert "bad hosts[0]: bad network" in err
