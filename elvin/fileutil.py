"""Small file and process helpers every tool needs the same way.

* ``atomic_write``: replace a file all at once (temporary file in the same
  directory, fsync, rename), so that a reader (another process, the tool's
  next start after a crash) sees the old file or the new one, never half of
  one, and a failed write leaves no temporary file behind.
* ``make_directory``: create an output directory, or raise the tool's own
  error saying which directory and why.
* ``pid_alive``: whether the process a status or pid file names still runs.

One copy each (issue 20): configuration, workspace, state and status files
of every app and tool go through here.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write", "make_directory", "pid_alive"]


def atomic_write(path: str | Path, data: bytes | str, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` (``str`` is written as UTF-8), creating
    the directory if needed. ``mode`` is the new file's permissions: private
    by default (configuration files may hold keys); status files readable by
    others pass ``0o644``. ``OSError`` as the system raises it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def make_directory(path: str | os.PathLike, what: str, error: type[Exception],
                   mode: int = 0o777) -> Path:
    """``path`` with its parents, created if missing (``path`` itself with
    ``mode``, less the umask: 0o700 for a directory only its owner may
    read; an existing one keeps its mode). A tool that cannot
    create it raises ``error`` (its own error type, which its command line
    prints as one line) naming ``what`` the directory is for, the path and
    the system's reason: never a traceback."""
    path = Path(path)
    try:
        path.mkdir(mode=mode, parents=True, exist_ok=True)
    except OSError as exc:
        raise error(f"cannot create {what} {path}: {exc.strerror or exc}") from exc
    return path


def pid_alive(pid: object) -> bool:
    """True when ``pid`` (as read from a file: anything) names a running
    process, ours or another user's."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True           # exists, owned by someone else
    return True
