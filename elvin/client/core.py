"""The contract between a ``Connection`` and the parts it is made of.

``Connection`` (``connection.py``) is the application's handle. The parts
that do one job each for it -- the tables of subscriptions and quenches
(``registry.py``, ``subscription.py``, ``quench.py``), auto-quench
(``autoquench.py``) and the reconnector (``restore.py``) -- never see the
``Connection`` itself: they are given a core object that satisfies one of the
two protocols below, and use nothing else of it. ``connection.ConnectionCore``
is the implementation; a test can hand a part a core of its own and drive
it without a router or a socket.

``ClientCore`` is what the tables and auto-quench use: the current session
and lifecycle state, waiting for a usable session, sending a request in a
session, and the two facts they read or learn (the connection's keys, and
whether the router has quench).

``ReconnectingCore`` adds what only the reconnector does: open a new
session, and move the connection between its lifecycle states.

The lifecycle (``state``), and what moves it:

====================  ================  =================================================
from                  to                by
====================  ================  =================================================
connecting            open, closed      ``Connection.open`` (the first session, or not)
open                  reconnecting      ``reconnecting()``: a lost session to replace
open                  closed            ``finalize(reason)``: lost, and no reconnecting
reconnecting          open              ``reconnected()``: a new session, all restored
reconnecting          closed            ``finalize(reason)``: given up
any but closed        closing, closed   ``Connection.close``
====================  ================  =================================================

The application's calls make the transitions of the first and last rows;
the reconnector makes the others, through ``ReconnectingCore`` alone. The
same moves, as data, are ``elvin.protocol.states.CLIENT_LIFECYCLE``, which
``connection.ConnectionCore`` consults for each one: a move not in it is a
bug and raises ``IllegalEvent``. (One session's own protocol states, which
packet is legal when, are the ``CLIENT`` table, kept by ``session_core``.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol

from elvin.client.events import CloseReason
from elvin.client.session import Session
from elvin.keys import Keys
from elvin.protocol import ElvinURI

__all__ = ["ClientCore", "ReconnectPolicy", "ReconnectingCore"]


class ReconnectPolicy(NamedTuple):
    """How hard to try after a session is lost (``connect(reconnect=...)``)."""

    #: reconnect at all (a redirect is followed even without it, spec 7.4.7)
    enabled: bool
    #: seconds between the first rounds of attempts; doubled after each round...
    delay: float
    #: ...up to this
    max_delay: float
    #: give up after this many rounds (None: never)
    attempts: int | None


class ClientCore(Protocol):
    """A connection as its tables and auto-quench see it."""

    @property
    def url(self) -> str:
        """The router's URI, for messages."""
        ...

    @property
    def state(self) -> str:
        """``"connecting"``, ``"open"``, ``"reconnecting"``, ``"closing"`` or
        ``"closed"`` (the diagram above)."""
        ...

    @property
    def session(self) -> Session | None:
        """The current session: None between sessions (while reconnecting,
        or once closed). It may be closing; ``live_session`` waits for a good one."""
        ...

    @property
    def notification_keys(self) -> Keys:
        """The connection-level notification keys (they change with ``set_keys``)."""
        ...

    supports_quench: bool | None
    """Whether the current router has quench: None until a quench request is
    answered. A QnchRply makes the quench table set it True."""

    def live_session(self) -> Awaitable[Session]:
        """The current session once it is open: at once while the connection
        is open, else after a reconnection (up to the connection's timeout).
        ``ConnectionClosedError`` if the connection is closed or does not
        come back in time."""
        ...

    def request(self, session: Session, make: Callable[[int], Any], expect: tuple,
                on_reply: Callable[[Any], object] | None = None,
                on_late: Callable[[Any], object] | None = None, *,
                expression: str | None = None) -> Awaitable[Any]:
        """Send ``make(xid)`` in ``session`` and return its reply, within the
        connection's timeout (``session.requests.request`` says the rest:
        ``on_reply`` runs as the reply is dispatched, ``on_late`` if it comes
        after the caller gave up; ``expression`` is a subscription's text for
        the caret of a Nack)."""
        ...


class ReconnectingCore(ClientCore, Protocol):
    """A connection as its reconnector sees it: a ``ClientCore`` that can
    open sessions and whose lifecycle the reconnector moves."""

    @property
    def uri(self) -> ElvinURI:
        """The router of the last session (where a redirect led, maybe)."""
        ...

    @property
    def home_uri(self) -> ElvinURI:
        """The router the application asked for first."""
        ...

    @property
    def uris(self) -> tuple[ElvinURI, ...]:
        """Every router the application named, in its order (failover)."""
        ...

    @property
    def reconnect_policy(self) -> ReconnectPolicy:
        """The application's reconnection settings, as they are now."""
        ...

    def establish(self, uri: ElvinURI) -> Awaitable[Session]:
        """A new session at ``uri`` (connected, ConnRqst answered, options
        agreed), which becomes the current one. Raises
        ``redirects.Redirected`` when the router sends the client elsewhere,
        else ``ElvinError``, ``OSError`` or ``TimeoutError``."""
        ...

    def abandon(self, session: Session, reason: CloseReason) -> None:
        """``session`` (just established) is no use: close it for ``reason``,
        and it is no longer the current one."""
        ...

    def reconnecting(self) -> None:
        """open -> reconnecting: the session was lost and another is sought;
        ``live_session`` callers wait meanwhile."""
        ...

    def reconnected(self) -> None:
        """reconnecting -> open: the current session is established and
        everything is restored in it; waiting callers go on, the
        application's reconnect listeners are told."""
        ...

    def finalize(self, reason: CloseReason) -> None:
        """-> closed, for good, for ``reason``: every subscription and quench
        ends, waiters and close listeners are told. Idempotent."""
        ...
