"""The router's door: what outsiders may hold before and around a session.

Clients that finish their requests are bounded elsewhere (options, fair
turns, the reaper). This module bounds what a socket can hold by *not*
finishing, and what one address can hold by numbers:

* **Sockets per address** (``max-connections-per-address``): every channel
  from one IP address, whatever its state.
* **Before a session** (``max-pre-session``, ``max-pre-session-per-address``):
  sockets that have not sent ConnRqst or UNotify yet, in all and per
  address; ``connect-timeout`` closes each one after a while, and
  ``pre-session-max-length`` (checked by the session core) bounds the frame
  one may announce.
* **Descriptors**: at start the soft open-files limit is raised to the hard
  one (``raise_nofile_limit``), and a new socket is refused while fewer than
  ``descriptor-reserve`` descriptors would be left for the router's own
  files (log, status file, state, archive, federation links): a flood of
  sockets costs newcomers a refusal, never the router a failed write.
* **Partial frames**: a frame must arrive at ``frame-min-rate`` bytes/s
  after ``frame-timeout`` seconds of grace (nginx's body timeout, scaled to
  the frame's announced size), and all partial frames together hold at most
  ``max-partial-bytes``; past it the largest holders are closed first.

A refused socket is closed at once (no byte is written), counted in
``Stats.refused`` by kind (``elvind status``, the statistics, ``/metrics``),
and logged through a ``RateLimitedLog`` (the first few, then a summary).
The door is sans-IO but for the clock and one timer (the partial-frame sweep,
running only while some socket holds a partial frame).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from elvin.ratelog import RateLimitedLog

__all__ = ["Door", "raise_nofile_limit", "tls_key"]

log = logging.getLogger("elvin.router.door")

#: seconds between sweeps of the partial frames (slow senders)
SWEEP_INTERVAL = 1.0

#: refusal kinds, as counted (Stats.refused) and shown
REFUSALS = {
    "connections-per-address": "sockets refused: too many from one address",
    "pre-session": "sockets refused: too many without a session",
    "pre-session-per-address": "sockets refused: too many without a session from one address",
    "descriptors": "sockets refused: open-files headroom reached",
    "connect-timeout": "sockets closed: no ConnRqst or UNotify in time",
    "pre-session-frame": "sockets closed: frame before ConnRqst over pre-session-max-length",
    "slow-frame": "channels closed: a frame arriving slower than frame-min-rate",
    "partial-bytes": "channels closed: partial frames over max-partial-bytes",
    "keys": "requests refused: key limits",
}


def raise_nofile_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one; (soft, hard) after.
    (-1, -1) where the resource module is missing."""
    try:
        import resource
    except ImportError:             # not POSIX
        return -1, -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-files limit from %d to %d: %s", soft, hard, exc)
    elif hard == resource.RLIM_INFINITY and soft != hard:
        want = 1 << 20              # what Linux allows without sysctl (nr_open)
        if soft < want:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
                soft = want
            except (ValueError, OSError):
                pass
    return soft, hard


def descriptors_in_use() -> int:
    """Open descriptors of this process (-1 where /proc cannot tell)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1     # (the listing's own)
    except OSError:
        return -1


class _Partial:
    __slots__ = ("offset", "since", "announced", "held")

    def __init__(self, offset: int, since: float, announced: int, held: int) -> None:
        self.offset, self.since, self.announced, self.held = offset, since, announced, held


def tls_key(peer: Any) -> tuple[str, object, object]:
    """What the door files a TLS socket under until its handshake is done
    (``peer``: an ``elvin.federation.admission.Peer``)."""
    return ("tls", peer.address, peer.port)


def _address(peer: Any) -> str | None:
    if isinstance(peer, tuple) and len(peer) >= 2 and isinstance(peer[0], str):
        return peer[0]
    return None


class Door:
    """Admission and partial-frame accounting for one router's channels.
    ``config`` is the router's (read at each decision: a reload applies at
    once), ``stats`` has ``refuse(kind)``."""

    def __init__(self, config: Any, stats: Any, loop: asyncio.AbstractEventLoop | None = None,
                 fd_limit: int = -1) -> None:
        self.config = config
        self.stats = stats
        self.loop = loop
        self.fd_limit = fd_limit            # the soft limit (-1: unknown, not checked)
        self.notes = RateLimitedLog(log)
        self._per_address: dict[str, int] = {}
        self._pre_address: dict[str, int] = {}
        self._pre: set[Any] = set()
        self._address_of: dict[Any, str | None] = {}
        self._partials: dict[Any, _Partial] = {}
        self.partial_bytes = 0
        self._sweep: asyncio.TimerHandle | None = None
        self._other_fds = 0                 # descriptors that are not channels (last seen)
        self._fds_checked = 0.0

    # -- admission --------------------------------------------------------------------
    def admit(self, channel: Any, peer: Any) -> bool:
        """A socket was accepted: True to keep it, else it was refused (counted,
        noted; the caller closes it at once)."""
        address = _address(peer)
        config = self.config
        kind = None
        if self._descriptors_short():
            kind = "descriptors"
        elif address is not None:
            per = config.max_connections_per_address
            if per and self._per_address.get(address, 0) >= per:
                kind = "connections-per-address"
            elif config.max_pre_session and len(self._pre) >= config.max_pre_session:
                kind = "pre-session"
            elif (config.max_pre_session_per_address and self._pre_address.get(address, 0)
                  >= config.max_pre_session_per_address):
                kind = "pre-session-per-address"
        if kind is not None:
            self.refuse(kind, "refused a socket from %s: %s", _shown(peer), _WHY[kind](self))
            return False
        self._address_of[channel] = address
        self._pre.add(channel)
        if address is not None:
            self._per_address[address] = self._per_address.get(address, 0) + 1
            self._pre_address[address] = self._pre_address.get(address, 0) + 1
        return True

    def transfer(self, key: Any, channel: Any) -> bool:
        """The socket counted under ``key`` (a TLS socket at its accept) is
        now ``channel`` (its session, once the handshake is done): the
        counts move over. False if nothing was counted under ``key``."""
        if key not in self._address_of:
            return False
        self._address_of[channel] = self._address_of.pop(key)
        if key in self._pre:
            self._pre.discard(key)
            self._pre.add(channel)
        return True

    def refuse(self, kind: str, message: str, *args: Any) -> None:
        """Count a refusal of ``kind`` and note it (rate-limited)."""
        self.stats.refuse(kind)
        self.notes.log(REFUSALS.get(kind, kind), logging.WARNING, message, *args)

    def started(self, channel: Any) -> None:
        """The channel has a session (or is session-less): no longer pre-session."""
        if channel in self._pre:
            self._pre.discard(channel)
            address = self._address_of.get(channel)
            if address is not None:
                _decrement(self._pre_address, address)

    def closed(self, channel: Any) -> None:
        self.started(channel)
        address = self._address_of.pop(channel, None)
        if address is not None:
            _decrement(self._per_address, address)
        self._forget_partial(channel)

    @property
    def pre_session(self) -> int:
        return len(self._pre)

    def _descriptors_short(self) -> bool:
        limit = self.fd_limit
        reserve: int = self.config.descriptor_reserve
        if limit <= 0 or not reserve:
            return False
        channels = len(self._address_of) + 1         # with the one just accepted
        # cheap estimate first; the /proc count only when it could be close
        if channels + self._other_fds + 2 * reserve < limit:
            return False
        now = time.monotonic()
        used = descriptors_in_use()
        if used < 0:
            return channels + reserve >= limit
        self._other_fds, self._fds_checked = max(0, used - channels), now
        return used + reserve > limit

    # -- partial frames -----------------------------------------------------------------
    def partial(self, channel: Any, offset: int, held: int, announced: int | None) -> None:
        """After a read: ``channel`` holds ``held`` bytes of a frame starting
        at stream ``offset`` (announcing ``announced`` bytes when its header
        is in), or nothing (``held`` 0)."""
        entry = self._partials.get(channel)
        if not held:
            if entry is not None:
                self._forget_partial(channel)
            return
        size = announced if announced is not None else held
        if entry is None:
            entry = self._partials[channel] = _Partial(offset, time.monotonic(), size, held)
            self.partial_bytes += held
            if self._sweep is None and self.loop is not None:
                self._sweep = self.loop.call_later(SWEEP_INTERVAL, self._sweep_slow)
        else:
            if entry.offset != offset:          # a new frame: its own clock
                entry.offset, entry.since = offset, time.monotonic()
            self.partial_bytes += held - entry.held
            entry.held, entry.announced = held, size
        cap = self.config.max_partial_bytes
        if cap and self.partial_bytes > cap:
            self._shed(cap)

    def _forget_partial(self, channel: Any) -> None:
        entry = self._partials.pop(channel, None)
        if entry is not None:
            self.partial_bytes -= entry.held

    def _shed(self, cap: int) -> None:
        """Close the largest holders of partial frames until the total is
        within ``cap`` again."""
        for channel, entry in sorted(self._partials.items(), key=lambda item: -item[1].held):
            if self.partial_bytes <= cap:
                break
            self._forget_partial(channel)
            self.refuse("partial-bytes", "closing %s: it holds %d bytes of an unfinished "
                        "%d-byte frame, and partial frames hold more than "
                        "max-partial-bytes (%d) in all", _shown(getattr(channel, "peer", None)),
                        entry.held, entry.announced, cap)
            _close(channel)

    def _sweep_slow(self) -> None:
        """Close the channels whose frame is later than its size allows;
        a channel whose reading the router paused is not the sender's fault:
        its clock waits."""
        self._sweep = None
        now = time.monotonic()
        grace = self.config.frame_timeout
        rate = self.config.frame_min_rate
        for channel, entry in list(self._partials.items()):
            if getattr(channel, "reading_paused", False):
                entry.since += SWEEP_INTERVAL
                continue
            allowed = grace + (entry.announced / rate if rate else 0.0)
            if now - entry.since > allowed:
                self._forget_partial(channel)
                self.refuse("slow-frame", "closing %s: %d of a %d-byte frame in %.0f s "
                            "(frame-timeout %g s + frame-min-rate %d bytes/s allow %.0f s)",
                            _shown(getattr(channel, "peer", None)), entry.held,
                            entry.announced, now - entry.since, grace, rate, allowed)
                _close(channel)
        if self._partials and self.loop is not None:
            self._sweep = self.loop.call_later(SWEEP_INTERVAL, self._sweep_slow)

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        self.notes.close()


def _decrement(counts: dict[str, int], key: str) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


def _close(channel: Any) -> None:
    try:
        channel.abort()
    except Exception:  # closing anyway; logged
        log.exception("closing %r failed", channel)


def _shown(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = peer[0]
        return f"[{host}]:{peer[1]}" if ":" in str(host) else f"{host}:{peer[1]}"
    return str(peer)


_WHY = {
    "descriptors": lambda d: (f"fewer than descriptor-reserve ({d.config.descriptor_reserve}) "
                              f"of {d.fd_limit} open files would be left"),
    "connections-per-address": lambda d: (f"max-connections-per-address "
                                          f"({d.config.max_connections_per_address}) reached"),
    "pre-session": lambda d: (f"max-pre-session ({d.config.max_pre_session}) sockets wait for "
                              "ConnRqst"),
    "pre-session-per-address": lambda d: (
        f"max-pre-session-per-address ({d.config.max_pre_session_per_address}) sockets "
        "from it wait for ConnRqst"),
}
