"""A subscription or quench closed while a reconnect restores it stays closed.

The client is connected to a real router through a relay in the test that
can cut the connection (the client reconnects) and hold the router's
replies: so the restore's SubAddRqst/QnchAddRqst reaches the router, the
application closes the subscription and the quench while their replies are
held, and the replies then arrive. The router must end up holding neither
(the client removes what the restore registered for a closed object), and
a later reconnect must not restore them."""

from __future__ import annotations

import asyncio
import struct

import elvin
from elvin.protocol import FrameDecoder, PacketId
from tests.waiting import until

_HELD_REPLIES = {int(PacketId.SUB_RPLY), int(PacketId.QNCH_RPLY)}


class Relay:
    """client <-> relay <-> router, one pair of streams per connection."""

    def __init__(self, router_port: int) -> None:
        self.router_port = router_port
        self.hold = False
        self.held: list[tuple[asyncio.StreamWriter, bytes]] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._pair, "127.0.0.1", 0)
        return f"elvin://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _pair(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter):
        r_reader, r_writer = await asyncio.open_connection("127.0.0.1", self.router_port)
        self.writers += [c_writer, r_writer]
        await asyncio.gather(self._up(c_reader, r_writer), self._down(r_reader, c_writer),
                             return_exceptions=True)
        for writer in (c_writer, r_writer):
            writer.close()

    @staticmethod
    async def _up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
        writer.close()

    async def _down(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            for body in decoder.feed_frames(data):
                framed = struct.pack(">I", len(body)) + body
                if self.hold and body[3] in _HELD_REPLIES:
                    self.held.append((writer, framed))
                else:
                    writer.write(framed)
        writer.close()

    def cut(self) -> None:
        """Every connection goes, as if the router went away."""
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    def release(self) -> None:
        self.hold = False
        held, self.held = self.held, []
        for writer, framed in held:
            writer.write(framed)

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


def router_counts(router) -> tuple[int, int]:
    return router.call(lambda: (len(router.router.engine), len(router.router.quench)))


async def test_closed_while_restoring_stays_closed(router):
    relay = Relay(router.port)
    url = await relay.start()
    conn = await elvin.connect(url, reconnect=True, reconnect_delay=0.05)
    try:
        sub = await conn.subscribe("require(Race)")
        quench = await conn.quench(["Race"])
        assert router_counts(router) == (1, 1)
        relay.hold = True
        relay.cut()
        # the restore's two requests reached the router; their replies are held
        await until(lambda: len(relay.held) == 2, what="the restore's replies")
        await until(lambda: router_counts(router) == (1, 1), what="the old session's end")
        await sub.close()                   # while reconnecting: nothing to send yet
        await quench.close()
        assert sub.closed and quench.closed
        relay.release()
        await until(lambda: conn.state == "open", what="the reconnect")
        await until(lambda: router_counts(router) == (0, 0),
                    what="the router to forget what the restore registered")
        # a later reconnect restores nothing
        relay.cut()
        await until(lambda: conn.reconnects == 2 and conn.state == "open",
                    what="the second reconnect")
        assert router_counts(router) == (0, 0)
    finally:
        await conn.close()
        await relay.close()
