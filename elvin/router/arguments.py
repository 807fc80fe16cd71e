"""``elvind``'s command line: its flags, and the configuration they say.

``build_parser`` adds the flags the settings declare (``RouterConfig``'s
fields, ``elvin.router.config.SETTINGS``) and the ``--federation-*`` ones
that fill the ``[federation]`` table; ``make_config`` reads ``--config`` (and
what it includes) and lays the flags over it, the one way every part of
elvind (running, ``--check-config``, ``reload``) turns a command line into a
``RouterConfig``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from elvin._version import __version__
from elvin.cli_common import ToolParser
from elvin.config_file import collecting_problems
from elvin.router.config import (
    DISCOVERY,
    FEDERATION,
    MOBILITY,
    SETTINGS,
    STATE,
    RouterConfig,
    load_config,
)

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
    SETTINGS.add_arguments(parser)
    for section in (DISCOVERY, MOBILITY, STATE):
        SETTINGS.add_arguments(parser, section)
    federation = SETTINGS.add_arguments(parser, FEDERATION)
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
    SETTINGS.apply_args(config, args)
    source = f"{path} + command line" if path else "command line"
    with collecting_problems(problems):
        apply_federation_flags(config, args)
    if problems is not None:
        problems.extend(config.problems(source, _text_of(path)))
        return config
    return config.validate(source, _text_of(path))


def _text_of(path: str | None) -> str:
    """The main file's text, for pointing at a key's line (empty if unread)."""
    if not path:
        return ""
    try:
        return Path(path).expanduser().read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
