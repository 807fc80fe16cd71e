"""Subscribe and print every notification that matches (the asyncio API).

    python examples/subscribe.py 'require(Greeting)' --count 3
"""

from __future__ import annotations

import asyncio
import sys

from _common import parser

import elvin


async def main() -> int:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("expression", nargs="?", default="require(Greeting)",
                   help="subscription expression (default %(default)s)")
    p.add_argument("--count", type=int, default=0, help="stop after N notifications (0: never)")
    args = p.parse_args()
    async with elvin.connect(args.elvin) as conn:
        sub = await conn.subscribe(args.expression)
        # the router has the subscription now: what is sent from here on arrives
        print(f"subscribed to {args.expression}", flush=True)
        received = 0
        async for notification in sub:
            print(dict(notification), flush=True)
            received += 1
            if args.count and received >= args.count:
                break
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
