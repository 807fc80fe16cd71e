"""Who may link: the rule a dialling router falls under, the checks of its
address and certificate, and the words an administrator needs about doors
left open.

A router that dials in names a router domain in its FedConnRqst, and
anyone can name any domain: router domains are short and guessable
(``hub``, ``edge``). So the domain only chooses the rule -- its
``[[federation.accept]]`` entry, else ``accept_any`` -- and the rule then
asks of the connection itself:

* its address must match the rule's ``hosts`` (``elvin.federation.hosts``),
  when it has any. A listed domain is admitted through its own entry only:
  an impostor from elsewhere does not fall back to ``accept_any`` (it would
  take the name, and the real router could no longer link), nor does a
  domain this router dials (``federation.connect``), for the same reason;
* with ``require_authenticated`` it must have dialled over TLS and shown a
  certificate (verified against ``tls_ca`` by the TLS handshake) that names
  one of the rule's hosts.

``check_peer`` answers at once when it can; names in ``hosts`` may need DNS,
which ``check_peer_names`` does through a resolver, off the event loop.
A refusal carries two texts: the log line's (the address, the claimed
domain and the rule it failed) and the Nack's, which tells the peer less.

``admission_warnings(config, listen_uris)`` lists what ``elvin-domain check``
and the router's start warn about: accept entries without ``hosts`` and
``accept_any`` on a listener that other machines can reach.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elvin.config_file import list_item
from elvin.federation.config import (
    AcceptSpec,
    FederationConfig,
    FilterSpec,
    host_rules,
    parse_ewaf_uri,
)
from elvin.federation.hosts import HostRules, Resolver, ResolverBusy, certificate_names
from elvin.protocol.uri import URIError

__all__ = ["NEEDS_DNS", "AcceptRule", "Peer", "Refusal", "accept_rule", "admission_warnings",
           "check_peer", "check_peer_names", "not_accepted", "open_entries"]


@dataclass(frozen=True)
class AcceptRule:
    """What admits one router domain: its entry or ``accept_any``."""

    key: str                       # "federation.accept #2" / "federation.accept_any"
    hosts: HostRules
    authenticated: bool
    outgoing: FilterSpec
    incoming: FilterSpec

    @property
    def hosts_key(self) -> str:
        return "federation.accept_any_hosts" if self.key.endswith("accept_any") \
            else f"{self.key}, hosts"


def accept_rule(config: FederationConfig, domain: str) -> AcceptRule | None:
    """The rule for a router that dials in as ``domain``; None: not accepted
    (``not_accepted`` says why). ``accept_any`` does not cover a domain
    this router dials itself (a ``federation.connect`` entry's ``router``):
    whoever claimed it first would hold it, and the real link could not be
    made."""
    for i, spec in enumerate(config.accept):
        if spec.router == domain:
            return _rule(config, list_item("federation.accept", i), spec)
    if config.accept_any and _dialled(config, domain) is None:
        return _rule(config, "federation.accept_any", None)
    return None


def not_accepted(config: FederationConfig, domain: str) -> str:
    """Why ``accept_rule`` found no rule for ``domain``, for the log."""
    dialled = _dialled(config, domain)
    if config.accept_any and dialled is not None:
        return (f"router domain {domain!r} is the router {dialled} dials: "
                f"federation.accept_any does not admit it dialling in (a federation.accept "
                f"entry for {domain!r} would)")
    return f"router domain {domain!r} is not in this router's federation.accept"


def _dialled(config: FederationConfig, domain: str) -> str | None:
    """The ``federation.connect`` entry (key and URL) that dials ``domain``."""
    for i, spec in enumerate(config.connect):
        if spec.router == domain:
            return f"{list_item('federation.connect', i)} ({spec.url})"
    return None


def _rule(config: FederationConfig, key: str, spec: AcceptSpec | None) -> AcceptRule:
    if spec is None:
        return AcceptRule(key, host_rules(config.accept_any_hosts), config.authenticates(None),
                          config.accept_any_outgoing, config.accept_any_incoming)
    return AcceptRule(key, host_rules(spec.hosts), config.authenticates(spec), spec.outgoing,
                      spec.incoming)


@dataclass(frozen=True)
class Peer:
    """What a connection tells about the router at its other end."""

    address: str | None            # IP address text (None: not an IP socket)
    port: int | None = None
    tls: bool = False
    certificate: dict | None = None  # verified peer certificate, as getpeercert()

    @classmethod
    def of(cls, transport: Any) -> Peer:
        """The peer of an asyncio transport."""
        name = transport.get_extra_info("peername") if transport is not None else None
        address, port = (name[0], name[1]) if isinstance(name, tuple) and len(name) >= 2 \
            else (None, None)
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        certificate = ssl_object.getpeercert() if ssl_object is not None else None
        return cls(address, port, ssl_object is not None, certificate or None)


@dataclass(frozen=True)
class Refusal:
    log: str                       # for the log: address, domain, the rule failed
    nack: str                      # for the peer


#: ``check_peer``'s answer when only DNS can tell (``check_peer_names``)
NEEDS_DNS = Refusal("", "")


def check_peer(rule: AcceptRule, domain: str, peer: Peer) -> Refusal | None:
    """None to admit, a ``Refusal``, or ``NEEDS_DNS``."""
    source = peer.address or "an unknown address"
    if rule.authenticated:
        if not peer.tls:
            return Refusal(f"router domain {domain!r} from {source} dialled without TLS, "
                           f"but {rule.key} requires authentication (require_authenticated)",
                           f"router domain {domain!r} must dial over TLS with a certificate")
        if not peer.certificate:
            return Refusal(f"router domain {domain!r} from {source} presented no "
                           f"certificate, but {rule.key} requires authentication "
                           "(require_authenticated)",
                           f"router domain {domain!r} must present a certificate")
        dns, ips = certificate_names(peer.certificate)
        if not rule.hosts.names_certificate(dns, ips):
            named = ", ".join([f"DNS:{n}" for n in dns] + [f"IP:{a}" for a in ips]) or "nothing"
            return Refusal(f"router domain {domain!r} from {source}: its certificate names "
                           f"{named}, none of {rule.hosts_key} ({rule.hosts})",
                           f"the certificate does not name a host allowed for router domain "
                           f"{domain!r}")
    if not rule.hosts:
        return None
    if peer.address is not None:
        try:
            if rule.hosts.match_address(peer.address) is not None:
                return None
        except ValueError:
            return _outside(rule, domain, peer)
        if rule.hosts.needs_dns:
            return NEEDS_DNS
    return _outside(rule, domain, peer)


async def check_peer_names(rule: AcceptRule, domain: str, peer: Peer,
                           resolver: Resolver) -> Refusal | None:
    """The rest of ``check_peer`` when it answered ``NEEDS_DNS``. A resolver
    too busy to ask refuses the peer at once, and the log says why."""
    try:
        if peer.address is not None and await rule.hosts.match(peer.address, resolver):
            return None
    except ResolverBusy as exc:
        source = peer.address or "an unknown address"
        return Refusal(f"router domain {domain!r} from {source}: {rule.hosts_key} "
                       f"({rule.hosts}) needs host-name lookups, and {exc}: refused "
                       "without looking up (it may dial again)",
                       f"router domain {domain!r}: the router is busy, try again later")
    return _outside(rule, domain, peer)


def _outside(rule: AcceptRule, domain: str, peer: Peer) -> Refusal:
    source = peer.address or "an unknown address"
    return Refusal(f"router domain {domain!r} from {source}: the address matches none of "
                   f"{rule.hosts_key} ({rule.hosts})",
                   f"router domain {domain!r} is not accepted from {source}")


# -- what an administrator should hear about --------------------------------------

def open_entries(config: FederationConfig) -> list[str]:
    """The rules that admit routers from any address, each described."""
    out = []
    for i, spec in enumerate(config.accept):
        rules = host_rules(spec.hosts)
        if not rules:
            out.append(f"{list_item('federation.accept', i)} (router {spec.router!r}) "
                       "has no hosts: "
                       f"it admits a router that says it is {spec.router!r} from any address")
        elif rules.matches_everything:
            out.append(f"{list_item('federation.accept', i)} (router {spec.router!r}): hosts "
                       f"({rules}) match every address")
    if config.accept_any:
        rules = host_rules(config.accept_any_hosts)
        if not rules or rules.matches_everything:
            out.append("federation.accept_any admits any router, under any router domain it "
                       "claims, from any address")
        else:
            out.append(f"federation.accept_any admits routers under any router domain they "
                       f"claim from {rules} (accept_any_hosts)")
    return out


def _reachable(uri: str) -> bool:
    """Whether other machines can reach a listen URI (not loopback only)."""
    try:
        host = parse_ewaf_uri(uri).host.strip("[]")
    except (URIError, TypeError):
        return True
    if host.lower() == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True            # "", "*", a host name: assume reachable


def admission_warnings(config: FederationConfig | None, listen_uris: Sequence[str]) -> list[str]:
    """Warnings about who can link through the listen URIs: every rule that
    admits any address (or any domain) when a listener is reachable from
    other machines, and entries requiring authentication that no TLS
    listener can satisfy. Empty when there is nothing to say."""
    if config is None:
        return []
    out: list[str] = []
    reachable = [uri for uri in listen_uris if _reachable(uri)]
    if reachable:
        where = ", ".join(reachable)
        for entry in open_entries(config):
            out.append(f"{entry}, and {where} can be reached from other machines: add "
                       "hosts (its addresses or names) and, over TLS, "
                       "require_authenticated = true")
    needs_tls = [f"{list_item('federation.accept', i)} (router {spec.router!r})"
                 for i, spec in enumerate(config.accept) if config.authenticates(spec)]
    if config.accept_any and config.authenticates(None):
        needs_tls.append("federation.accept_any")
    if needs_tls and listen_uris and not any(_secure(uri) for uri in listen_uris):
        out.append(f"{', '.join(needs_tls)} require authentication, but no federation "
                   "listener uses TLS (ewaf:1.0/ssl,none,xdr/host:port): those routers "
                   "cannot link")
    return out


def _secure(uri: str) -> bool:
    try:
        return parse_ewaf_uri(uri).secure
    except (URIError, TypeError):
        return False
