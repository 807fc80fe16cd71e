"""Agreeing on the topology under combined faults (issue 40), with real
``elvind`` processes: one restarted that publishes at once, one hung
(SIGSTOP) while another router goes. The other routers run in this process
so that their graphs can be read. Counts, not timings.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

from elvin.federation.config import AcceptSpec, ConnectSpec, FederationConfig
from elvin.router.config import RouterConfig
from elvin.router.embedded import EmbeddedRouter
from tests.waiting import until

from .federation_util import FAST, agreed_topology, stop_all
from .process_util import ELVIND, free_port, stop, wait_listening
from .rawclient import RawClient
from .test_federation_topologies import Subscriber

#: short, so that a test waits for it without minutes; the keepalive stays
#: long, so that a hung router is not detected by it during the test
AGREEMENT = 0.5


class Federation:
    """Routers ``r0``..``r{n-1}``; ``links`` are (dialler, dialled); router
    ``process`` is an ``elvind`` child process, the others embedded."""

    def __init__(self, tmp: Path, n: int, links: list[tuple[int, int]], process: int,
                 flood: frozenset[int] = frozenset()) -> None:
        self.n, self.links, self.process, self.flood = n, links, process, flood
        self.fed = [f"ewaf://127.0.0.1:{free_port()}" for _ in range(n)]
        self.client_port = free_port()
        self.config = tmp / f"r{process}.toml"
        lines = [f'listen = "elvin://127.0.0.1:{self.client_port}"', "[federation]",
                 f'router_domain = "r{process}"', f'listen = "{self.fed[process]}"',
                 "debounce = 0.01", "reconnect_min = 0.05", "reconnect_max = 0.2",
                 f"agreement_timeout = {AGREEMENT}"]
        for a, b in links:
            if a == process:
                lines += ["[[federation.connect]]", f'router = "r{b}"', f'url = "{self.fed[b]}"']
            elif b == process:
                lines += ["[[federation.accept]]", f'router = "r{a}"']
        self.config.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen | None = None
        self.routers: dict[int, EmbeddedRouter] = {}
        try:
            for i in range(n):
                if i == process:
                    self.start_process()
                else:
                    self.routers[i] = self.embedded(i)
        except BaseException:
            self.close()
            raise

    def embedded(self, i: int) -> EmbeddedRouter:
        fed = FederationConfig(
            router_domain=f"r{i}", listen=[self.fed[i]],
            connect=[ConnectSpec(self.fed[b], router=f"r{b}") for a, b in self.links if a == i],
            accept=[AcceptSpec(f"r{a}") for a, b in self.links if b == i],
            routing="flood" if i in self.flood else "trees",
            **{**FAST, "reconnect_max": 0.2, "agreement_timeout": AGREEMENT})
        return EmbeddedRouter(config=RouterConfig(federation=fed, discovery=False)).start()

    def start_process(self) -> None:
        self.proc = subprocess.Popen([*ELVIND, "--config", str(self.config)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        wait_listening(self.client_port, self.proc)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        if sig == signal.SIGKILL:
            self.proc.communicate()
            self.proc = None

    async def agreed(self, names: set[str], links: set[tuple[str, str]]) -> None:
        """The embedded routers in ``names`` route by one graph with exactly
        these routers' ``links``."""
        routers = [r for i, r in self.routers.items() if f"r{i}" in names]

        def check() -> bool:
            seen = [agreed_topology(r) for r in routers]
            return all(s is not None and s[0] == seen[0][0] and set(s[1]) == links  # type: ignore[index]
                       for s in seen)
        await until(check, what=f"{sorted(names)} agreeing on {sorted(links)}")

    def close(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            stop(self.proc)
            self.proc.communicate()
        stop_all(self.routers.values())


def named(links, without=()) -> set[tuple[str, str]]:
    return {tuple(sorted((f"r{a}", f"r{b}"))) for a, b in links  # type: ignore[misc]
            if a not in without and b not in without}


async def subscribers_at(fed: Federation) -> dict[str, Subscriber]:
    return {f"r{i}": await Subscriber.at(r.port) for i, r in fed.routers.items()}


async def test_a_restarted_router_that_publishes_at_once_is_never_heard_twice(tmp_path):
    """A full mesh of four; r1 (a process) is killed and restarted, and a
    producer publishes at it as soon as it accepts clients, while its first
    links come up: nobody gets anything twice, and once the routers agree
    again everyone gets what it publishes, once. Three restarts."""
    mesh = [(a, b) for a in range(4) for b in range(a)]     # the higher dials the lower
    fed = Federation(tmp_path, 4, mesh, process=1)
    subscribers: dict[str, Subscriber] = {}
    try:
        await fed.agreed({"r0", "r2", "r3"}, named(mesh))
        subscribers = await subscribers_at(fed)
        seq = 0
        for _ in range(3):
            fed.signal(signal.SIGKILL)
            await fed.agreed({"r0", "r2", "r3"}, named(mesh, without={1}))
            await asyncio.get_running_loop().run_in_executor(None, fed.start_process)
            producer = await RawClient.connected(fed.client_port)
            for _ in range(40):
                producer.notify({"Origin": "r1", "Seq": seq})
                seq += 1
                await asyncio.sleep(0.005)
            await fed.agreed({"r0", "r2", "r3"}, named(mesh))
            last = seq
            producer.notify({"Origin": "r1", "Seq": last})
            seq += 1
            await until(lambda last=last: all(("r1", last) in s.counts
                                              for s in subscribers.values()),
                        what="r1's notification after the rejoin everywhere")
            await producer.close()
        for s in subscribers.values():
            await s.round_trip()
        for name, s in subscribers.items():
            twice = {k: c for k, c in s.counts.items() if c > 1}
            assert not twice, f"at {name}: {twice}"
    finally:
        for s in subscribers.values():
            await s.close()
        fed.close()


async def test_a_hung_router_does_not_stop_the_others_routing_around_a_failure(tmp_path):
    """A ring r0 - r1 - r2 - r3 - r0, and r4 (a process) linked to r0. r4
    hangs (SIGSTOP: its connection stays open, the keepalive is a minute
    away), then r1 stops. r4 never announces holding the new graph; within
    the agreement bound the others take it for gone, agree without it and
    r1, and reach each other once, r0 and r2 now through r3."""
    links = [(1, 0), (2, 1), (3, 2), (3, 0), (4, 0)]
    fed = Federation(tmp_path, 5, links, process=4)
    subscribers: dict[str, Subscriber] = {}
    try:
        await fed.agreed({"r0", "r1", "r2", "r3"}, named(links))
        subscribers = await subscribers_at(fed)
        fed.signal(signal.SIGSTOP)
        await subscribers.pop("r1").close()
        fed.routers.pop(1).stop()
        await fed.agreed({"r0", "r2", "r3"}, named(links, without={1, 4}))
        producers = {f"r{i}": await RawClient.connected(fed.routers[i].port) for i in (0, 2, 3)}
        for origin, producer in producers.items():
            for seq in range(10):
                producer.notify({"Origin": origin, "Seq": seq})
        await until(lambda: all((o, 9) in s.counts for s in subscribers.values()
                                for o in producers), what="every notification everywhere")
        for s in subscribers.values():
            await s.round_trip()
        for name, s in subscribers.items():
            for origin in producers:
                got = [s.counts[(origin, seq)] for seq in range(10)]
                assert got == [1] * 10, f"at {name} from {origin}: {got}"
        for producer in producers.values():
            await producer.close()
    finally:
        for s in subscribers.values():
            await s.close()
        fed.close()


async def test_a_router_that_does_not_take_part_on_a_ring_loses_nothing_after_a_restart(
        tmp_path):
    """A ring r0 - r1 - r2 - r3 - r0 where r2 floods (routing = "flood") and
    its neighbour r1 (a process) is killed and restarted, three times, while
    r2 publishes: nothing arrives twice, also while the others switch
    graphs (r2's notifications carry no stamp: the routers that take part
    drop a copy that comes by another path, ``TopologyView.first_copy``),
    and what r2 publishes once the others agree again reaches every
    router."""
    ring = [(1, 0), (2, 1), (3, 2), (3, 0)]
    fed = Federation(tmp_path, 4, ring, process=1, flood=frozenset({2}))
    subscribers: dict[str, Subscriber] = {}
    try:
        await fed.agreed({"r0", "r3"}, named(ring))
        subscribers = await subscribers_at(fed)
        producer = await RawClient.connected(fed.routers[2].port)
        seq = 0
        bursts = []
        for _ in range(3):
            fed.signal(signal.SIGKILL)
            await fed.agreed({"r0", "r3"}, named(ring, without={1}))
            await asyncio.get_running_loop().run_in_executor(None, fed.start_process)
            for _ in range(20):                      # during the rejoin
                producer.notify({"Origin": "r2", "Seq": seq})
                seq += 1
                await asyncio.sleep(0.005)
            await fed.agreed({"r0", "r3"}, named(ring))
            burst = range(seq, seq + 50)
            for n in burst:
                producer.notify({"Origin": "r2", "Seq": n})
            seq += 50
            bursts.append(burst)
            await until(lambda end=seq - 1: all(("r2", end) in s.counts
                                                for s in subscribers.values()),
                        what="the burst everywhere")
        for s in subscribers.values():
            await s.round_trip()
        for name, s in subscribers.items():
            twice = sorted(n for (origin, n), c in s.counts.items() if c > 1)
            assert not twice, f"at {name}: twice {twice[:10]}"
            for burst in bursts:
                missing = [n for n in burst if s.counts[("r2", n)] != 1]
                assert not missing, f"at {name}: burst lost {missing[:10]}"
        await producer.close()
    finally:
        for s in subscribers.values():
            await s.close()
        fed.close()
