"""Small file and process helpers every tool needs the same way.

* ``atomic_write``: replace a file all at once (temporary file in the same
  directory, fsync, rename), so that a reader (another process, the tool's
  next start after a crash) sees the old file or the new one, never half of
  one, and a failed write leaves no temporary file behind.
* ``make_directory``: create an output directory, or raise the tool's own
  error saying which directory and why.
* ``reading``: the same for reading a file or directory: the system's
  error becomes the tool's own, saying what could not be read and where.
* ``pid_alive``: whether the process a status or pid file names still runs.
* ``runtime_file``: where a daemon keeps its status file when not told.
* ``write_problem``, ``read_problem``: why a path could not be written or
  read, without creating anything (``--check-config``, ``check``).

One copy each (issue 20): configuration, workspace, state and status files
of every app and tool go through here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeGuard

__all__ = ["atomic_write", "file_problem", "make_directory", "files_problems", "open_problem",
           "pid_alive",
           "read_problem", "reading",
           "runtime_file", "write_problem"]


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
    except BaseException:  # no half-written file left, whatever went wrong; re-raised
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
    the system's reason: never a traceback. The error's ``errno`` is the
    system's, so that the exit status can follow it."""
    path = Path(path)
    try:
        path.mkdir(mode=mode, parents=True, exist_ok=True)
    except OSError as exc:
        failure = error(f"cannot create {what} {path}: {exc.strerror or exc}")
        if getattr(failure, "errno", None) is None:
            # for the exit status (cli_common.os_error_status); any exception type will do
            failure.errno = exc.errno  # type: ignore[attr-defined]  # see above
        raise failure from exc
    return path


@contextmanager
def reading(what: str, where: object, error: type[Exception], *,
            missing: bool = False) -> Iterator[None]:
    """Around the reading of a file or directory: an ``OSError`` in the block
    is raised again as ``error`` (the tool's own, which its command line
    prints as one line, or its configuration reports with the setting) that
    says ``cannot read WHAT WHERE: REASON``, the reason as the system words
    it, never a traceback. With ``missing``, a path that does not exist is
    said so instead (``WHAT WHERE does not exist``), for a tool whose users
    more often mistype a path than lack a permission. ``where`` is shown as
    given: a path, or its quoted text."""
    try:
        yield
    except OSError as exc:
        if missing and isinstance(exc, FileNotFoundError):
            raise error(f"{what} {where} does not exist") from None
        raise error(f"cannot read {what} {where}: {exc.strerror or exc}") from None


def pid_alive(pid: object) -> TypeGuard[int]:
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


def runtime_file(directory: str, name: str = "status.json") -> str:
    """``name`` in a daemon's runtime directory: systemd's
    (``RuntimeDirectory=DIRECTORY`` sets ``$RUNTIME_DIRECTORY``), which is
    also root's default (``/run/DIRECTORY``: ``sudo DAEMON status`` finds the
    service's file), else the user's runtime directory, else a per-user
    directory in /tmp."""
    runtime = os.environ.get("RUNTIME_DIRECTORY")
    if runtime:
        return os.path.join(runtime.split(":")[0], name)
    if os.getuid() == 0:
        return os.path.join("/run", directory, name)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return os.path.join(xdg, directory, name)
    return os.path.join("/tmp", f"{directory}-{os.getuid()}", name)


def write_problem(path: str | os.PathLike, *, directory: bool = False,
                  replace: bool = False) -> str | None:
    """Why ``path`` (a file, or with ``directory`` a directory, to be written
    in) could not be written or created now, or None when it could: the
    reason as the system words it (``Permission denied``, ``Not a
    directory``...). ``replace``: the file is replaced whole (``atomic_write``),
    which needs its directory writable rather than the file. Creates
    nothing, so that checking a configuration leaves no trace; the real
    write may still fail (a full disk)."""
    path = Path(path)
    if replace:
        try:
            if stat.S_ISDIR(path.stat().st_mode):
                return os.strerror(errno.EISDIR)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return exc.strerror or str(exc)
        return write_problem(path.parent, directory=True)
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        return exc.strerror or str(exc)
    if st is not None:
        is_dir = stat.S_ISDIR(st.st_mode)
        if directory and not is_dir:
            return os.strerror(errno.ENOTDIR)
        if not directory and is_dir:
            return os.strerror(errno.EISDIR)
        wanted = os.W_OK | (os.X_OK if directory else 0)
        return None if os.access(path, wanted) else os.strerror(errno.EACCES)
    parent = path.parent
    if parent == path:
        return os.strerror(errno.ENOENT)
    return write_problem(parent, directory=True)


def open_problem(path: str | os.PathLike, how: str) -> str | None:
    """Why ``path`` could not be used as a start uses it, found by doing it
    and undoing it (``--check-config``, ``check``: the check does what the
    start does, and leaves nothing behind). ``how``:

    * ``"append"``: a log file, opened for appending; its directory must
      exist (logging does not create it);
    * ``"replace"``: a status file, replaced whole (``atomic_write``, which
      creates missing directories): a temporary file is made beside it;
    * ``"directory"``: a state or archive directory (``make_directory``
      creates it with its parents): a file is made in it.

    What is missing is created, as a start would, and removed again.

    None when it works; else the reason, as the system words it."""
    path = Path(path).expanduser()
    try:
        if how == "append":
            if path.is_dir():
                return os.strerror(errno.EISDIR)
            if path.exists():
                with open(path, "a", encoding="utf-8"):
                    return None
            if not path.parent.is_dir():
                return f"the directory {path.parent} does not exist"
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.unlink(path)
            return None
        if how == "replace":
            if path.is_dir():
                return os.strerror(errno.EISDIR)
            directory = path.parent
        elif how == "directory":
            directory = path
        else:
            raise ValueError(f"open_problem: how {how!r}")
        made = []           # a start creates what is missing: so does the check, then
        try:                # removes it again
            missing = directory
            while not missing.exists():
                made.append(missing)
                missing = missing.parent
            for step in reversed(made):
                step.mkdir()
            if not directory.is_dir():
                return os.strerror(errno.ENOTDIR)
            fd, probe = tempfile.mkstemp(prefix=".elvin-check-", dir=directory)
            os.close(fd)
            os.unlink(probe)
        finally:
            for step in made:
                with contextlib.suppress(OSError):
                    step.rmdir()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def files_problems(directory: str | os.PathLike) -> list[tuple[Path, str]]:
    """The files in ``directory`` (not below) that could not be opened for
    reading and writing, as a daemon reopens its state files at start, with
    the reason; opened and closed, never changed. Empty when the directory
    is missing or cannot be listed (``open_problem`` says that)."""
    found = []
    try:
        entries = sorted(Path(directory).expanduser().iterdir())
    except OSError:
        return []
    for entry in entries:
        try:
            if not entry.is_file():
                continue
            with open(entry, "r+b"):
                pass
        except OSError as exc:
            found.append((entry, exc.strerror or str(exc)))
    return found


def file_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` is not a file this process can read, in the words the
    configuration errors use: ``no such file``, ``cannot read: Permission
    denied`` (a file in a directory this user may not enter is *not*
    missing), ``not a file``; None when it can be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    return None if regular else "not a file"


def read_problem(path: str | os.PathLike[str], *, directory: bool = False) -> str | None:
    """Why ``path`` could not be read (listed, with ``directory``) now, or None."""
    try:
        if directory:
            with os.scandir(path) as entries:
                next(entries, None)
        else:
            with open(path, "rb"):
                pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None
