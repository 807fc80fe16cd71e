"""``tickertape``: command line, startup and shutdown.

The router URL comes from ``--elvin``, else ``ELVIN_URL``, else the config
file, else a router found by discovery (``elvin.discovery``), else
``elvin://127.0.0.1:2917``. With none of these and no router answering
there, the app starts the bundled router itself (in-process, on port
2917) so that ``make run`` works on a bare machine; other local clients can
use it while the ticker runs.

Exit codes (docs/architecture.md): 0 ok, 1 usage or input error (bad flag, URL or config
file), 2 cannot reach the router (only with ``--screenshot``, which must not
wait forever), 3 other failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

from elvin_apps.tickertape import __version__

log = logging.getLogger("elvin_apps.tickertape")

DEFAULT_URL = "elvin://127.0.0.1:2917"
DEFAULT_PORT = 2917
EXIT_OK, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_FAILURE = 0, 1, 2, 3
SCREENSHOT_CONNECT_TIMEOUT = 5.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickertape",
        description="A scrolling chat and news ticker for Elvin (Tickertape Chat Protocol 3).",
        epilog="Router: --elvin, else $ELVIN_URL, else the config file, else "
               f"{DEFAULT_URL} (started in-process if nothing answers there). "
               "Shortcuts: Ctrl+N new message, Ctrl+R reply, Ctrl+H history, "
               "Ctrl+G groups, Ctrl+Q quit.")
    parser.add_argument("--elvin", "-e", metavar="URL", help="Elvin router URL")
    parser.add_argument("--config", metavar="FILE",
                        help="TOML config file (default: the platform config dir, "
                             "e.g. ~/.config/elvin/tickertape.toml)")
    parser.add_argument("--user", metavar="NAME", help="your name in From (default user@host)")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="where the history is kept (default: the platform data dir)")
    parser.add_argument("--no-history", action="store_true", help="keep no message log")
    parser.add_argument("--screenshot", metavar="FILE",
                        help="render the main window to a PNG after startup, then exit")
    parser.add_argument("--no-embedded-router", action="store_true",
                        help="never start the bundled router")
    parser.add_argument("--log-level", default="WARNING",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
                        type=str.upper, help="logging level (default WARNING)")
    parser.add_argument("--version", action="version", version=f"tickertape {__version__}")
    return parser


def resolve_url(flag: str | None, config_url: str | None) -> tuple[str, bool]:
    """The router URL and whether the user chose it (flag, env or config)."""
    for candidate in (flag, os.environ.get("ELVIN_URL"), config_url):
        if candidate:
            return candidate, True
    return DEFAULT_URL, False


def choose_url(flag: str | None, config_url: str | None) -> tuple[str, bool]:
    """``resolve_url``, then, when nothing was configured, router discovery
    (``elvin.discovery``: a default router, or ``ELVIN_SCOPE``'s): a router
    found that way counts as chosen, so the bundled one is not started."""
    url, chosen = resolve_url(flag, config_url)
    if chosen:
        return url, chosen
    from elvin.discovery import discover_url

    found = discover_url()
    return (found, True) if found else (url, False)


async def router_answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """Is something listening on host:port? (a TCP connect, nothing sent)"""
    try:
        async with asyncio.timeout(timeout):
            _reader, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return True


def start_bundled_router(port: int = DEFAULT_PORT):
    """Start the bundled router on 127.0.0.1:port; ``None`` if it cannot."""
    try:
        from elvin.router.embedded import EmbeddedRouter
        # with a mobility proxy, so that the menu's Move out / Move in work
        router = EmbeddedRouter(port=port, mobility=True)
        router.start()
        log.warning("no router at 127.0.0.1:%d: started the bundled router there", port)
        return router
    except Exception as exc:  # noqa: BLE001 - the app still runs and keeps retrying
        log.warning("could not start the bundled router: %s", exc)
        return None


def _fail(message: str, code: int) -> int:
    print(f"tickertape: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from elvin_apps.tickertape.config import ConfigError, load
    try:
        config = load(args.config, must_exist=bool(args.config))
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)
    if args.user:
        config.user = args.user
    url, chosen = choose_url(args.elvin, config.elvin)
    from elvin.protocol import URIError, parse_uri
    try:
        uri = parse_uri(url)
    except URIError as exc:
        return _fail(f"bad Elvin URL {url!r}: {exc}", EXIT_USAGE)
    if args.screenshot and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # no screen: render offscreen

    from elvin.qt import run_app_cli

    async def app_main() -> int:
        return await run(args, config, url, chosen, uri)

    return run_app_cli(app_main)


async def run(args: argparse.Namespace, config, url: str, chosen: bool, uri) -> int:
    """Build the app on the running qasync loop; returns the exit status
    when the window closes (or right after ``--screenshot``)."""
    from elvin_apps.tickertape.config import default_data_dir
    from elvin_apps.tickertape.controller import TickerController
    from elvin_apps.tickertape.history import History
    from elvin_apps.tickertape.model import ScrollerModel
    from elvin_apps.tickertape.notifier import Notifier, app_icon
    from elvin_apps.tickertape.window import TickerWindow
    from PySide6.QtWidgets import QApplication

    from elvin.qt import ConnectionManager, StatusWidget

    app = QApplication.instance()
    app.setApplicationName("tickertape")
    app.setApplicationVersion(__version__)
    app.setWindowIcon(app_icon())

    router = None
    if not chosen and not args.no_embedded_router and \
            not await router_answers(uri.host, uri.port):
        router = start_bundled_router(uri.port)

    history = None
    if not args.no_history:
        path = Path(config.history_file) if config.history_file else \
            Path(args.data_dir or default_data_dir()) / "history.sqlite3"
        try:
            history = History(path, max_messages=config.history_max)
        except Exception as exc:  # noqa: BLE001 - run without a log rather than not at all
            log.warning("history disabled: cannot open %s: %s", path, exc)

    manager = ConnectionManager(url)
    model = ScrollerModel()
    # what waits for a router is kept on disk: quitting first loses nothing
    outbox = None if args.screenshot else \
        Path(args.data_dir or default_data_dir()) / "outbox.ec"
    controller = TickerController(config, model, history, manager, outbox_path=outbox)
    window = TickerWindow(controller, status=StatusWidget(manager),
                          save_config=not args.screenshot)
    from elvin_apps.tickertape.mobility import TickerMobility
    window.add_mobility(TickerMobility(controller, manager, parent=window))
    notifier = Notifier(window, enabled=config.notify_mentions)
    notifier.activated.connect(lambda: (window.showNormal(), window.raise_()))
    controller.notifier = notifier
    closed = asyncio.Event()
    window.closed.connect(closed.set)
    app.aboutToQuit.connect(closed.set)
    window.show()
    manager.start()
    # SIGTERM / SIGINT close the window like the user would, so the history
    # is flushed and the router is told goodbye (Python runs the handler on
    # this thread at the next timer tick)
    previous = {sig: signal.signal(sig, lambda *_: window.close())
                for sig in (signal.SIGTERM, signal.SIGINT)}
    status = EXIT_OK
    try:
        if args.screenshot:
            status = await take_screenshot(window, manager, controller, Path(args.screenshot))
        else:
            await closed.wait()
    finally:
        await controller.close()
        with contextlib.suppress(Exception):
            await manager.stop()
        if history is not None:
            with contextlib.suppress(Exception):
                history.close()
        if router is not None:
            router.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


async def take_screenshot(window, manager, controller, path: Path) -> int:
    """Wait for the connection and subscriptions (bounded), let a few frames
    run, then save the window as PNG."""
    status = EXIT_OK
    try:
        await manager.wait_connected(SCREENSHOT_CONNECT_TIMEOUT)
        await controller.wait_synced(SCREENSHOT_CONNECT_TIMEOUT)
    except (TimeoutError, Exception):  # noqa: BLE001 - screenshot the state we are in
        status = EXIT_UNREACHABLE
    await asyncio.sleep(0.5)
    from elvin.qt import save_screenshot
    return save_screenshot(window, path, "tickertape", status)


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
