"""``elvin-pipeline``: back-test and report commands, exit codes, errors.

The commands run in-process and reuse the test session's SparkSession.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

import pytest
from pipeline_data import make_records

from elvin.pipeline.cli import main
from elvin.pipeline.report import NO_GROUP, matplotlib_available
from elvin.pipeline.session import Progress
from elvin.subscription import compile as compile_subscription

pytestmark = pytest.mark.timeout(900)    # Spark on a shared machine: be patient


def _csv(path):
    with open(path, encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_backtest_text(spark, archive, notifications, capsys):
    expression = "fold-case(Group) == 'chat'"
    expected = sum(compile_subscription(expression).matches(n) for n in notifications)
    assert main(["backtest", expression, archive, "--sample", "3"]) == 0
    out = capsys.readouterr().out
    assert f"Matches: {expected} (" in out
    assert "Matches per hour" in out and "Sample (first 3 matches):" in out
    assert out.count('Group: "') >= 3


def test_backtest_json(spark, archive, notifications, capsys):
    expression = "size(s) > 3 && !int32(a)"
    expected = sum(compile_subscription(expression).matches(n) for n in notifications)
    assert main(["backtest", expression, archive, "--json", "--master", "local[2]"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["matches"] == expected and data["total"] == len(notifications)
    assert sum(h["matches"] for h in data["per_hour"]) == expected
    assert len(data["sample"]) == min(10, expected)


def test_backtest_bad_expression_exit_1_with_position(capsys, archive):
    assert main(["backtest", "Group == 'chat' &&", archive]) == 1
    err = capsys.readouterr().err
    assert "bad subscription" in err and "offset 18" in err and "^" in err


def test_backtest_missing_archive_exit_1(capsys, tmp_path):
    assert main(["backtest", "a == 1", str(tmp_path / "none")]) == 1
    assert str(tmp_path / "none") in capsys.readouterr().err


def test_usage_errors_exit_1(capsys):
    assert main(["backtest"]) == 1
    assert main(["frobnicate"]) == 1
    assert main(["report", "somewhere"]) == 1          # --out is required
    assert main(["--help"]) == 0
    capsys.readouterr()


def test_no_java_exit_3(monkeypatch, capsys, archive, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert main(["backtest", "a == 1", archive]) == 3
    err = capsys.readouterr().err
    assert "JAVA_HOME" in err and "java" in err
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["report", archive, "--out", str(tmp_path / "r")]) == 3
    assert "no java on PATH" in capsys.readouterr().err


def test_report(spark, archive, notifications, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", archive, "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    total = len(notifications)
    summary = data["summary"]
    assert summary["notifications"] == total
    hours = _csv(out / "hours.csv")
    assert sum(int(r["notifications"]) for r in hours) == total
    assert len(hours) == summary["hours"] == 5
    groups = {r["group"]: int(r["notifications"]) for r in _csv(out / "groups.csv")}
    assert sum(groups.values()) == total
    expected_groups = Counter(n["Group"] if isinstance(n.get("Group"), str) else NO_GROUP
                              for n in notifications)
    assert groups == dict(expected_groups)
    names = {r["name"]: int(r["notifications"]) for r in _csv(out / "attributes.csv")}
    assert names == dict(Counter(name for n in notifications for name in n))
    strings = {r["name"]: int(r["string"]) for r in _csv(out / "attributes.csv")}
    assert strings["s"] == sum(isinstance(n.get("s"), str) for n in notifications)
    assert sum(int(r["notifications"]) for r in _csv(out / "fanout.csv")) == total
    assert sum(int(r["notifications"]) for r in _csv(out / "sizes.csv")) == total
    producers = _csv(out / "producers.csv")
    assert len(producers) == 100 and all(int(r["notifications"]) == 1 for r in producers)
    # "matched nobody": delivered to no client
    records = make_records(notifications)
    nobody = sum(r.clients == 0 for r in records)
    assert summary["matched_nobody"] == nobody
    assert summary["matched_nobody_share"] == pytest.approx(nobody / total)
    assert sum(int(r["matched_nobody"]) for r in hours) == nobody
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "Elvin traffic report" in html and "groups.csv" in html
    if matplotlib_available():
        for name in ("hours", "groups", "attributes", "producers", "fanout", "sizes"):
            png = out / f"{name}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert f"{name}.png" in html


def test_report_text(spark, archive, tmp_path, capsys):
    assert main(["report", archive, "--out", str(tmp_path / "r2")]) == 0
    out = capsys.readouterr().out
    assert "Notifications: 500 in 5 hours" in out and "index.html" in out


def test_progress_is_silent_off_a_terminal(spark):
    stream = io.StringIO()
    with Progress(spark, "job", stream=stream, interval=0.01) as progress:
        spark.range(1000).count()
    assert not progress.enabled and stream.getvalue() == ""


def test_progress_reports_running_stages(spark):
    stream = io.StringIO()
    progress = Progress(spark, "job", stream=stream, interval=0.02, force=True)
    with progress:
        # slow enough to be seen: a sleepy Python-free job of a few seconds
        spark.range(0, 4, numPartitions=4).selectExpr(
            "reflect('java.lang.Thread', 'sleep', cast(700 as bigint))").collect()
    assert any(line.startswith("job: stage ") and "tasks" in line for line in progress.lines)
    assert stream.getvalue().endswith("\r")


def test_report_without_matplotlib(spark, archive, tmp_path, monkeypatch, capsys):
    import elvin.pipeline.report as report_mod

    monkeypatch.setattr(report_mod, "matplotlib_available", lambda: False)
    out = tmp_path / "plain"
    assert main(["report", archive, "--out", str(out)]) == 0
    assert "matplotlib is not installed" in capsys.readouterr().err
    assert not list(out.glob("*.png"))
    assert "No charts" in (out / "index.html").read_text(encoding="utf-8")
    assert sum(int(r["notifications"]) for r in _csv(out / "hours.csv")) == 500


def test_a_local_session_starts_its_jvm_for_a_quick_start(spark):
    """Local runs are dominated by the JVM's start-up (LOCAL_JAVA_OPTIONS)."""
    from elvin.pipeline.session import LOCAL_JAVA_OPTIONS

    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = set(runtime.getInputArguments())
    assert set(LOCAL_JAVA_OPTIONS.split()) <= arguments, arguments


def _copy_archive(archive, tmp_path):
    import shutil
    copy = tmp_path / "archive"
    shutil.copytree(archive, copy)
    return copy


def test_a_file_that_is_not_parquet_is_named_before_spark(archive, tmp_path, capsys):
    copy = _copy_archive(archive, tmp_path)
    hour = next(copy.glob("hour=*"))
    damaged = hour / "part-9.parquet"
    damaged.write_bytes(b"12345")
    assert main(["backtest", "require(Group)", str(copy)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == (f"elvin-pipeline: archive file {damaged} is not a Parquet file "
                           "(only 5 bytes); move it away (or delete it) and run again")


def test_an_out_directory_it_cannot_write_is_said_before_spark(archive, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["report", archive, "--out", str(blocker / "x")]) == 1
    assert capsys.readouterr().err.strip() == (
        f"elvin-pipeline: cannot write the report directory {blocker / 'x'}: Not a directory")


def test_a_spark_failure_is_one_line_with_its_cause_and_no_banner(archive, tmp_path):
    """A file damaged inside (its PAR1 markers intact) fails in Spark: the
    run says the Java cause in one line, and Spark prints no banner, WARN
    line or stack trace of its own (a fresh JVM, as an admin runs it)."""
    import subprocess
    import sys

    copy = _copy_archive(archive, tmp_path)
    victim = next(copy.glob("hour=*/*.parquet"))
    data = bytearray(victim.read_bytes())
    data[4:-8] = b"\0" * (len(data) - 12)        # markers kept, footer length kept, content gone
    victim.write_bytes(bytes(data))
    result = subprocess.run([sys.executable, "-m", "elvin.pipeline", "backtest", "require(Group)",
                             str(copy), "--master", "local[1]"], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 3, result.stderr
    # not even the JVM's notice of the incubator module Spark's launcher adds
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("elvin-pipeline: backtest failed: ")
    assert "collectToPython" not in lines[0] and "An error occurred while calling" not in lines[0]
    assert "Exception" in lines[0] or "Error" in lines[0]
    # the file at fault is named, and the Java is plain
    assert f"cannot read the archive file {victim} (damaged?" in lines[0], lines[0]
    assert "shaded." not in lines[0] and "Struct:" not in lines[0]
