"""Running a Qt application with asyncio on the Qt event loop (qasync)."""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import qasync
from PySide6.QtWidgets import QApplication

from elvin.qt.maingc import MainThreadGC

__all__ = ["application", "run_app"]


def application(argv: Sequence[str] | None = None) -> QApplication:
    """The QApplication, created on first use."""
    app = QApplication.instance()
    if app is None:
        app = QApplication(list(argv) if argv is not None else sys.argv)
    return app


def run_app(main: Callable[[], Awaitable[Any] | Any], argv: Sequence[str] | None = None,
            *, quit_on_last_window_closed: bool = True) -> int:
    """Create the QApplication and a qasync event loop, run ``main()`` on it.

    ``main`` is a coroutine function (or a function returning an awaitable,
    or a plain function). It builds the windows and connections and returns.
    If it returns an ``int``, that is the exit status and the application
    stops at once (handy for ``--screenshot``); if it returns ``None`` the
    application runs until it quits (last window closed, ``app.quit()``).
    Networking runs as asyncio tasks on the Qt loop: no threads. Python's
    garbage collector runs on the Qt thread only while the app runs (see
    ``elvin.qt.maingc``).
    """
    app = application(argv)
    app.setQuitOnLastWindowClosed(quit_on_last_window_closed)
    collector = MainThreadGC(parent=app)  # Qt objects must die on this thread
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    quitting = asyncio.Event()
    app.aboutToQuit.connect(quitting.set)

    async def runner() -> int:
        result = main()
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, int) and not isinstance(result, bool):
            return result
        await quitting.wait()
        return 0

    try:
        with loop:
            return loop.run_until_complete(runner())
    finally:
        collector.stop()
        asyncio.set_event_loop(None)
