"""Redirects: a router sending the client to another one (Disconn reason 2).

A client receiving a redirect MUST attempt to connect there (spec 7.4.7),
whether it comes in answer to ConnRqst or in the middle of a session. Two
misconfigured routers can send a client back and forth for ever, so both
kinds are bounded: at most ``MAX_REDIRECTS`` in a row while connecting, and
at most that many mid-session redirects within ``REDIRECT_WINDOW`` seconds
(the spec allows detecting such a loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from elvin.client.errors import ConnectionClosedError
from elvin.client.events import CloseReason
from elvin.client.session import client_uri
from elvin.protocol import ElvinURI

T = TypeVar("T")

MAX_REDIRECTS = 5
#: more than MAX_REDIRECTS mid-session redirects within this many seconds is a loop
REDIRECT_WINDOW = 30.0


class Redirected(Exception):
    """The router answered ConnRqst by sending us to ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url
        super().__init__(f"redirected to {url}")

    @classmethod
    def check(cls, exc: ConnectionClosedError) -> None:
        """Raise Redirected if ``exc`` closed the channel with a redirect."""
        reason = exc.reason
        if reason is not None and reason.kind == "redirect" and reason.redirect:
            raise cls(reason.redirect) from None


async def follow_redirects(establish: Callable[[ElvinURI], Awaitable[T]], uri: ElvinURI) -> T:
    """``establish(uri)``, then wherever the routers redirect to, up to
    ``MAX_REDIRECTS`` times (ConnectionClosedError beyond that); what the
    last ``establish`` returned (the session)."""
    seen = []
    while True:
        try:
            return await establish(uri)
        except Redirected as redirect:
            seen.append(uri)
            if len(seen) > MAX_REDIRECTS:
                raise ConnectionClosedError(
                    f"too many redirections ({' -> '.join(map(str, seen))})") from None
            try:
                uri = client_uri(redirect.url)
            except ValueError as exc:
                raise ConnectionClosedError(
                    f"router redirected to a bad URI {redirect.url!r}: {exc}") from None


class RedirectGuard:
    """Counts mid-session redirects to tell a loop between routers."""

    def __init__(self) -> None:
        self._times: list[float] = []

    def loop_reason(self, reason: CloseReason) -> CloseReason | None:
        """Note the redirect ``reason``; the reason to give up with when
        redirects come so often that the routers send the client round in
        circles, else None."""
        now = asyncio.get_running_loop().time()
        self._times = [t for t in self._times if now - t < REDIRECT_WINDOW]
        self._times.append(now)
        if len(self._times) <= MAX_REDIRECTS:
            return None
        return CloseReason("redirect", f"too many redirections (more than {MAX_REDIRECTS} "
                           f"within {REDIRECT_WINDOW:g} s), the last to {reason.redirect}",
                           reason.disconn_reason, redirect=reason.redirect)
