"""A client redialling a router that is down says so once, and once more
when it is back (elvin.retrylog; issue 32), not a line per attempt."""

from __future__ import annotations

import logging


async def test_a_client_reconnecting_to_a_dead_router_is_quiet(make_router, caplog):
    from elvin.client import connect
    from tests.waiting import until

    caplog.set_level(logging.DEBUG, logger="elvin.client")
    router = make_router()
    conn = await connect(router.url, reconnect=True, reconnect_delay=0.01,
                         reconnect_max_delay=0.02)
    try:
        router.stop()

        def attempts() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.name == "elvin.client"
                    and r.getMessage().startswith("reconnect to")]
        await until(lambda: len(attempts()) >= 20, what="20 reconnect attempts")
        info = [r.getMessage() for r in caplog.records if r.name == "elvin.client"
                and r.levelno >= logging.INFO and r.getMessage().startswith("reconnect to")]
        assert len(info) == 1 and info[0].endswith("; retrying")
        router.start()
        await until(lambda: conn.state == "open", what="the reconnection")
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO
                and "succeeded after" in r.getMessage()]
        assert len(said) == 1 and "failed attempts" in said[0]
    finally:
        await conn.close()
