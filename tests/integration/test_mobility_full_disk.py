"""A move-out while the disk is full (#41). What a user expects, and what
the proxy promises: a move-out that is acknowledged is on disk (a SIGKILL
the next instant keeps it); one that cannot be written is refused at once
with the code ``storage`` and why (the disk is full, naming the file), the
client stays attached and live and loses nothing; and as soon as there is
room it can move out again, without waiting for the proxy's back-off.
A real small tmpfs, filled to the last byte."""

from __future__ import annotations

import os
import random

from elvin.mobility import MobileConnection, MobilityError, MobilityProxy, ProxyConfig
from elvin.mobility.store import FILE_NAME, MobilityStore
from tests.waiting import until

from .test_mobility_crash import Counted, publish
from .test_mobility_durability import fill, query
from .test_mobility_state import small_filesystem as small_filesystem


def on_disk(state, client_id: str) -> bool:
    return (client_id,) in query(state / FILE_NAME, "SELECT client FROM clients")


async def test_a_move_out_on_a_full_disk_is_refused_saying_why(router, small_filesystem):
    state = small_filesystem / "state"
    state.mkdir()
    store = MobilityStore.open(state)
    async with MobilityProxy(router.url, ProxyConfig(id="p"), store=store) as proxy:
        mc = await MobileConnection.open(router.url, proxy="p")
        got = Counted(mc)
        await mc.subscribe("require(Seq)")
        try:
            query(state / FILE_NAME, "PRAGMA wal_checkpoint(TRUNCATE)")   # no WAL room left
            fill(small_filesystem)
            try:
                await mc.move_out()
                raise AssertionError("moved out on a full disk")
            except MobilityError as exc:
                assert exc.code == "storage", exc
                assert "full" in str(exc) and str(store.path) in str(exc), exc
            assert mc.state == "connected" and not proxy.handlers
            assert not on_disk(state, mc.client_id)
            await publish(router.url, [0, 1, 2])                   # live all along
            await until(lambda: set(got.seen) == {0, 1, 2})
            assert proxy.storage()["state"] == "failing"
            os.remove(small_filesystem / "filler")
            await mc.move_out()                # at once: no waiting for the back-off
            assert on_disk(state, mc.client_id)
            await publish(router.url, [3, 4])
            report = await mc.move_in(router.url)
            assert report.dropped == 0
            got.exactly(range(5))
        finally:
            await mc.close()


async def test_random_full_and_free_disk_keeps_every_move_out_honest(router, small_filesystem):
    """Property, under a seeded random schedule of the disk filling and
    emptying, notifications published and clients moving out and in: every
    move-out acknowledged is on disk when the client hears it; every one
    refused says ``storage`` and why and leaves the client attached; and at
    the end each client got every notification once or was told it lost it
    (``report.dropped``)."""
    rng = random.Random(41)
    state = small_filesystem / "state"
    state.mkdir()
    store = MobilityStore.open(state)
    published = 0
    refused = acknowledged = 0
    async with MobilityProxy(router.url, ProxyConfig(id="p"), store=store):
        clients = []
        for _ in range(3):
            mc = await MobileConnection.open(router.url, proxy="p")
            await mc.subscribe("require(Seq)")
            clients.append((mc, Counted(mc), [0]))
        try:
            for _step in range(40):
                roll = rng.random()
                if roll < 0.15 and not (small_filesystem / "filler").exists():
                    query(state / FILE_NAME, "PRAGMA wal_checkpoint(TRUNCATE)")
                    fill(small_filesystem)
                elif roll < 0.3 and (small_filesystem / "filler").exists():
                    os.remove(small_filesystem / "filler")
                elif roll < 0.55:
                    count = rng.randrange(1, 40)
                    await publish(router.url, range(published, published + count),
                                  body="b" * rng.randrange(10, 2000))
                    published += count
                else:
                    mc, got, reported = rng.choice(clients)
                    if mc.state == "connected":
                        try:
                            await mc.move_out()
                        except MobilityError as exc:
                            refused += 1
                            assert exc.code == "storage" and str(store.path) in str(exc), exc
                            assert mc.state == "connected"
                        else:
                            acknowledged += 1
                            assert on_disk(state, mc.client_id), "acknowledged, not on disk"
                    else:
                        reported[0] += (await mc.move_in(router.url)).dropped
            if (small_filesystem / "filler").exists():
                os.remove(small_filesystem / "filler")
            await publish(router.url, [published])          # the end of every stream
            for mc, got, reported in clients:
                if mc.state == "moved-out":
                    reported[0] += (await mc.move_in(router.url)).dropped
                await until(lambda got=got: published in got.seen)
                twice = [s for s, n in got.seen.items() if n > 1]
                assert not twice, twice[:10]
                missing = set(range(published + 1)) - set(got.seen)
                assert len(missing) <= reported[0], (len(missing), reported[0])
        finally:
            for mc, _got, _ in clients:
                await mc.close()
    assert refused and acknowledged, "the schedule never refused or never acknowledged"
