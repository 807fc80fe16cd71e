"""Per-client statistics and the publish limit (issue 49, point 3), with a
real router over loopback: the counters count, the status, the metrics and
the statistics notification show the busiest clients (bounded), and a
publisher over ``publish-rate`` gets DropWarn while its excess goes to no
one and a publisher from another address is unaffected."""

from __future__ import annotations

import asyncio
import dataclasses
import io

from elvin.protocol import DropWarn, NotifyDeliver, UNotify
from elvin.router.clientstats import TOP_CLIENTS
from elvin.router.metrics import exposition
from elvin.router.reload import apply_config
from elvin.router.status import format_status, router_status
from tests.waiting import until, wait_until

from .rawclient import RawClient


async def connected_from(port: int, address: str) -> RawClient:
    """A session whose channel comes from ``address`` (127.0.0.2: another client host)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**24,
                                                   local_addr=(address, 0))
    client = RawClient(reader, writer)
    await client.connect()
    return client


def name_of(client: RawClient) -> str:
    host, port = client.writer.get_extra_info("sockname")[:2]
    return f"{host}:{port}"


async def received(client: RawClient, count: int) -> list[NotifyDeliver]:
    return [await client.expect(NotifyDeliver) for _ in range(count)]


def rows_of(router) -> dict[str, dict]:
    return {row["client"]: row for row in router.call(router.router.top_clients)}


async def test_each_client_is_counted_and_shown_bounded(make_router):
    router = make_router(stats_interval=0.2)
    consumer = await RawClient.connected(router.port)
    await consumer.subscribe("require(Seq)")
    producer = await RawClient.connected(router.port)
    for seq in range(5):
        producer.notify({"Seq": seq, "Text": "x" * 100})
    await received(consumer, 5)
    rows = rows_of(router)
    made, got = rows[name_of(producer)], rows[name_of(consumer)]
    assert made["notifications_in"] == 5 and made["bytes_in"] > 5 * 100
    assert made["match_seconds"] > 0 and made["subscriptions"] == 0
    assert got["notifications_out"] == 5 and got["bytes_out"] > 5 * 100
    assert got["subscriptions"] == 1 and got["notifications_in"] == 0
    assert made["throttled"] == made["drops"] == 0

    # more clients than are shown: the busiest only, busiest first
    idle = [await RawClient.connected(router.port) for _ in range(TOP_CLIENTS + 2)]
    status = router.call(router_status, router.router)
    shown = [row["client"] for row in status["clients"]]
    assert len(shown) == TOP_CLIENTS
    assert set(shown[:2]) == {name_of(producer), name_of(consumer)}
    text = io.StringIO()
    format_status({**status, "running": True}, text)
    assert "busiest clients (10):" in text.getvalue()
    assert name_of(producer) in text.getvalue()
    metrics = exposition(status)
    assert f'elvind_client_notifications_in{{client="{name_of(producer)}"}} 5' in metrics
    assert f'elvind_client_notifications_out{{client="{name_of(consumer)}"}} 5' in metrics
    assert metrics.count("elvind_client_bytes_out{") == TOP_CLIENTS
    assert "elvind_throttled_total 0" in metrics

    # the router's statistics notification says them too (the console's router view)
    await consumer.subscribe("require(Elvin-Router-Stats)")
    stats = (await consumer.expect(NotifyDeliver)).attributes
    while "Elvin-Router-Stats" not in stats:
        stats = (await consumer.expect(NotifyDeliver)).attributes
    assert f"{name_of(producer)} in 5 out 0 drops 0 throttled 0 subs 0; " in \
        stats["Top-Clients"]
    assert stats["Top-Clients"].count(";") == TOP_CLIENTS - 1
    assert stats["Throttled"] == 0
    for client in [consumer, producer, *idle]:
        await client.close()


async def test_a_publisher_over_its_limit_gets_dropwarn_and_others_are_unaffected(
        make_router):
    # a rate so small that nothing refills during the test: the burst is what goes
    router = make_router(publish_rate=0.001, publish_burst=3)
    consumer = await RawClient.connected(router.port)
    await consumer.subscribe("require(Seq)")
    flooder = await RawClient.connected(router.port)
    for seq in range(20):
        flooder.notify({"Seq": seq, "From": "flooder"})
    assert isinstance(await flooder.expect(DropWarn), DropWarn)
    await until(lambda: rows_of(router)[name_of(flooder)]["throttled"] == 17,
                what="the flooder's 17 notifications over the burst throttled")
    # another connection from the same address shares the address's bucket
    sibling = await RawClient.connected(router.port)
    sibling.notify({"Seq": 100, "From": "sibling"})
    await until(lambda: rows_of(router)[name_of(sibling)]["throttled"] == 1,
                what="the sibling's notification throttled")
    # a session-less UNotify from there too: dropped and counted, never answered
    unotify = await RawClient.open(router.port)
    unotify.send(UNotify(4, 0, {"Seq": 200, "From": "unotify"}))
    await until(lambda: rows_of(router).get(name_of(unotify), {}).get("throttled") == 1,
                what="the UNotify throttled")
    await unotify.nothing(0.2)
    # a publisher from another address has a bucket of its own: all of its
    # burst arrives, after what the router kept of the flooder's (handled before)
    other = await connected_from(router.port, "127.0.0.2")
    for seq in range(3):
        other.notify({"Seq": seq, "From": "other"})
    got = [d.attributes for d in await received(consumer, 6)]
    assert [(a["From"], a["Seq"]) for a in got] == \
        [("flooder", 0), ("flooder", 1), ("flooder", 2), ("other", 0), ("other", 1),
         ("other", 2)]
    await consumer.nothing(0.3)
    assert rows_of(router)[name_of(other)]["throttled"] == 0
    assert [p for p in other.held() if isinstance(p, DropWarn)] == []
    status = router.call(router_status, router.router)
    assert status["counters"]["throttled"] == 19
    assert status["publish_limit"] == {"rate": 0.001, "burst": 3.0, "per": "address"}
    assert "elvind_throttled_total 19" in exposition(status)

    # a reload that lifts the limit applies to the next notification
    new = dataclasses.replace(router.router.config, publish_rate=0, publish_burst=0)
    ok, message = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
        apply_config(router.router, new, lambda level, file: None), router.loop))
    assert ok and "publish-rate (0.001 -> 0)" in message
    flooder.notify({"Seq": 20, "From": "flooder"})
    assert (await consumer.expect(NotifyDeliver)).attributes["Seq"] == 20
    for client in (consumer, flooder, sibling, unotify, other):
        await client.close()


def test_elvind_reads_the_limit_from_its_file_and_its_metrics_show_the_clients(tmp_path):
    """The whole path in a real elvind: the file's settings, the limit, /metrics."""
    import subprocess
    import urllib.request

    from .process_util import ELVIND, free_port, stop, wait_listening

    port, metrics_port = free_port(), free_port()
    config = tmp_path / "r.toml"
    config.write_text(f'listen = "elvin://127.0.0.1:{port}"\n'
                      f'status-file = "{tmp_path / "status.json"}"\n'
                      f'metrics = "127.0.0.1:{metrics_port}"\n'
                      "publish-rate = 0.001\npublish-burst = 2\n")
    proc = subprocess.Popen([*ELVIND, "--config", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)

    def scrape() -> str:
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.read().decode()

    async def publish() -> str:
        client = await RawClient.connected(port)
        for seq in range(5):
            client.notify({"Seq": seq})
        await client.expect(DropWarn)
        name = name_of(client)
        await until(lambda: f'elvind_client_throttled{{client="{name}"}} 3' in scrape(),
                    what="the client's 3 throttled notifications in /metrics")
        await client.close()
        return name

    try:
        wait_listening(port, proc)
        wait_listening(metrics_port, proc)
        name = asyncio.run(publish())
        assert "elvind_throttled_total 3" in scrape()
        # a client that went is shown no more (the router's total stays)
        wait_until(lambda: f'client="{name}"' not in scrape(), what="the gone client unshown")
        assert "elvind_throttled_total 3" in scrape()
    finally:
        stop(proc)
        proc.communicate()
