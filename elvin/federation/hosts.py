"""Host rules: which addresses a federated router may dial in from, and which
names its certificate may carry.

An accept entry's ``hosts = [...]`` (and ``accept_any_hosts``) is a list of
patterns, as Avis's ``Federation.Apply-Class`` host patterns are:

* an address, ``10.1.2.3`` or ``::1``: that address;
* a network, ``10.1.0.0/16`` or ``fd00::/8``: any address in it;
* a host name, ``edge.example.com``: the addresses it resolves to, and any
  address whose reverse name is that name;
* a wildcard, ``*.example.com`` (``*`` any run of characters, ``?`` one):
  an address whose reverse name matches; like Avis, a wildcard is also
  matched against the address's text (``10.1.*``, ``192.168.1.??``).

A leading ``@`` is dropped (Avis 1.1 wrote ``@host`` and ``@.domain``, the
latter meaning ``*.domain``). Names compare without regard to case.

Reverse names are believed only when forward-confirmed: the name the
address's PTR record gives must resolve back to that address (as Java's
``InetAddress.getCanonicalHostName``, which Avis uses, checks). Otherwise
anyone who controls the reverse zone of their own address could call
themselves ``edge.example.com``.

Certificates (``require_authenticated``): a peer's certificate names one of
the hosts when a subjectAltName DNS entry matches a name or wildcard pattern
(``fnmatch`` rules, so a ``*.example.com`` certificate matches the pattern
``*.example.com``; an address wildcard such as ``10.1.*`` is never matched
against a DNS entry, which could be ``10.1.evil.com``) or an IP entry
matches an address, network or address wildcard. The subject's common name is not used (RFC 6125).

Parsing and matching are sans-IO; ``HostRules.match`` takes a resolver (the
federation service passes one that runs the system's resolver off the
event loop).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

__all__ = ["HostPattern", "HostRules", "Resolver", "ResolverBusy", "certificate_names",
           "parse_host_pattern", "parse_hosts"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAME = re.compile(r"[A-Za-z0-9*?_]([A-Za-z0-9*?_.-]*[A-Za-z0-9*?_])?\.?\Z")
_ADDRESS_WILDCARD = re.compile(r"[0-9a-fA-F:.*?]+\Z")
_ADDRESS_TEXT = re.compile(r"[0-9.*?]+\Z")


class ResolverBusy(Exception):
    """A resolver declined to ask (too many lookups under way). Not an
    ``OSError``: a failed lookup admits nothing, this refuses outright, and
    ``HostRules.match`` lets it through to say so."""


class Resolver:
    """What matching names needs from DNS (both may raise ``OSError``, or
    ``ResolverBusy``)."""

    #: every address ``name`` resolves to
    addresses: Callable[[str], Awaitable[Sequence[str]]]
    #: the names (primary, then aliases) of the PTR record of ``address``
    names: Callable[[str], Awaitable[Sequence[str]]]

    def __init__(self, addresses: Callable[[str], Awaitable[Sequence[str]]],
                 names: Callable[[str], Awaitable[Sequence[str]]]) -> None:
        self.addresses = addresses
        self.names = names


@dataclass(frozen=True)
class HostPattern:
    """One parsed pattern; ``text`` as written, ``kind`` one of ``address``,
    ``network``, ``name``, ``wildcard``."""

    text: str
    kind: str
    network: IPNetwork | None = None
    name: str = ""                      # lower case, no trailing dot

    @property
    def address_only(self) -> bool:
        """A wildcard only an address's text can match (``10.1.*``,
        ``fe80::*``): no host name is digits and dots, or has a colon."""
        return self.kind == "wildcard" and (":" in self.name or
                                            _ADDRESS_TEXT.match(self.name) is not None)

    @property
    def matches_everything(self) -> bool:
        return (self.kind == "wildcard" and set(self.name) <= {"*", "."} and "*" in self.name) \
            or (self.network is not None and self.network.prefixlen == 0)

    def __str__(self) -> str:
        return self.text


def parse_host_pattern(text: object) -> HostPattern:
    """``text`` as a ``HostPattern``; ``ValueError`` saying what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"a host pattern is a string, not {text!r}")
    raw = text.strip()
    body = raw[1:] if raw.startswith("@") else raw     # Avis 1.1: @host, @.domain
    if body.startswith("."):
        body = "*" + body
    if not body:
        raise ValueError(f"empty host pattern {text!r}")
    if any(c.isspace() for c in body):
        raise ValueError(f"host pattern {text!r} contains a space (one host per string)")
    try:
        address = ipaddress.ip_address(body.strip("[]"))
    except ValueError:
        pass
    else:
        return HostPattern(raw, "address", ipaddress.ip_network(address))
    if "/" in body:
        try:
            network = ipaddress.ip_network(body, strict=False)
        except ValueError as exc:
            raise ValueError(f"bad network {text!r}: {exc}") from None
        return HostPattern(raw, "network", network)
    wild = "*" in body or "?" in body
    if ":" in body:                  # an IPv6 address wildcard, fe80::*
        if not (wild and _ADDRESS_WILDCARD.match(body)):
            raise ValueError(f"bad host pattern {text!r}: not an address, a network "
                             "(fd00::/8) or an address wildcard (fe80::*)")
    elif not _NAME.match(body):
        raise ValueError(f"bad host pattern {text!r}: expected an address, a network "
                         "(10.1.0.0/16), a host name or a wildcard (*.example.com); names "
                         "use letters, digits, '.', '-', '_' and the wildcards '*', '?'")
    name = body.lower().rstrip(".")
    kind = "wildcard" if ("*" in name or "?" in name) else "name"
    return HostPattern(raw, kind, name=name)


def parse_hosts(values: Iterable[object]) -> tuple[HostPattern, ...]:
    """Parse a ``hosts`` list; ``ValueError`` naming the first bad entry by
    position (``[2]: bad network ...``)."""
    out = []
    for i, value in enumerate(values):
        try:
            out.append(parse_host_pattern(value))
        except ValueError as exc:
            raise ValueError(f"[{i}]: {exc}") from None
    return tuple(out)


def _plain(address: str | IPAddress) -> IPAddress:
    """The address, an IPv4-mapped IPv6 one (``::ffff:10.1.2.3``) as IPv4."""
    if isinstance(address, str):
        address = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class HostRules:
    """The patterns of one entry, and the questions asked of them."""

    def __init__(self, patterns: Sequence[HostPattern]) -> None:
        self.patterns = tuple(patterns)
        self._names = tuple(p for p in self.patterns if p.kind == "name")
        self._reverse = tuple(p for p in self.patterns
                              if p.kind == "name" or (p.kind == "wildcard" and not p.address_only))

    @classmethod
    def parse(cls, values: Iterable[object]) -> HostRules:
        return cls(parse_hosts(values))

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def __str__(self) -> str:
        return ", ".join(p.text for p in self.patterns)

    @property
    def matches_everything(self) -> bool:
        return any(p.matches_everything for p in self.patterns)

    def match_address(self, address: str | IPAddress) -> HostPattern | None:
        """The first pattern the address itself matches, without DNS."""
        ip = _plain(address)
        text = str(ip)
        for p in self.patterns:
            if p.network is not None:
                if ip.version == p.network.version and ip in p.network:
                    return p
            elif p.kind == "wildcard" and fnmatchcase(text, p.name):
                return p
        return None

    @property
    def needs_dns(self) -> bool:
        """Some patterns are names: matching an address may take lookups."""
        return bool(self._reverse)

    async def match(self, address: str, resolver: Resolver) -> HostPattern | None:
        """The pattern that admits ``address``, or None. Lookups that fail
        admit nothing (they are not errors: the peer is refused);
        ``ResolverBusy`` goes through."""
        found = self.match_address(address)
        if found is not None or not self._reverse:
            return found
        ip = _plain(address)
        for p in self._names:                        # forward: the name's addresses
            try:
                resolved = await resolver.addresses(p.name)
            except OSError:
                continue
            if any(_same(ip, a) for a in resolved):
                return p
        try:
            names = await resolver.names(str(ip))    # reverse, then confirmed
        except OSError:
            return None
        for name in names:
            name = name.lower().rstrip(".")
            candidates = [p for p in self._reverse
                          if (p.kind == "name" and p.name == name)
                          or (p.kind == "wildcard" and fnmatchcase(name, p.name))]
            if not candidates:
                continue
            try:
                confirmed = await resolver.addresses(name)
            except OSError:
                continue
            if any(_same(ip, a) for a in confirmed):
                return candidates[0]
        return None

    def names_certificate(self, dns_names: Iterable[str], ip_addresses: Iterable[str]) -> bool:
        """Whether a certificate with these subjectAltName entries names one
        of the hosts."""
        for dns in dns_names:          # names and name wildcards only: 10.1.* is no
            dns = dns.lower().rstrip(".")  # pattern for a name like 10.1.evil.com
            for p in self._reverse:
                if (p.kind == "name" and p.name == dns) or \
                        (p.kind == "wildcard" and fnmatchcase(dns, p.name)):
                    return True
        for text in ip_addresses:
            try:
                ip = _plain(text.strip())
            except ValueError:
                continue
            if self.match_address(ip) is not None:
                return True
        return False


def _same(ip: IPAddress, text: str) -> bool:
    try:
        return _plain(text) == ip
    except ValueError:
        return False


def certificate_names(peercert: dict | None) -> tuple[list[str], list[str]]:
    """``(DNS names, IP addresses)`` of a certificate's subjectAltName, as
    ``ssl.SSLObject.getpeercert()`` gives it."""
    dns: list[str] = []
    ips: list[str] = []
    for kind, value in (peercert or {}).get("subjectAltName", ()):
        if kind == "DNS":
            dns.append(value)
        elif kind == "IP Address":
            ips.append(value.strip())
    return dns, ips
