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
import logging
import sys

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE", "LOG_LEVELS",
           "ToolError", "ToolParser", "add_log_level_argument", "fail", "setup_logging"]

EXIT_OK = 0
EXIT_USAGE = 1
EXIT_UNREACHABLE = 2
EXIT_FAILURE = 3

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


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


class ToolParser(argparse.ArgumentParser):
    """argparse with the suite's exit status for usage errors (1, not 2)."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_log_level_argument(parser: argparse.ArgumentParser, default: str | None,
                           shown_default: str | None = None) -> None:
    """``--log-level`` (any case). ``default`` None leaves the choice to a
    config file; ``shown_default`` is then what the help says applies."""
    parser.add_argument("--log-level", default=default, choices=LOG_LEVELS, type=str.lower,
                        help=f"log level (default {shown_default or default})")


def setup_logging(level: str, log_file: str | None = None, *, prog: str = "") -> None:
    """Log at ``level`` to ``log_file`` (appended) or stderr, each line
    naming ``prog`` so that several daemons can share a log. ``OSError`` if
    the file cannot be opened: the caller says so with its usage status."""
    handler: logging.Handler
    if log_file:
        handler = logging.FileHandler(log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    name = f"{prog} " if prog else ""
    handler.setFormatter(logging.Formatter(
        f"%(asctime)s {name}%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
