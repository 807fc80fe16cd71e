"""The router's CPU per delivered notification without sockets: its Python path alone.

Run: .venv/bin/python bench/delivery_inproc.py [--consumers 1] [--rounds 15]
     ELVIN_PURE=1 .venv/bin/python bench/delivery_inproc.py   (the pure-Python codec)

A real ``Router`` and real ``Session`` objects on this process's event loop;
only the transports are in memory (their writes are counted, not sent). One
producer session is fed batches of 200 NotifyEmit frames (the bench's window,
as one read would bring them), ``--consumers`` sessions each have the
subscription of ``bench/versus_avis.py``'s CPU row, which every notification
matches. Printed: this process's CPU (user + system) per delivered
notification, median and best of the rounds. What it leaves out (the reads,
the writes, the poll) is what ``bench/versus_avis.py --only cpu`` adds: read
this one for changes to the NotifyEmit -> match -> NotifyDeliver path, whose
figure the shared machine's load moves less than the TCP bench's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from elvin.protocol import ConnRqst, NotifyEmit, SubAddRqst, _accel, frame
from elvin.router.config import RouterConfig
from elvin.router.server import Router
from elvin.router.session import Session

NOTIFICATION = {"Kind": "bench", "Group": "elvin-dev", "From": "bench",
                "Message": "Has anyone seen the coffee biff today? The pot is empty again.",
                "Seq": 1}
SUBSCRIPTION = 'require(Seq) && Kind == "bench"'
BATCH = 200
BATCHES = 25


class MemoryTransport:
    """What a session writes to: counted and forgotten."""

    def __init__(self) -> None:
        self.writes = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: bytes) -> None:
        self.writes += 1

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _session(router: Router, options: dict[str, Any]) -> Session:
    session = Session(router)
    session.connection_made(MemoryTransport())
    session.data_received(frame(ConnRqst(1, 4, 0, options)))
    return session


async def measure(consumers: int, rounds: int) -> list[float]:
    """CPU microseconds per delivered notification, one figure per round."""
    router = Router(RouterConfig(listen=["elvin://127.0.0.1:0"]))
    await router.start()
    try:
        subs = [_session(router, {"Send-Queue.Max-Length": 64 * 1024 * 1024})
                for _ in range(consumers)]
        for session in subs:
            session.data_received(frame(SubAddRqst(2, SUBSCRIPTION)))
        producer = _session(router, {})
        while not router.scheduler.idle or len(router.engine) < consumers:
            await asyncio.sleep(0.001)
        batch = frame(NotifyEmit(NOTIFICATION)) * BATCH
        figures = []
        for _ in range(rounds):
            before = sum(s.core.counters.notifications_out for s in subs)
            started = time.process_time()
            for _ in range(BATCHES):
                producer.data_received(batch)
                while not router.scheduler.idle or producer.core.backlog:
                    await asyncio.sleep(0)
                await asyncio.sleep(0)      # the send queues' flush
            used = time.process_time() - started
            delivered = sum(s.core.counters.notifications_out for s in subs) - before
            if delivered != consumers * BATCH * BATCHES:
                raise SystemExit(f"delivered {delivered}, expected {consumers * BATCH * BATCHES}")
            figures.append(used / delivered * 1e6)
        return figures
    finally:
        await router.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    try:
        import uvloop
        run = uvloop.run
    except ImportError:  # pragma: no cover
        run = asyncio.run
    figures = run(measure(args.consumers, args.rounds))
    print(f"codec: {_accel.describe()}")
    print(f"router CPU per delivered notification, 1 -> {args.consumers}, in process: "
          f"median {statistics.median(figures):.2f} us, best {min(figures):.2f} us "
          f"({args.rounds} rounds of {BATCH * BATCHES:,} notifications)")


if __name__ == "__main__":
    main()
