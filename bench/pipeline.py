"""Back-test benchmark: Spark Column translation vs a Python UDF.

Run: .venv/bin/python bench/pipeline.py [--rows N] [--udf-rows N] [--dir DIR] [--keep]

1. Generates an archive of N notifications (default 10 million) in the
   router's archive format (``elvin.pipeline.archive``: Parquet, one
   directory per hour over 24 hours). Generation is vectorised: numpy draws
   indices, pyarrow builds the list<struct> column from dictionary arrays,
   no Python object per row. Six tickertape-like attributes per row:
   ``Group`` (string, 50 groups), ``From`` (string, 500 users), ``Message``
   (string, 1,000 messages), ``Timeout`` (int32), ``Seq`` (int64) and
   ``Value`` (int32 70%, real64 20% -- 1% of those NaN --, string 10%); every
   tenth row also has an opaque ``Payload``.
2. For each benchmark subscription, times the count of matches on Spark
   ``local[2]``:
   * Column: ``elvin.pipeline.backtest`` (the AST as a Spark Column, JVM only);
   * UDF: the router's compiled evaluator (``elvin.subscription.compile``) in a
     pandas UDF over the same archive (Arrow batches to Python workers).
   The Column query runs three times and the UDF twice; the best run after
   the first (warm-up) Column run and the best UDF run are reported, in rows
   per second (the machine may be shared), with the ratio Column / UDF. Both
   counts must agree.

``--udf-rows`` limits the UDF runs to the first hours holding at least that
many rows (the UDF's cost per row does not depend on the archive size; the
Column path gets *faster* per row on bigger archives, so this only
understates the ratio). By default the UDF runs on the whole archive too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from elvin.pipeline.archive import ARROW_SCHEMA, ATTRIBUTE_TYPE, write_table

EXPRESSIONS = [
    # a typical tickertape subscription
    'Group == "elvin" || Group == "chat" && From != "user7"',
    # numeric promotion, arithmetic, NaN-aware comparisons
    "Value * 2 + Timeout > 100 && Seq % 7L == 0",
    # string predicates with Unicode functions (ICU via reflect)
    'contains(fold-case(Message), "spark") || regex(From, "^user1[0-9]$")',
]

T0_MS = 1_714_557_600_000   # 2024-05-01T10:00:00Z
HOURS = 24
CHUNK = 1_000_000
NAMES = ["Group", "From", "Message", "Timeout", "Seq", "Value", "Payload"]


def _pool(strings: list[str]) -> pa.Array:
    return pa.array(strings, pa.string())


def _take(pool: pa.Array, indices: np.ndarray) -> pa.Array:
    """Dense string array of pool[indices], built in C++."""
    return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), pool).cast(
        pool.type)


def make_chunk(rng: np.random.Generator, start: int, n: int, total: int) -> pa.Table:
    groups = _pool(["elvin", "chat", "news", "spark", "coffee"] + [f"g{i}" for i in range(45)])
    users = _pool([f"user{i}" for i in range(500)])
    words = ["hello", "Spark", "SPARK", "elvin", "coffee", "straße", "Ελληνικά", "ok",
             "meeting", "lunch", "build", "broken", "fixed", "🙂"]
    messages = _pool([" ".join(rng.choice(words, size=rng.integers(1, 12)))
                      for _ in range(1000)])

    has_payload = rng.random(n) < 0.1
    k = 6 + has_payload.astype(np.int32)            # attributes per row
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(k, out=offsets[1:])
    m = int(offsets[-1])
    # position of each entry within its row
    slot = np.arange(m, dtype=np.int32) - np.repeat(offsets[:-1], k)
    row = np.repeat(np.arange(n), k)

    value_kind = rng.choice(np.array([1, 3, 4], dtype=np.int8), size=n, p=[0.7, 0.2, 0.1])
    types = np.array([4, 4, 4, 1, 2, 0, 5], dtype=np.int8)[slot]
    is_value = slot == 5
    types[is_value] = value_kind[row[is_value]]

    def column(mask: np.ndarray, values: np.ndarray, pa_type) -> pa.Array:
        full = np.zeros(m, dtype=values.dtype)
        full[mask] = values
        return pa.array(full, type=pa_type, mask=~mask)

    i32_mask = types == 1
    i32_vals = np.where(slot[i32_mask] == 3, rng.integers(0, 60, size=int(i32_mask.sum())),
                        rng.integers(-1000, 1000, size=int(i32_mask.sum()))).astype(np.int32)
    i64_mask = types == 2
    i64_vals = (start + row[i64_mask]).astype(np.int64)
    r64_mask = types == 3
    r64_vals = rng.normal(50, 40, size=int(r64_mask.sum()))
    r64_vals[rng.random(r64_vals.size) < 0.01] = np.nan
    s_mask = types == 4
    # string entries: Group / From / Message / Value-as-string
    s_slot = slot[s_mask]
    s_idx = np.empty(int(s_mask.sum()), dtype=np.int64)
    offsets_pool = [0, len(groups), len(groups) + len(users)]
    combined = pa.concat_arrays([groups, users, messages])
    for slot_no, base, size in ((0, offsets_pool[0], len(groups)),
                                (1, offsets_pool[1], len(users)),
                                (2, offsets_pool[2], len(messages)),
                                (5, offsets_pool[1], len(users))):
        sel = s_slot == slot_no
        s_idx[sel] = base + rng.integers(0, size, size=int(sel.sum()))
    strings_dense = _take(combined, s_idx)
    # scatter the dense strings into an m-long nullable column
    positions = np.full(m, -1, dtype=np.int64)
    positions[s_mask] = np.arange(int(s_mask.sum()))
    string_col = strings_dense.take(pa.array(positions, mask=positions < 0))
    o_mask = types == 5
    payload = pa.array([b"\x00\x01payload-bytes"], pa.binary())
    opaque_col = payload.take(pa.array(np.zeros(m, dtype=np.int64), mask=~o_mask))

    names = _take(_pool(NAMES), slot)
    entries = pa.StructArray.from_arrays(
        [names, pa.array(types, pa.int8()), column(i32_mask, i32_vals, pa.int32()),
         column(i64_mask, i64_vals, pa.int64()), column(r64_mask, r64_vals, pa.float64()),
         string_col, opaque_col], fields=list(ATTRIBUTE_TYPE))
    attributes = pa.ListArray.from_arrays(pa.array(offsets), entries,
                                          type=ARROW_SCHEMA.field("attributes").type)
    times = T0_MS + (np.arange(start, start + n, dtype=np.int64) * (HOURS * 3_600_000)) // total
    clients = rng.choice(np.array([0, 1, 2, 5, 20], dtype=np.int32), size=n)
    return pa.Table.from_arrays(
        [pa.array(times, pa.timestamp("ms", tz="UTC")),
         _take(users, rng.integers(0, 500, size=n)), attributes,
         pa.array(clients), pa.array(clients), pa.array(rng.random(n) < 0.05),
         pa.array(rng.integers(60, 400, size=n).astype(np.int32))], schema=ARROW_SCHEMA)


def generate(directory: Path, rows: int, seed: int = 1) -> float:
    rng = np.random.default_rng(seed)
    start_time = time.perf_counter()
    for start in range(0, rows, CHUNK):
        n = min(CHUNK, rows - start)
        table = make_chunk(rng, start, n, rows)
        write_table(directory, table, f"part-bench-{start // CHUNK:05d}", compression="zstd")
    return time.perf_counter() - start_time


def _timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--udf-rows", type=int, default=None,
                    help="run the UDF on the first hours holding at least this many rows")
    ap.add_argument("--dir", default=None, help="archive directory (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the generated archive")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="elvin-bench-"))
    if any(directory.glob("hour=*")):
        print(f"archive: reusing {directory}")
    else:
        seconds = generate(directory, args.rows)
        size = sum(p.stat().st_size for p in directory.rglob("*.parquet"))
        print(f"generated {args.rows:,} notifications in {seconds:.1f} s "
              f"({args.rows / seconds:,.0f} rows/s, {size / 2 ** 20:,.0f} MiB Parquet) "
              f"in {directory}")

    from pyspark.sql import functions as F

    from elvin.pipeline.backtest import count_matches, load_archive, python_udf_predicate
    from elvin.pipeline.session import spark_session

    spark = spark_session(args.master, "elvin-pipeline-bench")
    df = load_archive(spark, directory)
    total = df.count()
    udf_df, udf_total = df, total
    if args.udf_rows is not None and args.udf_rows < total:
        per_hour = df.groupBy("hour").count().orderBy("hour").collect()
        keep, running = [], 0
        for r in per_hour:
            keep.append(r["hour"])
            running += r["count"]
            if running >= args.udf_rows:
                break
        udf_df, udf_total = df.where(F.col("hour").isin(keep)), running
    print(f"Spark {spark.version}, master {args.master}; archive {total:,} rows; "
          f"UDF runs on {udf_total:,} rows")
    print()
    ratios = []
    for expression in EXPRESSIONS:
        col_runs = [_timed(lambda e=expression: count_matches(spark, [e], df)) for _ in range(3)]
        col_s, ((col_count,), _) = min(col_runs[1:], key=lambda r: r[0])

        def udf_count(e=expression):
            return udf_df.select(python_udf_predicate(e).alias("m")).agg(
                F.count_if("m")).first()[0]

        udf_runs = [_timed(udf_count) for _ in range(2)]
        udf_s, udf_matches = min(udf_runs, key=lambda r: r[0])
        if udf_total == total:
            assert udf_matches == col_count, (expression, udf_matches, col_count)
        else:
            (subset_count,), _ = count_matches(spark, [expression], udf_df)
            assert udf_matches == subset_count, (expression, udf_matches, subset_count)
        col_rate, udf_rate = total / col_s, udf_total / udf_s
        ratios.append(col_rate / udf_rate)
        print(f"  {expression}")
        print(f"    matches {col_count:,} of {total:,}")
        print(f"    Column: {col_rate:12,.0f} rows/s  ({col_s:.2f} s; "
              f"runs {', '.join(f'{r[0]:.2f}' for r in col_runs)} s)")
        print(f"    UDF:    {udf_rate:12,.0f} rows/s  ({udf_s:.2f} s; "
              f"runs {', '.join(f'{r[0]:.2f}' for r in udf_runs)} s)"
              f"{'' if udf_total == total else f'  [{udf_matches:,} matches in its subset]'}")
        print(f"    ratio:  {col_rate / udf_rate:.1f}x")
    print()
    print(f"ratio Column/UDF: min {min(ratios):.1f}x, max {max(ratios):.1f}x (target >= 10x)")
    spark.stop()
    if not args.keep and not args.dir:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.exit(main())
