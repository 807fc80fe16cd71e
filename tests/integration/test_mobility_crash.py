"""A router killed with SIGKILL and started again with the same arguments
(``elvind --mobility --state-dir DIR``) at the points a move can be at,
counting what the client gets: everything the router had read (a producer's
round trip proves it), none twice.

Some kill points are exact instants a test cannot hit from outside; there
the router kills itself at a named point (``ELVIN_CRASH_AT``, see
``elvin.daemon.crashpoints``): a real SIGKILL all the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from elvin.client import connect
from elvin.mobility import MobileConnection, MobilityError
from elvin.mobility.store import FILE_NAME
from tests.waiting import until

from .process_util import ELVIND, free_port, stop, wait_listening


class Elvind:
    """One ``elvind`` with a state directory, killed and restarted at will
    on the same port with the same arguments."""

    def __init__(self, tmp: Path, name: str = "A", extra: list[str] | None = None,
                 config: str | None = None) -> None:
        self.port = free_port()
        self.url = f"elvin://127.0.0.1:{self.port}"
        self.state = tmp / f"state-{name}"
        self.log = tmp / f"elvind-{name}.log"
        self.args = [*ELVIND, "--listen", self.url, "--mobility", "--state-dir",
                     str(self.state), "--log-level", "info", *(extra or [])]
        if config is not None:
            path = tmp / f"{name}.toml"
            path.write_text(config)
            self.args += ["--config", str(path)]
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def start(self, crash_at: str | None = None) -> Elvind:
        env = dict(os.environ)
        env.pop("ELVIN_CRASH_AT", None)
        if crash_at:
            env["ELVIN_CRASH_AT"] = crash_at
        self.runs += 1
        with open(self.log, "a") as log:
            log.write(f"--- run {self.runs} {crash_at or ''}\n")
            self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=log,
                                         env=env)
        wait_listening(self.port, self.proc)
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def wait_killed(self, timeout: float = 20) -> None:
        """It killed itself (a crash point)."""
        assert self.proc is not None
        assert self.proc.wait(timeout) == -signal.SIGKILL

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop(self.proc)

    def logged(self) -> str:
        return self.log.read_text()


@pytest.fixture
def elvind(tmp_path):
    made: list[Elvind] = []

    def make(name: str = "A", **kwargs) -> Elvind:
        router = Elvind(tmp_path, name, **kwargs)
        made.append(router)
        return router

    yield make
    for router in made:
        router.stop()


async def publish(url: str, seqs, *, each: bool = False, body: str | None = None) -> None:
    """Publish, then a round trip: once it returns, the router has read them.
    ``each``: a round trip after every one (inside elvind, one buffered row
    each); ``body``: a ``Body`` attribute to make them bigger."""
    pub = await connect(url)
    try:
        for seq in seqs:
            await pub.send({"Producer": "p", "Seq": seq} if body is None else
                           {"Producer": "p", "Seq": seq, "Body": body})
            if each:
                await pub.set_keys()
        await pub.set_keys()
    finally:
        await pub.close()


class Counted:
    def __init__(self, mc: MobileConnection) -> None:
        self.seen: Counter[int] = Counter()
        self.probes = 0
        mc.add_listener(self)

    def __call__(self, n) -> None:
        if n.get("Producer") == "p":
            self.seen.update([n["Seq"]])
        else:
            self.probes += 1

    def exactly(self, seqs) -> None:
        expected = set(seqs)
        twice = sorted(s for s, n in self.seen.items() if n > 1)
        assert not twice, f"delivered twice: {twice[:20]}"
        missing = sorted(expected - set(self.seen))
        assert not missing, f"lost: {missing[:20]} ({len(missing)} of {len(expected)})"
        extra = sorted(set(self.seen) - expected)
        assert not extra, f"not expected: {extra[:20]}"


async def restart_and_collect(a: Elvind, mc: MobileConnection, got: Counted, new: range,
                              caught_up: int, everything: range) -> None:
    """After the crash: start it again, publish ``new``, move in, count."""
    a.wait_killed()
    a.start()
    await publish(a.url, new)
    report = await mc.move_in(a.url)
    assert report.caught_up == caught_up
    got.exactly(everything)


async def mobile(url: str) -> tuple[MobileConnection, Counted]:
    mc = await MobileConnection.open(url, timeout=5, download_timeout=10)
    got = Counted(mc)
    # two subscriptions matching the same notifications: one delivery each
    await mc.subscribe('Producer == "p"')
    await mc.subscribe("require(Seq)")
    return mc, got


async def test_killed_while_buffering_loses_nothing(elvind):
    a = elvind().start()
    mc, got = await mobile(a.url)
    try:
        await publish(a.url, range(10))
        await until(lambda: len(got.seen) == 10)
        await mc.move_out()
        seq = 10
        for _ in range(3):              # killed right after each round trip
            await publish(a.url, range(seq, seq + 30))
            seq += 30
            a.kill()
            a.start()
        report = await mc.move_in(a.url)
        assert report.abbreviated and report.caught_up == 90 and report.dropped == 0
        await publish(a.url, range(100, 105))          # live again
        await until(lambda: 104 in got.seen)
        got.exactly([*range(100), *range(100, 105)])
        assert "1 moved-out clients restored, 60 buffered" in a.logged()
    finally:
        await mc.close()


async def test_killed_before_the_move_out_is_acknowledged(elvind):
    """On disk, reply not sent: the client only knows the connection went;
    it is moved out with an unconfirmed ticket whose secret it chose, and
    the restarted proxy buffered for it all along."""
    a = elvind().start(crash_at="mobility-move-out-committed")
    mc, got = await mobile(a.url)
    try:
        await publish(a.url, range(10))
        await until(lambda: len(got.seen) == 10)
        with pytest.raises(MobilityError) as caught:
            await mc.move_out()
        assert caught.value.code == "unconfirmed"
        assert mc.state == "moved-out" and not mc.ticket.confirmed
        await restart_and_collect(a, mc, got, range(10, 110), 100, range(110))
    finally:
        await mc.close()


async def test_killed_before_the_move_out_is_written(elvind):
    """Nothing on disk: the move-in says the proxy has no buffer (what was
    published meanwhile is lost, and the client is told), and the client is
    attached again with its subscriptions."""
    a = elvind().start(crash_at="mobility-move-out-received")
    mc, got = await mobile(a.url)
    try:
        with pytest.raises(MobilityError) as caught:
            await mc.move_out()
        assert caught.value.code == "unconfirmed"
        a.wait_killed()
        a.start()
        await publish(a.url, range(0, 20))
        with pytest.raises(MobilityError) as caught:
            await mc.move_in(a.url)
        assert caught.value.code == "unknown-client"
        assert mc.state == "connected"
        await publish(a.url, range(20, 30))
        await until(lambda: 29 in got.seen)
        got.exactly(range(20, 30))
    finally:
        await mc.close()


async def test_killed_during_the_move_in_download(elvind):
    """The proxy had handed the buffer over when the router died: the client
    delivers none of it (nor what came live meanwhile), is moved out again,
    and the next move-in brings everything, once."""
    a = elvind().start(crash_at="mobility-move-in-handed")
    mc, got = await mobile(a.url)
    try:
        await mc.move_out()
        await publish(a.url, range(100))
        with pytest.raises(MobilityError) as caught:
            await mc.move_in(a.url)
        assert caught.value.code == "unreachable" and mc.state == "moved-out"
        assert not got.seen
        await restart_and_collect(a, mc, got, range(100, 120), 120, range(120))
    finally:
        await mc.close()


async def test_killed_while_a_large_buffer_is_moved_in(elvind):
    """From outside, as the first batch of the reply reaches the client: the
    rest may be on its way or lost with the router. Either the move-in fails
    and is done again, or it completed: each notification comes once."""
    from elvin.mobility import exchange as exchange_module

    a = elvind().start()
    mc, got = await mobile(a.url)
    original = exchange_module._Collector.__call__

    def first_batch_kills(collector, notification):
        if collector.kind == "move-in" and a.proc.poll() is None:
            a.kill()
        return original(collector, notification)

    try:
        await mc.move_out()
        await publish(a.url, range(5000))
        exchange_module._Collector.__call__ = first_batch_kills
        try:
            await mc.move_in(a.url)
        except MobilityError as exc:
            assert exc.code == "unreachable"
            assert mc.state == "moved-out" and not got.seen
            exchange_module._Collector.__call__ = original
            a.start()
            report = await mc.move_in(a.url)
            assert report.caught_up == 5000
        finally:
            exchange_module._Collector.__call__ = original
        assert a.proc.poll() is not None or a.runs == 2
        got.exactly(range(5000))
    finally:
        await mc.close()


def federation_config(name: str, fed_port: int, peer: tuple[str, int] | None,
                      accept: str = "B") -> str:
    lines = ["[federation]", f'router_domain = "{name}"',
             f'listen = "ewaf://127.0.0.1:{fed_port}"', "debounce = 0.01",
             "reconnect_min = 0.05", "reconnect_max = 0.5"]
    if peer is None:
        lines += ["[[federation.accept]]", f'router = "{accept}"']
    else:
        lines += ["[[federation.connect]]", f'router = "{peer[0]}"',
                  f'url = "ewaf://127.0.0.1:{peer[1]}"']
    return "\n".join(lines) + "\n"


def federated_pair(elvind) -> tuple:
    """Routers A and B, B connecting to A, both not yet started (so that
    each test starts them with its own crash point)."""
    fed_a, fed_b = free_port(), free_port()
    return (elvind("A", config=federation_config("A", fed_a, None)),
            elvind("B", config=federation_config("B", fed_b, ("A", fed_a))))


async def test_move_in_at_another_federated_router_after_a_restart(elvind):
    a, b = federated_pair(elvind)
    a.start()
    b.start()
    mc, got = await mobile(a.url)
    try:
        await mc.move_out()
        await publish(a.url, range(100))
        a.kill()
        a.start()
        report = await mc.move_in(b.url)
        assert not report.abbreviated and report.caught_up == 100
        # and the federation routes live notifications from A to the client at B
        pub = await connect(a.url)
        try:
            for probe in range(200):     # until the link is back and knows B wants them
                await pub.send({"Producer": "probe", "Seq": probe})
                try:
                    await until(lambda: got.probes > 0, timeout=0.1)
                    break
                except AssertionError:
                    continue
            await pub.send({"Producer": "p", "Seq": 100})
            await until(lambda: 100 in got.seen)
        finally:
            await pub.close()
        got.exactly(range(101))
    finally:
        await mc.close()


def test_state_file_is_private(elvind, tmp_path):
    a = elvind().start()
    a.stop()
    assert (a.state.stat().st_mode & 0o777) == 0o700
    assert ((a.state / FILE_NAME).stat().st_mode & 0o777) == 0o600
