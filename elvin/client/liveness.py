"""Liveness: finding out that a silent router is gone, and answering its probes.

A channel can die without either end hearing of it (a cable pulled, a NAT
entry expired). With ``keepalive`` set, a session that has received nothing
for that many seconds sends a TestConn; any traffic counts as the answer
(the router replies with ConfConn). No traffic within the reply timeout
ends the session as lost, which a reconnecting connection then repairs.
The router may probe us the same way: a TestConn is answered at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from elvin.client.events import CloseReason
from elvin.client.session import Session
from elvin.protocol import frame_packet
from elvin.protocol import packets as pk

log = logging.getLogger("elvin.client")

_TEST_CONN_FRAME = frame_packet(pk.TestConn())
_CONF_CONN_FRAME = frame_packet(pk.ConfConn())


def answer_test_conn(session: Session) -> None:
    """The router asks whether we are still there."""
    session.write(_CONF_CONN_FRAME)


def start_keepalive(session: Session, interval: float, reply_timeout: float, peer: str,
                    on_probe: Callable[[], None]) -> None:
    """Probe ``session`` whenever it has been idle for ``interval`` seconds,
    until it ends; ``on_probe()`` is called for each TestConn sent."""
    session.keepalive_task = session.loop.create_task(
        _keepalive(session, interval, reply_timeout, peer, on_probe))


async def _keepalive(session: Session, interval: float, reply_timeout: float, peer: str,
                     on_probe: Callable[[], None]) -> None:
    loop = session.loop
    try:
        while not session.lost.done():
            idle = loop.time() - session.last_received
            if idle < interval:
                await asyncio.sleep(interval - idle)
                continue
            sent_at = loop.time()
            session.write(_TEST_CONN_FRAME)
            on_probe()
            await asyncio.sleep(reply_timeout)
            if session.last_received < sent_at and not session.lost.done():
                log.warning("no reply to TestConn from %s within %.1f s", peer, reply_timeout)
                session.abort(CloseReason(
                    "lost", f"no traffic from the router within {reply_timeout:g} s of a "
                    "TestConn"))
                return
    except asyncio.CancelledError:
        pass
