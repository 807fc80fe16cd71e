"""Chaos run: real ``elvind`` processes, a seeded random graph and a seeded
random schedule of combined faults (issue 40, point 4b).

Run: .venv/bin/python bench/chaos.py [--seed S | --seeds N] [--minutes M]
     [--routers N] [--steps K] [--kinds kill,hang,cut,partition,drop,add]
     [--flood K]

Each run prints its graph, its schedule and the loss window's definition
(``bench/_chaos.py``), then its totals: published, deliveries, duplicates,
out of order, lost outside the windows, lost inside them (allowed), and
whether the final batch (published once everything is healed and the
federation carries a probe everywhere) arrived everywhere. The last lines
are the totals over all runs and the seeds that failed: a violation (a
duplicate, a loss outside the windows, a final batch not everywhere or out
of order, a federation that never carried a probe everywhere again) or a
router that did not restart (it exited, e.g. status 3, or did not listen
again within a minute: its log is kept and named). Exits 1 if any failed:

``--seed S`` replays one (the same graph and schedule; what the routers do
in it still depends on timing).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _chaos import FAULTS, PortTaken, run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, help="one run with this seed")
    parser.add_argument("--seeds", type=int, default=1, help="runs with seeds 1..N")
    parser.add_argument("--first", type=int, default=1, help="the first seed of --seeds")
    parser.add_argument("--minutes", type=float, help="go on with more seeds for this long")
    parser.add_argument("--routers", type=int, default=5)
    parser.add_argument("--extra", type=int, default=2, help="chords beyond a spanning tree")
    parser.add_argument("--steps", type=int, default=8, help="faults per run")
    parser.add_argument("--rate", type=float, default=20.0, help="per producer, per second")
    parser.add_argument("--keepalive", type=float, default=1.0)
    parser.add_argument("--kinds", default=",".join(FAULTS))
    parser.add_argument("--flood", type=int, default=0,
                        help="routers with routing = 'flood' (none linked to another)")
    args = parser.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(FAULTS)
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(sorted(unknown))} (known: {', '.join(FAULTS)})")
    seeds = [args.seed] if args.seed is not None else list(range(args.first,
                                                                 args.first + args.seeds))
    totals = dict.fromkeys(("published", "deliveries", "duplicates", "out_of_order", "lost",
                            "lost_in_windows", "final_lost", "final_out_of_order"), 0)
    bad: list[int] = []
    aborted: list[int] = []
    started = time.monotonic()
    runs = 0
    seed = seeds[0]
    while True:
        try:
            for attempt in range(3):
                try:
                    r = asyncio.run(run(seed, n=args.routers, extra=args.extra,
                                        steps=args.steps, rate=args.rate,
                                        keepalive=args.keepalive, kinds=kinds, flood=args.flood))
                    break
                except PortTaken as exc:   # at the start: the same seed on new ports
                    if attempt == 2:
                        raise
                    print(f"seed {seed}: {exc}: run again on new ports")
        except RuntimeError as exc:    # a router that did not (re)start, or died
            print(f"seed {seed}: FAILED: a router did not restart or ended: {exc}")
            aborted.append(seed)
            r = None
        runs += 1
        if r is None:
            if args.minutes is not None:
                if time.monotonic() - started > args.minutes * 60:
                    break
                seed += 1
                continue
            if len(seeds) <= runs:
                break
            seed = seeds[runs]
            continue
        for k in totals:
            totals[k] += r[k]
        # out of order while the faults play is a figure (a switch can let a
        # notification on the new tree overtake: the README); after them not
        violation = (r["duplicates"] or r["lost"] or r["final_lost"]
                     or r["final_out_of_order"] or not r["converged"])
        print(f"seed {seed}: {r['seconds']}s, published {r['published']}, deliveries "
              f"{r['deliveries']}, duplicates {r['duplicates']}, out of order "
              f"{r['out_of_order']}, lost {r['lost']} (in windows {r['lost_in_windows']}), "
              f"final batch lost {r['final_lost']} (out of order {r['final_out_of_order']}), "
              f"converged {r['converged']}"
              + ("  VIOLATION" if violation else ""))
        for line in r["examples"]:
            print(f"    {line}")
        if violation:
            bad.append(seed)
        if args.minutes is not None:
            if time.monotonic() - started > args.minutes * 60:
                break
            seed += 1
        else:
            if len(seeds) <= runs:
                break
            seed = seeds[runs]
        sys.stdout.flush()
    print(f"== {runs} runs, {time.monotonic() - started:.0f}s: "
          + ", ".join(f"{k} {v}" for k, v in totals.items()))
    print(f"seeds failed because a router did not restart or ended: {aborted or 'none'}")
    print(f"seeds with a violation: {bad or 'none'} (replay one: bench/chaos.py --seed S "
          f"--routers {args.routers} --extra {args.extra} --steps {args.steps} "
          f"--kinds {','.join(kinds)} --flood {args.flood})")
    failed = len(bad) + len(aborted)
    print(f"FAILED: {failed} of {runs} runs" if failed else f"passed: {runs} runs")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
