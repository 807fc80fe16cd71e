"""A move-out proxy whose state was reset (``--state-reset`` moves a damaged
file aside: a new key, no buffers) is told apart from a slow one. A ticket
holds the key the proxy had at the move-out; a request sent with it after
the reset reached no one, and every move-in waited for its timeout, for ever
(a 40-minute chaos run: one client failed 3,384 move-ins). Now the key is
checked with a hello first, and a different one is ``unknown-client``: the
client is attached again, told that what was published while away is lost,
and gets what comes next live (issue 41)."""

from __future__ import annotations

import pytest

from elvin.mobility import MobilityError
from tests.waiting import until

from .test_mobility_crash import elvind as elvind
from .test_mobility_crash import federated_pair, mobile, publish


def _reset(router) -> None:
    """Kill it and start it again once with ``--state-reset``."""
    router.kill()
    args = router.args
    router.args = [*args, "--state-reset"]
    try:
        router.start()
    finally:
        router.args = args


async def _told_and_live(mc, got, call, url: str) -> None:
    with pytest.raises(MobilityError) as raised:
        await call()
    assert raised.value.code == "unknown-client", raised.value
    assert "another key" in str(raised.value) and "lost" in str(raised.value)
    assert mc.state == "connected" and mc.ticket is None
    await publish(url, range(1000, 1010))
    await until(lambda: all(s in got.seen for s in range(1000, 1010)))
    await mc.move_out()               # and moves on as usual
    await publish(url, range(2000, 2010))
    report = await mc.move_in(url)
    assert report.caught_up == 10


async def test_a_move_in_back_at_a_proxy_whose_state_was_reset(elvind):
    a = elvind("A").start()
    mc, got = await mobile(a.url)
    try:
        await mc.move_out()
        await publish(a.url, range(50))
        _reset(a)
        await _told_and_live(mc, got, lambda: mc.move_in(a.url), a.url)
        assert not set(range(50)) & set(got.seen)      # gone with the reset
    finally:
        await mc.close()


async def test_a_move_in_elsewhere_from_a_proxy_whose_state_was_reset(elvind):
    a, b = federated_pair(elvind)
    a.start()
    b.start()
    mc, got = await mobile(a.url)
    try:
        await mc.move_out()
        await publish(a.url, range(50))
        _reset(a)
        await _told_and_live(mc, got, lambda: mc.move_in(b.url), b.url)
        assert "another key" in b.logged()
    finally:
        await mc.close()


@pytest.mark.parametrize("garbage", ["1", 2, b"\x01", 1.0])
async def test_only_a_pin_flag_of_exactly_1_skips_the_check(elvind, garbage):
    """``Mobility.From-Key-Pinned`` is taken only as the integer 1: anything
    else is not a pin, so the ticket's key is still checked (the safe side)."""
    from elvin.client import connect
    from elvin.mobility import protocol as P
    from elvin.mobility.exchange import exchange, hello

    a, b = federated_pair(elvind)
    a.start()
    b.start()
    mc, _got = await mobile(a.url)
    conn = await connect(b.url)
    try:
        ticket = await mc.move_out()
        _reset(a)
        key = await hello(conn, b.url, 10)
        request = {P.REQUEST: P.MOVE_IN, P.PROXY: b.url, P.CLIENT: ticket.client_id,
                   P.SECRET: ticket.secret, P.FROM: ticket.proxy, P.FROM_URL: a.url,
                   P.VIA: P.VIA_DIRECT, P.FROM_KEY: ticket.proxy_key,
                   P.FROM_KEY_PINNED: garbage}
        with pytest.raises(MobilityError) as raised:
            await exchange(conn, request, 20, to_key=key)
        assert raised.value.code == "unknown-client" and "another key" in str(raised.value)
    finally:
        await conn.close()
        await mc.close()
