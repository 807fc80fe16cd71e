"""The glue between the Elvin connection and the app's model, log and windows.

It owns the subscriptions (one for the public groups, our threads and the
extra expression; one per private group with its key and accept_insecure
off), the quench that discovers known groups, and sending. It talks to the
router only through ``elvin.client`` (via ``elvin.qt.ConnectionManager``),
never through packets.

Subscription changes are serialised: every change marks the wanted state
dirty and one task brings the router in line with it, so quick successive
edits (or a reconnection in the middle of one) cannot interleave requests.
Incoming notifications are handled synchronously in the client's listener
callback: parsing is cheap and bounded (see ``message.py``), the history is
written in batches, and nothing here waits, so a flood never stalls the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from elvin_apps.tickertape.config import Config
from elvin_apps.tickertape.discovery import GROUP_ATTRIBUTES, KnownGroups
from elvin_apps.tickertape.groups import GroupList, private_expression, public_expression
from elvin_apps.tickertape.history import History
from elvin_apps.tickertape.message import Message, from_notification, new_message_id
from elvin_apps.tickertape.model import ScrollerModel
from elvin_apps.tickertape.notifier import MentionMatcher
from elvin_apps.tickertape.outboxfile import (
    PRIVATE_MARK,
    OutboxError,
    load_outbox,
    save_outbox,
)
from elvin_apps.tickertape.outgoing import Draft, build_notification
from elvin_apps.tickertape.qtcompat import emit
from PySide6.QtCore import QObject, QTimer, Signal

from elvin.client import QuenchNotSupported
from elvin.errors import ElvinError, SubscriptionError
from elvin.keys import Keys

log = logging.getLogger("elvin_apps.tickertape")

HISTORY_FLUSH_MS = 500
#: the newest history entries looked at when a restarted ticker refills its strip
RESTORE_LIMIT = 200
#: Longest stretch spent showing queued messages before the loop runs again.
SLICE_SECONDS = 0.008
#: Most messages waiting to be shown; beyond that the oldest are dropped
#: (the scroller keeps only the newest few hundred anyway).
INBOX_MAX = 20_000
#: what the Known groups tab says at a router without quench (subset C)
NO_QUENCH_NOTE = ("This router does not support quench, so the groups other people "
                  "subscribe to cannot be listed. Add groups by name on the "
                  "\u201cMy groups\u201d tab.")


def notification_keys(key: str) -> Keys:
    """Keys a private group's messages are sent with (every SHA-1 scheme,
    as ``ep -P key -C key`` does, so any Elvin client holding the key can
    subscribe whichever scheme it uses)."""
    return Keys.for_notification(producer=[key], consumer=[key])


def subscription_keys(key: str) -> Keys:
    """Keys a private group's subscription is made with."""
    return Keys.for_subscription(producer=[key], consumer=[key])


class TickerController(QObject):
    """Receives, shows, logs and sends Tickertape messages.

    Signals: ``messageReceived(Message)`` for each message accepted,
    ``messageSent(dict)`` with the attributes sent, ``problem(str)`` for
    errors worth showing to the user (send failures, a bad extra
    subscription), ``knownGroupsChanged()`` and ``subscriptionsChanged()``,
    ``outboxChanged(int)`` with the number of messages waiting for a router.

    What the user typed is never dropped because the router is away: a
    message sent while not connected (or whose sending fails because the
    connection went) waits in :attr:`outbox`, already built (so its
    Message-Id does not change), and goes out in order on reconnection.
    With ``outbox_path`` the outbox is also kept on disk after every change
    (``outboxfile``), so quitting before a router answers loses nothing:
    the next start sends it.

    ``known_groups_note`` says why the known groups cannot be listed (the
    router has no quench, or the quench failed), None while they can.
    """

    messageReceived = Signal(object)
    messageSent = Signal(object)
    outboxChanged = Signal(int)
    problem = Signal(str)
    knownGroupsChanged = Signal()
    subscriptionsChanged = Signal()

    def __init__(self, config: Config, model: ScrollerModel, history: History | None = None,
                 manager: Any = None, notifier: Any = None,
                 parent: QObject | None = None, outbox_path: Path | None = None) -> None:
        super().__init__(parent)
        self.config = config
        self.groups = config.group_list
        self.model = model
        self.model.set_groups(self.groups)
        self.model.default_lifetime = float(config.default_timeout)
        self.history = history
        self.manager = manager
        self.notifier = notifier
        self.mentions = MentionMatcher(config.user)
        self.model.is_mention = self.mentions
        if history is not None:
            self.model.sender_of = self._sender_in_history
        self.known = KnownGroups()
        self.threads: list[str] = []          # extra-group threads we started
        self.received = 0
        self.rejected = 0                     # notifications that were not messages
        self.dropped_insecure = 0             # private-group names without the key
        self.active_expressions: dict[str, str] = {}   # "public" / folded group -> text

        self._inbox: deque[tuple[Mapping[str, object], bool]] = deque(maxlen=INBOX_MAX)
        self._draining = False
        self._connection = None               # the Connection our subscriptions live on
        self._public = None
        self._private: dict[str, tuple[Any, str]] = {}   # folded -> (Subscription, key)
        self._quench = None
        self.known_groups_note: str | None = None
        self._dirty = False
        self._sync_task: asyncio.Task | None = None
        #: built messages waiting for a router: (attributes, keys)
        self.outbox: deque[tuple[dict[str, object], Keys | None]] = deque()
        self._flush_task: asyncio.Task | None = None
        self.outbox_path = outbox_path
        self.startup_notice = ""        # for the window to show once it is up
        if outbox_path is not None:
            self._load_outbox(outbox_path)
            self.outboxChanged.connect(self._save_outbox)

        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(HISTORY_FLUSH_MS)
        self._flush_timer.timeout.connect(self.flush_history)
        if history is not None:
            self._flush_timer.start()
        if manager is not None:
            manager.connected.connect(self._on_connected)

    def restore_from_history(self, limit: int = RESTORE_LIMIT) -> int:
        """Put back on the strip what the history holds that has not expired
        yet (a restarted ticker used to start empty), each with the life it
        has left; returns how many."""
        if self.history is None:
            return 0
        now, clock = time.time(), self.model.clock()
        restored = 0
        try:
            records = self.history.recent(limit)
        except Exception as exc:  # noqa: BLE001 - a strip without them still works
            log.warning("cannot read the history back: %s", exc)
            return 0
        for record in records:
            message = record.message
            group = self.groups.find(message.group)
            if group is not None and group.private and not message.secure:
                continue
            lifetime = self.model.lifetime_of(message)
            left = message.received + lifetime - now
            if left <= 1.0:
                continue
            entry = self.model.add(message)
            if entry is not None:
                entry.shown_at = clock - (lifetime - left)    # its age shows as it fades
                entry.expires_at = clock + left
                restored += 1
        return restored

    # -- receiving -----------------------------------------------------------
    def handle(self, attributes: Mapping[str, object], secure: bool = False) -> Message | None:
        """Take one delivered notification: parse it, check it, show it, log
        it. Never raises (one bad notification must not hurt the others)."""
        try:
            message = from_notification(attributes, secure=secure)
            if message is None:
                self.rejected += 1
                return None
            group = self.groups.find(message.group)
            if group is not None and group.private and not message.secure:
                # claims a private group's name without its key: not shown
                self.dropped_insecure += 1
                return None
            self.received += 1
            self.model.add(message)
            if self.history is not None:
                self.history.add(message)
            if self.notifier is not None and self.model.is_mention(message):
                self.notifier.notify(message)
            emit(self.messageReceived, message)
            return message
        except Exception:  # log and carry on
            log.exception("could not handle a notification")
            self.rejected += 1
            return None

    def _sender_in_history(self, message_id: str) -> str | None:
        message = self.history.by_message_id(message_id) if self.history is not None else None
        return message.sender if message is not None else None

    def _listener(self, notification: Any) -> None:
        # Called by the client for each delivery, possibly hundreds in a row
        # from one socket read: queue, and show them in time-boxed slices so
        # that painting and input never wait long behind a burst.
        attributes = getattr(notification, "attributes", notification)
        self._inbox.append((attributes, bool(getattr(notification, "secure", False))))
        if not self._draining:
            self._draining = True
            QTimer.singleShot(0, self._drain)

    def _drain(self) -> None:
        deadline = time.perf_counter() + SLICE_SECONDS
        inbox = self._inbox
        while inbox:
            attributes, secure = inbox.popleft()
            self.handle(attributes, secure)
            if time.perf_counter() >= deadline:
                break
        if inbox:
            QTimer.singleShot(0, self._drain)
        else:
            self._draining = False

    @property
    def backlog(self) -> int:
        """Notifications received but not yet shown."""
        return len(self._inbox)

    def flush_history(self) -> None:
        if self.history is not None:
            try:
                self.history.flush()
            except Exception:  # a full disk must not stop the ticker
                log.exception("could not write the history")

    # -- settings --------------------------------------------------------------
    def set_groups(self, groups: GroupList, extra: str | None = None) -> None:
        """New group list (and extra subscription): update the model, the
        config and the router subscriptions."""
        self.groups = groups
        self.config.groups = list(groups)
        if extra is not None:
            self.config.extra_subscription = extra
        self.model.set_groups(groups)
        self.request_sync()

    def expressions(self) -> tuple[str | None, dict[str, str]]:
        """The public expression and the private ones (by folded name)."""
        public = public_expression(self.groups, threads=self.threads,
                                   extra=self.config.extra_subscription,
                                   legacy=self.config.legacy)
        private = {g.folded: private_expression(g, legacy=self.config.legacy)
                   for g in self.groups.private()}
        return public, private

    # -- subscriptions ------------------------------------------------------------
    @property
    def connection(self) -> Any:
        return self.manager.connection if self.manager is not None else None

    def _on_connected(self) -> None:
        conn = self.connection
        if conn is not None and conn is not self._connection:
            # a new Connection object: its subscriptions are ours to make
            # (a reconnection of the same object restores them by itself)
            self._connection = conn
            self._public = None
            self._private = {}
            self._quench = None
            self.known.clear()
            emit(self.knownGroupsChanged)
        self.request_sync()
        self._flush_outbox_soon()

    def request_sync(self) -> None:
        self._dirty = True
        if self._sync_task is None or self._sync_task.done():
            try:
                loop = asyncio.get_event_loop()
            except RuntimeError:  # no event loop (unit tests without qasync)
                self._sync_task = None
                return
            # the coroutine is made only once there is a loop to run it
            self._sync_task = loop.create_task(self._sync_loop())

    async def wait_synced(self, timeout: float = 10.0) -> None:
        """Wait until the router has the subscriptions the settings ask for."""
        async with asyncio.timeout(timeout):
            while self._dirty or (self._sync_task is not None and not self._sync_task.done()):
                await asyncio.sleep(0.02)

    async def _sync_loop(self) -> None:
        while self._dirty:
            self._dirty = False
            conn = self.connection
            if conn is None or getattr(conn, "state", "open") != "open":
                return  # _on_connected will ask again
            try:
                await self._sync(conn)
            except (ElvinError, OSError) as exc:
                log.warning("could not update subscriptions: %s", exc)
                emit(self.problem, f"Could not update subscriptions: {exc}")
            except Exception:  # one update's failure must not stop the ticker; logged
                log.exception("subscription update failed")

    async def _sync(self, conn: Any) -> None:
        if conn is not self._connection:
            self._connection = conn
            self._public, self._private, self._quench = None, {}, None
        public, private = self.expressions()
        await self._sync_public(conn, public)
        # private groups: one subscription each, with the key, secure only
        wanted = {g.folded: g for g in self.groups.private()}
        for folded in list(self._private):
            sub, key = self._private[folded]
            group = wanted.get(folded)
            if group is None or group.key != key:
                del self._private[folded]
                self.active_expressions.pop(folded, None)
                with contextlib.suppress(ElvinError, OSError):
                    await sub.close()
        for folded, group in wanted.items():
            if folded in self._private:
                continue
            expression = private[folded]
            sub = await conn.subscribe(expression, keys=subscription_keys(group.key),
                                       accept_insecure=False, listener=self._listener,
                                       buffer_size=0)
            self._private[folded] = (sub, group.key)
            self.active_expressions[folded] = expression
        if self._quench is None or self._quench.closed:
            await self._start_quench(conn)
        emit(self.subscriptionsChanged)

    async def _sync_public(self, conn: Any, expression: str | None) -> None:
        if expression is not None and self.config.extra_subscription.strip():
            try:
                from elvin.subscription import parse
                parse(expression)
            except SubscriptionError as exc:
                emit(self.problem, f"Extra subscription ignored: {exc}")
                extra, self.config.extra_subscription = self.config.extra_subscription, ""
                try:
                    expression, _ = self.expressions()
                finally:
                    self.config.extra_subscription = extra
        current = self.active_expressions.get("public")
        if expression == current and self._public is not None:
            return
        if expression is None:
            if self._public is not None:
                sub, self._public = self._public, None
                with contextlib.suppress(ElvinError, OSError):
                    await sub.close()
            self.active_expressions.pop("public", None)
            return
        if self._public is not None and not self._public.closed:
            await self._public.modify(expression)
        else:
            self._public = await conn.subscribe(expression, listener=self._listener,
                                                buffer_size=0)
        self.active_expressions["public"] = expression

    async def _start_quench(self, conn: Any) -> None:
        """Discover known groups by quench. A router without quench was told
        once per session (``supports_quench``); each reconnection asks again."""
        self._quench = None
        if getattr(conn, "supports_quench", None) is False:
            self._set_known_note(NO_QUENCH_NOTE)
            return
        try:
            quench = await conn.quench(list(GROUP_ATTRIBUTES), buffer_size=0)
        except QuenchNotSupported:
            self._set_known_note(NO_QUENCH_NOTE)
            return
        except (ElvinError, OSError, ValueError) as exc:
            self._set_known_note(f"The known groups cannot be listed: {exc}")
            return
        self._set_known_note(None)
        self._quench = quench
        for term_id, ast in quench.subscriptions.items():
            self.known.set_term(term_id, ast)
        quench.add_listener(self._on_quench_event)
        emit(self.knownGroupsChanged)

    def _set_known_note(self, note: str | None) -> None:
        if note == self.known_groups_note:
            return
        if note is not None:
            log.info("group discovery unavailable at %s: %s",
                     getattr(self.connection, "url", "?"), note)
            self.known.clear()
        self.known_groups_note = note
        emit(self.knownGroupsChanged)

    def _on_quench_event(self, event: Any) -> None:
        try:
            self.known.apply(event)
        except Exception:  # a bad quench event must not stop the ticker; logged
            log.exception("bad quench event")
        emit(self.knownGroupsChanged)

    # -- sending ------------------------------------------------------------------
    def prepare(self, draft: Draft) -> tuple[dict[str, object], Keys | None]:
        """The attributes and keys for a draft (raises ComposeError). Sending
        to a group we do not subscribe to starts a thread we follow."""
        group_name = draft.reply_to.group if draft.reply_to is not None else draft.group
        group = self.groups.find(group_name.strip()) if group_name.strip() else None
        if (draft.reply_to is None and draft.thread_id is None
                and (group is None or not group.subscribe)):
            draft = replace(draft, thread_id=new_message_id())
        attributes = build_notification(draft, self.config.user, legacy=self.config.legacy)
        keys = notification_keys(group.key) if group is not None and group.private else None
        return attributes, keys

    async def send(self, draft: Draft) -> dict[str, object]:
        """Send a draft; returns the attributes sent. Raises ComposeError
        for a bad draft and ElvinError/OSError when it cannot be sent."""
        attributes, keys = self._start_thread(draft)
        await self._wait_for_thread(attributes, draft)
        conn = self.connection
        if conn is None:
            raise ElvinError("not connected to a router")
        await conn.send(attributes, keys=keys, deliver_insecure=keys is None)
        emit(self.messageSent, attributes)
        return attributes

    def _start_thread(self, draft: Draft) -> tuple[dict[str, object], Keys | None]:
        """Build the draft; a new extra-group thread is followed from now on."""
        attributes, keys = self.prepare(draft)
        thread = attributes.get("Thread-Id")
        if isinstance(thread, str) and draft.reply_to is None and thread not in self.threads:
            self.threads.append(thread)
            self.request_sync()
        return attributes, keys

    async def _wait_for_thread(self, attributes: Mapping[str, object],
                               draft: Draft | None) -> None:
        # a thread we start must be subscribed before its first message goes,
        # or the first replies could arrive before we listen for them
        thread = attributes.get("Thread-Id")
        if isinstance(thread, str) and (draft is None or draft.reply_to is None):
            with contextlib.suppress(TimeoutError):
                await self.wait_synced(5.0)

    @property
    def online(self) -> bool:
        """Whether a send now would reach a router (not merely wait for one)."""
        conn = self.connection
        return conn is not None and getattr(conn, "state", "open") == "open" \
            and getattr(self.manager, "state", "connected") == "connected"

    def send_soon(self, draft: Draft) -> asyncio.Future | None:
        """Send in the background. A bad draft becomes a ``problem``; while
        there is no router the message waits in the outbox (``outboxChanged``)
        and goes on reconnection."""
        try:
            attributes, keys = self._start_thread(draft)
        except ValueError as exc:   # ComposeError: the dialog checks first
            emit(self.problem, f"Not sent: {exc}")
            return None
        self.outbox.append((attributes, keys))
        if not self.online:
            # it waits: shown on the strip and kept on disk (while online it
            # goes out at once, without a disk write or a passing notice)
            emit(self.outboxChanged, len(self.outbox))
        return self._flush_outbox_soon()

    def _flush_outbox_soon(self) -> asyncio.Future | None:
        if not self.outbox:
            return None
        if self._flush_task is not None and not self._flush_task.done():
            return self._flush_task
        try:
            self._flush_task = asyncio.ensure_future(self._flush_outbox())
        except RuntimeError:   # no event loop: it waits for the next connection
            return None
        return self._flush_task

    async def _flush_outbox(self) -> None:
        """Send what waits, oldest first, while connected. A message leaves
        the outbox only once written to a live connection; a connection
        failure leaves it (and those after it) for the next reconnection."""
        while self.outbox and self.online:
            attributes, keys = self.outbox[0]
            await self._wait_for_thread(attributes, None)
            conn = self.connection
            if conn is None or not self.online:
                break
            try:
                await conn.send(attributes, keys=keys, deliver_insecure=keys is None)
            except (TypeError, ValueError) as exc:
                # the router's limits refuse it: waiting would not help
                self.outbox.popleft()
                emit(self.outboxChanged, len(self.outbox))
                emit(self.problem, f"Not sent: {exc}")
                continue
            except (ElvinError, OSError) as exc:
                log.info("message kept for the next connection: %s", exc)
                break
            self.outbox.popleft()
            emit(self.outboxChanged, len(self.outbox))
            emit(self.messageSent, attributes)
        if self.outbox:
            emit(self.outboxChanged, len(self.outbox))   # left waiting: show and keep them

    # -- the outbox on disk -----------------------------------------------------
    def _load_outbox(self, path: Path) -> None:
        try:
            saved = load_outbox(path)
        except OutboxError as exc:
            # keep the user's text for them to rescue; never overwrite it
            aside = path.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}")
            try:
                path.replace(aside)
            except OSError as move:
                self.outbox_path = None          # the file stays; nothing is saved over it
                log.warning("%s; could not move it aside: %s", exc, move)
                self.startup_notice = (f"Messages from last time not read ({path} left as it "
                                       f"is; new waiting messages are not saved): {exc}")
                return
            log.warning("%s (moved to %s)", exc, aside)
            self.startup_notice = f"Messages from last time not read (kept in {aside}): {exc}"
            return
        dropped = []
        for attributes in saved:
            private = attributes.pop(PRIVATE_MARK, None)
            keys = None
            if private:
                group = self.groups.find(str(attributes.get("Group", "")))
                if group is None or not group.private:
                    log.warning("a saved message to %s was dropped: the group has no key "
                                "any more", attributes.get("Group"))
                    dropped.append(str(attributes.get("Group", "")))
                    continue
                keys = notification_keys(group.key)
            self.outbox.append((attributes, keys))
        if dropped:
            self.startup_notice = (f"Not sent: {len(dropped)} saved message(s) to private "
                                   f"group(s) {', '.join(sorted(set(dropped)))}, which have no "
                                   "key any more (never sent in the clear)")

    def _save_outbox(self, _waiting: int = 0) -> None:
        if self.outbox_path is None:
            return
        saved = [dict(attributes, **{PRIVATE_MARK: 1}) if keys is not None else attributes
                 for attributes, keys in self.outbox]
        try:
            save_outbox(self.outbox_path, saved)
        except OutboxError as exc:
            emit(self.problem, f"{exc} (the waiting messages are lost if you quit)")

    async def close(self) -> None:
        flushing = self._flush_task
        if flushing is not None and not flushing.done():
            # a send in flight finishes (and leaves the outbox) rather than
            # being cut off and sent again from the saved file next time
            await asyncio.wait({flushing}, timeout=2.0)
        self._flush_timer.stop()
        self.flush_history()
        if self._sync_task is not None and not self._sync_task.done():
            self._sync_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # closing anyway: how it fails changes nothing
                await self._sync_task


def is_private(groups: GroupList, name: str) -> bool:
    group = groups.find(name)
    return group is not None and group.private


__all__ = ["TickerController", "is_private", "notification_keys", "subscription_keys"]
