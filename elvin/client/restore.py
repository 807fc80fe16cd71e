"""After a session ends: reconnect (or follow a redirect) and restore state.

A session that ends other than by ``close()`` is followed by a new one when
the connection reconnects (``reconnect=True``) or the router redirected it
(which must be followed even without ``reconnect``, spec 7.4.7). The new
session is tried at the redirect target, then (``_routers``) the current
router and the one first connected to or, when the application named
several routers, the others first (failover) and the lost one last; rounds
are apart by a delay that doubles up to ``max_delay``, each randomised by
+-50 % (jitter) so that the clients of a router that went do not all
arrive at the next one in step. Once it is up,
every open subscription and quench is registered again; the application's
objects stay the same, only their router ids change. Anything else ends the
connection, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence

from elvin.client.core import ReconnectingCore
from elvin.client.errors import ConnectionClosedError
from elvin.client.events import CloseReason
from elvin.client.redirects import RedirectGuard, follow_redirects
from elvin.client.registry import Registry
from elvin.client.session import Session, client_uri
from elvin.errors import ElvinError
from elvin.retrylog import RetryLog

log = logging.getLogger("elvin.client")


class Reconnector:
    """Decides what follows a lost session, and carries it out, through
    ``core`` (``core.ReconnectingCore``); ``tables`` are what it restores."""

    def __init__(self, core: ReconnectingCore, tables: Sequence[Registry]) -> None:
        self.core = core
        self.tables = tuple(tables)
        self.task: asyncio.Task | None = None
        self._redirects = RedirectGuard()
        #: the failed attempts of an outage, per router tried: the first one
        #: and every few minutes in the log, not a line per attempt (elvin.retrylog)
        self._retries: dict[str, RetryLog] = {}

    def after_loss(self, reason: CloseReason) -> None:
        """The open connection's session ended for ``reason``."""
        core = self.core
        redirect = reason.kind == "redirect" and reason.redirect
        if redirect:
            looping = self._redirects.loop_reason(reason)
            if looping is not None:
                core.finalize(looping)
                return
        if core.reconnect_policy.enabled or redirect:
            core.reconnecting()
            self.task = asyncio.get_running_loop().create_task(self._run(reason))
        else:
            core.finalize(reason)

    def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()

    async def _run(self, reason: CloseReason) -> None:
        core = self.core
        delay = core.reconnect_policy.delay
        attempts = 0
        redirect = reason.redirect if reason.kind == "redirect" else None
        last_error: BaseException | None = None
        while core.state == "reconnecting":
            policy = core.reconnect_policy
            candidates = []
            if redirect:
                with contextlib.suppress(ValueError):
                    candidates.append(client_uri(redirect))
                redirect = None
            if policy.enabled:   # else only the redirect is followed
                candidates.extend(_routers(core))
            for uri in candidates:
                session: Session | None = None
                try:
                    session = await follow_redirects(core.establish, uri)
                    await self.restore(session)
                except asyncio.CancelledError:
                    raise
                except (OSError, ElvinError, TimeoutError) as exc:
                    last_error = exc
                    retries = self._retries.get(str(uri))
                    if retries is None:
                        retries = self._retries[str(uri)] = RetryLog(log,
                                                                     f"reconnect to {uri}")
                    retries.failed(exc)
                    if session is not None:
                        core.abandon(session, CloseReason("lost", "restore failed"))
                    continue
                worked = self._retries.pop(str(uri), None)
                if worked is not None:
                    worked.succeeded()
                self._retries.clear()
                core.reconnected()
                return
            attempts += 1
            policy = core.reconnect_policy
            if not policy.enabled:
                # the redirect could not be followed: closed, for that reason
                core.finalize(CloseReason(
                    "redirect", f"{reason.message}; cannot connect there: "
                    f"{last_error or 'not a usable URI'}",
                    reason.disconn_reason, redirect=reason.redirect, error=last_error))
                return
            if policy.attempts is not None and attempts >= policy.attempts:
                core.finalize(CloseReason("reconnect-failed",
                                          f"gave up after {attempts} attempts: {last_error}",
                                          error=last_error))
                return
            await asyncio.sleep(jittered(delay, policy.max_delay))
            delay = min(delay * 2, policy.max_delay)

    async def restore(self, session: Session) -> None:
        """Re-register subscriptions and quenches in a new session. A
        connection failure raises (the session is no use); an object the
        new router refuses is ended by its table (``Registry.refused``)."""
        work = [(table, obj) for table in self.tables for obj in table.forget_ids()]
        if not work:
            return
        results = await asyncio.gather(*(table.register(session, obj) for table, obj in work),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, (ConnectionClosedError, OSError, TimeoutError)):
                raise result
        for (table, obj), result in zip(work, results, strict=True):
            if isinstance(result, BaseException):
                table.refused(obj, result)


def jittered(delay: float, max_delay: float, rng: random.Random | None = None) -> float:
    """``delay`` randomised by +-50 %, at most ``max_delay``: the clients
    that lost one router spread out over the next instead of arriving in
    step (and a round's doubling still sets the scale)."""
    return min(delay * (rng or random).uniform(0.5, 1.5), max_delay)


def _routers(core: ReconnectingCore) -> list:
    """Where to look for a new session, in order: with one router named,
    the current one (maybe a redirect's target) and then that one; with
    several, the ones after the current in the application's list, then
    those before it, the current last (it has just gone)."""
    uris = list(core.uris)
    current = core.uri
    if len(uris) == 1:
        return [current] if current == uris[0] else [current, uris[0]]
    if current not in uris:             # a redirect led elsewhere: there, then the list
        return [current, *uris]
    i = uris.index(current)
    return [*uris[i + 1:], *uris[:i], current]
