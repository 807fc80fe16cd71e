"""``elvind``'s commands for admins, beside running the router:
``--check-config`` (what a start would meet, found without starting) and
``elvind status`` / ``elvind reload`` (through the status file the running
router keeps: ``elvin.router.status``; the verdicts: ``elvin.daemon_control``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from elvin.cli_common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, ToolError, ToolParser, fail
from elvin.config_file import raw_setting
from elvin.daemon_control import ask_reload, show_status
from elvin.extras import ARCHIVE_MODULES, missing_extra_message
from elvin.router.arguments import make_config
from elvin.router.config import ConfigError, RouterConfig

__all__ = ["check_config", "start_problems", "status_main"]


def start_problems(config: RouterConfig) -> list[str]:
    """What only starting would find, found without starting: certificates
    that do not load, files and directories that cannot be written, a
    missing extra. Binds nothing and contacts no one (``--check-config``)."""
    import ssl

    from elvin.fileutil import write_problem

    found = []
    if config.tls_cert and config.tls_key:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                config.tls_cert, config.tls_key)
        except (OSError, ssl.SSLError) as exc:
            found.append(f"cannot load TLS certificate {config.tls_cert!r} / key "
                         f"{config.tls_key!r}: {exc}")
    fed = config.federation
    if fed is not None and fed.tls_ca:
        try:
            ssl.create_default_context(cafile=fed.tls_ca)
        except (OSError, ssl.SSLError) as exc:
            found.append(f"federation.tls_ca {fed.tls_ca!r}: cannot load: {exc}")
    # the default status file is a convenience (a start only warns about it);
    # one the configuration names must work
    paths = [("log file", config.log_file, {}),
             ("status file", config.status_file, {"replace": True}),
             ("archive directory", config.archive, {"directory": True})]
    for what, path, how in paths:
        problem = write_problem(path, **how) if path else None
        if problem:
            found.append(f"cannot write the {what} {path}: {problem}")
    if config.archive is not None:
        missing = missing_extra_message("elvind --archive", "pipeline", ARCHIVE_MODULES)
        if missing:
            found.append(missing)
    return found


def check_config(args: argparse.Namespace) -> int:
    """``--check-config``: every problem a start would meet, or ``ok``."""
    problems: list[str] = []
    try:
        config = make_config(args, problems)
    except ConfigError as exc:      # the file itself cannot be read
        problems.append(str(exc))
        config = None
    if config is not None and not problems:
        problems.extend(start_problems(config))
    what = " + ".join(config.sources) if config is not None and config.sources else \
        (args.config or "the command line")
    if problems:
        for problem in dict.fromkeys(problems):
            print(f"elvind: {problem}", file=sys.stderr)
        print(f"elvind: {what}: {len(problems)} problem(s)", file=sys.stderr)
        return EXIT_USAGE
    # valid, but open wider than an admin may mean (the router logs the same at start)
    for warning in _admission_warnings(config):
        print(f"elvind: warning: {warning}", file=sys.stderr)
    print(f"elvind: {what}: ok")
    return EXIT_OK


def _admission_warnings(config: Any) -> list[str]:
    """Federation doors that accept a claimed domain from any address
    (``elvin.federation.admission``), as ``elvin-domain check`` says them."""
    federation = getattr(config, "federation", None)
    if federation is None or not federation.enabled:
        return []
    from elvin.federation.admission import admission_warnings
    return admission_warnings(federation, federation.listen)


def build_status_parser(command: str) -> argparse.ArgumentParser:
    what = {"status": "Print what the running elvind is doing: clients, subscriptions, "
                      "federation links with their state and last error, mobility and "
                      "archive (read from its status file).",
            "reload": "Make the running elvind re-read its configuration (SIGHUP) and "
                      "print its verdict: exit 0 when applied, 1 when refused."}[command]
    parser = ToolParser(prog=f"elvind {command}", description=what)
    parser.add_argument("--status-file", metavar="FILE",
                        help="the router's status file (default: status-file in --config, "
                             "else /run/elvind/status.json for root)")
    parser.add_argument("--config", metavar="FILE",
                        help="take the status file's path from this configuration file")
    if command == "status":
        parser.add_argument("--json", action="store_true", help="print the raw JSON")
    return parser


def _status_path(args: argparse.Namespace) -> str:
    from elvin.router.status import default_status_file

    if args.status_file:
        return args.status_file
    # only this key: a file being edited may be wrong elsewhere, and then
    # 'elvind reload' must still reach the router to hear it refuse the file
    named = raw_setting(args.config, "status-file")
    return named if isinstance(named, str) else default_status_file()


def status_main(command: str, argv: Sequence[str]) -> int:
    """``elvind status`` and ``elvind reload``."""
    from elvin.router.status import StatusError, format_status, read_status

    prog = f"elvind {command}"
    args = build_status_parser(command).parse_args(argv)
    try:
        path = _status_path(args)
        data = read_status(path)
    except ToolError as exc:
        return exc.report("elvind")
    except StatusError as exc:
        return fail(prog, str(exc), EXIT_FAILURE)
    if command == "reload":
        return ask_reload(prog, lambda: read_status(path))
    return show_status(data, args.json, format_status)
