"""Sending one notification without a session (UNotify, protocol subset A)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl as ssl_module
from collections.abc import Mapping
from typing import Any

from elvin.client.args import keys_arg
from elvin.client.errors import ConnectError
from elvin.client.session import CLIENT_VERSION, client_uri, os_error_text, ssl_context_for
from elvin.keys import Keys
from elvin.protocol import ElvinURI
from elvin.protocol.fastpath import unotify_frame
from elvin.values import check_notification


async def unotify(url: str | ElvinURI, notification: Mapping[str, Any], *,
                  keys: Keys | None = None, deliver_insecure: bool = True,
                  timeout: float = 10,
                  ssl_context: ssl_module.SSLContext | None = None) -> None:
    """Send one notification without a session (UNotify, protocol subset A).

    Delivery is unreliable by design: the router sends nothing back."""
    attributes = check_notification(notification)
    keys = keys_arg(keys, "keys")
    uri = client_uri(url)
    data = unotify_frame(CLIENT_VERSION, attributes, deliver_insecure, keys)
    async with asyncio.timeout(timeout):
        try:
            _reader, writer = await asyncio.open_connection(
                uri.host, uri.port, ssl=ssl_context_for(uri, ssl_context))
        except OSError as exc:
            raise ConnectError(f"cannot connect to {uri}: {os_error_text(exc)}") from None
        try:
            writer.write(data)
            await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
