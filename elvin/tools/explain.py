"""elvin-explain: why a subscription does or does not match notifications.

::

    ec -e elvin://host 'require(Symbol)' > seen.txt
    elvin-explain 'Price < 10 && Symbol == "ACME"' < seen.txt
    router index: value index: Symbol == "ACME"; then checked: Price up to 10

    notification 1 (line 1): false — does not match
    ✗ false   (Price < 10) && (Symbol == "ACME")
      ✗ false   Price < 10                     Price = 12.5
      ✓ true    Symbol == "ACME"

Notifications are read in the ``elvin.text`` format that ``ec`` prints and
``ep`` reads (``---`` between them; ``$time`` lines are ignored). For each,
every sub-expression's result (true, false or bottom) and why it is not
true (a missing attribute, a value of the wrong type, the values). The
results are the reference interpreter's (``elvin.subscription.explain``).

The first line says where a router's index files the subscription
(``explain.index_placement``): in a value, range, prefix or suffix index it
is evaluated only for the notifications that meet that condition; in the
name index ("scanned") for every notification holding the attribute, which
is what makes thousands of ``regex`` or ``contains`` subscriptions slow.
``--index`` prints only that, without reading notifications.

Exit status: 0 when every notification was explained, 1 for a bad
expression or bad input (one line naming what and where).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

from elvin.cli_common import EXIT_OK, EXIT_USAGE, ToolParser, fail
from elvin.errors import SubscriptionError
from elvin.subscription import parse
from elvin.subscription.explain import explain, format_explanation, index_placement
from elvin.text import NotificationReader, TextFormatError

PROG = "elvin-explain"


def build_parser() -> ToolParser:
    parser = ToolParser(prog=PROG, description="Explain, clause by clause, whether a "
                        "subscription matches each notification read from stdin (ec/ep "
                        "text format).")
    parser.add_argument("expression", help="the subscription expression")
    parser.add_argument("file", nargs="?", help="read notifications from FILE, not stdin")
    parser.add_argument("--index", action="store_true",
                        help="only say where a router's index files the subscription "
                             "(which notifications it is evaluated for)")
    return parser


def _index_lines(tree) -> list[str]:
    lines = index_placement(tree)
    if len(lines) == 1:
        return [f"router index: {lines[0]}"]
    return ["router index: filed in several places; evaluated for a notification that "
            "meets one of", *(f"  {line}" for line in lines)]


def explain_index(expression: str, out: TextIO) -> int:
    """Print where a router's index files ``expression``; the exit status."""
    try:
        tree = parse(expression)
    except SubscriptionError as exc:
        return fail(PROG, f"bad subscription: {exc}", EXIT_USAGE)
    print("\n".join(_index_lines(tree)), file=out)
    return EXIT_OK


def explain_stream(expression: str, lines: Iterable[str], out: TextIO) -> int:
    """Explain each notification in ``lines``; returns the exit status."""
    try:
        tree = parse(expression)
    except SubscriptionError as exc:
        return fail(PROG, f"bad subscription: {exc}", EXIT_USAGE)
    reader = NotificationReader()
    count = 0
    start = 1
    print("\n".join(_index_lines(tree)), file=out)
    print(file=out)

    def show(notification: dict) -> None:
        nonlocal count
        count += 1
        steps = explain(tree, notification)
        verdict = "matches" if steps[0].result else "does not match"
        print(f"notification {count} (line {start}): {steps[0].word} — {verdict}", file=out)
        print(format_explanation(steps), file=out)
        print(file=out, flush=True)

    try:
        for line in lines:
            if not reader.in_notification:
                start = reader.line_number + 1
            notification = reader.feed(line)
            if notification is not None:
                show(notification)
        notification = reader.finish()
        if notification is not None:
            show(notification)
    except UnicodeDecodeError as exc:
        return fail(PROG, f"line {reader.line_number + 1}: input is not UTF-8 ({exc})",
                    EXIT_USAGE)
    except TextFormatError as exc:
        return fail(PROG, str(exc), EXIT_USAGE)
    if count == 0:
        return fail(PROG, "no notification in the input", EXIT_USAGE)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.index:
        return explain_index(args.expression, sys.stdout)
    if args.file is None:
        return explain_stream(args.expression, sys.stdin, sys.stdout)
    try:
        with open(args.file, encoding="utf-8") as stream:
            return explain_stream(args.expression, stream, sys.stdout)
    except OSError as exc:
        return fail(PROG, f"cannot read {args.file}: {exc.strerror or exc}", EXIT_USAGE)


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
