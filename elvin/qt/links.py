"""Opening a link with the desktop's handler, and saying so when it fails.

``QDesktopServices.openUrl`` on a Unix desktop only starts ``xdg-open`` and
reports that it started: when no browser is set up, ``xdg-open`` fails a
moment later and the click seemed to do nothing. ``LinkOpener`` runs
``xdg-open`` itself, asynchronously, and reads its exit status (the
xdg-utils convention: 3 no tool for the job, 4 the action failed), so the
app can tell the user in one line; elsewhere (macOS, Windows, no
``xdg-open``) Qt's answer is the one there is.
"""

from __future__ import annotations

import shutil
import sys
import weakref

from PySide6.QtCore import QObject, QProcess, QUrl, Signal
from PySide6.QtGui import QDesktopServices

__all__ = ["LinkOpener", "XDG_OPEN_ERRORS"]

#: xdg-open's exit statuses (xdg-utils), in words
XDG_OPEN_ERRORS = {
    1: "the link is not valid",
    2: "one of the files does not exist",
    3: "no program is set up to open it (is a web browser installed?)",
    4: "the program that should open it failed",
}


class LinkOpener(QObject):
    """``open(url)``; ``opened(url)`` once a handler took it, ``failed(url,
    reason)`` when none could. Running ``xdg-open`` processes are children
    of the opener, so they go with it."""

    opened = Signal(str)
    failed = Signal(str, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._running: set[QProcess] = set()

    def open(self, url: str) -> None:
        tool = shutil.which("xdg-open") if sys.platform.startswith(("linux", "freebsd",
                                                                     "openbsd", "netbsd")) \
            else None
        if tool is None:
            if QDesktopServices.openUrl(QUrl(url)):
                self.opened.emit(url)
            else:
                self.failed.emit(url, "no program is set up to open links here")
            return
        process = QProcess(self)
        self._running.add(process)
        process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        # the handlers hold the opener weakly (as the biff's notifier does): a
        # strong reference from the child's connections would make the
        # child's deletion free its parent from inside its own destructor
        opener = weakref.ref(self)

        def finished(code: int, status: QProcess.ExitStatus) -> None:
            me = opener()
            if me is None or process not in me._running:
                return             # gone, or errorOccurred and finished both reporting
            me._running.discard(process)
            if status == QProcess.ExitStatus.NormalExit and code == 0:
                me.opened.emit(url)
            else:
                # (a QByteArray is a buffer; PySide's stubs do not say so)
                said = bytes(process.readAll()).decode(  # type: ignore[call-overload]  # see above
                    errors="replace").strip()
                reason = XDG_OPEN_ERRORS.get(code, f"xdg-open failed (status {code})")
                me.failed.emit(url, reason + (f": {said.splitlines()[-1]}" if said and
                                              code not in XDG_OPEN_ERRORS else ""))
            process.deleteLater()

        def error(_error: QProcess.ProcessError) -> None:
            if process.state() == QProcess.ProcessState.NotRunning:
                finished(127, QProcess.ExitStatus.CrashExit)

        process.finished.connect(finished)
        process.errorOccurred.connect(error)
        process.start(tool, [url])

    def busy(self) -> bool:
        """Whether an ``xdg-open`` is still deciding (tests)."""
        return bool(self._running)
