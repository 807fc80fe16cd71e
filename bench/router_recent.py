"""Router: what keeping the recent notifications costs (elvin.router.recent).

    .venv/bin/python bench/router_recent.py

Prints the cost of ``RecentValues.note`` per notification (the router's hot
path, for every client notification) for a few shapes in rotation and for a
producer that invents a shape per notification (the bound evicting), and
the time one slice of a replay takes at most (``SLICE``).
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from elvin.protocol import encode_attributes
    from elvin.router.recent import SLICE, RecentValues

    recent = RecentValues(lambda *a: ({}, {}))
    shapes = [{"Group": "Chat", "From": "ann", "Message": "hi", f"Extra-{n}": n}
              for n in range(20)]
    blocks = [encode_attributes(s) for s in shapes]
    n = 200_000
    i = iter(range(10 ** 9))

    def rotating() -> None:
        k = next(i) % 20
        recent.note(shapes[k], blocks[k], True, None)

    per = timeit.timeit(rotating, number=n) / n
    print(f"note, 20 shapes in rotation:      {per * 1e6:6.2f} us per notification")
    fresh = [({f"Name-{k}": k, "Group": "x"}, b"x" * 40) for k in range(n)]
    it = iter(fresh)

    def inventing() -> None:
        attrs, block = next(it)
        recent.note(attrs, block, True, None)

    per = timeit.timeit(inventing, number=n) / n
    print(f"note, a new shape every time:     {per * 1e6:6.2f} us per notification "
          f"({len(recent.kept)} kept)")
    print(f"a replay runs in slices of at most {SLICE * 1e3:g} ms of the loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
