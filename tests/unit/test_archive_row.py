"""The archive's rows are named: what the router appends by name is what
the child writes under that name (no positional tuple read in another order)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

pytest.importorskip("pyarrow")

from elvin.pipeline.archive import read_archive
from elvin.pipeline.archive_process import ArchiveProcess, ArchiveRow
from elvin.protocol import encode_attributes


def test_append_takes_the_fields_in_the_rows_order():
    """``append`` builds the pipe's tuple from its parameters; the child
    names it back with ``ArchiveRow``: the two orders are one."""
    params = [p for p in inspect.signature(ArchiveProcess.append).parameters if p != "self"]
    assert params == list(ArchiveRow._fields)


def test_each_field_lands_in_its_column(tmp_path):
    async def run() -> None:
        archive = ArchiveProcess(tmp_path / "a")
        archive.start(asyncio.get_running_loop())
        block = encode_attributes({"n": 1})
        assert archive.append(time=1_700_000_000.25, producer="7/h:1", subscriptions=3,
                              clients=2, secure=True, private=False, block=block)
        summary = await archive.close()
        assert summary.written == 1, summary
    asyncio.run(run())
    [row] = read_archive(tmp_path / "a")
    assert (row["producer"], row["subscriptions"], row["clients"], row["secure"],
            row["private"], row["attributes"]) == ("7/h:1", 3, 2, True, False, {"n": 1})
    assert row["time"].timestamp() == pytest.approx(1_700_000_000.25, abs=0.001)
    assert row["size"] == len(encode_attributes({"n": 1}))
