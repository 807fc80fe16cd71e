"""One client channel on the router's event loop: bytes and flow control.

``Session`` is the asyncio protocol of a client's TCP (or TLS) channel. The
protocol itself -- states, packets, replies, errors -- is its sans-IO
``SessionCore`` (``elvin.router.session_core``); this class only moves bytes
between the transport and the core and applies the loop's rules:

* **Reading pauses** while any reason holds (``_pause_reading``): packets
  wait in the backlog for their turn, too many are held behind the client's
  own compile, or its send queue is over its limit (the client does not read
  what it is sent).
* **Turns.** Packets that arrive while nobody else waits are handled at once,
  within the loop turn's budget, which every session shares
  (``Scheduler.turn_deadline``); otherwise the session waits for its turn in
  the scheduler (``elvin.router.scheduler``), which calls ``drain``.
* **Sending.** Replies and deliveries go through the session's bounded
  ``SendQueue`` (the negotiated drop policy); a delivery to a client that
  has been released (DisconnRqst, or gone) is dropped.
* **Timers.** ``connect_timeout`` for the first packet, ``close_timeout``
  for a client that stops reading while its last packets wait.

The router files subscriptions and quenches under the ``Session`` (it is
their owner) and delivers to it (``send_bytes``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import TYPE_CHECKING, Any, Protocol

from elvin.router.options import SessionOptions
from elvin.router.scheduler import QUANTUM
from elvin.router.sendqueue import TRANSPORT_HIGH_WATER, TRANSPORT_LOW_WATER, SendQueue
from elvin.router.session_core import (
    CLOSED,
    CLOSING,
    CONNECTED,
    NEW,
    OFF_LOOP_LENGTH,
    UNOTIFY,
    SessionCore,
    SessionHost,
)

if TYPE_CHECKING:
    from elvin.router.door import Door

log = logging.getLogger("elvin.router.session")

__all__ = ["CLOSED", "CLOSING", "CONNECTED", "NEW", "OFF_LOOP_LENGTH", "UNOTIFY", "Session"]


class ChannelHost(SessionHost, Protocol):
    """What a channel needs of its router beyond what its core needs
    (``elvin.router.server.Router`` is one)."""

    loop: asyncio.AbstractEventLoop
    flush_batch: Any
    scheduler: Any
    door: Door | None

    def session_opened(self, session: Session) -> None: ...

    def session_closed(self, session: Session) -> None: ...


class Session(asyncio.Protocol):
    """asyncio protocol for one client channel;
    the ``SessionIO`` of its ``SessionCore``."""

    def __init__(self, router: ChannelHost, listener: str = "") -> None:
        self.router = router
        self.listener = listener
        self.loop = router.loop
        self.transport: Any = None
        self.queue: SendQueue | None = None
        self.core = SessionCore(router, self, self)
        self.core.on_ready = self._wake
        self._connect_timer: Any = None
        self._close_timer: Any = None
        self._reading_paused = {"backlog": False, "send": False}
        self._refused = False           # closed at the door (elvin.router.door)
        self._holding = False           # the door counts a partial frame of ours

    def __repr__(self) -> str:
        return f"<Session {self.peer} {self.core.state}>"

    # -- what the router and tests see ------------------------------------------------
    @property
    def state(self) -> str:
        return self.core.state

    @property
    def peer(self) -> Any:
        return self.core.peer

    @property
    def options(self) -> SessionOptions:
        return self.core.options

    @property
    def reading_paused(self) -> bool:
        """The router paused reading (the client cannot send meanwhile)."""
        return any(self._reading_paused.values())

    def disconnect(self, reason: int, args: str = "") -> None:
        """Send Disconn (the last packet) and close once it is written."""
        self.core.disconnect(reason, args)

    def abort(self) -> None:
        self.core.abort()

    def send(self, packet: Any, droppable: bool = False) -> None:
        """A packet for the client (the quench manager's SubAdd/Mod/DelNotify)."""
        self.core.send(packet, droppable)

    def write_now(self) -> None:
        """What is queued for the client goes to its socket now, not at the
        end of the loop iteration (the quench manager's fan-out)."""
        if self.queue is not None:
            self.queue.write_now()

    def send_bytes(self, data: bytes, droppable: bool = False) -> None:
        """A delivery: nothing once released (its subscriptions may wait a
        turn or two to go, ``elvin.router.reaper``)."""
        queue = self.queue
        core = self.core
        if queue is not None and not core.released:
            counters = core.counters
            counters.notifications_out += 1
            counters.bytes_out += len(data)
            queue.push(data, droppable)

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.core.peer = transport.get_extra_info("peername")
        door = getattr(self.router, "door", None)
        peer = self.core.peer
        if door is not None and transport.get_extra_info("ssl_object") is not None and \
                isinstance(peer, tuple) and len(peer) >= 2 and \
                door.transfer(("tls", peer[0], peer[1]), self):
            pass                        # counted since its accept (Listeners._tls_room)
        elif door is not None and not door.admit(self, peer):
            self._refused = True        # closed at once, without a word
            core = self.core
            core.refused()
            transport.abort()
            return
        try:
            transport.set_write_buffer_limits(high=TRANSPORT_HIGH_WATER,
                                              low=TRANSPORT_LOW_WATER)
        except Exception:  # a transport without limits: its defaults then
            log.debug("session: no write buffer limits", exc_info=True)
        options = self.core.options
        self.queue = SendQueue(transport, self.loop, options.send_queue_max,
                               options.send_drop_policy, on_drop=self._dropped,
                               on_overflow=self._queue_overflow,
                               on_backpressure=self._backpressure,
                               batch=self.router.flush_batch)
        timeout = self.router.config.connect_timeout
        self._connect_timer = self.loop.call_later(timeout, self._connect_timed_out, timeout)
        self.router.session_opened(self)
        log.debug("channel from %s on %s", self.peer, self.listener)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._refused:
            self.core.lost()
            return
        door = getattr(self.router, "door", None)
        if door is not None:
            door.closed(self)
        log.debug("channel from %s closed (%s)", self.peer, exc or "normally")
        self.core.lost()
        if self.queue is not None:
            self.queue.close()
        for timer in (self._connect_timer, self._close_timer):
            if timer is not None:
                timer.cancel()
        self._connect_timer = self._close_timer = None
        self.router.session_closed(self)

    def pause_writing(self) -> None:
        if self.queue is not None:
            self.queue.pause_writing()

    def resume_writing(self) -> None:
        if self.queue is not None:
            self.queue.resume_writing()

    def eof_received(self) -> bool:
        return False            # close our side too

    def data_received(self, data: bytes) -> None:
        core = self.core
        if core.closing:
            return
        core.receive(data)
        held = core.decoder.buffered
        if held or self._holding:
            self._holding = bool(held)
            door = self.router.door
            if door is not None:
                decoder = core.decoder
                door.partial(self, decoder.offset, held, decoder.pending_length)
            if core.closing:
                return
        waiting = core.waiting
        if not waiting:
            # nothing to handle, or it waits for the client's compile: keep
            # reading (a TestConn is answered as it comes) unless too much is held
            self._pause_reading("backlog", core.holding_too_much)
            return
        scheduler = self.router.scheduler
        if scheduler.idle and waiting <= QUANTUM:
            # nobody waits: no detour through the scheduler, within this
            # loop turn's budget (shared with every other session's)
            deadline = scheduler.turn_deadline()
            if time.perf_counter() < deadline:
                if self.drain(QUANTUM, deadline):
                    self._wake()        # out of time: the rest waits its turn
                return
        self._wake()

    def drain(self, quantum: int, deadline: float) -> bool:
        """The scheduler's call: handle up to ``quantum`` packets by
        ``deadline``; True if more wait and can be handled now."""
        more = self.core.drain(quantum, deadline)
        self._pause_reading("backlog", self.core.holding_too_much)
        return more

    def _wake(self) -> None:
        core = self.core
        self._pause_reading("backlog", core.holding_too_much)
        waiting = core.waiting
        if waiting:
            # reading stays paused until its turn: else a client could stream
            # packets into the backlog without bound
            self.router.scheduler.wake(self, waiting <= QUANTUM)

    def _pause_reading(self, why: str, on: bool) -> None:
        """Reading is paused while any reason holds (a backlog, a full send queue)."""
        paused = self._reading_paused
        was = any(paused.values())
        paused[why] = on
        now = any(paused.values())
        if was == now or self.transport is None:
            return
        try:
            if now:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()
        except Exception:  # a closing transport: nothing to pause
            log.debug("session: pause/resume reading failed", exc_info=True)

    # -- SessionIO: what the core asks --------------------------------------------------
    def write(self, data: bytes, droppable: bool = False) -> None:
        queue = self.queue
        if queue is not None and self.core.state is not CLOSED:
            self.core.counters.bytes_out += len(data)
            queue.push(data, droppable)

    def write_conf_conn(self, data: bytes) -> None:
        if self.queue is not None:
            self.queue.push_conf_conn(data)

    def started(self) -> None:
        if self._connect_timer is not None:
            self._connect_timer.cancel()
            self._connect_timer = None
        door = getattr(self.router, "door", None)
        if door is not None:
            door.started(self)

    def _connect_timed_out(self, seconds: float) -> None:
        self._connect_timer = None
        if self.core.connect_timed_out(seconds):
            door = getattr(self.router, "door", None)
            if door is not None:
                door.refuse("connect-timeout", "%s: no ConnRqst or UNotify within %.1f s: "
                            "closing", self.peer, seconds)

    def apply_options(self, options: SessionOptions) -> None:
        if self.queue is not None:
            self.queue.configure(options.send_queue_max, options.send_drop_policy)
        sock = self.transport.get_extra_info("socket") if self.transport else None
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY,
                                1 if options.send_immediately else 0)
            except (OSError, AttributeError, ValueError):
                pass

    def close(self, flush: bool) -> None:
        if not flush:
            if self.queue is not None:
                self.queue.close()
            if self.transport is not None:
                try:
                    self.transport.abort()
                except Exception:  # aborting anyway
                    log.debug("session: abort failed", exc_info=True)
            return
        if self.transport is None:
            return
        if self._close_timer is None:
            self._close_timer = self.loop.call_later(self.router.config.close_timeout,
                                                     self.core.abort)
        queue = self.queue
        if queue is None or not len(queue):
            self._close_transport()
        else:
            queue.on_drained = self._close_transport

    def _close_transport(self) -> None:
        try:
            self.transport.close()
        except Exception:  # noqa: BLE001 - a transport that cannot close is aborted
            self.core.abort()

    # -- the send queue's reports --------------------------------------------------------
    def _dropped(self, count: int) -> None:
        self.router.stats.drops += count
        self.core.counters.drops += count

    def _queue_overflow(self) -> None:
        notes = getattr(self.router, "session_notes", None)
        if notes is not None:
            notes.log("clients closed for a full send queue", logging.WARNING,
                      "%s: send queue full with drop policy 'none': closing", self.peer)
        else:
            log.warning("%s: send queue full with drop policy 'none': closing", self.peer)
        self.core.abort()

    def _backpressure(self, on: bool) -> None:
        self._pause_reading("send", on)

