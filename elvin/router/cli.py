"""``elvind``: the Elvin 4 router, in the foreground.

::

    elvind [--config FILE] [flags]          run the router
    elvind --check-config [--config FILE]   check the configuration: "ok" or every problem
    elvind status [--status-file FILE | --config FILE] [--json]
    elvind reload [--status-file FILE | --config FILE]

Signals (``elvin.daemon_control``): SIGTERM/SIGINT stop, SIGHUP re-reads
the configuration and applies what can change while running
(``elvin.router.reload``) and reopens the log file, SIGUSR1 only reopens the
log file. Under systemd (``Type=notify``) it says READY once listening.

Exit codes: 0 after a clean stop, or ``--check-config`` found nothing; 1 for
a usage or configuration error (bad flag, bad URI, bad TOML: the message
names the file and line; a file or directory it names that cannot be read
or written, ``cli_common.os_error_status``); 3 for any other failure (e.g.
an address already in use: the message names it). ``status`` exits 0 when
the router runs, 3 when it does not; ``reload`` 0 when the router applied
the file, 1 when it refused it, 3 when it cannot be asked.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from elvin import sdnotify
from elvin.cli_common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    ToolParser,
    add_log_level_argument,
    fail,
    os_error,
    os_error_status,
    setup_logging,
)
from elvin.daemon_control import DaemonSignals, ReloadRecord
from elvin.errors import RouterStartError
from elvin.extras import ARCHIVE_MODULES, missing_extra_message
from elvin.router.config import ConfigError, RouterConfig, load_config
from elvin.router.reload import apply_config

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
               "log-level, log-file, tls-cert, tls-key, stats-interval, [options], "
               "include...) and are overridden by flags. Other commands: 'elvind status' "
               "(what the running router does), 'elvind reload' (SIGHUP, with its "
               "verdict). Stops cleanly on SIGTERM/SIGINT; SIGHUP reloads the "
               "configuration and reopens the log file, SIGUSR1 only reopens it.")
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file")
    parser.add_argument("--check-config", action="store_true",
                        help="check the configuration (file and flags) as a start would, "
                             "without listening or contacting anyone; print 'ok' or every "
                             "problem, exit 0 or 1")
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
    parser.add_argument("--status-file", metavar="FILE",
                        help="where to keep the status 'elvind status' reads (default "
                             "/run/elvind/status.json for root and the systemd unit, else "
                             "$XDG_RUNTIME_DIR/elvind/status.json)")
    parser.add_argument("--metrics", metavar="HOST:PORT",
                        help="serve the router's figures at http://HOST:PORT/metrics in the "
                             "Prometheus text format, e.g. 127.0.0.1:9917")
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
        "elvin-domain apply) sets filters per link. SIGHUP applies a changed table.")
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


def make_config(args: argparse.Namespace,
                problems: list[str] | None = None) -> RouterConfig:
    """The configuration ``args`` say: ``--config`` (and what it includes),
    then the flags over it. ``ConfigError`` for the first problem, or with a
    ``problems`` list every problem appended there (``--check-config``)."""
    path = getattr(args, "config", None)
    config = load_config(path, problems=problems) if path else RouterConfig()
    if getattr(args, "listen", None):
        config.listen = list(args.listen)
    for name in _FLAG_SETTINGS:
        value = getattr(args, name, None)
        if value is not None:
            setattr(config, name, value)
    source = f"{path} + command line" if path else "command line"
    try:
        apply_federation_flags(config, args)
    except ConfigError as exc:
        if problems is None:
            raise
        problems.append(str(exc))
        return config
    if problems is not None:
        problems.extend(config.problems(source, _text_of(path)))
        return config
    return config.validate(source, _text_of(path))


#: flags that set the RouterConfig attribute of the same name
_FLAG_SETTINGS = ("log_level", "log_file", "tls_cert", "tls_key", "stats_interval",
                  "archive", "discovery", "discovery_scope", "discovery_default",
                  "discovery_address", "discovery_port", "discovery_interface",
                  "max_connections", "redirect_to", "mobility", "mobility_quota",
                  "mobility_expiry", "mobility_key_file", "quench", "status_file", "metrics")


def _text_of(path: str | None) -> str:
    """The main file's text, for pointing at a key's line (empty if unread)."""
    if not path:
        return ""
    try:
        return Path(path).expanduser().read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _set_logging(level: str, log_file: str | None) -> None:
    setup_logging(level, log_file, prog="elvind")


async def reload_router(router, args: argparse.Namespace,
                        set_logging: Callable[[str, str | None], None] = _set_logging
                        ) -> tuple[bool, str]:
    """SIGHUP: re-read ``--config`` (and the flags over it) and apply what
    can change to the running router (``elvin.router.reload``); a file with
    an error changes nothing. ``(applied, message)``."""
    if not getattr(args, "config", None):
        return True, "no --config file to re-read (the log file was reopened)"
    try:
        new = make_config(args)
    except ConfigError as exc:
        return False, str(exc)
    if new.archive and new.archive != router.config.archive:
        missing = missing_extra_message("elvind --archive", "pipeline", ARCHIVE_MODULES)
        if missing:
            return False, missing
    return await apply_config(router, new, set_logging)


async def _serve(config: RouterConfig, args: argparse.Namespace | None = None) -> None:
    from elvin.router.gcpolicy import GcPolicy
    from elvin.router.metrics import MetricsServer, parse_metrics_address
    from elvin.router.server import Router
    from elvin.router.status import StatusFile, default_status_file, router_status

    log = logging.getLogger("elvin.router")
    router = Router(config)
    loop = asyncio.get_running_loop()
    metrics: MetricsServer | None = None
    status_file: StatusFile | None = None
    gc_policy: GcPolicy | None = None
    record = ReloadRecord()
    started = asyncio.Event()
    stopping: list[asyncio.Task] = []

    def request_stop(_signame: str) -> None:
        if not stopping:
            stopping.append(loop.create_task(_stop_when_started()))

    async def _stop_when_started() -> None:
        await started.wait()
        await router.stop()

    async def reload() -> tuple[bool, str]:
        await started.wait()
        if args is None:
            return True, "nothing to reload"
        return await reload_router(router, args)

    def snapshot() -> dict:
        return router_status(router, version=VERSION,
                             config_path=getattr(args, "config", None),
                             metrics_url=metrics.url if metrics else None,
                             reload=record.as_dict())

    # before listening: a signal that comes as soon as the port answers must
    # find its handler (SIGHUP's and SIGUSR1's default is to kill)
    signals = DaemonSignals(loop, log, stop=request_stop, reload=reload, record=record,
                            on_reloaded=lambda: status_file.changed() if status_file else None)
    signals.install()
    router_started = False
    try:
        await router.start()
        router_started = True
        if config.metrics:
            host, port = parse_metrics_address(config.metrics)
            metrics = MetricsServer(host, port, snapshot)
            try:
                await metrics.start()
            except OSError as exc:
                raise RouterStartError(f"cannot listen for metrics on {config.metrics}: "
                                       f"{exc.strerror or exc}") from None
        path = config.status_file or default_status_file()
        status_file = StatusFile(path, snapshot)
        try:
            status_file.start()
        except OSError as exc:
            if config.status_file:      # named: the admin wants it, so it must work
                raise RouterStartError(f"cannot write the status file {path}: "
                                       f"{exc.strerror or exc}",
                                       os_error_status(exc)) from None
            log.warning("cannot write the status file %s: %s ('elvind status' will not "
                        "find this router; set status-file)", path, exc.strerror or exc)
            status_file = None
        # elvind owns its process: no full collection pass over a big heap (gcpolicy)
        gc_policy = GcPolicy(loop, lambda: len(router.engine) + len(router.sessions))
        gc_policy.install()
        # The compile worker shares the GIL with the loop, and a loop that gave
        # it up for a system call waits up to the switch interval to have it back:
        # 5 ms by default, for each read and write of every client's round trip
        # while a long expression compiles. elvind owns its process: 1 ms.
        sys.setswitchinterval(SWITCH_INTERVAL)
        started.set()
        fed_urls = router.federation.urls if router.federation is not None else []
        line = f"elvind {VERSION} listening on {' '.join(router.urls + fed_urls)}"
        print(line, file=sys.stderr, flush=True)
        if config.log_file:      # the log file gets the line too (stderr had it once)
            log.info("%s", line)
        if router.mobility is not None:
            print(f"elvind: mobility proxy {router.mobility.id!r} (public key "
                  f"{router.mobility.public_key.hex()})", file=sys.stderr, flush=True)
        if metrics is not None:
            log.info("metrics at %s", metrics.url)
        sdnotify.ready(line)
        await router.serve_forever()
        if stopping:
            await stopping[0]
    finally:
        if not started.is_set():      # a stop asked for during a failed start
            for task in stopping:
                task.cancel()
        started.set()
        await signals.close()
        await asyncio.gather(*stopping, return_exceptions=True)
        if gc_policy is not None:
            gc_policy.uninstall()
        if metrics is not None:
            await metrics.stop()
        if status_file is not None:
            await status_file.close()
        if router_started:
            await router.stop()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("status", "reload"):
        from elvin.router.admin import status_main
        return status_main(argv[0], argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.check_config:
        from elvin.router.admin import check_config
        return check_config(args)
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
        return os_error("open the log file", exc, config.log_file).report("elvind")

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
        return fail("elvind", str(exc), exc.status)
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:
        logging.getLogger("elvin.router").debug("router failed", exc_info=True)
        return fail("elvind", f"{exc} (--log-level debug shows where)", EXIT_FAILURE)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
