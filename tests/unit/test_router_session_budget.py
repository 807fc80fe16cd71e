"""One loop turn, one budget: router sessions that each handle the packets
that just arrived (the fast path of ``Session.data_received``) share the
turn's deadline with each other and with the scheduler, so a turn in which
many clients sent a packet does not last many budgets.

A real ``Router`` (started on a loopback port) and real ``Session`` objects;
only the transport is an in-memory one, so that a dozen sessions can receive
their packets within one callback, as they do when their reads are ready in
the same poll."""

from __future__ import annotations

import asyncio
import time

from elvin.protocol import ConnRqst, NotifyEmit, frame
from elvin.router.config import RouterConfig
from elvin.router.scheduler import BUDGET
from elvin.router.server import Router
from elvin.router.session import Session


class MemoryTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading = True

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def write(self, data) -> None:
        self.written.append(bytes(data))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


COST = BUDGET / 4       # each notification costs the loop a quarter of a budget


async def test_sessions_handling_packets_in_one_turn_share_its_budget():
    router = Router(RouterConfig(listen=["elvin://127.0.0.1:0"]))
    await router.start()
    sessions: list[Session] = []
    try:
        for _ in range(12):
            session = Session(router)
            session.connection_made(MemoryTransport())
            session.data_received(frame(ConnRqst(1, 4, 0, {})))
            sessions.append(session)
        handled: list[Session] = []

        def costly_notification(session: Session, body: bytes) -> None:
            end = time.perf_counter() + COST
            while time.perf_counter() < end:
                pass
            handled.append(session)

        for session in sessions:
            session.core._notify_emit = (lambda body, s=session: costly_notification(s, body))
        note = frame(NotifyEmit({"N": 1}))
        # the ConnRqsts above may have overrun their turn: wait until all are
        # handled and nothing waits, then start a new loop turn
        while not router.scheduler.idle or any(s.state != "connected" for s in sessions):
            await asyncio.sleep(0.001)
        await asyncio.sleep(0)
        for session in sessions:        # one callback: one loop turn
            session.data_received(note)
        inline = len(handled)
        # the turn stopped at its budget (and the packet that crossed it); a
        # slower machine only handles fewer (each costs at least COST)
        assert 1 <= inline <= BUDGET / COST + 1, inline
        # the rest are handled in later turns, none lost
        while len(handled) < len(sessions):
            await asyncio.sleep(0.001)
        assert sorted(map(id, handled)) == sorted(map(id, sessions))
    finally:
        for session in sessions:
            session.connection_lost(None)
        await router.stop()
