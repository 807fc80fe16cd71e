"""One client channel's protocol, sans-IO: spec sections 5 and 7.

``SessionCore`` is the session state machine and every packet handler. It
reads no socket and sets no timer: it is fed the bytes a client sent
(``receive``) and told when to act on them (``drain``, within a budget the
caller sets), when a compile it asked for is done (through the job's
completion), and when the channel is gone (``lost``). What it wants done on
the channel it asks of its ``SessionIO`` (``write`` a packet, ``close``...),
and what it wants of the router it asks of its ``SessionHost`` (the engine,
the quench manager, delivery, compiling, and the clock: the core reads none
itself). The wire layout of its fast paths is ``elvin.protocol.fastpath``. The asyncio protocol
(``elvin.router.session.Session``) implements ``SessionIO``: it moves bytes
and applies flow control, nothing else. Tests drive a core with recording
fakes of both, without sockets (``tests/unit/test_router_session_core.py``).

States (``SessionState``; which packet is legal in which, and what follows,
is the table ``elvin.protocol.states.ROUTER_SESSION``, consulted once per
packet in ``_packet``; every transition goes through it):

``NEW``        nothing received yet. The first packet must be ConnRqst or
               UNotify; anything else, or neither within ``connect_timeout``
               seconds (7.4.3, the channel's timer calls ``connect_timed_out``),
               closes the channel without a word.
``UNOTIFY``    session-less (5.4.1): only UNotify packets; the router never
               sends anything on such a channel.
``CONNECTED``  a session (ConnRqst accepted).
``CLOSING``    DisconnRqst received or Disconn sent: everything read is
               ignored; the channel closes once the last packet is written
               (or after ``close_timeout`` if the client stops reading).
``CLOSED``     the channel is gone.

Errors (7.3):

* a frame that cannot be unmarshalled, or a packet the table refuses in
  the session's state (a type a client may not send, anything but
  ConnRqst/UNotify first) is a *protocol violation*: the
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

Pending work (``elvin.protocol.backlog``): received packets wait in the
backlog until the caller's ``drain``. An expression longer than
``OFF_LOOP_LENGTH`` characters is compiled by the host's worker
(``compile_long``); until it is done the later packets wait, so replies come
in request order -- except TestConn, answered as it arrives (liveness never
waits for work). The compile belongs to the session: ``lost`` (or any
release) cancels it, and a result that comes anyway is dropped.

Accepted is owed: a notification whose frame arrived whole is delivered even
if its producer hangs up at once (``lost``): the one being matched in steps
or decoded off the loop goes on, and those held behind it follow, in order
(``_owed``). Requests held then are dropped: nobody waits for their replies.

SecRqst (7.4.8): adding a key that is already registered, or removing one
that is not, is a protocol error, answered with KEY_EXISTS / NO_SUCH_KEY
and nothing is changed (the request is atomic). Avis silently ignores such
keys; we follow the spec because it is explicit here and the Nack codes
exist for it. SubModRqst and QnchModRqst ignore such keys (7.4.18 says so
for subscriptions; quenches are treated the same way, as are names added
twice or removed when absent in QnchModRqst).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Generator, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from elvin.errors import KeyRefused, NackCode, ProtocolError, SubscriptionError
from elvin.keys import EMPTY_KEYS, Keys
from elvin.protocol import (
    ConfConn,
    ConnRply,
    ConnRqst,
    Disconn,
    DisconnReason,
    DisconnRply,
    DisconnRqst,
    DropWarn,
    FrameDecoder,
    LimitError,
    Nack,
    Packet,
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
    decode_packet,
    frame,
)
from elvin.protocol.backlog import TEST_CONN_BODY, Backlog, Job, Violation
from elvin.protocol.fastpath import (
    NOTIFY_EMIT_HEADER,
    SUB_ADD_RQST_HEADER,
    UNOTIFY_HEADER,
    NotifyEmitFields,
    decode_notify_emit,
    header,
    sub_rply_frame,
)
from elvin.protocol.limits import FIELD_OPTIONS, Limits
from elvin.protocol.states import ROUTER_SESSION, IllegalPacket, SessionEvent, SessionState
from elvin.protocol.xdr import decode_sub_add_rqst
from elvin.router.announcer import FIRST_STEP
from elvin.router.clientstats import ClientCounters, timed_steps
from elvin.router.engine import WIDE
from elvin.router.options import SessionOptions, negotiate
from elvin.router.security import (
    NotificationKeys,
    apply_delta,
    check_keys,
    id64,
    key_delta_error,
    key_totals,
    prepare_notification,
)
from elvin.values import INT32_MAX, INT32_MIN, Int64, Value

if TYPE_CHECKING:   # the router's parts, as the host port names them (no import at run time)
    from elvin.ratelog import RateLimitedLog
    from elvin.router.clientstats import PublishLimit
    from elvin.router.config import RouterConfig
    from elvin.router.engine import Engine, Subscription
    from elvin.router.quench import Quench, QuenchManager
    from elvin.router.stats import Stats
    from elvin.subscription.ast import Node
    from elvin.subscription.shapes import Registered

log = logging.getLogger("elvin.router.session")

#: NotifyEmit bodies longer than this (bytes) are decoded on the host's worker
WIDE_NOTIFICATION = 256 * 1024

def _note(host: SessionHost, kind: str, level: int, message: str, *args: Any) -> None:
    """A line a client can make the router write: through the host's
    rate-limited log (``session_notes``, elvin.ratelog) when it has one."""
    notes = getattr(host, "session_notes", None)
    if notes is not None:
        notes.log(kind, level, message, *args)
    else:
        log.log(level, message, *args)

__all__ = ["CLOSED", "CLOSING", "CONNECTED", "NEW", "OFF_LOOP_LENGTH", "UNOTIFY",
           "SessionCore", "SessionHost", "SessionIO"]

# the states (elvin.protocol.states), by the names the router's modules use
NEW, UNOTIFY, CONNECTED = SessionState.NEW, SessionState.UNOTIFY, SessionState.CONNECTED
CLOSING, CLOSED = SessionState.CLOSING, SessionState.CLOSED

#: ROUTER_SESSION's legal packets, by the first word of their body: the
#: state each leads to (the table, indexed for ``_packet``'s one look-up; a
#: packet missing here is refused by ``ROUTER_SESSION.receive`` itself)
_LEGAL: dict[SessionState, dict[bytes, SessionState]] = {
    state: {header(pid): cast(SessionState, following)
            for pid, following in ROUTER_SESSION.received.get(state, {}).items()}
    for state in SessionState}

#: the peer name of the router's in-process clients (elvin.router.localchannel)
INTERNAL_PEER = ("in-process", 0)

#: expressions longer than this (characters) compile on the host's worker
OFF_LOOP_LENGTH = 256      # longer ones take 5-20 ms to compile: the worker does them

_CONF_CONN = frame(ConfConn())
_DROP_WARN = frame(DropWarn())
_NOTIFY_EMIT = NOTIFY_EMIT_HEADER
_UNOTIFY = UNOTIFY_HEADER


_Item = TypeVar("_Item", covariant=True)


class _Owning(Protocol[_Item]):
    """The engine and the quench manager: what each owner made, by id."""

    def owned(self, owner: Hashable, /) -> Mapping[int, _Item]: ...


class HostJob(Job, Protocol):
    """What the host's ``compile_long``, ``run_off_loop``, ``link_later`` and
    ``announce_later`` give: a future (``asyncio.Future`` in the router) the
    backlog waits on, that calls back once it is done."""

    def add_done_callback(self, fn: Callable[[Any], object], /) -> None: ...


class SessionIO(Protocol):
    """What a core asks of the channel it serves."""

    def write(self, data: bytes, droppable: bool = False) -> None:
        """Queue framed packets for the client (dropped once the channel closed)."""

    def write_conf_conn(self, data: bytes) -> None:
        """Queue a ConfConn, unless other packets are already waiting (7.4.14)."""

    def close(self, flush: bool) -> None:
        """Close the channel: once what is queued is written (``flush``: a
        Disconn or DisconnRply was the last packet), or at once."""

    def apply_options(self, options: SessionOptions) -> None:
        """The negotiated options changed: the send queue's limits, TCP_NODELAY."""

    def started(self) -> None:
        """The first packet (ConnRqst or UNotify) was taken: the connect timer goes."""


class SessionHost(Protocol):
    """What a core asks of its router (``elvin.router.server.Router``)."""

    engine: Engine
    quench: QuenchManager
    stats: Stats
    config: RouterConfig
    #: the publish limit's buckets (elvin.router.clientstats.PublishLimit)
    publish_limit: PublishLimit
    #: the rate-limited log of what clients make the router write (elvin.ratelog)
    session_notes: RateLimitedLog
    initial_options: SessionOptions
    initial_limits: Limits

    def clock(self) -> float:
        """Seconds on the clock of the router's deadlines (``time.perf_counter``
        in the router: the scheduler's ``drain`` deadlines are on it, and the
        router gives the same clock to its engine and quench manager, which
        measure their steps' budgets against the deadlines derived from it).
        The core reads no clock of its own."""

    def compile(self, text: str) -> Registered:
        """A short expression compiled now, or SubscriptionError."""

    def compile_long(self, text: str) -> HostJob:
        """A long expression compiled on a worker: a future that gives a
        ``Registered`` or raises SubscriptionError."""

    def run_off_loop(self, size: int, job: Callable[[], Any]) -> HostJob:
        """``job()`` on the host's worker (``size``: bytes, choosing its lane):
        a future of its result."""

    def link_later(self, steps: Generator[Any, None, Any]) -> HostJob:
        """A future of what the generator ``steps`` returns, run a few
        milliseconds per loop turn (``elvin.router.steps``)."""

    def announce_later(self, quench: Quench) -> HostJob:
        """A future done once ``quench`` is told what is pending
        (``elvin.router.announcer``)."""

    def deliver_steps(self, attrs: dict[str, Value], block: bytes | None,
                      deliver_insecure: bool, nkeys: NotificationKeys | None, *,
                      producer: Hashable | None = None) -> Generator[None, None, int]:
        """A delivery as a generator of steps (the rest run by ``link_later``)."""

    def deliver_first(self, attrs: dict[str, Value], block: bytes | None,
                      deliver_insecure: bool, nkeys: NotificationKeys | None, *,
                      producer: Hashable | None = None) -> Generator[None, None, int] | None:
        """``deliver_steps``'s first step run now: None when it was the only
        one, else a generator of the steps after it (for ``link_later``)."""

    def deliver_ordered(self, key: Hashable, attrs: dict[str, Value], block: bytes | None,
                        deliver_insecure: bool, nkeys: NotificationKeys | None, *,
                        producer: Hashable | None = None) -> None:
        """``deliver_steps`` run to its end, after the earlier ones of ``key``."""

    def refuse_connection(self) -> str | None | bool: ...

    def session_connected(self, owner: Hashable) -> None: ...

    def release(self, owner: Hashable) -> None:
        """Forget the owner's subscriptions and quenches."""

    def owner_sub_keys_changed(self, owner: Hashable, keys: Keys) -> None: ...


class _Detached:
    """The ``SessionIO`` of a core whose channel is gone: nothing to do."""

    def write(self, data: bytes, droppable: bool = False) -> None:
        pass

    def write_conf_conn(self, data: bytes) -> None:
        pass

    def close(self, flush: bool) -> None:
        pass

    def apply_options(self, options: SessionOptions) -> None:
        pass

    def started(self) -> None:
        pass


_DETACHED = _Detached()


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


class _Pending:
    """A request whose expression compiles off the loop: what finishes it."""

    __slots__ = ("job", "xid", "expression", "then", "args")

    def __init__(self, job: Job, xid: int, expression: str, then: Callable[..., None],
                 args: tuple[Any, ...]) -> None:
        self.job, self.xid, self.expression = job, xid, expression
        self.then, self.args = then, args


class SessionCore:
    """The protocol of one client channel. ``owner`` is the object the
    router files the client's subscriptions and quenches under, and delivers
    to (the channel itself)."""

    def __init__(self, host: SessionHost, io: SessionIO, owner: Hashable,
                 peer: Any = None) -> None:
        self.host = host
        self.io = io
        self.owner = owner
        self.peer = peer
        self.state = NEW
        self.options: SessionOptions = host.initial_options
        self.limits = host.initial_limits
        self.decoder = FrameDecoder(self.limits)
        self.nfn_keys: Keys = EMPTY_KEYS
        self.sub_keys: Keys = EMPTY_KEYS
        self.nfn_prepared: NotificationKeys | None = None
        self.errors = 0
        self.released = False
        #: this channel's figures, and its publish limit's bucket (elvin.router.clientstats)
        self.counters = ClientCounters()
        #: packets not handled yet, and the compile they wait for
        self.backlog = Backlog()
        self._pending: _Pending | None = None
        #: the wide NotifyEmit being decoded off the loop, and its body
        self._wide: tuple[HostJob, bytes] | None = None
        #: called when a compile finished and packets wait again (the channel
        #: schedules its next turn); None: nobody to tell (tests drain directly)
        self.on_ready: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"<SessionCore {self.peer} {self.state}>"

    @property
    def closing(self) -> bool:
        return self.state is CLOSING or self.state is CLOSED

    # -- input --------------------------------------------------------------------------
    def receive(self, data: bytes) -> None:
        """Bytes the client sent: their packets join the backlog (a TestConn
        of a session is answered at once); a framing error becomes a
        violation after the good frames before it."""
        if self.state is CLOSING or self.state is CLOSED:
            return
        self.counters.bytes_in += len(data)
        bad = None
        try:
            bodies = self.decoder.feed_frames(data)
        except ProtocolError as exc:
            bodies, bad = exc.frames, f"bad frame: {exc}"
        if self.state is NEW and bad is None:
            bad = self._pre_session_frame(bodies)
            if bad is not None:
                self.host.stats.refuse("pre-session-frame")
                bodies = []
        if self.state is CONNECTED and TEST_CONN_BODY in bodies:
            bodies = self._answer_liveness(bodies)
        backlog = self.backlog
        backlog.add(bodies)
        if bad is not None:
            backlog.violation(bad)

    def _pre_session_frame(self, bodies: list[bytes]) -> str | None:
        """Before a session only a small frame may come (a ConnRqst with its
        options and keys needs kilobytes, not megabytes; ``pre-session-max-
        length``), except a first UNotify, which may be as long as any
        packet. Checked on the frame's header, before its body is waited
        for: what is wrong with the first frame, or None."""
        limit = self.host.config.pre_session_max_length
        if bodies:
            first = bodies[0]
            length = len(first)
            ptype: int | None = int.from_bytes(first[:4], "big")
        else:
            decoder = self.decoder
            pending = decoder.pending_length
            if pending is None or pending <= limit:
                return None
            length = pending
            ptype = decoder.pending_type
            if ptype is None:
                return None         # its type tells: wait for 4 more bytes
        if length <= limit or ptype == PacketId.UNOTIFY:
            return None
        return (f"a {length}-byte frame before ConnRqst: at most {limit} bytes "
                "(pre-session-max-length)")

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

    def drain(self, quantum: int, deadline: float) -> bool:
        """Handle up to ``quantum`` backlog packets, fewer if the clock
        (the host's ``clock``) passes ``deadline`` (one notification may cost
        a whole evaluation budget). True if more wait and can be handled now."""
        backlog = self.backlog
        clock = self.host.clock
        for _ in range(quantum):
            if self.state is CLOSING or self.state is CLOSED:
                break
            body = backlog.next()
            if body is None:            # nothing waits, or a compile runs
                break
            if isinstance(body, Violation):
                self._violation(body.reason)
                break
            self._packet(body)
            if clock() > deadline:
                break
        if self.state is CLOSING or self.state is CLOSED:
            backlog.clear()
            return False
        return bool(backlog) and not backlog.busy

    @property
    def waiting(self) -> int:
        """Packets waiting for a turn (0 while a compile holds them)."""
        backlog = self.backlog
        return 0 if backlog.busy else len(backlog)

    @property
    def holding_too_much(self) -> bool:
        """Reading must pause: packets wait for a turn, or too many are held
        behind a compile."""
        backlog = self.backlog
        if backlog.busy:
            return backlog.full
        return bool(backlog)

    def connect_timed_out(self, seconds: float) -> bool:
        """The connect timer ran out: close a channel still without a first
        packet; True when it did (the channel notes it, rate-limited)."""
        if self.state is NEW:
            log.debug("%s: no ConnRqst or UNotify within %.1f s: closing", self.peer, seconds)
            self.abort()
            return True
        return False

    def lost(self) -> None:
        """The channel is gone: release everything, and let go of the channel
        (it holds this core: the two would be a reference cycle, kept until
        a full collection)."""
        state, producer = self.state, self.owner
        self._event(SessionEvent.LOST)
        if not self.released and (state is CONNECTED or state is UNOTIFY):
            self._owed(state, producer)
        self._release()
        self.io = _DETACHED
        self.owner = None
        self.on_ready = None

    # -- dispatch -----------------------------------------------------------------------
    def _packet(self, body: bytes) -> None:
        """One packet: legal here (``ROUTER_SESSION``), else a violation;
        then decoded, the state it leads to entered, and its handler run."""
        try:
            state = self.state
            head = body[:4]
            if head == _NOTIFY_EMIT and state is CONNECTED:
                # the hot path: what the table says of it (asserted at import),
                # without the look-up
                self._notify_emit(body)
                return
            following = _LEGAL[state].get(head)
            if following is None:
                self._illegal(state, body)
                return
            packet: Packet | None = decode_sub_add_rqst(body, self.limits) \
                if head == SUB_ADD_RQST_HEADER else None    # a registration burst's
            if packet is None:
                try:
                    packet = decode_packet(body, self.limits)
                except LimitError as exc:
                    self._limit_error(exc)
                    return
                except ProtocolError as exc:
                    self._violation(f"malformed packet: {exc}")
                    return
            if following is not state:
                self._enter(following)
            handler = _HANDLERS[head]
            try:
                handler(self, packet)
            except Exception:  # one packet's failure must not end the session; logged, nacked
                log.exception("%s: failed to handle %s", self.peer, type(packet).__name__)
                xid = getattr(packet, "xid", None)
                if xid is not None and self.state is CONNECTED:
                    self.nack(xid, NackCode.PROT_ERROR, "Internal router error")
        except Exception:       # never let a client's packet escape
            log.exception("%s: unexpected failure; closing the session", self.peer)
            self.abort()

    def _illegal(self, state: SessionState, body: bytes) -> None:
        """A packet ``_LEGAL`` lacks: the table's refusal is a violation
        (7.3.2), the one place an illegal packet is handled. (In a state the
        table ignores, the packet is dropped.)"""
        if len(body) < 4:
            self._violation(f"malformed packet: a packet of {len(body)} bytes is too short "
                            "to hold a packet type")
            return
        try:
            ROUTER_SESSION.receive(state, int.from_bytes(body[:4], "big", signed=True))
        except IllegalPacket as exc:
            self._violation(exc.reason)

    def _enter(self, following: SessionState) -> None:
        """A packet moved the session to ``following`` (the table's, or the
        ConnRqst handler's ``ACCEPTED``). Leaving NEW, the channel's connect
        timer goes."""
        if self.state is NEW:
            self.io.started()
        self.state = following

    def _event(self, event: SessionEvent) -> None:
        """One of the session's own transitions (``ROUTER_SESSION.events``)."""
        self.state = cast(SessionState, ROUTER_SESSION.event(self.state, event))

    def _limit_error(self, exc: LimitError) -> None:
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
        option = FIELD_OPTIONS.get(exc.limit, "")
        if option:
            self._protocol_error(exc.xid, NackCode.QOS_LIMIT, f"Request exceeds %1: {exc}",
                                 (option,))
        else:
            self._protocol_error(exc.xid, NackCode.IMPL_LIMIT,
                                 f"Request exceeds a router limit: {exc}")

    def _protocol_error(self, xid: int | None, code: int, message: str,
                        args: tuple[Any, ...] = ()) -> None:
        """A protocol error (7.3.3): the request's Nack, then, after
        ``max_protocol_errors`` of them, Disconn (the last packet: nothing
        is written after it)."""
        if xid is not None and self.state is CONNECTED:
            self.nack(xid, code, message, args)
        self.errors += 1
        self.host.stats.protocol_errors += 1
        if self.errors >= self.host.config.max_protocol_errors and self.state is CONNECTED:
            _note(self.host, "clients disconnected for protocol errors", logging.WARNING,
                  "%s: %d protocol errors: disconnecting", self.peer, self.errors)
            self.disconnect(DisconnReason.PROTOCOL_ERRORS,
                            f"{self.errors} protocol errors")

    def _violation(self, reason: str) -> None:
        """A protocol violation (7.3.2): close this channel."""
        self.host.stats.protocol_errors += 1
        _note(self.host, "protocol violations", logging.INFO, "%s: protocol violation: %s",
              self.peer, reason)
        if self.state is CONNECTED:
            self.disconnect(DisconnReason.PROTOCOL_ERRORS, f"protocol violation: {reason}")
        else:
            self.abort()

    # -- output -------------------------------------------------------------------------
    def send(self, packet: Packet, droppable: bool = False) -> None:
        """A packet for the client; none after Disconn or DisconnRply (once closing)."""
        if self.state is not CLOSING and self.state is not CLOSED:
            self.io.write(frame(packet), droppable)

    def nack(self, xid: int, code: int, message: str, args: tuple[Any, ...] = ()) -> None:
        self.send(Nack(xid, int(code), message, tuple(_nack_value(a) for a in args)))

    # -- closing ------------------------------------------------------------------------
    def _release(self) -> None:
        """Forget this client's subscriptions and quenches, cancel its
        compile and what waits for it (once)."""
        if self.released:
            return
        self.released = True
        self._pending = None
        self.backlog.release()
        try:
            self.host.release(self.owner)
        except Exception:  # the session ends anyway; logged
            log.exception("%s: cleanup failed", self.peer)

    def disconnect(self, reason: int, args: str = "") -> None:
        """Send Disconn (the last packet) and close once it is written."""
        if self.state is CLOSED or self.state is CLOSING:
            return
        self.io.write(frame(Disconn(int(reason), args)))
        self.close_after_flush()

    def close_after_flush(self) -> None:
        """Disconn was written: close once it is."""
        self._event(SessionEvent.SENT_DISCONN)
        self._release()
        self.io.close(flush=True)

    def abort(self) -> None:
        """Close at once, without a word."""
        self._event(SessionEvent.ABORTED)
        self._release()
        self.io.close(flush=False)

    def refused(self) -> None:
        """Refused at the door before a byte was read: nothing to release."""
        self._event(SessionEvent.REFUSED)
        self.released = True

    # -- packets ------------------------------------------------------------------------
    def _conn_rqst(self, p: ConnRqst) -> None:
        if self.state is CONNECTED:
            self._protocol_error(p.xid, NackCode.PROT_ERROR, "Already connected")
            return
        if p.client_major_version != 4 or p.client_minor_version > 0:
            # as Avis: 4.0 only; the channel stays open for another ConnRqst
            self.nack(p.xid, NackCode.PROT_INCOMPAT,
                      "Protocol version %1.%2 is not supported: this router speaks 4.0",
                      (p.client_major_version, p.client_minor_version))
            return
        redirect = self.host.refuse_connection()
        if redirect is not False:
            # full (max-connections): the spec lets the router answer ConnRqst
            # with Disconn (reason 2: connect there instead) or a Nack
            if redirect:
                _note(self.host, "clients redirected at max-connections", logging.INFO,
                      "%s: connection limit reached: redirecting to %s", self.peer, redirect)
                self.disconnect(DisconnReason.REDIRECT, redirect)  # type: ignore[arg-type]  # redirect is the URL string here
            else:
                self.nack(p.xid, NackCode.IMPL_LIMIT, "Too many connections")
            return
        if self._keys_refused(p.xid, p.nfn_keys, p.sub_keys) or \
                self._connection_keys_refused(p.xid, p.nfn_keys, p.sub_keys):
            return
        options, reply = negotiate(p.options, self.options, self.host.config.options)
        self._apply_options(options)
        self.nfn_keys = p.nfn_keys
        self.sub_keys = p.sub_keys
        self.nfn_prepared = prepare_notification(self.nfn_keys)
        self._enter(cast(SessionState, ROUTER_SESSION.event(self.state, SessionEvent.ACCEPTED)))
        self.host.session_connected(self.owner)
        self.send(ConnRply(p.xid, reply))  # type: ignore[arg-type]  # Values (options.py: object)

    def _apply_options(self, options: SessionOptions) -> None:
        self.options = options
        self.limits = options.limits(self.host.initial_limits)
        self.decoder.limits = self.limits
        self.io.apply_options(options)

    def _unotify(self, p: UNotify) -> None:
        prepared = self._unotify_prepared(p)
        if prepared is not None:
            # in steps, as NotifyEmit; this connection's later ones after it
            self.host.deliver_ordered(self.owner, *prepared, producer=self.owner)

    def _unotify_prepared(self, p: UNotify) -> tuple[dict[str, Any], None, bool, Any] | None:
        """An UNotify's arguments for ``deliver``, or None if it is discarded."""
        if p.client_major_version != 4 or p.client_minor_version > 0:
            log.debug("%s: UNotify version %d.%d discarded", self.peer,
                      p.client_major_version, p.client_minor_version)
            return None
        try:
            check_keys(p.keys)
        except KeyRefused:
            log.debug("%s: UNotify with bad keys ignored", self.peer)
            return None
        self.host.stats.notifications_in += 1
        self.counters.notifications_in += 1
        if self.host.config.publish_rate and self._throttled():
            return None
        return p.attributes, None, p.deliver_insecure, prepare_notification(p.keys)

    def _notify_emit(self, body: bytes) -> None:
        """NotifyEmit, hot path: the attributes are decoded once and their XDR
        is forwarded as is in every NotifyDeliver. A wide one (over
        ``WIDE_NOTIFICATION`` bytes: 60,000 attributes took 90-170 ms to
        decode) is decoded on the host's worker, as this session's job (its
        later packets wait for it, so its notifications stay in order)."""
        if len(body) > WIDE_NOTIFICATION:
            job = self.host.run_off_loop(len(body), functools.partial(
                decode_notify_emit, body, self.limits))
            self.backlog.start(job, keep=True)  # owed even if the client goes
            self._wide = (job, body)
            job.add_done_callback(functools.partial(self._notify_emit_decoded, body))
            return
        try:
            decoded = decode_notify_emit(body, self.limits)
        except LimitError as exc:
            log.debug("%s: NotifyEmit over the limits ignored: %s", self.peer, exc)
            return
        except ProtocolError as exc:
            self._violation(f"malformed NotifyEmit: {exc}")
            return
        self._emit(body, *decoded)

    def _notify_emit_decoded(self, body: bytes, job: HostJob) -> None:
        """(A wide NotifyEmit decoded, on the loop.)"""
        self._wide = None
        if not self.backlog.finish(job):
            return                      # released meanwhile (``_owed_steps`` has it)
        exc = job.exception()
        if isinstance(exc, LimitError):
            log.debug("%s: NotifyEmit over the limits ignored: %s", self.peer, exc)
        elif isinstance(exc, ProtocolError):
            self._violation(f"malformed NotifyEmit: {exc}")
        elif exc is not None:
            log.error("%s: decoding a NotifyEmit failed: %r", self.peer, exc)
        elif self.state is CONNECTED:
            self._emit(body, *job.result())
        if self.backlog and self.on_ready is not None:
            self.on_ready()

    def _emit(self, body: bytes, attrs: dict[str, Any], end: int, deliver_insecure: bool,
              keys: Keys | None) -> None:
        # matched a millisecond at a time (40,000 regex() subscriptions to
        # evaluate: 0.4-1.6 s; a pattern that overruns its own limit ends a
        # step): the first step now, the rest as this session's job, so its
        # next notification waits for it
        counters = self.counters
        clock = self.host.clock
        started = clock()
        rest = self._emit_steps(body, attrs, end, deliver_insecure, keys, self.owner, now=True)
        counters.match_seconds += clock() - started
        if rest is None:
            return
        job = self.host.link_later(timed_steps(rest, counters))
        self.backlog.start(job, keep=True)  # owed even if the client goes
        job.add_done_callback(self._emitted)

    def _emit_steps(self, body: bytes, attrs: dict[str, Any], end: int, deliver_insecure: bool,
                    keys: Keys | None, producer: Any, now: bool = False) -> Any:
        """A decoded NotifyEmit's delivery as steps, or None if its keys are
        refused. ``now``: its first step is run at once (``deliver_first``),
        and what is returned is the steps after it, None if there are none."""
        if keys:
            try:
                check_keys(keys)
            except KeyRefused:
                log.debug("%s: NotifyEmit with bad keys ignored", self.peer)
                return None
        host = self.host
        counters = self.counters
        host.stats.notifications_in += 1
        counters.notifications_in += 1
        if host.config.publish_rate and self._throttled():
            return None
        nkeys = prepare_notification(self.nfn_keys | keys) if keys else self.nfn_prepared
        if now:
            return host.deliver_first(attrs, body[4:end], deliver_insecure, nkeys,
                                      producer=producer)
        return host.deliver_steps(attrs, body[4:end], deliver_insecure, nkeys,
                                  producer=producer)

    def _owed(self, state: str, producer: Any) -> None:
        """The client hung up: what it sent before is delivered all the same
        (it was accepted: a producer that writes its notifications and closes
        its socket at once loses none), in order, a few milliseconds per turn
        (``Backlog.leave``; its requests are dropped, nobody waits for them)."""
        inflight, held = self.backlog.leave()
        wide = self._wide if inflight is not None and self._wide is not None \
            and self._wide[0] is inflight else None
        owed = [body for body in held
                if body[:4] == _UNOTIFY or (state is CONNECTED and body[:4] == _NOTIFY_EMIT)]
        if inflight is not None or owed:
            self.host.link_later(self._owed_steps(inflight, wide, owed, producer))

    def _owed_steps(self, inflight: Any, wide: tuple[Any, bytes] | None,
                    owed: list[bytes], producer: Any) -> Generator[Any, None, None]:
        """(The steps of ``_owed``: each waits for the one before.)"""
        steps: Any = None
        if inflight is not None:
            yield inflight              # parked until it is matched, or decoded
            first: NotifyEmitFields | None = _outcome(inflight) if wide is not None else None
            if wide is not None and first is not None:
                steps = self._emit_steps(wide[1], *first, producer)
            if steps is not None:
                yield from steps
        for body in owed:
            yield
            if body[:4] == _NOTIFY_EMIT:
                decoded: NotifyEmitFields | None
                if len(body) > WIDE_NOTIFICATION:
                    job = self.host.run_off_loop(len(body), functools.partial(
                        decode_notify_emit, body, self.limits))
                    yield job           # parked while it is decoded off the loop
                    decoded = _outcome(job)
                else:
                    try:
                        decoded = decode_notify_emit(body, self.limits)
                    except ProtocolError:   # LimitError too: it was never accepted
                        continue
                if decoded is None:
                    continue
                attrs, end, insecure, keys = decoded
                steps = self._emit_steps(body, attrs, end, insecure, keys, producer)
            else:
                try:
                    packet: Packet = decode_packet(body, self.limits)
                except ProtocolError:
                    continue
                prepared = self._unotify_prepared(packet) if isinstance(packet, UNotify) \
                    else None
                steps = None if prepared is None else \
                    self.host.deliver_steps(*prepared, producer=producer)
            if steps is not None:
                yield from steps

    def _throttled(self) -> bool:
        """This notification is over the publish limit (``publish-rate``,
        ``publish-burst``; elvin.router.clientstats): then it is dropped,
        counted, and the publisher gets a DropWarn (at most one per
        ``DROP_WARN_INTERVAL``; never on a session-less channel, which the
        router sends nothing). The router's in-process clients are not limited."""
        if self.peer == INTERNAL_PEER:
            return False
        host = self.host
        now = host.clock()
        if host.publish_limit.admits(self.counters, self.peer, host.config, now):
            return False
        host.stats.throttled += 1
        if self.counters.drop_warn_due(now) and self.state is CONNECTED:
            self.io.write(_DROP_WARN)
        return True

    def _emitted(self, job: HostJob) -> None:
        """(A notification matched in steps was delivered, on the loop.)"""
        if self.backlog.finish(job) and self.backlog and self.on_ready is not None:
            self.on_ready()

    def _disconn_rqst(self, p: DisconnRqst) -> None:
        # (CLOSING already: the table's) 7.4.5: stop evaluating this
        # client's subscriptions now; the reply is the last packet
        self._release()
        self.io.write(frame(DisconnRply(p.xid)))
        self.io.close(flush=True)

    def _test_conn(self, p: TestConn | None) -> None:
        self.io.write_conf_conn(_CONF_CONN)

    def _qos_rqst(self, p: QosRqst) -> None:
        options, reply = negotiate(p.options, self.options, self.host.config.options)
        self._apply_options(options)
        self.send(QosRply(p.xid, reply))  # type: ignore[arg-type]  # as ConnRply's

    def _sec_rqst(self, p: SecRqst) -> None:
        if self._keys_refused(p.xid, p.add_nfn_keys, p.del_nfn_keys, p.add_sub_keys,
                              p.del_sub_keys):
            return
        error = (key_delta_error(self.nfn_keys, p.add_nfn_keys, p.del_nfn_keys, "notification")
                 or key_delta_error(self.sub_keys, p.add_sub_keys, p.del_sub_keys,
                                    "subscription"))
        if error is not None:
            self._protocol_error(p.xid, error.code, error.message, error.args_)
            return
        new_nfn = apply_delta(self.nfn_keys, p.add_nfn_keys, p.del_nfn_keys)
        new_sub = apply_delta(self.sub_keys, p.add_sub_keys, p.del_sub_keys)
        if self._connection_keys_refused(p.xid, new_nfn, new_sub):
            return
        nfn_changed = new_nfn != self.nfn_keys
        sub_changed = new_sub != self.sub_keys
        self.nfn_keys, self.sub_keys = new_nfn, new_sub
        self.nfn_prepared = prepare_notification(new_nfn)
        self.send(SecRply(p.xid))
        if sub_changed:
            self.host.owner_sub_keys_changed(self.owner, new_sub)
        if nfn_changed:
            self.host.quench.set_owner_keys(self.owner, new_nfn)

    # -- subscriptions ------------------------------------------------------------------
    def _compile(self, xid: int, expression: str, then: Callable[..., None],
                 *args: Any) -> Any:
        """The compiled expression now (a short one), or None: Nacked (too
        long, or not a valid expression), or handed to the host's worker --
        then ``then(*args, compiled)`` once it is done, and the packets after
        this one wait for it (the session's one job)."""
        limit = self.options.max_subscription_length
        length = len(expression)
        # (characters first: only a text of more than a quarter of the limit
        # can be over it in UTF-8 bytes)
        if length > limit // 4 and len(expression.encode("utf-8")) > limit:
            self.nack(xid, NackCode.QOS_LIMIT,
                      f"Subscription expression longer than %1 ({limit} bytes)",
                      ("Subscription.Max-Length",))
            return None
        if length <= OFF_LOOP_LENGTH:
            try:
                return self.host.compile(expression)
            except SubscriptionError as exc:
                self._expression_nack(xid, expression, exc)
                return None
        job = self.host.compile_long(expression)
        self.backlog.start(job)         # cancelled if the session is released
        self._pending = _Pending(job, xid, expression, then, args)
        job.add_done_callback(self._compiled)
        return None

    def _compiled(self, job: HostJob) -> None:
        """(The job's completion, on the loop.)"""
        pending = self._pending
        if not self.backlog.finish(job) or pending is None or pending.job is not job:
            return                      # released (and cancelled): nothing to link in
        self._pending = None
        try:
            if self.state is CONNECTED:
                exc = job.exception()
                if exc is None:
                    pending.then(*pending.args, job.result())
                elif isinstance(exc, SubscriptionError):
                    self._expression_nack(pending.xid, pending.expression, exc)
                else:
                    log.error("%s: compiling a subscription failed: %r", self.peer, exc)
                    self.nack(pending.xid, NackCode.PROT_ERROR, "Internal router error")
        except Exception:  # the request's failure must not end the session; logged
            log.exception("%s: finishing a subscription request failed", self.peer)
        if self.backlog and self.on_ready is not None:
            self.on_ready()

    def _expression_nack(self, xid: int, expression: str, exc: SubscriptionError) -> None:
        args = exc.args_ or ((exc.position if exc.position is not None else 0), expression)
        self.nack(xid, exc.nack_code, exc.message, args)

    def _sub_add_rqst(self, p: SubAddRqst) -> None:
        host = self.host
        engine = host.engine
        options = self.options
        if len(engine.owned(self.owner)) >= options.max_subscriptions:
            self.nack(p.xid, NackCode.QOS_LIMIT,
                      f"Too many subscriptions: %1 is {options.max_subscriptions}",
                      ("Subscription.Max-Count",))
            return
        if len(engine) >= host.config.max_subscriptions:
            self.nack(p.xid, NackCode.IMPL_LIMIT, "The router has too many subscriptions")
            return
        if p.keys and (self._keys_refused(p.xid, p.keys)
                       or self._own_keys_refused(p.xid, p.keys, "subscription")):
            return
        compiled = self._compile(p.xid, p.expression, self._sub_add, p)
        if compiled is not None:
            self._sub_add(p, compiled)

    def _sub_add(self, p: SubAddRqst, compiled: Registered) -> None:
        placement = compiled.placement
        if placement is not None and (len(placement.plan) > WIDE or len(placement.names) > WIDE):
            # a wide expression is linked in over several loop turns, as this
            # session's job: its SubRply, and its later packets, wait for it
            job = self.host.link_later(self.host.engine.add_steps(
                self.owner, p.expression, compiled.ast, compiled.matches, p.accept_insecure,
                p.keys, self.sub_keys, placement))
            self.backlog.start(job)     # cancelled if the session is released
            job.add_done_callback(functools.partial(self._linked, p))
            return
        sub = self.host.engine.add(self.owner, p.expression, compiled.ast, compiled.matches,
                                   p.accept_insecure, p.keys, self.sub_keys,
                                   compiled.names, compiled.index, placement)
        self._added(p, sub)

    def _added(self, p: SubAddRqst, sub: Subscription) -> None:
        if not self.released:
            self.io.write(sub_rply_frame(p.xid, sub.id))
        self.host.quench.subscription_added(sub)

    def _linked(self, p: SubAddRqst, job: HostJob) -> None:
        """(A wide subscription linked in, on the loop.)"""
        if not self.backlog.finish(job):
            try:
                sub = job.result()      # linked as the session went: unlinked again
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - reported by the job
                return                  # released meanwhile: the steps gave up
            self.host.engine.remove(sub)
            return
        if job.exception() is not None:
            log.error("%s: linking a subscription failed: %r", self.peer, job.exception())
            self.nack(p.xid, NackCode.PROT_ERROR, "Internal router error")
        else:
            self._added(p, job.result())
        if self.backlog and self.on_ready is not None:
            self.on_ready()

    def _own_sub(self, xid: int, sub_id: int) -> Subscription | None:
        return self._owned(self.host.engine, xid, sub_id, NackCode.NO_SUCH_SUB,
                           "No such subscription: %1")

    def _owned(self, table: _Owning[_Item], xid: int, item_id: int, code: int,
               message: str) -> _Item | None:
        """This session's subscription or quench ``item_id`` in ``table``, or
        None after a Nack: a client may only name what it made itself."""
        item = table.owned(self.owner).get(item_id)
        if item is None:
            self.nack(xid, code, message, (id64(item_id),))
        return item

    def _sub_mod_rqst(self, p: SubModRqst) -> None:
        sub = self._own_sub(p.xid, p.subscription_id)
        if sub is None:
            return
        if self._keys_refused(p.xid, p.add_keys, p.del_keys):
            return
        if p.add_keys and self._own_keys_refused(
                p.xid, apply_delta(sub.keys, p.add_keys, p.del_keys), "subscription"):
            return
        if p.expression:
            compiled = self._compile(p.xid, p.expression, self._sub_mod, p, sub)
            if compiled is not None:
                self._sub_mod(p, sub, compiled)
        else:
            self._sub_mod(p, sub, None)

    def _sub_mod(self, p: SubModRqst, sub: Subscription, compiled: Registered | None) -> None:
        engine = self.host.engine
        if engine.get(sub.id) is not sub:     # gone while compiling
            self.nack(p.xid, NackCode.NO_SUCH_SUB, "No such subscription: %1", (id64(sub.id),))
            return
        quench = self.host.quench
        keys = apply_delta(sub.keys, p.add_keys, p.del_keys)
        placement = compiled.placement if compiled is not None else None
        if compiled is not None and placement is not None and (
                len(placement.plan) > WIDE or len(placement.names) > WIDE):
            # a wide expression is linked in over several loop turns (as for
            # SubAddRqst); the quench view is taken when it changes
            job = self.host.link_later(engine.modify_steps(
                sub, text=p.expression, ast=compiled.ast, evaluate=compiled.matches,
                accept_insecure=p.accept_insecure, keys=keys, placement=placement,
                before_swap=functools.partial(quench.view, sub)))
            self.backlog.start(job)     # cancelled if the session is released
            job.add_done_callback(functools.partial(self._modified, p, sub, sub.ast))
            return
        before = quench.view(sub)
        old_ast = sub.ast
        if compiled is not None:
            engine.modify(sub, text=p.expression, ast=compiled.ast, evaluate=compiled.matches,
                          accept_insecure=p.accept_insecure, keys=keys,
                          placement=compiled.placement)
        else:
            engine.modify(sub, accept_insecure=p.accept_insecure, keys=keys)
        self.send(SubRply(p.xid, sub.id))
        # modify keeps the tree object unless it changed: no walk of a big tree here
        quench.subscription_modified(sub, before, sub.ast is not old_ast)

    def _modified(self, p: SubModRqst, sub: Subscription, old_ast: Node, job: HostJob) -> None:
        """(A wide modification linked in, on the loop.)"""
        if not self.backlog.finish(job):
            return                      # released meanwhile: its subscriptions go
        exc = job.exception()
        if exc is not None:
            log.error("%s: linking a subscription failed: %r", self.peer, exc)
            self.nack(p.xid, NackCode.PROT_ERROR, "Internal router error")
        elif job.result() is NotImplemented:
            self.nack(p.xid, NackCode.NO_SUCH_SUB, "No such subscription: %1", (id64(sub.id),))
        else:
            self.send(SubRply(p.xid, sub.id))
            self.host.quench.subscription_modified(sub, job.result(), sub.ast is not old_ast)
        if self.backlog and self.on_ready is not None:
            self.on_ready()

    def _sub_del_rqst(self, p: SubDelRqst) -> None:
        sub = self._own_sub(p.xid, p.subscription_id)
        if sub is None:
            return
        quench = self.host.quench
        before = quench.view(sub)
        self.host.engine.remove(sub)
        self.send(SubRply(p.xid, sub.id))
        quench.subscription_removed(sub, before)

    # -- quench -------------------------------------------------------------------------
    def _quench_refused(self, xid: int) -> bool:
        """With ``quench = false`` answer a quench request as Avis does (its
        router lacks subset C): Nack NOT_IMPL "Quench not supported". An
        ordinary refusal, not a protocol error: it does not count towards
        ``max_protocol_errors``."""
        if self.host.config.quench:
            return False
        self.nack(xid, NackCode.NOT_IMPL, "Quench not supported")
        return True

    def _keys_refused(self, xid: int, *key_sets: Keys) -> bool:
        """Check the key sets a request carries; the first bad one is Nacked
        with its own code and message. True when the request was refused."""
        try:
            for keys in key_sets:
                check_keys(keys)
        except KeyRefused as exc:
            self.nack(xid, exc.code, exc.message, exc.args_)
            return True
        return False

    def _key_limit_refused(self, xid: int, what: str, count: int, size: int,
                           max_count: int, max_bytes: int, key: str) -> bool:
        """Nack IMPL_LIMIT naming the limit a key set is over (and count
        it), else False. 0 is no limit. The router's in-process clients (its
        mobility proxy) are held to none: a moved-out client's connection
        keys are merged into each of its subscriptions there, and were
        checked at that client's own connection."""
        if self.peer == INTERNAL_PEER:
            return False
        if max_count and count > max_count:
            message = (f"Too many {what} keys: {count}, at most {max_count} "
                       f"(max-keys-per-{key})")
        elif max_bytes and size > max_bytes:
            message = (f"{what.capitalize()} keys too large: {size} bytes, at most "
                       f"{max_bytes} (max-key-bytes-per-{key})")
        else:
            return False
        self.host.stats.refuse("keys")
        _note(self.host, "requests refused for their keys", logging.INFO, "%s: %s",
              self.peer, message)
        self.nack(xid, NackCode.IMPL_LIMIT, message)
        return True

    def _connection_keys_refused(self, xid: int, nfn: Keys, sub: Keys) -> bool:
        """The connection's keys (notification and subscription keys
        together, as they would be after the request) over a limit."""
        config = self.host.config
        count, size = key_totals(nfn, sub)
        return self._key_limit_refused(xid, "connection", count, size,
                                       config.max_keys_per_connection,
                                       config.max_key_bytes_per_connection, "connection")

    def _own_keys_refused(self, xid: int, keys: Keys, what: str) -> bool:
        """A subscription's (or quench's) own keys over a limit."""
        config = self.host.config
        count, size = key_totals(keys)
        return self._key_limit_refused(xid, what, count, size,
                                       config.max_keys_per_subscription,
                                       config.max_key_bytes_per_subscription, "subscription")

    def _qnch_add_rqst(self, p: QnchAddRqst) -> None:
        if self._quench_refused(p.xid):
            return
        if not p.names:
            self.nack(p.xid, NackCode.EMPTY_QUENCH, "Quench has no attribute names")
            return
        if self._keys_refused(p.xid, p.keys) or self._own_keys_refused(p.xid, p.keys, "quench"):
            return
        # The existing subscriptions go out (SubAddNotify) before the reply, so
        # that a client holding the QnchRply knows its view is complete:
        # auto-quench relies on it. The spec leaves the order open.
        q = self.host.quench.add(self.owner, p.names, p.deliver_insecure, p.keys,
                                 self.nfn_keys, announce=False)
        self._announce(p.xid, q)

    def _announce(self, xid: int, q: Quench) -> None:
        """Tell quench ``q`` what is pending, then QnchRply: what fits in
        ``announcer.FIRST_STEP`` now, the rest in later loop turns as this
        session's one job (its later packets wait for it). The reply also
        waits for the fan-out queued before it (``QuenchManager.outbox``)."""
        quench = self.host.quench
        if quench.advance(q, self.host.clock() + FIRST_STEP) and not quench.outbox:
            self.send(QnchRply(xid, q.id))
            return
        job = self.host.announce_later(q)
        self.backlog.start(job)         # cancelled if the session is released
        job.add_done_callback(functools.partial(self._announced, xid, q))

    def _announced(self, xid: int, q: Quench, job: HostJob) -> None:
        """(The announcement's end, on the loop.)"""
        if not self.backlog.finish(job):
            return                      # released meanwhile
        if self.state is CONNECTED:
            self.send(QnchRply(xid, q.id))
        if self.backlog and self.on_ready is not None:
            self.on_ready()

    def _own_quench(self, xid: int, quench_id: int) -> Quench | None:
        return self._owned(self.host.quench, xid, quench_id, NackCode.NO_SUCH_QUENCH,
                           "No such quench: %1")

    def _qnch_mod_rqst(self, p: QnchModRqst) -> None:
        if self._quench_refused(p.xid):
            return
        q = self._own_quench(p.xid, p.quench_id)
        if q is None:
            return
        if self._keys_refused(p.xid, p.add_keys, p.del_keys):
            return
        if p.add_keys and self._own_keys_refused(
                p.xid, apply_delta(q.keys, p.add_keys, p.del_keys), "quench"):
            return
        if not (q.names - frozenset(p.names_del)) | frozenset(p.names_add):
            self.nack(p.xid, NackCode.EMPTY_QUENCH,
                      "Quench would have no attribute names left")
            return
        self.host.quench.modify(q, p.names_add, p.names_del, p.deliver_insecure,
                                p.add_keys, p.del_keys, announce=False)
        self._announce(p.xid, q)          # after the notifications it caused, as for add

    def _qnch_del_rqst(self, p: QnchDelRqst) -> None:
        if self._quench_refused(p.xid):
            return
        q = self._own_quench(p.xid, p.quench_id)
        if q is None:
            return
        self.host.quench.remove(q)
        self._announce(p.xid, q)          # after what was queued for it


def _outcome(job: Any) -> Any:
    """A done job's result; None if it failed or was cancelled (a decode of
    a NotifyEmit over the limits, or malformed: it was never accepted)."""
    try:
        if job.exception() is None:
            return job.result()
    except BaseException as exc:   # noqa: BLE001 - CancelledError: the router is stopping
        log.debug("an owed notification's decode did not finish: %r", exc)
    return None


#: the handler of each packet a client may send (by the first word of its
#: body; NotifyEmit has its own fast path in ``_packet``)
_HANDLERS: dict[bytes, Callable[[SessionCore, Any], None]] = {
    header(cls.ID): handler for cls, handler in (
        (ConnRqst, SessionCore._conn_rqst),
        (UNotify, SessionCore._unotify),
        (DisconnRqst, SessionCore._disconn_rqst),
        (TestConn, SessionCore._test_conn),
        (QosRqst, SessionCore._qos_rqst),
        (SecRqst, SessionCore._sec_rqst),
        (SubAddRqst, SessionCore._sub_add_rqst),
        (SubModRqst, SessionCore._sub_mod_rqst),
        (SubDelRqst, SessionCore._sub_del_rqst),
        (QnchAddRqst, SessionCore._qnch_add_rqst),
        (QnchModRqst, SessionCore._qnch_mod_rqst),
        (QnchDelRqst, SessionCore._qnch_del_rqst),
    )}
# every packet the table lets a client send has a handler, and no other has one
assert {*_HANDLERS, _NOTIFY_EMIT} == {head for row in _LEGAL.values() for head in row}
# the hot path of ``_packet``: NotifyEmit is legal in a session, keeps it, and nowhere else
assert [(state, row[_NOTIFY_EMIT]) for state, row in _LEGAL.items() if _NOTIFY_EMIT in row] \
    == [(CONNECTED, CONNECTED)]
