"""The bundled router for an app that finds none: started in-process at a
loopback URL where nothing answers, so that an app works on a bare machine
(``tickertape`` when no router is chosen, ``elvin-console
--embedded-router``); other local clients can use it while the app runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from elvin.protocol import parse_uri
from elvin.router.embedded import EmbeddedRouter

__all__ = ["answers", "start_where_silent"]

log = logging.getLogger("elvin.router")

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


async def answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """Is something listening on host:port? (a TCP connect, nothing sent)"""
    try:
        async with asyncio.timeout(timeout):
            _reader, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
        await writer.wait_closed()
    return True


async def start_where_silent(url: str, **settings: Any) -> EmbeddedRouter | None:
    """The bundled router listening at ``url`` (``settings`` as
    ``EmbeddedRouter``'s), or None: when ``url`` is not a loopback address,
    something already answers there, or the router cannot start (logged: the
    app still runs, and its connection keeps retrying)."""
    uri = parse_uri(url)
    if uri.host not in LOCAL_HOSTS or await answers(uri.host, uri.port):
        return None
    host = "127.0.0.1" if uri.host == "localhost" else uri.host
    router = EmbeddedRouter(port=uri.port, host=host, **settings)
    try:
        await asyncio.get_running_loop().run_in_executor(None, router.start)
    except Exception as exc:  # noqa: BLE001 - see above
        log.warning("could not start the bundled router at %s: %s", url, exc)
        return None
    log.warning("no router answered at %s: started the bundled router there", router.url)
    return router
