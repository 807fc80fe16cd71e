"""Elvin-Router-Stats notifications appear only while someone subscribes to them."""

from __future__ import annotations

from elvin.protocol import NotifyDeliver, SubDelRqst
from elvin.values import Int64

from .rawclient import RawClient


async def test_stats_only_while_subscribed(make_router):
    router = make_router(stats_interval=0.2)
    watcher = await RawClient.connected(router.port)
    # matches a stats notification, but does not refer to Elvin-Router-Stats
    await watcher.subscribe("require(Uptime)")
    await watcher.nothing(0.7)
    stats_client = await RawClient.connected(router.port)
    sub = await stats_client.subscribe("require(Elvin-Router-Stats)")
    deliver = await stats_client.expect(NotifyDeliver, timeout=3)
    attrs = deliver.attributes
    assert attrs["Elvin-Router-Stats"] == 1
    assert attrs["Connections"] == 2 and attrs["Subscriptions"] == 2
    assert attrs["Quenches"] == 0
    for name in ("Notifications-In", "Notifications-Out", "Drops"):
        assert type(attrs[name]) is Int64
    for name in ("Notifications-In-Per-Second", "Notifications-Out-Per-Second", "Uptime"):
        assert isinstance(attrs[name], float)
    assert isinstance(attrs["Router-Id"], str)
    assert deliver.insecure_matches == (sub,)
    assert (await watcher.expect(NotifyDeliver, timeout=3)).attributes["Elvin-Router-Stats"] == 1
    # unsubscribe: they stop
    await stats_client.request(SubDelRqst(stats_client.xid(), sub))
    await watcher.quiet(0.3)    # one may have been in flight
    await watcher.nothing(0.7)
    await watcher.close()
    await stats_client.close()


async def test_a_reloaded_stats_interval_restarts_the_running_timer(make_router, tmp_path):
    """The statistics service takes a reload's stats-interval at once: a
    subscriber waiting on an hour's timer gets them at the new interval."""
    import argparse
    import asyncio

    from elvin.router.cli import reload_router

    router = make_router(stats_interval=3600)
    client = await RawClient.connected(router.port)
    await client.subscribe("require(Elvin-Router-Stats)")
    path = tmp_path / "r.toml"
    path.write_text(f'listen = "{router.url}"\ndiscovery = false\nstats-interval = 0.1\n')
    ok, message = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
        reload_router(router.router, argparse.Namespace(config=str(path)),
                      set_logging=lambda *a: None), router.loop))
    assert ok and "stats-interval (3600 -> 0.1)" in message, message
    for _ in range(2):
        assert (await client.expect(NotifyDeliver, timeout=5)).attributes[
            "Elvin-Router-Stats"] == 1
    await client.close()
