"""Hold the router's compile jobs on their worker until a test lets them go.

Tests that prove a compile does not hold anyone back (the loop, a TestConn, a
hang-up) used to count on the compile outlasting what they watched; on a fast
machine an 8 KiB compile takes milliseconds and those tests failed. Holding
the job on its worker thread makes the order the test's, not the machine's:
were the compile on the loop, the held job would hold the loop and the
test's wait would time out. The embedded router runs in the test's process,
so patching ``compiling.compile_and_place`` reaches its workers."""

from __future__ import annotations

import threading

from elvin.router import compiling
from elvin.subscription.shapes import Registered

#: how long a held job waits at most (a test that fails never releases it)
HOLD_LIMIT = 30.0


def hold_compiles(monkeypatch, longer_than: int) -> threading.Event:
    """Hold every worker job for an expression of more than ``longer_than``
    characters until the returned event is set (set it in a ``finally``). A
    held job whose client hung up stops at its first checkpoint once let go."""
    release = threading.Event()
    real_job = compiling.compile_and_place

    def held_job(text: str) -> Registered:
        if len(text) > longer_than:
            release.wait(HOLD_LIMIT)
        return real_job(text)

    monkeypatch.setattr(compiling, "compile_and_place", held_job)
    return release
