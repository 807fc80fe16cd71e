"""Outgoing federation links: dial a ``connect`` URL and keep the link up.

After a failure or a Disconn the ``Connector`` redials with exponential
backoff (``reconnect_min`` doubling up to ``reconnect_max``, with a little
jitter), reset once a link is up. Failed dials are logged through
``elvin.retrylog`` (the first one and each new reason at once, then a line
with the count every few minutes, and one when the link is up again), TLS
failures as warnings, so a peer that is down or misconfigured is said
without flooding the log; so is a peer that closes the connection without
answering our FedConnRqst (with TLS 1.3 a listener checks the certificate
we showed after our side of the handshake is done, so a certificate it does
not accept looks like this here: the reason is in the peer's log).
``state``, ``failed_dials`` and ``last_error`` are what ``elvind status``,
the metrics and ``Elvin-Router-Stats`` show.

The connection is made from the connect entry's ``source_address`` when it
has one, so that a peer's ``hosts`` rule can be met on a host with several
addresses.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from typing import Any, Protocol

from elvin.federation.config import ConnectSpec, parse_ewaf_uri
from elvin.federation.link import LINKED, FederationLink, LinkOwner
from elvin.protocol import DisconnReason
from elvin.retrylog import RetryLog

log = logging.getLogger("elvin.federation")

__all__ = ["Connector"]



def dial_error(exc: OSError, secure: bool) -> str:
    """Why a dial failed, in words: the system's, or -- for the bare
    ``ConnectionResetError()`` asyncio raises when the peer closes during
    the TLS handshake -- what that means, rather than nothing at all."""
    said = exc.strerror or str(exc)
    if said:
        return said
    if secure:
        return ("the peer closed the connection during the TLS handshake (is its port a "
                "TLS listener, ewaf:1.0/ssl,...? does it admit this router?)")
    return f"the connection failed ({type(exc).__name__})"

class Dialler(LinkOwner, Protocol):
    """What a connector needs of its federation service: what a link needs,
    whether the service is stopping, and the TLS context to dial with."""

    stopping: bool

    def client_ssl(self, spec: ConnectSpec | None = None) -> ssl.SSLContext: ...


class Connector:
    """Keeps one outgoing link up, redialling with exponential backoff."""

    def __init__(self, service: Dialler, spec: ConnectSpec) -> None:
        self.service = service
        self.spec = spec
        self.link: FederationLink | None = None
        self.failed_dials = 0        # since the router started
        self.last_error: str | None = None
        #: stop() was called: the loop ends even if the cancellation is lost
        #: (3.11's wait_for swallows one that meets a finished dial)
        self._stopped = False
        self._said_up: FederationLink | None = None       # the link whose coming up was said
        #: loop time since when no link of this connector has been up: its
        #: start, or the close of its last link that was (None while one is)
        self._down_since: float | None = asyncio.get_running_loop().time()
        self._retries = RetryLog(log, f"federation link to {spec.url}")
        self._tls_retries = RetryLog(log, f"federation link to {spec.url}",
                                     level=logging.WARNING)
        self.task = asyncio.get_running_loop().create_task(self._run())

    @property
    def state(self) -> str:
        """``linked``, ``connecting`` (dialled, handshake under way) or ``down``."""
        if self.link is None:
            return "down"
        return "linked" if self.link.state == LINKED else "connecting"

    def down_for(self) -> float:
        """Seconds since a link of this connector was last up (or since it
        started, if none was yet); 0 while one is up. Tells a peer that is
        off for a while from a link still coming up after a (re)start."""
        if self._down_since is None:
            return 0.0
        return asyncio.get_running_loop().time() - self._down_since

    def linked(self) -> None:
        """The dialled link is up: the outage is over, said now (not when
        the link closes again). Called by the service when the link is
        established, or by ``_run`` if that came first; once per link."""
        if self._said_up is self.link:
            return
        self._said_up = self.link
        self._down_since = None
        self._retries.succeeded()
        self._tls_retries.succeeded()
        self.last_error = None

    def _failed(self, problem: str, retries: RetryLog | None = None) -> None:
        """One failed dial: counted, and logged by ``RetryLog``."""
        self.failed_dials += 1
        self.last_error = problem
        self.service.stats.redials_failed += 1
        (retries or self._retries).failed(problem)

    async def _run(self) -> None:
        service = self.service
        uri = parse_ewaf_uri(self.spec.url)
        host = uri.host.strip("[]")
        delay = service.config.reconnect_min
        loop = asyncio.get_running_loop()
        while not (service.stopping or self._stopped):
            link = None
            tls: dict[str, Any] = {}
            try:
                if uri.secure:
                    tls = {"ssl": service.client_ssl(self.spec), "server_hostname": host,
                           "ssl_handshake_timeout": service.config.connect_timeout}
                if self.spec.source_address:
                    tls["local_addr"] = (self.spec.source_address, 0)
                _t, link = await asyncio.wait_for(
                    loop.create_connection(lambda: FederationLink(service, "connect", self.spec),
                                           host, uri.port, **tls),
                    service.config.connect_timeout)
            except ssl.SSLError as exc:
                detail = exc.reason or str(exc)
                if isinstance(exc, ssl.SSLCertVerificationError):
                    detail = f"certificate verify failed: {exc.verify_message or detail}"
                self._failed(f"TLS handshake failed: {detail}", self._tls_retries)
            except TimeoutError:
                self._failed(f"no answer within {service.config.connect_timeout:g} s")
            except OSError as exc:
                self._failed(dial_error(exc, uri.secure))
            except Exception as exc:  # noqa: BLE001 - RouterStartError (tls_ca unreadable): reported
                self._failed(str(exc), self._tls_retries)
            if link is not None:
                self.link = link
                if link.established:    # it came up before this task resumed
                    self.linked()
                was_linked = await link.closed
                self.link = None
                if was_linked:          # its success was said when it came up (linked)
                    delay = service.config.reconnect_min
                    self._down_since = loop.time()
                elif not link.answered:
                    self._failed("the router closed the connection without answering our "
                                 "FedConnRqst" + (" (does it accept our certificate?)"
                                                  if uri.secure else ""), self._tls_retries
                                 if uri.secure else None)
                else:
                    self._failed("closed before the link was up")
            if service.stopping or self._stopped:
                return
            pause = delay * (1 + 0.1 * random.random())
            log.debug("federation: redialling %s in %.2f s", self.spec.url, pause)
            await asyncio.sleep(pause)
            delay = min(delay * 2, service.config.reconnect_max)

    async def stop(self) -> None:
        self._stopped = True
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):  # stopping: whatever it ended with
            log.debug("federation: connector task ended", exc_info=True)
        if self.link is not None:
            self.link.close(DisconnReason.SHUTDOWN, "router shutting down")
