"""The router's traffic archive: Parquet files, one row per notification.

Layout
------
::

    ARCHIVE/
      hour=2024-05-01T13/part-<writer>-000001.parquet
      hour=2024-05-01T13/part-<writer>-000002.parquet
      hour=2024-05-01T14/...

``hour`` is the UTC hour of arrival, ``YYYY-MM-DDTHH``, written only in the
directory name (Hive-style partitioning: Spark and pyarrow turn it back into
a string column, and a query on a few hours reads only their directories).
Files appear atomically: each is written under a hidden name (``.part-...``,
which Spark and pyarrow skip) and renamed when complete. They are the
writer's alone: files are created with mode 0600 and the directories the
writer creates (the archive's, the hours') 0700, for what a producer sent
only to key holders may be in them (``private`` below). A directory that
already exists keeps its mode.

Schema (version 2)
------------------
| column          | Parquet / Arrow type                    | meaning                                   |
| --------------- | --------------------------------------- | ----------------------------------------- |
| `time`          | timestamp(ms, UTC), not null            | arrival time at the router                |
| `hour`          | string (the partition directory)        | `YYYY-MM-DDTHH` (UTC) of `time`           |
| `producer`      | string (null if unknown)                | producer channel, `N/host:port` (below)   |
| `attributes`    | list<struct<...>>, not null (see below) | the notification, in its attribute order  |
| `subscriptions` | int32, not null                         | subscriptions that matched it             |
| `clients`       | int32, not null                         | clients it was delivered to               |
| `secure`        | bool, not null                          | any match was a secure (key) match        |
| `size`          | int32, not null                         | size in bytes (see below)                 |
| `private`       | bool, not null (version 2)              | sent for key holders only (below)         |

Private notifications: one sent with ``deliver_insecure = false`` may only
reach subscribers holding its keys (a private tickertape group, say). By
default the router archives it *without* its attributes and producer: its
row keeps ``time``, the counts and ``secure``, and ``size`` rounded up to a
power of two of at least 256 bytes (``elvin.pipeline.withheld``: the exact
size would tell the message's length), with ``private`` true and an empty
``attributes`` list, so that traffic figures stay about right while nobody
who can read the archive reads the message, or how long it was. With ``elvind
--archive-private`` (``archive-private = true``) such rows keep their
attributes too, ``private`` still true. ``elvin-archive`` does the same for
what it received only through a secure match, unless given
``--archive-private``. Back-tests leave withheld rows out (they have
nothing to match).

Version 1 (no ``private`` column) is read as version 2 with ``private``
false: files of both versions may sit in one archive. Readers of version 1
ignore the new column.
The router names a producer ``N/host:port``: its peer address, prefixed by
a serial number (channels numbered in order of their first notification in
that router run), so that a reused address is not mistaken for the same
session. Notifications the router makes itself (statistics) and those
archived by ``elvin-archive`` (a client cannot see the producer) have null.

Each `attributes` entry is `struct<name: string not null, type: int8 not
null, int32: int32, int64: int64, real64: double, string: string, opaque:
binary>`. `type` is the Elvin value type code of the wire format (1 int32,
2 int64, 3 real64, 4 string, 5 opaque) and exactly one of the five value
fields -- the one `type` names -- is set, the others are null. The five
Elvin types therefore stay distinct (an int64 ``5`` is not an int32 ``5``, a
string is never confused with an opaque), NaN, the infinities and -0.0
survive as real64 values, and names keep the notification's order.

``size`` is the XDR size of the attribute list (count, then name, type code
and value of each attribute, each padded to 4 bytes): the NotifyEmit packet
length less its fixed header and keys. The router passes the length of the
attribute block it received; when a record has no size the writer computes
the same number from the attributes, so both sources agree.

Writing
-------
``ArchiveWriter(directory, batch_rows=10000, flush_seconds=5.0)``:
``append(record)`` only appends a reference to a list under a lock (safe to
call from the asyncio event loop or any thread); a background thread turns
batches into Arrow tables and writes them, at the latest ``flush_seconds``
after a row arrived or as soon as ``batch_rows`` rows are waiting.
``flush()`` waits until everything appended so far is on disk; ``close()``
writes the rest and stops the thread -- every appended row is in a file
afterwards, or ``close()`` raises ``ArchiveError``. Both block while the
writer works: from a coroutine, call them through
``loop.run_in_executor(None, writer.close)``. A record is not copied:
do not mutate its attribute dict after appending it.

Values that are no Elvin value (a ``bool``, an ``int`` beyond int64, a
string with lone surrogates...) cannot be archived faithfully; such an
attribute is left out of its row and counted in ``invalid_values``. If the
disk refuses writes, rows wait and are retried; beyond ``max_pending_rows``
waiting rows ``append`` refuses new ones (returns ``False``, counted in
``dropped_rows``) instead of growing without bound.
"""

from __future__ import annotations

import logging
import os
import threading
import time as _time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from elvin.fileutil import make_directory, reading
from elvin.pipeline.archive_modes import PRIVATE_DIRECTORY, PRIVATE_FILE
from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Int64

log = logging.getLogger(__name__)

__all__ = [
    "ARROW_SCHEMA",
    "ATTRIBUTE_TYPE",
    "PRIVATE_DIRECTORY",
    "PRIVATE_FILE",
    "READ_SCHEMA",
    "SCHEMA_VERSION",
    "SPARK_SCHEMA_DDL",
    "TYPE_CODES",
    "ArchiveClosedError",
    "ArchiveError",
    "ArchiveRecord",
    "ArchiveWriter",
    "archive_files",
    "check_archive",
    "decode_attributes",
    "encoded_size",
    "hour_label",
    "read_archive",
    "write_table",
]

SCHEMA_VERSION = 2

#: ``type`` codes of attribute entries (the XDR value type codes).
TYPE_CODES = {"int32": 1, "int64": 2, "real64": 3, "string": 4, "opaque": 5}
_INT32, _INT64, _REAL64, _STRING, _OPAQUE = 1, 2, 3, 4, 5

ATTRIBUTE_TYPE = pa.struct([
    pa.field("name", pa.string(), nullable=False),
    pa.field("type", pa.int8(), nullable=False),
    pa.field("int32", pa.int32()),
    pa.field("int64", pa.int64()),
    pa.field("real64", pa.float64()),
    pa.field("string", pa.string()),
    pa.field("opaque", pa.binary()),
])

#: Schema of each Parquet file (``hour`` lives in the directory name).
ARROW_SCHEMA = pa.schema([
    pa.field("time", pa.timestamp("ms", tz="UTC"), nullable=False),
    pa.field("producer", pa.string()),
    pa.field("attributes", pa.list_(pa.field("element", ATTRIBUTE_TYPE, nullable=False)),
             nullable=False),
    pa.field("subscriptions", pa.int32(), nullable=False),
    pa.field("clients", pa.int32(), nullable=False),
    pa.field("secure", pa.bool_(), nullable=False),
    pa.field("size", pa.int32(), nullable=False),
    pa.field("private", pa.bool_(), nullable=False),
], metadata={b"elvin.archive.version": str(SCHEMA_VERSION).encode()})

#: how version 1 files (no ``private``) are read: the column comes back null
READ_SCHEMA = pa.schema([*ARROW_SCHEMA][:-1] + [pa.field("private", pa.bool_())],
                        metadata=ARROW_SCHEMA.metadata)

#: The same schema for Spark readers, partition column included.
SPARK_SCHEMA_DDL = (
    "time TIMESTAMP, producer STRING, "
    "attributes ARRAY<STRUCT<name: STRING, type: TINYINT, int32: INT, int64: BIGINT, "
    "real64: DOUBLE, string: STRING, opaque: BINARY>>, "
    "subscriptions INT, clients INT, secure BOOLEAN, size INT, private BOOLEAN, hour STRING"
)

_MS_PER_HOUR = 3_600_000


class ArchiveError(Exception):
    """The archive cannot be read or written (names the directory)."""


class ArchiveClosedError(ArchiveError, RuntimeError):
    """``append`` after ``close``."""


@dataclass(slots=True)
class ArchiveRecord:
    """One notification as the router saw it.

    ``time`` is seconds since the epoch (``time.time()``) or an aware
    ``datetime``; ``None`` means "now" (taken when appended). ``size`` is the
    packet size in bytes if known, else ``None`` (computed, see the module
    documentation). ``private``: sent for key holders only (a row whose
    attributes were withheld has it set and no attributes).
    """

    attributes: Mapping[str, Any]
    producer: str | None = None
    subscriptions: int = 0
    clients: int = 0
    secure: bool = False
    size: int | None = None
    time: float | datetime | None = None
    private: bool = False


def hour_label(ms: int) -> str:
    """``YYYY-MM-DDTHH`` (UTC) of a time in milliseconds since the epoch."""
    return datetime.fromtimestamp(ms // _MS_PER_HOUR * 3600, UTC).strftime("%Y-%m-%dT%H")


def _pad4(n: int) -> int:
    return (n + 3) & ~3


def encoded_size(attributes: Mapping[str, Any]) -> int:
    """XDR size of an attribute list (see the module documentation)."""
    total = 4
    for name, value in attributes.items():
        total += 4 + _pad4(len(name.encode("utf-8", "surrogatepass"))) + 4
        t = type(value)
        if t is int and INT32_MIN <= value <= INT32_MAX:
            total += 4
        elif t is str:
            total += 4 + _pad4(len(value.encode("utf-8", "surrogatepass")))
        elif t is bytes or t is bytearray or t is memoryview:
            total += 4 + _pad4(len(value))
        else:
            total += 8
    return total


# ---------------------------------------------------------------------------
# rows -> Arrow

def _to_ms(value: float | datetime | int | None) -> int:
    if value is None:
        return int(_time.time() * 1000)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("archive times must be timezone-aware datetimes")
        return int(value.timestamp() * 1000)
    return int(value * 1000)


def _clamp32(n: int | None) -> int:
    if n is None:
        return 0
    return max(INT32_MIN, min(INT32_MAX, int(n)))


#: rows converted per pyarrow call by the writer thread (see ``_write``)
CONVERT_SLICE_ROWS = 1000


class _Converter:
    """Builds Arrow columns from records; counts values it had to leave out."""

    def __init__(self) -> None:
        self.invalid = 0

    def table(self, rows: list[tuple]) -> pa.Table:
        n = len(rows)
        times = np.empty(n, dtype=np.int64)
        producers: list[str | None] = [None] * n
        subs = np.empty(n, dtype=np.int32)
        clients = np.empty(n, dtype=np.int32)
        secure = np.empty(n, dtype=np.bool_)
        sizes = np.empty(n, dtype=np.int32)
        private = np.empty(n, dtype=np.bool_)
        offsets = np.empty(n + 1, dtype=np.int32)
        names: list[str] = []
        types: list[int] = []
        i32: list[int | None] = []
        i64: list[int | None] = []
        r64: list[float | None] = []
        s: list[str | None] = []
        o: list[bytes | None] = []
        pos = 0
        # bound methods and an inline range test: this loop is most of the
        # archive's CPU cost, paid in the router's process
        add_name, add_type = names.append, types.append
        add_i32, add_i64, add_r64, add_s, add_o = i32.append, i64.append, r64.append, \
            s.append, o.append
        for r, (ms, producer, attrs, nsubs, nclients, is_secure, size, is_private) in \
                enumerate(rows):
            times[r] = ms
            producers[r] = producer if producer is None or type(producer) is str \
                else str(producer)
            subs[r] = nsubs if type(nsubs) is int and 0 <= nsubs <= INT32_MAX \
                else _clamp32(nsubs)
            clients[r] = nclients if type(nclients) is int and 0 <= nclients <= INT32_MAX \
                else _clamp32(nclients)
            secure[r] = bool(is_secure)
            private[r] = bool(is_private)
            offsets[r] = pos
            for name, value in attrs.items():
                t = type(value)
                if t is str:
                    try:
                        value.encode("utf-8")
                    except UnicodeEncodeError:
                        self.invalid += 1
                        continue
                    code = _STRING
                elif t is int:
                    if INT32_MIN <= value <= INT32_MAX:
                        code = _INT32
                    elif INT64_MIN <= value <= INT64_MAX:
                        code = _INT64
                    else:
                        self.invalid += 1
                        continue
                elif t is float:
                    code = _REAL64
                elif t is Int64:
                    code = _INT64
                elif t is bytes or t is bytearray or t is memoryview:
                    value = bytes(value)
                    code = _OPAQUE
                else:
                    self.invalid += 1
                    continue
                if type(name) is not str or not name:
                    self.invalid += 1
                    continue
                add_name(name)
                add_type(code)
                add_i32(value if code == _INT32 else None)
                add_i64(int(value) if code == _INT64 else None)
                add_r64(value if code == _REAL64 else None)
                add_s(value if code == _STRING else None)
                add_o(value if code == _OPAQUE else None)
                pos += 1
            if size is None:
                size = encoded_size(attrs)
            sizes[r] = size if type(size) is int and 0 <= size <= INT32_MAX \
                else _clamp32(size)
        offsets[n] = pos
        entries = pa.StructArray.from_arrays(
            [pa.array(names, pa.string()), pa.array(types, pa.int8()),
             pa.array(i32, pa.int32()), pa.array(i64, pa.int64()),
             pa.array(r64, pa.float64()), pa.array(s, pa.string()),
             pa.array(o, pa.binary())],
            fields=list(ATTRIBUTE_TYPE))
        attributes = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries,
                                              type=ARROW_SCHEMA.field("attributes").type)
        return pa.Table.from_arrays(
            [pa.array(times, pa.timestamp("ms", tz="UTC")), pa.array(producers, pa.string()),
             attributes, pa.array(subs), pa.array(clients), pa.array(secure),
             pa.array(sizes), pa.array(private)],
            schema=ARROW_SCHEMA)


def write_table(directory: str | os.PathLike, table: pa.Table, prefix: str,
                compression: str = "zstd") -> list[Path]:
    """Write ``table`` (``ARROW_SCHEMA``) into hour partitions of ``directory``.

    One file per hour present, named ``<prefix>.parquet``, written under a
    hidden name and renamed, readable by the writer only (0600, in a 0700
    hour directory if it makes one). Returns the paths written.
    """
    base = Path(directory)
    ms = table.column("time").cast(pa.int64()).to_numpy()
    hours = ms // _MS_PER_HOUR
    written: list[Path] = []
    if len(hours) == 0:
        return written
    groups: list[tuple[int, npt.NDArray[np.intp] | None]]
    if hours.min() == hours.max():
        groups = [(int(hours[0]), None)]
    else:
        order = np.argsort(hours, kind="stable")
        sorted_hours = hours[order]
        cuts = np.flatnonzero(np.diff(sorted_hours)) + 1
        groups = [(int(hours[chunk[0]]), chunk)  # chunk holds indices into the table
                  for chunk in np.split(order, cuts)]
    for hour, indices in groups:
        part = table if indices is None else table.take(pa.array(indices))
        folder = base / f"hour={hour_label(hour * _MS_PER_HOUR)}"
        folder.mkdir(mode=PRIVATE_DIRECTORY, parents=True, exist_ok=True)
        final = folder / f"{prefix}.parquet"
        tmp = folder / f".{prefix}.parquet.tmp"
        # created 0600 from the start: no moment where others may open it
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0),
                     PRIVATE_FILE)
        with open(fd, "wb") as out:
            pq.write_table(part, out, compression=compression)
        os.replace(tmp, final)
        written.append(final)
    return written


class ArchiveWriter:
    """Appends notifications to the archive in ``directory`` (see module doc).

    Counters: ``rows_written``, ``files_written``, ``dropped_rows``,
    ``invalid_values``, ``write_errors``; ``last_error`` is the last write
    exception (``None`` once a write succeeds again).
    """

    def __init__(self, directory: str | os.PathLike, *, batch_rows: int = 10_000,
                 flush_seconds: float = 5.0, max_pending_rows: int = 1_000_000,
                 compression: str = "zstd") -> None:
        if batch_rows < 1:
            raise ValueError("batch_rows must be at least 1")
        if flush_seconds <= 0:
            raise ValueError("flush_seconds must be positive")
        self.directory = make_directory(directory, "archive directory", ArchiveError,
                                        mode=PRIVATE_DIRECTORY)
        self.batch_rows = batch_rows
        self.flush_seconds = flush_seconds
        self.max_pending_rows = max(max_pending_rows, batch_rows)
        self.compression = compression
        self.rows_written = 0
        self.files_written = 0
        self.dropped_rows = 0
        self.write_errors = 0
        self.last_error: BaseException | None = None
        self._converter = _Converter()
        self._id = f"{int(_time.time() * 1000):013d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._seq = 0
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._rows: list[tuple] = []
        self._appended = 0     # rows accepted so far
        self._settled = 0      # rows written so far
        self._closed = False
        self._stopped = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="elvin-archive-writer",
                                        daemon=True)
        self._thread.start()

    @property
    def invalid_values(self) -> int:
        return self._converter.invalid

    @property
    def pending_rows(self) -> int:
        return self._appended - self._settled

    # -- producer side ---------------------------------------------------------
    def append(self, record: ArchiveRecord | Mapping[str, Any]) -> bool:
        """Queue one notification; ``False`` if refused (too many pending)."""
        if not isinstance(record, ArchiveRecord):
            record = ArchiveRecord(**record)
        t = record.time
        ms = int(_time.time() * 1000) if t is None else _to_ms(t)
        row = (ms, record.producer, record.attributes, record.subscriptions,
               record.clients, record.secure, record.size, record.private)
        with self._lock:
            if self._closed:
                raise ArchiveClosedError(f"archive writer for {self.directory} is closed")
            if self._appended - self._settled >= self.max_pending_rows:
                self.dropped_rows += 1
                return False
            self._rows.append(row)
            self._appended += 1
            n = len(self._rows)
        if n == self.batch_rows:
            self._wake.set()
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every row appended so far is written, a write fails, or
        ``timeout`` seconds pass. Returns ``True`` when all of them are on disk.
        """
        deadline = None if timeout is None else _time.monotonic() + timeout
        with self._lock:
            target = self._appended
            failures = self.write_errors
        self._wake.set()
        with self._done:
            while (self._settled < target and not self._stopped
                   and self.write_errors == failures):
                remaining = None if deadline is None else deadline - _time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._done.wait(remaining)
            return self._settled >= target

    def close(self, timeout: float | None = None) -> None:
        """Write every pending row and stop the writer thread.

        Raises ``ArchiveError`` if rows could not be written.
        """
        with self._lock:
            already = self._closed
            self._closed = True
        self._wake.set()
        if not already or self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            raise ArchiveError(f"archive writer for {self.directory} did not finish in "
                               f"{timeout} s ({self.pending_rows} rows pending)")
        if self.pending_rows:
            raise ArchiveError(f"{self.pending_rows} rows could not be written to "
                               f"{self.directory}: {self.last_error}") from self.last_error

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- writer thread ------------------------------------------------------------
    def _run(self) -> None:
        failures = 0
        while True:
            if failures:
                # back off, but give up after a few tries once closing
                self._wake.wait(min(self.flush_seconds, 0.2 * 2 ** failures))
            else:
                self._wake.wait(self.flush_seconds)
            self._wake.clear()
            with self._lock:
                rows, self._rows = self._rows, []
                closing = self._closed
            if rows:
                try:
                    self._write(rows)
                except Exception as exc:  # noqa: BLE001 -- keep the rows, report, retry
                    failures += 1
                    with self._lock:
                        self.write_errors += 1
                    self.last_error = exc
                    log.error("archive %s: writing %d rows failed: %s", self.directory,
                              len(rows), exc)
                    with self._done:
                        self._rows[:0] = rows
                        self._done.notify_all()
                    if closing and failures >= 3:
                        break
                    continue
                failures = 0
                self.last_error = None
                with self._done:
                    self._settled += len(rows)
                    self._done.notify_all()
            if closing:
                with self._lock:
                    if not self._rows:
                        break
        with self._done:
            self._stopped = True
            self._done.notify_all()

    def _write(self, rows: list[tuple]) -> None:
        # Convert in slices, yielding the GIL between them: one pyarrow call on a
        # whole backlog would hold it for long enough to stall the router's
        # event loop (measured: p99 latency 250 ms at 1,000/s behind a backlog).
        step = CONVERT_SLICE_ROWS
        if len(rows) <= step:
            table = self._converter.table(rows)
        else:
            parts = []
            for start in range(0, len(rows), step):
                parts.append(self._converter.table(rows[start:start + step]))
                _time.sleep(0)
            table = pa.concat_tables(parts)
        self._seq += 1
        paths = write_table(self.directory, table, f"part-{self._id}-{self._seq:06d}",
                            self.compression)
        self.rows_written += len(rows)
        self.files_written += len(paths)


# ---------------------------------------------------------------------------
# reading

def archive_files(directory: str | os.PathLike) -> list[Path]:
    """The archive's data files, oldest hour first (no error if none)."""
    base = Path(directory)
    if not base.is_dir():
        return []
    return sorted(p for p in base.glob("hour=*/*.parquet") if not p.name.startswith((".", "_")))


#: what every Parquet file begins and ends with
PARQUET_MAGIC = b"PAR1"


def check_archive(directory: str | os.PathLike) -> list[Path]:
    """The data files, or ``ArchiveError`` saying why there are none or
    which one is not Parquet at all (before Spark starts, which would bury
    the reason in a Java stack trace)."""
    base = Path(directory)
    with reading("archive directory", base, ArchiveError, missing=True):
        base.stat()
        files = archive_files(base) if base.is_dir() else None
        if files is None:
            raise ArchiveError(f"archive {base} is not a directory")
        os.listdir(base)       # archive_files's glob passes over a directory it cannot read
    if not files:
        raise ArchiveError(f"archive directory {base} is empty: no hour=*/part-*.parquet "
                           "files (is it the directory given to the router's --archive?)")
    for file in files:
        problem = parquet_problem(file)
        if problem:
            raise ArchiveError(f"archive file {file} {problem}; move it away (or delete "
                               "it) and run again")
    return files


def parquet_problem(path: Path) -> str | None:
    """Why ``path`` is not a Parquet file (too short, no ``PAR1`` at either
    end, unreadable), or None. A cheap look at 8 bytes, not a validation."""
    magic = len(PARQUET_MAGIC)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 2 * magic + 4:
                return f"is not a Parquet file (only {size} bytes)"
            head = fh.read(magic)
            fh.seek(-magic, os.SEEK_END)
            tail = fh.read(magic)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        return "is not a Parquet file (no PAR1 marker; truncated or damaged)"
    return None


def decode_value(entry: Mapping[str, Any]) -> Any:
    code = entry["type"]
    if code == _INT32:
        return int(entry["int32"])
    if code == _INT64:
        return Int64(int(entry["int64"]))
    if code == _REAL64:
        return float(entry["real64"])
    if code == _STRING:
        return entry["string"]
    if code == _OPAQUE:
        return bytes(entry["opaque"])
    raise ArchiveError(f"attribute {entry.get('name')!r} has unknown type code {code!r}")


def decode_attributes(entries) -> dict[str, Any]:
    """``attributes`` list of structs (dicts or Rows) -> notification dict."""
    out: dict[str, Any] = {}
    for entry in () if entries is None else entries:
        if not isinstance(entry, Mapping):
            entry = entry.asDict()
        out[entry["name"]] = decode_value(entry)
    return out


def read_archive(directory: str | os.PathLike) -> list[dict[str, Any]]:
    """Every row of the archive as a dict, in arrival order (for tests and
    small archives): ``time`` (aware datetime), ``hour``, ``producer``,
    ``attributes`` (a notification dict with Elvin-typed values),
    ``subscriptions``, ``clients``, ``secure``, ``size``, ``private``
    (version 1 files: false)."""
    files = check_archive(directory)
    rows: list[dict[str, Any]] = []
    for path in files:
        hour = path.parent.name.partition("=")[2]
        try:
            table = pq.read_table(path, schema=READ_SCHEMA)
        except (OSError, pa.ArrowException) as exc:
            raise ArchiveError(f"cannot read {path}: {exc}") from exc
        for row in table.to_pylist():
            row["hour"] = hour
            row["attributes"] = decode_attributes(row["attributes"])
            row["private"] = bool(row["private"])
            rows.append(row)
    rows.sort(key=lambda r: r["time"])
    return rows
