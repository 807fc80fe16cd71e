"""The command line the suite's apps share (biff, console, tickertape,
newswatcher, filewatcher): the same options spelt the same way, and the
same first steps -- read the config file, choose the router.

Each app adds its own options to the parser and does its own work after
``configured_router``; what is alike lives here, so that ``--config`` or
``--elvin`` cannot mean one thing in one app and another in the next.
Core only (no Qt): the daemons use it too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from elvin.cli_common import ToolParser, add_log_level_argument, setup_logging
from elvin.config_file import load_named
from elvin.router_url import RouterChoice, add_router_argument, choose_router_url

__all__ = ["add_config_argument", "app_parser", "configured_router", "start_app"]


def add_config_argument(parser: argparse.ArgumentParser, default: str | None = None,
                        help: str = "TOML config file") -> None:
    """``--config FILE``; ``default`` says which file is read without it."""
    parser.add_argument("--config", metavar="FILE",
                        help=f"{help} (default: {default})" if default else help)


def app_parser(prog: str, version: str, description: str, *, config_default: str | None,
               log_level: str | None = "warning", shown_log_level: str | None = None,
               discover: bool = True, screenshot: bool = False, **kwargs) -> ToolParser:
    """A parser with the options every app has: ``-e/--elvin`` (by the
    suite's rule, ``elvin.router_url``), ``--config``, ``--log-level`` (any
    case; ``log_level`` None leaves it to the config file, which applies
    ``shown_log_level``), ``--version``, and for a desktop app
    (``screenshot``) ``--screenshot FILE``. Usage errors exit 1."""
    parser = ToolParser(prog=prog, description=description, **kwargs)
    add_router_argument(parser, config=True, discover=discover, several=True)
    add_config_argument(parser, config_default)
    if screenshot:
        parser.add_argument("--screenshot", metavar="FILE",
                            help="render the main window to a PNG after startup, then exit")
        parser.add_argument("--new-instance", action="store_true",
                            help="start even if this app already runs for this user and "
                                 "router (by default that one's window is brought forward)")
    add_log_level_argument(parser, log_level, shown_log_level)
    parser.add_argument("--version", action="version", version=f"{prog} {version}")
    return parser


class _Configured(Protocol):
    """What an app's config object has: the file's ``elvin`` (one router
    URL, or a list: failover) and the file; maybe a discovery ``scope``."""

    elvin: str | list[str] | None
    path: Path | None


C = TypeVar("C", bound=_Configured)


def configured_router(load: Callable[..., C], args: argparse.Namespace, *,
                      discover: bool | Callable[[C], bool] = True) -> tuple[C, RouterChoice]:
    """What an app reads first: its config file (``args.config``, which must
    exist if named; ``load(path, must_exist=...)``) and its router
    (``args.elvin`` by the rule, the file's ``elvin`` in its place, discovery
    when ``discover`` -- or ``discover(config)`` -- or the file's ``scope``
    and nothing names one; ``choice.routers`` is one URL or the failover
    list). ``ToolError`` (usage) naming the file, or the bad URL and its
    source."""
    config = load_named(load, args.config)
    choice = choose_router_url(args.elvin, config.elvin, config_file=config.path,
                               discover=discover(config) if callable(discover) else discover,
                               scope=getattr(config, "scope", None) or None, several=True)
    return config, choice


def start_app(args: argparse.Namespace, load: Callable[..., C], *,
              discover: bool | Callable[[C], bool] = True) -> tuple[C, RouterChoice]:
    """A desktop app's first steps: log to stderr at ``--log-level``, then
    ``configured_router``."""
    setup_logging(args.log_level)
    return configured_router(load, args, discover=discover)
