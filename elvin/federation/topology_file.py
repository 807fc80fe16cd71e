"""Topology files: an event domain of routers written in TOML, and the
federation configuration each router needs to form it.

A topology file::

    [domain]                      # optional
    name = "acme"                 # default: the file's stem
    default_supplier = "hub"      # optional; default: the first router
    default_consumer = "hub"

    [qos]                         # optional; both default to "forbid"
    cycles = "forbid"             # or "allow": redundant paths, see below
    diamonds = "forbid"

    [[routers]]
    name = "hub"                              # letters, digits, '.', '_', '-'
    url = "ewaf://hub.example.com:2916"       # its federation endpoint
    client_url = "elvin://hub.example.com"    # optional: where clients connect
    hosts = ["hub.example.com", "10.1.2.3"]   # optional: where it dials from, and
                                              # the names its certificate carries
    require_authenticated = false             # optional: routers dialling it must
                                              # present a certificate (over TLS)

    [[links]]                     # notifications flow from `from` to `to`
    from = "hub"
    to = "edge"
    outgoing = "require(News)"    # optional: what `from` forwards over the link
    incoming = "Group != 'x'"     # optional: what `to` accepts from it

QoS: routers that take part in learning the topology (``routing = "trees"``,
the default) forward every notification along the shortest-path tree from
where it entered the federation, so cycles and diamonds deliver once and give
a path around a dead router; ``forbid`` keeps the paper's single path, which
any router (Avis, older ``elvind``) handles. A domain that allows either gets
``routing = "trees"`` written into every fragment.

Filters are Elvin subscription expressions; a missing filter means
everything. A router's ``hosts`` go into the ``accept`` entry of every
router it dials, so that only it, from there, links as that router; its
``require_authenticated`` goes into its own ``accept`` entries. ``load_topology`` checks the structure, names, URLs (``ewaf`` for
federation endpoints, ``elvin`` for client URLs, via ``elvin.protocol.uri``)
and that the links respect the QoS: links are added in file order and every
refused one is reported with the cycles or diamond paths it would create. Every
error is a ``TopologyFileError`` naming the file, the table (with its line
when the file uses ``[[routers]]``/``[[links]]`` headers) and the problem.

``federation_config(topology, name)`` gives the ``[federation]`` settings of
one router; ``render_fragment`` writes them as TOML::

    [federation]
    router_domain = "hub"
    listen = "ewaf://hub.example.com:2916"

    [[federation.connect]]        # links this router dials
    router = "edge"
    url = "ewaf://edge.example.com:2916"
    outgoing = "require(News)"    # true: everything, false: nothing
    incoming = false

    [[federation.accept]]         # links the other end dials
    router = "other"
    outgoing = false
    incoming = true

One federation connection carries both directions between two routers (the
federation protocol allows one connection per pair of router domains), so
each pair of linked routers gets exactly one connection: the ``from`` router
of the pair's first link dials the other, and on each side ``outgoing`` /
``incoming`` say what may cross in each direction - ``false`` where the domain
has no link in that direction, so that notifications flow only along the
domain's links. A router's ``router_domain`` is its name in the topology. The
router is expected to refuse federation connections from router domains not
listed in its ``accept`` entries.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elvin.federation.domain import (
    CycleError,
    DiamondError,
    Domain,
    Policy,
    TopologyError,
)
from elvin.federation.hosts import parse_hosts
from elvin.protocol.uri import ElvinURI, URIError, parse_uri
from elvin.tomlwrite import toml_string, toml_value

__all__ = [
    "FEDERATION_PORT",
    "LinkSpec",
    "RouterSpec",
    "Topology",
    "TopologyFileError",
    "federation_config",
    "load_topology",
    "parse_topology",
    "render_fragment",
]

FEDERATION_PORT = 2916   # IANA port of the federation protocol over XDR
FEDERATION_VERSION = (1, 0)
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")

_TOP_KEYS = {"domain", "qos", "routers", "links"}
_DOMAIN_KEYS = {"name", "default_supplier", "default_consumer"}
_QOS_KEYS = {"cycles", "diamonds"}
_ROUTER_KEYS = {"name", "url", "client_url", "description", "hosts",
                "require_authenticated"}
_LINK_KEYS = {"from", "to", "outgoing", "incoming"}


class TopologyFileError(TopologyError):
    """A topology file that cannot be used. ``path`` is the file, ``table``
    the TOML table at fault (e.g. ``'links #3 (a -> b)'``, or ``''``),
    ``line`` its line when known, ``problem`` the description. For links
    refused by the QoS, ``refusals`` holds ``(LinkSpec, CycleError |
    DiamondError)`` for every refused link."""

    def __init__(self, path: str | Path, table: str, problem: str, line: int | None = None,
                 refusals: list[tuple[LinkSpec, TopologyError]] | None = None) -> None:
        self.path = str(path)
        self.table = table
        self.problem = problem
        self.line = line
        self.refusals = refusals or []
        where = self.path
        if line is not None:
            where += f":{line}"
        if table:
            where += f": {table}"
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class RouterSpec:
    name: str
    url: str                       # as written (stripped)
    federation_uri: ElvinURI
    client_url: str | None = None
    client_uri: ElvinURI | None = None
    description: str | None = None
    hosts: tuple[str, ...] = ()
    require_authenticated: bool = False


@dataclass(frozen=True)
class LinkSpec:
    source: str
    target: str
    outgoing: str | None = None
    incoming: str | None = None
    index: int = 0                 # 1-based position among [[links]]
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}"


@dataclass
class Topology:
    path: str
    name: str
    routers: dict[str, RouterSpec]
    links: list[LinkSpec]
    domain: Domain = field(repr=False)

    @property
    def qos(self):
        return self.domain.qos


FilterValidator = Callable[[str], None]


def _header_lines(text: str, table: str) -> list[int]:
    pattern = re.compile(r"^[ \t]*\[\[[ \t]*" + re.escape(table) + r"[ \t]*\]\]", re.M)
    return [text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)]


class _Reader:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text

    def fail(self, table: str, problem: str, line: int | None = None) -> TopologyFileError:
        return TopologyFileError(self.path, table, problem, line)

    def table(self, data: Mapping[str, Any], key: str, allowed: set[str]) -> dict[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(f"[{key}]", f"'{key}' must be a table, not "
                                        f"{_kind(value)}")
        self.no_unknown(value, allowed, f"[{key}]")
        return value

    def no_unknown(self, table: Mapping[str, Any], allowed: set[str], where: str,
                   line: int | None = None) -> None:
        for key in table:
            if key not in allowed:
                hint = difflib.get_close_matches(key, sorted(allowed), n=1)
                did = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise self.fail(where, f"unknown key {key!r}{did}; expected "
                                       f"{', '.join(sorted(allowed))}", line)

    def string(self, table: Mapping[str, Any], key: str, where: str,
               line: int | None, required: bool = True) -> str | None:
        if key not in table:
            if required:
                raise self.fail(where, f"missing {key!r}", line)
            return None
        value = table[key]
        if not isinstance(value, str):
            raise self.fail(where, f"{key!r} must be a string, not {_kind(value)}", line)
        value = value.strip()
        if not value:
            raise self.fail(where, f"{key!r} is empty", line)
        return value

    def array_of_tables(self, data: Mapping[str, Any], key: str) -> list[tuple[dict, int | None]]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(f"[[{key}]]", f"'{key}' must be an array of tables "
                                          f"([[{key}]] sections)")
        lines: list[int | None] = list(_header_lines(self.text, key))
        if len(lines) != len(value):
            lines = [None] * len(value)   # inline or mixed syntax: no line numbers
        return list(zip(value, lines, strict=True))


def _kind(value: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)


def _suggest(name: str, known: list[str]) -> str:
    hint = difflib.get_close_matches(name, known, n=1)
    if hint:
        return f" (did you mean {hint[0]!r}?)"
    return f" (routers: {', '.join(known)})" if known else ""


def parse_topology(text: str, path: str | Path = "<topology>", *,
                   validate_filter: FilterValidator | None = None) -> Topology:
    """Parse and check the text of a topology file (see the module doc).
    ``validate_filter`` may check each filter expression, raising
    ``ValueError`` (e.g. a ``SubscriptionError``) with the reason."""
    path = str(path)
    reader = _Reader(path, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise TopologyFileError(path, "", f"TOML syntax error: {exc}",
                                int(m.group(1)) if m else None) from None
    reader.no_unknown(data, _TOP_KEYS, "top level")

    # [domain] and [qos]
    domain_table = reader.table(data, "domain", _DOMAIN_KEYS)
    name = reader.string(domain_table, "name", "[domain]", None, required=False)
    if name is None:
        name = Path(path).stem or "domain"
    qos_table = reader.table(data, "qos", _QOS_KEYS)
    policies: dict[str, Policy] = {}
    for key in ("cycles", "diamonds"):
        value = qos_table.get(key, "forbid")
        if value not in ("forbid", "allow"):
            raise reader.fail("[qos]", f"{key} = {value!r}: expected \"forbid\" or "
                                       "\"allow\"")
        policies[key] = Policy(value)

    # [[routers]]
    routers: dict[str, RouterSpec] = {}
    endpoints: dict[tuple[str, int], str] = {}
    entries = reader.array_of_tables(data, "routers")
    if not entries:
        raise reader.fail("[[routers]]", "no routers: a topology needs at least one "
                                          "[[routers]] table")
    for n, (table, line) in enumerate(entries, 1):
        where = f"routers #{n}"
        rname = reader.string(table, "name", where, line)
        assert rname is not None
        where = f"routers #{n} ({rname!r})"
        reader.no_unknown(table, _ROUTER_KEYS, where, line)
        if not NAME_PATTERN.match(rname):
            raise reader.fail(where, f"bad router name {rname!r} (use letters, digits, "
                                     "'.', '_' and '-', starting with a letter or digit; "
                                     "it names the router's configuration file)", line)
        if rname in routers:
            raise reader.fail(where, f"duplicate router name {rname!r} (already used by "
                                     f"routers #{list(routers).index(rname) + 1})", line)
        url = reader.string(table, "url", where, line)
        assert url is not None
        try:
            fed_uri = parse_uri(url, default_port=FEDERATION_PORT, scheme="ewaf",
                                default_version=FEDERATION_VERSION)
        except URIError as exc:
            raise reader.fail(where, f"bad federation url: {exc} (expected "
                                     "ewaf://host[:port])", line) from None
        endpoint = (fed_uri.host.lower(), fed_uri.port)
        if endpoint in endpoints:
            raise reader.fail(where, f"url {url!r} is the same endpoint as router "
                                     f"{endpoints[endpoint]!r}'s", line)
        endpoints[endpoint] = rname
        client_url = reader.string(table, "client_url", where, line, required=False)
        client_uri = None
        if client_url is not None:
            try:
                client_uri = parse_uri(client_url)
            except URIError as exc:
                raise reader.fail(where, f"bad client_url: {exc} (expected "
                                         "elvin://host[:port] or elvin:4.0/tcp,none,xdr/"
                                         "host:port)", line) from None
        description = reader.string(table, "description", where, line, required=False)
        hosts = table.get("hosts", [])
        if isinstance(hosts, str):
            hosts = [hosts]
        if not isinstance(hosts, list):
            raise reader.fail(where, f"'hosts' must be an array of host patterns, not "
                                     f"{_kind(hosts)}", line)
        try:
            parse_hosts(hosts)
        except ValueError as exc:
            raise reader.fail(where, f"bad hosts{exc}", line) from None
        authenticated = table.get("require_authenticated", False)
        if not isinstance(authenticated, bool):
            raise reader.fail(where, f"'require_authenticated' must be true or false, not "
                                     f"{_kind(authenticated)}", line)
        routers[rname] = RouterSpec(rname, url, fed_uri, client_url, client_uri, description,
                                    tuple(hosts), authenticated)

    # [[links]]
    known = list(routers)
    links: list[LinkSpec] = []
    seen: dict[tuple[str, str], int] = {}
    for n, (table, line) in enumerate(reader.array_of_tables(data, "links"), 1):
        where = f"links #{n}"
        reader.no_unknown(table, _LINK_KEYS, where, line)
        source = reader.string(table, "from", where, line)
        target = reader.string(table, "to", where, line)
        assert source is not None and target is not None
        where = f"links #{n} ({source} -> {target})"
        for end, rname in (("from", source), ("to", target)):
            if rname not in routers:
                raise reader.fail(where, f"unknown router {rname!r} in '{end}'"
                                         f"{_suggest(rname, known)}", line)
        if source == target:
            raise reader.fail(where, "a router cannot link to itself", line)
        if (source, target) in seen:
            raise reader.fail(where, f"duplicate link (same as links "
                                     f"#{seen[(source, target)]})", line)
        seen[(source, target)] = n
        filters = {}
        for key in ("outgoing", "incoming"):
            expr = reader.string(table, key, where, line, required=False)
            if expr is not None and validate_filter is not None:
                try:
                    validate_filter(expr)
                except ValueError as exc:
                    raise reader.fail(where, f"bad {key} filter {expr!r}: {exc}",
                                      line) from None
            filters[key] = expr
        links.append(LinkSpec(source, target, filters["outgoing"], filters["incoming"], n,
                              line))

    # build the domain; a refused link is skipped so that every refusal shows
    domain = Domain(name, cycles=policies["cycles"], diamonds=policies["diamonds"])
    for rname in routers:
        domain.add_member(rname)
    for key in ("default_supplier", "default_consumer"):
        rname = reader.string(domain_table, key, "[domain]", None, required=False)
        if rname is None:
            continue
        if rname not in routers:
            raise reader.fail("[domain]", f"{key}: unknown router {rname!r}"
                                          f"{_suggest(rname, known)}")
        getattr(domain, f"set_{key}")(rname)
    refusals: list[tuple[LinkSpec, TopologyError]] = []
    for spec in links:
        try:
            domain.add_link(spec.source, spec.target, outgoing=spec.outgoing,
                            incoming=spec.incoming)
        except (CycleError, DiamondError) as exc:
            refusals.append((spec, exc))
    if refusals:
        raise _refused(path, refusals, domain)
    return Topology(path, name, routers, links, domain)


def _refused(path: str, refusals: list[tuple[LinkSpec, TopologyError]],
             domain: Domain) -> TopologyFileError:
    qos = domain.qos
    forbidden = " and ".join(w for w, p in (("cycles", qos.cycles),
                                            ("diamonds", qos.diamonds))
                             if p is Policy.FORBID)
    lines = []
    for spec, exc in refusals:
        where = f"links #{spec.index}" + (f" (line {spec.line})" if spec.line else "")
        body = str(exc).replace("\n", "\n    ")
        lines.append(f"  {where}: {body}")
    count = "1 link" if len(refusals) == 1 else f"{len(refusals)} links"
    problem = (f"{count} refused ({forbidden} forbidden by [qos]; set "
               f"{'them' if ' and ' in forbidden else 'it'} to \"allow\" to accept):\n"
               + "\n".join(lines))
    spec0 = refusals[0][0]
    table = f"links #{spec0.index} ({spec0})" if len(refusals) == 1 else "[[links]]"
    line = spec0.line if len(refusals) == 1 else None
    return TopologyFileError(path, table, problem, line, refusals)


def load_topology(path: str | Path, *,
                  validate_filter: FilterValidator | None = None) -> Topology:
    """Read and check a topology file; ``TopologyFileError`` when it is not
    usable (see ``parse_topology``)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise TopologyFileError(path, "", f"cannot read the file: {exc.strerror or exc}") \
            from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise TopologyFileError(path, "", "not UTF-8 text (TOML files are UTF-8)",
                                line) from None
    return parse_topology(text, path, validate_filter=validate_filter)


# --- per-router federation configuration ------------------------------------

def federation_config(topology: Topology, name: str) -> dict[str, Any]:
    """The ``[federation]`` table for router ``name``: its listen URL, the
    connections it dials (``connect``) and those it accepts (``accept``),
    each with the filters for both directions (``True`` = everything,
    ``False`` = nothing, else an expression)."""
    if name not in topology.routers:
        raise TopologyError(f"no router named {name!r} in {topology.path}")
    domain = topology.domain
    # one connection per unordered pair, dialled by the `from` of its first link
    dialer: dict[frozenset[str], str] = {}
    for link in domain.links:
        dialer.setdefault(frozenset((link.source.name, link.target.name)), link.source.name)

    def filters(peer: str) -> dict[str, str | bool]:
        out = domain.link(name, peer) if domain.has_link(name, peer) else None
        inc = domain.link(peer, name) if domain.has_link(peer, name) else None
        return {
            "outgoing": False if out is None else (out.outgoing or True),
            "incoming": False if inc is None else (inc.incoming or True),
        }

    connect: list[dict[str, Any]] = []
    accept: list[dict[str, Any]] = []
    for pair, first in dialer.items():
        if name not in pair:
            continue
        (peer,) = pair - {name}
        if first == name:
            connect.append({"router": peer, "url": topology.routers[peer].url,
                            **filters(peer)})
        else:
            entry: dict[str, Any] = {"router": peer}
            if topology.routers[peer].hosts:
                entry["hosts"] = list(topology.routers[peer].hosts)
            if topology.routers[name].require_authenticated:
                entry["require_authenticated"] = True
            accept.append({**entry, **filters(peer)})
    config: dict[str, Any] = {"router_domain": name, "listen": topology.routers[name].url}
    qos = domain.qos
    if Policy.ALLOW in (qos.cycles, qos.diamonds):
        config["routing"] = "trees"      # exactly once on the domain's redundant paths
    return {**config, "connect": connect, "accept": accept}


def render_fragment(topology: Topology, name: str) -> str:
    """Router ``name``'s federation configuration as a TOML fragment."""
    config = federation_config(topology, name)
    domain = topology.domain
    member = domain.member(name)
    out = [
        f"# Federation configuration of router {name!r} (member {member.id}) in event "
        f"domain {topology.name!r}.",
        f"# Generated by `elvin-domain apply` from {topology.path}; edit the topology, "
        "not this file.",
        "# Filters: true = everything, false = nothing, else a subscription expression;",
        "# 'outgoing' is what this router forwards to the peer, 'incoming' what it",
        "# accepts from it. Refuse federation from router domains not listed here.",
        f"# Downstream: {', '.join(domain.downstream(name)) or '(none)'}",
        f"# Upstream: {', '.join(domain.upstream(name)) or '(none)'}",
        "",
        "[federation]",
        f"router_domain = {toml_string(config['router_domain'])}",
        f"listen = {toml_string(config['listen'])}",
    ]
    if "routing" in config:
        out.append(f"routing = {toml_string(config['routing'])}    # the domain has redundant "
                   "paths: forward along shortest-path trees")
    for kind in ("connect", "accept"):
        for entry in config[kind]:
            out.append("")
            out.append(f"[[federation.{kind}]]")
            for key, value in entry.items():
                out.append(f"{key} = {toml_value(value)}")
    return "\n".join(out) + "\n"
