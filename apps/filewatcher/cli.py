"""``filewatcher``: the daemon, and ``filewatcher status``.

    filewatcher --root /srv/www [--root DIR ...] [--elvin URL] [--config FILE]
                [--unbounded ignore|roots] [--status-file FILE]
                [--log-level LEVEL] [--log-file FILE] [--foreground]
    filewatcher status [--status-file FILE | --config FILE] [--json]

The daemon always runs in the foreground (``--foreground`` is accepted for
habit's sake); systemd (packaging/systemd/filewatcher.service) or a shell
puts it in the background. Exit codes: 0 after a clean stop (SIGTERM/SIGINT),
1 for a usage or configuration error, 2 when the router cannot be reached at
start (or the connection is closed for good), 3 for any other failure;
``status`` exits 0 when the daemon is running, 3 when it is not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence

from elvin_apps.filewatcher import __version__
from elvin_apps.filewatcher.config import (
    UNBOUNDED_POLICIES,
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
        epilog="'filewatcher status' prints what the running daemon watches and why. "
               "Settings: --config FILE (TOML; keys as the flags: roots, elvin, unbounded, "
               "debounce, max-delay, poll-interval, max-watches, status-file, log-level, "
               "log-file, ...); flags override it.")
    parser.add_argument("--root", metavar="DIR", action="append", dest="roots",
                        help="a directory subscribers may watch (repeatable; replaces the "
                             "config file's roots)")
    parser.add_argument("--unbounded", choices=UNBOUNDED_POLICIES,
                        help="what to do with subscriptions whose paths cannot be bounded: "
                             "ignore them (default, with a warning) or watch the roots")
    parser.add_argument("--debounce", metavar="SECONDS", type=float,
                        help="quiet time before a burst of changes is reported (default 0.1)")
    parser.add_argument("--status-file", metavar="FILE",
                        help=f"where to write the status (default {default_status_file()})")
    parser.add_argument("--foreground", action="store_true",
                        help="run in the foreground (always the case; for systemd and habit)")
    parser.add_argument("--log-file", metavar="FILE", help="log here instead of stderr")
    return parser


def build_status_parser() -> argparse.ArgumentParser:
    parser = ToolParser(prog="filewatcher status",
                        description="Print what the running filewatcher watches, and for "
                                    "which subscriptions (read from its status file).")
    parser.add_argument("--status-file", metavar="FILE", help="the daemon's status file")
    add_config_argument(parser, help="take the status file's path from this config file")
    parser.add_argument("--json", action="store_true", help="print the raw JSON")
    return parser


def make_config(args: argparse.Namespace) -> Config:
    config = load_config(args.config)
    config = apply_overrides(config, roots=args.roots, unbounded=args.unbounded,
                             debounce=args.debounce, status_file=args.status_file,
                             log_level=args.log_level, log_file=args.log_file)
    return config.validate()


def setup_logging(config: Config) -> None:
    """The suite's log set-up, watchdog's chatter kept out unless debugging."""
    cli_common.setup_logging(config.log_level, config.log_file, prog=PROG)
    if config.log_level != "debug":
        logging.getLogger("watchdog").setLevel(logging.WARNING)


async def run(config: Config, url: str) -> int:
    from elvin_apps.filewatcher.daemon import FileWatcher

    watcher = FileWatcher(config, url)
    try:
        await watcher.start()
    except CONNECT_ERRORS as exc:
        # unreachable or lost (2), or a request the router refused, e.g. a
        # Nack to ConnRqst (3): one line either way, never a traceback
        return connect_failure(url, exc, f"cannot reach the router at {url}: ") \
            .report("filewatcher")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, _stop, watcher, sig.name)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
    print(f"filewatcher {__version__} watching for subscriptions at {watcher.conn.url}; "
          f"status in {config.status_file}", file=sys.stderr, flush=True)
    try:
        code = await watcher.wait_stopped()
    finally:
        await watcher.close()
    return code


def _stop(watcher, signame: str) -> None:
    log.info("%s received: stopping", signame)
    watcher.request_stop(EXIT_OK)


def status_main(argv: Sequence[str]) -> int:
    args = build_status_parser().parse_args(argv)
    path = args.status_file
    if path is None:
        try:
            config = load_config(args.config)
        except ConfigError as exc:
            print(f"filewatcher: {exc}", file=sys.stderr)
            return EXIT_USAGE
        path = config.status_file or default_status_file()
    try:
        data = read_status(path)
    except StatusError as exc:
        print(f"filewatcher status: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        format_status(data, sys.stdout)
    return EXIT_OK if data.get("running") else EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "status":
        return status_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        config = make_config(args)
        url = choose_router_url(args.elvin, config.elvin, config_file=args.config,
                                discover=True, what="router URL").url
    except ConfigError as exc:
        print(f"filewatcher: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ToolError as exc:
        return exc.report(PROG)
    try:
        setup_logging(config)
    except OSError as exc:
        print(f"filewatcher: cannot open log file {config.log_file!r}: {exc.strerror}",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(run(config, url))
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the last resort: say it, exit 3
        log.debug("filewatcher failed", exc_info=True)   # the traceback, for debugging
        print(f"filewatcher: {exc} (--log-level debug shows where)", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
