"""What the attribute census (``Elvin-Router-Attributes``) costs the router.

Run: .venv/bin/python bench/census.py [--quick]

``Router.deliver`` in-process (no network, no codec), with 1,000 tickertape
subscriptions none of which matches (the router's cost of looking, not of
sending), for a six-attribute notification: microseconds per notification
with nobody asking for the census (its cost is one attribute test) and with
someone asking (one dictionary update per attribute), and the difference.
Median of several passes; the load average is printed beside the figures,
since other work on the machine moves them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from elvin.router.config import RouterConfig
from elvin.router.server import Router


def per_notification(router: Router, notification: dict, count: int) -> float:
    deliver = router.deliver
    started = time.perf_counter()
    for _ in range(count):
        deliver(notification, None, True, None)
    return (time.perf_counter() - started) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter passes")
    args = parser.parse_args()
    count, passes = (20_000, 3) if args.quick else (100_000, 7)
    router = Router(RouterConfig())
    for n in range(1000):
        text = f'Group == "g{n}" && contains(Message, "w{n % 10}")'
        compiled = router.compile(text)
        router.engine.add(f"client{n // 10}", text, compiled.ast,  # type: ignore[attr-defined]
                          compiled.matches)  # type: ignore[attr-defined]
    notification = {"Group": "nobody", "From": "ann@example.org", "Message": "hello",
                    "Message-Id": "m1", "Timeout": 10, "org.tickertape.message": 3001}
    off, on = [], []
    for _ in range(passes):
        router.census.counting = False
        off.append(per_notification(router, notification, count))
        router.census.counting = True
        on.append(per_notification(router, notification, count))
    router.census.counting = False
    quiet, counted = statistics.median(off), statistics.median(on)
    print(f"load average {os.getloadavg()[0]:.2f} (2 cores shared)")
    print(f"deliver, nobody asks for the census: {quiet:6.2f} us/notification")
    print(f"deliver, someone asks (counting):    {counted:6.2f} us/notification "
          f"(+{counted - quiet:.2f} us, {100 * (counted - quiet) / quiet:+.0f}%)")


if __name__ == "__main__":
    main()
