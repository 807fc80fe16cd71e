"""The state directory of a daemon (``elvind --state-dir DIR``): where it keeps
what must outlive the process.

One process owns a state directory at a time: ``StateDir.open`` creates it
(private: mode 0700, it holds secrets), takes an exclusive ``flock`` on
``DIR/lock`` (released by the kernel when the process dies, even by
SIGKILL, so a crash never leaves a stale lock) and writes its pid there for
the error message of the next one. Files that cannot be used are never
deleted: ``move_aside`` renames them (with their SQLite ``-wal``/``-shm``
companions) so that the user can still look at them.

Every problem is a ``StateError``: one line naming the path and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path
from typing import IO

from elvin.errors import RouterStartError
from elvin.fileutil import make_directory

__all__ = ["StateDir", "StateError", "move_aside"]

#: files of an SQLite database that belong together
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


class StateError(RouterStartError):
    """A state directory or file that cannot be used; the message names it
    and says what to do. ``elvind`` exits with status 1 for it (like a
    configuration error: restarting would not help)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message, status)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


class StateDir:
    """An open, locked state directory. ``close()`` releases the lock."""

    LOCK_NAME = "lock"

    def __init__(self, path: Path, lock: IO[str]) -> None:
        self.path = path
        self._lock: IO[str] | None = lock

    @classmethod
    def open(cls, path: str | os.PathLike, owner: str = "elvind") -> StateDir:
        import fcntl

        directory = Path(path).expanduser()
        try:
            make_directory(directory, "the state directory", StateError, mode=0o700)
        except StateError as exc:
            raise StateError(f"{exc} (create it, owned by the user {owner} runs as)") from None
        if not directory.is_dir():
            raise StateError(f"state directory {directory} is not a directory")
        lock_path = directory / cls.LOCK_NAME
        try:
            fh = open(lock_path, "a+")   # held for the process's life
        except OSError as exc:
            fix = ("mount it read-write, or choose another --state-dir" if exc.errno == errno.EROFS
                   else f"give it to the user {owner} runs as")
            raise StateError(f"cannot write in the state directory {directory}: "
                             f"{_reason(exc)} ({fix})") from None
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            fh.seek(0)
            holder = fh.read().strip()
            fh.close()
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StateError(f"cannot lock the state directory {directory}: "
                                 f"{_reason(exc)}") from None
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise StateError(f"state directory {directory} is in use by another "
                             f"{owner}{who}: stop it, or give each its own --state-dir") \
                from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        return cls(directory, fh)

    def file(self, name: str) -> Path:
        return self.path / name

    def close(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            with contextlib.suppress(OSError):
                lock.close()

    def __repr__(self) -> str:
        return f"<StateDir {self.path}>"


def move_aside(path: Path, why: str = "reset") -> Path | None:
    """Rename ``path`` (and its SQLite companions) to
    ``NAME.WHY-YYYYmmddTHHMMSS``; returns the new name of the main file, or
    None when there was nothing to move. Never deletes anything."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.{why}-{stamp}")
    n = 1
    while any(Path(f"{target}{s}").exists() for s in SQLITE_COMPANIONS):
        n += 1
        target = path.with_name(f"{path.name}.{why}-{stamp}.{n}")
    moved = None
    for suffix in SQLITE_COMPANIONS:
        source = Path(f"{path}{suffix}")
        if source.exists():
            try:
                os.replace(source, f"{target}{suffix}")
            except OSError as exc:
                raise StateError(f"cannot move {source} aside to {target}{suffix}: "
                                 f"{_reason(exc)}") from None
            if not suffix:
                moved = target
    return moved
