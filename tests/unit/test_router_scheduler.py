"""The router's round-robin scheduler keeps serving the other sessions when
one session's turn fails (a bug there must not strand every client)."""

from __future__ import annotations

import asyncio

from elvin.router.fairness import Scheduler


class Session:
    def __init__(self, packets: int, fail: bool = False) -> None:
        self.packets = packets
        self.fail = fail
        self.handled = 0

    def drain(self, quantum: int, deadline: float) -> bool:
        if self.fail:
            raise RuntimeError("broken session")
        step = min(quantum, self.packets)
        self.packets -= step
        self.handled += step
        return self.packets > 0


async def test_a_failing_turn_does_not_strand_the_others(caplog):
    scheduler = Scheduler(asyncio.get_running_loop())
    broken, healthy = Session(5, fail=True), Session(40)
    scheduler.wake(healthy)
    scheduler.wake(broken)                     # goes first
    async with asyncio.timeout(10):
        while healthy.packets:
            await asyncio.sleep(0.001)
    assert healthy.handled == 40
    assert "a scheduler turn failed" in caplog.text
