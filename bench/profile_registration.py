"""What registering a subscription costs our router, and where that time goes.

Run: .venv/bin/python bench/profile_registration.py [--workload rangeprefix] [--subs 20000]
         [--rounds 3]                    (router CPU per registration, medians)
     .venv/bin/python bench/profile_registration.py --profile [--top 20]
         (one round under cProfile: the functions with the most time of their own)

``bench/versus_avis.py``'s registration row (``_registration._registration``:
``--subs`` SubAddRqst pipelined, 1,000 per connection) against a fresh
``elvind`` per round, ours alone. On a shared machine the wall-clock rate
swings with the other processes' load; the router's CPU time per
registration (user + system, every thread, from /proc) much less, so that is
the figure to compare before and after a change. Under ``--profile`` the
figures are inflated by the profiler: read the profile's shares, not them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _avis import start_ours
from _registration import WORKLOADS, _registration
from profile_delivery import top_entries


def one_round(workload: str, subs: int, spy: str | None = None) -> dict:
    """One fresh router, one registration; its figures. ``spy``: a file for
    py-spy's samples of the router (collapsed stacks), when it is installed."""
    router = start_ours(max_subscriptions=max(500_000, 2 * subs))
    sampler = None
    try:
        if spy:
            sampler = subprocess.Popen(
                [str(Path(sys.executable).with_name("py-spy")), "record", "--rate", "500",
                 "--format", "raw", "--nonblocking", "--output", spy,
                 "--pid", str(router.pids[0])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)             # (py-spy attaches)
        return asyncio.run(_registration(router.port, router.pids[0], subs, 1000, workload))
    finally:
        router.stop()
        if sampler is not None:
            sampler.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), nargs="+",
                        default=["rangeprefix"])
    parser.add_argument("--subs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true",
                        help="one round under cProfile, then its top entries")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--save", metavar="FILE", help="with --profile: keep the profile")
    parser.add_argument("--spy", metavar="FILE",
                        help="one round sampled by py-spy (if installed): collapsed stacks")
    args = parser.parse_args()
    for workload in args.workload:
        if args.spy:
            one_round(workload, args.subs, args.spy)
            print(f"== {workload}: py-spy's samples in {args.spy}")
            continue
        if args.profile:
            with tempfile.TemporaryDirectory() as work:
                profile = os.path.join(work, "router.prof")
                os.environ["BENCH_PROFILE"] = profile
                one_round(workload, args.subs)
                del os.environ["BENCH_PROFILE"]
                print(f"== {workload}: the router's top {args.top} functions by own time "
                      f"({args.subs:,} registrations, profiled)")
                for share, calls, where in top_entries(profile, args.top):
                    print(f"{share:6.1%} {calls:>10,}  {where}")
                if args.save:
                    shutil.copyfile(profile, args.save)
            continue
        rounds = [one_round(workload, args.subs) for _ in range(args.rounds)]
        for r in rounds:
            if r["nacks"]:
                raise SystemExit(f"{r['nacks']} Nacks, e.g. {r['sample']}")
        cpus = [r["cpu"] / args.subs * 1e6 for r in rounds]
        rates = [r["rate"] for r in rounds]
        cpu = statistics.median(cpus)
        rate = statistics.median(rates)
        rss = statistics.median(r["rss_per_sub"] for r in rounds)
        print(f"== {workload}: {args.subs:,} registrations, median of {args.rounds}; "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"router CPU per registration {cpu:8.1f} us   "
              f"({', '.join(f'{c:.1f}' for c in cpus)})")
        print(f"registrations/s             {rate:8,.0f}      "
              f"({', '.join(f'{x:,.0f}' for x in rates)})")
        print(f"router RSS per subscription {rss:8,.0f} B")


if __name__ == "__main__":
    main()
