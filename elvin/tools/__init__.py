"""Command-line tools speaking Avis's ``ec``/``ep`` text format.

Shared pieces: the Elvin URL default, key files, the argument parser that
exits with status 1 on usage errors (the suite's convention, DESIGN.md).

Key files (``-P/--producer-key FILE``, ``-C/--consumer-key FILE``, both
repeatable) hold *raw* keys, in Avis's formats:

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
import os
import sys

from elvin import __version__
from elvin.client import DEFAULT_URL

EXIT_OK = 0
EXIT_USAGE = 1
EXIT_UNREACHABLE = 2
EXIT_FAILURE = 3


class KeyFileError(ValueError):
    pass


class ToolParser(argparse.ArgumentParser):
    """argparse with the suite's exit status for usage errors (1, not 2)."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def common_arguments(parser: argparse.ArgumentParser, insecure_help: str) -> None:
    parser.add_argument("-e", "--elvin", metavar="URL",
                        help="Elvin router URI, e.g. elvin://host:port (default: $ELVIN_URL, "
                             f"else {DEFAULT_URL})")
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


def tls_context(args: argparse.Namespace):
    """An ssl.SSLContext for ``--tls-ca``, or None for the default."""
    if not getattr(args, "tls_ca", None):
        return None
    import ssl
    try:
        return ssl.create_default_context(cafile=args.tls_ca)
    except (OSError, ssl.SSLError) as exc:
        raise KeyFileError(f"cannot read TLS certificates from {args.tls_ca!r}: {exc}") \
            from None


def elvin_url(args: argparse.Namespace) -> str:
    return args.elvin or os.environ.get("ELVIN_URL") or DEFAULT_URL


def read_key_file(path: str) -> list[bytes]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path!r}: {exc.strerror or exc}") from None
    return parse_keys(data, path)


def parse_keys(data: bytes, path: str = "<keys>") -> list[bytes]:
    stripped = data.lstrip()
    if stripped.startswith(b"#"):
        key = stripped[1:]
        if not key:
            raise KeyFileError(f"key file {path!r}: empty raw key after '#'")
        return [key]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KeyFileError(f"key file {path!r}: not UTF-8 text (use #<raw data> for binary "
                           f"keys): {exc}") from None
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        where = f"key file {path!r}, line {number}"
        if line.startswith("[") and line.endswith("]"):
            digits = "".join(line[1:-1].split())
            try:
                key = bytes.fromhex(digits)
            except ValueError:
                raise KeyFileError(f"{where}: bad hex key {line!r}") from None
        elif len(line) >= 2 and line[0] == '"' and line.endswith('"'):
            out, escaped = [], False
            for ch in line[1:-1]:
                if escaped:
                    out.append(ch)
                    escaped = False
                elif ch == "\\":
                    escaped = True
                else:
                    out.append(ch)
            key = "".join(out).encode("utf-8")
        else:
            raise KeyFileError(f"{where}: expected [hex bytes], \"string\" or #raw data, "
                               f"not {line[:40]!r}")
        if not key:
            raise KeyFileError(f"{where}: empty key")
        keys.append(key)
    if not keys:
        raise KeyFileError(f"key file {path!r} holds no key")
    return keys


def load_keys(args: argparse.Namespace) -> tuple[list[bytes], list[bytes]]:
    producer = [k for path in args.producer_keys for k in read_key_file(path)]
    consumer = [k for path in args.consumer_keys for k in read_key_file(path)]
    return producer, consumer


def fail(prog: str, message: str, status: int) -> int:
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return status
