"""``Biff``: shared awareness in one narrow domain, with no central state.

A biff is a small presence application for one domain (who is drinking
coffee, who is playing xpilot, who has new mail). Every instance keeps its
own roster and they agree by exchanging presence notifications through an
Elvin router (the Presence-Protocol format of ``protocol``):

* a new instance announces itself and asks "who is there?" (``initial``);
  the others answer (``reply``), each after a short random delay so that a
  crowd does not answer in one burst;
* a state change is announced at once (``update``) and re-announced every
  ``heartbeat`` seconds; an entry that is not refreshed within its
  ``lifetime`` expires, so a crashed instance disappears by itself;
* a clean exit announces departure (Status ``offline``);
* after the connection comes back (the client library reconnects), the
  instance announces itself and asks again, so rosters converge after
  network loss or a router restart.

No instance is special. The class is Qt-free and runs on any asyncio loop;
``elvin_apps.biff.qtbiff`` adapts it to Qt signals.

Making a new biff is a subclass (or just arguments)::

    class XpilotBiff(Biff):
        domain = "xpilot"
        active_label = "playing xpilot"

        def render(self, member):
            return f"{member.user} on {member.text}" if member.text else member.user
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import random
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from elvin_apps.biff import protocol
from elvin_apps.biff.protocol import INITIAL, OFFLINE, REPLY, REQUEST, UPDATE
from elvin_apps.biff.roster import Member, Roster

from elvin.client import CloseReason, Connection, Subscription

__all__ = ["Biff", "default_user"]

log = logging.getLogger("elvin_apps.biff")

Listener = Callable[["Biff"], object]


def default_user() -> str:
    """``user@host``, the identity presence clients use by default."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (containers): still work
        user = "user"
    return f"{user}@{socket.gethostname() or 'localhost'}"


def _check_word(what: str, value: str, limit: int) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    value = value.strip()
    if not value or len(value) > limit or "|" in value or not value.isprintable():
        raise ValueError(f"{what} must be 1-{limit} printable characters without '|', "
                         f"not {value!r}")
    return value


class Biff:
    """One biff instance for ``domain``, for the local ``user``.

    Class attributes a subclass sets (or pass ``domain=`` etc.):
    ``domain`` (the group presence messages go to; also the active Status
    unless ``active_status`` says otherwise), ``idle_status`` (the Status of
    a running instance whose user is not active), ``active_label`` (how a
    summary says "active": ``"drinking coffee"``), ``empty_text`` (what to
    show when nobody is active). Override :meth:`render` for how a member
    reads in a list.

    Timing: ``heartbeat`` seconds between refreshes; ``lifetime`` (default
    three heartbeats) is how long others keep our entry without one;
    ``foreign_lifetime`` is used for presence clients that do not say
    (they refresh rarely); ``reply_delay`` bounds the random delay before
    answering a request; ``active_timeout`` (seconds, optional) returns the
    user to idle by itself (a coffee does not last all day).
    """

    domain: ClassVar[str] = "biff"
    active_status: ClassVar[str | None] = None
    idle_status: ClassVar[str] = "online"
    active_label: ClassVar[str | None] = None
    empty_text: ClassVar[str | None] = None

    def __init__(self, domain: str | None = None, user: str | None = None, *,
                 heartbeat: float = 30.0, lifetime: float | None = None,
                 foreign_lifetime: float = 600.0, reply_delay: float = 0.25,
                 active_timeout: float | None = None, groups: tuple[str, ...] = (),
                 client_id: str | None = None, max_members: int = 500,
                 render: Callable[[Member], str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.domain = _check_word("domain", domain or type(self).domain, protocol.MAX_GROUP)
        self.active_status = _check_word(
            "active status", self.active_status or self.domain, protocol.MAX_STATUS).casefold()
        self.idle_status = _check_word("idle status", self.idle_status,
                                       protocol.MAX_STATUS).casefold()
        if self.active_status in (self.idle_status, OFFLINE):
            raise ValueError(f"the active status {self.active_status!r} must differ from "
                             f"{self.idle_status!r} and {OFFLINE!r}")
        self.user = _check_word("user", default_user() if user is None else user,
                                protocol.MAX_USER)
        if heartbeat <= 0 or (lifetime is not None and lifetime < heartbeat):
            raise ValueError("heartbeat must be > 0 and lifetime at least one heartbeat")
        self.heartbeat = float(heartbeat)
        self.lifetime = float(lifetime) if lifetime is not None else 3 * self.heartbeat
        self.foreign_lifetime = float(foreign_lifetime)
        self.reply_delay = max(0.0, float(reply_delay))
        self.active_timeout = active_timeout
        self.groups = (self.domain, *(_check_word("group", g, protocol.MAX_GROUP)
                                      for g in groups if g != self.domain))
        self.client_id = client_id or secrets.token_hex(8)
        if render is not None:
            self.render = render  # type: ignore[method-assign]
        self._clock = clock
        self.roster = Roster(max_members)
        self._status = self.idle_status
        self._text = ""
        self._since = clock()
        self.roster.set_local(self.client_id, self.user, self._status, "", self._since,
                              self.client_id)
        self._listeners: list[Listener] = []
        self._connection: Connection | None = None
        self._subscription: Subscription | None = None
        self._heartbeat_task: asyncio.Task | None = None
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._reply_timer: asyncio.TimerHandle | None = None
        self._active_timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self.sent = 0
        self.ignored = 0

    # ======================================================================
    # reading the state
    @property
    def status(self) -> str:
        """The local user's Status (``idle_status`` or ``active_status``, or
        whatever :meth:`set_status` set)."""
        return self._status

    @property
    def text(self) -> str:
        """The local user's Status-Text."""
        return self._text

    @property
    def is_active(self) -> bool:
        return self._status == self.active_status

    @property
    def connection(self) -> Connection | None:
        return self._connection

    def now(self) -> float:
        """A reading of the clock the roster's ``since`` and ``expires`` use."""
        return self._clock()

    @property
    def started(self) -> bool:
        return self._subscription is not None

    @property
    def members(self) -> list[Member]:
        """Everybody known, this instance included, longest-standing first."""
        return self.roster.members()

    @property
    def active_members(self) -> list[Member]:
        """Members in the active status, one per user."""
        return self.roster.with_status(self.active_status)

    @property
    def count(self) -> int:
        """How many users are active (drinking coffee, playing, ...)."""
        return len(self.active_members)

    def render(self, member: Member) -> str:
        """How ``member`` reads in a one-line list; override per biff."""
        return f"{member.user} ({member.text})" if member.text else member.user

    def summary(self) -> str:
        """One line for a tooltip or a terminal: ``"2 drinking coffee: a, b"``."""
        active = self.active_members
        if not active:
            return self.empty_text or f"Nobody is in {self.domain} right now"
        label = self.active_label or f"in {self.domain}"
        return f"{len(active)} {label}: " + ", ".join(self.render(m) for m in active)

    def add_listener(self, fn: Listener) -> None:
        """``fn(biff)`` after every visible change of the roster or of the
        local state (not on mere refreshes)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(fn)

    # ======================================================================
    # lifecycle
    async def start(self, connection: Connection) -> None:
        """Join the domain on ``connection``: subscribe, announce, ask.

        Calling it again with another connection moves the biff there
        (the Qt adapter does so when its manager opens a fresh connection);
        with the same connection it does nothing."""
        if connection is self._connection and self.started:
            return
        if self._connection is not None:
            await self._detach(close_subscription=True)
        self._connection = connection
        connection.add_reconnect_listener(self._on_reconnected)
        connection.add_close_listener(self._on_closed)
        try:
            self._subscription = await connection.subscribe(
                protocol.subscription(self.domain), listener=self._on_notification,
                buffer_size=0)
        except BaseException:  # detached however; re-raised
            await self._detach(close_subscription=False)
            raise
        await self._send(INITIAL)
        self._heartbeat_task = asyncio.ensure_future(self._heartbeat_loop())
        self._schedule_expiry()

    async def stop(self, *, announce: bool = True) -> None:
        """Leave the domain: announce departure (unless ``announce`` is
        False), unsubscribe, forget the others. The connection stays open:
        it belongs to the caller."""
        self._cancel_timer("_active_timer")
        if announce and self._connection is not None and self._connection.is_open:
            await self._send(UPDATE, status=OFFLINE)
        await self._detach(close_subscription=True)
        self._cancel_timer("_expiry_timer")
        if self.roster.clear_remote():
            self._changed()

    async def _detach(self, close_subscription: bool) -> None:
        conn, sub = self._connection, self._subscription
        self._connection = self._subscription = None
        self._cancel_timer("_reply_timer")
        task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None:
            task.cancel()
        if conn is not None:
            conn.remove_listener(self._on_reconnected)
            conn.remove_listener(self._on_closed)
        if sub is not None:
            sub.remove_listener(self._on_notification)
            if close_subscription and conn is not None and conn.is_open:
                with contextlib.suppress(Exception):  # closing anyway: how it fails changes nothing
                    await sub.close()

    # ======================================================================
    # the local user's state
    async def set_status(self, status: str, text: str = "") -> None:
        """Change the local state and announce it (at once if connected,
        else when the connection comes back)."""
        status = _check_word("status", status, protocol.MAX_STATUS).casefold()
        if status == OFFLINE:
            raise ValueError("'offline' is announced by stop(), not set")
        text = protocol.clean(text, protocol.MAX_TEXT)
        self._cancel_timer("_active_timer")
        if status != self._status:
            self._since = self._clock()
        self._status, self._text = status, text
        if self.roster.set_local(self.client_id, self.user, status, text, self._since,
                                 self.client_id):
            self._changed()
        if status == self.active_status and self.active_timeout:
            loop = asyncio.get_running_loop()
            self._active_timer = loop.call_later(self.active_timeout, self._spawn,
                                                 self.deactivate)
        if self._connection is not None and self._connection.is_open and self.started:
            await self._send(UPDATE)

    async def activate(self, text: str = "") -> None:
        """The local user becomes active ("I'm having a coffee")."""
        await self.set_status(self.active_status, text)

    async def deactivate(self) -> None:
        """The local user is no longer active (but the biff still runs)."""
        await self.set_status(self.idle_status)

    async def ask(self) -> None:
        """Ask everybody to answer now ("who is there?") without announcing."""
        await self._send(REQUEST)

    # ======================================================================
    # incoming presence
    def handle(self, attributes: Mapping[str, Any]) -> bool:
        """Take in one presence notification; returns whether the roster
        changed visibly. Never raises: garbage is counted in ``ignored``."""
        try:
            message = protocol.decode(attributes)
            if message is None or message.client_id == self.client_id:
                self.ignored += message is None
                return False
            if self.domain.casefold() not in (g.casefold() for g in message.groups):
                self.ignored += 1
                return False
            now = self._clock()
            lifetime = message.lifetime or self.foreign_lifetime
            changed = self.roster.apply(message, now, lifetime)
            if message.asks and self.started:
                self._schedule_reply()
            self._schedule_expiry()
            if changed:
                self._changed()
            return changed
        except Exception:  # a biff must survive any input
            log.exception("presence notification ignored")
            self.ignored += 1
            return False

    def _on_notification(self, notification: Mapping[str, Any]) -> None:
        self.handle(notification)

    # ======================================================================
    # outgoing presence
    def _message(self, info: str, status: str | None = None) -> dict[str, Any]:
        status = status or self._status
        return protocol.encode(
            info, user=self.user, client_id=self.client_id, groups=self.groups,
            status=status, text=self._text if status != OFFLINE else "",
            duration=self._clock() - self._since, lifetime=self.lifetime)

    async def _send(self, info: str, status: str | None = None) -> bool:
        conn = self._connection
        if conn is None or not conn.is_open:
            return False
        try:
            await conn.send(self._message(info, status))
        except Exception as exc:  # noqa: BLE001 - the next heartbeat will try again
            log.info("could not send presence %s: %s", info, exc)
            return False
        self.sent += 1
        return True

    async def _heartbeat_loop(self) -> None:
        """Refresh our entry everywhere; also the safety net that re-sends a
        state change whose notification was lost."""
        while True:
            await asyncio.sleep(self.heartbeat)
            conn = self._connection
            if conn is None or conn.state == "closed":
                return
            if conn.is_open:
                await self._send(UPDATE)

    def _schedule_reply(self) -> None:
        """Answer a request after a random delay; requests arriving in the
        meantime share the one answer."""
        if self._reply_timer is not None:
            return
        loop = asyncio.get_running_loop()
        self._reply_timer = loop.call_later(random.uniform(0, self.reply_delay),
                                            self._reply_now)

    def _reply_now(self) -> None:
        self._reply_timer = None
        self._spawn(lambda: self._send(REPLY))

    def _schedule_expiry(self) -> None:
        """One timer for the soonest expiry in the roster."""
        self._cancel_timer("_expiry_timer")
        when = self.roster.next_expiry()
        if when is None:
            return
        loop = asyncio.get_running_loop()
        self._expiry_timer = loop.call_later(max(0.0, when - self._clock()) + 0.01,
                                             self._expire)

    def _expire(self) -> None:
        self._expiry_timer = None
        gone = self.roster.expire(self._clock())
        for member in gone:
            log.info("%s (%s) expired: no refresh within its lifetime", member.user,
                     member.key)
        self._schedule_expiry()
        if gone:
            self._changed()

    # ======================================================================
    # connection events
    def _on_reconnected(self, connection: Connection) -> None:
        """Notifications sent while we were away are lost: announce
        ourselves again and ask everybody again."""
        if connection is self._connection:
            self._spawn(lambda: self._send(INITIAL))

    def _on_closed(self, reason: CloseReason) -> None:
        """The connection is gone for good: stop heartbeats; what we know
        of the others keeps expiring on its own."""
        log.info("biff %s: connection closed (%s)", self.domain, reason)
        task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None:
            task.cancel()
        self._cancel_timer("_reply_timer")
        self._subscription = None

    # ======================================================================
    # plumbing
    def _changed(self) -> None:
        for fn in list(self._listeners):
            try:
                fn(self)
            except Exception:  # a bad listener must not stop the biff
                log.exception("biff listener %r raised", fn)

    def _cancel_timer(self, name: str) -> None:
        timer = getattr(self, name)
        if timer is not None:
            timer.cancel()
            setattr(self, name, None)

    def _spawn(self, make: Callable[[], Any]) -> None:
        task = asyncio.ensure_future(make())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.domain!r} {self.user!r} {self._status} "
                f"members={len(self.roster)}>")
