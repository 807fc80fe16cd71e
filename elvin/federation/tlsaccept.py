"""The server side of a TLS federation connection, up to its handshake.

A TLS listener could hand asyncio the context (``create_server(ssl=...)``),
but then a handshake that fails -- a router showing a certificate from
another CA, or none when the listener insists -- is dropped without a word
(asyncio logs it in debug mode only), and an administrator is left
wondering why two routers never link. So the listener accepts plain TCP and
runs the handshake itself with ``loop.start_tls``: a failure is logged with
the peer's address and the reason, and counted as a refused link.

``Handshaking`` is the protocol of the connection until then. It stops
reading at once (``start_tls`` takes over the bytes), and while the
handshake finishes it keeps what the peer sends right behind it (a
FedConnRqst can come in the same read as the last handshake message), to
hand it, in order, to the link that takes over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["Handshaking", "HeldBytes"]


class HeldBytes(asyncio.Protocol):
    """The app protocol while ``start_tls`` completes: holds what arrives."""

    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.eof = False
        self.lost: BaseException | None | bool = False

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def eof_received(self) -> bool:
        self.eof = True
        return True                      # the link decides, once it has taken over

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = exc if exc is not None else True

    def hand_over(self, transport: asyncio.Transport, protocol: asyncio.Protocol) -> None:
        """``protocol`` takes over ``transport`` and gets what was held."""
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        for chunk in self.data:
            protocol.data_received(chunk)
        self.data.clear()
        if self.eof and not protocol.eof_received():
            transport.close()
        if self.lost is not False:
            protocol.connection_lost(self.lost if self.lost is not True else None)


class Handshaking(asyncio.Protocol):
    """A TLS listener's protocol until the handshake: ``start(transport)``
    is called with the plain transport, reading paused, to run it."""

    def __init__(self, start: Callable[[asyncio.Transport], Any]) -> None:
        self._start = start

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.pause_reading()        # type: ignore[attr-defined]
        self._start(transport)           # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:  # pragma: no cover - reading is paused
        pass
