""""No client stalls the others" benches for ``bench/router.py --stall``.

Each scenario runs against a fresh ``elvind`` while a *bystander* (its own
process, see ``_registration.Bystander``) measures its publish -> deliver
round trips; printed: the bystander's worst and median round trip, and what
the scenario achieved.

* ``largest``: one client asks for ``Subscription.Max-Length`` beyond the
  router's maximum (granted the maximum) and sends three expressions of
  nearly that length (ORs of equality terms), one after the other.
* ``spread``: as ``largest``, but each term tests a different attribute
  (``A0x1 == 1 || A0x2 == 2 ...``: ~20,000 names to file and index).
* ``burst``: one client sends 10,000 SubAddRqst in one write.
* ``slow-regex``: 500 subscriptions whose regex backtracks until its time
  limit on the notifications a second client publishes (200 of them,
  pipelined): the per-notification evaluation budget must keep each such
  notification from costing 500 x the per-match limit.
* ``fed-huge``: a federated peer (a raw link) sends a FedSubReplace whose
  pull filter is one huge term (an AND holding an OR of 20,000 equality
  tests, ~1 MiB encoded), three times with different constants.
* ``fed-many``: a federated peer sends pull filters of 20,000 terms (the
  most a router compiles) of ~30 characters each, three times.
* ``hangup``: 40 clients each send ConnRqst and an ~8 KB expression (the
  default ``Subscription.Max-Length``) in one write and hang up at once; then
  a fresh client's 400-character subscription: printed, how long it took to
  be acknowledged (its compile must not wait for the hung-up clients').
* ``hangup-long``: the same with 40 clients that negotiated 256 KiB and send
  ~250 KB expressions.
* ``testconn``: a client that negotiated 256 KiB sends a ~200 KB expression
  and then a TestConn: printed, how long the ConfConn took (liveness must
  not wait for the compile), and when the SubRply came.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time
from pathlib import Path

from _common import free_port, open_peer, stop_processes
from _registration import Bystander, connect_counter, register, request_block, start_router

from elvin.protocol import ConnRqst, NotifyEmit, PacketId, SubAddRqst, TestConn, frame
from elvin.subscription import parse

#: the federation listener of the router the ``fed-`` scenarios start
_FED_PORT = 0

#: what the client asks for; the router grants its maximum (options.py)
ASK_MAX_LENGTH = 1 << 20


def _or_of(limit: int, term) -> str:
    """An OR of ``term(0)``, ``term(1)``... as long as ``limit`` allows."""
    terms = []
    size = 0
    for n in itertools.count():
        text = term(n)
        if size + len(text) + 4 > limit:
            break
        terms.append(text)
        size += len(text) + 4
    return " || ".join(terms)


def _largest(limit: int, i: int) -> str:
    """An OR of equality terms on one attribute as long as the limit allows."""
    return _or_of(limit, lambda n: f'Group == "big{i}-{n:06d}"')


def _spread(limit: int, i: int) -> str:
    """An OR of equality terms on as many different attributes as fit: the
    index files it under one name per operand."""
    return _or_of(limit, lambda n: f"A{i}x{n} == {n}")


async def _scenario_largest(port: int) -> str:
    peer = await connect_counter(port, {"Subscription.Max-Length": ASK_MAX_LENGTH})
    granted = 256 * 1024            # options.py: the router's maximum
    texts = [_largest(granted, i) for i in range(3)]
    elapsed = await register([peer], [request_block(texts)], [3], 120)
    peer.transport.close()
    return (f"3 expressions of {len(texts[0]):,} characters acknowledged in "
            f"{elapsed:.2f} s (Nacks: {peer.nacks})")


async def _scenario_spread(port: int) -> str:
    peer = await connect_counter(port, {"Subscription.Max-Length": ASK_MAX_LENGTH})
    ordinary = await connect_counter(port)
    texts = [_spread(256 * 1024, i) for i in range(3)]
    huge = asyncio.ensure_future(register([peer], [request_block(texts)], [3], 120))
    await asyncio.sleep(0.2)
    # meanwhile an ordinary client's 400-character expression (off the loop too)
    medium = " || ".join(f'Group == "an ordinary group, number {i}"' for i in range(10))
    waited = await register([ordinary], [request_block([medium])], [1], 120)
    elapsed = await huge
    for each in (peer, ordinary):
        each.transport.close()
    return (f"3 expressions of {len(texts[0]):,} characters on distinct attributes "
            f"acknowledged in {elapsed:.2f} s (Nacks: {peer.nacks}); meanwhile one of "
            f"{len(medium)} characters in {waited * 1e3:.0f} ms")


async def _scenario_burst(port: int) -> str:
    n = 10_000
    peer = await connect_counter(port, {"Subscription.Max-Count": n + 16})
    texts = [f'Group == "burst{i}" && require(Message)' for i in range(n)]
    elapsed = await register([peer], [request_block(texts)], [n], 120)
    peer.transport.close()
    return f"{n:,} subscriptions in one write acknowledged in {elapsed:.2f} s ({n / elapsed:,.0f}/s)"


async def _scenario_slow_regex(port: int) -> str:
    subs = 500
    notes = 200
    peer = await connect_counter(port, {"Subscription.Max-Count": subs + 16})
    # backtracks exponentially on "aaa...ab" (no possessive help in the engine)
    texts = [f'regex(Message, "^(a|aa|a{i % 7 + 1})+$")' for i in range(subs)]
    await register([peer], [request_block(texts)], [subs], 120)
    consumer = await open_peer(port)
    await consumer.request(SubAddRqst(2, "require(Done)"))
    done = asyncio.Event()
    consumer.on_deliver = lambda body: done.set()
    producer = await open_peer(port)
    message = "a" * 40 + "b"
    start = time.perf_counter()
    producer.transport.write(b"".join(frame(NotifyEmit({"Message": message, "N": i}))
                                      for i in range(notes)))
    producer.transport.write(frame(NotifyEmit({"Done": 1})))
    await asyncio.wait_for(done.wait(), 300)
    elapsed = time.perf_counter() - start
    for p in (peer, consumer, producer):
        p.transport.close()
    return (f"{notes} notifications against {subs} slow-regex subscriptions: "
            f"{elapsed / notes * 1e3:.1f} ms each")


async def _replace_pulls(filters: list) -> str:
    """Link to the router as a raw peer and have it take each pull filter in
    turn (FedSubReplace, then wait for its Ack or Nack)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from integration.federation_util import RawFederator  # type: ignore[import-not-found]

    from elvin.federation.packets import Ack, FedSubReplace
    from elvin.protocol import Nack

    peer = await RawFederator.linked(f"ewaf://127.0.0.1:{_FED_PORT}", "bench-peer")
    answers = []
    start = time.perf_counter()
    for xid, pull in enumerate(filters, 100):
        peer.send(FedSubReplace(xid, pull))
        while True:
            answer = await peer.next(300)
            if isinstance(answer, (Ack, Nack)) and answer.xid == xid:
                answers.append(type(answer).__name__)
                break
    elapsed = time.perf_counter() - start
    await peer.close()
    return f"{len(filters)} pull filters answered in {elapsed:.2f} s ({', '.join(answers)})"


async def _scenario_fed_huge(port: int) -> str:
    filters = [parse(f"Kind == {i} && (" + " || ".join(
        f'Group == "huge{i}-{n:05d}"' for n in range(20_000)) + ")") for i in range(3)]
    return "one huge term: " + await _replace_pulls(filters)


async def _scenario_fed_many(port: int) -> str:
    filters = [parse(" || ".join(f'Group == "m{i}-{n:05d}" && Kind > {n}'
                                 for n in range(20_000)))
               for i in range(3)]
    return "20,000 terms each: " + await _replace_pulls(filters)


def _hangup_text(limit: int, i: int) -> str:
    """An expression of nearly ``limit`` characters that costs a real compile:
    an OR of two-test terms, each on its own constant."""
    return _or_of(limit - 64, lambda n: f'(Group == "hang{i}-{n:05d}" && Seq > {n})')


#: what the fresh client subscribes with (about 400 characters)
_MEDIUM = " || ".join(f'Group == "an ordinary group, number {i}"' for i in range(10))


async def _hang_up(port: int, count: int, limit: int, options: dict) -> None:
    """``count`` clients each write ConnRqst and one expression of ~``limit``
    characters in one go and close at once (never reading a reply)."""
    loop = asyncio.get_running_loop()
    for i in range(count):
        transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
        transport.write(frame(ConnRqst(1, 4, 0, options))
                        + frame(SubAddRqst(2, _hangup_text(limit, i))))
        transport.close()


async def _scenario_hangup_common(port: int, limit: int, options: dict) -> str:
    fresh = await connect_counter(port)
    texts_size = len(_hangup_text(limit, 0))
    await _hang_up(port, 40, limit, options)
    await asyncio.sleep(0.05)       # the router has read them (and the hang-ups)
    waited = await register([fresh], [request_block([_MEDIUM])], [1], 600)
    fresh.transport.close()
    said = (f"40 clients sent {texts_size:,}-character expressions and hung up; a fresh "
            f"client's {len(_MEDIUM)}-character subscription acknowledged in "
            f"{waited * 1e3:.0f} ms (Nacks: {fresh.nacks})")
    if options:
        # a client of the same lane: its 16 KB expression must not wait for theirs
        same = await connect_counter(port, options)
        text = _hangup_text(16 * 1024, 99)
        waited = await register([same], [request_block([text])], [1], 900)
        same.transport.close()
        said += (f"; another's {len(text):,}-character one (the same lane) in "
                 f"{waited * 1e3:.0f} ms")
    return said


async def _scenario_hangup(port: int) -> str:
    return await _scenario_hangup_common(port, 8 * 1024, {})


async def _scenario_hangup_long(port: int) -> str:
    return await _scenario_hangup_common(port, 250 * 1024,
                                         {"Subscription.Max-Length": ASK_MAX_LENGTH})


class _Liveness(asyncio.Protocol):
    """Notes when the ConfConn and the SubRply (or Nack) arrive."""

    def __init__(self) -> None:
        from elvin.protocol import FrameDecoder
        self.decoder = FrameDecoder()
        self.transport = None
        self.connected = asyncio.get_running_loop().create_future()
        self.conf_conn = asyncio.get_running_loop().create_future()
        self.reply = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        for body in self.decoder.feed_frames(data):
            pid = body[3]
            if pid == PacketId.CONN_RPLY and not self.connected.done():
                self.connected.set_result(now)
            elif pid == PacketId.CONF_CONN and not self.conf_conn.done():
                self.conf_conn.set_result(now)
            elif pid in (PacketId.SUB_RPLY, PacketId.NACK) and not self.reply.done():
                self.reply.set_result((now, pid))


async def _scenario_testconn(port: int) -> str:
    loop = asyncio.get_running_loop()
    _, peer = await loop.create_connection(_Liveness, "127.0.0.1", port)
    peer.transport.write(frame(ConnRqst(1, 4, 0, {"Subscription.Max-Length": ASK_MAX_LENGTH})))
    await asyncio.wait_for(peer.connected, 30)
    text = _hangup_text(200 * 1024, 0)
    peer.transport.write(frame(SubAddRqst(2, text)))
    await asyncio.sleep(0.1)          # the compile is under way
    sent = time.perf_counter()
    peer.transport.write(frame(TestConn()))
    conf = await asyncio.wait_for(peer.conf_conn, 600)
    done, pid = await asyncio.wait_for(peer.reply, 600)
    peer.transport.close()
    answer = "SubRply" if pid == PacketId.SUB_RPLY else "Nack"
    return (f"TestConn behind a {len(text):,}-character expression: ConfConn after "
            f"{(conf - sent) * 1e3:.0f} ms; the {answer} after {(done - sent) * 1e3:.0f} ms")


SCENARIOS = {"largest": _scenario_largest, "spread": _scenario_spread, "burst": _scenario_burst,
             "slow-regex": _scenario_slow_regex, "fed-huge": _scenario_fed_huge,
             "fed-many": _scenario_fed_many, "hangup": _scenario_hangup,
             "hangup-long": _scenario_hangup_long, "testconn": _scenario_testconn}


def run_stall(names: list[str]) -> None:
    print(f"== no client stalls the others (a bystander's publish -> deliver round trip); "
          f"load {os.getloadavg()[0]:.2f}")
    global _FED_PORT
    for name in names:
        port = free_port()
        if name.startswith("fed-"):
            _FED_PORT = free_port()
            proc = start_router(port, "--federation-listen", f"ewaf://127.0.0.1:{_FED_PORT}",
                                "--federation-domain", "bench", "--federation-accept-any")
        else:
            proc = start_router(port)
        try:
            with Bystander(port) as bystander:
                what = asyncio.run(SCENARIOS[name](port))
        finally:
            stop_processes([proc])
        b = bystander.result
        print(f"{name:<11} bystander worst {b.get('worst', float('nan')) * 1e3:8.1f} ms   "
              f"p50 {b.get('p50', float('nan')) * 1e3:6.2f} ms   "
              f"({b.get('count', 0)} round trips); {what}")
