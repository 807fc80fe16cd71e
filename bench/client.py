"""Client throughput: notifications per second from one client, through the
router, to another client; with the asyncio API and with the sync facade.

    .venv/bin/python bench/client.py [--count N] [--url URL] [--uvloop]
                                     [--no-router-reference]

The router (``elvind``) always runs in its own process (unless ``--url``).
Figures printed, each section labelled:

* codec: raw ``frame_packet(NotifyEmit)`` encodes/s and ``FrameDecoder.feed``
  NotifyDeliver decodes/s for the same notification (this process), and the
  same bytes through the client's sans-IO ``ClientSessionCore.receive``;
* (a) asyncio API, three processes: a sender process (``await conn.send``
  in a loop) and a receiver process (``async for n in subscription``), each
  with its CPU share and CPU microseconds per notification next to the
  router's, so the process that saturates is visible. Then the receive
  path alone: the receiver is stopped (SIGSTOP) while the router queues
  every notification for it, then resumed; its drain rate and CPU per
  notification are what the receiving client can consume at most;
  The verdict line compares the receiver's CPU per notification with the
  router's in the same run: below it, the client is not the bottleneck;
* (b) the same with the sync facade (``conn.send`` / ``sub.get``, a second
  thread, as a script would use it);
* (c) both clients in one process, as before: ``send`` calls per second and
  end to end (the client process then does the work of two); the consumer
  asks for the router's largest send queue, as the receivers of (a) and (b)
  do, so that a consumer falling behind shows as a lower rate, not as drops;
* (d) reference: ``bench/router.py``'s delivery figure (raw-codec load
  generator) unless ``--no-router-reference``.

Three busy processes on a two-core machine share the cores: the sum of the
CPU shares printed shows how close to the machine's limit a run was.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import free_port, start_elvind, stop_processes, wait_listening  # noqa: E402

from elvin.client.session_core import ClientSessionCore  # noqa: E402
from elvin.protocol import (  # noqa: E402
    ConnRply,
    ConnRqst,
    FrameDecoder,
    NotifyDeliver,
    NotifyEmit,
    frame_packet,
)
from elvin.values import Int64  # noqa: E402

NOTIFICATION = {
    "Bench": "throughput",
    "Seq": 0,
    "Price": 101.25,
    "Volume": Int64(1_000_000),
    "Symbol": "ELVN",
    "Payload": b"\x00\x01\x02\x03" * 4,
}
SUBSCRIPTION = 'Bench == "throughput"'
#: the receiver asks the router for its largest send queue (bytes) so that a
#: receiver that is stopped or descheduled loses nothing (as bench/router.py)
RECEIVER_OPTIONS = {"Send-Queue.Max-Length": 64 * 1024 * 1024}
DRAIN_RUNS = 2       # runs of the receive-path-alone measurement (best printed)
IDLE_TIMEOUT = 5.0   # a receiver gives up this long after the last notification


# ---------------------------------------------------------------------------------------
# codec ceiling

def codec_figures(count: int) -> tuple[float, float, float]:
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

    # the same bytes through the client's sans-IO session core: decoding plus
    # the CLIENT table's check; its cost over the decoder alone is the core's
    core = ClientSessionCore()
    xid, _, _ = core.request(ConnRqst)
    core.receive(frame_packet(ConnRply(xid, {})))
    start = time.perf_counter()
    received = 0
    while received < count:
        for offset in range(0, len(data), chunk):
            received += len(core.receive(data[offset:offset + chunk]))
    core_rate = received / (time.perf_counter() - start)
    return encode_rate, decode_rate, core_rate


# ---------------------------------------------------------------------------------------
# processes and CPU accounting

@contextlib.contextmanager
def router_process():
    """elvind on a free port (its log on our stderr): yields its URL and pid."""
    port = free_port()
    url = f"elvin://127.0.0.1:{port}"
    proc = start_elvind("--listen", url, stderr=None)
    try:
        wait_listening(proc, port, time.monotonic() + 20)
        yield url, proc.pid
    finally:
        stop_processes([proc])


def process_cpu(pid: int | None) -> float:
    """CPU seconds (user + system, all threads) used so far by a process
    (this one when pid is None); /proc, as psutil is not a dependency."""
    if pid is None:
        return time.process_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def machine_busy() -> float:
    """CPU seconds used so far by everything on the machine (/proc/stat), to
    tell how much of the cores other processes took during a run."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)   # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


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


def run_loop(coro, uvloop_: bool):
    if uvloop_:
        import uvloop
        return uvloop.run(coro)
    return asyncio.run(coro)


# ---------------------------------------------------------------------------------------
# worker processes for (a) and (b). Each prints one JSON line with its own
# figures; times are time.monotonic() (CLOCK_MONOTONIC, shared by processes),
# CPU is time.process_time() of the worker process (all its threads).

def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


class _Tally:
    """What a receiver measures: first/last arrival (wall and CPU) and count."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.received = 0
        self.first = self.first_cpu = self.last = self.last_cpu = float("nan")

    def seen(self, seq: int) -> bool:
        """Count one notification; True when the last one has arrived."""
        self.received += 1
        if self.received == 1:
            self.first, self.first_cpu = time.monotonic(), time.process_time()
        if seq == self.count - 1 or self.received == self.count:
            self.last, self.last_cpu = time.monotonic(), time.process_time()
            return True
        return False

    def record(self, **extra) -> dict:
        if self.received and self.last != self.last:   # timed out before the last one
            self.last, self.last_cpu = time.monotonic() - IDLE_TIMEOUT, time.process_time()
        return {"received": self.received, "first": self.first, "last": self.last,
                "cpu": self.last_cpu - self.first_cpu, **extra}


async def _async_receiver(url: str, count: int) -> dict:
    import elvin
    tally = _Tally(count)
    async with elvin.connect(url, options=RECEIVER_OPTIONS) as conn:
        # buffer_size: one data_received can bring ~1,500 of these notifications
        # at once; a buffer smaller than that would drop on the client side
        sub = await conn.subscribe(SUBSCRIPTION, buffer_size=count + 10)
        _emit({"ready": True})

        async def watchdog() -> None:
            # ends the iteration (by closing the subscription) when nothing
            # arrives for IDLE_TIMEOUT: no per-item timeout in the hot loop
            seen, idle = -1, 0.0
            while True:
                await asyncio.sleep(0.5)
                idle = idle + 0.5 if tally.received == seen else 0.0
                seen = tally.received
                if idle >= (IDLE_TIMEOUT if seen else 120):
                    await sub.close()
                    return

        guard = asyncio.ensure_future(watchdog())
        async for n in sub:
            if tally.seen(n["Seq"]):
                break
        guard.cancel()
        return tally.record(drop_warnings=conn.drop_warnings, dropped=sub.dropped)


def _sync_receiver(url: str, count: int) -> dict:
    import elvin.sync
    tally = _Tally(count)
    with elvin.sync.connect(url, options=RECEIVER_OPTIONS) as conn:
        sub = conn.subscribe(SUBSCRIPTION, buffer_size=count + 10)
        _emit({"ready": True})
        while True:
            try:
                n = sub.get(timeout=IDLE_TIMEOUT if tally.received else 120)
            except TimeoutError:
                break
            if tally.seen(n["Seq"]):
                break
        return tally.record(drop_warnings=conn.connection.drop_warnings, dropped=sub.dropped)


def _await_go() -> None:
    """A sender is connected: say so, and start when the parent says "go"
    (so that its start-up is outside the measured window)."""
    _emit({"ready": True})
    sys.stdin.readline()


async def _async_sender(url: str, count: int) -> dict:
    import elvin
    async with elvin.connect(url) as conn:
        notification = dict(NOTIFICATION)
        _await_go()
        start, cpu = time.monotonic(), time.process_time()
        for i in range(count):
            notification["Seq"] = i
            await conn.send(notification)
        sent = time.monotonic()
    # leaving the block waits for DisconnRply: the router has read everything
    return {"start": start, "sent": sent, "cpu": time.process_time() - cpu}


def _sync_sender(url: str, count: int) -> dict:
    import elvin.sync
    with elvin.sync.connect(url) as conn:
        notification = dict(NOTIFICATION)
        _await_go()
        start, cpu = time.monotonic(), time.process_time()
        for i in range(count):
            notification["Seq"] = i
            conn.send(notification)
        conn.flush()
        sent = time.monotonic()
    return {"start": start, "sent": sent, "cpu": time.process_time() - cpu}


def worker(role: str, api: str, url: str, count: int, uvloop_: bool) -> int:
    if role == "receiver":
        record = (run_loop(_async_receiver(url, count), uvloop_) if api == "async"
                  else _sync_receiver(url, count))
    else:
        record = (run_loop(_async_sender(url, count), uvloop_) if api == "async"
                  else _sync_sender(url, count))
    _emit(record)
    return 0


def _spawn(role: str, api: str, url: str, count: int, uvloop_: bool) -> subprocess.Popen:
    command = [sys.executable, __file__, "--role", role, "--api", api, "--url", url,
               "--count", str(count)]
    if uvloop_:
        command.append("--uvloop")
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)


def _go(proc: subprocess.Popen) -> None:
    proc.stdin.write("go\n")
    proc.stdin.flush()


def _result(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"bench worker failed (exit {proc.returncode}): {out!r}")
    return json.loads(lines[-1])


def _wait_ready(proc: subprocess.Popen) -> None:
    line = proc.stdout.readline()
    if '"ready"' not in line:
        raise RuntimeError(f"receiver did not start: {line!r}")


def three_process_figures(api: str, url: str, count: int, router_pid: int | None,
                          uvloop_: bool) -> dict:
    """(a)/(b): sender and receiver processes, both at full speed."""
    receiver = _spawn("receiver", api, url, count, uvloop_)
    try:
        _wait_ready(receiver)
        sender = _spawn("sender", api, url, count, uvloop_)
        _wait_ready(sender)
        router_cpu = process_cpu(router_pid) if router_pid else float("nan")
        busy, wall = machine_busy(), time.monotonic()
        _go(sender)
        send = _result(sender)
        recv = _result(receiver)
        busy, wall = machine_busy() - busy, time.monotonic() - wall
    finally:
        with contextlib.suppress(ProcessLookupError):
            receiver.kill()
    # the router's CPU from before the sender started to after the last
    # delivery (it idles while the sender process starts: no CPU then)
    router_used = process_cpu(router_pid) - router_cpu if router_pid else float("nan")
    router_end = recv["last"] if recv["last"] == recv["last"] else time.monotonic()
    elapsed = router_end - send["start"]
    send_time = send["sent"] - send["start"]
    return {
        "end_to_end": recv["received"] / elapsed, "received": recv["received"],
        "drop_warnings": recv["drop_warnings"], "dropped": recv["dropped"],
        "send_rate": count / send_time, "sender_share": send["cpu"] / elapsed,
        "sender_us": send["cpu"] / count * 1e6,
        "receiver_share": recv["cpu"] / elapsed,
        "receiver_us": recv["cpu"] / max(recv["received"], 1) * 1e6,
        # CPU that other processes used on the machine while this ran
        "others_share": max(0.0, busy - send["cpu"] - recv["cpu"] - router_used) / wall,
        "router_share": router_used / elapsed,
        "router_us": router_used / max(recv["received"], 1) * 1e6,
    }


def drain_figures(api: str, url: str, count: int, uvloop_: bool) -> dict:
    """The receive path alone: the receiver is stopped while the router
    queues ``count`` notifications for it, then resumed and timed until it has
    them all (the router then only writes bytes it already encoded)."""
    receiver = _spawn("receiver", api, url, count, uvloop_)
    try:
        _wait_ready(receiver)
        os.kill(receiver.pid, signal.SIGSTOP)
        try:
            sender = _spawn("sender", api, url, count, uvloop_)
            _wait_ready(sender)
            _go(sender)
            _result(sender)
            time.sleep(0.5)   # let the router finish matching and queueing
        finally:
            os.kill(receiver.pid, signal.SIGCONT)
        recv = _result(receiver)
    finally:
        with contextlib.suppress(ProcessLookupError):
            receiver.kill()
    took = recv["last"] - recv["first"]
    return {"rate": (recv["received"] - 1) / took if took > 0 else float("nan"),
            "received": recv["received"], "share": recv["cpu"] / took if took > 0 else 0.0,
            "us": recv["cpu"] / max(recv["received"] - 1, 1) * 1e6,
            "drop_warnings": recv["drop_warnings"], "dropped": recv["dropped"]}


def report_three(label: str, f: dict, drain: dict, count: int) -> None:
    shares = {"sender": f["sender_share"], "router": f["router_share"],
              "receiver": f["receiver_share"]}
    busiest = max(shares, key=lambda k: shares[k] if shares[k] == shares[k] else -1)
    total = sum(v for v in shares.values() if v == v)
    print(f"== {label}: sender process -> elvind process -> receiver process")
    print(f"   end-to-end        {f['end_to_end']:9,.0f} notifications/s   received "
          f"{f['received']}/{count}   DropWarn {f['drop_warnings']}   client-side drops "
          f"{f['dropped']}")
    print(f"   sender send rate  {f['send_rate']:9,.0f} /s (TCP back-pressure from the router "
          "included)")
    print("   CPU share of one core over the run (first send to last delivery):")
    print(f"                     sender {f['sender_share']:4.0%}   router "
          f"{f['router_share']:4.0%}   receiver {f['receiver_share']:4.0%}   "
          f"(sum {total:.0%} of {os.cpu_count() * 100}%)")
    print(f"   CPU per notif.    sender {f['sender_us']:5.1f} us   router "
          f"{f['router_us']:5.1f} us   receiver {f['receiver_us']:5.1f} us")
    print(f"   other processes on the machine meanwhile: {f['others_share']:.0%} of a core")
    if total > (os.cpu_count() or 1) * 0.9:
        note = (f"the {os.cpu_count()} cores are saturated by three processes; the busiest "
                f"is the {busiest}")
    else:
        note = f"the busiest process is the {busiest}"
    print(f"   -> {note}")
    # the verdict uses the figures of one and the same run (same load)
    verdict = ("is not" if f["receiver_us"] < f["router_us"] else "is")
    print(f"   -> in this run receiving cost {f['receiver_us']:.1f} us of CPU per notification, "
          f"routing {f['router_us']:.1f} us: the receiving client {verdict} the bottleneck")
    print(f"   receive path alone, best of {DRAIN_RUNS} (receiver stopped while the router "
          f"queued {count}, then resumed):")
    print(f"                     {drain['rate']:9,.0f} /s   receiver CPU {drain['share']:.0%}   "
          f"{drain['us']:.1f} us per notification (~{1e6 / drain['us']:,.0f}/s on a free "
          f"core)   received {drain['received']}/{count}")


# ---------------------------------------------------------------------------------------
# (c) both clients in this process


async def async_figures(url: str, count: int, router_pid: int | None,
                        window: int = 2000) -> dict:
    import elvin
    async with elvin.connect(url, options=RECEIVER_OPTIONS) as consumer, \
            elvin.connect(url) as producer:
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

        await consumer.subscribe(SUBSCRIPTION, buffer_size=0, listener=on_notification)
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
    with elvin.sync.connect(url, options=RECEIVER_OPTIONS) as consumer, \
            elvin.sync.connect(url) as producer:
        sub = consumer.subscribe(SUBSCRIPTION, buffer_size=count + 10)
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
    print(f"   {label:5}  send {figures['send_rate']:9,.0f} /s   end-to-end "
          f"{figures['end_to_end']:8,.0f} /s   received {figures['received']}/{count}   "
          f"DropWarn {figures['drop_warnings']}   CPU client process "
          f"{figures['client_cpu']:.0%} router {figures['router_cpu']:.0%}")


# ---------------------------------------------------------------------------------------
# (d) bench/router.py's figure


def router_reference() -> None:
    command = [sys.executable, str(ROOT / "bench" / "router.py"), "--quick", "--only",
               "delivery"]
    print("== (d) reference: bench/router.py --quick --only delivery (raw-codec producer and "
          "consumer, uvloop, one process; not the client library)")
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=120,
                             cwd=ROOT).stdout
    except subprocess.TimeoutExpired:
        print("   (timed out; run it yourself: " + " ".join(command[1:]) + ")")
        return
    for line in out.splitlines():
        if line.startswith(("delivered", "CPU used", "router CPU")):
            print("   " + line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--url", help="use this router instead of starting one")
    parser.add_argument("--uvloop", action="store_true", help="run the clients on uvloop")
    parser.add_argument("--no-router-reference", action="store_true",
                        help="skip (d), the bench/router.py figure")
    parser.add_argument("--role", choices=("sender", "receiver"), help=argparse.SUPPRESS)
    parser.add_argument("--api", choices=("async", "sync"), default="async",
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        return worker(args.role, args.api, args.url, args.count, args.uvloop)

    loop_name = "uvloop" if args.uvloop else "asyncio default loop"
    print(f"{args.count:,} notifications of {len(NOTIFICATION)} attributes; clients on "
          f"{loop_name}; {os.cpu_count()} cores, python {sys.version.split()[0]}")
    encode_rate, decode_rate, core_rate = codec_figures(args.count)
    print("== codec (this process)")
    print(f"   encode NotifyEmit    {encode_rate:12,.0f} /s")
    print(f"   decode NotifyDeliver {decode_rate:12,.0f} /s")
    print(f"   client session core  {core_rate:12,.0f} /s  (decode + the CLIENT table)")

    with contextlib.ExitStack() as stack:
        if args.url:
            url, router_pid = args.url, None
        else:
            url, router_pid = stack.enter_context(router_process())
        for label, api in (("(a) asyncio API", "async"), ("(b) sync facade", "sync")):
            figures = three_process_figures(api, url, args.count, router_pid, args.uvloop)
            # best of a few: a stopped-and-resumed process is sensitive to
            # whatever else the machine does at that moment
            drain = min((drain_figures(api, url, args.count, args.uvloop)
                         for _ in range(DRAIN_RUNS)), key=lambda d: d["us"])
            report_three(label, figures, drain, args.count)
        print("== (c) both clients in this one process (it does the work of two clients)")
        report("async", run_loop(async_figures(url, args.count, router_pid), args.uvloop),
               args.count)
        report("sync", sync_figures(url, args.count, router_pid), args.count)
    if not args.no_router_reference:
        router_reference()
    return 0


if __name__ == "__main__":
    sys.exit(main())
