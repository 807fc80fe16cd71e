"""ec: print the notifications that match a subscription, in Avis's format.

::

    ec -e elvin://host:port 'require(Greeting)'
    ec: Connected to server elvin:4.0/tcp,none,xdr/host:2917
    $time 2008-07-10T11:51:08.729+0930
    Greeting: "hello world"
    ---

Each notification is a ``$time`` line (local time, ISO 8601 with
milliseconds and the UTC offset, as Avis prints it), its attributes in the
``elvin.text`` format, and ``---``; stdout is flushed after each, and the
output can be fed to ``ep`` unchanged.

``--quench NAME[,NAME...]`` also (or instead) prints the quench events for
subscriptions referring to those names, in the same format so ``ep`` can
read them too::

    $time ...
    Quench-Event: "add"          (or "modify", "remove")
    Term-Id: 7L
    Secure: 0
    Subscription: "require(File-Path)"
    ---

A router without quench (protocol subset C is optional; Avis lacks it) gets
one line on stderr saying so, and ``ec`` goes on printing the notifications
of its subscription; with ``--quench`` and no subscription there is nothing
left to do, and it exits with status 3.

Exit status: 0 on SIGINT/SIGTERM, 1 for usage errors (bad URI, bad
subscription, bad key file), 2 when the router cannot be reached or the
connection is lost, 3 for other failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from datetime import datetime

from elvin.client import (
    Connection,
    Notification,
    QuenchNotSupported,
    SubscriptionAdded,
    SubscriptionModified,
    SubscriptionRemoved,
)
from elvin.keys import Keys
from elvin.text import format_notification
from elvin.tools import EXIT_FAILURE, ToolError, ToolParser, ToolSetup, prepare, tool_parser
from elvin.tools.subscriber import serve_subscription
from elvin.values import Int64

PROG = "ec"


def timestamp(now: datetime | None = None) -> str:
    """``2008-07-10T11:51:08.729+0930``: local time, milliseconds, offset."""
    now = now or datetime.now().astimezone()
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}" + \
        now.strftime("%z")


def build_parser() -> ToolParser:
    parser = tool_parser(
        PROG, "Subscribe to notifications from an Elvin router and print them (Avis ec "
              "format).",
        "allow only secure notifications (accept_insecure=false; needs -P or -C)",
        "exit status: 0 on SIGINT, 1 usage error, 2 router unreachable or connection lost, "
        "3 other failure")
    parser.add_argument("subscription", nargs="?",
                        help="subscription expression, e.g. 'require(Greeting)'")
    parser.add_argument("--quench", metavar="NAME,...",
                        help="also print quench events for subscriptions that refer to "
                             "these attribute names")
    return parser


def format_quench_event(event) -> dict:
    from elvin.subscription import unparse
    if isinstance(event, SubscriptionRemoved):
        return {"Quench-Event": "remove", "Term-Id": Int64(event.term_id)}
    kind = "add" if isinstance(event, SubscriptionAdded) else "modify"
    try:
        text = unparse(event.ast)
    except Exception:  # noqa: BLE001 - an AST our unparser cannot print: show its structure
        text = repr(event.ast)
    return {"Quench-Event": kind, "Term-Id": Int64(event.term_id),
            "Secure": 1 if event.secure else 0, "Subscription": text}


class Printer:
    def __init__(self, out) -> None:
        self.out = out
        self.broken = asyncio.Event()

    def emit(self, attributes) -> None:
        if self.broken.is_set():
            return
        try:
            self.out.write(f"$time {timestamp()}\n{format_notification(attributes)}---\n")
            self.out.flush()
        except BrokenPipeError:
            self.broken.set()
        except (TypeError, ValueError) as exc:  # cannot happen for decoded values
            print(f"{PROG}: cannot print a notification: {exc}", file=sys.stderr)

    def notification(self, n: Notification) -> None:
        self.emit(n.attributes)

    def quench_event(self, event: SubscriptionAdded | SubscriptionModified |
                     SubscriptionRemoved) -> None:
        self.emit(format_quench_event(event))


def serve(args, setup: ToolSetup, names: list[str]) -> int:
    printer = Printer(sys.stdout)

    async def subscribe(conn: Connection) -> None:
        if args.subscription is not None:
            await conn.subscribe(args.subscription, keys=setup.keys,
                                 accept_insecure=not args.secure, buffer_size=0,
                                 listener=printer.notification)
        if names:
            try:
                await conn.quench(names, keys=setup.keys, buffer_size=0,
                                  listener=printer.quench_event)
            except QuenchNotSupported:
                if args.subscription is None:
                    raise ToolError(f"{conn.url} does not support quench (protocol subset "
                                    "C): no quench events to print", EXIT_FAILURE) from None
                print(f"{PROG}: {conn.url} does not support quench (protocol subset C): "
                      "printing notifications only", file=sys.stderr, flush=True)

    # "Connected" is said once the subscription is in place, so that a script
    # that waits for this line knows that nothing sent from now on is missed
    return serve_subscription(PROG, args, setup, subscribe,
                              lambda conn: f"Connected to server {conn.url}",
                              done=printer.broken)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    names = [n.strip() for n in (args.quench or "").split(",") if n.strip()]
    if args.subscription is None and not names:
        parser.error("give a subscription expression (or --quench NAMES)")
    try:
        setup = prepare(args, Keys.for_subscription, args.subscription)
    except ToolError as exc:
        return exc.report(PROG)
    return serve(args, setup, names)


def entry() -> None:
    status = main()
    with contextlib.suppress(Exception):  # stdout may be a closed pipe: the status still stands
        sys.stdout.flush()
    sys.exit(status)


if __name__ == "__main__":
    entry()
