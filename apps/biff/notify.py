"""Telling the user that someone just started a coffee.

Where the desktop runs the freedesktop notification service
(``org.freedesktop.Notifications`` on the session D-Bus; GNOME, KDE, XFCE,
dunst, ...), the message goes there; else, where there is a system tray,
as a tray balloon; else to the window itself, which flashes a banner and
asks the window manager for the user's attention (the urgency hint: a
blinking task-bar entry). An alert always reaches the user.

Both the question "is the service there?" and the call itself go through
GLib's ``gdbus`` tool, which every GLib-based desktop has, with explicitly
typed arguments: PySide6 cannot give an argument the D-Bus type ``uint32``
that ``Notify`` requires (a Python int always goes as ``int32``, and the
service refuses the call), and QtDBus in this process (its own thread
beside the router connection's) now and then crashed the process in a
later ``processEvents`` once the bus went away. If it is missing or the call fails, the
tray balloon is used instead. A sound is optional: the service is asked for the
``message-new-instant`` sound theme event, and without the service the
display's bell rings.

Only a *start* is worth telling: someone whose coffee began more than
:data:`FRESH_SECONDS` ago (an instance that answered our "who is there?",
or one we heard again after a reconnection) is not news.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import weakref
from collections.abc import Iterable

from elvin_apps.biff.roster import Member
from PySide6.QtCore import QObject, QProcess, Signal
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from elvin.qt.urgency import alert

__all__ = ["CoffeeNotifier", "FRESH_SECONDS", "alert_text", "new_starters"]

log = logging.getLogger("elvin_apps.biff")

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
#: A coffee that began longer ago than this is not announced.
FRESH_SECONDS = 120.0
#: Milliseconds a notification stays (the service may choose otherwise).
EXPIRE_MS = 8000


def new_starters(before: Iterable[Member], after: Iterable[Member], now: float) -> list[Member]:
    """Members active in ``after`` but not in ``before`` (by user), not
    ourselves, whose coffee began within :data:`FRESH_SECONDS` of ``now``."""
    was = {m.user.casefold() for m in before}
    return [m for m in after if m.user.casefold() not in was and not m.local
            and now - m.since <= FRESH_SECONDS]


def alert_text(members: list[Member]) -> tuple[str, str]:
    """The title and body telling that ``members`` started a coffee: the
    names in the title, their notes in the body, never the name twice."""
    if len(members) == 1:
        member = members[0]
        return (f"{member.user} is having a coffee",
                member.text or "Just started. Click the cup to join.")
    names = ", ".join(m.user for m in members[:-1]) + f" and {members[-1].user}"
    body = "\n".join(f"{m.user}: {m.text}" for m in members if m.text)
    return f"{len(members)} people are having a coffee", body or names


class CoffeeNotifier(QObject):
    """Shows notifications; ``backend`` says how ("freedesktop", "tray",
    "window" or "none"). ``notified(str, str)`` is emitted with the title
    and body of each notification shown (whatever the backend). ``window``
    (set by the app) is the last resort: it gets ``flash(title, body)`` and
    the urgency hint."""

    notified = Signal(str, str)

    def __init__(self, tray: QSystemTrayIcon | None = None, *, enabled: bool = True,
                 sound: bool = False, bus_address: str | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.window = None
        self.tray = tray
        self.enabled = enabled
        self.sound = sound
        self.bus_address = bus_address     # None: the session bus
        self._gdbus = shutil.which("gdbus")
        self._service = self._gdbus is not None and _service_present(self._gdbus, bus_address)
        self._calls: set[QProcess] = set()
        self.shown = 0

    @property
    def backend(self) -> str:
        if self._service:
            return "freedesktop"
        if self.tray is not None and self.tray.isVisible():
            return "tray"
        if self.window is not None:
            return "window"
        return "none"

    def notify(self, title: str, body: str) -> str:
        """Show one notification (when enabled); returns the backend used."""
        if not self.enabled:
            return "off"
        backend = self.backend
        if backend == "freedesktop":
            self._send_dbus(title, body)
        else:
            self._fallback(title, body)
        if backend != "none":
            self.shown += 1
        self.notified.emit(title, body)
        return backend

    def _fallback(self, title: str, body: str) -> None:
        """The tray's balloon, else the window's banner and urgency hint."""
        if self.tray is not None and self.tray.isVisible():
            self.tray.showMessage(title, body, QSystemTrayIcon.MessageIcon.Information,
                                  EXPIRE_MS)
        elif self.window is not None:
            self.window.flash(title, body)
            alert(self.window)     # until the user looks at the window (EWMH and ICCCM)
        if self.sound:
            QApplication.beep()

    def started(self, members: Iterable[Member]) -> None:
        """One notification for the people who just started a coffee."""
        members = list(members)
        if members:
            self.notify(*alert_text(members))

    def _send_dbus(self, title: str, body: str) -> None:
        hints = "{'category': <'presence.online'>"
        if self.sound:
            hints += ", 'sound-name': <'message-new-instant'>"
        hints += "}"
        bus = ["--address", self.bus_address] if self.bus_address else ["--session"]
        arguments = ["call", *bus, "--dest", SERVICE, "--object-path", PATH,
                     "--method", f"{SERVICE}.Notify", "Coffee biff", "uint32 0", "",
                     gvariant_string(title), gvariant_string(body), "@as []", "@a{sv} " + hints, f"int32 {EXPIRE_MS}"]
        process = QProcess(self)
        self._calls.add(process)
        # The handlers hold the notifier weakly: the process's connections
        # would otherwise keep it alive, and when the process's deleteLater
        # freed them, the notifier (its parent) would be deleted from inside
        # the process's own destructor, deleting the process twice (a crash
        # in the next processEvents once nothing else held the notifier).
        notifier = weakref.ref(self)

        def finished(code: int, _status: object) -> None:
            me = notifier()
            if me is None or process not in me._calls:
                return           # gone, or a crash reporting twice (error and finished)
            me._calls.discard(process)
            if code != 0:
                error = bytes(process.readAllStandardError()).decode(errors="replace").strip()
                log.info("desktop notification failed (%s): using the tray", error)
                me._fallback(title, body)
            process.deleteLater()

        process.finished.connect(finished)
        process.errorOccurred.connect(
            lambda _error: process.state() == QProcess.ProcessState.NotRunning
            and finished(1, None))
        process.start(self._gdbus, arguments)

    def wait(self, msecs: int = 5000) -> None:
        """Wait for the notifications being sent (tests, shutdown)."""
        for process in list(self._calls):
            process.waitForFinished(msecs)


def _service_present(gdbus: str, address: str | None) -> bool:
    """Whether the notification service owns its name on the bus (asked of
    the bus with ``gdbus``; no bus, no answer within 2 s: False)."""
    bus = ["--address", address] if address else ["--session"]
    try:
        answer = subprocess.run(
            [gdbus, "call", *bus, "--dest", "org.freedesktop.DBus",
             "--object-path", "/org/freedesktop/DBus",
             "--method", "org.freedesktop.DBus.NameHasOwner", SERVICE],
            capture_output=True, text=True, timeout=2.0)
    except (OSError, subprocess.SubprocessError):
        return False
    return answer.returncode == 0 and answer.stdout.strip() == "(true,)"


def gvariant_string(text: str) -> str:
    """``text`` as a GVariant string literal. gdbus reads its arguments as
    GVariant text, so a user named ``true`` or ``42`` would otherwise become a
    boolean or a number and the call would fail."""
    escaped = (text.replace("\\", "\\\\").replace("'", "\\'")
               .replace("\n", "\\n").replace("\t", "\\t"))
    return f"'{escaped}'"
