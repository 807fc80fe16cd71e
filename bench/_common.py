"""Pieces the router and federation benches share (not a bench itself).

Both start ``elvind`` in processes of their own, so that the router has a core
to itself, and drive it with raw-codec peers (asyncio protocols speaking
``elvin.protocol`` directly, not the client library), so that the figures are
the router's and not the client's. One copy of each piece keeps the two
benches measuring the same way.

Import it after putting the repository on ``sys.path`` (as the benches do):
``from _common import ...`` works because a bench's own folder is first on
the path when it runs as ``python bench/NAME.py``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from elvin.protocol import ConnRqst, FrameDecoder, PacketId, decode_packet, frame

ROOT = Path(__file__).resolve().parent.parent
DELIVER_ID = int(PacketId.NOTIFY_DELIVER)

__all__ = ["DELIVER_ID", "ROOT", "Peer", "free_port", "open_peer", "percentile", "process_cpu",
           "start_elvind", "stop_processes", "wait_listening"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_elvind(*args: str, stderr: int | None = subprocess.PIPE,
                 nice: int = 0) -> subprocess.Popen:
    """``elvind ARGS --log-level warning`` from the repository root. Its
    stderr is piped, so that a failure to start can say why, unless
    ``stderr=None`` (then it goes to the bench's own). ``nice`` lowers its
    priority (the console bench runs the router behind the GUI)."""
    log_file = os.environ.get("BENCH_LOG_FILE")     # keep elvind's log (BENCH_LOG's level)
    if log_file:
        stderr = open(log_file, "a")  # the child holds it
    # BENCH_PROFILE=FILE: the router runs under cProfile and writes its
    # profile to FILE when it stops (bench/profile_delivery.py reads it)
    profile = os.environ.get("BENCH_PROFILE")
    runner = ["-m", "cProfile", "-o", profile] if profile else []
    return subprocess.Popen([sys.executable, *runner, "-m", "elvin.router", *args,
                             "--log-level", os.environ.get("BENCH_LOG", "warning")],
                            cwd=ROOT, stderr=stderr, text=True,
                            preexec_fn=(lambda: os.nice(nice)) if nice else None)


def wait_listening(proc: subprocess.Popen, port: int, deadline: float) -> None:
    """Return once ``proc`` accepts connections on ``port``; exit the bench
    (with elvind's stderr) if it dies or ``deadline`` (monotonic) passes."""
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                why = proc.stderr.read() if proc.stderr else f"exit status {proc.returncode}"
                raise SystemExit(f"elvind failed: {why}") from None
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("elvind did not start") from None
            time.sleep(0.05)


def stop_processes(procs: list[subprocess.Popen], timeout: float = 10) -> None:
    """SIGTERM them all, then wait for each (killing one that hangs)."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


class Peer(asyncio.Protocol):
    """A raw-codec client: replies go to a queue, deliveries to ``on_deliver``
    (the undecoded body, so that a bench decodes only what it measures)."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder()
        self.replies: asyncio.Queue = asyncio.Queue()
        self.on_deliver: Callable[[bytes], None] | None = None
        self.transport = None
        self.can_write = asyncio.Event()
        self.can_write.set()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        for body in self.decoder.feed_frames(data):
            if body[3] == DELIVER_ID and self.on_deliver is not None:
                self.on_deliver(body)
            else:
                self.replies.put_nowait(decode_packet(body))

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    async def request(self, packet, timeout: float = 10):
        self.transport.write(frame(packet))
        return await asyncio.wait_for(self.replies.get(), timeout)


async def open_peer(port: int, options: dict | None = None) -> Peer:
    """A connected ``Peer`` (ConnRqst answered) to the router on ``port``."""
    loop = asyncio.get_running_loop()
    _, peer = await loop.create_connection(Peer, "127.0.0.1", port)
    await peer.request(ConnRqst(1, 4, 0, options or {}))
    return peer


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def percentile(values: list[float], p: float) -> float:
    """The ``p`` (0..1) quantile, nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]
