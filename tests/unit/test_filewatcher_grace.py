"""The filewatcher's reconnection grace (elvin_apps.filewatcher.grace), on a
real event loop: an end queued for one grace period never ends a later one,
and an outage stops the grace under way (nothing re-plans during an outage)."""

from __future__ import annotations

import asyncio

from elvin_apps.filewatcher.grace import ReconnectGrace
from elvin_apps.filewatcher.pathset import TREE, Interest

A = Interest(TREE, "/srv/a", "/srv/a")


async def test_an_end_queued_before_a_new_outage_does_not_end_the_next_grace():
    ended: list[int] = []
    grace = ReconnectGrace(60, on_end=lambda: ended.append(1))
    grace.lost({A: {1}})
    grace.back()
    grace.check({A})                 # everything is back: an end is queued...
    grace.lost({A: {1}})             # ...but the router goes again before it runs,
    grace.back()                     # and comes back: a new grace starts
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert grace.active and ended == []
    grace.check({A})                 # this grace's own end still works
    await asyncio.sleep(0)
    assert not grace.active and ended == [1]


async def test_an_outage_stops_the_grace_under_way():
    ended: list[int] = []
    grace = ReconnectGrace(0.01, on_end=lambda: ended.append(1))
    grace.lost({A: {1}})
    grace.back()
    grace.lost({A: {1}})             # gone again before the grace ran out
    await asyncio.sleep(0.05)        # past the first grace's timeout
    assert ended == [] and grace.in_outage and grace.active
    grace.back()
    async with asyncio.timeout(10):
        while not ended:
            await asyncio.sleep(0.01)
    assert ended == [1] and not grace.active
