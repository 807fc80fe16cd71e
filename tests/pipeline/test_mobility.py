"""``elvin-pipeline mobility``: delay / losses / duplicates from trace CSVs,
on the shared Spark session, with traces whose answers are known."""

from __future__ import annotations

import csv
import json

import pytest

from elvin.pipeline.cli import main
from elvin.pipeline.mobility import COLUMNS, TraceError, check_traces, mobility

pytestmark = pytest.mark.timeout(900)

T0 = 1_700_000_000.0


def run_rows(run: str, support: str, rate: float, subs: int, *, lost=(), dup=None,
             moves=(), publications=20, producers=("p1", "p2")) -> list[list]:
    """Rows of one run: every producer publishes ``publications`` times;
    ``lost`` (producer, seq) never arrive; ``dup`` {(producer, seq): copies};
    ``moves`` (move_out, start, done) offsets in seconds."""
    dup = dup or {}
    rows = []
    for seq in range(publications):
        for producer in producers:
            t = T0 + seq / rate
            rows.append([run, support, rate, subs, "departure", producer, seq, t])
            if (producer, seq) in lost:
                continue
            for copy in range(dup.get((producer, seq), 1)):
                rows.append([run, support, rate, subs, "arrival", producer, seq,
                             t + 0.05 + copy * 0.01])
    for out, start, done in moves:
        rows.append([run, support, rate, subs, "move_out", "", "", T0 + out])
        rows.append([run, support, rate, subs, "move_in_start", "", "", T0 + start])
        rows.append([run, support, rate, subs, "move_in_done", "", "", T0 + done])
    return rows


def write(path, rows, header=COLUMNS) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows[::-1])        # order in the file must not matter


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    # basic/2/10, two runs: 3 losses, 3 duplicates, move-ins of 250, 500, 150 ms
    write(d / "r1.csv", run_rows("r1", "basic", 2.0, 10, lost={("p1", 5), ("p2", 7)},
                                 dup={("p1", 3): 3, ("p2", 1): 2},
                                 moves=[(3, 5, 5.25), (7, 8, 8.5)]))
    write(d / "r2.csv", run_rows("r2", "basic", 2.0, 10, lost={("p2", 0)},
                                 moves=[(2, 4, 4.15)]))
    # ping/2/10: no loss, one duplicate, 100 ms
    write(d / "r3.csv", run_rows("r3", "ping", 2.0, 10, dup={("p1", 9): 2},
                                 moves=[(2, 4, 4.1)]))
    # none/5/50: no move at all, no delay
    write(d / "run 4.csv", run_rows("run 4", "none", 5.0, 50, lost={("p1", 1)}))
    (d / "notes.txt").write_text("not a trace")
    return d


def test_tables(spark, traces, tmp_path):
    result = mobility(spark, traces, tmp_path / "out", max_plots=2)
    groups = {(g["support"], g["rate"], g["subscriptions"]): g for g in result.groups}
    assert [(g["support"]) for g in result.groups] == ["none", "basic", "ping"]
    basic = groups[("basic", 2.0, 10)]
    assert (basic["runs"], basic["departures"], basic["losses"], basic["duplicates"],
            basic["move_ins"]) == (2, 80, 3, 3, 3)
    assert basic["arrivals"] == 80 - 3 + 3
    assert basic["delay_ms_mean"] == pytest.approx(300, abs=0.01)
    assert basic["delay_ms_max"] == pytest.approx(500, abs=0.01)
    ping = groups[("ping", 2.0, 10)]
    assert (ping["losses"], ping["duplicates"]) == (0, 1)
    assert ping["delay_ms_mean"] == pytest.approx(100, abs=0.01)
    none = groups[("none", 5.0, 50)]
    assert (none["losses"], none["duplicates"], none["move_ins"]) == (1, 0, 0)
    assert none["delay_ms_mean"] is None
    runs = {r["run"]: r for r in result.runs}
    assert (runs["r1"]["losses"], runs["r1"]["duplicates"]) == (2, 3)
    assert runs["r1"]["delay_ms_mean"] == pytest.approx(375, abs=0.01)
    assert (runs["r2"]["losses"], runs["r2"]["duplicates"]) == (1, 0)
    # files: the tables as CSV, two plots (max_plots), the page
    with open(tmp_path / "out" / "mobility.csv", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 3 and table[1]["losses"] == "3" and table[0]["delay_ms_mean"] == ""
    pngs = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert len(pngs) == 2 and result.plotted == ["run 4", "r1"]
    assert pngs == ["run-r1.png", "run-run_4.png"]
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "run-r1.png" in page and "mobility.csv" in page


def test_cli_prints_table_and_plots_chosen_runs(spark, traces, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["mobility", str(traces), "--out", str(out), "--run", "r3"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].split() == ["support", "rate", "subs", "runs", "delay", "ms", "max",
                                "ms", "losses", "duplicates"]
    assert lines[2].split() == ["basic", "2", "10", "2", "300.0", "500.0", "3", "3"]
    assert "Runs: 4, plotted: 1" in text
    assert [p.name for p in out.glob("*.png")] == ["run-r3.png"]
    assert main(["mobility", str(traces), "--out", str(out), "--json", "--plots", "0"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sum(g["losses"] for g in data["groups"]) == 4


def test_cli_unknown_run(spark, traces, tmp_path, capsys):
    assert main(["mobility", str(traces), "--out", str(tmp_path), "--run", "r9"]) == 1
    assert "no run 'r9'" in capsys.readouterr().err


def test_missing_and_empty_directories(tmp_path, capsys):
    with pytest.raises(TraceError, match="does not exist"):
        check_traces(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    assert main(["mobility", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 1
    assert "has no *.csv files" in capsys.readouterr().err


def test_bad_header_names_file(tmp_path):
    header = list(COLUMNS)
    header[6] = "sequence"
    write(tmp_path / "bad.csv", run_rows("r", "basic", 1.0, 1), header=header)
    with pytest.raises(TraceError, match=r"bad\.csv, line 1: bad header .*missing seq; "
                                         r"unexpected sequence"):
        check_traces(tmp_path)


@pytest.mark.parametrize(("row", "message"), [
    (["r", "wild", 1, 1, "arrival", "p", 1, T0], "support 'wild' is not one of"),
    (["r", "basic", 1, 1, "arrival", "p", 1, "noon"], "time 'noon' is not a number"),
    (["r", "basic", 1, 1, "teleport", "", "", T0], "event 'teleport' is not one of"),
    (["r", "basic", 1, 1, "departure", "", "", T0], "a departure needs a producer"),
    (["r", "basic", "fast", 1, "arrival", "p", 1, T0], "rate 'fast' is not a number"),
    (["r", "basic", 1], "malformed: expected 8 fields"),
])
def test_bad_rows_name_file_and_row(spark, tmp_path, row, message):
    write(tmp_path / "good.csv", run_rows("g", "ping", 1.0, 1))
    write(tmp_path / "odd.csv", run_rows("r", "basic", 1.0, 1) + [row])
    with pytest.raises(TraceError) as info:
        mobility(spark, tmp_path, tmp_path / "out")
    text = str(info.value)
    assert "odd.csv: 1 bad row(s)" in text and message in text


def test_run_with_two_configurations(spark, tmp_path):
    write(tmp_path / "a.csv", run_rows("same", "basic", 1.0, 1))
    write(tmp_path / "b.csv", run_rows("same", "ping", 1.0, 1))
    with pytest.raises(TraceError, match="run 'same' has rows with different support"):
        mobility(spark, tmp_path, tmp_path / "out")
