"""The router's traffic archive, written by a child process.

Why a process: ``ArchiveWriter`` (``elvin.pipeline.archive``) converts rows
to Arrow and writes Parquet in a thread. In the router that thread competed
with the event loop for the GIL: with ``elvind --archive`` the router's CPU
per notification doubled (7.5 -> 15-17 us) and p99 delivery latency at
1,000 notifications/s rose to 5-17 ms. Here the router only queues a small
tuple per notification; a child process decodes the attribute blocks with
the protocol's own decoder and feeds an ordinary ``ArchiveWriter``, so the
Parquet logic stays in one place and never runs in the router's interpreter
(the router does not even import pyarrow).

The child is a fresh interpreter, as with multiprocessing's ``spawn`` (the
router may have threads, so ``fork`` is unsafe), but started directly with
``subprocess`` (fork+exec done safely in C) rather than by multiprocessing:
spawn imports the parent's ``__main__`` again in the child, which runs the
whole program a second time when a script that embeds a router has no
``if __name__ == "__main__"`` guard.

Router side (``ArchiveProcess``, event loop thread only)::

    archive = ArchiveProcess(directory)     # checks the directory (ArchiveProcessError)
    archive.start(loop)                     # spawns the child
    archive.append(time=time.time(), producer=producer, subscriptions=subscriptions,
                   clients=clients, secure=secure, private=private, block=block)
    summary = await archive.close()         # sends the rest, waits for the child

``block`` is the notification's XDR attribute block (``bytes``), or, only if
it cannot be encoded, the attribute dict itself; for a private notification
whose attributes are withheld (``elvin.pipeline.archive``: the router's
default) it is only their size (an ``int``): what a producer sent to key
holders never even crosses the pipe. Rows are pickled in batches
(``batch_rows``, or every ``send_interval`` seconds) and written to a pipe
without ever blocking the loop: when the pipe is full they wait (``add_writer``)
and beyond ``max_pending_rows`` waiting rows new ones are dropped with a
warning. If the child dies the router logs one error and goes on routing;
rows from then on are counted as lost.

Pipe frames: a 4-byte big-endian length and a pickled list of rows, each a
plain tuple in ``ArchiveRow``'s order (a named tuple would cost the router a
Python call per row to build and another to pickle), read back by name; a
zero length asks the child to close (end of file does too). The child
ignores SIGINT and SIGTERM (a Ctrl-C or a process-group signal must not cost
the rows the router still has to send; it also runs in its own session) and
writes back a JSON summary on a second pipe, which also tells the router
when the child has died (end of file before the router asked it to close).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, cast

from elvin.fileutil import make_directory
from elvin.pipeline.archive_modes import PRIVATE_DIRECTORY

log = logging.getLogger("elvin.router.archive")

__all__ = ["ArchiveProcess", "ArchiveProcessError", "ArchiveRow", "ArchiveSummary"]

_HEADER = struct.Struct(">I")
_CLOSE = _HEADER.pack(0)
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class ArchiveRow(NamedTuple):
    """One routed notification as the router hands it to the child, the
    pipe's row in this order (``ArchiveProcess.append`` builds it, the child
    names it back with ``ArchiveRow._make``)."""

    time: float
    producer: str | None
    subscriptions: int
    clients: int
    secure: bool
    private: bool
    #: the XDR attribute block; its size only (withheld); or the dict itself
    block: bytes | int | dict


class ArchiveProcessError(Exception):
    """The archive directory cannot be used (names it); ``errno`` is the
    system's reason, when there was one."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


@dataclass
class ArchiveSummary:
    """What became of the rows, once ``close`` returned."""

    received: int = 0           # rows the router appended
    written: int | None = 0     # rows in Parquet files (None: unknown, the child died)
    dropped: int = 0            # refused: too many waiting (router side)
    invalid_values: int = 0     # attribute values left out (see ArchiveWriter)
    error: str | None = None    # why rows were lost, if any were

    @property
    def lost(self) -> int:
        """Rows neither written nor dropped (the child died, the disk failed...)."""
        if self.written is None:
            return self.received - self.dropped
        return max(0, self.received - self.written - self.dropped)


def check_directory(directory: str | os.PathLike) -> Path:
    """Create ``directory`` if needed and prove it writable, now rather than
    at the first write (the messages are the ones ``ArchiveWriter`` and the
    router always gave)."""
    path = make_directory(directory, "archive directory", ArchiveProcessError,
                          mode=PRIVATE_DIRECTORY)
    probe = path / f".elvind-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ArchiveProcessError(f"cannot write in archive directory {directory}: "
                                  f"{exc.strerror or exc}", exc.errno) from None
    return path


class ArchiveProcess:
    """The router's end of the archive child process (see module doc)."""

    def __init__(self, directory: str | os.PathLike, *, batch_rows: int = 1000,
                 send_interval: float = 0.05, max_pending_rows: int = 1_000_000,
                 writer_options: dict[str, Any] | None = None) -> None:
        self.directory = check_directory(directory)
        self.batch_rows = max(1, batch_rows)
        self.send_interval = send_interval
        self.max_pending_rows = max(max_pending_rows, self.batch_rows)
        self.writer_options = dict(writer_options or {})
        self.received_rows = 0      # every row appended
        self.dropped_rows = 0       # refused: too many waiting
        self.lost_rows = 0          # lost in the router: no child (more in the summary)
        self.process: Any = None
        self.dead = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1               # write end of the row pipe (non-blocking)
        self._results = -1          # read end of the child's summary pipe
        self._buf: list[tuple] = []
        self._queue: deque[list] = deque()   # [memoryview of frame, rows in it]
        self._pending = 0           # rows in _buf and _queue
        self._timer: asyncio.TimerHandle | None = None
        self._writing = False
        self._closing = False

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def pending_rows(self) -> int:
        return self._pending

    # -- lifecycle ----------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the child: a fresh interpreter (``sys.executable``, the parent's
        ``sys.path``), given the read end of the row pipe and the write end of
        its summary pipe, in its own session (a terminal's Ctrl-C or a signal
        to the router's process group does not reach it)."""
        data_r, data_w = os.pipe()
        result_r, result_w = os.pipe()
        config = {"directory": str(self.directory), "writer_options": self.writer_options,
                  "max_pending_rows": self.max_pending_rows, "sys_path": sys.path}
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, str(data_r), str(result_w),
                 json.dumps(config)],
                pass_fds=(data_r, result_w), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, start_new_session=True)
        except BaseException:  # no descriptor leaks; re-raised
            for fd in (data_r, data_w, result_r, result_w):
                os.close(fd)
            raise
        os.close(data_r)
        os.close(result_w)
        self.process = process
        self._loop = loop
        self._fd = data_w
        self._results = result_r
        os.set_blocking(data_w, False)
        try:        # fewer partial writes (Linux; the default is 64 KiB)
            fcntl.fcntl(data_w, _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        # the child writes its summary only when asked to close: the summary
        # pipe turning readable (end of file) before that means it died
        loop.add_reader(result_r, self._child_exited)

    def append(self, *, time: float, producer: str | None, subscriptions: int,
               clients: int, secure: bool, private: bool, block: bytes | int | dict) -> bool:
        """Queue an ``ArchiveRow`` (its fields by name: the order is this
        method's); ``False`` if the row is dropped (too many waiting, or no
        child)."""
        self.received_rows += 1
        if self.dead or self._closing:
            self.lost_rows += 1
            return False
        if self._pending >= self.max_pending_rows:
            self.dropped_rows += 1
            dropped = self.dropped_rows
            if dropped == 1 or dropped % 10_000 == 0:   # say so, but never flood the log
                log.warning("archive %s: writer is behind, %d notifications not archived "
                            "so far", self.directory, dropped)
            return False
        buf = self._buf
        buf.append((time, producer, subscriptions, clients, secure, private, block))
        self._pending += 1
        if len(buf) >= self.batch_rows:
            self._send()
        elif self._timer is None:
            self._timer = self._loop.call_later(  # type: ignore[union-attr]  # started: the loop is set
                self.send_interval, self._timed_send)
        return True

    async def close(self, timeout: float = 60.0) -> ArchiveSummary:
        """Send the remaining rows, ask the child to close and wait for it
        (at most ``timeout`` seconds, in an executor thread); never raises."""
        loop = asyncio.get_running_loop()
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.process is None:
            return self._summary(None)
        if not self.dead:
            if self._buf:
                self._frame()
            self._queue.append([memoryview(_CLOSE), 0])
        self._stop_watching()
        try:
            result = await loop.run_in_executor(None, self._finish, timeout)
        except Exception as exc:  # noqa: BLE001 -- never lose the router over the archive
            result = {"error": f"closing the archive process failed: {exc}"}
        return self._summary(result)

    # -- sending (event loop) -------------------------------------------------------
    def _timed_send(self) -> None:
        self._timer = None
        if self._buf and not self.dead:
            self._send()

    def _frame(self) -> None:
        rows, self._buf = self._buf, []
        try:
            data = pickle.dumps(rows, pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 -- a value pickle refuses: lose that row only
            kept = []
            for row in rows:
                try:
                    pickle.dumps(row, pickle.HIGHEST_PROTOCOL)
                except Exception:  # noqa: BLE001
                    self.lost_rows += 1
                    continue
                kept.append(row)
            self._pending -= len(rows) - len(kept)
            rows = kept
            data = pickle.dumps(rows, pickle.HIGHEST_PROTOCOL)
        self._queue.append([memoryview(_HEADER.pack(len(data)) + data), len(rows)])

    def _send(self) -> None:
        self._frame()
        if not self._writing:
            self._write()

    def _write(self) -> None:
        queue = self._queue
        try:
            while queue:
                entry = queue[0]
                n = os.write(self._fd, entry[0])
                if n < len(entry[0]):
                    entry[0] = entry[0][n:]
                    break
                queue.popleft()
                self._pending -= entry[1]
        except BlockingIOError:
            pass
        except OSError as exc:          # EPIPE: the child is gone
            self._child_exited(exc)
            return
        if queue and not self._writing:
            self._loop.add_writer(self._fd, self._write)  # type: ignore[union-attr]  # as above
            self._writing = True
        elif not queue and self._writing:
            self._loop.remove_writer(self._fd)  # type: ignore[union-attr]  # as above
            self._writing = False

    def _stop_watching(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if self._writing:
            loop.remove_writer(self._fd)
            self._writing = False
        if self._results >= 0:
            loop.remove_reader(self._results)

    def _child_exited(self, exc: BaseException | None = None) -> None:
        """The child died while the router runs: say so once, keep routing."""
        if self.dead or self._closing:
            return
        self.dead = True
        self._stop_watching()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        code = self.process.poll()
        lost = self._pending
        self.lost_rows += lost
        self._buf.clear()
        self._queue.clear()
        self._pending = 0
        log.error("archive %s: the archive writer process (pid %s) %s; archiving stopped "
                  "(%d notifications queued for it and those it had not written yet are "
                  "lost), the router goes on without it", self.directory, self.process.pid,
                  f"exited with code {code}" if code is not None
                  else f"is gone ({exc or 'its pipe closed'})",
                  lost)

    # -- closing (executor thread; the loop no longer touches this object) ----------
    def _finish(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        process = self.process
        error = None
        try:
            queue = self._queue
            while queue and process.poll() is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    error = f"archive process did not take the rows in {timeout} s"
                    break
                select.select([], [self._fd], [], min(remaining, 0.5))
                try:
                    entry = queue[0]
                    n = os.write(self._fd, entry[0])
                except BlockingIOError:
                    continue
                except OSError:
                    break
                if n < len(entry[0]):
                    entry[0] = entry[0][n:]
                else:
                    queue.popleft()
        finally:
            os.close(self._fd)          # end of file: the child closes in any case
            self._fd = -1
        chunks = []
        try:
            while True:                 # the summary, up to end of file
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([self._results], [], [], remaining)[0]:
                    error = error or f"archive process did not finish in {timeout} s"
                    break
                chunk = os.read(self._results, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(self._results)
            self._results = -1
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            error = error or f"archive process did not finish in {timeout} s"
            process.kill()
            process.wait(5)
        try:
            result = json.loads(b"".join(chunks)) if chunks else None
        except ValueError:
            result = None
        if result is None:
            result = {"error": error or (f"archive process exited with code "
                                         f"{process.returncode} without a summary")}
        elif error and not result.get("error"):
            result["error"] = error
        return result

    def _summary(self, result: dict | None) -> ArchiveSummary:
        result = result or {}
        error = result.get("error")
        if self.dead and not error:
            error = "the archive writer process died"
        return ArchiveSummary(received=self.received_rows, written=result.get("written"),
                              dropped=self.dropped_rows,
                              invalid_values=result.get("invalid_values", 0), error=error)


# ---------------------------------------------------------------------------
# the child process

#: run by ``python -c`` in the child: argv is the row pipe's fd, the summary
#: pipe's fd and the JSON configuration (with the parent's ``sys.path``, as
#: multiprocessing's spawn gives; unlike it, the parent's ``__main__`` is not
#: imported again, so an unguarded script that embeds a router is safe)
_BOOTSTRAP = """\
import json, sys
config = json.loads(sys.argv[3])
sys.path[:] = config.pop("sys_path")
from elvin.pipeline.archive_process import _child_main
_child_main(int(sys.argv[1]), int(sys.argv[2]), **config)
"""


def _child_main(data_fd: int, result_fd: int, directory: str, writer_options: dict,
                max_pending_rows: int) -> None:
    """Read frames, decode the XDR attribute blocks, feed an ArchiveWriter;
    write a JSON summary to ``result_fd`` when the router closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # imported here: only the child loads pyarrow
    from elvin.pipeline.archive import ArchiveError, ArchiveRecord, ArchiveWriter
    from elvin.protocol import Limits, decode_attributes

    big = 2**31 - 1     # the router already applied its own limits
    limits = Limits(max_packet_length=big, max_attributes=big, max_name_length=big,
                    max_string_length=big, max_opaque_length=big)
    summary: dict[str, Any] = {"received": 0, "written": 0, "undecodable": 0,
                               "invalid_values": 0, "error": None}

    def report() -> None:
        with os.fdopen(result_fd, "wb") as out:
            out.write(json.dumps(summary).encode())

    try:
        writer = ArchiveWriter(directory, max_pending_rows=max_pending_rows,
                               **writer_options)
    except (ArchiveError, ValueError) as exc:
        summary["error"] = str(exc)
        report()
        return
    append = writer.append
    try:
        with os.fdopen(data_fd, "rb", buffering=1 << 20) as stream:
            while True:
                header = stream.read(4)
                if len(header) < 4:
                    break                       # the router is gone: keep what came
                (size,) = _HEADER.unpack(header)
                if not size:
                    break                       # close
                data = stream.read(size)
                if len(data) < size:
                    break
                rows = pickle.loads(data)
                summary["received"] += len(rows)
                # back-pressure instead of dropping: while the writer is full the
                # pipe fills and the router buffers (and drops past its bound)
                while writer.pending_rows + len(rows) > writer.max_pending_rows:
                    writer.flush(0.05)
                for row in map(ArchiveRow._make, rows):
                    block = row.block
                    attrs: dict[str, Any]
                    if type(block) is int:          # withheld: its size only
                        attrs, size = {}, block
                    elif type(block) is bytes:
                        try:
                            attrs = decode_attributes(block, 0, limits)[0]
                        except Exception:  # noqa: BLE001 -- count it, keep the others
                            summary["undecodable"] += 1
                            continue
                        size = len(block)
                    else:           # not encodable: the router sent the dict itself
                        attrs, size = cast("dict[str, Any]", block), None
                    append(ArchiveRecord(
                        attributes=attrs, producer=row.producer,
                        subscriptions=row.subscriptions, clients=row.clients,
                        secure=row.secure, size=size, time=row.time, private=row.private))
    finally:
        try:
            writer.close()
        except ArchiveError as exc:
            summary["error"] = str(exc)
        summary["written"] = writer.rows_written
        summary["invalid_values"] = writer.invalid_values
        if summary["undecodable"] and not summary["error"]:
            summary["error"] = f"{summary['undecodable']} attribute blocks could not be decoded"
        report()
