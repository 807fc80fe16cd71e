"""Federation: what telling copies from repeats costs (elvin.federation.dedup).

    .venv/bin/python bench/federation_dedup.py

Prints the cost of ``Recent.first`` per notification at a steady rate (the
path of every notification that entered at, or came through, a router that
does not take part) with the memory full, and the longest single call
right after a quiet spell, when every entry is past the window (the call
that used to forget all of them at once).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from elvin.federation.dedup import DEDUP_ENTRIES, PRUNE_STEP, Recent

    recent = Recent(2.0)
    n = 200_000
    started = time.perf_counter()
    for i in range(n):                    # 50,000 a second: the memory stays full
        recent.first(("r1", i), ("r2", "r1"), i / 50_000)
    steady = (time.perf_counter() - started) / n * 1e6
    print(f"steady rate, {len(recent):,} remembered: {steady:.2f} us per notification")

    worst = 0.0
    for spell in range(20):
        recent = Recent(2.0)
        for i in range(DEDUP_ENTRIES):
            recent.first(("r1", i), ("r2", "r1"), 0.0)
        started = time.perf_counter()
        recent.first(("r1", -1), ("r2", "r1"), 10.0 + spell)
        worst = max(worst, time.perf_counter() - started)
    print(f"first call after a quiet spell ({DEDUP_ENTRIES:,} past the window, "
          f"{PRUNE_STEP} forgotten per call): {worst * 1e3:.3f} ms at most of 20")
    return 0


if __name__ == "__main__":
    sys.exit(main())
