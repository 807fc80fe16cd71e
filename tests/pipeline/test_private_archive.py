"""``elvin-pipeline`` over an archive a real router wrote with a private
notification in it (issue 31): by default the back-test cannot match what
the archive does not hold, says how many it left out, and the report counts
it under ``(private)``; with ``archive-private`` it is matched like any
other. Version 1 files in the same archive are read too."""

from __future__ import annotations

import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from elvin.pipeline.archive import ARROW_SCHEMA, archive_files
from elvin.pipeline.cli import main
from tests.integration.archive_private_util import archive_traffic

pytestmark = pytest.mark.timeout(900)    # Spark on a shared machine: be patient


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    base = tmp_path_factory.mktemp("private")
    return {"default": str(archive_traffic(base / "default")),
            "kept": str(archive_traffic(base / "kept", keep_private=True))}


def backtest(expression: str, archive: str, capsys) -> dict:
    assert main(["backtest", expression, archive, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_backtest_does_not_see_what_was_withheld(spark, archives, capsys):
    secret = backtest("Group == 'inner-circle'", archives["default"], capsys)
    assert (secret["matches"], secret["total"], secret["withheld"]) == (0, 1, 1)
    # an expression an empty notification would satisfy does not match the
    # withheld row either: it is not tested at all
    absent = backtest("!require(Group)", archives["default"], capsys)
    assert absent["matches"] == 0
    assert main(["backtest", "require(Message)", archives["default"]]) == 0
    out = capsys.readouterr().out
    assert "Matches: 1 " in out
    assert "Not tested: 1 private notifications archived without their attributes" in out


def test_backtest_matches_private_notifications_kept_by_archive_private(spark, archives,
                                                                         capsys):
    result = backtest("Group == 'inner-circle'", archives["kept"], capsys)
    assert (result["matches"], result["total"], result["withheld"]) == (1, 2, 0)
    assert result["sample"][0]["private"] is True


def test_report_counts_private_notifications(spark, archives, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", archives["default"], "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Private (for key holders only): 1, 1 archived without their attributes" in text
    with open(out / "groups.csv", encoding="utf-8") as fh:
        groups = {r["group"]: int(r["notifications"]) for r in csv.DictReader(fh)}
    assert groups == {"(private)": 1, "everyone": 1}
    with open(out / "summary.csv", encoding="utf-8") as fh:
        summary = {r["key"]: r["value"] for r in csv.DictReader(fh)}
    assert (summary["private"], summary["withheld"], summary["notifications"]) == ("1", "1",
                                                                                  "2")


def test_version_1_files_are_read_by_spark(spark, archives, tmp_path, capsys):
    """A version 1 file (no ``private`` column) next to version 2 ones."""
    import shutil

    archive = tmp_path / "mixed"
    shutil.copytree(archives["kept"], archive)
    v1_schema = pa.schema([f for f in ARROW_SCHEMA if f.name != "private"])
    v1 = pa.table({"time": pa.array([pq.read_table(archive_files(archive)[0])
                                     .column("time")[0].as_py()],
                                    pa.timestamp("ms", tz="UTC")),
                   "producer": [None],
                   "attributes": [[{"name": "Group", "type": 4, "int32": None, "int64": None,
                                    "real64": None, "string": "inner-circle",
                                    "opaque": None}]],
                   "subscriptions": [0], "clients": [0], "secure": [False], "size": [32]},
                  schema=v1_schema)
    pq.write_table(v1, archive_files(archive)[0].parent / "part-version-1.parquet")
    result = backtest("Group == 'inner-circle'", str(archive), capsys)
    assert (result["matches"], result["total"], result["withheld"]) == (2, 3, 0)
