"""The bounded, shared, remembered DNS lookups of federation admission
(``elvin.federation.lookups``). The blocking resolver functions are given
through ``HostLookups``'s seam and run on its real threads; a "hanging" one
blocks on an event the test sets. The router-level behaviour is in
tests/integration/test_federation_lookups.py."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter

import pytest

from elvin.federation import lookups
from elvin.federation.admission import Peer, accept_rule, check_peer_names
from elvin.federation.config import AcceptSpec, FederationConfig
from elvin.federation.hosts import ResolverBusy
from elvin.federation.lookups import HostLookups
from tests.waiting import until


class Zone:
    """A reverse and forward zone: ``names``/``addresses`` answer, anything
    else has no record; with ``hang`` set, every call blocks until
    ``release`` is set."""

    def __init__(self, names=None, addresses=None, hang=False) -> None:
        self.names = names or {}
        self.addresses = addresses or {}
        self.release = threading.Event()
        if not hang:
            self.release.set()
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def reverse(self, address: str) -> list[str]:
        with self.lock:
            self.calls[address] += 1
        self.release.wait(30)
        if address not in self.names:
            raise socket.herror(1, "Unknown host")
        return self.names[address]

    def forward(self, name: str) -> list[str]:
        with self.lock:
            self.calls[name] += 1
        self.release.wait(30)
        if name not in self.addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.addresses[name]

    def lookups(self, timeout: float = 10.0, max_lookups: int = 2) -> HostLookups:
        return HostLookups(lambda: timeout, self.reverse, self.forward, max_lookups)


async def test_answers_and_failures_are_remembered():
    zone = Zone({"10.0.0.7": ["gw.example.com"]}, {"gw.example.com": ["10.0.0.7"]})
    dns = zone.lookups()
    try:
        for _ in range(3):
            assert await dns.names("10.0.0.7") == ("gw.example.com",)
            assert await dns.addresses("GW.example.com.") == ("10.0.0.7",)
            with pytest.raises(OSError, match="Unknown host"):
                await dns.names("10.0.0.9")
            with pytest.raises(OSError, match="not known"):
                await dns.addresses("nowhere.example.com")
        assert zone.calls == {"10.0.0.7": 1, "gw.example.com": 1, "10.0.0.9": 1,
                              "nowhere.example.com": 1}
        assert dns.lookups == 4 and dns.cache_hits == 8
    finally:
        dns.close()


async def test_remembered_answers_expire(monkeypatch):
    monkeypatch.setattr(lookups, "POSITIVE_TTL", 0.0)
    monkeypatch.setattr(lookups, "NEGATIVE_TTL", 0.0)
    zone = Zone({"10.0.0.7": ["gw.example.com"]})
    dns = zone.lookups()
    try:
        await dns.names("10.0.0.7")
        await dns.names("10.0.0.7")
        with pytest.raises(OSError):
            await dns.names("10.0.0.9")
        with pytest.raises(OSError):
            await dns.names("10.0.0.9")
        assert zone.calls == {"10.0.0.7": 2, "10.0.0.9": 2}
    finally:
        dns.close()


async def test_one_question_asked_once_however_many_wait_for_it():
    zone = Zone({"10.0.0.7": ["gw.example.com"]}, hang=True)
    dns = zone.lookups()
    try:
        waiting = [asyncio.ensure_future(dns.names("10.0.0.7")) for _ in range(10)]
        await until(lambda: zone.calls["10.0.0.7"] == 1, what="the lookup")
        assert dns.busy == 1
        zone.release.set()
        assert await asyncio.gather(*waiting) == [("gw.example.com",)] * 10
        assert zone.calls == {"10.0.0.7": 1}
    finally:
        dns.close()


async def test_beyond_the_bound_lookups_are_refused_and_a_hung_thread_keeps_its_place():
    """Two threads: a third question is refused at once (not queued); a wait
    that times out gives up, but its thread is still busy, so the bound
    still holds until the thread returns."""
    zone = Zone(hang=True)
    dns = zone.lookups(timeout=0.05)
    try:
        for address in ("10.0.0.1", "10.0.0.2"):
            with pytest.raises(OSError, match="no answer to the reverse lookup"):
                await dns.names(address)
        assert dns.busy == 2
        with pytest.raises(ResolverBusy, match="2 host-name lookups already under way"):
            await dns.names("10.0.0.3")
        with pytest.raises(ResolverBusy):
            await dns.addresses("edge.example.com")
        assert "10.0.0.3" not in zone.calls and dns.refused == 2
        zone.release.set()
        await until(lambda: dns.busy == 0, what="the threads back")
        with pytest.raises(OSError, match="Unknown host"):
            await dns.names("10.0.0.1")       # remembered meanwhile
        with pytest.raises(OSError, match="Unknown host"):
            await dns.names("10.0.0.3")       # asked now
        assert zone.calls == {"10.0.0.1": 1, "10.0.0.2": 1, "10.0.0.3": 1}
    finally:
        zone.release.set()
        dns.close()


async def test_a_busy_resolver_refuses_the_peer_saying_why():
    zone = Zone(hang=True)
    dns = zone.lookups(max_lookups=1)
    cfg = FederationConfig(router_domain="hub", listen=["ewaf://127.0.0.1:0"],
                           accept=[AcceptSpec("edge", hosts=["*.example.com"])]).validate()
    rule = accept_rule(cfg, "edge")
    try:
        first = asyncio.ensure_future(check_peer_names(rule, "edge", Peer("10.0.0.1"), dns))
        await until(lambda: dns.busy == 1, what="the first lookup")
        refusal = await check_peer_names(rule, "edge", Peer("10.0.0.2"), dns)
        assert "router domain 'edge' from 10.0.0.2" in refusal.log
        assert "1 host-name lookups already under way" in refusal.log
        assert "federation.accept #1, hosts (*.example.com)" in refusal.log
        assert "busy" in refusal.nack and "example.com" not in refusal.nack
        zone.release.set()
        assert "matches none of" in (await first).log
    finally:
        zone.release.set()
        dns.close()


async def test_names_the_resolver_cannot_take_are_failures_not_crashes():
    def forward(name):
        raise UnicodeError("label too long")
    dns = HostLookups(lambda: 5.0, forward=forward)
    try:
        with pytest.raises(OSError, match="label too long"):
            await dns.addresses("x" * 300 + ".example.com")
    finally:
        dns.close()
