"""After a session ends: reconnect (or follow a redirect) and restore state.

A session that ends other than by ``close()`` is followed by a new one when
the connection reconnects (``reconnect=True``) or the router redirected it
(which must be followed even without ``reconnect``, spec 7.4.7). The new
session is tried at the redirect target, the current router and the one
first connected to, with a growing delay between rounds. Once it is up,
every open subscription and quench is registered again; the application's
objects stay the same, only their router ids change. Anything else ends the
connection, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from elvin.client._stream import call_listener
from elvin.client.errors import ConnectionClosedError, QuenchNotSupported
from elvin.client.events import CloseReason
from elvin.client.redirects import RedirectGuard, follow_redirects
from elvin.client.registry import Registry
from elvin.client.session import Session, client_uri
from elvin.errors import ElvinError
from elvin.retrylog import RetryLog

if TYPE_CHECKING:
    from elvin.client.connection import Connection

log = logging.getLogger("elvin.client")


class Reconnector:
    """Decides what follows a lost session, and carries it out."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.task: asyncio.Task | None = None
        self._redirects = RedirectGuard()
        #: the failed attempts of an outage, per router tried: the first one
        #: and every few minutes in the log, not a line per attempt (elvin.retrylog)
        self._retries: dict[str, RetryLog] = {}

    def after_loss(self, reason: CloseReason) -> None:
        """The open connection's session ended for ``reason``."""
        conn = self.conn
        redirect = reason.kind == "redirect" and reason.redirect
        if redirect:
            looping = self._redirects.loop_reason(reason)
            if looping is not None:
                conn._finalize(looping)
                return
        if conn.reconnect or redirect:
            conn.state = "reconnecting"
            conn._ready.clear()
            self.task = asyncio.get_running_loop().create_task(self._run(reason))
        else:
            conn._finalize(reason)

    def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()

    async def _run(self, reason: CloseReason) -> None:
        conn = self.conn
        delay = conn.reconnect_delay
        attempts = 0
        redirect = reason.redirect if reason.kind == "redirect" else None
        last_error: BaseException | None = None
        while conn.state == "reconnecting":
            candidates = []
            if redirect:
                with contextlib.suppress(ValueError):
                    candidates.append(client_uri(redirect))
                redirect = None
            if conn.reconnect:   # else only the redirect is followed
                candidates.append(conn.uri)
                if conn._home_uri != conn.uri:
                    candidates.append(conn._home_uri)
            for uri in candidates:
                try:
                    await follow_redirects(conn._establish, uri)
                    await self.restore(conn._session)
                except asyncio.CancelledError:
                    raise
                except (OSError, ElvinError, TimeoutError) as exc:
                    last_error = exc
                    retries = self._retries.get(str(uri))
                    if retries is None:
                        retries = self._retries[str(uri)] = RetryLog(log,
                                                                     f"reconnect to {uri}")
                    retries.failed(exc)
                    if conn._session is not None and conn._session.transport is not None:
                        conn._session.abort(CloseReason("lost", "restore failed"))
                    conn._session = None
                    continue
                worked = self._retries.pop(str(uri), None)
                if worked is not None:
                    worked.succeeded()
                self._retries.clear()
                conn.state = "open"
                conn.reconnects += 1
                conn._ready.set()
                for fn in conn._reconnect_listeners:
                    call_listener(fn, conn)
                return
            attempts += 1
            if not conn.reconnect:
                # the redirect could not be followed: closed, for that reason
                conn._finalize(CloseReason(
                    "redirect", f"{reason.message}; cannot connect there: "
                    f"{last_error or 'not a usable URI'}",
                    reason.disconn_reason, redirect=reason.redirect, error=last_error))
                return
            if conn.reconnect_attempts is not None and attempts >= conn.reconnect_attempts:
                conn._finalize(CloseReason("reconnect-failed",
                                           f"gave up after {attempts} attempts: {last_error}",
                                           error=last_error))
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, conn.reconnect_max_delay)

    async def restore(self, session: Session) -> None:
        """Re-register subscriptions and quenches in a new session."""
        tables: list[Registry] = [self.conn._subs, self.conn._quenches]
        work = [(table, obj) for table in tables for obj in table.forget_ids()]
        if not work:
            return
        results = await asyncio.gather(*(table.register(session, obj) for table, obj in work),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, (ConnectionClosedError, OSError, TimeoutError)):
                raise result
        for (table, obj), result in zip(work, results, strict=True):
            if isinstance(result, BaseException):
                # the new router refuses it (e.g. a different language
                # version, or no quench at all): end it rather than leave it
                # silently dead. Auto-quench's own quench is its business.
                if isinstance(result, QuenchNotSupported):
                    if not obj._internal:
                        log.warning("%s does not support quench (%s): the quench on %s "
                                    "is ended", self.conn.url, result.message,
                                    ", ".join(sorted(obj.names)))
                else:
                    log.error("could not restore %r after reconnecting: %s", obj, result)
                table.discard(obj)
