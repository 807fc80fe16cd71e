"""``python bench/_loophold.py HOLDFILE ELVIND-ARGS...``: elvind with a meter of
its loop's holds, for ``bench/loop.py`` (not a bench itself).

Every callback the asyncio loop runs (a socket read, a timer, a scheduler or
announcer turn) is timed, in wall-clock time and in the loop thread's CPU
time (on a shared machine the wall clock also counts the time other
processes ran); SIGUSR2 writes the longest of each since the last SIGUSR2 to
HOLDFILE (``sequence wall cpu gc callback``; gc: the longest garbage
collection, which runs inside whichever callback allocated) and starts a new window. The
router runs on asyncio's own loop (uvloop's callbacks cannot be timed from
Python), which is what a router without uvloop installed runs anyway.
"""

from __future__ import annotations

import asyncio.events
import gc
import os
import signal
import sys
import time

HOLDFILE = sys.argv[1]
_state = {"worst": 0.0, "what": "", "seq": 0, "cpu": 0.0, "gc": 0.0, "gc_start": 0.0}
_original = asyncio.events.Handle._run


def _timed(self) -> None:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    cpu = time.thread_time()
    _original(self)
    cpu = time.thread_time() - cpu
    took = time.perf_counter() - start
    if took > _state["worst"]:
        _state["worst"] = took
        _state["what"] = repr(getattr(self, "_callback", None))[:120]
    if cpu > _state["cpu"]:
        _state["cpu"] = cpu


def _gc(phase: str, info: dict) -> None:
    """The longest garbage collection (it runs inside whichever callback
    allocated: a hold that is mostly a collection is the collector's)."""
    if phase == "start":
        _state["gc_start"] = time.perf_counter()
    else:
        took = time.perf_counter() - _state["gc_start"]
        if took > _state["gc"]:
            _state["gc"] = took


def _dump(signum, frame) -> None:  # type: ignore[no-untyped-def]
    _state["seq"] += 1
    tmp = HOLDFILE + ".tmp"
    with open(tmp, "w") as out:
        out.write(f"{_state['seq']} {_state['worst']:.6f} {_state['cpu']:.6f} "
                  f"{_state['gc']:.6f} {_state['what']}\n")
    os.replace(tmp, HOLDFILE)
    _state["worst"] = 0.0
    _state["cpu"] = 0.0
    _state["gc"] = 0.0
    _state["what"] = ""


def main() -> int:
    asyncio.events.Handle._run = _timed           # type: ignore[method-assign]
    sys.modules["uvloop"] = None                  # type: ignore[assignment] - asyncio's loop
    signal.signal(signal.SIGUSR2, _dump)
    gc.callbacks.append(_gc)
    from elvin.router.cli import main as elvind
    return elvind(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
