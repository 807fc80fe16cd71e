"""A router that fails to start part-way releases everything it had started
by the same steps as a router that stops (the client listener, the state
directory's lock, the census, the compile workers, the reaper), and counts
as stopped. (Each failure path once listed its own closers; the federation
one forgot the census, the workers, the connection log and the stop.)"""

from __future__ import annotations

import asyncio
import socket

import pytest

from elvin.federation.config import FederationConfig
from elvin.router.config import RouterConfig
from elvin.router.server import Router


def _taken_port() -> tuple[socket.socket, int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder, holder.getsockname()[1]


async def test_a_failed_federation_start_releases_what_the_router_started(tmp_path):
    holder, port = _taken_port()
    try:
        fed = FederationConfig(router_domain="r-fail", listen=[f"ewaf://127.0.0.1:{port}"])
        config = RouterConfig(listen=["elvin://127.0.0.1:0"], federation=fed, discovery=False,
                              state_dir=str(tmp_path / "state"))
        router = Router(config)
        with pytest.raises(Exception):          # noqa: B017 - the bind error, whatever its type
            await router.start()
        # the client listener is closed: nobody can connect to a half router
        assert router.ports == []
        assert router.state_dir is None
        # it went the way of a stop: whoever waits for the router to end
        # (an application's serve_forever task) is not left waiting for ever
        await asyncio.wait_for(router.serve_forever(), 5)
        assert not router.census.counting
        again = Router(RouterConfig(listen=["elvin://127.0.0.1:0"], discovery=False,
                                    state_dir=str(tmp_path / "state")))
        await again.start()                      # the lock was released
        await again.stop()
    finally:
        holder.close()
