"""Command-line tools speaking Avis's ``ec``/``ep`` text format.

Shared pieces: the options and key files, and the set-up every tool does
the same way before it works (checking the URL -- by the suite's rule,
``elvin.router_url`` -- and the subscription, reading keys and TLS
certificates, reporting a failure to connect, stopping on SIGINT/SIGTERM), so
that ``ec``, ``ep`` and ``elvin-archive`` say the same thing with the same
exit status (``elvin.cli_common``; a subscriber's life is
``elvin.tools.subscriber``).

Key files (``-P/--producer-key FILE``, ``-C/--consumer-key FILE``, both
repeatable) hold *raw* keys, in Avis's formats (read by ``elvin.keytext``,
as the console's key editor is):

* ``[00 de ad be ef]`` hex-coded bytes,
* ``"some characters"`` a string (UTF-8; backslash escapes the next character),
* ``#<any data>`` raw data: everything after the ``#`` up to the end of the
  file, taken as bytes exactly.

With the first two forms a file may hold several keys, one per line (blank
lines and lines starting with ``//`` are skipped). As in Avis, each key is
used in its own scheme (producer or consumer) and in the dual scheme; the
tools apply the SHA-1 transform where the scheme puts a public key
(``Keys.for_notification`` in ``ep``, ``Keys.for_subscription`` in ``ec``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elvin import __version__
from elvin.cli_common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ToolError,
    ToolParser,
    fail,
)
from elvin.client import ConnectionClosedError
from elvin.errors import ElvinError, SubscriptionError
from elvin.keys import Keys
from elvin.keytext import KeyTextError, parse_key_file
from elvin.router_url import add_router_argument, choose_router_url

if TYPE_CHECKING:
    import ssl

__all__ = ["CONNECT_ERRORS", "EXIT_FAILURE", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE",
           "KeyFileError", "ToolError", "ToolParser", "ToolSetup", "connect_failure", "fail",
           "prepare", "stop_on_signals", "tool_parser"]


class KeyFileError(ValueError):
    pass


def common_arguments(parser: argparse.ArgumentParser, insecure_help: str) -> None:
    add_router_argument(parser, what="Elvin router URI")
    parser.add_argument("-x", dest="secure", action="store_true", default=False,
                        help=insecure_help)
    parser.add_argument("-X", dest="secure", action="store_false",
                        help="allow insecure notifications (default)")
    parser.add_argument("-P", "--producer-key", "--producer-keys", dest="producer_keys",
                        metavar="FILE", action="append", default=[],
                        help="read raw producer key(s) from FILE (repeatable)")
    parser.add_argument("-C", "--consumer-key", "--consumer-keys", dest="consumer_keys",
                        metavar="FILE", action="append", default=[],
                        help="read raw consumer key(s) from FILE (repeatable)")
    parser.add_argument("--tls-ca", metavar="FILE",
                        help="for ssl URIs: trust the router certificates signed by (or "
                             "equal to) the PEM certificate(s) in FILE, instead of the "
                             "system's certificate authorities")
    parser.add_argument("--timeout", type=float, default=10, metavar="SECONDS",
                        help="connection timeout (default 10)")
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s (elvin-suite) {__version__}")


KEY_FORMATS = """\
key files hold raw keys: [00 de ad be ef] (hex), "string" (UTF-8), or #data
(the rest of the file, raw); hex and string forms may be one per line"""


def tool_parser(prog: str, description: str, insecure_help: str, epilog: str) -> ToolParser:
    """The parser of a tool that connects (``ec``, ``ep``, ``elvin-archive``):
    the shared options, and the key file formats before ``epilog``."""
    parser = ToolParser(prog=prog, description=description,
                        epilog=f"{KEY_FORMATS}\n\n{epilog}",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(parser, insecure_help)
    return parser


def tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """An ssl.SSLContext for ``--tls-ca``, or None for the default."""
    if not getattr(args, "tls_ca", None):
        return None
    import ssl
    try:
        return ssl.create_default_context(cafile=args.tls_ca)
    except (OSError, ssl.SSLError) as exc:
        raise KeyFileError(f"cannot read TLS certificates from {args.tls_ca!r}: {exc}") \
            from None


def read_key_file(path: str) -> list[bytes]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path!r}: {exc.strerror or exc}") from None
    try:
        return parse_key_file(data, path)
    except KeyTextError as exc:
        raise KeyFileError(str(exc)) from None


def load_keys(args: argparse.Namespace) -> tuple[list[bytes], list[bytes]]:
    producer = [k for path in args.producer_keys for k in read_key_file(path)]
    consumer = [k for path in args.consumer_keys for k in read_key_file(path)]
    return producer, consumer


def check_subscription(expression: str) -> None:
    """``ToolError`` (usage, with the error's position) for an expression
    the router would refuse, so that it is said before connecting."""
    from elvin.subscription import parse
    try:
        parse(expression)
    except SubscriptionError as exc:
        raise ToolError(f"bad subscription: {exc}") from None


def keys_and_tls(args: argparse.Namespace, scheme: Callable[..., Keys]
                 ) -> tuple[Keys | None, ssl.SSLContext | None]:
    """The keys of ``-P``/``-C`` through ``scheme`` (``Keys.for_subscription``
    for consumers, ``Keys.for_notification`` for producers; None without key
    files) and the ``--tls-ca`` SSL context (None for the default).
    ``ToolError`` (usage) for an unreadable file, or ``-x`` without keys."""
    try:
        producer, consumer = load_keys(args)
        tls = tls_context(args)
    except KeyFileError as exc:
        raise ToolError(str(exc)) from None
    if args.secure and not (producer or consumer):
        raise ToolError("-x (secure only) needs keys: give -P FILE or -C FILE")
    keys = scheme(producer=producer, consumer=consumer) if producer or consumer else None
    return keys, tls


@dataclass(frozen=True)
class ToolSetup:
    """What a tool checked before connecting: where to, with which keys."""

    url: str
    keys: Keys | None
    tls: ssl.SSLContext | None


def prepare(args: argparse.Namespace, scheme: Callable[..., Keys],
            subscription: str | None = None) -> ToolSetup:
    """The set-up every tool does before it connects: the router URL (``-e``,
    ``$ELVIN_URL``, the default; ``elvin.router_url``), the subscription if
    there is one, the keys through ``scheme`` (see ``keys_and_tls``) and the
    TLS context; ``ToolError`` (usage) for the first that is wrong."""
    url = choose_router_url(args.elvin, what="Elvin URI").url
    if subscription is not None:
        check_subscription(subscription)
    keys, tls = keys_and_tls(args, scheme)
    return ToolSetup(url, keys, tls)


#: what connecting (``elvin.client.connect``, ``elvin.sync.connect``) may raise
CONNECT_ERRORS = (OSError, TimeoutError, ElvinError)


def connect_failure(url: str, exc: BaseException, unreachable: str = "") -> ToolError:
    """What to say, and the exit status, when connecting to ``url`` raised
    ``exc`` (one of ``CONNECT_ERRORS``): 2 if the router could not be reached
    or closed the connection (``unreachable`` goes before the first), 3 for
    anything else the router answered."""
    if isinstance(exc, (OSError, TimeoutError)):    # ConnectError is an OSError
        return ToolError(f"{unreachable}{exc}", EXIT_UNREACHABLE)
    if isinstance(exc, ConnectionClosedError):
        return ToolError(f"cannot connect to {url}: {exc}", EXIT_UNREACHABLE)
    return ToolError(f"cannot connect to {url}: {exc}", EXIT_FAILURE)


def stop_on_signals() -> asyncio.Event:
    """An event that SIGINT and SIGTERM set (where the running loop can
    handle signals), for the tools that run until they are told to stop."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop
