"""``newswatcher``: command line, signals, exit codes.

::

    newswatcher [run] [--config FILE] [--elvin URL] [--feed URL ...] [--scoop]
                      [--data-dir DIR] [--log-level LEVEL] [--log-file FILE]
    newswatcher status [--config FILE] [--data-dir DIR] [--json] [--verbose]
    newswatcher reload [--config FILE] [--data-dir DIR]
    newswatcher check  [--config FILE] [--data-dir DIR] [--feed URL ...]
    newswatcher --version

``run`` (the default) is a foreground daemon (docs/architecture.md): logs to stderr or
``--log-file``, stops cleanly on SIGTERM/SIGINT (state saved, status marked
stopped, Elvin connection closed), re-reads its config on SIGHUP and reopens
its log file (SIGUSR1 only reopens it; ``elvin.daemon.daemon_control``). ``reload``
sends SIGHUP to the pid in the status file and prints the daemon's verdict
(so ``systemctl reload`` and scripts need not know the pid, and a refused
file is not mistaken for an applied one). ``check`` validates the
configuration and the data directory as a start would, without connecting.
The router is ``--elvin``, else ``$ELVIN_URL``, else ``elvin`` in the config,
else a router found by discovery, else ``elvin://127.0.0.1:2917``
(``elvin.router_url``).

Exit codes: 0 ok; 1 usage or config error (including a data directory or
log file that cannot be used: ``cli_common.os_error_status``; a refused
reload); 2 the router cannot be reached at startup (once connected, outages
are ridden out by reconnecting); 3 any other failure (including
``status``/``reload`` finding no running daemon).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
from pathlib import Path

from elvin_apps.newswatcher import __version__

from elvin.app_cli import add_config_argument, app_parser, configured_router
from elvin.cli_common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    ToolError,
    ToolParser,
    fail,
    os_error,
    setup_logging,
)
from elvin.config_file import default_config_path, load_named, raw_setting, read_toml
from elvin.daemon import sdnotify
from elvin.daemon.daemon_control import DaemonSignals, ask_reload, other_instance, reload_verdict
from elvin.fileutil import files_problems, open_problem

log = logging.getLogger("elvin_apps.newswatcher")

PROG = "newswatcher"
COMMANDS = ("run", "status", "reload", "check")
CONFIG_DEFAULT = "$XDG_CONFIG_HOME/elvin/newswatcher.toml, if it exists"


def _data_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", metavar="DIR",
                        help="where state.json and status.json live (default: data_dir in "
                             "the config, else $XDG_STATE_HOME/elvin/newswatcher)")


def _control_parser(command: str, description: str) -> ToolParser:
    """The parser of a command that talks to the running newswatcher, which
    it finds as ``run`` would: by the config file and the data directory."""
    parser = ToolParser(prog=f"{PROG} {command}", description=description)
    add_config_argument(parser, CONFIG_DEFAULT)
    _data_dir_argument(parser)
    return parser


def build_parser(command: str = "run") -> argparse.ArgumentParser:
    if command == "status":
        parser = _control_parser(
            command, "Show which feeds the running newswatcher polls, and why "
                     "(the subscription terms that could match each feed).")
        parser.add_argument("--json", action="store_true", help="print the raw status JSON")
        parser.add_argument("--verbose", "-v", action="store_true",
                            help="list every subscription term, not just three per feed")
        return parser
    if command == "reload":
        return _control_parser(
            command, "Make the running newswatcher re-read its config file (SIGHUP) "
                     "and print its verdict: exit 0 when applied, 1 when refused.")
    parser = app_parser(
        PROG if command == "run" else f"{PROG} {command}", __version__,
        "Publish RSS/Atom feed articles as Elvin notifications, polling only the feeds "
        "some subscription can match (quench).",
        config_default=CONFIG_DEFAULT, log_level="info",
        epilog="Other commands: 'newswatcher status' (what is polled and why), "
               "'newswatcher reload' (re-read the config, as SIGHUP, and print the "
               "verdict), 'newswatcher check' (check the config without starting). "
               "Exit codes: 0 ok, 1 usage/config error, 2 router unreachable, 3 other.")
    _data_dir_argument(parser)
    parser.add_argument("--feed", metavar="URL", action="append", default=[],
                        help="also watch this feed (http(s) URL, file:// URL or path); "
                             "repeatable")
    parser.add_argument("--scoop", action="store_true",
                        help="poll and publish every feed whatever the subscriptions "
                             "(volume testing)")
    parser.add_argument("--log-file", metavar="FILE", help="log here instead of stderr")
    return parser


def _fail(message: str, code: int) -> int:
    return fail(PROG, message, code)


def _data_dir(args: argparse.Namespace, config) -> Path:
    from elvin_apps.newswatcher.config import default_data_dir
    if args.data_dir:
        return Path(args.data_dir).expanduser().resolve()
    return config.data_dir or default_data_dir()


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
    if command == "check":
        return check_command(args)
    return run_command(args)


# ---------------------------------------------------------------------------
# status / reload

def _read_status(args: argparse.Namespace) -> tuple[dict | None, int]:
    from elvin_apps.newswatcher.config import load
    from elvin_apps.newswatcher.status import STATUS_NAME, StatusError, pid_alive, read_status
    try:
        config = load_named(load, args.config)
    except ToolError as exc:
        return None, exc.report(PROG)
    path = _data_dir(args, config) / STATUS_NAME
    try:
        document = read_status(path)
    except StatusError as exc:
        return None, _fail(str(exc), EXIT_FAILURE)
    running = {**document, "running": bool(document.get("running"))
               and pid_alive(document.get("pid"))}
    problem = other_instance(running, args.config, path, PROG)
    if problem:
        return None, _fail(problem, EXIT_USAGE)
    return document, EXIT_OK


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
    """SIGHUP to the running daemon, and its verdict. The status file is
    found even when the config file is the broken one being reloaded: the
    daemon is then the one to say what is wrong with it."""
    from elvin_apps.newswatcher.config import ConfigError, default_data_dir, load
    from elvin_apps.newswatcher.status import STATUS_NAME, StatusError, pid_alive, read_status
    try:
        data_dir = _data_dir(args, load(args.config, must_exist=bool(args.config)))
    except ConfigError:
        if args.config and not args.data_dir:
            # a file that is not TOML names no data directory: act on no daemon
            try:
                read_toml(args.config)
            except ConfigError as unreadable:
                return _fail(f"cannot tell which newswatcher {args.config} configures: "
                             f"{unreadable} (fix it, or give --data-dir)", EXIT_USAGE)
        data_dir = _raw_data_dir(args) or default_data_dir()
    path = data_dir / STATUS_NAME
    try:
        status = read_status(path)
    except StatusError as exc:
        return _fail(str(exc), EXIT_FAILURE)
    status["running"] = bool(status.get("running")) and pid_alive(status.get("pid"))
    problem = other_instance(status, args.config, path, PROG)
    if problem:
        return _fail(problem, EXIT_USAGE)
    return ask_reload("newswatcher reload", lambda: read_status(path))


def _raw_data_dir(args: argparse.Namespace) -> Path | None:
    """``--data-dir``, or ``data_dir`` as written in a config file that does
    not load as a whole (None when neither says)."""
    if args.data_dir:
        return Path(args.data_dir).expanduser().resolve()
    raw = raw_setting(args.config, "data_dir")
    if not isinstance(raw, str):
        return None
    path = Path(raw).expanduser()
    return path if path.is_absolute() else Path(args.config).parent / path


def check_command(args: argparse.Namespace) -> int:
    """``newswatcher check``: the configuration and the data directory as a
    start would see them: every problem (each wrong key and feed, the data
    directory and log file tried as a start opens them), ``ok`` or the
    problems, exit 0 or 1."""
    from elvin_apps.newswatcher.config import ConfigError, load
    problems: list[str] = []
    config = None
    try:
        config = load(args.config, must_exist=bool(args.config))
    except ConfigError as exc:
        problems.extend(exc.problems)
    extra = 0
    if config is not None:
        try:
            config, feeds = _configured(args)
            extra = len(feeds)
        except ToolError as exc:
            problems.append(exc.message)
    data_dir = _data_dir(args, config) if config is not None else _raw_data_dir(args)
    if data_dir is not None and (problem := open_problem(data_dir, "directory")):
        problems.append(f"cannot use the data directory {data_dir}: {problem}")
    elif data_dir is not None:          # the state a start reads (and would refuse)
        problems.extend(f"cannot use {file}: {reason}" for file, reason
                        in files_problems(data_dir) if file.name == "state.json")
    if args.log_file and (problem := open_problem(args.log_file, "append")):
        problems.append(f"cannot write the log file {args.log_file}: {problem}")
    for problem in dict.fromkeys(problems):
        print(f"{PROG}: {problem}", file=sys.stderr)
    where = args.config or (config.path if config is not None and config.path else "defaults")
    if problems:
        print(f"{PROG}: {where}: {len(dict.fromkeys(problems))} problem(s)", file=sys.stderr)
        return EXIT_USAGE
    print(f"{PROG}: {where}: ok ({len(config.feeds) + extra} feed(s))")
    return EXIT_OK


# ---------------------------------------------------------------------------
# run

def _configured(args: argparse.Namespace, router: bool = False):
    """(config, extra feeds[, router choice]): the config file and the
    ``--feed`` URLs over it; ``ToolError`` (usage) for what is wrong."""
    from elvin_apps.newswatcher.config import CONFIG_NAME, ConfigError, feed_from_url, load
    if router:
        config, choice = configured_router(load, args)
    else:
        config, choice = load_named(load, args.config), None
    extra = []
    taken = {f.name for f in config.feeds}
    try:
        for feed_url in args.feed:
            feed = feed_from_url(feed_url, config.defaults, taken)
            taken.add(feed.name)
            extra.append(feed)
    except ConfigError as exc:
        raise ToolError(str(exc)) from None
    if not config.feeds and not extra:
        where = args.config or default_config_path(CONFIG_NAME)
        raise ToolError(f"no feeds: add [[feeds]] tables to {where} or give --feed URL")
    return (config, extra, choice) if router else (config, extra)


def run_command(args: argparse.Namespace) -> int:
    try:
        setup_logging(args.log_level, args.log_file, prog=PROG)
    except OSError as exc:
        return os_error("open the log file", exc, args.log_file).report(PROG)
    try:
        config, extra, router = _configured(args, router=True)
    except ToolError as exc:
        return exc.report(PROG)
    data_dir = _data_dir(args, config)
    try:
        return asyncio.run(serve(config, router.routers, data_dir, extra, args.scoop or None,
                                 args.config))
    except KeyboardInterrupt:
        return EXIT_OK


class _Busy(Exception):
    """Another newswatcher holds the data directory's lock."""


@contextlib.contextmanager
def _lock(data_dir: Path):
    """One daemon per data dir: two would publish everything twice and
    fight over the state file. ``ToolError`` naming the directory and the
    system's reason when it cannot be used (exit 1: a directory the admin
    must fix, not a reason for systemd to restart us), ``_Busy`` when another
    daemon has it."""
    import errno
    import fcntl
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fh = open(data_dir / "lock", "a")   # held for the daemon's life
    except OSError as exc:
        raise os_error("use the data directory", exc, data_dir) from None
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        fh.close()
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise _Busy() from None
        raise os_error("lock the data directory", exc, data_dir) from None
    try:
        yield
    finally:
        fh.close()


async def serve(config, url: str | list[str], data_dir: Path, extra_feeds: list, scoop: bool | None,
                config_arg: str | None) -> int:
    """Run the daemon until SIGTERM/SIGINT; SIGHUP reloads the config."""
    from elvin_apps.newswatcher.config import ConfigError, load
    from elvin_apps.newswatcher.daemon import NewsWatcher

    from elvin.tools import CONNECT_ERRORS, connect_failure
    try:
        lock = _lock(data_dir)
        lock.__enter__()
    except ToolError as exc:
        return exc.report(PROG)
    except _Busy:
        return _fail(f"another newswatcher is using {data_dir} (its lock file is held)",
                     EXIT_FAILURE)
    try:
        watcher = NewsWatcher(config, url=url, data_dir=data_dir, scoop=scoop,
                              extra_feeds=extra_feeds)
        try:
            await watcher.start()
        except ToolError as exc:          # its data directory (elvin.cli_common.os_error)
            await watcher.stop()
            return exc.report(PROG)
        except CONNECT_ERRORS as exc:
            # unreachable or lost (2), or a request the router refused, e.g.
            # a Nack to ConnRqst (3): one line either way, never a traceback
            await watcher.stop()
            failure = connect_failure(url, exc, f"cannot reach the Elvin router at {url}: ")
            return _fail(failure.message, failure.status)
        except Exception as exc:  # startup's last resort: logged, stopped, reported
            log.debug("startup failed", exc_info=True)   # the traceback, for debugging
            await watcher.stop()
            return _fail(f"startup failed: {exc} (--log-level debug shows where)",
                         EXIT_FAILURE)

        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def reload() -> tuple[bool, str]:
            try:
                new = load(config_arg, must_exist=bool(config_arg))
            except ConfigError as exc:
                return False, str(exc)
            return reload_verdict(*watcher.reload(new))

        signals = DaemonSignals(loop, log, stop=lambda _name: stop.set(), reload=reload,
                                record=watcher.reload_record, on_reloaded=watcher.changed)
        signals.install()
        sdnotify.ready(f"newswatcher {__version__}: {len(watcher.feeds)} feed(s), "
                       f"router {url}")
        try:
            await stop.wait()
        finally:
            await watcher.stop()
            await signals.close()     # after: a second SIGTERM while stopping must not kill
        return EXIT_OK
    finally:
        lock.__exit__(None, None, None)
