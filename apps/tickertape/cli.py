"""``tickertape``: command line, startup and shutdown.

The router URL comes from ``--elvin``, else ``ELVIN_URL``, else the config
file, else a router found by discovery (``elvin.discovery``), else
``elvin://127.0.0.1:2917`` (the suite's rule, ``elvin.router_url``). With none of these and no router answering
there, the app starts the bundled router itself (in-process, on port
2917) so that ``make run`` works on a bare machine; other local clients can
use it while the ticker runs.

Exit codes (docs/architecture.md): 0 ok, 1 usage or input error (bad flag, URL or config
file), 2 cannot reach the router (only with ``--screenshot``, which must not
wait forever), 3 other failure.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path

from elvin_apps.tickertape import __version__

from elvin.app_cli import app_parser, start_app
from elvin.cli_common import ToolError
from elvin.router_url import DEFAULT_URL

log = logging.getLogger("elvin_apps.tickertape")

PROG = "tickertape"


def build_parser() -> argparse.ArgumentParser:
    parser = app_parser(
        PROG, __version__,
        "A scrolling chat and news ticker for Elvin (Tickertape Chat Protocol 3).",
        config_default="the platform config dir, e.g. ~/.config/elvin/tickertape.toml",
        screenshot=True,
        epilog=f"With no router chosen and none answering at {DEFAULT_URL}, the bundled "
               "router is started there, in-process. "
               "Shortcuts: Ctrl+N new message, Ctrl+R reply, Ctrl+H history, "
               "Ctrl+G groups, Ctrl+Q quit.")
    parser.add_argument("--user", metavar="NAME", help="your name in From (default user@host)")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="where the history is kept (default: the platform data dir)")
    parser.add_argument("--no-history", action="store_true", help="keep no message log")
    parser.add_argument("--no-embedded-router", action="store_true",
                        help="never start the bundled router")
    parser.add_argument("--dock", choices=("top", "bottom", "window"),
                        help="a bar docked at the top or bottom of the screen (the default: "
                             "top), or an ordinary window; the settings file's dock = ...")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from elvin_apps.tickertape.config import load
    try:
        config, router = start_app(args, load)
    except ToolError as exc:
        return exc.report(PROG)
    # for this run only: a save keeps the file's own values for these
    if args.user:
        config.override("user", args.user)
    if args.dock:
        config.override("dock", args.dock)
    url, chosen = router.routers, router.chosen     # a list: routers to fail over among
    if args.screenshot and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # no screen: render offscreen

    from elvin.qt import run_app_cli

    async def app_main() -> int:
        return await run(args, config, url, chosen)

    return run_app_cli(app_main)


async def run(args: argparse.Namespace, config, url: str | list[str], chosen: bool) -> int:
    """Build the app on the running qasync loop; returns the exit status
    when the window closes (or right after ``--screenshot``). ``url``: the
    router, or the routers to fail over among (the first is the ticker's
    identity for "one per user and router")."""
    first = url if isinstance(url, str) else url[0]
    from elvin_apps.tickertape.config import default_data_dir
    from elvin_apps.tickertape.controller import TickerController
    from elvin_apps.tickertape.history import History
    from elvin_apps.tickertape.model import ScrollerModel
    from elvin_apps.tickertape.notifier import Notifier, app_icon
    from elvin_apps.tickertape.window import TickerWindow
    from PySide6.QtWidgets import QApplication

    from elvin.qt import ConnectionManager, StatusWidget
    from elvin.qt.app import run_window

    app = QApplication.instance()
    app.setApplicationName("tickertape")
    app.setApplicationVersion(__version__)
    app.setWindowIcon(app_icon())

    from elvin.qt.single import bring_forward, single_instance
    # one ticker per user and router: another launch brings this one forward
    instance, status = single_instance(PROG, (first, config.user), parent=app,
                                       new_instance=args.new_instance or bool(args.screenshot))
    if status is not None:
        return status

    router = None
    if not chosen and not args.no_embedded_router:
        from elvin.router.bundled import start_where_silent
        # with a mobility proxy, so that the menu's Move out / Move in work
        router = await start_where_silent(first, mobility=True)

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
    if not args.screenshot:       # what has not expired is back on the strip
        controller.restore_from_history()
    window = TickerWindow(controller, status=StatusWidget(manager),
                          save_config=not args.screenshot)
    from elvin_apps.tickertape.mobility import TickerMobility
    window.add_mobility(TickerMobility(controller, manager, parent=window))
    notifier = Notifier(window, enabled=config.notify_mentions)
    notifier.activated.connect(lambda: (window.showNormal(), window.raise_()))
    if instance is not None:
        instance.activated.connect(lambda: bring_forward(window))
    controller.notifier = notifier
    from elvin.qt.geometry import WindowMemory
    # docked at its edge, or as a window where it last was (not in a picture)
    window.place(None if args.screenshot else WindowMemory(window, "tickertape"))
    window.show()
    manager.start()
    try:
        # a signal closes the window: the history is flushed, the router told goodbye
        return await run_window(window, (lambda: take_screenshot(
            window, manager, controller, Path(args.screenshot))) if args.screenshot else None)
    finally:
        await controller.close()
        with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
            await manager.stop()
        if history is not None:
            with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                history.close()
        if router is not None:
            router.stop()
        if instance is not None:
            instance.close()


async def take_screenshot(window, manager, controller, path: Path) -> int:
    """Once connected and subscribed (each step bounded), as the user would see it."""
    from elvin.qt.app import SCREENSHOT_TIMEOUT, screenshot_when_ready

    async def ready() -> None:
        await manager.wait_connected()
        await controller.wait_synced(SCREENSHOT_TIMEOUT)

    return await screenshot_when_ready(window, path, PROG, ready, timeout=2 * SCREENSHOT_TIMEOUT,
                                      why_not=lambda: manager.last_error)


if __name__ == "__main__":
    sys.exit(main())
