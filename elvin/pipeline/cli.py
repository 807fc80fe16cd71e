"""``elvin-pipeline``: Spark jobs over the router's traffic archive.

::

    elvin-pipeline backtest EXPR ARCHIVE [--sample N] [--json] [--master URL]
    elvin-pipeline report ARCHIVE --out DIR [--json] [--master URL]
    elvin-pipeline mobility TRACES --out DIR [--run ID]... [--plots N] [--json]

``backtest`` prints ``Matches: N`` (with the total, the matches per hour and
a few matching notifications), or JSON with ``--json``. ``report`` writes
CSV tables, PNG charts and ``index.html`` into ``--out`` and prints a
summary. ``mobility`` reads the mobility benchmark's trace directory (CSV,
see ``elvin.pipeline.mobility``), prints the delay / losses / duplicates
table per support, rate and subscriptions, and writes it (CSV) with
departure/arrival plots and ``index.html`` into ``--out``. Spark runs on ``local[*]`` unless ``--master`` says otherwise; a
progress line for running stages goes to stderr when it is a terminal.

Exit codes: 0 ok; 1 usage or input error (bad flag, bad subscription -- the
message shows where --, missing or empty archive, bad traces); 3 any other failure (no
Java, Spark failed to start or failed a job).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any

from elvin._version import __version__
from elvin.cli_common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, ToolParser
from elvin.errors import SubscriptionError
from elvin.fileutil import write_problem
from elvin.pipeline.archive import ArchiveError, check_archive
from elvin.pipeline.mobility import TraceError, check_traces
from elvin.pipeline.session import JavaNotFoundError, Progress, find_java

VERSION = __version__

log = logging.getLogger("elvin.pipeline")


def build_parser() -> argparse.ArgumentParser:
    # only its arguments are copied into the subcommands; a ToolParser, as they are
    common = ToolParser(add_help=False)
    common.add_argument("--master", default=None, metavar="URL",
                        help="Spark master (default local[*]), e.g. spark://host:7077")
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    common.add_argument("--log-level", default="warning",
                        choices=["debug", "info", "warning", "error"],
                        help="log level of the pipeline (default warning)")
    parser = ToolParser(prog="elvin-pipeline",
                     description="Traffic reports and subscription back-tests over an Elvin "
                                 "router's archive (Parquet), on Spark.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ToolParser)
    sub.required = True
    bt = sub.add_parser("backtest", parents=[common],
                        help="count the archived notifications a subscription matches",
                        description="Count the archived notifications a subscription "
                                    "expression would have matched.")
    bt.add_argument("expression", metavar="EXPR", help="subscription expression")
    bt.add_argument("archive", metavar="ARCHIVE", help="archive directory (router --archive)")
    bt.add_argument("--sample", type=int, default=10, metavar="N",
                    help="show up to N matching notifications (default 10)")
    rp = sub.add_parser("report", parents=[common], help="traffic report (HTML, PNG, CSV)",
                        description="Write a traffic report of the archive: volume per "
                                    "hour, per tickertape Group and per attribute name, top "
                                    "producers, fan-out and sizes.")
    rp.add_argument("archive", metavar="ARCHIVE", help="archive directory (router --archive)")
    rp.add_argument("--out", required=True, metavar="DIR", help="directory for the report")
    mo = sub.add_parser("mobility", parents=[common],
                        help="delay, losses and duplicates of mobility traces",
                        description="Summarise the mobility benchmark's traces (a directory "
                                    "of CSV files, one per run): move-in delay, losses and "
                                    "duplicates per support, rate and subscriptions, with "
                                    "departure/arrival plots.")
    mo.add_argument("traces", metavar="TRACES", help="directory of trace CSV files")
    mo.add_argument("--out", required=True, metavar="DIR",
                    help="directory for mobility.csv, runs.csv, plots and index.html")
    mo.add_argument("--run", action="append", default=[], metavar="ID", dest="runs",
                    help="plot this run (repeatable; default: the first --plots runs)")
    mo.add_argument("--plots", type=int, default=12, metavar="N",
                    help="plot at most N runs when no --run is given (default 12)")
    return parser


def _start_spark(master: str | None, log_level: str = "warning"):
    """(spark, created): a session, and whether this call started it."""
    from pyspark.sql import SparkSession

    from elvin.pipeline.session import spark_session

    existing = SparkSession.getActiveSession()
    if existing is not None:    # embedded use (tests, notebooks): keep its settings
        existing.conf.set("spark.sql.ansi.enabled", "false")
        return existing, False
    # Spark's own warnings and errors only when debugging: a failure is said
    # by main() in one line, with its cause (failure_reason)
    return spark_session(master or "local[*]",
                         log_level="WARN" if log_level == "debug" else "FATAL"), True


def failure_reason(exc: BaseException) -> str:
    """What a Spark failure comes down to, in one line: the innermost Java
    cause (``java.io.IOException: ... is not a Parquet file``) rather than
    py4j's ``An error occurred while calling o126.collectToPython``, and the
    archive file it was reading when one is named anywhere in the chain
    (damage inside a Parquet file is said by a shaded Thrift class that
    names no file)."""
    texts: list[str] = []
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            cause = java
            while cause is not None:
                texts.append(str(cause.toString()))
                cause = cause.getCause()
        except Exception:  # noqa: BLE001, S110 - the gateway may be gone: use the text
            pass
    text = str(exc).strip()
    causes = [line.strip()[len("Caused by:"):].strip() for line in text.splitlines()
              if line.strip().startswith("Caused by:")]
    innermost = next((t.strip().splitlines()[0] for t in reversed(texts) if t.strip()), None)
    if innermost is None:
        innermost = causes[-1] if causes else (text.splitlines()[0] if text
                                               else type(exc).__name__)
    reason = _plain_java(innermost)
    path = _file_named(texts + [text])
    if path and path not in reason:
        return f"cannot read the archive file {path} (damaged? move it away and run again): " \
               f"{reason}"
    return reason


#: a file Spark names while reading it (``file:/...`` or ``file:///...``)
_FILE = re.compile(r"file:(?://)?(/[^\s,;'\"\]\)]+\.parquet)")


def _file_named(texts: list[str]) -> str | None:
    for text in texts:
        found = _FILE.search(text)
        if found:
            return found.group(1)
    return None


def _plain_java(text: str) -> str:
    """A Java exception's line without what only a Java developer reads:
    shaded package prefixes and the ``Struct: ...@1a2b3c`` of Thrift."""
    text = re.sub(r"\bshaded\.[\w.]*?\.(\w+(?:Exception|Error))\b", r"\1", text)
    return re.sub(r"\s*Struct: \S+@[0-9a-f]+", "", text).strip()


def _check_out_dir(out: str, what: str) -> None:
    """A report directory that cannot be written, said before Spark starts."""
    problem = write_problem(out, directory=True)
    if problem:
        raise ArchiveError(f"cannot write the {what} {out}: {problem}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return int(exc.code or 0)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "backtest":
            return _backtest(args)
        if args.command == "mobility":
            return _mobility(args)
        return _report(args)
    except SubscriptionError as exc:
        print(f"elvin-pipeline: bad subscription: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ArchiveError, TraceError) as exc:
        print(f"elvin-pipeline: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except JavaNotFoundError as exc:
        print(f"elvin-pipeline: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("elvin-pipeline: interrupted", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as exc:  # Spark failures: say what, exit 3
        log.debug("failure", exc_info=True)
        print(f"elvin-pipeline: {args.command} failed: {failure_reason(exc)} "
              "(--log-level debug shows more)", file=sys.stderr)
        return EXIT_FAILURE


def _backtest(args) -> int:
    from elvin.subscription import parse

    if args.sample < 0:
        print("elvin-pipeline: --sample must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    parse(args.expression)          # bad expression: exit 1 before starting Spark
    check_archive(args.archive)     # same for a missing or empty archive
    find_java()
    spark, _ = _start_spark(args.master, args.log_level)
    from elvin.pipeline.backtest import backtest

    with Progress(spark, "back-test"):
        result = backtest(spark, args.expression, args.archive, sample=args.sample)
    if args.json:
        print(result.dumps())
        return EXIT_OK
    print(_backtest_text(result, args.archive))
    return EXIT_OK


def _backtest_text(result, archive: str) -> str:
    from elvin.text import format_value

    share = f" ({result.matches / result.total:.2%} of {result.total})" if result.total else ""
    lines = [f"Expression: {result.expression}",
             f"Archive: {archive} ({result.total} notifications, "
             f"{len(result.per_hour)} hours)",
             f"Matches: {result.matches}{share}"]
    if result.withheld:
        lines.append(f"Not tested: {result.withheld} private notifications archived without "
                     "their attributes (elvind --archive-private keeps them)")
    busy = [(h, c) for h, c in result.per_hour if c]
    if busy:
        lines.append("Matches per hour (UTC, hours with matches):")
        lines.extend(f"  {h}  {c}" for h, c in busy)
    if result.sample:
        lines.append(f"Sample (first {len(result.sample)} matches):")
        for row in result.sample:
            attrs = ", ".join(f"{name}: {format_value(value)}"
                              for name, value in row["attributes"].items())
            when = row["time"].strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            lines.append(f"  {when} {row['producer'] or '-'}  {attrs}")
    return "\n".join(lines)


def _report(args) -> int:
    check_archive(args.archive)
    _check_out_dir(args.out, "report directory")
    find_java()
    spark, _ = _start_spark(args.master, args.log_level)
    from elvin.pipeline.report import report

    progress = Progress(spark, "report")
    with progress:
        result = report(spark, args.archive, args.out,
                        stage=lambda label: setattr(progress, "label", f"report: {label}"))
    if not result.charts:
        print("elvin-pipeline: matplotlib is not installed: the report has no charts "
              "(pip install matplotlib)", file=sys.stderr)
    if args.json:
        print(json.dumps({"summary": result.summary,
                          "files": [str(p) for p in result.files]}, indent=2,
                         default=str))
        return EXIT_OK
    print(_report_text(result.summary, result))
    return EXIT_OK


def _report_text(summary: dict[str, Any], result) -> str:
    lines = [f"Notifications: {summary['notifications']} in {summary['hours']} hours "
             f"({summary['first']} .. {summary['last']})",
             f"Producers: {summary['producers']}",
             f"Bytes: {summary['bytes']}",
             f"Matched nobody: {summary['matched_nobody']} "
             f"({summary['matched_nobody_share']:.2%})",
             f"Secure deliveries: {summary['secure']}",
             f"Private (for key holders only): {summary['private']}"
             + (f", {summary['withheld']} archived without their attributes"
                if summary["withheld"] else ""),
             f"Mean fan-out: {summary['mean_fanout']:.3f} clients",
             f"Groups: {summary['groups']}, attribute names: {summary['attribute_names']}",
             f"Report: {result.out_dir / 'index.html'}"]
    return "\n".join(lines)


def _mobility(args) -> int:
    if args.plots < 0:
        print("elvin-pipeline: --plots must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    check_traces(args.traces)       # bad directory or header: exit 1 before Spark
    _check_out_dir(args.out, "output directory")
    find_java()
    spark, _ = _start_spark(args.master, args.log_level)
    from elvin.pipeline.mobility import format_table, mobility

    progress = Progress(spark, "mobility")
    with progress:
        result = mobility(spark, args.traces, args.out, plot_runs=args.runs or None,
                          max_plots=args.plots,
                          stage=lambda label: setattr(progress, "label", f"mobility: {label}"))
    if result.plotted and not result.charts:
        print("elvin-pipeline: matplotlib is not installed: no plots", file=sys.stderr)
    if args.json:
        print(json.dumps({"groups": result.groups, "runs": result.runs,
                          "files": [str(p) for p in result.files]}, indent=2))
        return EXIT_OK
    print(format_table(result.groups))
    print(f"Runs: {len(result.runs)}, plotted: {len(result.plotted)}")
    print(f"Report: {result.out_dir / 'index.html'}")
    return EXIT_OK


def entry() -> None:  # console_scripts entry point
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()
