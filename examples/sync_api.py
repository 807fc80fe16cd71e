"""The blocking API (``elvin.sync``): subscribe, send, receive, without asyncio.

    python examples/sync_api.py
"""

from __future__ import annotations

import sys

from _common import parser

import elvin.sync


def main() -> int:
    args = parser(__doc__.split("\n")[0]).parse_args()
    with elvin.sync.connect(args.elvin) as conn:
        sub = conn.subscribe('require(Greeting) && Count > 1')
        for count in (1, 2, 3):
            conn.send({"Greeting": "hi", "Count": count})
        for _ in range(2):          # Count 1 does not match
            notification = sub.get(timeout=10)
            print(f"got Greeting={notification['Greeting']} Count={notification['Count']}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
