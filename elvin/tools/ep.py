"""ep: send notifications read from stdin, in Avis's ec/ep text format.

::

    ep -e elvin://host:port
    Greeting: "hello world"
    Number:   42
    ---

Each notification is sent when its ``---`` line arrives, and the last one at
end of input even without ``---``. ``$`` lines (such as ``ec``'s ``$time``)
and ``#`` comments are ignored, so ``ec`` output is accepted unchanged.

A malformed notification stops ``ep`` with ``ep: line N, column C: message``
on stderr and exit status 1; the notifications before it have been sent.
Exit status: 0 at end of input or on SIGINT, 1 for usage or input errors,
2 when the router cannot be reached or the connection is lost, 3 otherwise.
"""

from __future__ import annotations

import contextlib
import io
import signal
import sys

from elvin.client import ConnectionClosedError
from elvin.keys import Keys
from elvin.text import NotificationReader, TextFormatError
from elvin.tools import (
    CONNECT_ERRORS,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ToolError,
    ToolParser,
    connect_failure,
    fail,
    prepare,
    tool_parser,
)

PROG = "ep"


def build_parser() -> ToolParser:
    return tool_parser(
        PROG, "Read notifications from stdin (Avis ec/ep format: 'Name: value' lines, "
              "'---' after each) and send them to an Elvin router.",
        "send to secure subscribers only (deliver_insecure=false; needs -P or -C)",
        "exit status: 0 at end of input or on SIGINT, 1 usage or input error, 2 router "
        "unreachable or connection lost, 3 other failure")


def main(argv: list[str] | None = None, stdin=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        setup = prepare(args, Keys.for_notification)
    except ToolError as exc:
        return exc.report(PROG)
    url, keys = setup.url, setup.keys

    if stdin is None:
        # newline="\n": a \r inside a string is data, not a line break
        stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", newline="\n")

    import elvin.sync
    try:
        conn = elvin.sync.connect(url, timeout=args.timeout, ssl_context=setup.tls)
    except CONNECT_ERRORS as exc:
        return connect_failure(url, exc).report(PROG)

    signal.signal(signal.SIGTERM, signal.default_int_handler)
    reader = NotificationReader()
    status = EXIT_OK
    try:
        try:
            for line in stdin:
                notification = reader.feed(line)
                if notification is not None:
                    conn.send(notification, keys=keys, deliver_insecure=not args.secure)
            notification = reader.finish()
            if notification is not None:
                conn.send(notification, keys=keys, deliver_insecure=not args.secure)
        except UnicodeDecodeError as exc:
            status = fail(PROG, f"line {reader.line_number + 1}: input is not UTF-8 ({exc})",
                          EXIT_USAGE)
        except TextFormatError as exc:
            status = fail(PROG, str(exc), EXIT_USAGE)
        except (TypeError, ValueError) as exc:   # a notification the router would refuse
            status = fail(PROG, f"line {reader.line_number}: {exc}", EXIT_USAGE)
        except KeyboardInterrupt:
            status = EXIT_OK
        conn.flush()
    except (ConnectionClosedError, OSError, TimeoutError) as exc:
        status = fail(PROG, f"connection lost: {exc}", EXIT_UNREACHABLE)
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(Exception, KeyboardInterrupt):  # closing anyway: how it fails changes nothing
            conn.close()
    return status


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
