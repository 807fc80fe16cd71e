"""Matching at scale for every kind of predicate (``bench/router.py --scale``,
``--scale-tcp``, ``--long-compile``; not a bench itself).

Workloads (``WORKLOADS``): *filler* subscriptions that the load never
matches, whose constants are near the load's values (so that only a real
index tells them apart), one subscription that matches every notification,
and a stream of small notifications:

* ``rangeprefix`` (issue 26's): half numeric windows ``Seq >= A && Seq < A +
  10`` on an attribute every notification carries (the notifications' ``Seq``
  falls in the gaps between windows), half string prefixes
  ``begins-with(Text, "pN")`` (the notifications' ``Text`` is ``"p-..."``);
  the matching subscription is ``begins-with(Text, "p-")``;
* ``mix``: stock quotes (``Symbol == "S7" && Price > 101.5``, 100 symbols, so
  thousands of subscriptions share a symbol at scale; quotes are below
  every threshold), geographic boxes (``Lat >= a && Lat < b && Lon >= c &&
  Lon < d`` on a grid, positions in the gaps), directory prefixes
  (``begins-with(Path, "/srv/www/siteN/")``, file events under
  ``/srv/www/siteNx/``), thresholds with no equality (``Temperature > T``,
  ``Pressure < P``, readings on the other side), and 500 unindexable
  ``regex``/``contains`` subscriptions on chat messages at every size; the
  notifications cycle through the five kinds; the matching subscription is
  ``require(Seq)``;
* ``tickertape``: ``Group == "gN" && require(Message)`` (the equality case the
  router indexed before).

Modes:

* ``run_scale`` (engine only, each size in a forked child): registration (compile + engine.add)
  per second (with generation 2 never collected automatically, as in the
  router), memory per subscription (RSS growth), then notifications per
  second (median of passes) and predicates evaluated per notification, and
  the cost ratio of each size to the smallest;
* ``run_scale_tcp``: the same workload against ``elvind`` over loopback TCP:
  fillers registered pipelined over many connections (subscriptions/s,
  router RSS per subscription), then a producer streams notifications with a
  window in flight to a consumer holding the matching subscription
  (notifications/s delivered, router CPU per notification);
* ``run_long_compile``: what the router's worker spends on a 4 KB expression
  of 350 random terms (``compiling.compile_and_place``: parse, check,
  compile, index analysis), median and worst over distinct expressions; then
  what evaluating one costs against a notification of a few or all of its
  names.

Every mode checks its own premise: each notification matches exactly the one
matching subscription.

Figures (2-core AMD EPYC, idle, load under 1; the same machine ran the code
before issue 26, c1db1ba, with this bench: rangeprefix over TCP 7,443 / 671
notifications/s at 1k / 10k, mix 40,257 / 5,050 / 254 at 1k / 10k / 100k;
its long compile 35 ms. Earlier sessions' machines were up to five times
slower, so compare figures taken on one machine only):

* ``--scale-tcp`` rangeprefix: 206,800 / 201,200 / 175,000 / 161,700
  notifications/s at 1k / 10k / 100k / 1M (router CPU per notification x1.18
  at 100k, x1.28 at 1M), 42,800-49,400 registrations/s, 1,010-1,450 B of
  router RSS per subscription; mix: 53,500 / 50,600 / 49,100 / 42,900 (x1.09
  at 100k), 34,000-39,000 registrations/s from 10k (17,000/s at 1k, where half
  the subscriptions are the 500 regex/contains); tickertape 239,000 -> 237,500
  (x1.01 at 1M), 73,000-91,000 registrations/s;
* ``--scale`` rangeprefix: 655,000 / 547,000 / 465,000 notifications/s at 1k /
  100k / 1M (1 evaluation each), 54,000-64,000 registrations/s, 1,120-1,525 B
  per subscription; mix x1.12 at 100k (101 evaluations: the scanned
  regex/contains); tickertape x1.01 at 1M;
* ``--long-compile``: median 2.2 ms, best 2.0 ms; evaluating one 1.8 us (3 of
  its names) / 0.6 us (all 30).
"""

from __future__ import annotations

import asyncio
import gc
import math
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import free_port, open_peer, process_cpu, start_elvind, stop_processes, wait_listening
from _registration import connect_counter, register, request_block, rss_bytes

from elvin.protocol import NotifyEmit, SubAddRqst, decode_packet, frame
from elvin.router.gcpolicy import NEVER

#: regex()/contains() subscriptions of the mix at every size
SCANNED = 500
SYMBOLS = 100


@dataclass(frozen=True)
class Workload:
    title: str
    fillers: Callable[[int], list[str]]
    matching: str
    notifications: Callable[[int, int], list[dict]]


# -- rangeprefix -----------------------------------------------------------------------

def _rangeprefix_fillers(n: int) -> list[str]:
    out = []
    for i in range(n):
        k = i // 2
        if i % 2 == 0:
            a = 20 * k + 10
            out.append(f"Seq >= {a} && Seq < {a + 10}")
        else:
            out.append(f'begins-with(Text, "p{k}")')
    return out


def _rangeprefix_notifications(n: int, count: int) -> list[dict]:
    windows = max(1, n // 2)
    return [{"Seq": 20 * ((j * 7919) % windows) + 5, "Text": f"p-{j}"} for j in range(count)]


# -- mix -------------------------------------------------------------------------------

def _mix_counts(n: int) -> tuple[int, int]:
    """(scanned, per category) for ``n`` fillers: 500 scanned (fewer when
    n is small), the rest in four kinds."""
    scanned = min(SCANNED, n // 2)
    return scanned, (n - scanned + 3) // 4


def _grid(m: int) -> tuple[int, float, float]:
    cols = max(1, math.ceil(math.sqrt(2 * m)))
    rows = max(1, math.ceil(m / cols))
    return cols, 60.0 / rows, 120.0 / cols


def _mix_fillers(n: int) -> list[str]:
    scanned, per = _mix_counts(n)
    out = []
    for i in range(scanned):
        out.append(f'regex(Message, "^alert-{i}[0-9]+$")' if i % 2 == 0
                   else f'contains(Message, "token{i}")')
    cols, dlat, dlon = _grid(per)
    kinds = 0
    k = 0
    while len(out) < n:
        kind = kinds % 4
        kinds += 1
        if kind == 0:
            price = 100 + (k * 7919 % 10000) / 100
            out.append(f'Symbol == "S{k % SYMBOLS}" && Price > {price:.2f}')
        elif kind == 1:
            r, c = divmod(k % (cols * math.ceil(per / cols)), cols)
            lat, lon = r * dlat, c * dlon
            out.append(f"Lat >= {lat + 0.1 * dlat:.6f} && Lat < {lat + 0.9 * dlat:.6f} && "
                       f"Lon >= {lon + 0.1 * dlon:.6f} && Lon < {lon + 0.9 * dlon:.6f}")
        elif kind == 2:
            out.append(f'begins-with(Path, "/srv/www/site{k}/")')
        else:
            if k % 2 == 0:
                out.append(f"Temperature > {50 + (k * 31 % 5000) / 100:.2f}")
            else:
                out.append(f"Pressure < {950 - (k * 17 % 5000) / 100:.2f}")
            k += 1
    return out


def _mix_notifications(n: int, count: int) -> list[dict]:
    _scanned, per = _mix_counts(n)
    cols, dlat, dlon = _grid(per)
    rows = math.ceil(per / cols)
    out = []
    for j in range(count):
        kind = j % 5
        if kind == 0:
            note = {"Symbol": f"S{j % SYMBOLS}", "Price": 50 + (j % 50) + 0.25, "Volume": 1000}
        elif kind == 1:
            r, c = (j * 31) % rows, (j * 17) % cols
            note = {"User": f"u{j}", "Lat": (r + 0.95) * dlat, "Lon": (c + 0.95) * dlon}
        elif kind == 2:
            note = {"Path": f"/srv/www/site{j % max(per, 1)}x/index.html", "Size": j}
        elif kind == 3:
            note = {"Sensor": f"t{j % 10}", "Temperature": (j % 50) + 0.5,
                    "Pressure": 950.0 + j % 100}
        else:
            note = {"Group": "chat", "Message": f"hello world {j}"}
        note["Seq"] = j
        out.append(note)
    return out


WORKLOADS = {
    "rangeprefix": Workload("Seq windows and Text prefixes", _rangeprefix_fillers,
                            'begins-with(Text, "p-")', _rangeprefix_notifications),
    "mix": Workload("stock, geo boxes, directory prefixes, thresholds, 500 regex/contains",
                    _mix_fillers, "require(Seq)", _mix_notifications),
    "tickertape": Workload('Group == "gN" && require(Message)',
                           lambda n: [f'Group == "g{i}" && require(Message)' for i in range(n)],
                           'Group == "bench" && require(Message)',
                           lambda n, count: [{"Group": "bench", "Message": f"m{j}", "Seq": j}
                                             for j in range(count)]),
}


def _self_rss() -> int:
    return rss_bytes(os.getpid())


def _load() -> str:
    return "load " + "/".join(f"{x:.1f}" for x in os.getloadavg())


# -- engine only -------------------------------------------------------------------------

def run_scale(workloads: list[str], sizes: list[int], seconds: float) -> None:
    for name in workloads:
        workload = WORKLOADS[name]
        print(f"== matching at scale, engine only: {name} ({workload.title}); {_load()}")
        print(f"{'subscriptions':>14} {'notifications/s':>16} {'us/notification':>16} "
              f"{'evaluated':>10} {'registered/s':>13} {'bytes/sub':>10}")
        costs: dict[int, float] = {}
        for n in sizes:
            per, evaluated, registered, per_sub = _in_child(_scale_one, name, n, seconds)
            costs[n] = per
            print(f"{n:>14,} {1 / per:>16,.0f} {per * 1e6:>16.1f} {evaluated:>10.1f} "
                  f"{registered:>13,.0f} {per_sub:>10,.0f}", flush=True)
        _ratios(costs)


def _in_child(job, *args):
    """``job(*args)`` in a forked child: each size starts from this small
    process's heap, so its RSS growth is its own (in one process, memory the
    previous size freed is reused and the next size seems to cost nothing)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_run_and_send, args=(send, job, args))
    child.start()
    send.close()
    try:
        ok, result = receive.recv()
    except EOFError:
        raise SystemExit(f"the bench's child died (exit code {child.exitcode})") from None
    finally:
        child.join()
    if not ok:
        raise SystemExit(result)
    return result


def _run_and_send(send, job, args) -> None:
    try:
        send.send((True, job(*args)))
    except BaseException as exc:  # noqa: BLE001 - sent to the parent (a SystemExit from the workload check too)
        send.send((False, f"{type(exc).__name__}: {exc}"))


def _scale_one(name: str, n: int, seconds: float) -> tuple[float, float, float, float]:
    """(seconds per notification, evaluated per notification, registrations/s,
    RSS bytes per subscription) for ``n`` subscriptions of workload ``name``."""
    from elvin.router.engine import Engine
    from elvin.router.server import Router

    workload = WORKLOADS[name]
    texts = workload.fillers(n)
    compile = Router().compile      # what the router registers subscriptions with
    engine = Engine()
    # The router never lets generation 2 be collected automatically (GcPolicy):
    # without this, Python's own full collections walk the whole growing heap
    # and halve the registration rate at a million subscriptions -- a cost of
    # this bench's process, not of registering.
    gen0, gen1, _ = gc.get_threshold()
    gc.set_threshold(gen0, gen1, NEVER)
    rss = _self_rss()
    start = time.perf_counter()
    for i, text in enumerate(texts):
        c = compile(text)
        engine.add(f"client{i // 10}", text, c.ast, c.matches, names=c.names,
                   index=c.index)
    registered = n / (time.perf_counter() - start)
    per_sub = (_self_rss() - rss) / n
    c = compile(workload.matching)
    engine.add("consumer", workload.matching, c.ast, c.matches, names=c.names,
               index=c.index)
    notes = workload.notifications(n, 1000)
    per, evaluated = _time_matching(engine, notes, seconds)
    return per, evaluated, registered, per_sub


def _time_matching(engine, notes: list[dict], seconds: float) -> tuple[float, float]:
    """(seconds per notification, predicates evaluated per notification): the
    median of passes over ``notes`` (fewer notes when one costs a lot)."""
    start = time.perf_counter()
    probe = notes[:10]
    for attrs in probe:
        insecure, secure = engine.match(attrs)
        matched = sorted(insecure)
        if matched != ["consumer"] or sum(map(len, insecure.values())) != 1 or secure:
            raise SystemExit(f"the workload is wrong: {attrs} matched {matched}")
    estimate = (time.perf_counter() - start) / len(probe)
    count = max(10, min(len(notes), int(seconds / 4 / max(estimate, 1e-9))))
    return median_pass(engine, notes[:count], seconds)


def median_pass(engine, notes: list[dict], seconds: float) -> tuple[float, float]:
    """(seconds per notification, predicates evaluated per notification): the
    median of passes over ``notes`` for ``seconds`` (at least three), after
    one pass to warm up (per-predicate caches are built lazily). The median
    is robust to other processes sharing the machine."""
    for attrs in notes:
        engine.match(attrs)
    engine.evaluations = 0
    passes = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or len(passes) < 3:
        t0 = time.perf_counter()
        for attrs in notes:
            engine.match(attrs)
        passes.append(time.perf_counter() - t0)
    return (statistics.median(passes) / len(notes),
            engine.evaluations / (len(notes) * len(passes)))


def _ratios(costs: dict[int, float]) -> None:
    if len(costs) > 1:
        lo = min(costs)
        print("cost ratio to " + f"{lo:,}: " + ", ".join(
            f"{n:,} x{costs[n] / costs[lo]:.2f}" for n in sorted(costs) if n != lo))


# -- over TCP ----------------------------------------------------------------------------

def _start_router(port: int, max_subscriptions: int) -> subprocess.Popen:
    config = Path(tempfile.mkdtemp(prefix="elvin-bench-")) / "elvind.toml"
    config.write_text(f"max-subscriptions = {max_subscriptions}\n")
    proc = start_elvind("--listen", f"elvin://127.0.0.1:{port}", "--config", str(config))
    wait_listening(proc, port, time.monotonic() + 30)
    return proc


async def _stream(port: int, workload: Workload, n: int, seconds: float,
                  pid: int, window: int = 500) -> dict:
    """Notifications delivered per second with ``window`` in flight."""
    consumer = await open_peer(port, {"Send-Queue.Max-Length": 64 * 1024 * 1024})
    producer = await open_peer(port)
    reply = await consumer.request(SubAddRqst(2, workload.matching))
    if type(reply).__name__ != "SubRply":
        raise SystemExit(f"the matching subscription was refused: {reply}")
    notes = workload.notifications(n, 1000)
    bodies = [frame(NotifyEmit(note)) for note in notes]
    received = 0
    wrong = 0
    arrived = asyncio.Event()
    sample = {"Seq"} if workload.matching == "require(Seq)" else None

    def on_deliver(body: bytes) -> None:
        nonlocal received, wrong
        received += 1
        if sample is None and received <= 20:
            packet = decode_packet(body)
            if len(packet.insecure_matches) + len(packet.secure_matches) != 1:
                wrong += 1
        arrived.set()

    consumer.on_deliver = on_deliver
    clock = time.perf_counter
    sent = 0
    start = cpu = None
    begin = clock()
    while True:
        if start is None and received >= min(200, window):
            start, counted, cpu = clock(), received, process_cpu(pid)
        if start is not None and clock() - start >= seconds:
            break
        if clock() - begin > seconds * 20 + 60:
            break                       # hopelessly slow: report what there is
        room = window - (sent - received)
        if room > 0:
            chunk = [bodies[(sent + i) % len(bodies)] for i in range(min(room, 100))]
            producer.transport.write(b"".join(chunk))
            sent += len(chunk)
            await producer.can_write.wait()
        arrived.clear()
        try:
            await asyncio.wait_for(arrived.wait(), 30)
        except TimeoutError:
            break
    if start is None:
        start, counted, cpu = begin, 0, float("nan")
    elapsed = clock() - start
    rate = (received - counted) / elapsed if elapsed > 0 else float("nan")
    cpu_used = process_cpu(pid) - cpu
    for peer in (consumer, producer):
        peer.transport.close()
    return {"rate": rate, "cpu_per": cpu_used / max(received - counted, 1), "wrong": wrong}


async def _scale_tcp(workload: Workload, n: int, seconds: float, per_conn: int) -> dict:
    port = free_port()
    proc = _start_router(port, n + 100)
    try:
        texts = workload.fillers(n)
        conns = max(1, (n + per_conn - 1) // per_conn)
        options = {"Subscription.Max-Count": per_conn + 16}
        peers = [await connect_counter(port, options) for _ in range(conns)]
        chunks = [texts[i * per_conn:(i + 1) * per_conn] for i in range(conns)]
        blocks = [request_block(c) for c in chunks]
        rss = rss_bytes(proc.pid)
        cpu = process_cpu(proc.pid)
        elapsed = await register(peers, blocks, [len(c) for c in chunks], 1800)
        cpu = process_cpu(proc.pid) - cpu
        rss_after = rss_bytes(proc.pid)
        nacks = sum(p.nacks for p in peers)
        result = await _stream(port, workload, n, seconds, proc.pid)
        for peer in peers:
            peer.transport.close()
    finally:
        stop_processes([proc])
    return {"registered": n / elapsed, "reg_cpu": cpu / n, "rss_per_sub": (rss_after - rss) / n,
            "nacks": nacks, **result}


def run_scale_tcp(workloads: list[str], sizes: list[int], seconds: float,
                  per_conn: int = 1000) -> None:
    for name in workloads:
        workload = WORKLOADS[name]
        print(f"== matching at scale over loopback TCP (elvind in its own process): {name} "
              f"({workload.title}); {_load()}")
        print(f"{'subscriptions':>14} {'notifications/s':>16} {'router us/notif':>16} "
              f"{'registered/s':>13} {'router us/reg':>14} {'RSS/sub':>9}")
        costs = {}
        for n in sizes:
            r = asyncio.run(_scale_tcp(workload, n, seconds, per_conn))
            costs[n] = r["cpu_per"]
            print(f"{n:>14,} {r['rate']:>16,.0f} {r['cpu_per'] * 1e6:>16.1f} "
                  f"{r['registered']:>13,.0f} {r['reg_cpu'] * 1e6:>14.1f} "
                  f"{r['rss_per_sub']:>9,.0f}"
                  + (f"   ({r['nacks']} Nacks)" if r["nacks"] else "")
                  + (f"   ({r['wrong']} deliveries not to one subscription)"
                     if r["wrong"] else ""), flush=True)
        _ratios(costs)
        print("(the ratio is of router CPU per notification)")


# -- long expressions --------------------------------------------------------------------

def long_expression(rng: random.Random, terms: int = 350) -> str:
    """A random expression of ``terms`` short comparisons, string tests and
    ``require``s over ten attributes, joined by ``&&``/``||`` with some
    parentheses: about 4 KB for 350 terms."""
    def term() -> str:
        n = f"{rng.choice('abc')}{rng.randrange(10)}"
        k = rng.randrange(7)
        if k == 0:
            return f'{n} == "v{rng.randrange(10)}"'
        if k == 1:
            return f"{n} > {rng.randrange(100)}"
        if k == 2:
            return f"{n} < {rng.randrange(10)}.5"
        if k == 3:
            return f"require({n})"
        if k == 4:
            return f"{n} != {rng.randrange(10)}"
        if k == 5:
            return f'{n} == "w{rng.randrange(10)}"'
        return f"{n} >= {rng.randrange(100)}"

    parts = [term() for _ in range(terms)]
    out = []
    i = 0
    while i < len(parts):
        group = rng.randrange(1, 4)
        piece = f" {rng.choice(['&&', '||'])} ".join(parts[i:i + group])
        out.append(f"({piece})" if group > 1 else piece)
        i += group
    return " || ".join(out)


def run_long_compile(count: int) -> None:
    from elvin.router.compiling import compile_and_place

    rng = random.Random(26)
    texts = [long_expression(rng) for _ in range(count)]
    compile_and_place(texts[0])         # warm up (lark builds its parser on first use)
    times = []
    compiled = []
    for text in texts:
        t0 = time.perf_counter()
        compiled.append(compile_and_place(text))
        times.append(time.perf_counter() - t0)
    sizes = [len(t) for t in texts]
    print(f"== long expressions: compile_and_place (the router's worker job) of {count} "
          f"random expressions of 350 terms, {min(sizes):,}-{max(sizes):,} characters; {_load()}")
    print(f"median {statistics.median(times) * 1e3:8.2f} ms   best {min(times) * 1e3:8.2f} ms"
          f"   worst {max(times) * 1e3:8.2f} ms   ({count / sum(times):,.0f} expressions/s on "
          "one worker)")
    # what evaluating one costs, when the index lets a notification through:
    # a few of the expressions' 30 names, or all of them
    names = [f"{c}{i}" for c in "abc" for i in range(10)]
    values = [0, 7, 50, 99, 2.5, "v3", "w1", "x"]
    for label, width in (("3 of its names", 3), ("all 30 names", 30)):
        notes = [{n: rng.choice(values) for n in rng.sample(names, width)} for _ in range(200)]
        t0 = time.perf_counter()
        for c in compiled:
            evaluate = c.evaluate
            for note in notes:
                evaluate(note)
        per = (time.perf_counter() - t0) / (len(compiled) * len(notes))
        print(f"evaluating one against a notification of {label}: {per * 1e6:6.2f} us")


if __name__ == "__main__":
    sys.exit("run bench/router.py --scale / --scale-tcp / --long-compile")
