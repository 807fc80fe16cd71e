"""One instance of an app per user and router, as desktop apps behave.

Starting the tickertape, the console or a biff a second time (from the
menu, from another app's Open menu, from autostart and again by hand)
should bring the running window forward, not put a second one exactly on
top of it (two docked bars, two biffs announcing the same person). The
first instance listens on a local socket named for the app, the user and
what the instance is for (its router, and for a biff the person it
announces); a second launch that reaches it asks it to raise its window and
exits. ``--new-instance`` skips the check for someone who wants two.

The socket lives in ``$XDG_RUNTIME_DIR/elvin`` (private to the user), else
in a private directory under the temporary directory. A socket left by an
instance that crashed answers nothing and is replaced. A lock file makes
two launches at the same moment agree which one runs.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

__all__ = ["SingleInstance", "bring_forward", "claim", "single_instance", "socket_path"]

log = logging.getLogger("elvin.qt")

#: milliseconds a second launch waits for the running one to answer
ANSWER_MS = 3000
RAISE = b"raise\n"
RAISED = b"raised\n"


#: bytes of a Unix socket's path, less a margin (sun_path holds 108)
MAX_SOCKET_PATH = 100


def _runtime_dir(room: int = 0) -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "elvin" if runtime else None
    if base is None or len(os.fsencode(base)) + room > MAX_SOCKET_PATH:
        base = Path(tempfile.gettempdir()) / f"elvin-{os.getuid()}"
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    return base


def socket_path(app: str, *what: str) -> Path:
    """Where the instance of ``app`` for ``what`` (router URL, user...) listens."""
    digest = hashlib.sha256("\0".join((app, *what)).encode()).hexdigest()[:16]
    name = f"{app}-{digest}.sock"
    return _runtime_dir(len(name) + 1) / name


class SingleInstance(QObject):
    """The running instance's side: ``activated`` when another launch asks
    for the window."""

    activated = Signal()

    def __init__(self, path: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.path = path
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._connection)
        self._peers: set[QLocalSocket] = set()

    def listen(self) -> bool:
        QLocalServer.removeServer(str(self.path))       # a crashed instance's socket
        if not self.server.listen(str(self.path)):
            log.info("cannot listen on %s: %s", self.path, self.server.errorString())
            return False
        return True

    def close(self) -> None:
        for peer in list(self._peers):
            self._drop(peer)
        self.server.close()

    def _connection(self) -> None:
        while (peer := self.server.nextPendingConnection()) is not None:
            self._peers.add(peer)
            peer.readyRead.connect(self._ready)
            peer.disconnected.connect(self._gone)
            if peer.bytesAvailable():
                self._read(peer)

    def _ready(self) -> None:
        peer = self.sender()
        if isinstance(peer, QLocalSocket) and peer in self._peers:
            self._read(peer)

    def _gone(self) -> None:
        peer = self.sender()
        if isinstance(peer, QLocalSocket) and peer in self._peers:
            self._drop(peer)

    def _drop(self, peer: QLocalSocket) -> None:
        self._peers.discard(peer)
        peer.readyRead.disconnect(self._ready)
        peer.disconnected.disconnect(self._gone)
        peer.abort()
        peer.deleteLater()

    def _read(self, peer: QLocalSocket) -> None:
        if not peer.canReadLine():
            if peer.bytesAvailable() > 64:       # not one of ours: no more of it
                self._drop(peer)
            return
        if bytes(peer.readLine().data()) == RAISE:
            self.activated.emit()
            peer.write(RAISED)
            peer.flush()
        peer.disconnectFromServer()


def _ask_running(path: Path) -> bool | None:
    """Ask the instance at ``path`` to raise its window: True if it did,
    False if one is there but did not answer, None if none listens."""
    socket = QLocalSocket()
    socket.connectToServer(str(path))
    if not socket.waitForConnected(ANSWER_MS):
        return None
    socket.write(RAISE)
    socket.flush()
    answered = False
    while socket.waitForReadyRead(ANSWER_MS):
        if socket.canReadLine():
            answered = bytes(socket.readLine().data()) == RAISED
            break
    socket.abort()
    return answered


def claim(app: str, *what: str, parent: QObject | None = None
          ) -> tuple[SingleInstance | None, bool | None]:
    """Become the instance of ``app`` for ``what``, or hand over to the one
    running. Returns ``(instance, None)`` for the first launch (``instance``
    None where no socket could be made: the app runs anyway), ``(None,
    True)`` when a running instance raised its window, ``(None, False)``
    when one is there but did not answer."""
    path = socket_path(app, *what)
    lock = QLockFile(str(path.with_suffix(".lock")))
    lock.setStaleLockTime(10_000)
    locked = lock.tryLock(ANSWER_MS + 2000)
    try:
        running = _ask_running(path)
        if running is not None:
            return None, running
        instance = SingleInstance(path, parent)
        return (instance if instance.listen() else None), None
    finally:
        if locked:
            lock.unlock()


def bring_forward(window) -> None:
    """What a second launch asks of the running window: to be seen."""
    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()


def single_instance(prog: str, what: tuple[str, ...], *, new_instance: bool,
                    parent: QObject | None = None) -> tuple[SingleInstance | None, int | None]:
    """An app's start: ``(instance, None)`` to run (connect ``activated``
    to ``bring_forward`` once the window exists), or ``(None, status)`` to
    exit with, having said why in one line. ``new_instance`` (the
    ``--new-instance`` flag) runs without asking."""
    if new_instance:
        return None, None
    instance, raised = claim(prog, *what, parent=parent)
    if raised is None:
        return instance, None
    if raised:
        print(f"{prog} already runs for {' '.join(what)}: its window was brought forward "
              "(--new-instance starts another)")
        return None, 0
    print(f"{prog}: one already runs for {' '.join(what)} but does not answer "
          "(--new-instance starts another)", file=sys.stderr)
    return None, 3
