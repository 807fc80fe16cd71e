"""``newswatcher``: command line, signals, exit codes.

::

    newswatcher [run] [--config FILE] [--elvin URL] [--feed URL ...] [--scoop]
                      [--data-dir DIR] [--log-level LEVEL] [--log-file FILE]
    newswatcher status [--config FILE] [--data-dir DIR] [--json] [--verbose]
    newswatcher reload [--config FILE] [--data-dir DIR]
    newswatcher --version

``run`` (the default) is a foreground daemon (docs/architecture.md): logs to stderr or
``--log-file``, stops cleanly on SIGTERM/SIGINT (state saved, status marked
stopped, Elvin connection closed), re-reads its config on SIGHUP (``reload``
sends that signal to the pid in the status file, so ``systemctl reload`` and
scripts need not know the pid). The router is ``--elvin``, else
``$ELVIN_URL``, else ``elvin`` in the config, else ``elvin://127.0.0.1:2917``.

Exit codes: 0 ok; 1 usage or config error; 2 the router cannot be reached at
startup (once connected, outages are ridden out by reconnecting); 3 any other
failure (including ``status``/``reload`` finding no running daemon).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

from elvin_apps.newswatcher import __version__

log = logging.getLogger("elvin_apps.newswatcher")

DEFAULT_URL = "elvin://127.0.0.1:2917"
EXIT_OK, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_FAILURE = 0, 1, 2, 3
COMMANDS = ("run", "status", "reload")
LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="TOML config file (default: $XDG_CONFIG_HOME/elvin/"
                             "newswatcher.toml, if it exists)")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="where state.json and status.json live (default: data_dir in "
                             "the config, else $XDG_STATE_HOME/elvin/newswatcher)")


def build_parser(command: str = "run") -> argparse.ArgumentParser:
    if command == "status":
        parser = argparse.ArgumentParser(
            prog="newswatcher status",
            description="Show which feeds the running newswatcher polls, and why "
                        "(the subscription terms that could match each feed).")
        _common(parser)
        parser.add_argument("--json", action="store_true", help="print the raw status JSON")
        parser.add_argument("--verbose", "-v", action="store_true",
                            help="list every subscription term, not just three per feed")
        return parser
    if command == "reload":
        parser = argparse.ArgumentParser(
            prog="newswatcher reload",
            description="Make the running newswatcher re-read its config file (SIGHUP).")
        _common(parser)
        return parser
    parser = argparse.ArgumentParser(
        prog="newswatcher",
        description="Publish RSS/Atom feed articles as Elvin notifications, polling only "
                    "the feeds some subscription can match (quench).",
        epilog="Other commands: 'newswatcher status' (what is polled and why), "
               "'newswatcher reload' (re-read the config; same as SIGHUP). "
               "Exit codes: 0 ok, 1 usage/config error, 2 router unreachable, 3 other.")
    parser.add_argument("--elvin", "-e", metavar="URL",
                        help=f"Elvin router URL (else $ELVIN_URL, else the config, else "
                             f"{DEFAULT_URL})")
    _common(parser)
    parser.add_argument("--feed", metavar="URL", action="append", default=[],
                        help="also watch this feed (http(s) URL, file:// URL or path); "
                             "repeatable")
    parser.add_argument("--scoop", action="store_true",
                        help="poll and publish every feed whatever the subscriptions "
                             "(volume testing)")
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LEVELS,
                        help="logging level (default INFO)")
    parser.add_argument("--log-file", metavar="FILE", help="log here instead of stderr")
    parser.add_argument("--version", action="version", version=f"newswatcher {__version__}")
    return parser


def _fail(message: str, code: int) -> int:
    print(f"newswatcher: {message}", file=sys.stderr)
    return code


def resolve_url(flag: str | None, config_url: str | None) -> str:
    for candidate in (flag, os.environ.get("ELVIN_URL"), config_url):
        if candidate:
            return candidate
    return DEFAULT_URL


def _data_dir(args: argparse.Namespace, config) -> Path:
    from elvin_apps.newswatcher.config import default_data_dir
    if args.data_dir:
        return Path(args.data_dir).expanduser().resolve()
    return config.data_dir or default_data_dir()


def _load(args: argparse.Namespace):
    from elvin_apps.newswatcher.config import load
    return load(args.config, must_exist=bool(args.config))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv and argv[0] in COMMANDS else "run"
    try:
        args = build_parser(command).parse_args(argv)
    except SystemExit as exc:          # argparse: --help/--version (0) or usage (2 -> 1)
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    if command == "status":
        return status_command(args)
    if command == "reload":
        return reload_command(args)
    return run_command(args)


def entry() -> None:
    sys.exit(main())


# ---------------------------------------------------------------------------
# status / reload

def _read_status(args: argparse.Namespace) -> tuple[dict | None, int]:
    from elvin_apps.newswatcher.config import ConfigError
    from elvin_apps.newswatcher.status import STATUS_NAME, StatusError, read_status
    try:
        config = _load(args)
    except ConfigError as exc:
        return None, _fail(str(exc), EXIT_USAGE)
    try:
        return read_status(_data_dir(args, config) / STATUS_NAME), EXIT_OK
    except StatusError as exc:
        return None, _fail(str(exc), EXIT_FAILURE)


def status_command(args: argparse.Namespace) -> int:
    from elvin_apps.newswatcher.status import format_status, pid_alive
    document, code = _read_status(args)
    if document is None:
        return code
    if args.json:
        print(json.dumps(document, indent=1))
    else:
        print(format_status(document, verbose=args.verbose))
    alive = document.get("running") and pid_alive(document.get("pid"))
    return EXIT_OK if alive else EXIT_FAILURE


def reload_command(args: argparse.Namespace) -> int:
    from elvin_apps.newswatcher.status import pid_alive
    document, code = _read_status(args)
    if document is None:
        return code
    pid = document.get("pid")
    if not document.get("running") or not pid_alive(pid):
        return _fail(f"no running newswatcher (pid {pid} in the status file)", EXIT_FAILURE)
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        return _fail(f"cannot signal pid {pid}: {exc}", EXIT_FAILURE)
    print(f"newswatcher: asked pid {pid} to reload its config")
    return EXIT_OK


# ---------------------------------------------------------------------------
# run

def _setup_logging(level: str, log_file: str | None) -> None:
    handler: logging.Handler
    handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level))


def run_command(args: argparse.Namespace) -> int:
    from elvin_apps.newswatcher.config import ConfigError, feed_from_url

    from elvin.protocol import URIError, parse_uri
    try:
        _setup_logging(args.log_level, args.log_file)
    except OSError as exc:
        return _fail(f"cannot open log file {args.log_file}: {exc.strerror or exc}", EXIT_USAGE)
    try:
        config = _load(args)
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)
    url = resolve_url(args.elvin, config.elvin)
    if not (args.elvin or os.environ.get("ELVIN_URL") or config.elvin):
        from elvin.discovery import discover_url  # nothing configured: look for a router
        url = discover_url() or url
    try:
        parse_uri(url)
    except URIError as exc:
        return _fail(f"bad Elvin URL {url!r}: {exc}", EXIT_USAGE)
    extra = []
    taken = {f.name for f in config.feeds}
    try:
        for feed_url in args.feed:
            feed = feed_from_url(feed_url, config.defaults, taken)
            taken.add(feed.name)
            extra.append(feed)
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)
    if not config.feeds and not extra:
        from elvin_apps.newswatcher.config import default_config_path
        where = args.config or default_config_path()
        return _fail(f"no feeds: add [[feeds]] tables to {where} or give --feed URL",
                     EXIT_USAGE)
    data_dir = _data_dir(args, config)
    try:
        return asyncio.run(serve(config, url, data_dir, extra, args.scoop or None,
                                 args.config))
    except KeyboardInterrupt:
        return EXIT_OK


@contextlib.contextmanager
def _lock(data_dir: Path):
    """One daemon per data dir: two would publish everything twice and
    fight over the state file."""
    import fcntl
    data_dir.mkdir(parents=True, exist_ok=True)
    fh = open(data_dir / "lock", "w")   # noqa: SIM115 - held for the daemon's life
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise
    try:
        yield
    finally:
        fh.close()


async def serve(config, url: str, data_dir: Path, extra_feeds: list, scoop: bool | None,
                config_arg: str | None) -> int:
    """Run the daemon until SIGTERM/SIGINT; SIGHUP reloads the config."""
    from elvin_apps.newswatcher.config import ConfigError, load
    from elvin_apps.newswatcher.daemon import NewsWatcher

    from elvin.tools import CONNECT_ERRORS, connect_failure
    try:
        lock = _lock(data_dir)
        lock.__enter__()
    except OSError as exc:
        return _fail(f"another newswatcher is using {data_dir} ({exc.strerror or exc})",
                     EXIT_FAILURE)
    try:
        watcher = NewsWatcher(config, url=url, data_dir=data_dir, scoop=scoop,
                              extra_feeds=extra_feeds)
        try:
            await watcher.start()
        except CONNECT_ERRORS as exc:
            # unreachable or lost (2), or a request the router refused, e.g.
            # a Nack to ConnRqst (3): one line either way, never a traceback
            await watcher.stop()
            failure = connect_failure(url, exc, f"cannot reach the Elvin router at {url}: ")
            return _fail(failure.message, failure.status)
        except Exception as exc:  # noqa: BLE001
            log.debug("startup failed", exc_info=True)   # the traceback, for debugging
            await watcher.stop()
            return _fail(f"startup failed: {exc} (--log-level debug shows where)",
                         EXIT_FAILURE)

        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def reload() -> None:
            try:
                new = load(config_arg, must_exist=bool(config_arg))
            except ConfigError as exc:
                log.error("reload refused, keeping the running config: %s", exc)
                return
            log.info("SIGHUP: reloading %s", new.path or "the defaults")
            watcher.reload(new)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, reload)
        try:
            await stop.wait()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            await watcher.stop()
        return EXIT_OK
    finally:
        lock.__exit__(None, None, None)
