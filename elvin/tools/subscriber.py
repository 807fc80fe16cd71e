"""The life of a tool that subscribes and runs until told to stop (``ec``,
``elvin-archive``): connect, subscribe, say so, wait, report how it ended.

One place decides what each failure is called and which exit status it gets
(docs/architecture.md), so the tools cannot disagree: a bad subscription 1,
the router unreachable or the connection lost 2, a refusal by the router 3;
0 after SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable

from elvin.client import CloseReason, Connection, ConnectionClosedError, NackError, connect
from elvin.errors import SubscriptionError
from elvin.tools import (
    CONNECT_ERRORS,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ToolError,
    ToolSetup,
    connect_failure,
    fail,
    stop_on_signals,
)

__all__ = ["run_subscriber", "serve_subscription"]


def serve_subscription(prog: str, args: argparse.Namespace, setup: ToolSetup,
                       subscribe: Callable[[Connection], Awaitable[None]],
                       ready: Callable[[Connection], str], *, unreachable: str = "",
                       done: asyncio.Event | None = None) -> int:
    """``run_subscriber`` on an event loop of its own; Ctrl-C before its
    signal handlers are in place ends it with 0 too."""
    try:
        return asyncio.run(run_subscriber(prog, args, setup, subscribe, ready,
                                          unreachable=unreachable, done=done))
    except KeyboardInterrupt:
        return EXIT_OK


async def run_subscriber(prog: str, args: argparse.Namespace, setup: ToolSetup,
                         subscribe: Callable[[Connection], Awaitable[None]],
                         ready: Callable[[Connection], str], *, unreachable: str = "",
                         done: asyncio.Event | None = None) -> int:
    """Connect by ``setup``, ``subscribe`` (a ``ToolError`` it raises ends
    the run with that error's status), say ``prog: ready(conn)`` on stderr -- once it is
    said, nothing sent is missed, and scripts wait for it -- then run until
    SIGINT/SIGTERM, ``done``, or the router closing the connection.
    ``unreachable`` goes before the reason the router could not be reached."""
    stop = stop_on_signals()
    try:
        conn = await connect(setup.url, timeout=args.timeout, ssl_context=setup.tls)
    except CONNECT_ERRORS as exc:
        return connect_failure(setup.url, exc, unreachable).report(prog)
    closed: list[CloseReason] = []

    def on_close(reason: CloseReason) -> None:
        closed.append(reason)
        stop.set()
    conn.add_close_listener(on_close)
    status = await _subscribe(prog, conn, subscribe)
    if status is not None:
        await conn.close()
        return status
    print(f"{prog}: {ready(conn)}", file=sys.stderr, flush=True)
    waiters = {asyncio.ensure_future(event.wait()) for event in (stop, done) if event}
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
    if closed and closed[0].kind != "closed":
        return fail(prog, f"disconnected from {conn.url}: {closed[0]}", EXIT_UNREACHABLE)
    await conn.close()
    return EXIT_OK


async def _subscribe(prog: str, conn: Connection,
                     subscribe: Callable[[Connection], Awaitable[None]]) -> int | None:
    try:
        await subscribe(conn)
    except ToolError as exc:             # the tool's own reason to stop
        return exc.report(prog)
    except SubscriptionError as exc:
        return fail(prog, f"bad subscription: {exc}", EXIT_USAGE)
    except NackError as exc:
        return fail(prog, f"the router refused the request: {exc}", EXIT_FAILURE)
    except ConnectionClosedError as exc:
        return fail(prog, f"disconnected from {conn.url}: {exc.reason or exc}",
                    EXIT_UNREACHABLE)
    except (OSError, TimeoutError) as exc:
        return fail(prog, f"disconnected from {conn.url}: {exc}", EXIT_UNREACHABLE)
    return None
