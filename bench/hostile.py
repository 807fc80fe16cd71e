"""Hostile clients against ``elvind`` on loopback: what the door holds.

Run: .venv/bin/python bench/hostile.py [SCENARIO ...] [--baseline]
     ELVIND_ROOT=/work/main .venv/bin/python bench/hostile.py --baseline   (other code)

Each scenario starts a fresh ``elvind`` (its own process; ``ELVIND_ROOT``
chooses whose code) with a bystander (``_registration.Bystander``: a
publisher and a subscriber of its own on 127.0.0.1, measuring publish ->
deliver round trips), runs one attack from 127.0.0.1 and, with the attack
in place, has a *newcomer* from 127.0.0.2 (another loopback address) connect.
Printed per scenario: the router's RSS growth (peak during the attack over
before it), descriptors in use at the peak, the bystander's worst round
trip, whether the newcomer connected, the refusals the router counted
(``/metrics``), its log's growth, and what the attack achieved.

Scenarios (issue #43, and #42's SecRqst):

* ``pre-big``: 100 sockets each announce a 2 MiB ConnRqst and send 1 MiB of it.
* ``pre-idle``: 1,100 sockets that never send a byte.
* ``partial``: 30 sessions negotiate ``Packet.Max-Length`` 10 MiB and send
  9.6 MB of a 10 MiB NotifyEmit, then nothing.
* ``slow``: 20 sessions trickle a 1 MiB frame at 4 KiB/s (the router runs with
  ``frame-timeout = 2`` and ``frame-min-rate = 1048576``: 3 s allowed).
* ``fds``: the router starts under a soft open-files limit of 1,024 (hard 4,096):
  1,100 sessions from one address.
* ``fds-tight``: soft = hard = 1,024 and no per-address limits: 1,100 sessions;
  printed besides, whether the router still rewrote its status file.
* ``keys-big``: 100 SecRqst each adding a 1 MiB subscription key.
* ``keys-many``: 150 SecRqst each adding 1,024 16-byte keys (153,600 keys).
* ``secrqst``: a session with 65,536 subscriptions sends 10 SecRqst (adding,
  then removing, a subscription key): each one's time; ``secrqst-quench``: the
  same while another session quenches a name none of them refers to.
* ``fed-refused``: 1,000 FedConnRqst for a domain the router does not accept.
* ``pre-timeouts``: 480 idle sockets from 8 addresses, ``connect-timeout`` 1 s.

``--baseline``: the router under test predates the limits: no configuration
keys it would not know are passed (the scenarios that need some run with
the defaults it has).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port, open_peer, stop_processes, wait_listening
from _registration import Bystander, request_block

from elvin.keys import Keys
from elvin.protocol import ConnRqst, PacketId, SecRqst, frame

ROOT = Path(os.environ.get("ELVIND_ROOT") or Path(__file__).resolve().parent.parent)
NEWCOMER = "127.0.0.2"


class Router:
    """One ``elvind`` with a config file, a status file, a log and /metrics."""

    def __init__(self, config: dict, nofile: tuple[int, int] | None = None,
                 federation: bool = False) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="hostile-")
        base = Path(self.dir.name)
        self.port = free_port()
        self.metrics = free_port()
        self.log = base / "elvind.log"
        self.status = base / "status.json"
        lines = [f"{key} = {value!r}".replace("'", '"') for key, value in config.items()]
        (base / "elvind.toml").write_text("\n".join(lines) + "\n")
        args = [sys.executable, "-m", "elvin.router", "--config", str(base / "elvind.toml"),
                "--listen", f"elvin://127.0.0.1:{self.port}", "--log-level", "info",
                "--log-file", str(self.log), "--status-file", str(self.status),
                "--metrics", f"127.0.0.1:{self.metrics}", "--no-discovery"]
        self.fed_port = 0
        if federation:
            self.fed_port = free_port()
            args += ["--federation-listen", f"ewaf://127.0.0.1:{self.fed_port}",
                     "--federation-domain", "bench"]

        def limits() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, nofile)

        self.proc = subprocess.Popen(args, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=limits)
        wait_listening(self.proc, self.port, time.monotonic() + 30)

    def rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def fds(self) -> int:
        try:
            return len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        except OSError:
            return -1

    def refusals(self) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics",
                                        timeout=5) as reply:
                text = reply.read().decode()
        except OSError as exc:
            return f"(no /metrics: {exc})"
        found = []
        for line in text.splitlines():
            if line.startswith("elvind_refused_total{"):
                kind = line.split('kind="', 1)[1].split('"', 1)[0]
                found.append(f"{kind} {float(line.rsplit(' ', 1)[1]):.0f}")
        return ", ".join(found) or "none"

    def log_size(self) -> int:
        try:
            return self.log.stat().st_size
        except OSError:
            return 0

    def stop(self) -> None:
        stop_processes([self.proc])
        self.dir.cleanup()


class Sampler:
    """Peak RSS and descriptors of the router while an attack runs."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.rss = self.rss0 = router.rss()
        self.fds = router.fds()
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            self.rss = max(self.rss, self.router.rss())
            self.fds = max(self.fds, self.router.fds())
            await asyncio.sleep(0.1)

    def __enter__(self) -> Sampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc) -> None:
        if self._task is not None:
            self._task.cancel()


class Held(asyncio.Protocol):
    """A socket the attacker holds; notes when the router closes it."""

    def __init__(self) -> None:
        self.transport = None
        self.closed_at: float | None = None
        self.data = bytearray()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data

    def connection_lost(self, exc) -> None:
        self.closed_at = time.monotonic()


async def _open(port: int, count: int, source: str = "127.0.0.1",
                first: bytes = b"") -> list[Held]:
    loop = asyncio.get_running_loop()
    held = []
    for _ in range(count):
        try:
            _, proto = await loop.create_connection(Held, "127.0.0.1", port,
                                                    local_addr=(source, 0))
        except OSError:
            continue
        if first:
            proto.transport.write(first)
        held.append(proto)
    return held


async def _newcomer(port: int) -> str:
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    try:
        _, proto = await asyncio.wait_for(loop.create_connection(
            Held, "127.0.0.1", port, local_addr=(NEWCOMER, 0)), 5)
        proto.transport.write(frame(ConnRqst(1, 4, 0, {})))
        for _ in range(500):
            if len(proto.data) >= 8 or proto.closed_at is not None:
                break
            await asyncio.sleep(0.01)
        proto.transport.close()
    except (TimeoutError, OSError) as exc:
        return f"no ({exc.__class__.__name__})"
    if len(proto.data) >= 8 and proto.data[7] == PacketId.CONN_RPLY:
        return f"yes, {(time.perf_counter() - start) * 1e3:.0f} ms"
    return "no (closed)" if proto.closed_at else "no (no reply)"


def _closed(held: list[Held]) -> str:
    closed = sum(1 for h in held if h.closed_at is not None)
    return f"{closed} of {len(held)} closed by the router"


def _header(length: int, ptype: int) -> bytes:
    return struct.pack(">Ii", length, ptype)


async def _sessions(port: int, count: int, options: dict | None = None) -> list[Held]:
    held = await _open(port, count, first=frame(ConnRqst(1, 4, 0, options or {})))
    await asyncio.sleep(0.5)
    return held


# -- the attacks -------------------------------------------------------------------------

async def pre_big(r: Router) -> str:
    body = _header(2 * 1024 * 1024, PacketId.CONN_RQST) + bytes(1024 * 1024)
    held = await _open(r.port, 100, first=body)
    await asyncio.sleep(3)
    return _closed(held)


async def pre_idle(r: Router) -> str:
    held = await _open(r.port, 1100)
    await asyncio.sleep(2)
    return f"{len(held)} opened; " + _closed(held)


async def partial(r: Router) -> str:
    held = await _sessions(r.port, 30, {"Packet.Max-Length": 10 * 1024 * 1024})
    chunk = _header(10 * 1024 * 1024, PacketId.NOTIFY_EMIT) + bytes(9_600_000)
    for h in held:
        if h.closed_at is None:
            h.transport.write(chunk)
            await asyncio.sleep(0.05)
    await asyncio.sleep(3)
    return _closed(held)


async def slow(r: Router) -> str:
    held = await _sessions(r.port, 20)
    for h in held:
        h.transport.write(_header(1024 * 1024, PacketId.NOTIFY_EMIT))
    start = time.monotonic()
    while time.monotonic() - start < 6:
        for h in held:
            if h.closed_at is None:
                h.transport.write(bytes(410))
        await asyncio.sleep(0.1)
    when = sorted(h.closed_at - start for h in held if h.closed_at is not None)
    return _closed(held) + (f" (after {when[0]:.1f}-{when[-1]:.1f} s)" if when else "")


async def fds(r: Router) -> str:
    held = await _sessions(r.port, 1100)
    connected = sum(1 for h in held if len(h.data) >= 8 and h.data[7] == PacketId.CONN_RPLY)
    return f"{connected} of {len(held)} got ConnRply; " + _closed(held)


async def fds_tight(r: Router) -> str:
    before = r.status.stat().st_mtime if r.status.exists() else 0.0
    said = await fds(r)
    await asyncio.sleep(6)          # the status file is rewritten every 5 s
    after = r.status.stat().st_mtime if r.status.exists() else 0.0
    errors = [line for line in r.log.read_text(errors="replace").splitlines()
              if "Too many open files" in line]
    return (f"{said}; status file rewritten meanwhile: {'yes' if after > before else 'NO'}; "
            f"'Too many open files' in the log: {len(errors)}")


async def _sec_requests(port: int, requests: list[SecRqst]) -> str:
    peer = await open_peer(port)
    counts: dict[str, int] = {}
    start = time.perf_counter()
    for packet in requests:
        peer.transport.write(frame(packet))
    for _ in requests:
        reply = await asyncio.wait_for(peer.replies.get(), 300)
        counts[type(reply).__name__] = counts.get(type(reply).__name__, 0) + 1
    elapsed = time.perf_counter() - start
    sample = ""
    peer.transport.close()
    return (f"{', '.join(f'{n} {k}' for k, n in sorted(counts.items()))} in {elapsed:.1f} s"
            f"{sample}")


async def keys_big(r: Router) -> str:
    return await _sec_requests(r.port, [
        SecRqst(10 + i, add_sub_keys=Keys.consumer_subscription(os.urandom(1 << 20)))
        for i in range(100)])


async def keys_many(r: Router) -> str:
    return await _sec_requests(r.port, [
        SecRqst(10 + i, add_sub_keys=Keys.consumer_subscription(
            *(os.urandom(16) for _ in range(1024)))) for i in range(150)])


async def secrqst_prepare(r: Router):
    n = 65_536
    texts = [f'Group == "g{i}" && require(Message)' for i in range(n)]
    keyed = await open_peer(r.port, {"Subscription.Max-Count": n})
    await register_peer(keyed, texts)
    return keyed


async def secrqst_quench_prepare(r: Router):
    """As ``secrqst``, with a quench on a name no subscription refers to."""
    from elvin.protocol import QnchAddRqst

    quencher = await open_peer(r.port)
    await quencher.request(QnchAddRqst(2, ("Unrelated",)))
    keyed = await secrqst_prepare(r)
    keyed.quencher = quencher
    return keyed


async def secrqst(r: Router, keyed) -> str:
    times = []
    key = Keys.consumer_subscription(b"a key of the session")
    for i in range(10):
        packet = SecRqst(1000 + i, add_sub_keys=key) if i % 2 == 0 else \
            SecRqst(1000 + i, del_sub_keys=key)
        start = time.perf_counter()
        reply = await keyed.request(packet, 300)
        times.append(time.perf_counter() - start)
        assert type(reply).__name__ == "SecRply", reply
        await asyncio.sleep(0.1)
    keyed.transport.close()
    return (f"10 SecRqst with 65,536 subscriptions: {min(times) * 1e3:.1f}-"
            f"{max(times) * 1e3:.1f} ms each")


async def register_peer(peer, texts: list[str]) -> None:
    """Subscribe ``texts`` on a ``Peer`` (replies counted off its queue)."""
    peer.transport.write(request_block(texts))
    for _ in texts:
        await asyncio.wait_for(peer.replies.get(), 600)


async def fed_refused(r: Router) -> str:
    from elvin.federation.packets import FedConnRqst, frame_fed_packet

    loop = asyncio.get_running_loop()
    data = frame_fed_packet(FedConnRqst(1, 1, 0, "stranger"))
    refused = 0
    for _ in range(20):
        batch = []
        for _ in range(50):
            try:
                _, proto = await loop.create_connection(Held, "127.0.0.1", r.fed_port)
            except OSError:
                continue
            proto.transport.write(data)
            batch.append(proto)
        for _ in range(300):
            if all(h.closed_at is not None for h in batch):
                break
            await asyncio.sleep(0.01)
        refused += sum(1 for h in batch if h.closed_at is not None)
        for h in batch:
            h.transport.close()
    return f"{refused} of 1000 FedConnRqst refused"


async def pre_timeouts(r: Router) -> str:
    held = []
    for n in range(2, 10):
        held += await _open(r.port, 60, source=f"127.0.0.{n}")
    await asyncio.sleep(3)
    return _closed(held)


#: name -> (attack, config it needs (when not --baseline), nofile, federation)
SCENARIOS = {
    "pre-big": (pre_big, {}, None, False),
    "pre-idle": (pre_idle, {}, None, False),
    "partial": (partial, {}, None, False),
    "slow": (slow, {"frame-timeout": 2, "frame-min-rate": 1 << 20}, None, False),
    "fds": (fds, {}, (1024, 4096), False),
    "fds-tight": (fds_tight, {"max-connections-per-address": 0,
                              "max-pre-session-per-address": 0}, (1024, 1024), False),
    "keys-big": (keys_big, {}, None, False),
    "keys-many": (keys_many, {}, None, False),
    "secrqst": (secrqst, {}, None, False),
    "secrqst-quench": (secrqst, {}, None, False),
    "fed-refused": (fed_refused, {}, None, True),
    "pre-timeouts": (pre_timeouts, {"connect-timeout": 1}, None, False),
}
#: keys every router knows (the rest only with the limits)
_OLD_KEYS = {"connect-timeout"}


#: what a scenario sets up before the bystander starts measuring
PREPARE = {"secrqst": secrqst_prepare, "secrqst-quench": secrqst_quench_prepare}


async def _scenario(name: str, r: Router) -> tuple[str, Sampler, str, dict]:
    attack = SCENARIOS[name][0]
    prepared = await PREPARE[name](r) if name in PREPARE else None
    rss0 = r.rss()
    with Bystander(r.port) as bystander, Sampler(r) as sampler:
        sampler.rss = rss0
        task = asyncio.ensure_future(attack(r) if prepared is None else attack(r, prepared))
        await asyncio.sleep(0 if name in ("keys-big", "keys-many") or name in PREPARE else 1.0)
        newcomer = await _newcomer(r.port) if name not in PREPARE else "-"
        what = await task
    return what, sampler, newcomer, bystander.result


def run(name: str, baseline: bool) -> None:
    _, config, nofile, federation = SCENARIOS[name]
    if baseline:
        config = {k: v for k, v in config.items() if k in _OLD_KEYS}
    r = Router(config, nofile, federation)
    try:
        rss0, log0 = r.rss(), r.log_size()
        what, sampler, newcomer, b = asyncio.run(_scenario(name, r))
        if name in PREPARE:
            rss0 = sampler.rss0
        refusals = r.refusals()
        grew = (sampler.rss - rss0) / 1e6
        logged = r.log_size() - log0
    finally:
        r.stop()
    print(f"{name:<12} RSS +{grew:7.1f} MB  fds {sampler.fds:5d}  bystander worst "
          f"{b.get('worst', float('nan')) * 1e3:7.1f} ms  newcomer {newcomer:<14}  "
          f"log +{logged / 1e3:6.1f} KB  refused: {refusals}; {what}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                        help=f"of {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--baseline", action="store_true",
                        help="the router predates the limits: pass no new keys")
    args = parser.parse_args()
    unknown = [name for name in args.scenarios if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}: one of {', '.join(SCENARIOS)}")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))   # the attacker's sockets
    print(f"== hostile clients against elvind from {ROOT} (load "
          f"{os.getloadavg()[0]:.2f}){' [baseline]' if args.baseline else ''}", flush=True)
    for name in args.scenarios or list(SCENARIOS):
        run(name, args.baseline)


if __name__ == "__main__":
    main()
