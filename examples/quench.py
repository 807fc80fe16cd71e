"""A producer that sends only what someone wants (quench).

It asks the router which subscriptions refer to ``Greeting`` and, each time one
is added or changed, sends a greeting if one of the subscriptions could match
it: nobody subscribed, nothing sent.

    python examples/quench.py --count 1
"""

from __future__ import annotations

import asyncio
import sys

from _common import parser

import elvin
from elvin.quenching import could_match_any, wanted


async def main() -> int:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=1, help="stop after sending N (default 1)")
    p.add_argument("--timeout", type=float, default=60,
                   help="give up after this many seconds without a subscriber (default 60)")
    args = p.parse_args()
    async with elvin.connect(args.elvin) as conn:
        quench = await conn.quench(["Greeting"])
        print("quenching Greeting", flush=True)
        sent = 0
        while sent < args.count:
            try:
                event = await quench.get(timeout=args.timeout)
            except TimeoutError:
                print("nobody subscribed", flush=True)
                return 1
            if isinstance(event, elvin.SubscriptionRemoved):
                continue
            # the values of Greeting that the subscriptions can match
            values = wanted(quench.subscriptions, "Greeting")
            candidates = sorted(values.exact) or ["hello"]
            for greeting in candidates:
                notification = {"Greeting": greeting, "From": "quench.py"}
                if could_match_any(quench.subscriptions, notification):
                    await conn.send(notification)
                    print(f"sent Greeting={greeting!r}", flush=True)
                    sent += 1
        await conn.set_keys()     # a round trip: the router has what we sent
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
