"""``elvin-console``: command line, startup and shutdown.

The router URL comes from ``--elvin``, else ``ELVIN_URL``, else the config
file, else (with no workspace) a router found by discovery, else
``elvin://127.0.0.1:2917`` (``elvin.router_url``). A workspace (``--workspace`` or the
config's ``workspace``) brings its own routers; an explicit ``--elvin`` (or
``ELVIN_URL``) then replaces the URL of its first router, so one workspace
can be pointed at another router from the command line.

Exit codes (docs/architecture.md): 0 ok, 1 usage or input error (bad flag, URL, config
or workspace file), 2 cannot reach the router (only with ``--screenshot``,
which must not wait forever), 3 other failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import sys
from pathlib import Path

from elvin_apps.console import __version__

from elvin.app_cli import app_parser, start_app
from elvin.cli_common import EXIT_FAILURE, EXIT_USAGE, ToolError, fail

log = logging.getLogger("elvin_apps.console")

PROG = "elvin-console"


def build_parser() -> argparse.ArgumentParser:
    parser = app_parser(
        PROG, __version__,
        "The developers' console for Elvin: write and test subscriptions, send typed "
        "notifications, watch quench and router statistics, on several routers at once.",
        config_default="~/.config/elvin/console.toml", screenshot=True,
        epilog="A workspace brings its routers; --elvin or $ELVIN_URL replaces the first. "
               "Exit status: 0 ok, 1 usage or input error, 2 router unreachable "
               "(--screenshot), 3 other failure.")
    parser.add_argument("--workspace", "-w", metavar="FILE",
                        help="open this workspace (JSON or TOML) at startup")
    parser.add_argument("--buffer", type=int, metavar="ROWS",
                        help="rows a new consumer pane keeps (default 10000)")
    parser.add_argument("--embedded-router", action="store_true",
                        help="if nothing answers at a local URL, start the bundled router "
                             "there (handy for trying the console alone)")
    return parser


def _fail(message: str, code: int) -> int:
    return fail(PROG, message, code)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from elvin_apps.console.config import load
    from elvin_apps.console.session import load_session
    from elvin_apps.console.window import default_workspace
    from elvin_apps.console.workspace import MAX_BUFFER, MIN_BUFFER, WorkspaceError
    from elvin_apps.console.workspace import load as load_workspace

    try:
        # a workspace names its routers: discovery only for the default one
        config, router = start_app(args, load, discover=lambda config: not (
            args.workspace or config.workspace))
    except ToolError as exc:
        return exc.report(PROG)
    workspace_path = args.workspace or config.workspace
    # several routers (failover) are kept in a saved router's URL apart by spaces
    url, explicit = " ".join(router.urls), router.explicit
    buffer = args.buffer if args.buffer is not None else config.buffer
    if not MIN_BUFFER <= buffer <= MAX_BUFFER:
        return _fail(f"--buffer must be from {MIN_BUFFER} to {MAX_BUFFER}, not {buffer}",
                     EXIT_USAGE)
    if workspace_path:
        try:
            workspace = load_workspace(workspace_path)
        except WorkspaceError as exc:
            return _fail(str(exc), EXIT_USAGE)
        if explicit and workspace.routers:
            workspace.routers[0] = dataclasses.replace(workspace.routers[0], url=url)
        elif not workspace.routers:
            workspace.routers = default_workspace(url).routers
    elif not args.screenshot and (last := load_session()) is not None:
        workspace, restored = last          # what it had when it last quit
        workspace_path = str(restored) if restored is not None else None
        if explicit and workspace.routers:
            workspace.routers[0] = dataclasses.replace(workspace.routers[0], url=url)
        elif not workspace.routers:
            workspace.routers = default_workspace(url).routers
    else:
        workspace = default_workspace(url, buffer)
    if args.screenshot and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from elvin.qt import run_app_cli

    async def app_main() -> int:
        try:
            return await run(args, workspace, Path(workspace_path) if workspace_path else None,
                             buffer)
        except Exception:  # the exit status says "other failure"
            log.exception("elvin-console failed")
            return EXIT_FAILURE

    return run_app_cli(app_main)


async def run(args: argparse.Namespace, workspace, path: Path | None, buffer: int) -> int:
    """Build the window on the running qasync loop; returns the exit status
    when it closes (or right after ``--screenshot``)."""
    from elvin_apps.console.routers import RouterRegistry
    from elvin_apps.console.window import MainWindow
    from PySide6.QtWidgets import QApplication

    from elvin.qt.app import run_window

    app = QApplication.instance()
    app.setApplicationName("elvin-console")
    app.setApplicationVersion(__version__)
    from importlib import resources

    from PySide6.QtGui import QIcon
    icon = resources.files("elvin_apps.desktop").joinpath("icons", "elvin-console.svg")
    app.setWindowIcon(QIcon(str(icon)))       # the menu entry's icon, on the window too
    from elvin.qt.single import bring_forward, single_instance
    # one console per workspace (or, without one, per router): a second
    # launch brings this one forward instead of opening on top of it
    key = str(path.resolve()) if path is not None else \
        (workspace.routers[0].url if workspace.routers else "")
    instance, status = single_instance(PROG, (key,), parent=app,
                                       new_instance=args.new_instance or bool(args.screenshot))
    if status is not None:
        return status
    router = None
    if args.embedded_router and workspace.routers:
        from elvin.router.bundled import start_where_silent
        router = await start_where_silent(workspace.routers[0].url.split()[0])
    registry = RouterRegistry()
    window = MainWindow(registry, buffer)
    if instance is not None:
        instance.activated.connect(lambda: bring_forward(window))
    try:
        await window.apply_workspace(workspace, path)
        if not args.screenshot:       # a picture shows the default place and size
            from elvin.qt.geometry import WindowMemory
            WindowMemory(window, "elvin-console").restore()
        window.show()
        return await run_window(window, (lambda: take_screenshot(window, Path(args.screenshot)))
                                if args.screenshot else None)
    finally:
        if not args.screenshot:           # the next start comes back to this
            from elvin_apps.console.session import save_session
            try:
                save_session(window.workspace(), window.path)
            except Exception:  # exiting: a session that cannot be saved must not stop it
                log.warning("the session could not be saved to %s", window.path, exc_info=True)
        with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
            await window.shutdown()
        if router is not None:
            await asyncio.get_running_loop().run_in_executor(None, router.stop)


async def take_screenshot(window, path: Path) -> int:
    """Once every router is connected and every wanted subscription made."""
    from elvin_apps.console.consumer import ConsumerPane

    from elvin.qt.app import screenshot_when_ready

    async def ready() -> None:
        while True:
            connected = all(entry.manager.state == "connected"
                            for entry in window.registry.entries())
            subscribed = all(pane.subscribed or not pane.wanted for pane in window.panes
                             if isinstance(pane, ConsumerPane) and pane.entry() is not None)
            if connected and subscribed:
                return
            await asyncio.sleep(0.05)

    def why_not() -> str:
        return "; ".join(f"{entry.manager.url}: {entry.manager.last_error}"
                         for entry in window.registry.entries() if entry.manager.last_error)

    return await screenshot_when_ready(window, path, PROG, ready, why_not=why_not)


if __name__ == "__main__":
    sys.exit(main())
