"""``elvind``'s command line: its flags, and the configuration they say.

``build_parser`` declares the flags; ``make_config`` reads ``--config`` (and
what it includes) and lays the flags over it, the one way every part of
elvind (running, ``--check-config``, ``reload``) turns a command line into a
``RouterConfig``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from elvin._version import __version__
from elvin.cli_common import ToolParser, add_log_level_argument
from elvin.config_file import collecting_problems
from elvin.router.config import RouterConfig, load_config

__all__ = ["VERSION", "apply_federation_flags", "build_parser", "make_config"]

VERSION = __version__


def build_parser() -> argparse.ArgumentParser:
    parser = ToolParser(
        prog="elvind",
        description="Elvin 4 router: content-based publish/subscribe over the Elvin "
                    "client protocol 4.0 (XDR over TCP or TLS).",
        epilog="Settings come from --config FILE (TOML, keys as the flags: listen, "
               "log-level, log-file, tls-cert, tls-key, stats-interval, [options], "
               "include...) and are overridden by flags. Other commands: 'elvind status' "
               "(what the running router does), 'elvind reload' (SIGHUP, with its "
               "verdict). Stops cleanly on SIGTERM/SIGINT; SIGHUP reloads the "
               "configuration and reopens the log file, SIGUSR1 only reopens it.")
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file")
    parser.add_argument("--check-config", action="store_true",
                        help="check the configuration (file and flags) as a start would, "
                             "without listening or contacting anyone; print 'ok' or every "
                             "problem, exit 0 or 1")
    parser.add_argument("--listen", metavar="URI", action="append",
                        help="listen on this Elvin URI (repeatable; default "
                             "elvin://127.0.0.1:2917), e.g. elvin://0.0.0.0:2917 or "
                             "elvin:4.0/ssl,none,xdr/0.0.0.0:2918")
    add_log_level_argument(parser, None, "info")
    parser.add_argument("--log-file", metavar="FILE", help="log here instead of stderr")
    parser.add_argument("--tls-cert", metavar="FILE",
                        help="PEM certificate (chain) for ssl listen URIs")
    parser.add_argument("--tls-key", metavar="FILE", help="PEM private key for ssl URIs")
    parser.add_argument("--stats-interval", metavar="SECONDS", type=float,
                        help="seconds between Elvin-Router-Stats notifications (default 5)")
    parser.add_argument("--status-file", metavar="FILE",
                        help="where to keep the status 'elvind status' reads (default "
                             "/run/elvind/status-PORT.json for root and the systemd unit, "
                             "else $XDG_RUNTIME_DIR/elvind/status-PORT.json; PORT is the "
                             "first listen port, so two routers never share it)")
    parser.add_argument("--metrics", metavar="HOST:PORT",
                        help="serve the router's figures at http://HOST:PORT/metrics in the "
                             "Prometheus text format, e.g. 127.0.0.1:9917")
    parser.add_argument("--archive", metavar="DIR",
                        help="write every routed notification to a traffic archive "
                             "(Parquet, partitioned by hour) in DIR, for elvin-pipeline; "
                             "notifications sent for key holders only are archived "
                             "without their attributes")
    parser.add_argument("--archive-private", dest="archive_private", action="store_true",
                        default=None,
                        help="archive the attributes of notifications sent for key holders "
                             "only too (deliver_insecure false): whoever can read DIR "
                             "reads them")
    parser.add_argument("--no-quench", dest="quench", action="store_false", default=None,
                        help="emulate a router without quench (protocol subset C), as "
                             "Avis is: quench requests get Nack NOT_IMPL (2007) \"Quench "
                             "not supported\"; for testing clients' fallbacks")
    discovery = parser.add_argument_group(
        "discovery and redirection",
        "Router discovery (SvrRqst/SvrAdvt over UDP, on by default) advertises the "
        "listen URIs; clients beyond --max-connections are redirected (Disconn reason 2).")
    discovery.add_argument("--no-discovery", dest="discovery", action="store_false",
                           default=None, help="do not answer router discovery")
    discovery.add_argument("--discovery-scope", metavar="NAME",
                           help="scope name to advertise (default: none)")
    discovery.add_argument("--no-discovery-default", dest="discovery_default",
                           action="store_false", default=None,
                           help="do not advertise as a default router (only clients "
                                "asking for --discovery-scope find it)")
    discovery.add_argument("--discovery-address", metavar="ADDRESS",
                           help="multicast group, or a unicast address to answer on "
                                "(default 224.4.0.1)")
    discovery.add_argument("--discovery-port", metavar="PORT", type=int,
                           help="UDP port (default 2917)")
    discovery.add_argument("--discovery-interface", metavar="ADDRESS",
                           help="local IPv4 address to multicast on (default: the system's)")
    discovery.add_argument("--max-connections", metavar="N", type=int,
                           help="connected clients beyond N are redirected to --redirect-to, "
                                "or refused without it (default 0: no limit)")
    discovery.add_argument("--redirect-to", metavar="URI",
                           help="where clients beyond --max-connections are sent")
    mobility = parser.add_argument_group(
        "mobility", "A mobility proxy (elvin.mobility) buffers for clients that move out "
        "and hands the buffer over when they move in, here or at another router.")
    mobility.add_argument("--mobility", dest="mobility", action="store_true", default=None,
                          help="run a mobility proxy inside the router")
    mobility.add_argument("--mobility-quota", metavar="N", type=int,
                          help="most notifications buffered per client (default 10000)")
    mobility.add_argument("--mobility-expiry", metavar="SECONDS", type=float,
                          help="seconds an unclaimed buffer is kept (default 3600)")
    mobility.add_argument("--mobility-key-file", metavar="FILE",
                          help="the proxy's raw private key (the file's bytes, as "
                               "elvin-mobility-proxy --key-file): a stable public key "
                               "that clients can pin (default: a new random key at "
                               "each start)")
    state = parser.add_argument_group(
        "state", "What must outlive the router (a restart, a crash): the mobility "
        "proxy's tickets, subscriptions and buffers, in SQLite.")
    state.add_argument("--state-dir", metavar="DIR",
                       help="keep the router's state in DIR (created, mode 0700; one "
                            "router per DIR); without it mobility buffers are in memory "
                            "only")
    state.add_argument("--state-reset", action="store_true", default=None,
                       help="move the state found in --state-dir aside (renamed, never "
                            "deleted) and start with none: for a state file that cannot "
                            "be read")
    federation = parser.add_argument_group(
        "federation", "Links to other routers (Elvin Federation Protocol, ewaf://host:port, "
        "default port 2916); the [federation] table of --config (as written by "
        "elvin-domain apply) sets filters per link. SIGHUP applies a changed table.")
    federation.add_argument("--federation-listen", metavar="URI", action="append",
                            help="accept federation links on this ewaf URI (repeatable)")
    federation.add_argument("--federation-connect", metavar="URI", action="append",
                            help="link to the router at this ewaf URI, everything allowed "
                                 "both ways (repeatable)")
    federation.add_argument("--federation-domain", metavar="NAME",
                            help="this router's federation domain (unique; default: host "
                                 "name and process)")
    federation.add_argument("--federation-accept-any", action="store_true", default=None,
                            help="accept links from routers not listed in [federation] "
                                 "accept (everything allowed both ways)")
    federation.add_argument("--federation-tls-ca", metavar="FILE",
                            help="PEM CA certificate(s) to verify routers dialled over TLS "
                                 "(ewaf:1.0/ssl,none,xdr/host:port); default: the system's "
                                 "trust store")
    parser.add_argument("--version", action="version", version=f"elvind {VERSION}")
    return parser


def apply_federation_flags(config: RouterConfig, args: argparse.Namespace) -> RouterConfig:
    """The --federation-* flags over the file's [federation] table."""
    listen = getattr(args, "federation_listen", None)
    connect = getattr(args, "federation_connect", None)
    domain = getattr(args, "federation_domain", None)
    accept_any = getattr(args, "federation_accept_any", None)
    tls_ca = getattr(args, "federation_tls_ca", None)
    if not (listen or connect or domain or accept_any or tls_ca):
        return config
    import dataclasses

    from elvin.federation.config import ConnectSpec, FederationConfig

    fed = dataclasses.replace(config.federation) if config.federation else FederationConfig()
    if listen:
        fed.listen = list(listen)
    if connect:
        fed.connect = list(fed.connect) + [ConnectSpec(url) for url in connect]
    if domain:
        fed.router_domain = domain
    if accept_any:
        fed.accept_any = True
    if tls_ca:
        fed.tls_ca = tls_ca
    config.federation = fed
    return config


def make_config(args: argparse.Namespace,
                problems: list[str] | None = None) -> RouterConfig:
    """The configuration ``args`` say: ``--config`` (and what it includes),
    then the flags over it. ``ConfigError`` for the first problem, or with a
    ``problems`` list every problem appended there (``--check-config``)."""
    path = getattr(args, "config", None)
    config = load_config(path, problems=problems) if path else RouterConfig()
    if getattr(args, "listen", None):
        config.listen = list(args.listen)
    for name in _FLAG_SETTINGS:
        value = getattr(args, name, None)
        if value is not None:
            setattr(config, name, value)
    source = f"{path} + command line" if path else "command line"
    with collecting_problems(problems):
        apply_federation_flags(config, args)
    if problems is not None:
        problems.extend(config.problems(source, _text_of(path)))
        return config
    return config.validate(source, _text_of(path))


#: flags that set the RouterConfig attribute of the same name
_FLAG_SETTINGS = ("log_level", "log_file", "tls_cert", "tls_key", "stats_interval",
                  "archive", "discovery", "discovery_scope", "discovery_default",
                  "discovery_address", "discovery_port", "discovery_interface",
                  "max_connections", "redirect_to", "mobility", "mobility_quota",
                  "mobility_expiry", "mobility_key_file", "quench", "status_file", "metrics",
                  "state_dir", "state_reset", "archive_private")


def _text_of(path: str | None) -> str:
    """The main file's text, for pointing at a key's line (empty if unread)."""
    if not path:
        return ""
    try:
        return Path(path).expanduser().read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
