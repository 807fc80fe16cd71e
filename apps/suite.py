"""The suite's desktop apps, and starting one from another's menu.

Each app's menu leads to the others (the tickertape's to the coffee biff
and the console, and so on), started on the router the app itself uses.
They are started in a session of their own, so they outlive the app that
started them;
their error output goes to ``$XDG_STATE_HOME/elvin/launch-NAME.log``, and
one that exits within ``WATCH_SECONDS`` (a router it cannot reach, a
missing display) has its last line reported, so a click never seems to do
nothing. One that runs on is still polled, rarely, until it exits, so that
it is reaped and no zombie is left while this app runs.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from elvin.daemon.xdg import state_home

__all__ = ["APPS", "AppLauncher", "SuiteApp", "add_app_actions"]

#: seconds a started app is watched for an early exit
WATCH_SECONDS = 12.0
POLL_MS = 250
#: how often an app past its watch is asked whether it exited (to reap it)
REAP_MS = 2000


@dataclass(frozen=True)
class SuiteApp:
    name: str          # as in APPS and the launch log's name
    title: str         # as a menu says it
    module: str        # python -m MODULE
    command: str       # the console script (the .desktop entry's Exec)
    comment: str       # one line: what it is for
    icon: str          # the icon's name (elvin_apps.desktop)


APPS: dict[str, SuiteApp] = {app.name: app for app in (
    SuiteApp("tickertape", "Tickertape", "elvin_apps.tickertape", "tickertape",
             "Chat and news scrolling by in a bar at the edge of the screen",
             "elvin-tickertape"),
    SuiteApp("biff", "Coffee biff", "elvin_apps.biff", "biff",
             "See who is having a coffee, and say when you are", "elvin-biff"),
    SuiteApp("console", "Elvin console", "elvin_apps.console", "elvin-console",
             "Browse what flows through an Elvin router, try subscriptions, send "
             "notifications", "elvin-console"),
)}


class AppLauncher(QObject):
    """``launch(name, url)``; ``failed(str)`` with one line when the app
    could not start or soon exited with an error."""

    failed = Signal(str)
    started = Signal(str)

    def __init__(self, parent: QObject | None = None, log_dir: Path | None = None,
                 watch_seconds: float = WATCH_SECONDS) -> None:
        super().__init__(parent)
        self.log_dir = log_dir if log_dir is not None else state_home() / "elvin"
        #: how long a started app is watched for an early exit
        self.watch_seconds = watch_seconds
        self._watches: dict[int, tuple[SuiteApp, Path, subprocess.Popen, float]] = {}
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)
        #: apps past their watch, still running: polled only to be reaped
        self._running: dict[int, subprocess.Popen] = {}
        self._reap_timer = QTimer(self)
        self._reap_timer.setInterval(REAP_MS)
        self._reap_timer.timeout.connect(self._reap)

    def launch(self, name: str, url: str | None = None) -> int | None:
        """Start the app ``name`` (a key of ``APPS``) on ``url``; its pid,
        or None (and ``failed``) when it could not be started."""
        app = APPS[name]
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.failed.emit(f"{app.title} not started: cannot create {self.log_dir}: "
                             f"{exc.strerror or exc}")
            return None
        log = self.log_dir / f"launch-{app.name}.log"
        arguments = [sys.executable, "-m", app.module, *(["--elvin", url] if url else [])]
        try:
            with open(log, "wb") as errors:
                # a session of its own: it outlives this app and its terminal
                process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=errors,
                                           start_new_session=True, close_fds=True)
        except OSError as exc:
            self.failed.emit(f"{app.title} not started: {exc.strerror or exc}")
            return None
        self._watches[process.pid] = (app, log, process, 0.0)
        self._timer.start()
        self.started.emit(app.title)
        return process.pid

    def watching(self) -> list[int]:
        """The pids still watched for an early exit (tests)."""
        return list(self._watches)

    def running(self) -> list[int]:
        """The pids past their watch that have not exited yet (tests)."""
        return list(self._running)

    def _poll(self) -> None:
        for pid, (app, log, process, waited) in list(self._watches.items()):
            status = process.poll()           # also reaps it: no zombie left behind
            if status is not None:
                del self._watches[pid]
                if status != 0:
                    self.failed.emit(f"{app.title} stopped: {last_line(log)}")
            elif waited + POLL_MS / 1000 >= self.watch_seconds:
                del self._watches[pid]        # running: from now on it is on its own,
                self._running[pid] = process  # but reaped when it exits
                self._reap_timer.start()
            else:
                self._watches[pid] = (app, log, process, waited + POLL_MS / 1000)
        if not self._watches:
            self._timer.stop()

    def _reap(self) -> None:
        for pid, process in list(self._running.items()):
            if process.poll() is not None:    # exited: reaped now
                del self._running[pid]
        if not self._running:
            self._reap_timer.stop()


def last_line(log: Path) -> str:
    """The last thing an app said on stderr, or a plain word when nothing."""
    try:
        lines = [line.strip() for line in
                 log.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        lines = []
    said = [line for line in lines if line]
    return said[-1] if said else f"it exited at once (see {log})"


def add_app_actions(menu: QMenu, launcher: AppLauncher, current: str,
                    url: Callable[[], str | None]) -> list[QAction]:
    """The other apps as menu actions ("Coffee biff", "Elvin console"),
    each started on ``url()`` (the router the current app uses)."""
    actions = []
    for app in APPS.values():
        if app.name == current:
            continue
        action = QAction(app.title, menu)
        action.setToolTip(app.comment)
        action.triggered.connect(lambda _checked=False, n=app.name: launcher.launch(n, url()))
        menu.addAction(action)
        actions.append(action)
    return actions
