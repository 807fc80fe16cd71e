"""Federation settings of a router: ``RouterConfig.federation``.

In a router's TOML file this is the ``[federation]`` table that
``elvin-domain apply`` writes (``elvin.federation.topology_file``)::

    [federation]
    router_domain = "hub"                   # unique name of this router (domain)
    listen = "ewaf://0.0.0.0:2916"          # or a list; default port 2916
    accept_any = false                      # accept routers not listed below
    debounce = 0.05                         # seconds to gather subscription changes
    reconnect_min = 0.5                     # backoff of outgoing links (seconds)
    reconnect_max = 30
    tls_ca = "/etc/elvind/federation-ca.pem"  # CA for ewaf:1.0/ssl,none,xdr/... links
    routing = "trees"                       # or "flood" (see below)
    require_authenticated = false           # default of every accept entry (below)
    accept_any_hosts = ["10.1.0.0/16"]      # where accept_any routers may dial from

    [[federation.connect]]                  # links this router dials
    router = "edge"                         # expected router_domain (optional)
    url = "ewaf://edge.example.com:2916"
    outgoing = "require(News)"              # what may leave over the link
    incoming = true                         # what may enter (true / false / expression)
    client_cert = "/etc/elvind/edge-client.pem"  # optional: certificate shown over TLS
    client_key = "/etc/elvind/edge-client.key"   # (default: the router's tls-cert/-key)
    source_address = "10.1.2.3"             # optional: the local address to dial from

    [[federation.accept]]                   # routers allowed to dial in
    router = "other"
    hosts = ["other.example.com", "10.2.0.0/16"]  # where it may dial from
    require_authenticated = true            # it must show a certificate naming a host
    outgoing = false
    incoming = true

Admission: a router that dials in names its router domain; the entry for
that domain (or ``accept_any``) admits it only from an address matching its
``hosts`` (``elvin.federation.hosts``: addresses, networks, host names,
wildcards), even though the domain is listed; without ``hosts`` any address
will do (the router says so when it starts). With ``require_authenticated``
the peer must also dial over TLS and present a client certificate that
chains to ``tls_ca`` (or the system's trust store) and names one of the
entry's hosts; the entry must then have ``hosts``. A dialling router shows
its own ``tls-cert``/``tls-key`` (or the connect entry's ``client_cert``/
``client_key``) when the listener asks for one.

TLS: a ``listen`` URL with the ssl protocol stack
(``ewaf:1.0/ssl,none,xdr/0.0.0.0:2917``) is served with the router's
``tls-cert`` / ``tls-key``; a ``connect`` URL with it verifies the peer's
certificate (and that it names the URL's host) against ``tls_ca``, or the
system's trust store when ``tls_ca`` is not set. Peers are never accepted
unverified: routers with self-signed certificates need ``tls_ca``. When an
accept entry requires authentication, TLS listeners ask every dialling
router for a certificate and refuse one that does not verify.

Routing: with ``routing = "trees"`` (the default) the router takes part in
learning the federation's topology and forwards each notification only
along the shortest-path tree rooted at the router where it entered the
federation, so that cycles and meshes deliver every notification exactly
once and route around a dead router (``elvin.federation.topology``).
``"flood"`` is the protocol as written (routing lists only), as Avis and
older ``elvind`` do: loop-free, and a copy that a cycle brings back by
another path is passed on but not delivered here again
(``FederationService.first_here``; Avis delivers it twice).

Filters: ``true`` lets everything through, ``false`` nothing, a string is a
subscription expression (``"true"``/``"false"`` strings work too, as in
Avis's federation classes).

In tests (and from Python) build it directly::

    from elvin.federation.config import FederationConfig, ConnectSpec, AcceptSpec
    RouterConfig(listen=["elvin://127.0.0.1:0"], federation=FederationConfig(
        router_domain="a", listen=["ewaf://127.0.0.1:0"],
        connect=[ConnectSpec("ewaf://127.0.0.1:4000", router="b")],
        accept_any=True))

``FederationConfig.validate()`` parses URLs and filter expressions and
raises ``FederationConfigError`` naming the key (the router's config loader
adds the file and line).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elvin.config_file import list_item
from elvin.errors import SubscriptionError
from elvin.federation.hosts import HostRules
from elvin.fileutil import file_problem
from elvin.protocol.uri import ElvinURI, URIError, parse_uri
from elvin.subscription import compile as compile_subscription
from elvin.subscription.ast import Node

__all__ = [
    "FEDERATION_PORT", "AcceptSpec", "ConnectSpec", "FederationConfig",
    "FederationConfigError", "Filter", "federation_from_dict", "federation_line",
    "host_rules", "parse_ewaf_uri",
]

FEDERATION_PORT = 2916
FilterSpec = bool | str


class FederationConfigError(ValueError):
    """A bad federation setting; ``key`` says which (``federation.connect #1, url``:
    positions as ``elvin.config_file.list_item`` writes them)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


def parse_ewaf_uri(text: str) -> ElvinURI:
    """``ewaf://host[:port]`` (or the long form); port 0 = any free port."""
    try:
        return parse_uri(text, default_port=FEDERATION_PORT, scheme="ewaf",
                         default_version=(1, 0))
    except URIError as exc:
        head, sep, tail = text.rpartition(":0")
        if exc.part != "port" or not sep or (tail and not tail.startswith(";")):
            raise
        return dataclasses.replace(parse_uri(f"{head}:1{tail}", default_port=FEDERATION_PORT,
                                             scheme="ewaf", default_version=(1, 0)), port=0)


#: the prefix of the routing-list entry that stamps a notification with the
#: topology it is routed by (``elvin.federation.topology``): never a router domain
STAMP_PREFIX = "@spt1:"


class Filter:
    """A link filter: ``ast`` is True (everything), False (nothing) or a Node;
    ``matches(attrs)`` answers for one notification (bottom is no)."""

    __slots__ = ("ast", "text", "matches")

    def __init__(self, spec: FilterSpec | Node) -> None:
        if isinstance(spec, str) and spec.strip().lower() in ("true", "false"):
            spec = spec.strip().lower() == "true"
        if spec is True or spec is False:
            self.ast: Node | bool = spec
            self.text = "true" if spec else "false"
            self.matches: Callable[[Mapping], bool] = (
                (lambda attrs: True) if spec else (lambda attrs: False))
            return
        compiled = compile_subscription(spec)  # SubscriptionError if bad
        self.ast = compiled.ast
        self.text = compiled.text
        self.matches = compiled.matches

    def __repr__(self) -> str:
        return f"Filter({self.text!r})"


ROUTING_MODES = ("trees", "flood")


@dataclass
class ConnectSpec:
    #: the peer's federation URL (``ewaf://host:2916``, ``ewaf:1.0/ssl,none,xdr/host:port``)
    url: str
    router: str | None = None
    outgoing: FilterSpec = True
    incoming: FilterSpec = True
    #: PEM certificate (chain) and key shown to a TLS listener that asks for
    #: one; None: the router's ``tls-cert``/``tls-key`` (if any)
    client_cert: str | None = None
    client_key: str | None = None
    #: local address to dial from (a host with several), None: the system's choice
    source_address: str | None = None


@dataclass
class AcceptSpec:
    #: the router domain the dialling router must name
    router: str
    #: what may leave over the link (true, false or a subscription expression)
    outgoing: FilterSpec = True
    #: what may enter over the link (true, false or a subscription expression)
    incoming: FilterSpec = True
    #: where the router may dial in from (``elvin.federation.hosts``);
    #: None or empty: any address
    hosts: list[str] | None = None
    #: it must show a certificate naming one of ``hosts``; None: the
    #: ``[federation]`` default
    require_authenticated: bool | None = None


@dataclass
class FederationConfig:
    router_domain: str | None = None      # None: derived from the host name and pid
    listen: list[str] = field(default_factory=list)
    #: the routers this one dials (``[[federation.connect]]`` entries)
    connect: list[ConnectSpec] = field(default_factory=list)
    #: the routers allowed to dial in (``[[federation.accept]]`` entries)
    accept: list[AcceptSpec] = field(default_factory=list)
    accept_any: bool = False
    #: filters for routers accepted through ``accept_any``
    accept_any_outgoing: FilterSpec = True
    #: what may enter from routers accepted through ``accept_any``
    accept_any_incoming: FilterSpec = True
    debounce: float = 0.05
    reconnect_min: float = 0.5
    #: the longest wait between redials of an outgoing link (seconds)
    reconnect_max: float = 30.0
    #: seconds a dialled link has to connect and finish its handshake
    connect_timeout: float = 10.0
    keepalive: float = 60.0               # TestConn after this long without traffic
    request_timeout: float = 20.0         # handshake / FedSubReplace reply deadline
    request_retries: int = 1              # FedSubReplace resends before the link is closed
    #: routing = "trees": how long a router that takes part is waited for (to
    #: say it takes part, to announce a link, to hold a new graph) before it
    #: is treated as gone for routing (``elvin.federation.topology``)
    agreement_timeout: float = 2.0
    max_routing: int = 64                 # longer routing lists are a protocol violation
    max_disjuncts: int = 10000            # larger pull filters are sent as TRUE
    #: "trees": learn the topology, forward along shortest-path trees;
    #: "flood": routing lists only (EFP 1.0 as written, as Avis)
    routing: str = "trees"
    #: PEM file of the CA certificate(s) that routers dialled over TLS
    #: (``ewaf:1.0/ssl,none,xdr/host:port``) must present a certificate from;
    #: None = the system's default trust store. The peer's certificate and
    #: host name are always verified (there is no unverified mode).
    tls_ca: str | None = None
    #: where routers accepted through ``accept_any`` may dial in from
    accept_any_hosts: list[str] | None = None
    #: default of every accept entry's (and accept_any's) require_authenticated
    require_authenticated: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.listen or self.connect)

    def authenticates(self, spec: AcceptSpec | None) -> bool:
        """Whether routers admitted by ``spec`` (None: by ``accept_any``)
        must present a certificate."""
        if spec is None or spec.require_authenticated is None:
            return bool(self.require_authenticated)
        return bool(spec.require_authenticated)

    @property
    def asks_for_certificates(self) -> bool:
        """Some accept entry requires authentication: TLS listeners ask
        every dialling router for a certificate."""
        return any(self.authenticates(spec) for spec in self.accept) or \
            (self.accept_any and self.authenticates(None))

    def validate(self) -> FederationConfig:
        if self.router_domain is not None:
            if not isinstance(self.router_domain, str) or not self.router_domain.strip():
                raise FederationConfigError("federation.router_domain",
                                            "must be a non-empty string")
            if "\0" in self.router_domain:
                raise FederationConfigError("federation.router_domain", "contains NUL")
            if self.router_domain.startswith(STAMP_PREFIX):
                raise FederationConfigError("federation.router_domain",
                                            f"must not start with {STAMP_PREFIX!r} "
                                            "(reserved for routing lists)")
        if self.routing not in ROUTING_MODES:
            raise FederationConfigError("federation.routing", f"must be one of "
                                        f"{', '.join(map(repr, ROUTING_MODES))}, "
                                        f"not {self.routing!r}")
        for i, uri in enumerate(self.listen):
            try:
                parsed = parse_ewaf_uri(uri)
            except (URIError, TypeError) as exc:
                raise FederationConfigError(list_item("federation.listen", i),
                                            f"bad federation URL: {exc}") from None
        seen: set[str] = set()
        for i, spec in enumerate(self.connect):
            key = list_item("federation.connect", i)
            try:
                parsed = parse_ewaf_uri(spec.url)
            except (URIError, TypeError) as exc:
                raise FederationConfigError(f"{key}, url", f"bad federation URL: {exc}") \
                    from None
            if parsed.port == 0:
                raise FederationConfigError(f"{key}, url", "cannot connect to port 0")
            self._check_filters(key, spec.outgoing, spec.incoming)
            _check_connect_tls(key, spec)
        if not isinstance(self.require_authenticated, bool):
            raise FederationConfigError("federation.require_authenticated",
                                        f"must be true or false, not "
                                        f"{self.require_authenticated!r}")
        for i, rule in enumerate(self.accept):
            key = list_item("federation.accept", i)
            if not isinstance(rule.router, str) or not rule.router:
                raise FederationConfigError(f"{key}, router", "must be a router domain name")
            if rule.router in seen:
                raise FederationConfigError(f"{key}, router",
                                            f"router {rule.router!r} is listed twice")
            seen.add(rule.router)
            self._check_filters(key, rule.outgoing, rule.incoming)
            if rule.require_authenticated is not None and \
                    not isinstance(rule.require_authenticated, bool):
                raise FederationConfigError(f"{key}, require_authenticated",
                                            f"must be true or false, not "
                                            f"{rule.require_authenticated!r}")
            _check_hosts(key, "hosts", rule.hosts, self.authenticates(rule))
        self._check_filters("federation.accept_any", self.accept_any_outgoing,
                            self.accept_any_incoming)
        _check_hosts("federation", "accept_any_hosts", self.accept_any_hosts,
                     self.accept_any and self.authenticates(None))
        for name in ("debounce", "reconnect_min", "reconnect_max", "connect_timeout",
                     "keepalive", "request_timeout", "agreement_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
                    or (value == 0 and name != "debounce"):
                raise FederationConfigError(f"federation.{name}",
                                            f"must be a positive number, not {value!r}")
        if self.reconnect_max < self.reconnect_min:
            raise FederationConfigError("federation.reconnect_max",
                                        "must be at least reconnect_min")
        for name in ("max_routing", "max_disjuncts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise FederationConfigError(f"federation.{name}",
                                            f"must be a positive integer, not {value!r}")
        if self.tls_ca is not None:
            if not isinstance(self.tls_ca, str) or not self.tls_ca:
                raise FederationConfigError("federation.tls_ca", "must be a file name")
            problem = file_problem(self.tls_ca)
            if problem:
                raise FederationConfigError("federation.tls_ca",
                                            f"CA file {self.tls_ca!r}: {problem}")
        value = self.request_retries
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FederationConfigError("federation.request_retries",
                                        f"must be a whole number (0 or more), not {value!r}")
        return self

    @staticmethod
    def _check_filters(key: str, outgoing: Any, incoming: Any) -> None:
        for name, spec in (("outgoing", outgoing), ("incoming", incoming)):
            if not isinstance(spec, (bool, str)):
                raise FederationConfigError(f"{key}, {name}", "must be true, false or a "
                                            f"subscription expression, not {spec!r}")
            try:
                Filter(spec)
            except SubscriptionError as exc:
                raise FederationConfigError(f"{key}, {name}",
                                            f"bad subscription expression: {exc}") from None


def host_rules(hosts: list[str] | None) -> HostRules:
    """The parsed ``hosts`` of an entry (validated already: never raises)."""
    return HostRules.parse(hosts or ())


def _check_hosts(key: str, name: str, hosts: Any, authenticated: bool) -> None:
    """``hosts`` of an accept entry (``name`` = ``hosts``) or of accept_any."""
    # (an entry's: "federation.accept #2, hosts"; the table's own: "federation.accept_any_hosts")
    where = f"{key}.{name}" if key == "federation" else f"{key}, {name}"
    if hosts is not None:
        if not isinstance(hosts, list):
            raise FederationConfigError(where, f"must be a list of host patterns, not "
                                        f"{hosts!r}")
        try:
            HostRules.parse(hosts)
        except ValueError as exc:
            raise FederationConfigError(where, str(exc)) from None
    if authenticated and not hosts:
        raise FederationConfigError(where, "missing: require_authenticated needs the hosts "
                                    "whose names the peer's certificate must carry")


def _check_connect_tls(key: str, spec: ConnectSpec) -> None:
    """A connect entry's client certificate and source address."""
    if (spec.client_cert is None) != (spec.client_key is None):
        raise FederationConfigError(f"{key}, client_cert", "client_cert and client_key "
                                    "go together")
    for name in ("client_cert", "client_key"):
        path = getattr(spec, name)
        if path is not None and not isinstance(path, str):
            raise FederationConfigError(f"{key}, {name}", f"must be a file name, not {path!r}")
        problem = file_problem(path) if path is not None else None
        if problem:
            raise FederationConfigError(f"{key}, {name}", f"{path!r}: {problem}")
    if spec.source_address is not None:
        try:
            ipaddress.ip_address(spec.source_address)
        except ValueError:
            raise FederationConfigError(f"{key}, source_address",
                                        f"{spec.source_address!r} is not an IP "
                                        "address") from None


_TOP = {"router_domain": str, "listen": (str, list), "accept_any": bool,
        "accept_any_outgoing": (bool, str), "accept_any_incoming": (bool, str),
        "debounce": (int, float), "reconnect_min": (int, float),
        "reconnect_max": (int, float), "connect_timeout": (int, float),
        "keepalive": (int, float), "request_timeout": (int, float),
        "agreement_timeout": (int, float), "request_retries": int, "max_routing": int, "max_disjuncts": int, "tls_ca": str,
        "routing": str, "accept_any_hosts": (str, list), "require_authenticated": bool}


def federation_from_dict(data: Mapping[str, Any],
                         base: FederationConfig | None = None) -> FederationConfig:
    """The ``[federation]`` table -> ``FederationConfig`` (validated)."""
    if not isinstance(data, Mapping):
        raise FederationConfigError("federation", "must be a table")
    config = dataclasses.replace(base) if base is not None else FederationConfig()
    for raw_key, value in data.items():
        key = raw_key.replace("-", "_")
        if key in _TOP:
            types = _TOP[key]
            allowed = types if isinstance(types, tuple) else (types,)
            if (isinstance(value, bool) and bool not in allowed) or \
                    not isinstance(value, allowed):
                raise FederationConfigError(f"federation.{raw_key}",
                                            f"has the wrong type ({value!r})")
            if key in ("listen", "accept_any_hosts"):
                value = [value] if isinstance(value, str) else value
                if not all(isinstance(v, str) for v in value):
                    raise FederationConfigError(f"federation.{raw_key}",
                                                "must be a string or a list of strings")
                value = list(value)
            setattr(config, key, value)
        elif key == "connect":
            config.connect = [_spec(ConnectSpec, t, list_item("federation.connect", i),
                                    ("url", "router", "outgoing", "incoming", "client_cert",
                                     "client_key", "source_address"), "url")
                              for i, t in enumerate(_tables(value, "federation.connect"))]
        elif key == "accept":
            config.accept = [_spec(AcceptSpec, t, list_item("federation.accept", i),
                                   ("router", "outgoing", "incoming", "hosts",
                                    "require_authenticated"), "router")
                             for i, t in enumerate(_tables(value, "federation.accept"))]
        else:
            raise FederationConfigError(f"federation.{raw_key}", "unknown setting")
    return config.validate()


def _tables(value: Any, key: str) -> list[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(t, Mapping) for t in value):
        raise FederationConfigError(key, "must be an array of tables ([[...]])")
    return value


def _spec(cls: type, table: Mapping[str, Any], key: str, allowed: tuple[str, ...],
          required: str) -> Any:
    unknown = set(table) - set(allowed)
    if unknown:
        raise FederationConfigError(f"{key}, {sorted(unknown)[0]}",
                                    f"unknown setting (use {', '.join(allowed)})")
    if required not in table:
        raise FederationConfigError(f"{key}, {required}", "missing")
    table = dict(table)
    for name in ("url", "router", "client_cert", "client_key", "source_address"):
        if name in table and not isinstance(table[name], str):
            raise FederationConfigError(f"{key}, {name}", f"must be a string, not "
                                        f"{table[name]!r}")
    if isinstance(table.get("hosts"), str):
        table["hosts"] = [table["hosts"]]
    if "hosts" in table and (not isinstance(table["hosts"], list)
                             or not all(isinstance(h, str) for h in table["hosts"])):
        raise FederationConfigError(f"{key}, hosts", f"must be a list of host patterns "
                                    f"(strings), not {table['hosts']!r}")
    if "require_authenticated" in table and not isinstance(table["require_authenticated"],
                                                           bool):
        raise FederationConfigError(f"{key}, require_authenticated",
                                    f"must be true or false, not "
                                    f"{table['require_authenticated']!r}")
    return cls(**table)


def federation_line(text: str, key: str) -> str:
    """``", line N"`` for a ``federation.…`` key in the TOML ``text`` (or "").

    ``federation.connect #2, url`` is looked up as the ``url =`` line after the
    second ``[[federation.connect]]`` header; ``federation.listen`` as the
    ``listen =`` line after ``[federation]``."""
    if not text:
        return ""
    lines = text.splitlines()
    m = re.match(r"federation\.(connect|accept) #(\d+)(?:, (\w+))?$", key)
    start = None
    leaf: str | None
    if m:
        header = re.compile(rf"^\s*\[\[\s*federation\.{m.group(1)}\s*\]\]")
        count = 0
        for i, line in enumerate(lines):
            if header.match(line):
                count += 1
                if count == int(m.group(2)):
                    start = i
                    break
        leaf = m.group(3)
    else:
        for i, line in enumerate(lines):
            if re.match(r"^\s*\[\s*federation\s*\]", line):
                start = i
                break
        leaf = key.split(".", 1)[1].split(" #")[0] if "." in key else None
    if start is None:
        return ""
    if leaf:
        pattern = re.compile(r"^\s*[\"']?{}[\"']?\s*=".format(re.escape(leaf).replace("_", "[_-]")))
        for i in range(start + 1, len(lines)):
            if re.match(r"^\s*\[", lines[i]):
                break
            if pattern.match(lines[i]):
                return f", line {i + 1}"
    return f", line {start + 1}"
