"""``elvind``: the Elvin 4 router, in the foreground.

Exit codes: 0 after a clean stop (SIGTERM/SIGINT), 1 for a usage or
configuration error (bad flag, bad URI, bad TOML: the message names the file
and line), 3 for any other failure (e.g. an address already in use: the
message names it).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from elvin.router.config import LOG_LEVELS, ConfigError, RouterConfig, load_config

EXIT_OK, EXIT_USAGE, EXIT_FAILURE = 0, 1, 3

try:
    from importlib.metadata import version as _dist_version

    VERSION = _dist_version("elvin-suite")
except Exception:  # pragma: no cover - not installed
    VERSION = "0.1.0"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors exit 1, not argparse's 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="elvind",
        description="Elvin 4 router: content-based publish/subscribe over the Elvin "
                    "client protocol 4.0 (XDR over TCP or TLS).",
        epilog="Settings come from --config FILE (TOML, keys as the flags: listen, "
               "log-level, log-file, tls-cert, tls-key, stats-interval, [options]...) "
               "and are overridden by flags. Stops cleanly on SIGTERM/SIGINT.")
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file")
    parser.add_argument("--listen", metavar="URI", action="append",
                        help="listen on this Elvin URI (repeatable; default "
                             "elvin://127.0.0.1:2917), e.g. elvin://0.0.0.0:2917 or "
                             "elvin:4.0/ssl,none,xdr/0.0.0.0:2918")
    parser.add_argument("--log-level", choices=LOG_LEVELS, type=str.lower,
                        help="log level (default info)")
    parser.add_argument("--log-file", metavar="FILE", help="log here instead of stderr")
    parser.add_argument("--tls-cert", metavar="FILE",
                        help="PEM certificate (chain) for ssl listen URIs")
    parser.add_argument("--tls-key", metavar="FILE", help="PEM private key for ssl URIs")
    parser.add_argument("--stats-interval", metavar="SECONDS", type=float,
                        help="seconds between Elvin-Router-Stats notifications (default 5)")
    parser.add_argument("--version", action="version", version=f"elvind {VERSION}")
    return parser


def make_config(args: argparse.Namespace) -> RouterConfig:
    config = load_config(args.config) if args.config else RouterConfig()
    if args.listen:
        config.listen = list(args.listen)
    for name in ("log_level", "log_file", "tls_cert", "tls_key", "stats_interval"):
        value = getattr(args, name)
        if value is not None:
            setattr(config, name, value)
    return config.validate("command line" if not args.config else
                           f"{args.config} + command line")


def setup_logging(config: RouterConfig) -> None:
    handler: logging.Handler
    if config.log_file:
        handler = logging.FileHandler(config.log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s elvind %(levelname)s %(name)s: "
                                           "%(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.log_level.upper())


async def _serve(config: RouterConfig) -> None:
    from elvin.router.server import Router

    router = Router(config)
    await router.start()
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task] = []

    def request_stop(signame: str) -> None:
        if not stopping:
            logging.getLogger("elvin.router").info("%s received: shutting down", signame)
            stopping.append(loop.create_task(router.stop()))

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, request_stop, sig.name)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
    print(f"elvind {VERSION} listening on {' '.join(router.urls)}", file=sys.stderr,
          flush=True)
    await router.serve_forever()
    if stopping:
        await stopping[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = make_config(args)
    except ConfigError as exc:
        print(f"elvind: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        setup_logging(config)
    except OSError as exc:
        print(f"elvind: cannot open log file {config.log_file!r}: {exc.strerror}",
              file=sys.stderr)
        return EXIT_USAGE
    from elvin.router.server import RouterStartError

    runner = asyncio.run
    if config.use_uvloop:
        try:
            import uvloop

            def runner(coro):  # noqa: F811 - uvloop when installed
                return uvloop.run(coro)
        except ImportError:
            pass
    try:
        runner(_serve(config))
    except RouterStartError as exc:
        print(f"elvind: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:
        logging.getLogger("elvin.router").exception("router failed")
        print(f"elvind: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
