"""``elvind``: the Elvin 4 router, in the foreground.

::

    elvind [--config FILE] [flags]          run the router
    elvind --check-config [--config FILE]   check the configuration: "ok" or every problem
    elvind status [--status-file FILE | --config FILE] [--json]
    elvind reload [--status-file FILE | --config FILE]

Signals (``elvin.daemon.daemon_control``): SIGTERM/SIGINT stop, SIGHUP re-reads
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
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from elvin.cli_common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    fail,
    listen_error_reason,
    listen_error_status,
    os_error,
    os_error_status,
    setup_logging,
)
from elvin.daemon import sdnotify
from elvin.daemon.daemon_control import DaemonSignals, ReloadRecord
from elvin.errors import RouterStartError
from elvin.extras import ARCHIVE_MODULES, missing_extra_message
from elvin.router.arguments import (  # noqa: F401 - where callers found them
    VERSION,
    apply_federation_flags,
    build_parser,
    make_config,
)
from elvin.router.config import ConfigError, RouterConfig
from elvin.router.reload import apply_config

if TYPE_CHECKING:                 # imported when a router starts (the engine with it)
    from elvin.router.server import Router

#: seconds a thread holds the GIL while another waits for it (see _serve)
SWITCH_INTERVAL = 0.001

def _set_logging(level: str, log_file: str | None) -> None:
    setup_logging(level, log_file, prog="elvind")


async def reload_router(router: Router, args: argparse.Namespace,
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
    from elvin.certcheck import certificate_findings
    from elvin.router.gcpolicy import GcPolicy
    from elvin.router.metrics import MetricsServer, parse_metrics_address
    from elvin.router.server import Router
    from elvin.router.status import (
        StatusFile,
        link_states,
        other_router_pid,
        router_status,
        status_file_for,
    )

    log = logging.getLogger("elvin.router")
    router = Router(config)
    loop = asyncio.get_running_loop()
    metrics: MetricsServer | None = None
    status_file: StatusFile | None = None
    gc_policy: GcPolicy | None = None
    record = ReloadRecord()
    started = asyncio.Event()
    stopping: list[asyncio.Task[Any]] = []

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

    # the TLS files as a check finds them: an expired certificate or a key of
    # another one stops the start (exit 1), one expiring soon is warned about
    # here and in every status (elvin.certcheck)
    tls_errors, tls_warnings, certificates = certificate_findings(config)
    if tls_errors:
        raise RouterStartError(tls_errors[0], EXIT_USAGE)
    for warning in tls_warnings:
        log.warning("%s", warning)

    def snapshot() -> dict[str, Any]:
        return router_status(router, version=VERSION,
                             config_path=getattr(args, "config", None),
                             metrics_url=metrics.url if metrics else None,
                             reload=record.as_dict(), certificates=certificates)

    # before listening: a signal that comes as soon as the port answers must
    # find its handler (SIGHUP's and SIGUSR1's default is to kill)
    signals = DaemonSignals(loop, log, stop=request_stop, reload=reload, record=record,
                            on_reloaded=lambda: status_file.changed() if status_file else None)
    signals.install()
    router_started = False
    try:
        other = other_router_pid(config.status_file) if config.status_file else None
        if other is not None:       # before listening: the router must not half start
            raise RouterStartError(f"the status file {config.status_file} is in use by "
                                   f"elvind pid {other}: give each router its own "
                                   "status-file", EXIT_USAGE)
        if config.metrics:      # first: a port it cannot have stops it before the router
            host, port = parse_metrics_address(config.metrics)
            metrics = MetricsServer(host, port, snapshot)
            try:
                await metrics.start()
            except OSError as exc:
                raise RouterStartError(f"cannot listen for metrics on {config.metrics}: "
                                       f"{listen_error_reason(exc, port)}",
                                       listen_error_status(exc)) from None
        await router.start()
        router_started = True
        path = status_file_for(config, router.ports[0] if router.ports else None)
        other = other_router_pid(path)
        if other is not None:       # same port on another address: never share its file
            log.warning("the status file %s is in use by elvind pid %s: this router writes "
                        "none ('elvind status' will not find it; set status-file)", path, other)
        else:
            status_file = StatusFile(path, snapshot, watch=lambda: link_states(router))
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
        gc_policy = GcPolicy(loop, lambda: router.engine.weight + len(router.sessions))
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

    runner: Callable[[Coroutine[Any, Any, None]], None] = asyncio.run
    if config.use_uvloop:
        try:
            import uvloop

            def runner(coro: Coroutine[Any, Any, None]) -> None:
                return uvloop.run(coro)
        except ImportError:
            pass
    try:
        runner(_serve(config, args))
    except RouterStartError as exc:
        return fail("elvind", str(exc), exc.status)
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:  # the daemon's last resort: said, exit status 1
        logging.getLogger("elvin.router").debug("router failed", exc_info=True)
        return fail("elvind", f"{exc} (--log-level debug shows where)", EXIT_FAILURE)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
