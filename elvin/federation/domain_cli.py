"""``elvin-domain``: check an event-domain topology file and turn it into the
federation configuration of each router.

    elvin-domain check topology.toml
    elvin-domain apply topology.toml --out DIR

``check`` validates the file (see ``elvin.federation.topology_file``) and
prints a summary: QoS (and what each choice means), members with their ids
and URLs, links with their filters, and what is downstream of each member,
then who may link to each router: a warning for every router that would
accept a link from any address on a listener other machines can reach
(``elvin.federation.admission.admission_warnings``, the same words the
router logs when it starts). A file with errors, or whose
links would make a cycle or a diamond that its ``[qos]`` forbids, is refused
with the paths at fault.

``apply`` checks the file the same way, then writes ``DIR/<router>.toml`` for
every router: a ``[federation]`` fragment (listen URL, ``connect`` and
``accept`` entries with per-link filters) that makes the routers form exactly
that topology. Nothing is written when the file is refused. Each router's
``elvind`` configuration includes its fragment (``include =
["/etc/elvin/elvind.d/*.toml"]``, see ``elvin.router.config``); SIGHUP (``elvind
reload``) then applies it to the running router, no restart needed.

Exit codes (docs/architecture.md): 0 ok, 1 usage or input error (including a
refused topology, or an output directory it may not write:
``cli_common.os_error_status``), 3 other failure (e.g. a full disk).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from elvin import __version__
from elvin.cli_common import os_error
from elvin.federation.admission import admission_warnings
from elvin.federation.config import (
    FederationConfig,
    FederationConfigError,
    federation_from_dict,
    host_rules,
)
from elvin.federation.topology_file import (
    Topology,
    TopologyFileError,
    federation_config,
    load_topology,
    render_fragment,
)
from elvin.fileutil import atomic_write

EXIT_OK = 0
EXIT_INPUT = 1
EXIT_FAILURE = 3

PROG = "elvin-domain"


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Usage errors exit with status 1 (the suite's convention), not 2."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Check an event-domain topology file and write "
                     "each router's federation configuration.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    check = sub.add_parser("check", help="validate a topology file and print a summary")
    check.add_argument("topology", help="the topology file (TOML)")
    apply = sub.add_parser("apply", help="write each router's [federation] configuration")
    apply.add_argument("topology", help="the topology file (TOML)")
    apply.add_argument("--out", "-o", required=True, metavar="DIR",
                       help="directory for the <router>.toml fragments (created if missing)")
    return parser


def _filter_text(expr: str | None) -> str:
    return "everything" if expr is None else expr


def qos_meaning(cycles: str, diamonds: str) -> list[str]:
    """What the domain's QoS choices mean for its routers (``check`` says it,
    so that nobody has to know the routing to choose)."""
    lines = []
    for what, policy, alone in (("cycles", cycles, "a link that closes a loop"),
                                ("diamonds", diamonds, "a second path between two members")):
        if policy == "allow":
            lines.append(f"  {what} allowed: redundant paths. Every notification still "
                         "reaches every subscriber once (the routers forward it along the "
                         "shortest-path tree from where it entered), and when a router or "
                         "link dies the others route around it where another path "
                         "exists. Needs routing = \"trees\" (the default) on every "
                         "router; a router that does not take part (Avis, an older elvind, "
                         "routing = \"flood\") stays loop-free but may cause duplicates "
                         "when it is on a cycle next to another such router or cuts ours "
                         "apart.")
        else:
            lines.append(f"  {what} forbidden: {alone} is refused.")
    if cycles != "allow" and diamonds != "allow":
        lines.append("  One path between any two members: any router works (Avis and "
                     "older elvind too), but a dead router or link cuts the domain in two.")
    return [textwrap.fill(line, 88, subsequent_indent="    ") for line in lines]


def summary(topology: Topology) -> str:
    """The human-readable description ``check`` prints."""
    domain = topology.domain
    qos = domain.qos
    out = [f"{topology.path}: event domain {topology.name!r} is valid",
           f"QoS: cycles {qos.cycles}, diamonds {qos.diamonds}",
           *qos_meaning(qos.cycles, qos.diamonds),
           f"Members ({len(domain)}):"]
    # numbered from 1 in file order, as the errors number them ("routers #2")
    for number, member in enumerate(domain.members, 1):
        router = topology.routers[member.name]
        roles = [r for r, m in (("default supplier", domain.default_supplier),
                                ("default consumer", domain.default_consumer))
                 if m == member]
        line = f"  #{number:<3} {member.name}  {router.url}"
        if router.client_url:
            line += f"  clients {router.client_url}"
        if roles:
            line += f"  [{', '.join(roles)}]"
        out.append(line)
    out.append(f"Links ({len(domain.links)}):")
    if not domain.links:
        out.append("  (none)")
    for link in domain.links:
        line = f"  {link}"
        if link.outgoing is not None or link.incoming is not None:
            line += (f"  (outgoing: {_filter_text(link.outgoing)}; "
                     f"incoming: {_filter_text(link.incoming)})")
        out.append(line)
    out.append("Downstream (members each one's notifications can reach):")
    for member in domain.members:
        down = domain.downstream(member)
        out.append(f"  {member.name}: {', '.join(down) if down else '(none)'}")
    if qos.cycles == "allow":
        cycles = domain.cycles(limit=100)
        out.append(f"Cycles ({len(cycles)}{'+' if len(cycles) == 100 else ''}):")
        out.extend(f"  {' -> '.join((*c, c[0]))}" for c in cycles)
    if qos.diamonds == "allow":
        diamonds = domain.diamonds(limit=100)
        out.append(f"Diamonds ({len(diamonds)}{'+' if len(diamonds) == 100 else ''}):")
        for d in diamonds:
            out.append(f"  from {d.source} to {d.target}: "
                       + " | ".join(" -> ".join(p) for p in d.paths))
    return "\n".join(out)


def router_configs(topology: Topology) -> dict[str, FederationConfig]:
    """Each router's ``[federation]`` settings as its router will read them;
    ``TopologyFileError`` for a fragment the router would refuse (a router
    requiring authentication dialled by one without ``hosts``)."""
    out = {}
    for name in topology.routers:
        try:
            out[name] = federation_from_dict(federation_config(topology, name))
        except FederationConfigError as exc:
            entry = exc.key.split(", hosts")[0]
            problem = exc.problem
            if exc.key.endswith(", hosts") and "require_authenticated" in problem:
                index = int(entry.rsplit("#", 1)[1]) - 1
                peer = federation_config(topology, name)["accept"][index]["router"]
                problem = (f"it requires authentication, but router {peer!r}, which dials "
                           f"it, has no hosts (the names its certificate carries)")
            raise TopologyFileError(topology.path, f"[[routers]] {name!r}", problem) from None
    return out


def admission(topology: Topology) -> list[str]:
    """What ``check`` says about who may link to each router."""
    configs = router_configs(topology)
    out = ["Admission (who may dial in to each router):"]
    for name, config in configs.items():
        for spec in config.accept:
            rules = host_rules(spec.hosts)
            where = f"from {rules}" if rules else "from any address"
            auth = ", with a certificate naming one of them" \
                if config.authenticates(spec) else ""
            out.append(f"  {name}: accepts {spec.router!r} {where}{auth}")
    warnings = [f"  warning: router {name!r}: {w}" for name, config in configs.items()
                for w in admission_warnings(config, config.listen)]
    if len(out) == 1:
        out.append("  (no router accepts links)")
    return [*out, *[textwrap.fill(w, 88, subsequent_indent="    ") for w in warnings]]


def apply(topology: Topology, out_dir: Path) -> list[Path]:
    """Write every router's fragment into ``out_dir``; the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in topology.routers:
        path = out_dir / f"{name}.toml"
        atomic_write(path, render_fragment(topology, name))
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except SystemExit as exc:      # --help, --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK

    try:
        topology = load_topology(args.topology)
    except TopologyFileError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_INPUT

    try:
        who = admission(topology)
    except TopologyFileError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_INPUT
    if args.command == "check":
        print(summary(topology))
        print("\n".join(who))
        return EXIT_OK

    out_dir = Path(args.out)
    try:
        written = apply(topology, out_dir)
    except OSError as exc:
        return os_error("write to", exc, out_dir).report(PROG)
    domain = topology.domain
    for path in written:
        name = path.stem
        count = sum(1 for link in domain.links if name in (link.source.name,
                                                            link.target.name))
        print(f"wrote {path} ({count} link{'s' if count != 1 else ''})")
    print(f"{len(written)} router configuration(s) written for event domain "
          f"{topology.name!r}. Install each as a fragment its router's elvind includes "
          "(include = [\"/etc/elvin/elvind.d/*.toml\"] in its configuration), then "
          "'elvind reload' (or SIGHUP) applies it without a restart.")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
