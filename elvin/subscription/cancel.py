"""Stopping a compile that nobody waits for any more.

A router compiles long expressions on a worker thread (``elvin.router.
compiling``); parsing and compiling 256 KiB takes seconds. When the client
that sent it hangs up, the work must stop, or 40 clients that send such an
expression and hang up at once keep the worker busy for minutes while every
other client's expression waits behind theirs.

A thread cannot be stopped from outside, so the compile stops itself: the
worker runs the job inside ``cancellable(token)``, the owner calls
``token.cancel()`` from any thread, and the parser, checker and compiler call
``checkpoint()`` between small steps (a reduction of the parser, a node of
the checker, a piece of generated code), which raises ``Cancelled`` once the
token is cancelled. Outside ``cancellable`` a checkpoint costs one
thread-local lookup and never raises.

Sans-IO like the rest of the package: no event loop, only a flag.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CancelToken", "Cancelled", "cancellable", "checkpoint"]


class Cancelled(Exception):
    """The compile was cancelled by its owner (not an error in the expression)."""


class CancelToken:
    """Set once, from any thread (a plain attribute: reads and writes of it
    are atomic under the GIL)."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


_local = threading.local()


def checkpoint() -> None:
    """Raise ``Cancelled`` if this thread's current job was cancelled."""
    token = getattr(_local, "token", None)
    if token is not None and token.cancelled:
        raise Cancelled


@contextmanager
def cancellable(token: CancelToken) -> Iterator[CancelToken]:
    """Run the body as the job ``token`` cancels (``checkpoint`` watches it)."""
    previous = getattr(_local, "token", None)
    _local.token = token
    try:
        checkpoint()
        yield token
    finally:
        _local.token = previous
