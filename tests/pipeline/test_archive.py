"""ArchiveWriter: nothing appended is lost, files are partitioned by hour,
appends are cheap and thread-safe. (No Spark here.)"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import elvin.pipeline.archive as archive_mod
from elvin.pipeline.archive import (
    ARROW_SCHEMA,
    ArchiveClosedError,
    ArchiveError,
    ArchiveRecord,
    ArchiveWriter,
    archive_files,
    encoded_size,
    read_archive,
)
from elvin.values import Int64

T0 = datetime(2024, 5, 1, 10, 15, tzinfo=UTC).timestamp()


def _record(i: int, t: float | None = None) -> ArchiveRecord:
    return ArchiveRecord({"n": i, "Group": "chat"}, producer=f"p{i % 3}", subscriptions=1,
                         clients=1, time=T0 + i if t is None else t)


def test_close_flushes_everything_appended_from_threads_and_event_loop(tmp_path):
    writer = ArchiveWriter(tmp_path, batch_rows=100_000, flush_seconds=3600)

    def worker(base: int) -> None:
        for i in range(base, base + 300):
            writer.append(_record(i))

    threads = [threading.Thread(target=worker, args=(k * 1000,)) for k in range(3)]
    for t in threads:
        t.start()

    async def from_loop() -> None:
        for i in range(5000, 5200):
            writer.append(_record(i))
            if i % 50 == 0:
                await asyncio.sleep(0)

    asyncio.run(from_loop())
    for t in threads:
        t.join()
    assert archive_files(tmp_path) == []          # nothing forced a write yet
    writer.close()
    rows = read_archive(tmp_path)
    assert sorted(r["attributes"]["n"] for r in rows) == sorted(
        [i for k in range(3) for i in range(k * 1000, k * 1000 + 300)] + list(range(5000, 5200)))
    assert writer.rows_written == 1100 and writer.pending_rows == 0


def test_partitioned_by_hour(tmp_path):
    with ArchiveWriter(tmp_path) as writer:
        for hour in range(3):
            for k in range(4):
                writer.append(_record(hour * 10 + k, t=T0 + hour * 3600 + k * 60))
    dirs = sorted(p.name for p in tmp_path.iterdir())
    assert dirs == ["hour=2024-05-01T10", "hour=2024-05-01T11", "hour=2024-05-01T12"]
    for path in archive_files(tmp_path):
        label = path.parent.name.split("=")[1]
        assert path.name.startswith("part-") and path.suffix == ".parquet"
        table = pq.read_table(path)
        assert table.schema.equals(ARROW_SCHEMA, check_metadata=False)
        for t in table.column("time").to_pylist():
            assert t.strftime("%Y-%m-%dT%H") == label
    assert not list(tmp_path.rglob(".*"))       # no temporary files left


def test_flush_seconds_writes_without_close(tmp_path):
    writer = ArchiveWriter(tmp_path, batch_rows=10_000, flush_seconds=0.2)
    for i in range(5):
        writer.append(_record(i))
    deadline = time.monotonic() + 10
    while not archive_files(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(read_archive(tmp_path)) == 5
    writer.close()


def test_full_batch_wakes_the_writer(tmp_path):
    writer = ArchiveWriter(tmp_path, batch_rows=10, flush_seconds=3600)
    for i in range(10):
        writer.append(_record(i))
    deadline = time.monotonic() + 10
    while writer.rows_written < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writer.rows_written == 10
    writer.close()


def test_flush_waits_for_the_disk(tmp_path):
    writer = ArchiveWriter(tmp_path, batch_rows=10_000, flush_seconds=3600)
    for i in range(7):
        writer.append(_record(i))
    assert writer.flush(timeout=30)
    assert len(read_archive(tmp_path)) == 7
    writer.append(_record(8))
    writer.close()
    assert len(read_archive(tmp_path)) == 8


def test_append_after_close(tmp_path):
    writer = ArchiveWriter(tmp_path)
    writer.close()
    writer.close()        # idempotent
    with pytest.raises(ArchiveClosedError):
        writer.append(_record(1))


def test_types_stay_distinct(tmp_path):
    attrs = {"i32": 5, "i64": Int64(5), "big": 2 ** 40, "r": 5.0, "s": "5", "o": b"5",
             "nan": math.nan, "inf": -math.inf, "nz": -0.0, "empty": "", "eo": b"",
             "uni": "日本語 😀"}
    with ArchiveWriter(tmp_path) as writer:
        writer.append(ArchiveRecord(attrs, producer=None, time=T0, size=999))
    (row,) = read_archive(tmp_path)
    got = row["attributes"]
    assert type(got["i32"]) is int and type(got["i64"]) is Int64 and type(got["big"]) is Int64
    assert type(got["r"]) is float and type(got["s"]) is str and type(got["o"]) is bytes
    assert math.isnan(got["nan"]) and got["inf"] == -math.inf
    assert math.copysign(1, got["nz"]) == -1
    assert got["uni"] == "日本語 😀" and got["empty"] == "" and got["eo"] == b""
    assert row["size"] == 999 and row["producer"] is None
    assert row["time"] == datetime.fromtimestamp(T0, UTC) and row["hour"] == "2024-05-01T10"
    # exactly one value field per entry, the one "type" names
    table = pq.read_table(archive_files(tmp_path)[0])
    for entry in table.column("attributes").to_pylist()[0]:
        fields = ["int32", "int64", "real64", "string", "opaque"]
        assert [f for f in fields if entry[f] is not None] == [fields[entry["type"] - 1]]


def test_invalid_values_are_left_out_and_counted(tmp_path):
    with ArchiveWriter(tmp_path) as writer:
        writer.append(ArchiveRecord({"ok": 1, "flag": True, "huge": 2 ** 70, "bad": "\ud800",
                                     "obj": object()}, time=T0))
    (row,) = read_archive(tmp_path)
    assert row["attributes"] == {"ok": 1}
    assert writer.invalid_values == 4


def test_size_defaults_to_the_xdr_size(tmp_path):
    attrs = {"Message": "hi", "n": 1, "l": Int64(1), "o": b"abcde"}
    # count 4; each: name (4 + padded) + type 4; values 4+4, 4, 8, 4+8
    assert encoded_size(attrs) == 4 + (4 + 8 + 4 + 8) + (4 + 4 + 4 + 4) + (4 + 4 + 4 + 8) + \
        (4 + 4 + 4 + 12)
    with ArchiveWriter(tmp_path) as writer:
        writer.append(ArchiveRecord(attrs, time=T0))
    assert read_archive(tmp_path)[0]["size"] == encoded_size(attrs)


def test_write_failure_is_retried(tmp_path, monkeypatch):
    real = archive_mod.write_table
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(archive_mod, "write_table", flaky)
    writer = ArchiveWriter(tmp_path, flush_seconds=0.1)
    for i in range(3):
        writer.append(_record(i))
    writer.close()
    assert writer.write_errors == 1 and len(read_archive(tmp_path)) == 3


def test_close_raises_when_rows_cannot_be_written(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(archive_mod, "write_table", broken)
    writer = ArchiveWriter(tmp_path, flush_seconds=0.05)
    writer.append(_record(1))
    with pytest.raises(ArchiveError, match="1 rows could not be written"):
        writer.close()


def test_pending_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(archive_mod, "write_table",
                        lambda *a, **k: (_ for _ in ()).throw(OSError(28, "full")))
    writer = ArchiveWriter(tmp_path, batch_rows=5, flush_seconds=0.05, max_pending_rows=5)
    accepted = [writer.append(_record(i)) for i in range(8)]
    assert accepted.count(True) == 5 and writer.dropped_rows == 3
    with pytest.raises(ArchiveError):
        writer.close()


def test_read_errors_name_the_directory(tmp_path):
    with pytest.raises(ArchiveError, match=str(tmp_path / "missing")):
        read_archive(tmp_path / "missing")
    with pytest.raises(ArchiveError, match="is empty"):
        read_archive(tmp_path)
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(ArchiveError, match="not a directory"):
        read_archive(Path(file))


def test_rows_of_a_later_hour_first_keep_both_hours(tmp_path):
    """One batch whose first rows belong to a later hour than the rest: each
    hour gets its own file (a grouping bug once wrote both to one name)."""
    with ArchiveWriter(tmp_path, batch_rows=100_000, flush_seconds=3600) as writer:
        for i in range(5000, 5010):
            writer.append(_record(i))
        for i in range(0, 30):
            writer.append(_record(i))
    rows = read_archive(tmp_path)
    assert sorted(r["attributes"]["n"] for r in rows) == list(range(30)) + list(range(5000, 5010))
    assert len(archive_files(tmp_path)) == 2
