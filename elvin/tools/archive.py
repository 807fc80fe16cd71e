"""elvin-archive: a traffic archive of any Elvin router, written by a client.

::

    elvin-archive -e elvin://host:2917 'require(Group)' /var/lib/elvin/archive

Subscribes with EXPR and writes each delivered notification to DIR in the
format of the router's own archive (``elvind --archive``, see
``elvin.pipeline.archive``), so that ``elvin-pipeline report|backtest`` read
either. Routers that cannot archive (other implementations, or one you do not
run) can be archived this way. A client sees less than the router, so some
columns mean something else:

* ``time``: when the notification arrived *here* (not at the router);
* ``producer``: null -- the router does not say who sent it;
* ``subscriptions``: how many of our subscription ids it matched (1: we hold
  one subscription);
* ``clients``: 1 -- this client; the router's real fan-out is unknown;
* ``secure``: whether it matched our subscription through keys (``-P``/``-C``);
* ``size``: the XDR size of its attribute list, as in the router's archive;
* ``private``: it reached us only through a secure match: its producer meant
  it for key holders. Such a row has no attributes unless
  ``--archive-private`` is given: the archive's readers are not the keys'
  holders (``elvin.pipeline.archive``). Files are 0600, new directories 0700.

Rows are written in batches by a background thread (``--batch-rows``,
``--flush-seconds``); SIGINT (Ctrl-C) or SIGTERM writes what is pending and
exits 0. The line ``elvin-archive: archiving ...`` goes to stderr once the
subscription is in place: nothing sent after it is missed.

Exit status: 0 after SIGINT/SIGTERM, 1 usage or input error (bad URI, bad
subscription -- with its position --, bad key file, archive directory that
cannot be written), 2 router unreachable or connection lost (what arrived
before is written), 3 other failures (e.g. the disk refused the last rows).
"""

from __future__ import annotations

import sys
import time

from elvin.client import Connection, Notification
from elvin.extras import ARCHIVE_MODULES, require
from elvin.keys import Keys
from elvin.tools import (
    EXIT_FAILURE,
    EXIT_USAGE,
    ToolError,
    ToolParser,
    ToolSetup,
    fail,
    prepare,
    tool_parser,
)
from elvin.tools.subscriber import serve_subscription

PROG = "elvin-archive"


def build_parser() -> ToolParser:
    parser = tool_parser(
        PROG, "Subscribe to an Elvin router and write every delivered notification to a "
              "traffic archive (Parquet, partitioned by hour), the format of elvind "
              "--archive, for elvin-pipeline.",
        "archive only secure notifications (accept_insecure=false; needs -P or -C)",
        "columns a client cannot know: producer is null, clients is 1, time is the arrival "
        "here\n\nexit status: 0 on SIGINT/SIGTERM, 1 usage or input error, 2 router "
        "unreachable or connection lost, 3 other failure")
    parser.add_argument("subscription", metavar="EXPR",
                        help="subscription expression, e.g. 'require(Group)'")
    parser.add_argument("directory", metavar="DIR", help="archive directory (created)")
    parser.add_argument("--batch-rows", type=int, default=10_000, metavar="N",
                        help="write a file at the latest every N notifications "
                             "(default 10000)")
    parser.add_argument("--flush-seconds", type=float, default=5.0, metavar="SECONDS",
                        help="... or SECONDS after a notification arrived (default 5)")
    parser.add_argument("--archive-private", action="store_true",
                        help="also write the attributes of notifications received only "
                             "through a secure (key) match; without it their rows hold "
                             "only time, size and counts")
    return parser


class Recorder:
    """Turns deliveries into archive rows (on the event loop: an append only).
    What came only through a secure match is private: its row keeps only
    its size unless ``keep_private``."""

    def __init__(self, writer, keep_private: bool = False) -> None:
        from elvin.pipeline.archive import ArchiveRecord, encoded_size
        from elvin.pipeline.withheld import withheld_size

        self.writer = writer
        self.record = ArchiveRecord
        self.size = encoded_size
        self.withheld_size = withheld_size     # a private row keeps its size's class only
        self.keep_private = keep_private
        self.count = 0

    def notification(self, n: Notification) -> None:
        self.count += 1
        private = bool(n.secure)
        if private and not self.keep_private:
            row = self.record({}, None, 1, 1, True, self.withheld_size(self.size(n.attributes)),
                              time.time(), private=True)
        else:
            row = self.record(n.attributes, None, 1, 1, private, None, time.time(),
                              private=private)
        self.writer.append(row)


def serve(args, setup: ToolSetup, writer) -> int:
    recorder = Recorder(writer, args.archive_private)

    async def subscribe(conn: Connection) -> None:
        await conn.subscribe(args.subscription, keys=setup.keys,
                             accept_insecure=not args.secure, buffer_size=0,
                             listener=recorder.notification)

    return serve_subscription(
        PROG, args, setup, subscribe,
        lambda conn: f"archiving notifications from {conn.url} matching "
                     f"{args.subscription!r} in {writer.directory}",
        unreachable=f"cannot reach the router at {setup.url}: ")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        setup = prepare(args, Keys.for_subscription, args.subscription)
        if args.batch_rows < 1:
            raise ToolError("--batch-rows must be at least 1")
        if not args.flush_seconds > 0:
            raise ToolError("--flush-seconds must be positive")
    except ToolError as exc:
        return exc.report(PROG)
    require(PROG, "pipeline", ARCHIVE_MODULES)
    if args.secure and not args.archive_private:
        print(f"{PROG}: note: -x without --archive-private archives only the time, "
              "size and counts of each notification (every one is private)",
              file=sys.stderr, flush=True)
    writer = open_writer(args)
    if isinstance(writer, int):
        return writer
    status = EXIT_FAILURE
    try:
        status = serve(args, setup, writer)
    finally:
        status = close_writer(writer, status)
    return status


def open_writer(args):
    """The archive writer, or an exit status after saying why there is none."""
    from elvin.pipeline.archive import ArchiveError, ArchiveWriter

    try:
        writer = ArchiveWriter(args.directory, batch_rows=args.batch_rows,
                               flush_seconds=args.flush_seconds)
    except ArchiveError as exc:
        return fail(PROG, str(exc), EXIT_USAGE)
    probe = writer.directory / f".elvin-archive-probe-{id(writer)}"
    try:            # a directory we cannot write in: say so now, not at the first flush
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        writer.close()
        return fail(PROG, f"cannot write in archive directory {args.directory}: "
                          f"{exc.strerror or exc}", EXIT_USAGE)
    return writer


def close_writer(writer, status: int) -> int:
    """Write what is pending; report the total (or the loss) on stderr."""
    from elvin.pipeline.archive import ArchiveError

    try:
        writer.close()
    except ArchiveError as exc:
        fail(PROG, str(exc), EXIT_FAILURE)
        return EXIT_FAILURE
    print(f"{PROG}: {writer.rows_written} notifications written to {writer.directory}",
          file=sys.stderr, flush=True)
    return status


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
