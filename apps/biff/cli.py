"""``biff``: the coffee biff desktop app (command line, startup, shutdown).

Router: ``--elvin``, else ``ELVIN_URL``, else the config file, else a router
found by discovery, else ``elvin://127.0.0.1:2917`` (``elvin.router_url``).
The app needs the others, so it does not start
a private router: if the router cannot be reached at startup it says so
and exits with status 2; once connected it rides out outages (the client
reconnects, the biff re-announces and re-asks).

Exit codes: 0 ok, 1 usage or input error (bad flag, URL, user or config
file), 2 cannot reach the router, 3 other failure (cannot write the
screenshot).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from pathlib import Path

from elvin_apps.biff import __version__

from elvin.app_cli import app_parser, start_app
from elvin.cli_common import EXIT_FAILURE, EXIT_UNREACHABLE, EXIT_USAGE, ToolError, fail

log = logging.getLogger("elvin_apps.biff")

PROG = "biff"
CONNECT_TIMEOUT = 5.0
SCREENSHOT_SETTLE = 1.0   # seconds for the others' answers to arrive


def build_parser() -> argparse.ArgumentParser:
    parser = app_parser(
        PROG, __version__,
        "Coffee biff: click the cup when you go for a coffee; see who else is.",
        config_default="~/.config/elvin/biff.toml", screenshot=True,
        epilog="Exit status: 0 ok, 1 usage error, 2 router unreachable.")
    parser.add_argument("--user", metavar="NAME", help="your name (default user@host)")
    return parser


def _fail(message: str, code: int) -> int:
    return fail(PROG, message, code)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:      # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    from elvin_apps.biff.config import load
    try:
        config, router = start_app(args, load)
    except ToolError as exc:
        return exc.report(PROG)
    url = router.routers          # a list: routers to fail over among
    from elvin_apps.biff.coffee import CoffeeBiff
    try:
        biff = CoffeeBiff(args.user or config.user, heartbeat=config.heartbeat,
                          active_timeout=config.coffee_minutes * 60)
    except ValueError as exc:
        return _fail(str(exc), EXIT_USAGE)
    has_screen = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                      or os.environ.get("QT_QPA_PLATFORM") or sys.platform != "linux")
    if not has_screen:
        if not args.screenshot:   # Qt would abort with a long plugin message
            return _fail("no display: set DISPLAY (or QT_QPA_PLATFORM=offscreen to run "
                         "without one)", EXIT_FAILURE)
        os.environ["QT_QPA_PLATFORM"] = "offscreen"   # a screenshot needs no screen

    from elvin.qt import run_app_cli

    async def app_main() -> int:
        return await run(biff, url, config.text, Path(args.screenshot) if args.screenshot
                         else None, notify=config.notify, sound=config.sound,
                         colleagues=config.colleagues, new_instance=args.new_instance)

    return run_app_cli(app_main)


async def run(biff, url: str | list[str], default_text: str, screenshot: Path | None, *,
              notify: bool = True, sound: bool = False, colleagues: list[str] = (),
              new_instance: bool = False) -> int:
    """Connect, build the window, run until it closes (or take the
    screenshot); always announce departure on the way out."""
    from elvin_apps.biff.acquaintances import PeopleBook
    from elvin_apps.biff.cup import cup_icon
    from elvin_apps.biff.notify import CoffeeNotifier
    from elvin_apps.biff.qtbiff import QtBiff
    from elvin_apps.biff.tray import make_tray
    from elvin_apps.biff.window import CoffeeWindow
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from elvin.daemon.xdg import state_home
    from elvin.qt import ConnectionManager, StatusWidget
    from elvin.qt.app import run_window
    from elvin.qt.geometry import WindowMemory

    app = QApplication.instance()
    app.setApplicationName("biff")
    app.setApplicationVersion(__version__)
    app.setWindowIcon(cup_icon(full=True, steam=True))

    from elvin.qt.single import bring_forward, single_instance
    # one biff per person and router: a second would announce them twice
    instance, status = single_instance(PROG, (url if isinstance(url, str) else url[0], biff.user), parent=app,
                                       new_instance=new_instance or screenshot is not None)
    if status is not None:
        return status

    manager = ConnectionManager(url, retry_delay=0.5, max_retry_delay=10.0,
                                reconnect_delay=0.2, reconnect_max_delay=10.0, keepalive=30)
    manager.start()
    try:
        await manager.wait_connected(CONNECT_TIMEOUT)
    except TimeoutError:
        error = manager.last_error or f"no answer within {CONNECT_TIMEOUT:g} s"
        with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
            await manager.stop()
        where = url if isinstance(url, str) else " or ".join(url)
        return _fail(f"cannot reach the Elvin router at {where}: {error}", EXIT_UNREACHABLE)

    qbiff = QtBiff(biff, manager)
    notifier = CoffeeNotifier(enabled=notify and screenshot is None, sound=sound)
    # the people known are kept between runs (not by a screenshot)
    book = PeopleBook(colleagues, None if screenshot is not None else
                      state_home() / "elvin" / "biff-people.json",
                      active_status=biff.active_status)
    window = CoffeeWindow(qbiff, status=StatusWidget(manager, show_url=False),
                          default_text=default_text, notifier=notifier, book=book)
    if screenshot is None:
        WindowMemory(window, "biff").restore()
    if instance is not None:
        instance.activated.connect(lambda: bring_forward(window))
    tray = make_tray(qbiff, window)
    notifier.tray = tray.icon if tray is not None else None
    # a signal closes the window, so that departure is announced; the timer
    # lets Python run its signal handlers while Qt's loop waits
    ticker = QTimer(window)
    ticker.timeout.connect(lambda: None)
    ticker.start(250)
    try:
        await qbiff.attach()
        window.show()
        return await run_window(window, (lambda: take_screenshot(window, screenshot))
                                if screenshot is not None else None)
    finally:
        with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
            await qbiff.close()
        with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
            await manager.stop()
        if tray is not None:
            tray.icon.hide()


async def take_screenshot(window, path: Path) -> int:
    """Let the others' answers arrive, then save the window as a PNG."""
    await asyncio.sleep(SCREENSHOT_SETTLE)
    window.refresh()
    from elvin.qt import save_screenshot
    return save_screenshot(window, path, "biff", detail=window.qbiff.biff.summary())


if __name__ == "__main__":
    sys.exit(main())
