"""Send notifications (the asyncio API).

    python examples/publish.py --count 3 hello
"""

from __future__ import annotations

import asyncio
import sys

from _common import parser

import elvin


async def main() -> int:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("greeting", nargs="?", default="hello", help="the Greeting attribute")
    p.add_argument("--count", type=int, default=1, help="how many to send (default 1)")
    args = p.parse_args()
    async with elvin.connect(args.elvin) as conn:
        for n in range(1, args.count + 1):
            # int travels as int32, float as real64, str as string, bytes as opaque
            await conn.send({"Greeting": args.greeting, "Count": n, "Pi": 3.14159})
        # a round trip proves the router has read everything sent before it
        await conn.set_keys()
    print(f"sent {args.count}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
