"""Running a Qt application with asyncio on the Qt event loop (qasync).

Also the pieces the apps' command lines share around it: ``run_app_cli``
(the exit status, Ctrl-C), ``run_window`` (until the window closes, or a
signal closes it) and ``save_screenshot`` (``--screenshot FILE``), so that
every Qt app exits and reports the same way."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import qasync
from PySide6.QtCore import QMessageLogContext, QtMsgType, qInstallMessageHandler
from PySide6.QtWidgets import QApplication

from elvin.cli_common import EXIT_FAILURE, EXIT_OK, EXIT_UNREACHABLE, fail
from elvin.qt.maingc import MainThreadGC

__all__ = ["SCREENSHOT_TIMEOUT", "application", "cancel_pending", "run_app", "run_app_cli",
           "run_window", "save_screenshot", "screenshot_when_ready"]

#: seconds an app's ``--screenshot`` waits for its routers before it shows
#: the state it is in (and exits 2: the router could not be reached)
SCREENSHOT_TIMEOUT = 5.0
#: seconds the tasks still pending at the end get to finish once cancelled:
#: one that ignores its cancellation must not hang Quit
CANCEL_DEADLINE = 2.0

log = logging.getLogger("elvin.qt")


#: what Qt's offscreen platform says on every window it shows (it has no
#: window manager to pass size hints to): noise to someone taking a
#: ``--screenshot``, who is told nothing they can act on
_OFFSCREEN_NOISE = ("This plugin does not support propagateSizeHints()",
                    "This plugin does not support raise()")


def _qt_message(_mode: QtMsgType, _context: QMessageLogContext, message: str) -> None:
    """Qt's messages on stderr as Qt prints them, less the offscreen noise."""
    if message not in _OFFSCREEN_NOISE:
        print(message, file=sys.stderr)


def application(argv: Sequence[str] | None = None) -> QApplication:
    """The QApplication, created on first use."""
    app = QApplication.instance()
    if app is None:
        app = QApplication(list(argv) if argv is not None else sys.argv)
        if app.platformName() == "offscreen":
            qInstallMessageHandler(_qt_message)
    return app  # type: ignore[return-value]  # instance(): typed QCoreApplication


def cancel_pending(loop: asyncio.AbstractEventLoop,
                   deadline: float = CANCEL_DEADLINE) -> list[asyncio.Task]:
    """Cancel the tasks still pending on ``loop`` (not running) and let them
    finish, as ``asyncio.run`` does before it closes its loop: a task left
    behind (a connection manager still waiting on its connection, say) would
    otherwise be destroyed pending when collected, with a warning long after
    its owner went. A task that has not finished ``deadline`` seconds later
    (it swallowed its cancellation) is logged and left: the app quits
    anyway. Returns the tasks that were still pending."""
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if not pending:
        return pending
    done, stuck = loop.run_until_complete(asyncio.wait(pending, timeout=deadline))
    for task in done:                 # their errors are theirs: retrieved, not reported
        if not task.cancelled():
            task.exception()
    if stuck:
        log.warning("%d task(s) still running %g s after they were cancelled, left "
                    "behind: %s", len(stuck), deadline,
                    ", ".join(sorted(_task_name(task) for task in stuck)))
    return pending


def _task_name(task: asyncio.Task) -> str:
    coro = task.get_coro()
    return f"{task.get_name()} ({getattr(coro, '__qualname__', coro)})"


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
            try:
                return loop.run_until_complete(runner())
            finally:
                cancel_pending(loop)
    finally:
        collector.stop()
        asyncio.set_event_loop(None)


def run_app_cli(main: Callable[[], Awaitable[int]]) -> int:
    """``run_app`` for an app's command line: ``main`` returns the exit
    status (closing the last window does not quit behind its back, so that it
    can clean up first), and Ctrl-C that Python sees before the app's own
    handlers are in place exits with 0, as the app's would."""
    try:
        return run_app(main, [sys.argv[0]], quit_on_last_window_closed=False)
    except KeyboardInterrupt:
        return EXIT_OK


async def run_window(window: Any, screenshot: Callable[[], Awaitable[int]] | None = None
                     ) -> int:
    """Wait until ``window`` closes or the application quits (exit status
    0), or, with ``screenshot``, until it has taken one (its status).
    SIGTERM and SIGINT close the window as the user would, so that the app
    saves and says goodbye on the way out (Python runs the handler at the Qt
    loop's next tick); the previous handlers are back afterwards."""
    closed = asyncio.Event()
    window.closed.connect(closed.set)
    QApplication.instance().aboutToQuit.connect(closed.set)  # type: ignore[union-attr]  # running
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError):       # not in the main thread
            previous[sig] = signal.signal(sig, lambda *_: window.close())
    # from here a signal closes the window as the user would (tests wait for this)
    log.info("window up: %s", window.windowTitle())
    try:
        if screenshot is not None:
            return await screenshot()
        await closed.wait()
        return EXIT_OK
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


async def screenshot_when_ready(window: Any, path: Path, prog: str,
                                ready: Callable[[], Awaitable[Any]], *,
                                timeout: float = SCREENSHOT_TIMEOUT, settle: float = 0.5,
                                why_not: Callable[[], str] = lambda: "") -> int:
    """``--screenshot``: wait (at most ``timeout``) for ``ready()`` -- the
    app connected and subscribed --, let a few frames run, save ``window``.
    Exit status 0, or 2 when it was not ready in time or failed to get
    there: the picture then shows the state the app is in, and stderr says
    why (``why_not()``, e.g. the last connection error), since a script that
    takes the picture reads the status and the message, not the pixels."""
    status = EXIT_OK
    reason = ""
    try:
        async with asyncio.timeout(timeout):
            await ready()
    except TimeoutError:
        status = EXIT_UNREACHABLE
        reason = f"not connected and subscribed within {timeout:g} s"
    except Exception as exc:  # noqa: BLE001 - a connection that failed
        status = EXIT_UNREACHABLE
        reason = f"not connected: {exc}"
    await asyncio.sleep(settle)
    saved = save_screenshot(window, path, prog, status)
    if status != EXIT_OK and saved == status:
        cause = why_not()
        print(f"{prog}: {reason}" + (f" ({cause})" if cause else ""), file=sys.stderr)
    return saved


def save_screenshot(widget: Any, path: Path, prog: str, status: int = EXIT_OK,
                    detail: str = "") -> int:
    """Repaint ``widget`` and save it to ``path`` as a PNG (``--screenshot``).

    Says ``screenshot saved to PATH`` (``: detail`` after it) on stdout and
    returns ``status`` (what the app found while waiting for the window to
    settle, e.g. 2 for an unreachable router); if the file cannot be written,
    says so on stderr as ``prog`` and returns 3."""
    widget.repaint()
    if not widget.grab().save(str(path), "PNG"):
        return fail(prog, f"cannot write screenshot {path}", EXIT_FAILURE)
    print(f"screenshot saved to {path}" + (f": {detail}" if detail else ""))
    return status
