"""``filewatcher``: the daemon, and ``filewatcher status``.

    filewatcher --root /srv/www [--root DIR ...] [--elvin URL] [--config FILE]
                [--unbounded ignore|roots] [--status-file FILE]
                [--log-level LEVEL] [--log-file FILE] [--foreground]
    filewatcher status [--status-file FILE | --config FILE] [--json]
    filewatcher check  [--config FILE] [--root DIR ...] [flags]
    filewatcher reload [--status-file FILE | --config FILE]

The daemon always runs in the foreground (``--foreground`` is accepted for
habit's sake); systemd (packaging/systemd/filewatcher.service) or a shell
puts it in the background. SIGHUP re-reads the configuration (roots and
every other setting but the router URL and the status file apply at once)
and reopens the log file; SIGUSR1 only reopens it (``elvin.daemon.daemon_control``).
``check`` validates the configuration as a start would, without connecting;
``reload`` sends SIGHUP and prints the daemon's verdict.

Exit codes: 0 after a clean stop (SIGTERM/SIGINT), 1 for a usage or
configuration error (including a status or log file, or a root, that cannot
be used: ``cli_common.os_error_status``), 2 when the router cannot be
reached at start (or the connection is closed for good), 3 for any other
failure; ``status`` exits 0 when the daemon is running, 3 when it is not;
``check`` 0 or 1; ``reload`` 0 when applied, 1 when refused, 3 when the
daemon cannot be asked.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Sequence

from elvin_apps.filewatcher import __version__
from elvin_apps.filewatcher.config import (
    SETTINGS,
    Config,
    ConfigError,
    apply_overrides,
    default_status_file,
    load_config,
)
from elvin_apps.filewatcher.status import StatusError, format_status, read_status

from elvin import cli_common
from elvin.app_cli import add_config_argument, app_parser
from elvin.cli_common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, ToolError, ToolParser
from elvin.config_file import raw_setting, read_toml
from elvin.daemon import sdnotify
from elvin.daemon.daemon_control import (
    DaemonSignals,
    ask_reload,
    other_instance,
    reload_logging,
    reload_verdict,
    show_status,
)
from elvin.fileutil import open_problem
from elvin.router_url import choose_router_url
from elvin.tools import CONNECT_ERRORS, connect_failure

PROG = "filewatcher"

log = logging.getLogger("elvin_apps.filewatcher")


def build_parser() -> argparse.ArgumentParser:
    parser = app_parser(
        PROG, __version__,
        "Emit an Elvin notification when a watched file changes. Watches only the paths "
        "that subscriptions ask for (File-Path == ..., begins-with, wildcard, regex), and "
        "only inside the configured roots.",
        config_default=None, log_level=None, shown_log_level="info",
        epilog="'filewatcher status' prints what the running daemon watches and why; "
               "'filewatcher check' checks the configuration; 'filewatcher reload' "
               "re-reads it (SIGHUP) and prints the verdict. "
               "Settings: --config FILE (TOML; keys as the flags: roots, elvin, unbounded, "
               "debounce, max-delay, poll-interval, max-watches, status-file, log-level, "
               "log-file, ...); flags override it.")
    SETTINGS.add_arguments(parser)
    parser.add_argument("--foreground", action="store_true",
                        help="run in the foreground (always the case; for systemd and habit)")
    return parser


def build_status_parser(command: str = "status") -> argparse.ArgumentParser:
    what = {"status": "Print what the running filewatcher watches, and for which "
                      "subscriptions (read from its status file).",
            "reload": "Make the running filewatcher re-read its configuration (SIGHUP) "
                      "and print its verdict: exit 0 when applied, 1 when refused."}[command]
    parser = ToolParser(prog=f"filewatcher {command}", description=what)
    parser.add_argument("--status-file", metavar="FILE", help="the daemon's status file")
    add_config_argument(parser, help="take the status file's path from this config file")
    if command == "status":
        parser.add_argument("--json", action="store_true", help="print the raw JSON")
    return parser


def make_config(args: argparse.Namespace, problems: list[str] | None = None) -> Config:
    """The file's settings with the flags over them, validated; with a
    ``problems`` list, the file's wrong keys go there (``check``)."""
    config = load_config(args.config, problems)
    config = apply_overrides(config, **SETTINGS.given(args), log_level=args.log_level)
    return config.validate()


def setup_logging(config: Config) -> None:
    """The suite's log set-up, watchdog's chatter kept out unless debugging."""
    cli_common.setup_logging(config.log_level, config.log_file, prog=PROG)
    if config.log_level != "debug":
        logging.getLogger("watchdog").setLevel(logging.WARNING)


def start_problems(config: Config) -> list[str]:
    """What would stop a start, found without starting (``check``, and
    ``main`` before connecting): a status or log file that cannot be
    written, tried as the start uses them (``fileutil.open_problem``). Roots
    that cannot be read are warnings (``root_warnings``)."""
    found = []
    for what, path, how in (("status file", config.status_file, "replace"),
                            ("log file", config.log_file, "append")):
        problem = open_problem(path, how) if path else None
        if problem:
            found.append(f"cannot write the {what} {path}: {problem}")
    return found


def root_warnings(config: Config) -> list[str]:
    from elvin_apps.filewatcher.report import unreadable_roots

    return [f"root {root} is not readable ({problem}): subscriptions under it cannot be "
            "watched" for root, problem in unreadable_roots(config.roots).items()]


async def run(config: Config, url: str | list[str], args: argparse.Namespace | None = None) -> int:
    from elvin_apps.filewatcher.daemon import FileWatcher

    for warning in root_warnings(config):
        log.warning("%s", warning)
    watcher = FileWatcher(config, url)
    try:
        await watcher.start()
    except CONNECT_ERRORS as exc:
        # unreachable or lost (2), or a request the router refused, e.g. a
        # Nack to ConnRqst (3): one line either way, never a traceback
        return connect_failure(url, exc, f"cannot reach the router at {url}: ") \
            .report("filewatcher")
    loop = asyncio.get_running_loop()

    def reload() -> tuple[bool, str]:
        return reload_watcher(watcher, args)

    signals = DaemonSignals(loop, log, stop=lambda _name: watcher.request_stop(EXIT_OK),
                            reload=reload if args is not None else None,
                            record=watcher.reload_record,
                            on_reloaded=watcher.reporter.write)
    signals.install()
    line = (f"filewatcher {__version__} watching for subscriptions at {watcher.conn.url}; "
            f"status in {config.status_file}")
    print(line, file=sys.stderr, flush=True)
    sdnotify.ready(line)
    try:
        code = await watcher.wait_stopped()
    finally:
        await watcher.close()
        await signals.close()     # after: a second SIGTERM while closing must not kill
    return code


def reload_watcher(watcher, args: argparse.Namespace) -> tuple[bool, str]:
    """SIGHUP: the configuration again (file and flags, checked whole), then
    what changed applied to the running daemon. A bad file changes nothing."""
    try:
        new = make_config(args)
    except ConfigError as exc:
        return False, str(exc)
    old = watcher.config
    applied: list[str] = []
    failed: list[str] = []
    reload_logging(PROG, (old.log_level, old.log_file), (new.log_level, new.log_file),
                   applied, failed)
    for warning in root_warnings(new):
        log.warning("%s", warning)
    changed, restart = watcher.reload(new)
    return reload_verdict(applied + changed, restart, failed)


def status_path(args: argparse.Namespace) -> str:
    """``--status-file``, else the config file's ``status-file`` (read alone:
    ``reload`` must reach the daemon even when the rest of the file is the
    broken part), else the default. ``ToolError`` (usage) for a config
    file that is not TOML: it cannot say which daemon it configures."""
    if args.status_file:
        return args.status_file
    if args.config:
        try:
            read_toml(args.config)
        except ConfigError as exc:
            raise ToolError(f"cannot tell which filewatcher {args.config} configures: {exc} "
                            "(fix it, or give --status-file)") from None
    named = raw_setting(args.config, "status-file")
    return named if isinstance(named, str) and named else default_status_file()


def _of_this_config(data: dict, args: argparse.Namespace, path: str) -> dict:
    """``data``, or ``ToolError`` (usage) when it is the status of a
    filewatcher running with another config file than ``--config``."""
    problem = other_instance(data, args.config, path, PROG)
    if problem:
        raise ToolError(problem)
    return data


def _status_owner(path: str) -> int | None:
    """The pid of another running filewatcher whose status is at ``path``."""
    try:
        data = read_status(path)
    except StatusError:
        return None
    pid = data.get("pid")
    return pid if data.get("running") and pid != os.getpid() else None


def check_main(argv: Sequence[str]) -> int:
    """``filewatcher check``: the configuration as a start would see it."""
    args = build_parser().parse_args(argv)
    problems: list[str] = []
    config: Config | None = None
    try:
        config = make_config(args, problems)
    except ConfigError as exc:
        problems.extend(exc.problems)
    warnings: list[str] = []
    if config is not None:
        problems.extend(start_problems(config))
        warnings = root_warnings(config)
    elif args.config or args.status_file or args.log_file:
        # the settings that did load still name files a start would open
        with contextlib.suppress(ConfigError):
            partial = apply_overrides(load_config(args.config, []),
                                      status_file=args.status_file, log_file=args.log_file)
            problems.extend(start_problems(partial))
    for warning in warnings:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    for problem in dict.fromkeys(problems):
        print(f"{PROG}: {problem}", file=sys.stderr)
    where = args.config or "command line"
    if problems:
        print(f"{PROG}: {where}: {len(dict.fromkeys(problems))} problem(s)", file=sys.stderr)
        return EXIT_USAGE
    print(f"{PROG}: {where}: ok")
    return EXIT_OK


def status_main(argv: Sequence[str], command: str = "status") -> int:
    args = build_status_parser(command).parse_args(argv)
    try:
        path = status_path(args)
        data = _of_this_config(read_status(path), args, path)
    except ToolError as exc:
        return exc.report(PROG)
    except StatusError as exc:
        return cli_common.fail(f"filewatcher {command}", str(exc), EXIT_FAILURE)
    if command == "reload":
        return ask_reload("filewatcher reload",
                          lambda: _of_this_config(read_status(path), args, path))
    return show_status(data, args.json, format_status)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("status", "reload"):
        return status_main(argv[1:], argv[0])
    if argv and argv[0] == "check":
        return check_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        config = make_config(args)
        url = choose_router_url(args.elvin, config.elvin, config_file=args.config,
                                discover=True, what="router URL",
                                scope=config.scope or None,
                                several=True).routers   # a list: failover
    except ConfigError as exc:
        print(f"filewatcher: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ToolError as exc:
        return exc.report(PROG)
    try:
        setup_logging(config)
    except OSError as exc:
        return cli_common.os_error("open the log file", exc, config.log_file).report(PROG)
    problems = start_problems(config)
    if problems:                 # before connecting: nothing to undo
        return cli_common.fail(PROG, problems[0], EXIT_USAGE)
    other = _status_owner(config.status_file)
    if other is not None:        # two daemons never share a status file
        return cli_common.fail(PROG, f"the status file {config.status_file} is in use by "
                                     f"filewatcher pid {other}: give each its own "
                                     "--status-file", EXIT_USAGE)
    try:
        return asyncio.run(run(config, url, args))
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:  # the last resort: say it, exit 3
        log.debug("filewatcher failed", exc_info=True)   # the traceback, for debugging
        print(f"filewatcher: {exc} (--log-level debug shows where)", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
