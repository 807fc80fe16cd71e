"""Small file and process helpers every tool needs the same way.

* ``atomic_write``: replace a file all at once (temporary file in the same
  directory, fsync, rename), so that a reader (another process, the tool's
  next start after a crash) sees the old file or the new one, never half of
  one, and a failed write leaves no temporary file behind.
* ``pid_alive``: whether the process a status or pid file names still runs.

One copy each (issue 20): configuration, workspace, state and status files
of every app and tool go through here.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write", "pid_alive"]


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
