"""Where the router's time goes on the 1 -> 1 delivery load: its profile's top entries.

Run: .venv/bin/python bench/profile_delivery.py [--seconds 5] [--top 15]
     ELVIN_PURE=1 .venv/bin/python bench/profile_delivery.py   (the pure-Python codec)

The router of ``bench/router.py``'s delivery bench runs under cProfile (the
``BENCH_PROFILE`` hook of ``_common.start_elvind``) while one producer sends
to one consumer with one matching subscription. Printed: which codec path the
router ran (compiled accelerator or pure), the delivery figures (inflated by
the profiler: read them only side by side with another profiled run), then
the functions with the most time of their own, as a share of the router's
profiled time. Issue 48 asks for this before and after each hot-path change.
"""

from __future__ import annotations

import argparse
import os
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from router import run_delivery

from elvin.protocol import _accel


def top_entries(profile: str, count: int) -> list[tuple[float, int, str]]:
    """(share of the profiled time, calls, where) of the ``count`` functions
    with the most time of their own."""
    stats = pstats.Stats(profile)
    table = stats.stats  # type: ignore[attr-defined]  # pstats keeps its table unannounced
    total = sum(row[2] for row in table.values()) or 1.0
    rows = sorted(table.items(), key=lambda item: item[1][2], reverse=True)[:count]
    out = []
    for (filename, line, name), (_calls, ncalls, tottime, _cum, _callers) in rows:
        where = filename.split("/elvin/")[-1] if "/elvin/" in filename else filename
        out.append((tottime / total, ncalls, f"{where}:{line}({name})"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="saturated run (default 5)")
    parser.add_argument("--top", type=int, default=15, help="entries to print (default 15)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        profile = os.path.join(work, "router.prof")
        os.environ["BENCH_PROFILE"] = profile
        print(f"codec: {_accel.describe()}")
        run_delivery(args.seconds, 200)
        if not os.path.exists(profile):
            raise SystemExit("the router wrote no profile (did it stop cleanly?)")
        print(f"== the router's top {args.top} functions by own time (1 -> 1, profiled)")
        for share, calls, where in top_entries(profile, args.top):
            print(f"{share:6.1%} {calls:>10,}  {where}")


if __name__ == "__main__":
    main()
