"""Mobility traces: delay, losses and duplicates upon reattach, on Spark.

The mobility benchmark (``bench/mobility.py``) writes a directory of CSV
files, one per run, each with this header (exactly, in this order)::

    run,support,rate,subscriptions,event,producer,seq,time

``run`` a run id; ``support`` one of none, basic, ping, delay (the mobility
support and its synchronisation option); ``rate`` publications per second;
``subscriptions`` the subscriber's subscription count; ``event`` one of
departure, arrival, move_out, move_in_start, move_in_done; ``producer`` and
``seq`` name a publication (empty for the move events); ``time`` seconds
since the epoch.

``mobility(spark, traces_dir, out_dir)`` computes, per run,

* move-in delay: ``move_in_done - move_in_start`` (the k-th start of a run
  pairs with its k-th done, in time order), in milliseconds;
* losses: distinct ``(producer, seq)`` departures that never arrived (every
  departure in a trace is meant for the subscriber);
* duplicates: arrivals minus distinct ``(producer, seq)`` arrivals;

and the same grouped by support, rate and subscriptions (the shape of
Table 3 of the mobility-support paper: delay, losses, duplicates per
configuration). It writes into ``out_dir``:

=================  ==========================================================
``mobility.csv``   support, rate, subscriptions, runs, departures, arrivals,
                   move_ins, delay_ms_mean, delay_ms_max, losses, duplicates
                   (losses and duplicates summed over the runs)
``runs.csv``       the same per run (delay over that run's move-ins)
``run-*.png``      departure time against arrival time for the plotted runs
                   (each arrival a dot, lost publications as red crosses on
                   the x axis, move-out / move-in as vertical lines)
``index.html``     the tables and the plots
=================  ==========================================================

Input problems raise ``TraceError`` naming the file and, for bad values, the
offending row: missing directory, no ``*.csv``, a header that is not the
one above, malformed rows, unknown support or event values, numbers that
are not numbers, a run whose rows disagree on its configuration.
"""

from __future__ import annotations

import csv
import html
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elvin.fileutil import make_directory

__all__ = ["COLUMNS", "EVENTS", "SUPPORTS", "MobilityResult", "TraceError", "check_traces",
           "mobility"]

COLUMNS = ("run", "support", "rate", "subscriptions", "event", "producer", "seq", "time")
SUPPORTS = ("none", "basic", "ping", "delay")
EVENTS = ("departure", "arrival", "move_out", "move_in_start", "move_in_done")
GROUP_HEADER = ("support", "rate", "subscriptions", "runs", "departures", "arrivals",
                "move_ins", "delay_ms_mean", "delay_ms_max", "losses", "duplicates")
RUN_HEADER = ("run", "support", "rate", "subscriptions", "departures", "arrivals",
              "move_ins", "delay_ms_mean", "delay_ms_max", "losses", "duplicates")
DEFAULT_PLOTS = 12
#: What the configuration and event columns must hold (the values allowed, or
#: "number" / "integer" for a cast that must succeed), in the order in which a
#: bad row's first fault is named: one list for the Spark check that finds bad
#: rows and for the message that says what is wrong with the first.
_RULES: tuple[tuple[str, tuple[str, ...] | str], ...] = (
    ("support", SUPPORTS), ("rate", "number"), ("subscriptions", "integer"),
    ("event", EVENTS), ("time", "number"))


class TraceError(ValueError):
    """The traces cannot be read (the message names the file and the row)."""


@dataclass
class MobilityResult:
    out_dir: Path
    groups: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    files: list[Path] = field(default_factory=list)
    plotted: list[str] = field(default_factory=list)
    charts: bool = True


def check_traces(directory: str | os.PathLike) -> list[Path]:
    """The trace files, after checking each header; ``TraceError`` if not.

    Done in Python before Spark starts: a wrong directory fails in
    milliseconds, with the file's name.
    """
    base = Path(directory)
    if not base.exists():
        raise TraceError(f"trace directory {base} does not exist")
    if not base.is_dir():
        raise TraceError(f"traces {base} is not a directory (give the directory of CSV "
                         "files the mobility benchmark wrote)")
    files = sorted(p for p in base.glob("*.csv") if p.is_file())
    if not files:
        raise TraceError(f"trace directory {base} has no *.csv files")
    for path in files:
        try:
            with path.open(encoding="utf-8", newline="") as fh:
                header = next(csv.reader(fh), None)
        except (OSError, UnicodeDecodeError) as exc:
            raise TraceError(f"cannot read trace file {path}: {exc}") from exc
        if header is None:
            raise TraceError(f"trace file {path} is empty: expected the header "
                             f"{','.join(COLUMNS)}")
        header = [h.strip().lstrip("\ufeff") for h in header]
        if tuple(header) != COLUMNS:
            missing = [c for c in COLUMNS if c not in header]
            extra = [c for c in header if c not in COLUMNS]
            detail = []
            if missing:
                detail.append(f"missing {', '.join(missing)}")
            if extra:
                detail.append(f"unexpected {', '.join(extra)}")
            if not detail:
                detail.append("columns in the wrong order")
            raise TraceError(f"trace file {path}, line 1: bad header "
                             f"{','.join(header)!r} ({'; '.join(detail)}); expected "
                             f"{','.join(COLUMNS)}")
    return files


def _load(spark, files: list[Path]):
    """Typed trace rows (cached), or ``TraceError`` for the first bad row."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    raw_schema = StructType([StructField(c, StringType()) for c in COLUMNS]
                            + [StructField("_corrupt", StringType())])
    raw = (spark.read.option("header", "true").option("mode", "PERMISSIVE")
           .option("columnNameOfCorruptRecord", "_corrupt")
           .schema(raw_schema).csv([str(p) for p in files])
           .withColumn("_file", F.input_file_name()))
    typed = raw.select(
        "_file", "_corrupt",
        *[F.col(c).alias(f"_raw_{c}") for c in COLUMNS],
        F.trim("run").alias("run"), F.trim("support").alias("support"),
        F.trim("rate").cast("double").alias("rate"),
        F.trim("subscriptions").cast("int").alias("subscriptions"),
        F.trim("event").alias("event"),
        F.when(F.trim("producer") != "", F.trim("producer")).alias("producer"),
        F.trim("seq").cast("long").alias("seq"),
        F.trim("time").cast("double").alias("time"))
    publication = F.col("event").isin("departure", "arrival")
    bad = (F.col("_corrupt").isNotNull() | F.col("run").isNull() | (F.col("run") == "")
           | (publication & (F.col("producer").isNull() | F.col("seq").isNull())))
    for column, rule in _RULES:
        if isinstance(rule, tuple):
            bad = bad | ~F.coalesce(F.col(column).isin(*rule), F.lit(False))
        else:
            bad = bad | F.col(column).isNull()
            if rule == "number":
                bad = bad | F.isnan(column)
    typed = typed.cache()
    first_bad = typed.filter(bad).limit(1).collect()
    if first_bad:
        count = typed.filter(bad).count()
        row = first_bad[0]
        raise TraceError(f"{_file_name(row['_file'])}: {count} bad row(s); the first: "
                         f"{_row_text(row)} ({_why(row)})")
    data = typed.select(*COLUMNS).cache()
    typed.unpersist()
    if data.limit(1).count() == 0:
        raise TraceError(f"the trace files ({len(files)}, e.g. {files[0]}) hold a header "
                         "but no rows")
    conflicts = (data.groupBy("run")
                 .agg(F.countDistinct("support", "rate", "subscriptions").alias("n"))
                 .filter("n > 1").limit(1).collect())
    if conflicts:
        run = conflicts[0]["run"]
        raise TraceError(f"run {run!r} has rows with different support, rate or "
                         "subscriptions: one run is one configuration")
    return data


def _file_name(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def _row_text(row) -> str:
    if row["_corrupt"] is not None:
        return repr(row["_corrupt"])
    return repr(",".join("" if row[f"_raw_{c}"] is None else row[f"_raw_{c}"]
                         for c in COLUMNS))


def _why(row) -> str:
    """What is wrong with a row the check in ``_load`` found bad: its first fault."""
    if row["_corrupt"] is not None:
        return f"malformed: expected {len(COLUMNS)} fields"
    if not row["run"]:
        return "empty run"
    for column, rule in _RULES:
        value, raw = row[column], row[f"_raw_{column}"]
        if isinstance(rule, tuple):
            if value not in rule:
                return f"{column} {raw!r} is not one of {', '.join(rule)}"
        elif value is None or (rule == "number" and math.isnan(value)):
            return f"{column} {raw!r} is not {'a number' if rule == 'number' else 'an integer'}"
    if row["producer"] is None:
        return f"a {row['event']} needs a producer"
    return f"seq {row['_raw_seq']!r} is not an integer"


def mobility(spark, traces_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
             plot_runs: Sequence[str] | None = None, max_plots: int = DEFAULT_PLOTS,
             stage: Callable[[str], None] | None = None) -> MobilityResult:
    """Compute the tables (and plots) of the traces in ``traces_dir``.

    ``plot_runs`` picks the runs to plot (``TraceError`` for an unknown id);
    by default the first ``max_plots`` runs in (support, rate, subscriptions,
    run) order.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    note = stage or (lambda _label: None)
    files = check_traces(traces_dir)
    out = make_directory(out_dir, "output directory", TraceError)
    note("reading traces")
    data = _load(spark, files)

    note("per-run metrics")
    config = data.groupBy("run").agg(F.first("support").alias("support"),
                                     F.first("rate").alias("rate"),
                                     F.first("subscriptions").alias("subscriptions"))
    key = ["run", "producer", "seq"]
    departures = (data.filter(F.col("event") == "departure")
                  .groupBy(*key).agg(F.min("time").alias("departure")))
    arrivals = (data.filter(F.col("event") == "arrival")
                .groupBy(*key).agg(F.count(F.lit(1)).alias("copies")))
    lost = (departures.join(arrivals, key, "left_anti")
            .groupBy("run").agg(F.count(F.lit(1)).alias("losses")))
    dep_counts = departures.groupBy("run").agg(F.count(F.lit(1)).alias("departures"))
    arr_counts = arrivals.groupBy("run").agg(
        F.sum("copies").alias("arrivals"),
        (F.sum("copies") - F.count(F.lit(1))).alias("duplicates"))
    order = Window.partitionBy("run", "event").orderBy("time")
    moves = (data.filter(F.col("event").isin("move_in_start", "move_in_done"))
             .withColumn("k", F.row_number().over(order)))
    starts = moves.filter(F.col("event") == "move_in_start").select(
        "run", "k", F.col("time").alias("start"))
    dones = moves.filter(F.col("event") == "move_in_done").select(
        "run", "k", F.col("time").alias("done"))
    delays = (starts.join(dones, ["run", "k"])
              .select("run", ((F.col("done") - F.col("start")) * 1000).alias("delay_ms"))
              .groupBy("run").agg(F.count(F.lit(1)).alias("move_ins"),
                                  F.sum("delay_ms").alias("delay_ms_sum"),
                                  F.max("delay_ms").alias("delay_ms_max")))
    per_run = (config.join(dep_counts, "run", "left").join(arr_counts, "run", "left")
               .join(lost, "run", "left").join(delays, "run", "left")
               .select("run", "support", "rate", "subscriptions",
                       *[F.coalesce(F.col(c), F.lit(0)).alias(c)
                         for c in ("departures", "arrivals", "move_ins", "losses",
                                   "duplicates")],
                       "delay_ms_sum", "delay_ms_max")).cache()
    run_rows = [r.asDict() for r in per_run.collect()]
    support_rank = {s: i for i, s in enumerate(SUPPORTS)}
    run_rows.sort(key=lambda r: (support_rank[r["support"]], r["rate"], r["subscriptions"],
                                 r["run"]))

    note("grouping")
    grouped = (per_run.groupBy("support", "rate", "subscriptions")
               .agg(F.count(F.lit(1)).alias("runs"), F.sum("departures").alias("departures"),
                    F.sum("arrivals").alias("arrivals"), F.sum("move_ins").alias("move_ins"),
                    F.sum("delay_ms_sum").alias("delay_ms_sum"),
                    F.max("delay_ms_max").alias("delay_ms_max"),
                    F.sum("losses").alias("losses"), F.sum("duplicates").alias("duplicates"))
               .collect())
    groups = [_with_mean(r.asDict()) for r in grouped]
    groups.sort(key=lambda r: (support_rank[r["support"]], r["rate"], r["subscriptions"]))
    runs = [_with_mean(r) for r in run_rows]
    per_run.unpersist()

    result = MobilityResult(out, groups, runs)
    result.files.append(_write_csv(out / "mobility.csv", GROUP_HEADER, groups))
    result.files.append(_write_csv(out / "runs.csv", RUN_HEADER, runs))

    known = [r["run"] for r in runs]
    if plot_runs:
        unknown = [r for r in plot_runs if r not in known]
        if unknown:
            raise TraceError(f"no run {unknown[0]!r} in {traces_dir} (runs: "
                             f"{', '.join(known[:10])}{', ...' if len(known) > 10 else ''})")
        chosen = list(dict.fromkeys(plot_runs))
    else:
        chosen = known[:max(0, max_plots)]
    result.plotted = chosen
    if chosen:
        note("plots")
        result.charts = _plots(spark, data, departures, chosen, out, result)
    result.files.append(_write_html(out, result))
    data.unpersist()
    return result


def _with_mean(row: dict[str, Any]) -> dict[str, Any]:
    total = row.pop("delay_ms_sum", None)
    moves = row.get("move_ins") or 0
    row["delay_ms_mean"] = round(total / moves, 3) if moves and total is not None else None
    if row.get("delay_ms_max") is not None:
        row["delay_ms_max"] = round(row["delay_ms_max"], 3)
    for name in ("departures", "arrivals", "move_ins", "losses", "duplicates", "runs"):
        if name in row and row[name] is not None:
            row[name] = int(row[name])
    return row


def _write_csv(path: Path, header: tuple, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for row in rows:
            writer.writerow(["" if row[h] is None else row[h] for h in header])
    return path


def _safe(run: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", run)[:80] or "run"


def _plots(spark, data, departures, chosen: list[str], out: Path,
           result: MobilityResult) -> bool:
    """One PNG per chosen run; False when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        return False
    from pyspark.sql import functions as F

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    picked = data.filter(F.col("run").isin(chosen))
    arrivals = picked.filter(F.col("event") == "arrival").select(
        "run", "producer", "seq", F.col("time").alias("arrival"))
    points = (departures.filter(F.col("run").isin(chosen))
              .join(arrivals, ["run", "producer", "seq"], "left")
              .select("run", "departure", "arrival").collect())
    moves = (picked.filter(F.col("event").isin("move_out", "move_in_start", "move_in_done"))
             .select("run", "event", "time").collect())
    firsts = {r["run"]: r["t0"] for r in
              picked.groupBy("run").agg(F.min("time").alias("t0")).collect()}
    by_run: dict[str, list] = {run: [] for run in chosen}
    for p in points:
        by_run[p["run"]].append((p["departure"], p["arrival"]))
    marks: dict[str, list] = {run: [] for run in chosen}
    for m in moves:
        marks[m["run"]].append((m["event"], m["time"]))
    info = {r["run"]: r for r in result.runs}
    styles = {"move_out": ("#cc6677", "--"), "move_in_start": ("#ddaa33", ":"),
              "move_in_done": ("#228833", "-.")}
    used_names: set[str] = set()
    for run in chosen:
        t0 = firsts.get(run, 0.0)
        got = [(d - t0, a - t0) for d, a in by_run[run] if a is not None]
        missed = [d - t0 for d, a in by_run[run] if a is None]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        if got:
            ax.scatter([g[0] for g in got], [g[1] for g in got], s=6, color="#4477aa",
                       label=f"arrived ({len(got)})")
        if missed:
            ax.scatter(missed, [0.0] * len(missed), s=24, marker="x", color="#cc3311",
                       label=f"lost ({len(missed)})", clip_on=False, zorder=3)
        seen = set()
        for event, when in sorted(marks[run], key=lambda m: m[1]):
            color, style = styles[event]
            ax.axvline(when - t0, color=color, linestyle=style, linewidth=1,
                       label=event.replace("_", " ") if event not in seen else None)
            seen.add(event)
        r = info[run]
        ax.set_title(f"run {run}: {r['support']}, {r['rate']:g}/s, "
                     f"{r['subscriptions']} subscriptions", fontsize=10)
        ax.set_xlabel("departure (s since the run's first event)")
        ax.set_ylabel("arrival (s)")
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.grid(True, linewidth=0.3)
        ax.legend(loc="upper left", fontsize=8)
        name = _safe(run)
        while name in used_names:
            name += "_"
        used_names.add(name)
        path = out / f"run-{name}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        result.files.append(path)
    return True


def _write_html(out: Path, result: MobilityResult) -> Path:
    e = html.escape

    def table(header: tuple, rows: list[dict[str, Any]]) -> str:
        parts = ["<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>"]
        for row in rows:
            parts.append("<tr>" + "".join(
                f"<td>{e('' if row[h] is None else str(row[h]))}</td>" for h in header)
                + "</tr>")
        parts.append("</table>")
        return "\n".join(parts)

    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<title>Elvin mobility traces</title><style>",
             "body{font-family:sans-serif;margin:2em;max-width:70em}",
             "table{border-collapse:collapse;margin:.5em 0 1.5em}",
             "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}",
             "td:first-child,th:first-child{text-align:left}",
             "img{display:block;margin:.5em 0 1.5em}</style></head><body>",
             "<h1>Delay, losses and duplicates upon reattach</h1>",
             "<p>Delay: move-in done minus move-in start (ms). Losses: publications that "
             "departed and never arrived. Duplicates: arrivals beyond the first of each "
             "publication. Losses and duplicates are summed over the runs.</p>",
             table(GROUP_HEADER, result.groups),
             "<p><a href='mobility.csv'>mobility.csv</a></p>",
             "<h2>Runs</h2>", table(RUN_HEADER, result.runs),
             "<p><a href='runs.csv'>runs.csv</a></p>"]
    if result.plotted:
        parts.append("<h2>Departure and arrival times</h2>")
        if not result.charts:
            parts.append("<p><em>No plots: matplotlib is not installed.</em></p>")
        else:
            for path in result.files:
                if path.suffix == ".png":
                    parts.append(f"<img src='{e(path.name)}' alt='{e(path.stem)}'>")
    parts.append("</body></html>")
    path = out / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def format_table(groups: list[dict[str, Any]]) -> str:
    """The grouped table as aligned text (what the CLI prints)."""
    header = ("support", "rate", "subs", "runs", "delay ms", "max ms", "losses",
              "duplicates")
    rows = [(g["support"], f"{g['rate']:g}", str(g["subscriptions"]), str(g["runs"]),
             "-" if g["delay_ms_mean"] is None else f"{g['delay_ms_mean']:.1f}",
             "-" if g["delay_ms_max"] is None else f"{g['delay_ms_max']:.1f}",
             str(g["losses"]), str(g["duplicates"])) for g in groups]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w)
                       for i, (h, w) in enumerate(zip(header, widths, strict=True)))]
    for r in rows:
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return "\n".join(lines)
