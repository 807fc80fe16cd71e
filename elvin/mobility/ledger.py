"""How far each buffer got, outside SQLite: ``Ledger``, ``mobility.ledger``.

Why a second file: the proxy numbers every notification it buffers
(``seq``) before the router answers anyone (the barrier). When the SQLite
commit of a turn fails (a full or failing disk) or is lost later (a torn
WAL, whose frames SQLite drops silently at the next open), the database
alone cannot tell that those numbers ever existed, so a restart would
report fewer losses than there were. The ledger keeps, for each moved-out
client, the next seq the proxy had handed out, written in place into a
file whose room was taken when it was created: an overwrite of allocated
bytes needs no new room, so it goes through on a full disk, and it is in
the kernel's page cache (it survives a SIGKILL) before the router writes to
any socket. At a restart, whatever the database lacks below that number is
reported as lost (``MobilityStore`` folds it into the client's ``dropped``).

Layout: a 16-byte header (magic, slot count), then fixed 32-byte slots
``(handle, next_seq, dropped, crc32)``; handle 0 is a free slot. A slot
whose checksum is wrong is ignored (and logged): the ledger can only add
losses to what the database says, never hide one.

A ledger that cannot be opened (not writable, not a file) or is found
damaged never stops the router: the proxy serves from the database alone
and says so (``problem``: the router's status, its log, naming the file);
one that cannot be written makes the state "failing" (``MobilityStore``),
since a crash could then lose notifications without counting them.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path

log = logging.getLogger("elvin.mobility")

__all__ = ["LEDGER_NAME", "Ledger"]

LEDGER_NAME = "mobility.ledger"
_MAGIC = b"ElvmLdg1"
_HEADER = struct.Struct(">8sI4x")
_SLOT = struct.Struct(">QQQI4x")
#: slots made at creation (and added, doubling, when they run out)
INITIAL_SLOTS = 2048


class Ledger:
    """The per-client high-water marks. ``Ledger.open(dir)``; ``note`` and
    ``clear`` write at once (one ``pwrite`` each, no fsync: what is asked of
    it is to survive the process, as SQLite's ``synchronous=NORMAL``)."""

    def __init__(self, path: Path, fd: int, slots: int, marks: dict[int, tuple[int, int, int]],
                 damaged: int) -> None:
        self.path = path
        self._fd = fd
        self._slots = slots
        #: handle -> (slot, next_seq, dropped), as on disk
        self._marks = marks
        self._free = sorted(set(range(slots)) - {m[0] for m in marks.values()}, reverse=True)
        #: slots found with a wrong checksum at open
        self.damaged = damaged
        #: writes that failed (counted; the first is logged)
        self.failures = 0
        #: what is wrong with it, naming the file (None: nothing): for the
        #: status; set when it was damaged at open or cannot be used at all
        self.problem: str | None = None
        #: made at this open (none was there, or it was empty)
        self.fresh = False

    @classmethod
    def unusable(cls, path: Path, why: str) -> Ledger:
        """A ledger that could not be opened: every write fails (counted),
        it knows no marks; the proxy goes on from the database alone."""
        ledger = cls(path, -1, 0, {}, 0)
        ledger.problem = (f"the ledger {path} cannot be used ({why}): losses at a crash "
                          "may go unreported")
        log.error("mobility %s", ledger.problem)
        return ledger

    @property
    def usable(self) -> bool:
        return self._fd >= 0

    @classmethod
    def open(cls, directory: str | os.PathLike) -> Ledger:
        """Open or create; OSError when it cannot (the caller explains)."""
        path = Path(directory) / LEDGER_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        remade = None
        try:
            size = os.fstat(fd).st_size
            header = os.pread(fd, _HEADER.size, 0)
            magic, slots = (_HEADER.unpack(header) if len(header) == _HEADER.size
                            else (b"", 0))
            if magic != _MAGIC or slots <= 0 or size < _end(slots):
                if size:      # not a new file: truncated, or its header garbled
                    remade = ("truncated" if magic == _MAGIC and slots > 0 else
                              "its header is damaged")
                    log.error("mobility ledger %s is damaged (%s): made anew; losses from "
                              "before this start may go unreported", path, remade)
                slots = INITIAL_SLOTS
                _allocate(fd, 0, slots)
            marks: dict[int, tuple[int, int, int]] = {}
            damaged = 0
            data = os.pread(fd, _end(slots) - _HEADER.size, _HEADER.size)
            for slot in range(slots):
                raw = data[slot * _SLOT.size:(slot + 1) * _SLOT.size]
                handle, next_seq, dropped, crc = _SLOT.unpack(raw)
                if handle == 0 and not any(raw):
                    continue
                if crc != _crc(handle, next_seq, dropped) or handle == 0:
                    damaged += 1
                    os.pwrite(fd, bytes(_SLOT.size), _offset(slot))
                    continue
                marks[handle] = (slot, next_seq, dropped)
        except BaseException:
            os.close(fd)
            raise
        if damaged:
            log.error("mobility ledger %s: %d damaged slots ignored (the losses they would "
                      "have shown may go unreported)", path, damaged)
        ledger = cls(path, fd, slots, marks, damaged)
        ledger.fresh = size == 0
        if remade is not None or damaged:
            ledger.problem = (f"the ledger {path} was found damaged at start ("
                              f"{remade or f'{damaged} slots fail their checksum'}): losses "
                              "from before this start may go unreported")
        return ledger

    def mark(self, handle: int) -> int | None:
        """The next seq handed out for ``handle`` as the ledger knows it."""
        m = self._marks.get(handle)
        return m[1] if m is not None else None

    def handles(self) -> set[int]:
        return set(self._marks)

    def note(self, handle: int, next_seq: int, dropped: int) -> bool:
        """Record ``handle``'s next seq (only ever raised); False when the
        write failed."""
        if self._fd < 0:
            self.failures += 1
            return False
        m = self._marks.get(handle)
        if m is not None:
            if m[1] >= next_seq and m[2] == dropped:
                return True
            slot = m[0]
            next_seq = max(next_seq, m[1])
        else:
            if not self._free and not self._grow():
                return False
            slot = self._free.pop()
        if not self._write(slot, _SLOT.pack(handle, next_seq, dropped,
                                            _crc(handle, next_seq, dropped))):
            if m is None:
                self._free.append(slot)
            return False
        self._marks[handle] = (slot, next_seq, dropped)
        return True

    def clear(self, handle: int) -> None:
        """``handle`` is gone from the database (released, expired)."""
        m = self._marks.get(handle)
        if m is not None and self._write(m[0], bytes(_SLOT.size)):
            del self._marks[handle]
            self._free.append(m[0])

    def _write(self, slot: int, data: bytes) -> bool:
        try:
            os.pwrite(self._fd, data, _offset(slot))
            return True
        except OSError as exc:
            self.failures += 1
            if self.failures == 1:
                log.error("mobility ledger %s cannot be written (%s): losses at a crash may "
                          "go unreported", self.path, exc.strerror or exc)
            return False

    def _grow(self) -> bool:
        """Twice the slots (needs room: may fail on a full disk)."""
        try:
            _allocate(self._fd, self._slots, self._slots * 2)
        except OSError as exc:
            self.failures += 1
            log.error("mobility ledger %s cannot grow (%s)", self.path, exc.strerror or exc)
            return False
        self._free = sorted({*self._free, *range(self._slots, self._slots * 2)}, reverse=True)
        self._slots *= 2
        return True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _offset(slot: int) -> int:
    return _HEADER.size + slot * _SLOT.size


def _end(slots: int) -> int:
    return _offset(slots)


def _allocate(fd: int, old: int, new: int) -> None:
    """Slots ``old..new`` written as zeros for real (a sparse file would
    need room at the first write, on a full disk), then the header."""
    os.pwrite(fd, bytes((new - old) * _SLOT.size), _offset(old))
    os.pwrite(fd, _HEADER.pack(_MAGIC, new), 0)
    os.fsync(fd)


def _crc(handle: int, next_seq: int, dropped: int) -> int:
    return zlib.crc32(struct.pack(">QQQ", handle, next_seq, dropped))
