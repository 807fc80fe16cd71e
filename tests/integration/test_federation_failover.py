"""Around a dead router, and back (issue 27), with a real SIGKILL.

A ring of four: r0, r2 and r3 run in this process (so their counters and
graphs can be read), r1 is an ``elvind`` process on the path r0 -> r1 -> r2
(the trees break the tie between r1 and r3 by name). r1 is killed with
SIGKILL; once the survivors agree on the topology without it, everything
published reaches every survivor exactly once. r1 is then started again
while r0 publishes a stream: every notification published from before the
restart until after the rejoin reaches every survivor exactly once, and
once the routers agree again r0's notifications take the path through r1
again, exactly once and in order. Across the switch back, one sent on the
new tree may overtake ones still on the old tree (docs/admins/federation.md,
"Order": nothing is held back to reorder them), so the stream's order is
not asserted; order among those routed by one topology is, for the batches
published while it holds (and by the simulation, per stamp, in
tests/unit/test_federation_agreement.py). Counts, not timings
(bench/federation.py times the failover).
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

from .federation_util import FAST, agreed_topology, fed_stats, link_stats, stop_all
from .process_util import ELVIND, free_port, stop, wait_listening
from .rawclient import RawClient
from .test_federation_topologies import Subscriber, subscribed_behind

RING = {("r0", "r1"), ("r1", "r2"), ("r2", "r3"), ("r0", "r3")}


class Ring:
    """r1 dials r0, r2 dials r1, r3 dials r2 and r0; r1 is the process."""

    def __init__(self, tmp: Path) -> None:
        self.fed_ports = {f"r{i}": free_port() for i in range(4)}
        self.r1_port = free_port()
        self.config = tmp / "r1.toml"
        url = {name: f"ewaf://127.0.0.1:{port}" for name, port in self.fed_ports.items()}
        self.config.write_text("\n".join([
            f'listen = "elvin://127.0.0.1:{self.r1_port}"', "[federation]",
            'router_domain = "r1"', f'listen = "{url["r1"]}"', "debounce = 0.01",
            "reconnect_min = 0.05", "reconnect_max = 0.2",
            "[[federation.connect]]", 'router = "r0"', f'url = "{url["r0"]}"',
            "[[federation.accept]]", 'router = "r2"']) + "\n")
        settings = {**FAST, "reconnect_max": 0.2}

        def embedded(name: str, connect: list[str], accept: list[str]) -> EmbeddedRouter:
            fed = FederationConfig(router_domain=name, listen=[url[name]],
                                   connect=[ConnectSpec(url[c], router=c) for c in connect],
                                   accept=[AcceptSpec(a) for a in accept], **settings)
            return EmbeddedRouter(config=RouterConfig(federation=fed, discovery=False)).start()

        self.routers: list[EmbeddedRouter] = []
        self.r1: subprocess.Popen | None = None
        try:
            self.routers.append(embedded("r0", [], ["r1", "r3"]))
            self.start_r1()
            self.routers.append(embedded("r2", ["r1"], ["r3"]))
            self.routers.append(embedded("r3", ["r2", "r0"], []))
        except BaseException:
            self.close()
            raise
        self.r0, self.r2, self.r3 = self.routers

    def start_r1(self) -> None:
        self.r1 = subprocess.Popen([*ELVIND, "--config", str(self.config)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_listening(self.r1_port, self.r1)

    def kill_r1(self) -> None:
        assert self.r1 is not None
        self.r1.send_signal(signal.SIGKILL)
        self.r1.communicate()
        self.r1 = None

    def close(self) -> None:
        if self.r1 is not None:
            stop(self.r1)
            self.r1.communicate()
        stop_all(self.routers)


def edges(router) -> set[tuple[str, str]]:
    topology = agreed_topology(router)
    return set(topology[1]) if topology else set()


async def agreed(ring: Ring, links: set[tuple[str, str]]) -> None:
    def check() -> bool:
        seen = [agreed_topology(r) for r in ring.routers]
        return all(s is not None and s[0] == seen[0][0] and set(s[1]) == links  # type: ignore[index]
                   for s in seen)
    await until(check, what=f"r0, r2 and r3 agreeing on the links {sorted(links)}")


def fed_counts(routers) -> tuple[int, int]:
    stats = [fed_stats(r) for r in routers]
    return (sum(s["fed_notify_sent"] for s in stats),
            sum(s["fed_notify_received"] for s in stats))


async def settled(routers, start: tuple[int, int]) -> None:
    """Every FedNotify sent among ``routers`` since ``start`` has arrived."""
    def done() -> bool:
        sent, received = fed_counts(routers)
        return sent - start[0] == received - start[1]
    await until(done, what="nothing in flight")


def assert_once(subscribers, origin: str, seqs) -> None:
    for name, s in subscribers.items():
        got = {seq: s.counts[(origin, seq)] for seq in seqs}
        assert all(c == 1 for c in got.values()), \
            f"at {name}: {origin}'s not exactly once: {({k: c for k, c in got.items() if c != 1})}"


def assert_once_in_order(subscribers, origin: str, seqs) -> None:
    assert_once(subscribers, origin, seqs)
    for name, s in subscribers.items():
        order = [seq for seq in s.order[origin] if seq in seqs]
        assert order == sorted(order), f"at {name}: {origin}'s out of order"


async def test_a_killed_router_is_routed_around_and_rejoins(tmp_path):
    ring = Ring(tmp_path)
    subscribers: dict[str, Subscriber] = {}
    try:
        await agreed(ring, RING)
        for name, router in (("r0", ring.r0), ("r2", ring.r2), ("r3", ring.r3)):
            subscribers[name] = await Subscriber.at(router.port, name)
        neighbours = {"r0": {"r1", "r3"}, "r1": {"r0", "r2"}, "r2": {"r1", "r3"},
                      "r3": {"r0", "r2"}}
        await until(lambda: subscribed_behind(
            {"r0": ring.r0, "r2": ring.r2, "r3": ring.r3}, neighbours, subscribers),
            what="the subscriptions in every pull filter")
        producers = {name: await RawClient.connected(r.port) for name, r in
                     (("r0", ring.r0), ("r2", ring.r2), ("r3", ring.r3))}

        # the tree of r0's notifications goes through r1 to r2
        via_r1 = link_stats(ring.r0, "r1")["fed_notify_sent"]  # type: ignore[index]
        for seq in range(5):
            producers["r0"].notify({"Origin": "r0", "Seq": seq})
        await until(lambda: all(("r0", 4) in s.counts for s in subscribers.values()),
                    what="the first batch")
        assert link_stats(ring.r0, "r1")["fed_notify_sent"] == via_r1 + 5  # type: ignore[index]

        ring.kill_r1()
        await agreed(ring, {("r0", "r3"), ("r2", "r3")})
        start = fed_counts(ring.routers)
        for name, producer in producers.items():
            for seq in range(100, 115):
                producer.notify({"Origin": name, "Seq": seq})
        await until(lambda: all((o, 114) in s.counts for s in subscribers.values()
                                for o in producers), what="the batch after the kill")
        await settled(ring.routers, start)
        for s in subscribers.values():
            await s.round_trip()
        for origin in producers:
            assert_once_in_order(subscribers, origin, range(100, 115))

        # r1 comes back while r0 publishes a stream
        stream_from = 1000
        seq = stream_from
        stop_stream = asyncio.Event()

        async def stream() -> None:
            nonlocal seq
            while not stop_stream.is_set():
                producers["r0"].notify({"Origin": "r0", "Seq": seq})
                seq += 1
                await asyncio.sleep(0.002)

        task = asyncio.create_task(stream())
        await asyncio.get_running_loop().run_in_executor(None, ring.start_r1)
        await agreed(ring, RING)
        before = link_stats(ring.r0, "r1")["fed_notify_sent"]  # type: ignore[index]
        await until(lambda: link_stats(ring.r0, "r1")["fed_notify_sent"] > before,  # type: ignore[index]
                    what="r0's notifications taking the path through r1 again")
        stop_stream.set()
        await task
        last = seq - 1
        await until(lambda: all(("r0", last) in s.counts for s in subscribers.values()),
                    what="the end of the stream")
        await until(lambda: ring.r1 is not None and
                    link_stats(ring.r2, "r1") is not None, what="r2 linked with r1")
        for s in subscribers.values():
            await s.round_trip()
        assert_once(subscribers, "r0", range(stream_from, last + 1))

        # the ring holds again: every producer's batch exactly once, in order
        for name, producer in producers.items():
            for seq in range(5000, 5020):
                producer.notify({"Origin": name, "Seq": seq})
        await until(lambda: all((o, 5019) in s.counts for s in subscribers.values()
                                for o in producers), what="the batch after the rejoin")
        for s in subscribers.values():
            await s.round_trip()
        for origin in producers:
            assert_once_in_order(subscribers, origin, range(5000, 5020))
        for producer in producers.values():
            await producer.close()
    finally:
        for s in subscribers.values():
            await s.close()
        ring.close()
