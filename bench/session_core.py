"""Micro-benchmark of the router session's packet path, in process.

One ``SessionCore`` (elvin.router.session_core) on a host made of the
router's real engine and quench manager, with one subscription (another
owner's) that matches every notification: the producer's side of a 1 -> 1
delivery, without sockets, the event loop or the send queue. Measured:
microseconds per NotifyEmit through ``receive`` (framing), ``drain`` (the
state table, the fast-path decode, the publish limit's check, the match),
and per SubAddRqst/SubRply (a registration burst). The delivery's own bytes
are not written (``bench/router.py --only delivery`` measures the whole
router over TCP; this one has far less noise, for changes to the session
core itself).

Run: .venv/bin/python bench/session_core.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from elvin.keys import EMPTY_KEYS
from elvin.protocol import ConnRqst, NotifyEmit, SubAddRqst, frame
from elvin.router.clientstats import PublishLimit
from elvin.router.compiling import compile_and_place
from elvin.router.config import RouterConfig
from elvin.router.engine import Engine
from elvin.router.options import initial_options
from elvin.router.quench import QuenchManager
from elvin.router.session_core import SessionCore
from elvin.router.stats import Stats
from elvin.subscription.shapes import ShapeCompiler
from elvin.values import Int64

ATTRIBUTES = {"Group": "elvin-dev", "From": "alice", "Timeout": 10,
              "Message": "Has anyone seen the coffee biff today? The pot is empty again.",
              "Message-Id": Int64(8_123_456_789), "Load": 0.75}
BATCH = 2000


class _Host:
    """The router's sans-IO parts; a delivery is matched, not written."""

    def __init__(self) -> None:
        self.clock = time.perf_counter
        self.engine = Engine(clock=self.clock)
        self.quench = QuenchManager(self.engine, lambda owner, packet: None, self.clock)
        self.stats = Stats()
        self.config = RouterConfig()
        self.publish_limit = PublishLimit()
        self.initial_options = initial_options(self.config.options)
        self.initial_limits = self.initial_options.limits()
        self.compile = ShapeCompiler().compile
        self.matched = 0

    def deliver_steps(self, attrs: Any, block: Any, deliver_insecure: bool, nkeys: Any, *,
                      producer: Any = None) -> Any:
        insecure, secure = yield from self.engine.match_steps(attrs, nkeys, deliver_insecure)
        self.matched += len(insecure) + len(secure)
        return 0

    def deliver_first(self, attrs: Any, block: Any, deliver_insecure: bool, nkeys: Any, *,
                      producer: Any = None) -> Any:
        first = self.engine.match_first(attrs, nkeys, deliver_insecure)
        if type(first) is not tuple:
            return self._rest(first)
        self.matched += len(first[0]) + len(first[1])
        return None

    def _rest(self, rest: Any) -> Any:
        insecure, secure = yield from rest
        self.matched += len(insecure) + len(secure)
        return 0

    def link_later(self, steps: Any) -> Any:
        """A match that ran over its step (the process was preempted): run to
        its end now, as the router's step runner would in later turns."""
        try:
            while True:
                next(steps)
        except StopIteration as stop:
            return _Done(stop.value)

    def refuse_connection(self) -> bool:
        return False

    def session_connected(self, owner: Any) -> None:
        pass

    def release(self, owner: Any) -> None:
        pass


class _Done:
    """A finished job (the ``HostJob`` of ``link_later``)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def cancel(self) -> bool:
        return False

    def exception(self) -> None:
        return None

    def result(self) -> Any:
        return self.value

    def add_done_callback(self, fn: Any) -> None:
        fn(self)


class _Channel:
    def __init__(self, host: _Host) -> None:
        self.core = SessionCore(host, self, self, peer=("bench", 1))   # type: ignore[arg-type]
        self.written = 0

    def write(self, data: bytes, droppable: bool = False) -> None:
        self.written += 1

    def write_conf_conn(self, data: bytes) -> None:
        self.written += 1

    def close(self, flush: bool) -> None:
        raise AssertionError("the bench's channel closed")

    def apply_options(self, options: Any) -> None:
        pass

    def started(self) -> None:
        pass


def _drain(core: SessionCore) -> None:
    while core.drain(BATCH, time.perf_counter() + 10):
        pass


def _per_packet(channel: _Channel, data: bytes, count: int, rounds: int) -> list[float]:
    core = channel.core
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        core.receive(data)
        _drain(core)
        times.append((time.perf_counter() - started) / count * 1e6)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    host = _Host()
    consumer = object()
    compiled = compile_and_place("require(Message)")
    host.engine.add(consumer, "require(Message)", compiled.ast, compiled.matches, True,
                    EMPTY_KEYS, EMPTY_KEYS, compiled.names, compiled.index, compiled.placement)
    channel = _Channel(host)
    channel.core.receive(frame(ConnRqst(1, 4, 0, {})))
    _drain(channel.core)
    emits = frame(NotifyEmit(ATTRIBUTES)) * BATCH
    _per_packet(channel, emits, BATCH, 2)                       # warm up
    host.matched = 0
    emit_times = _per_packet(channel, emits, BATCH, args.rounds)
    assert host.matched == BATCH * args.rounds, host.matched
    subs = b"".join(frame(SubAddRqst(n, f'Group == "g{n % 50}"')) for n in range(BATCH))
    sub_times = _per_packet(channel, subs, BATCH, args.rounds)
    print("== router session core, in process (median / best of "
          f"{args.rounds} rounds of {BATCH})")
    print(f"NotifyEmit -> matched       {statistics.median(emit_times):6.2f} us   "
          f"(best {min(emit_times):.2f})")
    print(f"SubAddRqst -> SubRply       {statistics.median(sub_times):6.2f} us   "
          f"(best {min(sub_times):.2f})")


if __name__ == "__main__":
    main()
