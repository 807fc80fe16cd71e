"""Traffic for the private-archive tests: one notification a producer sends
to key holders only, one public, and an archiving router to send them to.

Shared by tests/integration/test_archive_private.py (pyarrow, file modes,
``elvin-archive``) and tests/pipeline/test_private_archive.py (Spark)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from elvin.client import connect
from elvin.keys import Keys
from elvin.router.config import RouterConfig
from elvin.router.embedded import EmbeddedRouter

SECRET = "the launch code is 0000"
GROUP_KEY = b"private tickertape group"
PRIVATE = {"Message": SECRET, "Group": "inner-circle", "From": "alice"}
PUBLIC = {"Message": "lunch at noon", "Group": "everyone", "From": "bob"}

__all__ = ["GROUP_KEY", "PRIVATE", "PUBLIC", "SECRET", "archive_traffic", "send_traffic"]


async def send_traffic(url: str) -> None:
    """The private notification (producer key, ``deliver_insecure`` false)
    and the public one; returns once a key holder has received both."""
    async with connect(url) as consumer, connect(url) as producer:
        sub = await consumer.subscribe(
            "require(Message)", keys=Keys.for_subscription(producer=[GROUP_KEY]))
        await producer.send(PRIVATE, keys=Keys.for_notification(producer=[GROUP_KEY]),
                            deliver_insecure=False)
        await producer.send(PUBLIC)
        got = [await sub.get(timeout=10) for _ in range(2)]
        assert [(dict(n), n.secure) for n in got] == [(PRIVATE, True), (PUBLIC, False)]


def archive_traffic(directory: Path, *, keep_private: bool = False) -> Path:
    """A router archiving in ``directory`` (``archive_private`` per
    ``keep_private``) gets the traffic, then stops: the archive is complete."""
    config = RouterConfig(listen=["elvin://127.0.0.1:0"], discovery=False,
                          archive=str(directory), archive_private=keep_private)
    router = EmbeddedRouter(config=config).start()
    try:
        asyncio.run(send_traffic(router.url))
    finally:
        router.stop()
    return directory
