"""Client throughput: notifications per second from one client, through the
router, to another client; with the asyncio API and with the sync facade.

    .venv/bin/python bench/client.py [--count N] [--url URL] [--uvloop]

Without ``--url`` a router is started as a separate process (``python -m
elvin.router``), so it has its own core; both clients run in this process.
Figures printed:

* codec: raw ``frame_packet(NotifyEmit)`` encodes/s and ``FrameDecoder.feed``
  NotifyDeliver decodes/s for the same notification: the ceiling for a client
  written on this codec;
* async / sync: ``send`` calls per second on the producer, and notifications
  per second end to end (last one received by the consumer), with the
  number received (the router may drop for a slow consumer: DropWarns are
  counted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from elvin.protocol import FrameDecoder, NotifyDeliver, NotifyEmit, frame_packet  # noqa: E402
from elvin.values import Int64  # noqa: E402

NOTIFICATION = {
    "Bench": "throughput",
    "Seq": 0,
    "Price": 101.25,
    "Volume": Int64(1_000_000),
    "Symbol": "ELVN",
    "Payload": b"\x00\x01\x02\x03" * 4,
}


def codec_figures(count: int) -> tuple[float, float]:
    notification = dict(NOTIFICATION)
    start = time.perf_counter()
    for i in range(count):
        notification["Seq"] = i
        frame_packet(NotifyEmit(notification))
    encode_rate = count / (time.perf_counter() - start)

    data = frame_packet(NotifyDeliver(notification, (), (1,))) * 1000
    decoder = FrameDecoder()
    start = time.perf_counter()
    decoded = 0
    chunk = 64 * 1024
    while decoded < count:
        for offset in range(0, len(data), chunk):
            decoded += len(decoder.feed(data[offset:offset + chunk]))
    decode_rate = decoded / (time.perf_counter() - start)
    return encode_rate, decode_rate


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def router_process():
    port = free_port()
    url = f"elvin://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "elvin.router", "--listen", url,
                             "--log-level", "warning"],
                            cwd=Path(__file__).resolve().parent.parent)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the router did not start") from None
                time.sleep(0.05)
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def process_cpu(pid: int | None) -> float:
    """CPU seconds used so far by a process (this one when pid is None)."""
    if pid is None:
        return time.process_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


class Meter:
    """Wall time and the CPU share of this process and of the router."""

    def __init__(self, router_pid: int | None) -> None:
        self.router_pid = router_pid

    def __enter__(self) -> Meter:
        self.wall = time.perf_counter()
        self.cpu = process_cpu(None)
        self.router_cpu = process_cpu(self.router_pid) if self.router_pid else float("nan")
        return self

    def __exit__(self, *exc) -> None:
        self.elapsed = time.perf_counter() - self.wall
        self.client_share = (process_cpu(None) - self.cpu) / self.elapsed
        self.router_share = ((process_cpu(self.router_pid) - self.router_cpu) / self.elapsed
                             if self.router_pid else float("nan"))


async def async_figures(url: str, count: int, router_pid: int | None,
                        window: int = 2000) -> dict:
    import elvin
    async with elvin.connect(url) as consumer, elvin.connect(url) as producer:
        received = 0
        done = asyncio.Event()
        room = asyncio.Event()
        last = count - 1
        sent = 0

        def on_notification(n) -> None:
            nonlocal received
            received += 1
            if sent - received < window // 2:
                room.set()
            if n.attributes["Seq"] == last:
                done.set()

        await consumer.subscribe('Bench == "throughput"', buffer_size=0,
                                 listener=on_notification)
        notification = dict(NOTIFICATION)

        # 1. how fast one client can send (the router reads and drops)
        probe = dict(notification, Bench="nobody listens")
        with Meter(router_pid) as send_meter:
            for i in range(count):
                probe["Seq"] = i
                await producer.send(probe)
        # 2. end to end, with at most `window` notifications in flight so
        #    that producer and consumer share this process fairly and the
        #    router never has to drop
        with Meter(router_pid) as meter:
            for i in range(count):
                notification["Seq"] = i
                await producer.send(notification)
                sent += 1
                if sent - received >= window:
                    room.clear()
                    await room.wait()
            try:
                await asyncio.wait_for(done.wait(), 60)
            except TimeoutError:
                pass
        return {"send_rate": count / send_meter.elapsed,
                "end_to_end": received / meter.elapsed, "received": received,
                "drop_warnings": consumer.drop_warnings,
                "client_cpu": meter.client_share, "router_cpu": meter.router_share}


def sync_figures(url: str, count: int, router_pid: int | None) -> dict:
    import elvin.sync
    with elvin.sync.connect(url) as consumer, elvin.sync.connect(url) as producer:
        sub = consumer.subscribe('Bench == "throughput"', buffer_size=count + 10)
        last = count - 1
        received = 0

        def consume() -> None:    # the consumer reads through the blocking iterator
            nonlocal received
            for n in sub:
                received += 1
                if n["Seq"] == last:
                    return

        reader = threading.Thread(target=consume, daemon=True)
        notification = dict(NOTIFICATION)
        with Meter(router_pid) as meter:
            reader.start()
            start = time.perf_counter()
            for i in range(count):
                notification["Seq"] = i
                producer.send(notification)
            producer.flush()
            send_rate = count / (time.perf_counter() - start)
            reader.join(60)
        return {"send_rate": send_rate, "end_to_end": received / meter.elapsed,
                "received": received, "drop_warnings": consumer.connection.drop_warnings,
                "client_cpu": meter.client_share, "router_cpu": meter.router_share}


def report(label: str, figures: dict, count: int) -> None:
    print(f"{label:5}  send {figures['send_rate']:9,.0f} /s   end-to-end "
          f"{figures['end_to_end']:8,.0f} /s   received {figures['received']}/{count}   "
          f"DropWarn {figures['drop_warnings']}   CPU client {figures['client_cpu']:.0%} "
          f"router {figures['router_cpu']:.0%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--url", help="use this router instead of starting one")
    parser.add_argument("--uvloop", action="store_true", help="run the async client on uvloop")
    args = parser.parse_args()

    encode_rate, decode_rate = codec_figures(args.count)
    print(f"codec   encode NotifyEmit   {encode_rate:12,.0f} /s")
    print(f"codec   decode NotifyDeliver{decode_rate:12,.0f} /s")

    with contextlib.ExitStack() as stack:
        if args.url:
            url, router_pid = args.url, None
        else:
            url, router_pid = stack.enter_context(router_process())
        if args.uvloop:
            import uvloop
            runner = uvloop.run
        else:
            runner = asyncio.run
        report("async", runner(async_figures(url, args.count, router_pid)), args.count)
        report("sync", sync_figures(url, args.count, router_pid), args.count)
    print(f"(cpus: {os.cpu_count()}, python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
