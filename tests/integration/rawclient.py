"""A minimal Elvin client for router tests: asyncio streams + the codec.

It speaks the protocol packet by packet, so tests can send exactly what they
want (including nonsense) and see exactly what the router answers.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import struct
from collections import deque

from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import (
    ConnRply,
    ConnRqst,
    DisconnRqst,
    Nack,
    NotifyEmit,
    Packet,
    SubAddRqst,
    SubRply,
    decode_packet,
    frame,
)

DEFAULT_TIMEOUT = 5.0


class Closed(Exception):
    """The router closed the channel."""


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._xids = itertools.count(1)
        self._held: deque[Packet] = deque()
        self.closed = False

    @classmethod
    async def open(cls, port: int, host: str = "127.0.0.1", *, rcvbuf: int | None = None,
                   ssl_context: ssl.SSLContext | None = None) -> RawClient:
        if rcvbuf is not None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
            reader, writer = await asyncio.open_connection(sock=sock, limit=2**24)
        else:
            reader, writer = await asyncio.open_connection(
                host, port, ssl=ssl_context, limit=2**24,
                server_hostname=host if ssl_context else None)
        return cls(reader, writer)

    @classmethod
    async def connected(cls, port: int, options: dict | None = None,
                        nfn_keys: Keys = EMPTY_KEYS, sub_keys: Keys = EMPTY_KEYS,
                        **kwargs) -> RawClient:
        client = await cls.open(port, **kwargs)
        reply = await client.connect(options, nfn_keys, sub_keys)
        assert isinstance(reply, ConnRply), reply
        client.conn_reply = reply
        return client

    # -- sending -------------------------------------------------------------------------
    def xid(self) -> int:
        return next(self._xids)

    def send(self, packet: Packet) -> None:
        self.writer.write(frame(packet))

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    async def drain(self) -> None:
        await self.writer.drain()

    def stop_reading(self) -> None:
        """Stop reading from the socket (a stalled consumer)."""
        self.writer.transport.pause_reading()

    def resume_reading(self) -> None:
        self.writer.transport.resume_reading()

    # -- receiving ------------------------------------------------------------------------
    async def _read_packet(self, timeout: float) -> Packet:
        try:
            header = await asyncio.wait_for(self.reader.readexactly(4), timeout)
            (length,) = struct.unpack(">I", header)
            body = await asyncio.wait_for(self.reader.readexactly(length), timeout)
        except asyncio.IncompleteReadError:
            self.closed = True
            raise Closed("the router closed the channel") from None
        except (ConnectionResetError, BrokenPipeError):
            self.closed = True
            raise Closed("the router reset the channel") from None
        return decode_packet(body)

    async def next(self, timeout: float = DEFAULT_TIMEOUT) -> Packet:
        if self._held:
            return self._held.popleft()
        return await self._read_packet(timeout)

    async def expect(self, cls: type, timeout: float = DEFAULT_TIMEOUT) -> Packet:
        """The first packet of type ``cls``; others are kept for later."""
        skipped = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                if self._held:
                    packet = self._held.popleft()
                else:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        raise TimeoutError(f"no {cls.__name__} within {timeout} s "
                                           f"(got {skipped})")
                    packet = await self._read_packet(remaining)
                if isinstance(packet, cls):
                    return packet
                skipped.append(packet)
        finally:
            self._held.extendleft(reversed(skipped))

    async def request(self, packet: Packet, timeout: float = DEFAULT_TIMEOUT) -> Packet:
        """Send a request and return the reply with its xid (others are kept)."""
        self.send(packet)
        xid = packet.xid  # type: ignore[attr-defined]
        skipped = []
        try:
            while True:
                reply = await self._read_packet(timeout)
                if getattr(reply, "xid", None) == xid:
                    return reply
                skipped.append(reply)
        finally:
            self._held.extend(skipped)

    async def nothing(self, timeout: float = 0.3) -> None:
        """Assert that no packet arrives within ``timeout``."""
        if self._held:
            raise AssertionError(f"unexpected packet {self._held[0]!r}")
        try:
            packet = await self._read_packet(timeout)
        except TimeoutError:
            return
        raise AssertionError(f"unexpected packet {packet!r}")

    async def quiet(self, seconds: float) -> list[Packet]:
        """Read everything that arrives within ``seconds``."""
        got = list(self._held)
        self._held.clear()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (remaining := deadline - loop.time()) > 0:
            try:
                got.append(await self._read_packet(remaining))
            except TimeoutError:
                break
        return got

    async def closed_by_router(self, timeout: float = DEFAULT_TIMEOUT) -> list[Packet]:
        """Read until EOF; returns what arrived before it."""
        got = list(self._held)
        self._held.clear()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"the router did not close the channel (got {got})")
            try:
                got.append(await self._read_packet(remaining))
            except Closed:
                return got

    def held(self) -> list[Packet]:
        return list(self._held)

    # -- protocol helpers ------------------------------------------------------------------
    async def connect(self, options: dict | None = None, nfn_keys: Keys = EMPTY_KEYS,
                      sub_keys: Keys = EMPTY_KEYS, major: int = 4, minor: int = 0) -> Packet:
        return await self.request(ConnRqst(self.xid(), major, minor, options or {},
                                           nfn_keys, sub_keys))

    async def subscribe(self, expression: str, accept_insecure: bool = True,
                        keys: Keys = EMPTY_KEYS) -> int:
        reply = await self.request(SubAddRqst(self.xid(), expression, accept_insecure, keys))
        if isinstance(reply, Nack):
            raise AssertionError(f"subscription {expression!r} refused: {reply}")
        assert isinstance(reply, SubRply), reply
        return reply.subscription_id

    def notify(self, attributes: dict, deliver_insecure: bool = True,
               keys: Keys = EMPTY_KEYS) -> None:
        self.send(NotifyEmit(attributes, deliver_insecure, keys))

    async def disconnect(self) -> Packet:
        reply = await self.request(DisconnRqst(self.xid()))
        await self.close()
        return reply

    async def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 2)
        except Exception:  # noqa: BLE001, S110 - a test helper closing: any end will do
            pass

    async def __aenter__(self) -> RawClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
