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

from elvin.cli_common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    ToolParser,
    add_log_level_argument,
    setup_logging,
)
from elvin.extras import ARCHIVE_MODULES, missing_extra_message
from elvin.router.config import ConfigError, RouterConfig, load_config

#: seconds a thread holds the GIL while another waits for it (see _serve)
SWITCH_INTERVAL = 0.001

try:
    from importlib.metadata import version as _dist_version

    VERSION = _dist_version("elvin-suite")
except Exception:  # pragma: no cover - not installed
    VERSION = "0.1.0"


def build_parser() -> argparse.ArgumentParser:
    parser = ToolParser(
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
    add_log_level_argument(parser, None, "info")
    parser.add_argument("--log-file", metavar="FILE", help="log here instead of stderr")
    parser.add_argument("--tls-cert", metavar="FILE",
                        help="PEM certificate (chain) for ssl listen URIs")
    parser.add_argument("--tls-key", metavar="FILE", help="PEM private key for ssl URIs")
    parser.add_argument("--stats-interval", metavar="SECONDS", type=float,
                        help="seconds between Elvin-Router-Stats notifications (default 5)")
    parser.add_argument("--archive", metavar="DIR",
                        help="write every routed notification to a traffic archive "
                             "(Parquet, partitioned by hour) in DIR, for elvin-pipeline")
    parser.add_argument("--no-quench", dest="quench", action="store_false", default=None,
                        help="emulate a router without quench (protocol subset C), as "
                             "Avis is: quench requests get Nack NOT_IMPL (2007) \"Quench "
                             "not supported\"; for testing clients' fallbacks")
    discovery = parser.add_argument_group(
        "discovery and redirection",
        "Router discovery (SvrRqst/SvrAdvt over UDP, on by default) advertises the "
        "listen URIs; clients beyond --max-connections are redirected (Disconn reason 2).")
    discovery.add_argument("--no-discovery", dest="discovery", action="store_false",
                           default=None, help="do not answer router discovery")
    discovery.add_argument("--discovery-scope", metavar="NAME",
                           help="scope name to advertise (default: none)")
    discovery.add_argument("--no-discovery-default", dest="discovery_default",
                           action="store_false", default=None,
                           help="do not advertise as a default router (only clients "
                                "asking for --discovery-scope find it)")
    discovery.add_argument("--discovery-address", metavar="ADDRESS",
                           help="multicast group, or a unicast address to answer on "
                                "(default 224.4.0.1)")
    discovery.add_argument("--discovery-port", metavar="PORT", type=int,
                           help="UDP port (default 2917)")
    discovery.add_argument("--discovery-interface", metavar="ADDRESS",
                           help="local IPv4 address to multicast on (default: the system's)")
    discovery.add_argument("--max-connections", metavar="N", type=int,
                           help="connected clients beyond N are redirected to --redirect-to, "
                                "or refused without it (default 0: no limit)")
    discovery.add_argument("--redirect-to", metavar="URI",
                           help="where clients beyond --max-connections are sent")
    mobility = parser.add_argument_group(
        "mobility", "A mobility proxy (elvin.mobility) buffers for clients that move out "
        "and hands the buffer over when they move in, here or at another router.")
    mobility.add_argument("--mobility", dest="mobility", action="store_true", default=None,
                          help="run a mobility proxy inside the router")
    mobility.add_argument("--mobility-quota", metavar="N", type=int,
                          help="most notifications buffered per client (default 10000)")
    mobility.add_argument("--mobility-expiry", metavar="SECONDS", type=float,
                          help="seconds an unclaimed buffer is kept (default 3600)")
    mobility.add_argument("--mobility-key-file", metavar="FILE",
                          help="the proxy's raw private key (the file's bytes, as "
                               "elvin-mobility-proxy --key-file): a stable public key "
                               "that clients can pin (default: a new random key at "
                               "each start)")
    federation = parser.add_argument_group(
        "federation", "Links to other routers (Elvin Federation Protocol, ewaf://host:port, "
        "default port 2916); the [federation] table of --config (as written by "
        "elvin-domain apply) sets filters per link. SIGHUP re-reads that table.")
    federation.add_argument("--federation-listen", metavar="URI", action="append",
                            help="accept federation links on this ewaf URI (repeatable)")
    federation.add_argument("--federation-connect", metavar="URI", action="append",
                            help="link to the router at this ewaf URI, everything allowed "
                                 "both ways (repeatable)")
    federation.add_argument("--federation-domain", metavar="NAME",
                            help="this router's federation domain (unique; default: host "
                                 "name and process)")
    federation.add_argument("--federation-accept-any", action="store_true", default=None,
                            help="accept links from routers not listed in [federation] "
                                 "accept (everything allowed both ways)")
    federation.add_argument("--federation-tls-ca", metavar="FILE",
                            help="PEM CA certificate(s) to verify routers dialled over TLS "
                                 "(ewaf:1.0/ssl,none,xdr/host:port); default: the system's "
                                 "trust store")
    parser.add_argument("--version", action="version", version=f"elvind {VERSION}")
    return parser


def apply_federation_flags(config: RouterConfig, args: argparse.Namespace) -> RouterConfig:
    """The --federation-* flags over the file's [federation] table."""
    listen = getattr(args, "federation_listen", None)
    connect = getattr(args, "federation_connect", None)
    domain = getattr(args, "federation_domain", None)
    accept_any = getattr(args, "federation_accept_any", None)
    tls_ca = getattr(args, "federation_tls_ca", None)
    if not (listen or connect or domain or accept_any or tls_ca):
        return config
    import dataclasses

    from elvin.federation.config import ConnectSpec, FederationConfig

    fed = dataclasses.replace(config.federation) if config.federation else FederationConfig()
    if listen:
        fed.listen = list(listen)
    if connect:
        fed.connect = list(fed.connect) + [ConnectSpec(url) for url in connect]
    if domain:
        fed.router_domain = domain
    if accept_any:
        fed.accept_any = True
    if tls_ca:
        fed.tls_ca = tls_ca
    config.federation = fed
    return config


def make_config(args: argparse.Namespace) -> RouterConfig:
    config = load_config(args.config) if args.config else RouterConfig()
    if args.listen:
        config.listen = list(args.listen)
    for name in ("log_level", "log_file", "tls_cert", "tls_key", "stats_interval",
                 "archive", "discovery", "discovery_scope", "discovery_default",
                 "discovery_address", "discovery_port", "discovery_interface",
                 "max_connections", "redirect_to",
                 "mobility", "mobility_quota", "mobility_expiry", "mobility_key_file",
                 "quench"):
        value = getattr(args, name)
        if value is not None:
            setattr(config, name, value)
    apply_federation_flags(config, args)
    return config.validate("command line" if not args.config else
                           f"{args.config} + command line")


async def reload_federation(router, args: argparse.Namespace) -> bool:
    """SIGHUP: re-read --config and apply its [federation] table (plus the
    --federation-* flags) to the running router; a bad file changes nothing."""
    log = logging.getLogger("elvin.router")
    if not getattr(args, "config", None):
        log.warning("SIGHUP: no --config file to reload")
        return False
    try:
        config = apply_federation_flags(load_config(args.config), args)
        config.validate(f"{args.config} + command line")
    except ConfigError as exc:
        log.error("SIGHUP: %s; keeping the running federation configuration", exc)
        return False
    log.info("SIGHUP: reloading the federation configuration from %s", args.config)
    await router.reconfigure_federation(config.federation)
    return True


async def _serve(config: RouterConfig, args: argparse.Namespace | None = None) -> None:
    from elvin.router.gcpolicy import GcPolicy
    from elvin.router.server import Router

    router = Router(config)
    await router.start()
    loop = asyncio.get_running_loop()
    # elvind owns its process: no full collection pass over a big heap (gcpolicy)
    gc_policy = GcPolicy(loop, lambda: len(router.engine) + len(router.sessions))
    gc_policy.install()
    # The compile worker shares the GIL with the loop, and a loop that gave
    # it up for a system call waits up to the switch interval to have it back:
    # 5 ms by default, for each read and write of every client's round trip
    # while a long expression compiles. elvind owns its process: 1 ms.
    sys.setswitchinterval(SWITCH_INTERVAL)
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
    reloads: set[asyncio.Task] = set()

    def request_reload() -> None:
        if args is not None and not stopping:
            task = loop.create_task(reload_federation(router, args))
            reloads.add(task)
            task.add_done_callback(reloads.discard)

    try:
        loop.add_signal_handler(signal.SIGHUP, request_reload)
    except (NotImplementedError, RuntimeError, AttributeError):  # pragma: no cover
        pass
    fed_urls = router.federation.urls if router.federation is not None else []
    print(f"elvind {VERSION} listening on {' '.join(router.urls + fed_urls)}",
          file=sys.stderr, flush=True)
    if router.mobility is not None:
        print(f"elvind: mobility proxy {router.mobility.id!r} (public key "
              f"{router.mobility.public_key.hex()})", file=sys.stderr, flush=True)
    try:
        await router.serve_forever()
        if stopping:
            await stopping[0]
    finally:
        gc_policy.uninstall()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = make_config(args)
    except ConfigError as exc:
        print(f"elvind: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if config.archive is not None:
        # the archive writer is pyarrow's: say so now, not from its child process
        missing = missing_extra_message("elvind --archive", "pipeline", ARCHIVE_MODULES)
        if missing:
            print(missing, file=sys.stderr)
            return EXIT_USAGE
    try:
        setup_logging(config.log_level, config.log_file, prog="elvind")
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
        runner(_serve(config, args))
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
