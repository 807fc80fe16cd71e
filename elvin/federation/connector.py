"""Outgoing federation links: dial a ``connect`` URL and keep the link up.

After a failure or a Disconn the ``Connector`` redials with exponential
backoff (``reconnect_min`` doubling up to ``reconnect_max``, with a little
jitter), reset once a link is up. A TLS handshake that fails is logged once
per link with its URL (repeats at debug level), so a misconfigured peer does
not flood the log; so is a peer that closes the connection without
answering our FedConnRqst (with TLS 1.3 a listener checks the certificate
we showed after our side of the handshake is done, so a certificate it does
not accept looks like this here: the reason is in the peer's log).

The connection is made from the connect entry's ``source_address`` when it
has one, so that a peer's ``hosts`` rule can be met on a host with several
addresses.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from typing import TYPE_CHECKING, Any

from elvin.federation.config import ConnectSpec, parse_ewaf_uri
from elvin.federation.link import Link
from elvin.protocol import DisconnReason

if TYPE_CHECKING:
    from elvin.federation.service import FederationService

log = logging.getLogger("elvin.federation")

__all__ = ["Connector"]


class Connector:
    """Keeps one outgoing link up, redialling with exponential backoff."""

    def __init__(self, service: FederationService, spec: ConnectSpec) -> None:
        self.service = service
        self.spec = spec
        self.link: Link | None = None
        self._reported = ""          # the last failure logged as a warning
        self.task = asyncio.get_running_loop().create_task(self._run())

    def _failed(self, problem: str) -> None:
        """Log a TLS failure as a warning once (repeats at debug level)."""
        message = f"federation link to {self.spec.url}: {problem}"
        if message != self._reported:
            self._reported = message
            log.warning("%s; will retry", message)
        else:
            log.debug("%s", message)

    async def _run(self) -> None:
        service = self.service
        uri = parse_ewaf_uri(self.spec.url)
        host = uri.host.strip("[]")
        delay = service.config.reconnect_min
        loop = asyncio.get_running_loop()
        while not service.stopping:
            link = None
            tls: dict[str, Any] = {}
            try:
                if uri.secure:
                    tls = {"ssl": service.client_ssl(self.spec), "server_hostname": host,
                           "ssl_handshake_timeout": service.config.connect_timeout}
                if self.spec.source_address:
                    tls["local_addr"] = (self.spec.source_address, 0)
                _t, link = await asyncio.wait_for(
                    loop.create_connection(lambda: Link(service, "connect", self.spec),
                                           host, uri.port, **tls),
                    service.config.connect_timeout)
            except ssl.SSLError as exc:
                detail = exc.reason or str(exc)
                if isinstance(exc, ssl.SSLCertVerificationError):
                    detail = f"certificate verify failed: {exc.verify_message or detail}"
                self._failed(f"TLS handshake failed: {detail}")
            except (TimeoutError, OSError) as exc:
                log.debug("federation connect to %s failed: %s", self.spec.url, exc)
            except Exception as exc:       # RouterStartError: tls_ca cannot be loaded
                self._failed(str(exc))
            if link is not None:
                self.link = link
                was_linked = await link.closed
                self.link = None
                if was_linked:
                    self._reported = ""
                    delay = service.config.reconnect_min
                elif not link.answered:
                    self._failed("the router closed the connection without answering our "
                                 "FedConnRqst" + (" (does it accept our certificate?)"
                                                  if uri.secure else ""))
            if service.stopping:
                return
            pause = delay * (1 + 0.1 * random.random())
            log.debug("federation: redialling %s in %.2f s", self.spec.url, pause)
            await asyncio.sleep(pause)
            delay = min(delay * 2, service.config.reconnect_max)

    async def stop(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):
            pass
        if self.link is not None:
            self.link.close(DisconnReason.SHUTDOWN, "router shutting down")
