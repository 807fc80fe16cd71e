"""One client channel: the protocol state machine of spec sections 5 and 7.

States:

``NEW``        nothing received yet. The first packet must be ConnRqst or
               UNotify; anything else, or neither within ``connect_timeout``
               seconds (7.4.3), closes the channel without a word.
``UNOTIFY``    session-less (5.4.1): only UNotify packets; the router never
               sends anything on such a channel.
``CONNECTED``  a session (ConnRqst accepted).
``CLOSING``    DisconnRqst received or Disconn sent: everything read is
               ignored; the channel closes once the last packet is written
               (or after ``close_timeout`` if the client stops reading).

Errors (7.3):

* a frame that cannot be unmarshalled, a packet type a client may not send,
  or anything but ConnRqst/UNotify first is a *protocol violation*: the
  session gets Disconn (reason 4) if it is established, and is closed;
* a well-formed packet that breaks the negotiated limits or the session
  state (a second ConnRqst, a SecRqst adding a registered key) is a
  *protocol error*: a NotifyEmit or UNotify is ignored (logged at debug),
  any other packet is answered with a Nack, and after
  ``max_protocol_errors`` of those the session gets Disconn (reason 4);
* requests that fail for ordinary reasons (bad subscription, unknown id)
  get the Nack of the spec's table and do not count as errors.

Nothing a client does can raise out of this module: every packet is
handled inside a ``try`` and an unexpected failure is logged and answered
with a Nack (PROT_ERROR) when the packet had an xid.

Fairness: the router's loop is shared, so a session's packets wait in its
backlog (``elvin.protocol.backlog``; reading from that client paused) and
the router's ``fairness.Scheduler`` handles them a few at a time, in turn
with the other busy sessions, within one budget per loop turn. An
expression longer than ``OFF_LOOP_LENGTH`` characters (256) is compiled on
the router's worker thread; until it is done the session's later packets
wait, so replies still come in request order -- except TestConn, answered as
it arrives (liveness never waits for work: a client with a short keepalive
must not take a router busy with its own compile for dead). The compile
belongs to the session: when the session is released it is cancelled, and
its result, if it comes anyway, is dropped.

SecRqst (7.4.8): adding a key that is already registered, or removing one
that is not, is a protocol error, answered with KEY_EXISTS / NO_SUCH_KEY
and nothing is changed (the request is atomic). Avis silently ignores such
keys; we follow the spec because it is explicit here and the Nack codes
exist for it. SubModRqst and QnchModRqst ignore such keys (7.4.18 says so
for subscriptions; quenches are treated the same way, as are names added
twice or removed when absent in QnchModRqst).
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from typing import TYPE_CHECKING, Any

from elvin.errors import NackCode, ProtocolError, SubscriptionError
from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import (
    ConfConn,
    ConnRply,
    ConnRqst,
    Disconn,
    DisconnReason,
    DisconnRply,
    DisconnRqst,
    FrameDecoder,
    LimitError,
    Nack,
    NotifyEmit,
    PacketId,
    QnchAddRqst,
    QnchDelRqst,
    QnchModRqst,
    QnchRply,
    QosRply,
    QosRqst,
    SecRply,
    SecRqst,
    SubAddRqst,
    SubDelRqst,
    SubModRqst,
    SubRply,
    TestConn,
    UNotify,
    decode_attributes,
    decode_packet,
    frame,
)
from elvin.protocol.backlog import TEST_CONN_BODY, Backlog, Violation
from elvin.protocol.limits import FIELD_OPTIONS
from elvin.protocol.xdr import decode_sub_add_rqst
from elvin.router.fairness import QUANTUM
from elvin.router.options import SessionOptions, negotiate
from elvin.router.security import (
    KeyError_,
    apply_delta,
    check_keys,
    id64,
    key_delta_error,
    prepare_notification,
)
from elvin.router.sendqueue import TRANSPORT_HIGH_WATER, TRANSPORT_LOW_WATER, SendQueue
from elvin.values import INT32_MAX, INT32_MIN, Int64

if TYPE_CHECKING:
    from elvin.router.server import Router

log = logging.getLogger("elvin.router.session")

NEW, UNOTIFY, CONNECTED, CLOSING, CLOSED = "new", "unotify", "connected", "closing", "closed"

_CONF_CONN = frame(ConfConn())
_ZERO4 = b"\0\0\0\0"
_ONE4 = b"\0\0\0\1"
_NOTIFY_EMIT = int(PacketId.NOTIFY_EMIT).to_bytes(4, "big")
#: SubRply for SubAddRqst, framed directly (the reply of a registration
#: burst: no packet object, no generic encoder): length, id, xid, sub id
_SUB_RPLY = struct.Struct(">IiIQ")
_SUB_RPLY_ID = int(PacketId.SUB_RPLY)

#: expressions longer than this (characters) compile on the worker thread
OFF_LOOP_LENGTH = 256      # longer ones take 5-20 ms to compile: the worker does them


def _nack_value(value: Any) -> Any:
    """A Nack argument as a legal Value."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Int64):
        return value
    if isinstance(value, int):
        return value if INT32_MIN <= value <= INT32_MAX else Int64(
            max(min(value, 2**63 - 1), -(2**63)))
    if isinstance(value, (float, str, bytes)):
        return value.replace("\0", "") if isinstance(value, str) else value
    return str(value)


class Session:
    """asyncio protocol for one client channel (duck-typed ``asyncio.Protocol``)."""

    def __init__(self, router: Router, listener: str = "") -> None:
        self.router = router
        self.listener = listener
        self.loop = router.loop
        self.transport: Any = None
        self.peer: Any = None
        self.state = NEW
        self.options: SessionOptions = router.initial_options
        self.limits = router.initial_limits
        self.decoder = FrameDecoder(self.limits)
        self.queue: SendQueue | None = None
        self.nfn_keys: Keys = EMPTY_KEYS
        self.sub_keys: Keys = EMPTY_KEYS
        self.nfn_prepared = None
        self.errors = 0
        self._connect_timer = None
        self._close_timer = None
        self._released = False
        #: packets not handled yet, and the compile they wait for
        self._backlog = Backlog()
        self._reading_paused = {"backlog": False, "send": False}

    def __repr__(self) -> str:
        return f"<Session {self.peer} {self.state}>"

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        try:
            transport.set_write_buffer_limits(high=TRANSPORT_HIGH_WATER,
                                              low=TRANSPORT_LOW_WATER)
        except Exception:
            pass
        self.queue = SendQueue(transport, self.loop, self.options.send_queue_max,
                               self.options.send_drop_policy, on_drop=self._dropped,
                               on_overflow=self._queue_overflow,
                               on_backpressure=self._backpressure,
                               batch=self.router.flush_batch)
        self._connect_timer = self.loop.call_later(self.router.config.connect_timeout,
                                                   self._connect_timeout)
        self.router.session_opened(self)
        log.debug("channel from %s on %s", self.peer, self.listener)

    def connection_lost(self, exc: BaseException | None) -> None:
        log.debug("channel from %s closed (%s)", self.peer, exc or "normally")
        self.state = CLOSED
        self._release()
        if self.queue is not None:
            self.queue.close()
        for timer in (self._connect_timer, self._close_timer):
            if timer is not None:
                timer.cancel()
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
        if self.state is CLOSING or self.state is CLOSED:
            return
        backlog = self._backlog
        bad = None
        try:
            bodies = self.decoder.feed_frames(data)
        except ProtocolError as exc:
            bodies, bad = exc.frames, f"bad frame: {exc}"
        if self.state is CONNECTED and TEST_CONN_BODY in bodies:
            bodies = self._answer_liveness(bodies)
        backlog.add(bodies)
        if bad is not None:
            backlog.violation(bad)
        if backlog.busy:
            # a compile runs: keep reading (a TestConn is answered as it
            # comes) until too much is held behind it
            self._pause_reading("backlog", backlog.full)
            return
        scheduler = self.router.scheduler
        if scheduler.idle and len(backlog) <= QUANTUM:
            # nobody waits: no detour through the scheduler, within this
            # loop turn's budget (shared with every other session's)
            deadline = scheduler.turn_deadline()
            if time.perf_counter() < deadline:
                if self.drain(QUANTUM, deadline):
                    self._wake()        # out of time: the rest waits its turn
                return
        self._wake()

    def _answer_liveness(self, bodies: list[bytes]) -> list[bytes]:
        """Answer each TestConn now, whatever waits before it: its ConfConn
        has no xid, so no reply-order obligation (7.4.13). The rest, in order."""
        kept = []
        for body in bodies:
            if body == TEST_CONN_BODY:
                self._test_conn(None)
            else:
                kept.append(body)
        return kept

    def _wake(self) -> None:
        backlog = self._backlog
        if not backlog:
            return
        if backlog.busy:
            self._pause_reading("backlog", backlog.full)
            return
        # paused until its turn: else a client could stream packets into the
        # backlog without bound
        self._pause_reading("backlog", True)
        self.router.scheduler.wake(self, len(backlog) <= QUANTUM)

    def drain(self, quantum: int, deadline: float) -> bool:
        """Handle up to ``quantum`` backlog packets, fewer if the clock
        (``time.perf_counter``) passes ``deadline`` (one notification may cost
        a whole evaluation budget); the router's scheduler calls this in turn
        with the other busy sessions. True if more wait and can be handled now."""
        backlog = self._backlog
        clock = time.perf_counter
        for _ in range(quantum):
            if self.state is CLOSING or self.state is CLOSED:
                backlog.clear()
                break
            body = backlog.next()
            if body is None:            # nothing waits, or a compile runs
                break
            if type(body) is Violation:
                self._violation(body.reason)
                backlog.clear()
                break
            self._packet(body)
            if clock() > deadline:
                break
        if self.state is CLOSING or self.state is CLOSED:
            backlog.clear()
        if backlog.busy:
            self._pause_reading("backlog", backlog.full)
            return False
        more = bool(backlog)
        self._pause_reading("backlog", more)
        return more

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
        except Exception:
            pass

    # -- dispatch ----------------------------------------------------------------------
    def _packet(self, body: bytes) -> None:
        try:
            packet = None
            if self.state is CONNECTED:
                if body[:4] == _NOTIFY_EMIT:
                    self._notify_emit(body)
                    return
                packet = decode_sub_add_rqst(body, self.limits)   # a registration burst's
            if packet is not None:
                handler = Session._sub_add_rqst     # and a connected session's request
            else:
                try:
                    packet = decode_packet(body, self.limits)
                except LimitError as exc:
                    self._limit_error(exc, body)
                    return
                except ProtocolError as exc:
                    self._violation(f"malformed packet: {exc}")
                    return
                handler = _HANDLERS.get(type(packet))
                if handler is None:
                    self._violation(f"{type(packet).__name__} may not be sent by a client")
                    return
                state = self.state
                if state is NEW:
                    if type(packet) not in (ConnRqst, UNotify):
                        self._violation(f"{type(packet).__name__} before ConnRqst")
                        return
                elif state is UNOTIFY and type(packet) is not UNotify:
                    self._violation(f"{type(packet).__name__} on a session-less channel")
                    return
            try:
                handler(self, packet)
            except Exception:
                log.exception("%s: failed to handle %s", self.peer, type(packet).__name__)
                xid = getattr(packet, "xid", None)
                if xid is not None and self.state is CONNECTED:
                    self.nack(xid, NackCode.PROT_ERROR, "Internal router error")
        except Exception:       # never let a client's packet escape
            log.exception("%s: unexpected failure; closing the session", self.peer)
            self.abort()

    def _limit_error(self, exc: LimitError, body: bytes) -> None:
        """A well-formed packet over the negotiated limits: a protocol error."""
        pid = exc.packet_id
        if self.state is NEW or self.state is UNOTIFY:
            if pid == PacketId.UNOTIFY and self.state is not NEW:
                log.debug("%s: UNotify over the limits ignored: %s", self.peer, exc)
                return
            self._violation(f"packet over the limits: {exc}")
            return
        if pid in (PacketId.NOTIFY_EMIT, PacketId.UNOTIFY):
            # 7.3.3: ignored. Not counted towards max_protocol_errors: such a
            # packet costs the router no more than a valid one.
            log.debug("%s: notification over the limits ignored: %s", self.peer, exc)
            return
        self._protocol_error()
        xid = exc.xid
        if xid is not None and self.state is CONNECTED:
            option = FIELD_OPTIONS.get(exc.limit, "")
            if option:
                self.nack(xid, NackCode.QOS_LIMIT, f"Request exceeds %1: {exc}", (option,))
            else:
                self.nack(xid, NackCode.IMPL_LIMIT, f"Request exceeds a router limit: {exc}")

    def _protocol_error(self) -> None:
        self.errors += 1
        self.router.stats.protocol_errors += 1
        if self.errors >= self.router.config.max_protocol_errors and self.state is CONNECTED:
            log.warning("%s: %d protocol errors: disconnecting", self.peer, self.errors)
            self.disconnect(DisconnReason.PROTOCOL_ERRORS,
                            f"{self.errors} protocol errors")

    def _violation(self, reason: str) -> None:
        """A protocol violation (7.3.2): close this channel."""
        self.router.stats.protocol_errors += 1
        log.info("%s: protocol violation: %s", self.peer, reason)
        if self.state is CONNECTED:
            self.disconnect(DisconnReason.PROTOCOL_ERRORS, f"protocol violation: {reason}")
        else:
            self.abort()

    # -- sending -----------------------------------------------------------------------
    def send(self, packet: Any, droppable: bool = False) -> None:
        if self.queue is not None and self.state is not CLOSED:
            self.queue.push(frame(packet), droppable)

    def send_bytes(self, data: bytes, droppable: bool = False) -> None:
        # nothing once released: its subscriptions may wait a turn or two to go
        if self.queue is not None and not self._released:
            self.queue.push(data, droppable)

    def nack(self, xid: int, code: int, message: str, args: tuple = ()) -> None:
        self.send(Nack(xid, int(code), message, tuple(_nack_value(a) for a in args)))

    def _dropped(self, count: int) -> None:
        self.router.stats.drops += count

    def _queue_overflow(self) -> None:
        log.warning("%s: send queue full with drop policy 'none': closing", self.peer)
        self.abort()

    def _backpressure(self, on: bool) -> None:
        self._pause_reading("send", on)

    # -- closing -----------------------------------------------------------------------
    def _release(self) -> None:
        """Forget this client's subscriptions and quenches, cancel its
        compile and what waits for it (once)."""
        if self._released:
            return
        self._released = True
        self._backlog.release()
        try:
            self.router.release(self)
        except Exception:
            log.exception("%s: cleanup failed", self.peer)

    def disconnect(self, reason: int, args: str = "") -> None:
        """Send Disconn (the last packet) and close once it is written."""
        if self.state is CLOSED or self.state is CLOSING:
            return
        self.send(Disconn(int(reason), args))
        self.close_after_flush()

    def close_after_flush(self) -> None:
        self.state = CLOSING
        self._release()
        if self.transport is None:
            return
        self._close_timer = self.loop.call_later(self.router.config.close_timeout, self.abort)
        queue = self.queue
        if queue is None or not len(queue):
            self._close_transport()
        else:
            queue.on_drained = self._close_transport

    def _close_transport(self) -> None:
        try:
            self.transport.close()
        except Exception:
            self.abort()

    def abort(self) -> None:
        self.state = CLOSING if self.state is not CLOSED else CLOSED
        self._release()
        if self.queue is not None:
            self.queue.close()
        if self.transport is not None:
            try:
                self.transport.abort()
            except Exception:
                pass

    def _connect_timeout(self) -> None:
        if self.state is NEW:
            log.info("%s: no ConnRqst or UNotify within %.1f s: closing", self.peer,
                     self.router.config.connect_timeout)
            self.abort()

    # -- packets -----------------------------------------------------------------------
    def _conn_rqst(self, p: ConnRqst) -> None:
        if self.state is CONNECTED:
            self._protocol_error()
            self.nack(p.xid, NackCode.PROT_ERROR, "Already connected")
            return
        if p.client_major_version != 4 or p.client_minor_version > 0:
            # as Avis: 4.0 only; the channel stays open for another ConnRqst
            self.nack(p.xid, NackCode.PROT_INCOMPAT,
                      "Protocol version %1.%2 is not supported: this router speaks 4.0",
                      (p.client_major_version, p.client_minor_version))
            return
        redirect = self.router.refuse_connection()
        if redirect is not False:
            # full (max-connections): the spec lets the router answer ConnRqst
            # with Disconn (reason 2: connect there instead) or a Nack
            if redirect:
                log.info("%s: connection limit reached: redirecting to %s", self.peer,
                         redirect)
                self.disconnect(DisconnReason.REDIRECT, redirect)
            else:
                self.nack(p.xid, NackCode.IMPL_LIMIT, "Too many connections")
            return
        if self._keys_refused(p.xid, p.nfn_keys, p.sub_keys):
            return
        options, reply = negotiate(p.options, self.options, self.router.config.options)
        self._apply_options(options)
        self.nfn_keys = p.nfn_keys
        self.sub_keys = p.sub_keys
        self.nfn_prepared = prepare_notification(self.nfn_keys)
        self.state = CONNECTED
        if self._connect_timer is not None:
            self._connect_timer.cancel()
            self._connect_timer = None
        self.router.session_connected(self)
        self.send(ConnRply(p.xid, reply))

    def _apply_options(self, options: SessionOptions) -> None:
        self.options = options
        self.limits = options.limits(self.router.initial_limits)
        self.decoder.limits = self.limits
        if self.queue is not None:
            self.queue.configure(options.send_queue_max, options.send_drop_policy)
        sock = self.transport.get_extra_info("socket") if self.transport else None
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY,
                                1 if options.send_immediately else 0)
            except (OSError, AttributeError, ValueError):
                pass

    def _unotify(self, p: UNotify) -> None:
        if self.state is NEW:
            self.state = UNOTIFY
            if self._connect_timer is not None:
                self._connect_timer.cancel()
                self._connect_timer = None
        if p.client_major_version != 4 or p.client_minor_version > 0:
            log.debug("%s: UNotify version %d.%d discarded", self.peer,
                      p.client_major_version, p.client_minor_version)
            return
        try:
            check_keys(p.keys)
        except KeyError_:
            log.debug("%s: UNotify with bad keys ignored", self.peer)
            return
        self.router.stats.notifications_in += 1
        self.router.deliver(p.attributes, None, p.deliver_insecure,
                            prepare_notification(p.keys), producer=self)

    def _notify_emit(self, body: bytes) -> None:
        """NotifyEmit, hot path: the attributes are decoded once and their XDR
        is forwarded as is in every NotifyDeliver."""
        try:
            attrs, end = decode_attributes(body, 4, self.limits)
        except LimitError as exc:
            log.debug("%s: NotifyEmit over the limits ignored: %s", self.peer, exc)
            return
        except ProtocolError as exc:
            self._violation(f"malformed NotifyEmit: {exc}")
            return
        tail = body[end:]
        if len(tail) == 8 and tail[4:] == _ZERO4 and (tail[:4] == _ONE4 or tail[:4] == _ZERO4):
            deliver_insecure = tail[:4] == _ONE4
            nkeys = self.nfn_prepared
        else:
            try:
                packet = decode_packet(body, self.limits)
            except LimitError as exc:
                log.debug("%s: NotifyEmit over the limits ignored: %s", self.peer, exc)
                return
            except ProtocolError as exc:
                self._violation(f"malformed NotifyEmit: {exc}")
                return
            deliver_insecure = packet.deliver_insecure  # type: ignore[attr-defined]
            keys = packet.keys  # type: ignore[attr-defined]
            if keys:
                try:
                    check_keys(keys)
                except KeyError_:
                    log.debug("%s: NotifyEmit with bad keys ignored", self.peer)
                    return
                nkeys = prepare_notification(self.nfn_keys | keys)
            else:
                nkeys = self.nfn_prepared
        self.router.stats.notifications_in += 1
        self.router.deliver(attrs, body[4:end], deliver_insecure, nkeys, producer=self)

    def _notify_emit_packet(self, p: NotifyEmit) -> None:  # only reached if not CONNECTED
        self._violation("NotifyEmit before ConnRqst")

    def _disconn_rqst(self, p: DisconnRqst) -> None:
        self._release()      # 7.4.5: stop evaluating this client's subscriptions now
        self.send(DisconnRply(p.xid))
        self.close_after_flush()

    def _test_conn(self, p: TestConn | None) -> None:
        if self.queue is not None:
            self.queue.push_conf_conn(_CONF_CONN)

    def _qos_rqst(self, p: QosRqst) -> None:
        options, reply = negotiate(p.options, self.options, self.router.config.options)
        self._apply_options(options)
        self.send(QosRply(p.xid, reply))

    def _sec_rqst(self, p: SecRqst) -> None:
        if self._keys_refused(p.xid, p.add_nfn_keys, p.del_nfn_keys, p.add_sub_keys,
                              p.del_sub_keys):
            return
        error = (key_delta_error(self.nfn_keys, p.add_nfn_keys, p.del_nfn_keys, "notification")
                 or key_delta_error(self.sub_keys, p.add_sub_keys, p.del_sub_keys,
                                    "subscription"))
        if error is not None:
            self._protocol_error()
            self.nack(p.xid, error.code, error.message, error.args_)
            return
        new_nfn = apply_delta(self.nfn_keys, p.add_nfn_keys, p.del_nfn_keys)
        new_sub = apply_delta(self.sub_keys, p.add_sub_keys, p.del_sub_keys)
        nfn_changed = new_nfn != self.nfn_keys
        sub_changed = new_sub != self.sub_keys
        self.nfn_keys, self.sub_keys = new_nfn, new_sub
        self.nfn_prepared = prepare_notification(new_nfn)
        self.send(SecRply(p.xid))
        if sub_changed:
            self.router.owner_sub_keys_changed(self, new_sub)
        if nfn_changed:
            self.router.quench.set_owner_keys(self, new_nfn)

    # -- subscriptions -----------------------------------------------------------------
    def _check_expression(self, xid: int, expression: str, then) -> None:
        """Compile an expression, then ``then(compiled)``; or answer with a
        Nack (and ``then`` is not called). A long expression compiles on the
        router's worker thread: the session handles nothing else until it is
        done, so its replies stay in request order."""
        limit = self.options.max_subscription_length
        if len(expression) > limit // 4 and len(expression.encode("utf-8")) > limit:
            self.nack(xid, NackCode.QOS_LIMIT,
                      f"Subscription expression longer than %1 ({limit} bytes)",
                      ("Subscription.Max-Length",))
            return
        if len(expression) <= OFF_LOOP_LENGTH:
            try:
                compiled = self.router.compile(expression)
            except SubscriptionError as exc:
                self._expression_nack(xid, expression, exc)
                return
            then(compiled)
            return
        future = self.router.compile_off_loop(expression)
        self._backlog.start(future)     # cancelled if the session is released
        future.add_done_callback(lambda f: self._compiled(f, xid, expression, then))

    def _compiled(self, future, xid: int, expression: str, then) -> None:
        if not self._backlog.finish(future):
            return                      # released (and cancelled): nothing to link in
        try:
            if self.state is not CONNECTED:
                return
            exc = future.exception()
            if exc is None:
                then(future.result())
            elif isinstance(exc, SubscriptionError):
                self._expression_nack(xid, expression, exc)
            else:
                log.error("%s: compiling a subscription failed: %r", self.peer, exc)
                self.nack(xid, NackCode.PROT_ERROR, "Internal router error")
        except Exception:
            log.exception("%s: finishing a subscription request failed", self.peer)
        finally:
            self._wake()

    def _expression_nack(self, xid: int, expression: str, exc: SubscriptionError) -> None:
        args = exc.args_ or ((exc.position if exc.position is not None else 0), expression)
        self.nack(xid, exc.nack_code, exc.message, args)

    def _sub_add_rqst(self, p: SubAddRqst) -> None:
        router = self.router
        engine = router.engine
        options = self.options
        if len(engine.owned(self)) >= options.max_subscriptions:
            self.nack(p.xid, NackCode.QOS_LIMIT,
                      f"Too many subscriptions: %1 is {options.max_subscriptions}",
                      ("Subscription.Max-Count",))
            return
        if len(engine) >= router.config.max_subscriptions:
            self.nack(p.xid, NackCode.IMPL_LIMIT, "The router has too many subscriptions")
            return
        if p.keys and self._keys_refused(p.xid, p.keys):
            return
        expression = p.expression
        if (len(expression) <= OFF_LOOP_LENGTH
                and len(expression) <= options.max_subscription_length // 4):
            # a registration burst's request: what _check_expression does for
            # a short text (no length to check in bytes), without its closure
            try:
                compiled = router.compile(expression)
            except SubscriptionError as exc:
                self._expression_nack(p.xid, expression, exc)
                return
            self._sub_add(p, compiled)
            return
        self._check_expression(p.xid, expression, lambda c: self._sub_add(p, c))

    def _sub_add(self, p: SubAddRqst, compiled) -> None:
        sub = self.router.engine.add(self, p.expression, compiled.ast, compiled.matches,
                                     p.accept_insecure, p.keys, self.sub_keys,
                                     compiled.names, compiled.index, compiled.placement)
        self.send_bytes(_SUB_RPLY.pack(16, _SUB_RPLY_ID, p.xid, sub.id))
        self.router.quench.subscription_added(sub)

    def _own_sub(self, xid: int, sub_id: int):
        sub = self.router.engine.owned(self).get(sub_id)
        if sub is None:
            self.nack(xid, NackCode.NO_SUCH_SUB, "No such subscription: %1", (id64(sub_id),))
        return sub

    def _sub_mod_rqst(self, p: SubModRqst) -> None:
        sub = self._own_sub(p.xid, p.subscription_id)
        if sub is None:
            return
        if self._keys_refused(p.xid, p.add_keys, p.del_keys):
            return
        if p.expression:
            self._check_expression(p.xid, p.expression, lambda c: self._sub_mod(p, sub, c))
        else:
            self._sub_mod(p, sub, None)

    def _sub_mod(self, p: SubModRqst, sub, compiled) -> None:
        if self.router.engine.get(sub.id) is not sub:     # gone while compiling
            self.nack(p.xid, NackCode.NO_SUCH_SUB, "No such subscription: %1", (id64(sub.id),))
            return
        quench = self.router.quench
        before = quench.view(sub)
        old_ast = sub.ast
        keys = apply_delta(sub.keys, p.add_keys, p.del_keys)
        if compiled is not None:
            self.router.engine.modify(sub, text=p.expression, ast=compiled.ast,
                                      evaluate=compiled.matches,
                                      accept_insecure=p.accept_insecure, keys=keys,
                                      placement=compiled.placement)
        else:
            self.router.engine.modify(sub, accept_insecure=p.accept_insecure, keys=keys)
        self.send(SubRply(p.xid, sub.id))
        # modify keeps the tree object unless it changed: no walk of a big tree here
        quench.subscription_modified(sub, before, sub.ast is not old_ast)

    def _sub_del_rqst(self, p: SubDelRqst) -> None:
        sub = self._own_sub(p.xid, p.subscription_id)
        if sub is None:
            return
        quench = self.router.quench
        before = quench.view(sub)
        self.router.engine.remove(sub)
        self.send(SubRply(p.xid, sub.id))
        quench.subscription_removed(sub, before)

    # -- quench ------------------------------------------------------------------------
    def _quench_refused(self, xid: int) -> bool:
        """With ``quench = false`` answer a quench request as Avis does (its
        router lacks subset C): Nack NOT_IMPL "Quench not supported". An
        ordinary refusal, not a protocol error: it does not count towards
        ``max_protocol_errors``."""
        if self.router.config.quench:
            return False
        self.nack(xid, NackCode.NOT_IMPL, "Quench not supported")
        return True

    def _keys_refused(self, xid: int, *key_sets: Keys) -> bool:
        """Check the key sets a request carries; the first bad one is Nacked
        with its own code and message. True when the request was refused."""
        try:
            for keys in key_sets:
                check_keys(keys)
        except KeyError_ as exc:
            self.nack(xid, exc.code, exc.message, exc.args_)
            return True
        return False

    def _qnch_add_rqst(self, p: QnchAddRqst) -> None:
        if self._quench_refused(p.xid):
            return
        if not p.names:
            self.nack(p.xid, NackCode.EMPTY_QUENCH, "Quench has no attribute names")
            return
        if self._keys_refused(p.xid, p.keys):
            return
        quench = self.router.quench
        # The existing subscriptions go out (SubAddNotify) before the reply, so
        # that a client holding the QnchRply knows its view is complete:
        # auto-quench relies on it. The spec leaves the order open.
        q = quench.add(self, p.names, p.deliver_insecure, p.keys, self.nfn_keys)
        self.send(QnchRply(p.xid, q.id))

    def _own_quench(self, xid: int, quench_id: int):
        q = self.router.quench.owned(self).get(quench_id)
        if q is None:
            self.nack(xid, NackCode.NO_SUCH_QUENCH, "No such quench: %1", (id64(quench_id),))
        return q

    def _qnch_mod_rqst(self, p: QnchModRqst) -> None:
        if self._quench_refused(p.xid):
            return
        q = self._own_quench(p.xid, p.quench_id)
        if q is None:
            return
        if self._keys_refused(p.xid, p.add_keys, p.del_keys):
            return
        if not (q.names - frozenset(p.names_del)) | frozenset(p.names_add):
            self.nack(p.xid, NackCode.EMPTY_QUENCH,
                      "Quench would have no attribute names left")
            return
        self.router.quench.modify(q, p.names_add, p.names_del, p.deliver_insecure,
                                  p.add_keys, p.del_keys)
        self.send(QnchRply(p.xid, q.id))  # after the notifications it caused, as for add

    def _qnch_del_rqst(self, p: QnchDelRqst) -> None:
        if self._quench_refused(p.xid):
            return
        q = self._own_quench(p.xid, p.quench_id)
        if q is None:
            return
        self.router.quench.remove(q)
        self.send(QnchRply(p.xid, q.id))


_HANDLERS = {
    ConnRqst: Session._conn_rqst,
    UNotify: Session._unotify,
    NotifyEmit: Session._notify_emit_packet,
    DisconnRqst: Session._disconn_rqst,
    TestConn: Session._test_conn,
    QosRqst: Session._qos_rqst,
    SecRqst: Session._sec_rqst,
    SubAddRqst: Session._sub_add_rqst,
    SubModRqst: Session._sub_mod_rqst,
    SubDelRqst: Session._sub_del_rqst,
    QnchAddRqst: Session._qnch_add_rqst,
    QnchModRqst: Session._qnch_mod_rqst,
    QnchDelRqst: Session._qnch_del_rqst,
}
