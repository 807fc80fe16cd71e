"""Traffic report over the archive: CSV tables, PNG charts, one HTML page.

``report(spark, archive_dir, out_dir)`` writes into ``out_dir``:

=================  =========================================================
file               content
=================  =========================================================
``summary.csv``    key, value: notifications, hours, first/last arrival,
                   producers, bytes, matched nobody (count and share),
                   secure, private (sent for key holders only), withheld
                   (of those, archived without attributes), mean fan-out
``hours.csv``      hour, notifications, bytes, matched_nobody, secure
``groups.csv``     tickertape ``Group`` (string value; ``(no Group)`` when the
                   notification has no string ``Group``, ``(private)`` when
                   its attributes were withheld), notifications
``attributes.csv`` attribute name, notifications carrying it, and how many
                   carried it as int32/int64/real64/string/opaque
``producers.csv``  the top 100 producer session ids by notifications, bytes
``fanout.csv``     clients matched (0, 1, 2...), notifications
``sizes.csv``      size bucket (powers of two, ``64-127`` bytes...), notifications
``*.png``          a chart of each table (with matplotlib installed)
``index.html``     all of the above on one page
=================  =========================================================

"Matched nobody" means delivered to no client (``clients == 0``). Every
table's notification counts add up to the archive's row count, except
``attributes.csv`` (a notification has several attributes) and
``producers.csv`` (top 100 only).
"""

from __future__ import annotations

import csv
import html
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from elvin.fileutil import make_directory
from elvin.pipeline.archive import ArchiveError
from elvin.pipeline.backtest import load_archive, withheld

__all__ = ["ReportResult", "report", "TOP_PRODUCERS"]

TOP_PRODUCERS = 100
NO_GROUP = "(no Group)"
#: the group of private notifications archived without their attributes
PRIVATE_GROUP = "(private)"
NO_PRODUCER = "(unknown)"

#: a table's rows, as Spark's ``Row``\ s give them (each table its own columns)
Rows = list[tuple[Any, ...]]


@dataclass
class ReportResult:
    out_dir: Path
    summary: dict[str, Any]
    tables: dict[str, list[tuple]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    charts: bool = True


def report(spark: SparkSession, archive_dir: str | os.PathLike, out_dir: str | os.PathLike,
           *, stage: Callable[[str], None] | None = None) -> ReportResult:
    """Compute the report and write it to ``out_dir`` (created if needed)."""
    out = make_directory(out_dir, "report directory", ArchiveError)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    df = load_archive(spark, archive_dir)
    note = stage or (lambda _label: None)

    attrs = F.col("attributes")
    group_pos = F.array_position(attrs.getField("name"), F.lit("Group"))
    base = df.select(
        "hour", "time", "size", "clients", "secure",
        F.coalesce(F.col("producer"), F.lit(NO_PRODUCER)).alias("producer"),
        F.when(withheld(), F.lit(PRIVATE_GROUP)).otherwise(
            F.coalesce(F.get(attrs, (group_pos - 1).cast("int")).getField("string"),
                       F.lit(NO_GROUP))).alias("group"),
        "private", withheld().alias("withheld"),
        attrs.getField("name").alias("names"), attrs.getField("type").alias("types"),
    ).persist()
    try:
        note("volume per hour")
        hours: Rows = [(r["hour"], r["n"], r["bytes"], r["nobody"], r["secure"]) for r in
                       base.groupBy("hour").agg(
                           F.count(F.lit(1)).alias("n"), F.sum("size").alias("bytes"),
                           F.count_if(F.col("clients") == 0).alias("nobody"),
                           F.count_if("secure").alias("secure"))
                       .orderBy("hour").collect()]
        note("summary")
        # an aggregate over the whole frame: one row, even when the frame is empty
        [s] = base.agg(F.min("time").alias("first"), F.max("time").alias("last"),
                       F.countDistinct("producer").alias("producers"),
                       F.avg("clients").alias("fanout"),
                       F.count_if("private").alias("private"),
                       F.count_if("withheld").alias("withheld")).collect()
        note("groups")
        groups: Rows = [(r["group"], r["n"]) for r in
                        base.groupBy("group").agg(F.count(F.lit(1)).alias("n"))
                        .orderBy(F.desc("n"), "group").collect()]
        note("attribute names")
        pairs = base.select(F.explode(F.arrays_zip("names", "types")).alias("a"))
        attributes: Rows = [
            (r["name"], r["n"], r["t1"], r["t2"], r["t3"], r["t4"], r["t5"]) for r in
            pairs.groupBy(F.col("a.names").alias("name")).agg(
                F.count(F.lit(1)).alias("n"),
                *[F.count_if(F.col("a.types") == code).alias(f"t{code}")
                  for code in range(1, 6)])
            .orderBy(F.desc("n"), "name").collect()]
        note("producers")
        producers: Rows = [(r["producer"], r["n"], r["bytes"]) for r in
                           base.groupBy("producer").agg(F.count(F.lit(1)).alias("n"),
                                                        F.sum("size").alias("bytes"))
                           .orderBy(F.desc("n"), "producer").limit(TOP_PRODUCERS).collect()]
        note("fan-out and sizes")
        fanout: Rows = [(r["clients"], r["n"]) for r in
                        base.groupBy("clients").agg(F.count(F.lit(1)).alias("n"))
                        .orderBy("clients").collect()]
        raw_sizes = [(r["b"], r["n"]) for r in
                     base.select(F.when(F.col("size") <= 0, F.lit(-1))
                                 .otherwise(F.floor(F.log2(F.col("size"))).cast("int")).alias("b"))
                     .groupBy("b").agg(F.count(F.lit(1)).alias("n")).orderBy("b").collect()]
    finally:
        base.unpersist()

    sizes: Rows = [("0" if b < 0 else f"{1 << b}-{(2 << b) - 1}", n) for b, n in raw_sizes]
    total = sum(h[1] for h in hours)
    nobody = sum(h[3] for h in hours)
    summary: dict[str, Any] = {
        "archive": os.fspath(archive_dir),
        "notifications": total,
        "hours": len(hours),
        "first": _iso(s["first"]),
        "last": _iso(s["last"]),
        "producers": int(s["producers"]),
        "bytes": sum(int(h[2] or 0) for h in hours),
        "matched_nobody": nobody,
        "matched_nobody_share": (nobody / total) if total else 0.0,
        "secure": sum(h[4] for h in hours),
        "private": int(s["private"] or 0),
        "withheld": int(s["withheld"] or 0),
        "mean_fanout": float(s["fanout"] or 0.0),
        "groups": len(groups),
        "attribute_names": len(attributes),
    }
    tables: dict[str, tuple[tuple[str, ...], Rows]] = {
        "hours": (("hour", "notifications", "bytes", "matched_nobody", "secure"), hours),
        "groups": (("group", "notifications"), groups),
        "attributes": (("name", "notifications", "int32", "int64", "real64", "string",
                        "opaque"), attributes),
        "producers": (("producer", "notifications", "bytes"), producers),
        "fanout": (("clients", "notifications"), fanout),
        "sizes": (("size_bytes", "notifications"), sizes),
    }
    result = ReportResult(out, summary, {k: rows for k, (_, rows) in tables.items()})
    note("writing files")
    result.files.append(_write_csv(out / "summary.csv", ("key", "value"),
                                   list(summary.items())))
    for name, (header, rows) in tables.items():
        result.files.append(_write_csv(out / f"{name}.csv", header, rows))
    charts = _charts(out, tables)
    result.charts = charts is not None
    result.files.extend(charts or [])
    result.files.append(_write_html(out, summary, tables, charts is not None))
    return result


def _iso(value) -> str | None:
    if value is None:
        return None
    from datetime import UTC
    if value.tzinfo is None:
        value = value.astimezone(UTC)
    return value.astimezone(UTC).isoformat()


def _write_csv(path: Path, header: tuple, rows: list[tuple]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _charts(out: Path, tables: dict) -> list[Path] | None:
    if not matplotlib_available():
        return None
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    written = []

    def save(fig, name: str) -> None:
        path = out / f"{name}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)

    hours = tables["hours"][1]
    fig, ax = plt.subplots(figsize=(10, 3.5))
    labels = [h[0] for h in hours]
    ax.bar(range(len(hours)), [h[1] for h in hours], color="#4477aa", label="all")
    ax.bar(range(len(hours)), [h[3] for h in hours], color="#cc6677", label="matched nobody")
    step = max(1, math.ceil(len(labels) / 12))
    ax.set_xticks(range(0, len(labels), step), labels[::step], rotation=30, ha="right",
                  fontsize=8)
    ax.set_ylabel("notifications")
    ax.set_title("Notifications per hour (UTC)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    save(fig, "hours")

    def barh(name: str, rows: list[tuple], title: str, top: int = 15) -> None:
        rows = rows[:top]
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.2))
        ax.barh(range(len(rows)), [r[1] for r in rows], color="#4477aa")
        ax.set_yticks(range(len(rows)), [str(r[0])[:40] for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("notifications")
        ax.set_title(title)
        save(fig, name)

    barh("groups", tables["groups"][1], "Top tickertape Groups")
    barh("attributes", tables["attributes"][1], "Most used attribute names")
    barh("producers", tables["producers"][1], "Top producers")

    def bars(name: str, rows: list[tuple], title: str, xlabel: str) -> None:
        fig, ax = plt.subplots(figsize=(8, 3.2))
        ax.bar(range(len(rows)), [r[1] for r in rows], color="#228833")
        step = max(1, math.ceil(len(rows) / 16))
        ax.set_xticks(range(0, len(rows), step), [str(r[0]) for r in rows][::step],
                      rotation=30, ha="right", fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("notifications")
        ax.set_title(title)
        save(fig, name)

    bars("fanout", tables["fanout"][1], "Fan-out: clients per notification", "clients")
    bars("sizes", tables["sizes"][1], "Notification sizes", "bytes")
    return written


_TITLES = {
    "hours": "Volume per hour (UTC)", "groups": "Tickertape Groups",
    "attributes": "Attribute names", "producers": f"Top {TOP_PRODUCERS} producers",
    "fanout": "Fan-out (clients matched)", "sizes": "Sizes",
}


def _write_html(out: Path, summary: dict, tables: dict, charts: bool) -> Path:
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<title>Elvin traffic report</title><style>",
             "body{font-family:sans-serif;margin:2em;max-width:70em}",
             "table{border-collapse:collapse;margin:.5em 0 1.5em}",
             "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}",
             "td:first-child,th:first-child{text-align:left}</style></head><body>",
             "<h1>Elvin traffic report</h1><table>"]
    for key, value in summary.items():
        if key == "matched_nobody_share":
            value = f"{value:.2%}"
        elif key == "mean_fanout":
            value = f"{value:.3f}"
        parts.append(f"<tr><th>{e(key.replace('_', ' '))}</th><td>{e(str(value))}</td></tr>")
    parts.append("</table>")
    if not charts:
        parts.append("<p><em>No charts: matplotlib is not installed.</em></p>")
    for name, (header, rows) in tables.items():
        parts.append(f"<h2>{e(_TITLES[name])}</h2>")
        if charts:
            parts.append(f"<img src='{name}.png' alt='{e(_TITLES[name])}'>")
        shown = rows[:25]
        parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>")
        for row in shown:
            parts.append("<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in row) + "</tr>")
        parts.append("</table>")
        more = f" (first {len(shown)} of {len(rows)} rows)" if len(rows) > len(shown) else ""
        parts.append(f"<p><a href='{name}.csv'>{name}.csv</a>{more}</p>")
    parts.append("</body></html>")
    path = out / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
