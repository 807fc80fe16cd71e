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
import os
import signal
import sys
from collections.abc import Sequence

from elvin_apps.filewatcher import __version__
from elvin_apps.filewatcher.config import (
    LOG_LEVELS,
    UNBOUNDED_POLICIES,
    Config,
    ConfigError,
    apply_overrides,
    default_status_file,
    load_config,
    resolve_url,
)
from elvin_apps.filewatcher.status import StatusError, format_status, read_status

from elvin.protocol import URIError, parse_uri
from elvin.tools import CONNECT_ERRORS, connect_failure

EXIT_OK, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_FAILURE = 0, 1, 2, 3

log = logging.getLogger("elvin_apps.filewatcher")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors exit 1, not argparse's 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="filewatcher",
        description="Emit an Elvin notification when a watched file changes. Watches only "
                    "the paths that subscriptions ask for (File-Path == ..., begins-with, "
                    "wildcard, regex), and only inside the configured roots.",
        epilog="'filewatcher status' prints what the running daemon watches and why. "
               "Settings: --config FILE (TOML; keys as the flags: roots, elvin, unbounded, "
               "debounce, max-delay, poll-interval, max-watches, status-file, log-level, "
               "log-file, ...); flags override it. Router: --elvin, else ELVIN_URL, else "
               "the config file, else elvin://127.0.0.1:2917.")
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file")
    parser.add_argument("--root", metavar="DIR", action="append", dest="roots",
                        help="a directory subscribers may watch (repeatable; replaces the "
                             "config file's roots)")
    parser.add_argument("--elvin", metavar="URL", help="router URL")
    parser.add_argument("--unbounded", choices=UNBOUNDED_POLICIES,
                        help="what to do with subscriptions whose paths cannot be bounded: "
                             "ignore them (default, with a warning) or watch the roots")
    parser.add_argument("--debounce", metavar="SECONDS", type=float,
                        help="quiet time before a burst of changes is reported (default 0.1)")
    parser.add_argument("--status-file", metavar="FILE",
                        help=f"where to write the status (default {default_status_file()})")
    parser.add_argument("--foreground", action="store_true",
                        help="run in the foreground (always the case; for systemd and habit)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, type=str.lower,
                        help="log level (default info)")
    parser.add_argument("--log-file", metavar="FILE", help="log here instead of stderr")
    parser.add_argument("--version", action="version", version=f"filewatcher {__version__}")
    return parser


def build_status_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="filewatcher status",
                     description="Print what the running filewatcher watches, and for which "
                                 "subscriptions (read from its status file).")
    parser.add_argument("--status-file", metavar="FILE", help="the daemon's status file")
    parser.add_argument("--config", metavar="FILE",
                        help="take the status file's path from this config file")
    parser.add_argument("--json", action="store_true", help="print the raw JSON")
    return parser


def make_config(args: argparse.Namespace) -> Config:
    config = load_config(args.config)
    config = apply_overrides(config, roots=args.roots, unbounded=args.unbounded,
                             debounce=args.debounce, status_file=args.status_file,
                             log_level=args.log_level, log_file=args.log_file)
    return config.validate()


def setup_logging(config: Config) -> None:
    handler: logging.Handler
    if config.log_file:
        handler = logging.FileHandler(config.log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(
        "%(asctime)s filewatcher %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.log_level.upper())
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
        url = resolve_url(args.elvin, dict(os.environ), config.elvin)
        if not (args.elvin or os.environ.get("ELVIN_URL") or config.elvin):
            from elvin.discovery import discover_url  # nothing configured: look
            url = discover_url() or url
        try:
            parse_uri(url)
        except URIError as exc:
            raise ConfigError(f"bad router URL {url!r}: {exc}") from None
    except ConfigError as exc:
        print(f"filewatcher: {exc}", file=sys.stderr)
        return EXIT_USAGE
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


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
