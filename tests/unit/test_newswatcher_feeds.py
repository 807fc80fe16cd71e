"""newswatcher fetching: conditional GET, limits, timeouts, politeness, backoff
(against the local feed server on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import gzip
import random
import time

import pytest
from elvin_apps.newswatcher.config import HttpSettings
from elvin_apps.newswatcher.feeds import (
    Fetcher,
    FetchError,
    HostLimiter,
    backoff_delay,
    read_file,
)

from tests.feedserver import FeedServer, Item, rss

FAST = HttpSettings(timeout=2.0, max_bytes=50_000, min_host_interval=0.0, max_per_host=4)
BODY = rss("x", [Item("tag:1", "One", "https://e.org/1")])


@pytest.fixture
def server():
    with FeedServer() as srv:
        yield srv


async def test_conditional_get_with_etag(server):
    server.set("/f.xml", BODY)
    fetcher = Fetcher(FAST)
    first = await fetcher.fetch(server.url("/f.xml"))
    assert first.status == 200 and first.body == BODY.encode() and first.etag
    assert first.content_type == "application/rss+xml"
    second = await fetcher.fetch(server.url("/f.xml"), etag=first.etag,
                                 last_modified=first.last_modified)
    assert second.not_modified and second.body == b"" and second.etag == first.etag
    assert [(e.status, e.conditional) for e in server.requests("/f.xml")] == [
        (200, False), (304, True)]
    server.set("/f.xml", BODY + " ")                       # changed: new ETag
    third = await fetcher.fetch(server.url("/f.xml"), etag=first.etag)
    assert third.status == 200 and third.etag != first.etag
    assert fetcher.stats.as_dict() | {"bytes": 0} == {
        "requests": 3, "ok": 2, "not_modified": 1, "errors": 0, "bytes": 0,
        "errors_by_kind": {}}


async def test_conditional_get_with_last_modified_only(server):
    server.set("/f.xml", BODY, etag=False)
    fetcher = Fetcher(FAST)
    first = await fetcher.fetch(server.url("/f.xml"))
    assert first.etag is None and first.last_modified
    second = await fetcher.fetch(server.url("/f.xml"), last_modified=first.last_modified)
    assert second.not_modified


async def test_gzip_and_chunked_bodies(server):
    server.set("/g.xml", BODY, gzip=True)
    server.set("/c.xml", BODY * 3, chunked=True)
    server.set("/gc.xml", BODY, gzip=True, chunked=True)
    fetcher = Fetcher(FAST)
    assert (await fetcher.fetch(server.url("/g.xml"))).body == BODY.encode()
    assert (await fetcher.fetch(server.url("/c.xml"))).body == (BODY * 3).encode()
    assert (await fetcher.fetch(server.url("/gc.xml"))).body == BODY.encode()


@pytest.mark.parametrize("kwargs", [{}, {"chunked": True}, {"gzip": True}])
async def test_size_cap(server, kwargs):
    # 200 kB: over the cap plainly, in chunks, and once inflated (a "bomb")
    server.set("/big.xml", "x" * 200_000, **kwargs)
    fetcher = Fetcher(FAST)
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(server.url("/big.xml"))
    assert info.value.kind == "too-large"
    assert fetcher.stats.by_kind == {"too-large": 1}
    if kwargs.get("gzip"):
        assert len(gzip.compress(b"x" * 200_000)) < FAST.max_bytes   # the bomb was small


async def test_whole_request_timeout_on_a_slow_server(server):
    server.set("/slow.xml", BODY, delay=3.0)
    fetcher = Fetcher(HttpSettings(timeout=0.3, min_host_interval=0))
    start = time.monotonic()
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(server.url("/slow.xml"))
    assert info.value.kind == "timeout"
    assert time.monotonic() - start < 1.5


@pytest.mark.parametrize("status", [404, 500, 410])
async def test_http_errors(server, status):
    server.set("/e.xml", BODY, status=status)
    with pytest.raises(FetchError) as info:
        await Fetcher(FAST).fetch(server.url("/e.xml"))
    assert (info.value.kind, info.value.status) == ("http", status)
    assert str(status) in str(info.value)


async def test_redirects_followed_and_bounded(server):
    server.set("/real.xml", BODY)
    server.redirect("/old.xml", "/real.xml")
    server.redirect("/loop.xml", "/loop.xml", status=302)
    fetcher = Fetcher(FAST)
    result = await fetcher.fetch(server.url("/old.xml"))
    assert result.status == 200 and result.url == server.url("/real.xml")
    with pytest.raises(FetchError, match="redirects"):
        await fetcher.fetch(server.url("/loop.xml"))
    assert server.count("/loop.xml") == FAST.max_redirects + 1


async def test_connection_refused_and_garbage_replies():
    fetcher = Fetcher(FAST)
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(f"http://127.0.0.1:{port}/x")
    assert info.value.kind == "network"

    async def garbage(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()
        writer.close()

    bad = await asyncio.start_server(garbage, "127.0.0.1", 0)
    try:
        port = bad.sockets[0].getsockname()[1]
        with pytest.raises(FetchError) as info:
            await fetcher.fetch(f"http://127.0.0.1:{port}/x")
        assert info.value.kind == "protocol"
    finally:
        bad.close()
        await bad.wait_closed()


async def test_local_files(tmp_path):
    path = tmp_path / "f.xml"
    path.write_text(BODY)
    first = await read_file(path.as_uri(), None, 100_000)
    assert first.status == 200 and first.body == BODY.encode()
    assert (await read_file(path.as_uri(), first.etag, 100_000)).not_modified
    with pytest.raises(FetchError) as info:
        await read_file(path.as_uri(), None, 10)
    assert info.value.kind == "too-large"
    with pytest.raises(FetchError) as info:
        await read_file((tmp_path / "absent.xml").as_uri(), None, 100)
    assert info.value.kind == "file"


def test_backoff_doubles_is_capped_and_honours_retry_after():
    s = HttpSettings(backoff_initial=10, backoff_max=100)
    rng = random.Random(1)
    delays = [backoff_delay(n, s, rng=rng) for n in range(1, 7)]
    for n, delay in enumerate(delays, start=1):
        expected = min(100, 10 * 2 ** (n - 1))
        assert expected * 0.9 <= delay <= expected * 1.1
    # never sooner than the feed's own interval, even when that is above the cap
    assert backoff_delay(1, s, interval=300, rng=rng) >= 270
    assert backoff_delay(9, s, interval=300, rng=rng) <= 330
    assert backoff_delay(1, s, retry_after=50, rng=rng) >= 50
    assert backoff_delay(1, s, retry_after=10_000, rng=rng) <= 110


async def test_host_limiter_spacing_and_concurrency():
    limiter = HostLimiter(min_interval=0.15, max_per_host=1)
    starts: list[float] = []
    active = 0
    peak = 0

    async def request(host: str) -> None:
        nonlocal active, peak
        async with limiter.slot(host):
            starts.append(time.monotonic())
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1

    t0 = time.monotonic()
    await asyncio.gather(*(request("a.example") for _ in range(4)))
    assert peak == 1
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert all(g >= 0.14 for g in gaps), gaps
    # another host is not held up by the first one's spacing
    starts.clear()
    t0 = time.monotonic()
    await asyncio.gather(request("b.example"), request("c.example"))
    assert max(starts) - t0 < 0.1
