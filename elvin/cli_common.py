"""What every command of the suite does the same way on its command line.

The exit statuses (docs/architecture.md: 0 ok, 1 usage or input error, 2
the router cannot be reached, 3 any other failure), the one-line failure
report (``prog: message`` on stderr), the argument parser whose usage errors
exit with 1 rather than argparse's 2, and logging set up from
``--log-level``/``--log-file``. Kept here, in the core package and free of
optional imports, so that ``elvind``, ``ec``, the daemons and the Qt apps
cannot drift apart on any of them.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
import sys

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE", "LOG_LEVELS",
           "ToolError", "ToolParser", "add_log_level_argument", "duration", "fail",
           "listen_error_reason", "listen_error_status", "os_error",
           "os_error_status", "reopen_log_files", "setup_logging"]

EXIT_OK = 0
EXIT_USAGE = 1
EXIT_UNREACHABLE = 2
EXIT_FAILURE = 3

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def duration(seconds: float) -> str:
    """``4.2 s``, ``35 s``, ``12 min``, ``3.5 h``, ``2.0 days``: how long, as
    the tools' messages and status reports say it."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def fail(prog: str, message: str, status: int) -> int:
    """Say ``prog: message`` on stderr; returns ``status`` for ``return fail(...)``."""
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return status


class ToolError(Exception):
    """A failure a command reports on stderr and exits with ``status``. The
    shared set-up steps raise it, so that a command's ``main`` handles them
    all in one place: ``except ToolError as exc: return exc.report(PROG)``."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def report(self, prog: str) -> int:
        return fail(prog, self.message, self.status)


#: errnos of a path the configuration names that cannot be used as it is:
#: restarting will not help, someone must fix the file, the path or its
#: permissions (so they exit 1, which the systemd units do not restart)
_SETUP_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR,
                           errno.EISDIR, errno.EROFS, errno.ELOOP, errno.ENAMETOOLONG,
                           errno.EEXIST})


def os_error_status(exc: OSError | int | None) -> int:
    """The exit status for an ``OSError`` (or its errno) at start: 1 (usage)
    when a path the configuration names cannot be used (missing, a file
    where a directory is needed, permission denied, read-only), 3 for what
    may pass (a full disk, an I/O error, an address in use)."""
    code = exc.errno if isinstance(exc, OSError) else exc
    return EXIT_USAGE if code in _SETUP_ERRNOS else EXIT_FAILURE


#: getaddrinfo's answers that a retry will not change: the name does not
#: exist, has no address of the family asked for, or the service is unknown
#: (EAI_AGAIN, a DNS server not answering yet at boot, may pass: not here)
_SETUP_EAI = frozenset(getattr(socket, name) for name in
                       ("EAI_NONAME", "EAI_NODATA", "EAI_FAMILY", "EAI_SERVICE", "EAI_ADDRFAMILY")
                       if hasattr(socket, name))


def listen_error_status(exc: OSError) -> int:
    """The exit status for an address that cannot be listened on: 1 (usage)
    when retrying cannot help -- a port below 1024 without the privilege
    (EACCES), a host name that does not resolve, an address family the
    system lacks -- so that systemd does not restart in a loop; else 3 (an
    address in use, an interface not up yet, DNS not answering yet)."""
    if isinstance(exc, socket.gaierror):
        return EXIT_USAGE if exc.errno in _SETUP_EAI else EXIT_FAILURE
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EAFNOSUPPORT):
        return EXIT_USAGE
    return EXIT_FAILURE


def listen_error_reason(exc: OSError, port: int | None = None) -> str:
    """Why an address cannot be listened on, as the system words it
    (asyncio's own wording, "error while attempting to bind on address
    ...", repeats what the message already says), with what to do about a
    privileged port."""
    if isinstance(exc.errno, int) and exc.errno > 0:
        reason = os.strerror(exc.errno)
    else:
        reason = exc.strerror or str(exc)
    if exc.errno in (errno.EACCES, errno.EPERM) and port is not None and 0 < port < 1024:
        reason += (f" (port {port} is below 1024: it needs root or CAP_NET_BIND_SERVICE, "
                   "see the systemd unit)")
    return reason


def os_error(what: str, exc: OSError, path: str | os.PathLike | None = None) -> ToolError:
    """``cannot WHAT PATH: Permission denied``: the one line a command says
    for an ``OSError`` at start, with its exit status (``os_error_status``).
    ``path`` defaults to the one the error names."""
    shown = path if path is not None else (exc.filename or "")
    reason = exc.strerror or str(exc)
    where = f" {os.fspath(shown)}" if shown != "" else ""
    return ToolError(f"cannot {what}{where}: {reason}", os_error_status(exc))


class ToolParser(argparse.ArgumentParser):
    """argparse with the suite's exit status for usage errors (1, not 2)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_log_level_argument(parser: argparse.ArgumentParser, default: str | None,
                           shown_default: str | None = None) -> None:
    """``--log-level`` (any case). ``default`` None leaves the choice to a
    config file; ``shown_default`` is then what the help says applies."""
    parser.add_argument("--log-level", default=default, choices=LOG_LEVELS, type=str.lower,
                        help=f"log level (default {shown_default or default})")


class _LogFile(logging.FileHandler):
    """A log file that, when a write fails (a full disk), says so in one line
    on stderr -- the journal, under systemd -- once per reason, instead of
    logging's traceback for every record; logging goes on (a later write
    may work, after logrotate or a cleanup)."""

    def __init__(self, filename: str, prog: str) -> None:
        super().__init__(filename, encoding="utf-8")
        self.prog = prog
        self._said: str | None = None       # the failure said last, until writing works
        self._failed = False

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        super().emit(record)            # handleError on a failed write
        if not self._failed:
            self._said = None           # writing works (again)

    def handleError(self, record: logging.LogRecord) -> None:
        exc = sys.exc_info()[1]
        reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        self._failed = True
        if reason != self._said:
            self._said = reason
            prefix = f"{self.prog}: " if self.prog else ""
            print(f"{prefix}cannot write the log file {self.baseFilename}: {reason}",
                  file=sys.stderr, flush=True)


def setup_logging(level: str, log_file: str | None = None, *, prog: str = "") -> None:
    """Log at ``level`` to ``log_file`` (appended) or stderr, each line
    naming ``prog`` so that several daemons can share a log. ``OSError`` if
    the file cannot be opened: the caller says so with its usage status."""
    handler: logging.Handler
    if log_file:
        handler = _LogFile(log_file, prog)
    else:
        handler = logging.StreamHandler(sys.stderr)
    name = f"{prog} " if prog else ""
    handler.setFormatter(logging.Formatter(
        f"%(asctime)s {name}%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in root.handlers:
        if old is not handler:
            old.close()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def reopen_log_files() -> list[str]:
    """Close and reopen every log file of the root logger (after logrotate
    moved it away: SIGHUP or SIGUSR1 in the daemons); the paths reopened.
    A file that cannot be reopened keeps the old stream and is reported
    on stderr rather than losing the log."""
    reopened = []
    for handler in logging.getLogger().handlers:
        if not isinstance(handler, logging.FileHandler):
            continue
        handler.acquire()
        try:
            try:
                stream = handler._open()
            except OSError as exc:
                print(f"cannot reopen log file {handler.baseFilename}: "
                      f"{exc.strerror or exc}", file=sys.stderr, flush=True)
                continue
            old, handler.stream = handler.stream, stream
            if old is not None:
                old.close()
            reopened.append(handler.baseFilename)
        finally:
            handler.release()
    return reopened
