"""Router discovery on loopback: real routers answering real SvrRqst datagrams.

Most tests use a unicast responder address (127.0.0.1, a free port) so that
they do not depend on multicast; one test uses a multicast group over the
loopback interface, and is skipped (saying why) only when this host cannot
deliver loopback multicast at all.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct

import pytest

import elvin
from elvin.discovery import (
    SvrAdvt,
    SvrRqst,
    decode,
    discover,
    discover_adverts,
    discover_sync,
    discover_url,
    encode,
)
from elvin.discovery.transport import multicast_socket
from elvin.router.embedded import EmbeddedRouter
from tests.waiting import wait_until

TIMEOUT = 5.0


@pytest.fixture
def discoverable(make_router):
    """``discoverable(scope="", default=True)``: a started router answering
    discovery on 127.0.0.1 (a free UDP port); returns (router, "127.0.0.1:port")."""

    def factory(scope: str = "", default: bool = True, **settings):
        router = make_router(discovery=True, discovery_address="127.0.0.1",
                             discovery_port=0, discovery_scope=scope,
                             discovery_default=default, **settings)
        responder = router.router.discovery
        assert responder is not None, "the router did not start its discovery responder"
        return router, f"127.0.0.1:{responder.port}"

    return factory


async def test_router_answers_for_its_scope(discoverable):
    router, where = discoverable(scope="alpha")
    assert await discover("alpha", address=where, timeout=TIMEOUT) == [router.url]
    adverts = await discover_adverts("alpha", address=where, timeout=TIMEOUT)
    assert len(adverts) == 1
    advert = adverts[0]
    assert advert.scope == "alpha" and advert.default and advert.revision >= 1
    assert advert.uris == (router.url,)
    assert advert.server_name   # unique per router


async def test_no_answer_for_another_scope(discoverable):
    _router, where = discoverable(scope="alpha")
    # the router answers (SvrRqst carries no scope), the client keeps only its scope
    assert await discover("beta", address=where, timeout=1.0) == []


async def test_default_flag_selects_routers_for_clients_without_scope(discoverable):
    default, at_default = discoverable(scope="", default=True)
    scoped_only, at_scoped = discoverable(scope="lab", default=False)
    assert await discover(address=at_default, timeout=TIMEOUT) == [default.url]
    assert await discover(address=at_scoped, timeout=1.0) == []
    assert await discover("lab", address=at_scoped, timeout=TIMEOUT) == [scoped_only.url]


async def test_discover_finds_two_routers(discoverable):
    first, at_first = discoverable(scope="pair")
    second, at_second = discoverable(scope="pair")
    found = await discover("pair", address=[at_first, at_second], timeout=TIMEOUT)
    assert sorted(found) == sorted([first.url, second.url])
    assert len(found) == 2   # no duplicates


async def test_router_advertises_reachable_addresses_for_a_wildcard_listener(make_router):
    router = make_router(discovery=True, discovery_address="127.0.0.1", discovery_port=0,
                         host="0.0.0.0")
    where = f"127.0.0.1:{router.router.discovery.port}"
    urls = await discover(address=where, timeout=TIMEOUT)
    assert urls, "no advertisement"
    for url in urls:
        assert "0.0.0.0" not in url and url.endswith(f":{router.port}")
    # and a client can use what was advertised
    async with elvin.connect(urls[0]) as conn:
        assert conn.is_open


async def test_garbage_datagrams_are_ignored(discoverable):
    router, where = discoverable(scope="junk")
    responder = router.router.discovery
    host, port = where.split(":")
    junk = [b"", b"\x00", b"\xff" * 3, struct.pack(">iIII", 16, 4, 0, 999),
            struct.pack(">i", 17) + os.urandom(64), os.urandom(1500),
            struct.pack(">iII", 18, 4, 0) + struct.pack(">I", 0x7FFFFFFF),
            encode(SvrRqst(0, major_version=9))]   # well formed, incompatible version
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for data in junk:
            sock.sendto(data, (host, int(port)))
    wait_until(lambda: responder.ignored >= len(junk))
    assert router.running
    # still answering
    assert await discover("junk", address=where, timeout=TIMEOUT) == [router.url]


async def test_requests_are_rate_limited_but_always_answered(discoverable):
    """At most one advertisement per requester every two seconds (draft 5.3);
    requests in between get one answer at the end of the two seconds."""
    router, where = discoverable(scope="rate")
    responder = router.router.discovery
    host, port = where.split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(TIMEOUT)
    try:
        for _ in range(5):
            sock.sendto(encode(SvrRqst(0)), (host, int(port)))
        first = decode(sock.recvfrom(2048)[0])
        assert isinstance(first, SvrAdvt) and first.uris == (router.url,)
        wait_until(lambda: responder.requests >= 5)
        second = decode(sock.recvfrom(2048)[0])   # the deferred one
        assert isinstance(second, SvrAdvt)
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recvfrom(2048)                    # and only one
        assert responder.adverts_sent == 2
    finally:
        sock.close()


def test_discover_sync_and_package_exports(discoverable):
    router, where = discoverable(scope="sync")
    assert elvin.discover_sync("sync", address=where, timeout=TIMEOUT) == [router.url]
    assert elvin.discover is discover and discover_sync is elvin.discover_sync


def test_no_discovery_flag_means_no_responder(make_router):
    router = make_router(discovery=False)
    assert router.router.discovery is None


# -- applications ---------------------------------------------------------------------


def test_apps_resolution_picks_a_discovered_router(discoverable, monkeypatch):
    router, where = discoverable(scope="apps")
    env = {"ELVIN_DISCOVERY": where, "ELVIN_SCOPE": "apps"}
    assert discover_url(timeout=TIMEOUT, environ=env) == router.url
    assert discover_url(timeout=0.5, environ={"ELVIN_DISCOVERY": "off"}) is None

    from elvin.daemon import run

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ELVIN_URL", raising=False)
    assert run.find_router(timeout=TIMEOUT) == router.url


def test_apps_resolution_falls_back_when_nothing_answers(monkeypatch):
    # a port where nothing listens: no answer, so the caller starts its own router
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        silent = f"127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("ELVIN_DISCOVERY", silent)
    monkeypatch.delenv("ELVIN_URL", raising=False)
    from elvin.daemon import run

    assert discover_url(timeout=0.5) is None
    assert run.find_router(timeout=0.5) is None


def test_apps_router_rule_uses_discovery(discoverable, monkeypatch):
    from elvin.router_url import choose_router_url

    router, where = discoverable(scope="ticker")
    monkeypatch.setenv("ELVIN_DISCOVERY", where)
    monkeypatch.setenv("ELVIN_SCOPE", "ticker")
    monkeypatch.delenv("ELVIN_URL", raising=False)
    found = choose_router_url(None, None, discover=True, timeout=TIMEOUT)
    assert (found.url, found.chosen, found.source) == (router.url, True, "discovery")
    # a configured URL wins, and discovery is not even tried
    configured = choose_router_url(None, "elvin://example.org:2917", discover=True)
    assert (configured.url, configured.source) == ("elvin://example.org:2917", "config")
    monkeypatch.setenv("ELVIN_DISCOVERY", "off")
    default = choose_router_url(None, None, discover=True)
    assert (default.url, default.chosen) == ("elvin://127.0.0.1:2917", False)


# -- multicast ------------------------------------------------------------------------


def _loopback_multicast(group: str, port: int) -> str | None:
    """None if a datagram multicast on the loopback interface comes back,
    else why not."""
    try:
        listener = multicast_socket(group, port, "127.0.0.1")
    except OSError as exc:
        return f"cannot join {group} on the loopback interface: {exc}"
    try:
        sender = multicast_socket(group, port, "127.0.0.1", bind_port=0)
        try:
            sender.sendto(b"probe", (group, port))
        except OSError as exc:
            return f"cannot multicast on the loopback interface: {exc}"
        finally:
            sender.close()
        listener.settimeout(1.0)
        try:
            listener.recvfrom(64)
        except OSError:
            return "multicast datagrams sent on the loopback interface do not come back"
        return None
    finally:
        listener.close()


async def test_multicast_discovery_on_loopback():
    group, port = "224.4.0.1", random.randrange(20000, 60000)
    why_not = _loopback_multicast(group, port)
    if why_not:
        pytest.skip(f"this host cannot do loopback multicast: {why_not}")
    scope = f"mc-{os.getpid()}-{port}"   # no other test's router can answer for it
    settings = dict(discovery=True, discovery_address=group, discovery_port=port,
                    discovery_interface="127.0.0.1", discovery_scope=scope)
    routers = [EmbeddedRouter(**settings).start() for _ in range(2)]
    try:
        found = await discover(scope, address=group, port=port, interface="127.0.0.1",
                               timeout=TIMEOUT)
        assert sorted(found) == sorted(r.url for r in routers)
    finally:
        for router in routers:
            router.stop()
    await asyncio.sleep(0)
