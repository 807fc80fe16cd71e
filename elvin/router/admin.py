"""``elvind``'s commands for admins, beside running the router:
``--check-config`` (what a start would meet, found without starting) and
``elvind status`` / ``elvind reload`` (through the status file the running
router keeps: ``elvin.router.status``; the verdicts: ``elvin.daemon.daemon_control``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from elvin.cli_common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, ToolError, ToolParser, fail
from elvin.daemon.daemon_control import ask_reload, other_instance, show_status
from elvin.extras import ARCHIVE_MODULES, missing_extra_message
from elvin.router.arguments import make_config
from elvin.router.config import ConfigError, RouterConfig, load_config

__all__ = ["check_config", "check_instance", "start_problems", "status_main", "target_config"]


def start_problems(config: RouterConfig) -> tuple[list[str], list[str]]:
    """What only starting would find, found without starting: ``(errors,
    warnings)``. Opens (and closes) the log file, the status file's
    directory, the state and archive directories as a start does; loads
    every TLS certificate and key and checks their dates and that each key
    is its certificate's (``elvin.certcheck``); a missing extra. Binds
    nothing and contacts no one (``--check-config``)."""
    from elvin.certcheck import certificate_findings
    from elvin.fileutil import files_problems, open_problem
    from elvin.router.status import status_file_for

    errors, warnings, _ = certificate_findings(config)
    paths = [("log file", config.log_file, "append"),
             ("status file", config.status_file, "replace"),
             ("state directory", config.state_dir, "directory"),
             ("archive directory", config.archive, "directory")]
    for what, path, how in paths:
        problem = open_problem(path, how) if path else None
        if problem:
            errors.append(f"cannot write the {what} {path}: {problem}")
        elif path and what == "state directory":
            errors.extend(f"cannot use the state file {file}: {reason}"
                          for file, reason in files_problems(path))
    if not config.status_file:
        # the default status file is a convenience (a start only warns about it)
        path = status_file_for(config)
        problem = open_problem(path, "replace")
        if problem:
            warnings.append(f"cannot write the status file {path}: {problem} ('elvind "
                            "status' will not find this router; set status-file)")
    if config.archive is not None:
        missing = missing_extra_message("elvind --archive", "pipeline", ARCHIVE_MODULES)
        if missing:
            errors.append(missing)
    return errors, warnings


def check_config(args: argparse.Namespace) -> int:
    """``--check-config``: every problem a start would meet, and every
    warning it would log, or ``ok``. Exit 1 when there is a problem (a start
    would exit 1 too)."""
    problems: list[str] = []
    try:
        config = make_config(args, problems)
    except ConfigError as exc:      # the file itself cannot be read
        problems.extend(exc.problems)
        config = None
    warnings: list[str] = []
    if config is not None:
        errors, warnings = start_problems(config)
        problems.extend(errors)
        # valid, but open wider than an admin may mean (the router logs the same at start)
        with contextlib.suppress(Exception):     # a federation section with errors
            warnings.extend(_admission_warnings(config))
    what = " + ".join(config.sources) if config is not None and config.sources else \
        (args.config or "the command line")
    for warning in dict.fromkeys(warnings):
        print(f"elvind: warning: {warning}", file=sys.stderr)
    if problems:
        for problem in dict.fromkeys(problems):
            print(f"elvind: {problem}", file=sys.stderr)
        shown = len(dict.fromkeys(problems))
        print(f"elvind: {what}: {shown} problem(s)"
              + (f", {len(dict.fromkeys(warnings))} warning(s)" if warnings else ""),
              file=sys.stderr)
        return EXIT_USAGE
    print(f"elvind: {what}: ok" + (f" ({len(dict.fromkeys(warnings))} warning(s))"
                                   if warnings else ""))
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
                             "else /run/elvind/status-PORT.json for root, PORT the port "
                             "--config listens on, 2917 without --config)")
    parser.add_argument("--config", metavar="FILE",
                        help="the router running with this configuration file (its "
                             "status-file or listen port says which)")
    if command == "status":
        parser.add_argument("--json", action="store_true", help="print the raw JSON")
    return parser


def _status_path(args: argparse.Namespace) -> str:
    """The status file of the router ``args`` name: ``--status-file``; else
    the one the ``--config`` file gives it (its ``status-file``, else the
    default for its listen port, else the status file of a router running
    with that very file: its listen port may have been edited since); else
    the default router's. ``ToolError`` (usage) when the file cannot tell
    which router it configures: then the command acts on none."""
    from elvin.router.status import default_status_file, status_file_for

    if args.status_file:
        return str(args.status_file)
    if not args.config:
        return default_status_file()
    config = target_config(args.config)
    path = status_file_for(config)
    if config.status_file or os.path.exists(path):
        return path
    return _status_running_with(args.config) or path


def target_config(path: str) -> RouterConfig:
    """What ``path`` says as far as it can be read: a file with a mistake
    in one key still names its router by the others (and ``reload`` must
    reach that router to hear it refuse the file); ``ToolError`` when the
    file itself cannot be read or is not TOML."""
    problems: list[str] = []
    config = load_config(path, problems=problems)
    if not config.sources:
        reason = problems[0] if problems else f"{path}: cannot be read"
        raise ToolError(f"cannot tell which router {path} configures: {reason} "
                        "(fix it, or give --status-file)", EXIT_USAGE)
    return config


def _status_running_with(config_path: str) -> str | None:
    """The default status file of the running router whose ``config`` is
    ``config_path``, if there is exactly one."""
    from elvin.router.status import StatusError, read_status, status_files

    found = []
    for path in status_files():
        try:
            data = read_status(path)
        except StatusError:
            continue
        if data["running"] and _same_file(data.get("config"), config_path):
            found.append(path)
    return found[0] if len(found) == 1 else None


def _same_file(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and a is not None and b is not None \
        and os.path.realpath(a) == os.path.realpath(b)


def check_instance(data: dict[str, Any], config_path: str | None, path: str) -> None:
    """``ToolError`` (usage) when the status at ``path`` is of a router that
    runs with another configuration than ``config_path``: the command must
    not act on a router it was not pointed at (``daemon_control.other_instance``)."""
    problem = other_instance(data, config_path, path, "elvind")
    if problem:
        raise ToolError(problem.replace("(give the status of the elvind you mean)",
                                        "(give the --status-file of the router you mean)"),
                        EXIT_USAGE)


def status_main(command: str, argv: Sequence[str]) -> int:
    """``elvind status`` and ``elvind reload``."""
    from elvin.router.status import StatusError, format_status, read_status

    prog = f"elvind {command}"
    args = build_status_parser(command).parse_args(argv)
    try:
        path = _status_path(args)
        data = read_status(path)
        if data["running"]:
            check_instance(data, args.config, path)
    except ToolError as exc:
        return exc.report("elvind")
    except StatusError as exc:
        return fail(prog, str(exc), EXIT_FAILURE)
    if command == "reload":
        def current() -> dict[str, Any]:
            data = read_status(path)
            if data["running"]:
                check_instance(data, args.config, path)
            return data
        return ask_reload(prog, current)
    return show_status(data, args.json, format_status)
