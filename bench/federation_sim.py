"""The topology agreement under random fault schedules, simulated (issue 40).

Run: .venv/bin/python bench/federation_sim.py [--minutes M] [--seed S]
     [--max-routers N] [--flood-share F] [--streams] [--replay SEED]

Plays seeded schedules of ``elvin.federation.simulation`` (random graphs up
to ``--max-routers`` routers; kills and restarts, SIGSTOP/SIGCONT, link
closes and heals, partitions, links added and removed, publishing right
after a restart; random message delays) for ``--minutes`` on one core, and
prints the schedules run, faults played, notifications checked for "nothing
lost after detection", deliveries, violations and the seeds that failed,
per size of graph, with the duplicates at flooding routers while they cut
the others apart and the copies held up past the window (the README's
exceptions), the deliveries that overtook
an earlier one of their producer on another graph (a switch; order on one
graph is checked), and the repeats of an unstamped notification taken for
copies because their path changed within the window. ``--streams``: a producer per round publishes through
the faults. ``--replay SEED`` plays one schedule with its trace.
Exits 1 if any schedule failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from elvin.federation.simulation import Simulation

BANDS = ((2, 4), (5, 8), (9, 16), (17, 32))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--max-routers", type=int, default=32)
    parser.add_argument("--flood-share", type=float, default=0.0,
                        help="share of routers with routing = 'flood'")
    parser.add_argument("--streams", action="store_true",
                        help="a producer per round publishes through the faults")
    parser.add_argument("--flood-memory", action="store_true",
                        help="the flooding routers are elvind's (each delivers one copy, "
                             "passing every copy on), not memoryless ones such as Avis")
    parser.add_argument("--replay", type=int, default=None, help="replay one seed, traced")
    args = parser.parse_args()
    settings = {"max_routers": args.max_routers, "flood_share": args.flood_share,
                "streams": args.streams, "flood_memory": args.flood_memory}
    if args.replay is not None:
        outcome = Simulation(args.replay, trace=print, **settings).run()
        print(outcome)
        return 1 if outcome.violations else 0
    end = time.monotonic() + 60 * args.minutes
    started = time.monotonic()
    seed = args.seed
    totals = {band: [0, 0, 0, 0, 0, 0.0] for band in BANDS}  # runs faults checked deliv bad s
    failed: list[str] = []
    cut = late = switch = reordered = repeats = 0
    while time.monotonic() < end:
        t = time.monotonic()
        outcome = Simulation(seed, **settings).run()
        spent = time.monotonic() - t
        band = next(b for b in BANDS if b[0] <= outcome.routers <= b[1])
        row = totals[band]
        row[0] += 1
        row[1] += outcome.events
        row[2] += outcome.checked
        row[3] += outcome.deliveries
        row[5] += spent
        cut += outcome.cut_duplicates
        late += outcome.late_duplicates
        switch += outcome.switch_duplicates
        reordered += outcome.reordered
        repeats += outcome.repeats_dropped
        if outcome.violations:
            row[4] += 1
            failed.append(outcome.violations[0])
        seed += 1
    minutes = (time.monotonic() - started) / 60
    runs = sum(row[0] for row in totals.values())
    print(f"seeds {args.seed}..{seed - 1}: {runs} schedules in {minutes:.1f} min "
          f"({runs / minutes:.0f}/min), max {args.max_routers} routers, "
          f"flood share {args.flood_share}"
          f"{' (elvind flooding: one delivery each)' if args.flood_memory else ''}")
    print(f"{'routers':>8} {'schedules':>10} {'faults':>8} {'checked':>8} {'deliveries':>11} "
          f"{'failing':>8} {'s/schedule':>11}")
    for (low, high), (n, faults, checked, deliveries, bad, spent) in totals.items():
        if n:
            print(f"{low:>3}-{high:<4} {n:>10} {faults:>8} {checked:>8} {deliveries:>11} "
                  f"{bad:>8} {spent / n:>11.3f}")
    total_bad = sum(row[4] for row in totals.values())
    print(f"allowed duplicates: at flooding routers while they cut the others apart {cut}, "
          f"held up past the window {late}, of a flooding router's at another during a switch "
          f"{switch}; overtaken across a switch: {reordered}; repeats taken for copies "
          f"(their path changed within the window): {repeats}")
    print(f"violations: {total_bad} failing schedules")
    for line in failed[:20]:
        print("  " + line + f"  (replay: bench/federation_sim.py --replay "
              f"{line.split()[1].rstrip(':')} --max-routers {args.max_routers} "
              f"--flood-share {args.flood_share}{' --streams' if args.streams else ''}"
              f"{' --flood-memory' if args.flood_memory else ''})")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
