"""What a mobility proxy must not forget, kept on disk: ``MobilityStore``.

One SQLite file (the standard library's ``sqlite3``) in the router's state
directory, ``mobility.sqlite3``, in WAL mode. It holds the proxy's raw key
(so that tickets handed out before a restart still name the right key), one
row per moved-out client (its secret, quota, expiry and the subscriptions it
handed over, raw keys included, as the move-out request carried them), the
client's buffered notifications (already encoded as a move-in reply carries
them) and the tombstones of expired buffers. The file is created private
(mode 0600, in a 0700 directory): it holds secrets.

Writes are queued in memory and written by ``commit()`` in one transaction:
the proxy calls it once per loop turn, before the router writes anything to
a socket (``elvin.router.localchannel``), so that whatever a client could
have learnt was read by the router is on disk first. ``synchronous=NORMAL``:
a commit survives the process being killed (it is in the WAL, in the
kernel's page cache), and the file stays consistent if the machine loses
power (the last commits may then be missing). Commits never wait for the
disk: checkpoints, which do, run on a thread of their own.

A write that fails rolls the transaction back and keeps the queue: it is
tried again once ``retry_at`` has passed (the proxy schedules that), and
never raises into the router. On a full disk (``SQLITE_FULL``) the WAL's
room is first handed back to the file system (a truncating checkpoint, on
the checkpoint thread), then ``on_full`` is asked to free room (the proxy
drops its oldest buffered notifications, as its quota does).

Handles (a client's rows) are never reused while rows of a released
buffer, deleted a slice per commit, may remain (``next_handle``).

Integrity: every row carries a CRC-32 of its values (``crc``; tombstones
too: one that fails it is dropped and counted, its client then told its
buffer is gone), and the file
is checked with SQLite's ``quick_check`` when it is opened. A client row
that fails its checksum stops the start (``StateError``: its secret and
subscriptions cannot be trusted); a buffered row that fails it, or whose
length prefixes do not match, is never delivered: it is skipped, deleted,
and what it held is counted as lost (``account``). Beside the file, the
ledger (``elvin.mobility.ledger``) keeps how far each buffer was numbered;
what the database lacks below that mark (a commit that failed on a full
disk before a SIGKILL, WAL frames SQLite dropped as torn) is counted as
lost too, so that a client's ``dropped`` is what it really lost.

Opening checks everything a restart could meet and raises ``StateError``
with one line naming the file and what to do: not a database or damaged,
written by a newer version, locked by another program, not readable or not
writable. ``reset=True`` (``elvind --state-reset``) first moves the file
aside (``elvin.daemon.statedir.move_aside``), never deleting it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from elvin.daemon.crashpoints import crash_point
from elvin.daemon.statedir import StateError, move_aside
from elvin.mobility.ledger import LEDGER_NAME, Ledger

log = logging.getLogger("elvin.mobility")

__all__ = ["FILE_NAME", "SCHEMA_VERSION", "MobilityStore", "StoredClient", "StoredTombstone"]

FILE_NAME = "mobility.sqlite3"
#: ``PRAGMA application_id``: "Elvm", so that another program's SQLite file
#: is recognised as such rather than taken over
APPLICATION_ID = 0x456C766D
#: ``PRAGMA user_version`` of the layout below; a newer file is refused
SCHEMA_VERSION = 4
#: rows (chunks) read per slice when a buffer is loaded (``iter_entries``)
LOAD_SLICE = 50
#: rows of a released buffer deleted per commit
PURGE_SLICE = 64
_LEN = struct.Struct(">I")
#: a row of the entries table: (handle, seq, count, data, crc)
_EntryRow = tuple[int, int, int, bytes, int]
#: what every "this file cannot be used" message ends with
_RESET_HINT = "start it once with --state-reset to move the file aside"

_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE clients (
    handle INTEGER PRIMARY KEY,
    client TEXT NOT NULL UNIQUE,
    secret TEXT NOT NULL,
    quota INTEGER NOT NULL,
    expiry REAL NOT NULL,
    moved_out_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    dropped INTEGER NOT NULL,
    subscriptions BLOB NOT NULL,
    first_seq INTEGER NOT NULL DEFAULT 0,
    next_seq INTEGER NOT NULL DEFAULT 0,
    crc INTEGER NOT NULL DEFAULT 0,
    owner TEXT NOT NULL DEFAULT ''
);
CREATE TABLE entries (
    handle INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    count INTEGER NOT NULL,
    data BLOB NOT NULL,
    crc INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (handle, seq)
);
CREATE TABLE tombstones (
    client TEXT PRIMARY KEY,
    secret TEXT NOT NULL,
    dropped INTEGER NOT NULL,
    until REAL NOT NULL,
    crc INTEGER NOT NULL DEFAULT 0
);
"""


@dataclass
class StoredClient:
    """A moved-out client's row (its buffer is read with ``entries``)."""

    handle: int
    client_id: str
    secret: str
    quota: int
    expiry: float
    moved_out_at: float      # time.time()
    expires_at: float        # time.time() when the buffer is released unclaimed
    dropped: int
    subscriptions: bytes     # Mobility.Subscriptions as encode_subscriptions makes it
    #: entries before this seq were dropped (quota, full disk): the next
    #: entry of an emptied buffer is numbered from here, never below it
    first_seq: int = 0
    #: seqs below this were handed out (and are kept or counted in dropped)
    next_seq: int = 0
    #: the client's owner proof for this proxy (``Mobility.Owner``), "" if none
    owner: str = ""


@dataclass
class StoredTombstone:
    client_id: str
    secret: str
    dropped: int
    until: float             # time.time()


def _is_full(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or \
        "full" in str(exc)


class MobilityStore:
    """The proxy's durable state. Create with ``MobilityStore.open(dir)``."""

    def __init__(self, path: Path, db: sqlite3.Connection, ledger: Ledger) -> None:
        self.path = path
        self._db = db
        self.ledger = ledger
        #: handle -> the CRC of its client row's fixed values (its counters
        #: are folded in at each update)
        self._fixed: dict[int, int] = {}
        #: handle -> the next seq handed out, as far as this store knows;
        #: the ledger is brought up to it after every commit (or failed one)
        self._hw: dict[int, int] = {}
        self._hw_dropped: dict[int, int] = {}
        self._hw_dirty: set[int] = set()
        #: a ledger that could not be opened is tried again from then on
        self._ledger_retry = 0.0
        #: handle -> why rows of its buffer were skipped at load
        self.damaged: dict[int, list[str]] = {}
        #: tombstones that failed their checksum at start (dropped)
        self.damaged_tombstones = 0
        #: called with no argument when the disk is full; it frees room by
        #: dropping buffered notifications (``trim``), then the commit retries
        self.on_full: Callable[[], bool] | None = None
        #: commits done, transactions that hit a full disk, rows written
        self.commits = 0
        self.full_events = 0
        self.failures = 0
        #: a failed write is tried again no sooner than this (monotonic);
        #: 0 when the last write went through
        self.retry_at = 0.0
        self._failing = False
        #: why the last write failed (None: it went through)
        self.last_error: str | None = None
        #: a full disk's WAL was handed back once in this outage
        self._reclaimed = False
        self._closed = False
        #: handles whose rows are being deleted, a slice per commit: those of
        #: released clients, and any left by a crash in the middle of it
        self.purging: set[int] = {h for (h,) in db.execute(
            "SELECT DISTINCT handle FROM entries WHERE handle NOT IN "
            "(SELECT handle FROM clients)")}
        self._reset_pending()
        self._checkpointer = _Checkpointer(path)
        known = {h for (h,) in db.execute("SELECT handle FROM clients")}
        if ledger.fresh and known and ledger.problem is None:
            ledger.problem = (f"the ledger {ledger.path} was missing at start (the file "
                              "holds buffers): losses from before this start may go "
                              "unreported")
            log.error("mobility %s", ledger.problem)
        for handle in ledger.handles() - known:
            ledger.clear(handle)      # released, its slot not cleared before a crash

    # -- opening ------------------------------------------------------------------
    @classmethod
    def open(cls, directory: str | os.PathLike, *, reset: bool = False,
             max_pages: int | None = None) -> MobilityStore:
        """Open (or create) ``DIR/mobility.sqlite3``. ``reset`` moves an
        existing file aside first. ``max_pages`` caps the file (SQLite's
        ``max_page_count``: the same full-disk path as a full filesystem)."""
        path = Path(directory) / FILE_NAME
        if reset:
            moved = move_aside(path)
            if moved is not None:
                log.warning("mobility state %s moved aside to %s (--state-reset): starting "
                            "with no buffers", path, moved)
        if reset:
            move_aside(path.with_name(LEDGER_NAME))
        db = _connect(path)
        ledger = None
        try:
            _prepare(db, path)
            if max_pages is not None:
                db.execute(f"PRAGMA max_page_count = {int(max_pages)}")
            try:
                ledger = Ledger.open(path.parent)
            except OSError as exc:     # served from the database alone, and said so
                ledger = Ledger.unusable(path.parent / LEDGER_NAME, exc.strerror or str(exc))
            store = cls(path, db, ledger)
        except sqlite3.Error as exc:
            db.close()
            if ledger is not None:
                ledger.close()
            raise _explain(exc, path) from None
        except BaseException:
            db.close()
            if ledger is not None:
                ledger.close()
            raise
        store._checkpointer.start()
        return store

    # -- reading (at start) ------------------------------------------------------------
    def load_key(self) -> bytes | None:
        row = self._db.execute("SELECT value FROM meta WHERE name = 'proxy-key'").fetchone()
        return bytes(row[0]) if row and row[0] else None

    def save_key(self, key: bytes) -> None:
        """Kept at once (not queued): tickets name the key's public form."""
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('proxy-key', ?)", (key,))

    def clients(self) -> list[StoredClient]:
        """Every moved-out client; ``StateError`` when a row is damaged (a
        wrong type, or its checksum fails): its secret and subscriptions
        cannot be trusted, so the start stops there."""
        with self._reading():
            rows = self._db.execute(
                "SELECT handle, client, secret, quota, expiry, moved_out_at, expires_at, "
                "dropped, subscriptions, first_seq, next_seq, crc, owner FROM clients "
                "ORDER BY handle").fetchall()
        out = []
        for h, c, s, q, e, m, x, d, b, f, n, crc, o in rows:
            why = None
            if not (all(type(v) is int for v in (h, q, d, f, n)) and type(c) is str
                    and type(s) is str and all(type(v) in (int, float) for v in (e, m, x))
                    and type(b) is bytes and type(o) is str):
                why = "holds a value of the wrong type"
            else:
                fixed = _client_fixed_crc(h, c, s, q, e, m, x, b, o)
                if crc != _client_crc(fixed, d, f, n):
                    why = "fails its checksum"
                self._fixed[h] = fixed
            if why is not None:
                raise StateError(f"mobility state file {self.path} is damaged (the row of "
                                 f"client handle {h} {why}): {_RESET_HINT}")
            out.append(StoredClient(h, c, s, q, e, m, x, d, b, f, n, o))
        return out

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """SQLite errors while reading the file at start become one line."""
        try:
            yield
        except sqlite3.Error as exc:
            raise _explain(exc, self.path) from None

    def next_handle(self) -> int:
        """A handle no row of the file uses: above every client's and every
        buffered row's, those of released buffers still being deleted
        included (a client given such a handle would get their rows, then
        lose its own as the deletion goes on)."""
        (top,) = self._db.execute(
            "SELECT max(coalesce((SELECT max(handle) FROM clients), 0), "
            "coalesce((SELECT max(handle) FROM entries), 0))").fetchone()
        return max([top, *self.purging, *self._added]) + 1

    def entries(self, handle: int, after: int = -1,
                limit: int = LOAD_SLICE) -> tuple[list[tuple[int, bytes]], int | None]:
        """The buffered entries ``(seq, data)`` of ``handle`` in up to
        ``limit`` chunks that start after seq ``after``, in order, without
        those before the client's first kept seq (the caller loads a big
        buffer a slice at a time), and the seq of the last row read (None:
        no row left). A chunk holds what one commit added: one row per turn,
        not one per notification. A damaged row (its checksum, its length
        prefixes) is left out, noted in ``damaged`` and deleted at the next
        commit; ``account`` counts what it held as lost."""
        with self._reading():
            first = self._db.execute("SELECT first_seq FROM clients WHERE handle = ?",
                                     (handle,)).fetchone()
            floor = first[0] if first else 0
            rows = self._db.execute(
                "SELECT rowid, seq, count, data, crc FROM entries WHERE handle = ? AND "
                "seq > ? ORDER BY seq LIMIT ?", (handle, after, limit)).fetchall()
        out: list[tuple[int, bytes]] = []
        last = None
        for rowid, seq, count, data, crc in rows:
            last = seq if isinstance(seq, int) else last
            entries = None
            if isinstance(seq, int) and isinstance(count, int) and isinstance(data, bytes) \
                    and crc == _entry_crc(handle, seq, count, data):
                entries = _unpack_chunk(data, count)
                why = "its length prefixes and count do not match its data"
            else:
                why = "it fails its checksum"
            if entries is None:
                log.error("mobility state %s is damaged: client handle %d, buffered row at "
                          "seq %s: %s; it is not delivered and what it held is counted as "
                          "lost", self.path, handle, seq, why)
                self.damaged.setdefault(handle, []).append(f"a damaged row at seq {seq} ({why})")
                self._bad_rows.append(rowid)
                continue
            out.extend((seq + k, entry) for k, entry in enumerate(entries) if seq + k >= floor)
        return out, last

    def account(self, client: StoredClient, kept: int, last_seq: int | None) -> tuple[int, int, int]:
        """After ``client``'s buffer was loaded (``kept`` entries, the last
        at ``last_seq``): ``(next_seq, dropped, lost)``. ``lost`` is what
        the file lacks below the highest seq ever handed out (the client
        row's ``next_seq``, the last row, the ledger's mark): rows skipped
        as damaged, commits that never reached the disk, WAL frames SQLite
        dropped. It is added to ``dropped`` (and written) so that the client
        is told; a restart after that counts nothing twice."""
        handle = client.handle
        mark = self.ledger.mark(handle) or 0
        top = max(client.next_seq, client.first_seq, mark,
                  last_seq + 1 if last_seq is not None else 0)
        lost = max(0, top - kept - client.dropped)
        dropped = client.dropped + lost
        if lost and handle not in self.damaged:
            self.damaged[handle] = [f"{lost} acknowledged but not found in the file (a write "
                                    "that failed before a crash, or a torn WAL)"]
        self._hw[handle] = top
        self._hw_dropped[handle] = dropped
        self._hw_dirty.add(handle)
        if lost or top != client.next_seq:
            self._counters[handle] = (dropped, client.first_seq, top)
        return top, dropped, lost

    @property
    def damaged_at_start(self) -> str | None:
        """One line for the status when rows were found damaged or missing
        at start (counted as lost), naming the file; None when none was."""
        if not self.damaged and not self.damaged_tombstones:
            return None
        parts = []
        if self.damaged:
            parts.append(f"the buffers of {len(self.damaged)} clients lacked rows (damaged, or "
                         "lost before a crash; counted as dropped)")
        if self.damaged_tombstones:
            parts.append(f"{self.damaged_tombstones} damaged tombstones were dropped")
        return f"mobility state file {self.path}: {'; '.join(parts)}"

    def tombstones(self) -> list[StoredTombstone]:
        """The tombstones of expired buffers. One that fails its checksum
        (or holds a value of the wrong type) is dropped, deleted at the next
        commit, logged and counted (``damaged_tombstones``): its client's
        move-in is then told ``unknown-client`` (its buffer is gone), never
        a wrong count under a secret that cannot be trusted."""
        with self._reading():
            rows = self._db.execute(
                "SELECT client, secret, dropped, until, crc FROM tombstones").fetchall()
        out = []
        for client, secret, dropped, until, crc in rows:
            if type(client) is str and type(secret) is str and type(dropped) is int \
                    and type(until) in (int, float) \
                    and crc == _tombstone_crc(client, secret, dropped, until):
                out.append(StoredTombstone(client, secret, dropped, until))
                continue
            self.damaged_tombstones += 1
            if isinstance(client, str):
                self._stones[client] = None
            else:
                self._bad_stones.append(client)
            log.error("mobility state file %s: the tombstone of client %r is damaged (it "
                      "fails its checksum): dropped (its move-in is told its buffer is gone)",
                      self.path, client)
        return out

    # -- writing (queued, then one transaction) ---------------------------------------------
    def _reset_pending(self) -> None:
        self._added: dict[int, tuple] = {}
        self._counters: dict[int, tuple[int, int, int]] = {}
        self._bad_rows: list[int] = []
        self._removed: set[int] = set()
        self._appends: list[_EntryRow] = []
        self._floors: dict[int, int] = {}
        self._stones: dict[str, tuple | None] = {}
        #: damaged tombstones whose key is not even a string (by value)
        self._bad_stones: list[object] = []

    @property
    def dirty(self) -> bool:
        return bool(self._added or self._removed or self._appends or self._floors
                    or self._counters or self._stones or self.purging or self._bad_rows
                    or self._bad_stones)

    def add_client(self, c: StoredClient) -> None:
        fixed = self._fixed[c.handle] = _client_fixed_crc(
            c.handle, c.client_id, c.secret, c.quota, c.expiry, c.moved_out_at, c.expires_at,
            c.subscriptions, c.owner)
        self._added[c.handle] = (c.handle, c.client_id, c.secret, c.quota, c.expiry,
                                 c.moved_out_at, c.expires_at, c.dropped, c.subscriptions,
                                 c.first_seq, c.next_seq,
                                 _client_crc(fixed, c.dropped, c.first_seq, c.next_seq),
                                 c.owner)
        self._hw[c.handle] = max(self._hw.get(c.handle, 0), c.next_seq)

    def remove_client(self, handle: int) -> None:
        if self._added.pop(handle, None) is None:
            self._removed.add(handle)
        self._floors.pop(handle, None)
        self._counters.pop(handle, None)
        self._hw_dirty.discard(handle)
        if self.retry_at:     # writes fail: what the queue holds for it is moot
            self._appends = [a for a in self._appends if a[0] != handle]

    def append(self, handle: int, entries: list[tuple[int, bytes]]) -> None:
        """New entries ``(seq, data)`` of ``handle``, consecutive: one row."""
        if entries:
            seq, count = entries[0][0], len(entries)
            data = _pack_chunk(d for _, d in entries)
            self._appends.append((handle, seq, count, data, _entry_crc(handle, seq, count, data)))
            if seq + count > self._hw.get(handle, 0):
                self._hw[handle] = seq + count
                self._hw_dirty.add(handle)

    def trim(self, handle: int, first: int, dropped: int) -> None:
        """Entries of ``handle`` before seq ``first`` are gone (quota, full
        disk); ``dropped`` is the client's new count of lost notifications."""
        self._floors[handle] = first
        top = self._hw[handle] = max(self._hw.get(handle, 0), first)
        self._counters[handle] = (dropped, first, top)
        self._hw_dropped[handle] = dropped
        self._hw_dirty.add(handle)
        if self.retry_at:
            # writes fail (the queue is kept): cut what is below the floor
            # out of the queue now, so that it stays within the quotas
            # however long the outage lasts, and so that dropping the oldest
            # makes the next try smaller (a full disk)
            self._appends = [cut for a in self._appends
                             if (cut := _cut_below(a, handle, first)) is not None]

    def put_tombstone(self, t: StoredTombstone) -> None:
        self._stones[t.client_id] = (t.client_id, t.secret, t.dropped, t.until,
                                     _tombstone_crc(t.client_id, t.secret, t.dropped, t.until))

    def remove_tombstone(self, client_id: str) -> None:
        self._stones[client_id] = None

    #: rounds of dropping the oldest one commit may ask for on a full disk
    FULL_ROUNDS = 3
    #: seconds a failed write (full disk, locked or read-only file, I/O
    #: error) is left alone before the next try
    RETRY_BACKOFF = 1.0
    #: seconds given to the checkpoint thread to hand the WAL's room back to
    #: the file system before a full disk's write is tried again
    RECLAIM_WAIT = 0.05

    def commit(self, force: bool = False) -> bool:
        """Write what is queued in one transaction. False when it could not
        be written (logged once, counted): the proxy carries on from memory,
        the queue is kept and tried again at ``retry_at`` (the proxy
        schedules that; ``force``: try now all the same, for a client
        waiting on the answer). A no-op once closed. Either way the ledger is then
        brought up to every seq handed out, so that what a crash takes from
        memory before it reaches the file is counted as lost at the restart."""
        if self._closed:
            return False
        try:
            return self._commit(force)
        finally:
            self._note_ledger()

    def _note_ledger(self) -> None:
        if not self.ledger.usable:
            self._reopen_ledger()
        dirty, self._hw_dirty = self._hw_dirty, set()
        for handle in dirty:
            if not self.ledger.note(handle, self._hw.get(handle, 0),
                                    self._hw_dropped.get(handle, 0)):
                self._hw_dirty.add(handle)    # tried again at the next commit

    def _reopen_ledger(self) -> None:
        """A ledger that could not be opened is tried again (once per
        ``RETRY_BACKOFF``): once it can be (its permissions fixed), every
        buffer's mark is written to it again."""
        now = time.monotonic()
        if now < self._ledger_retry:
            return
        self._ledger_retry = now + self.RETRY_BACKOFF
        try:
            ledger = Ledger.open(self.path.parent)
        except OSError:
            return
        self.ledger.close()
        self.ledger = ledger
        for handle in ledger.handles() - set(self._hw):
            ledger.clear(handle)
        self._hw_dirty |= set(self._hw)
        log.warning("mobility ledger %s can be written again", ledger.path)

    @property
    def ledger_failing(self) -> bool:
        return bool(self._hw_dirty)

    def _commit(self, force: bool = False) -> bool:
        if not self.dirty:
            return True
        if self.retry_at and time.monotonic() < self.retry_at and not force:
            return False
        rounds = 0
        while True:
            try:
                self._write()
            except sqlite3.Error as exc:
                with _suppress():
                    self._db.rollback()
                if not _is_full(exc):
                    return self._failed(f"cannot write ({exc}): changes are kept in memory "
                                        "and written when it can be again",
                                        self.RETRY_BACKOFF)
                self.full_events += 1
                if not self._reclaimed:
                    # the WAL's own room first, handed back on the checkpoint
                    # thread (it waits for the disk): never on the loop
                    self._reclaimed = True
                    self._checkpointer.poke(truncate=True)
                    return self._failed(self._FULL_MESSAGE, self.RECLAIM_WAIT)
                if rounds < self.FULL_ROUNDS and self.on_full is not None and self.on_full():
                    rounds += 1
                    continue
                self._reclaimed = False
                return self._failed(self._FULL_MESSAGE, self.RETRY_BACKOFF)
            if self.retry_at:
                log.warning("mobility state %s: written again", self.path)
                self.retry_at = 0.0
                self._failing = False
                self.last_error = None
            self._reclaimed = False
            self.commits += 1
            self._reset_pending()
            self._checkpointer.poke()
            return True

    @property
    def full(self) -> bool:
        """The last write failed because the disk is full."""
        return self.last_error == self._FULL_MESSAGE

    _FULL_MESSAGE = ("the disk is full: buffers are kept in memory and written when there is "
                     "room again")

    def _failed(self, why: str, backoff: float) -> bool:
        """A write that did not go through: logged once per outage, tried
        again after ``backoff`` seconds."""
        self.last_error = why
        if not self._failing:
            self._failing = True
            log.error("mobility state %s: %s", self.path, why)
        self.retry_at = time.monotonic() + backoff
        self.failures += 1
        return False

    def _write(self) -> None:
        db = self._db
        floors = self._floors
        removed = self._removed
        db.execute("BEGIN")
        if removed:
            db.executemany("DELETE FROM clients WHERE handle = ?", [(h,) for h in removed])
        purged = set()
        for handle in self.purging | removed:
            cursor = db.execute("DELETE FROM entries WHERE rowid IN (SELECT rowid FROM entries "
                                "WHERE handle = ? LIMIT ?)", (handle, PURGE_SLICE))
            if cursor.rowcount < PURGE_SLICE:
                purged.add(handle)
        if floors:    # first: frees room for what follows (whole chunks; the
            # rest of a chunk is skipped at load, below the client's first_seq)
            db.executemany("DELETE FROM entries WHERE handle = ? AND seq + count <= ?",
                           list(floors.items()))
        if self._added:
            db.executemany("INSERT OR REPLACE INTO clients VALUES "
                           "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", list(self._added.values()))
        appends = self._appends
        if floors or removed:
            appends = [a for a in appends
                       if a[0] not in removed and a[1] + a[2] > floors.get(a[0], -1)]
        if appends:
            db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?)", appends)
        if self._bad_rows:
            db.executemany("DELETE FROM entries WHERE rowid = ?", [(r,) for r in self._bad_rows])
        if self._counters:
            fixed = self._fixed
            db.executemany(
                "UPDATE clients SET dropped = ?, first_seq = ?, next_seq = ?, crc = ? "
                "WHERE handle = ?",
                [(d, f, n, _client_crc(fixed[h], d, f, n), h)
                 for h, (d, f, n) in self._counters.items() if h in fixed])
        for client_id, row in self._stones.items():
            if row is None:
                db.execute("DELETE FROM tombstones WHERE client = ?", (client_id,))
            else:
                db.execute("INSERT OR REPLACE INTO tombstones VALUES (?, ?, ?, ?, ?)", row)
        if self._bad_stones:
            db.executemany("DELETE FROM tombstones WHERE client = ?",
                           [(c,) for c in self._bad_stones])
        db.execute("COMMIT")
        self.purging = (self.purging | removed) - purged
        for handle in removed:
            self.ledger.clear(handle)
            self._fixed.pop(handle, None)
            self._hw.pop(handle, None)
            self._hw_dropped.pop(handle, None)
        if removed:
            # a release is on disk and at most one slice of its rows is gone:
            # the moment a crash test means (the proxy's own point, after
            # its unsubscribe's round trip, came when a loaded machine's
            # later flushes had deleted them all)
            crash_point("mobility-released")

    def close(self) -> None:
        """Write what is queued (once more, even during a back-off), fold
        the WAL into the file and close; ``commit`` does nothing after."""
        if self._closed:
            return
        self.retry_at = 0.0
        self.commit()
        self._closed = True
        self._checkpointer.stop()
        with _suppress():
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.close()
        self.ledger.close()

    def __repr__(self) -> str:
        return f"<MobilityStore {self.path}>"


def _suppress() -> contextlib.suppress:
    return contextlib.suppress(sqlite3.Error)


# -- opening and checking ---------------------------------------------------------------
def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        try:   # private from the start: it holds secrets and raw keys
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:
            raise StateError(f"cannot create the mobility state file {path}: "
                             f"{exc.strerror or exc} (give the state directory to the user "
                             "the router runs as)") from None
    elif not os.access(path, os.R_OK):
        raise StateError(f"cannot read the mobility state file {path}: permission denied "
                         "(give it to the user the router runs as)")
    try:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StateError(f"cannot open the mobility state file {path}: {exc}") from None
    return db


def _prepare(db: sqlite3.Connection, path: Path) -> None:
    """Check the file and bring it to the current layout; StateError says
    what is wrong and what to do."""
    try:
        db.execute("PRAGMA busy_timeout = 200")
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise _explain(exc, path) from None
    if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables):
        raise StateError(f"{path} is not a mobility state file (another program's "
                         f"SQLite database?): move it away or {_RESET_HINT}")
    if version > SCHEMA_VERSION:
        raise StateError(f"mobility state file {path} was written by a newer version (layout "
                         f"{version}; this one reads up to {SCHEMA_VERSION}): upgrade, "
                         f"or {_RESET_HINT} (its buffers are then not delivered)")
    try:
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StateError(f"mobility state file {path}: cannot use WAL mode (the "
                             f"filesystem may not support it; journal mode {mode!r})")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")   # the checkpointer thread does it
        check = db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise StateError(f"mobility state file {path} is damaged ({check}): {_RESET_HINT}")
        db.execute("BEGIN IMMEDIATE")   # can we write? (locked, read-only)
        if version == 0:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif version < SCHEMA_VERSION:
            for upgrade in _UPGRADES[version - 1:]:
                upgrade(db)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        if db.in_transaction:
            with _suppress():
                db.rollback()
        raise _explain(exc, path) from None


def _upgrade_from_1(db: sqlite3.Connection) -> None:
    """Layout 1 had no checksums: they are computed now from what the file
    holds (which cannot be checked any more), and the ledger starts now."""
    db.execute("ALTER TABLE clients ADD COLUMN next_seq INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE clients ADD COLUMN crc INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE entries ADD COLUMN crc INTEGER NOT NULL DEFAULT 0")
    for h, c, s, q, e, m, x, d, b, f in db.execute(
            "SELECT handle, client, secret, quota, expiry, moved_out_at, expires_at, dropped, "
            "subscriptions, first_seq FROM clients").fetchall():
        with contextlib.suppress(TypeError, AttributeError, struct.error):
            db.execute("UPDATE clients SET crc = ? WHERE handle = ?",
                       (_client_crc(_client_fixed_crc(h, c, s, q, e, m, x, b), d, f, 0), h))
    for rowid, h, seq, count, data in db.execute(
            "SELECT rowid, handle, seq, count, data FROM entries").fetchall():
        with contextlib.suppress(TypeError, struct.error):
            db.execute("UPDATE entries SET crc = ? WHERE rowid = ?",
                       (_entry_crc(h, seq, count, data), rowid))
    db.execute("PRAGMA user_version = 2")


def _upgrade_from_2(db: sqlite3.Connection) -> None:
    """Layout 2's tombstones had no checksum: computed now from what the
    file holds (a row of the wrong type keeps 0, and fails at load)."""
    db.execute("ALTER TABLE tombstones ADD COLUMN crc INTEGER NOT NULL DEFAULT 0")
    for c, s, d, u in db.execute(
            "SELECT client, secret, dropped, until FROM tombstones").fetchall():
        with contextlib.suppress(TypeError, AttributeError, struct.error, ValueError):
            db.execute("UPDATE tombstones SET crc = ? WHERE client = ?",
                       (_tombstone_crc(c, s, d, u), c))
    db.execute("PRAGMA user_version = 3")


def _upgrade_from_3(db: sqlite3.Connection) -> None:
    """Layout 3 kept no owner proof: its rows have none (the checksum of a
    row without one is what it was), so only their secrets replace them."""
    db.execute("ALTER TABLE clients ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
    db.execute("PRAGMA user_version = 4")


#: from layout n to n + 1, by index n - 1
_UPGRADES = (_upgrade_from_1, _upgrade_from_2, _upgrade_from_3)


def _explain(exc: sqlite3.Error, path: Path) -> StateError:
    text = str(exc)
    code = getattr(exc, "sqlite_errorcode", None)
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in text:
        return StateError(f"mobility state file {path} is locked by another program ({text}): "
                          "close it (an sqlite3 shell?) and start again")
    if code == sqlite3.SQLITE_READONLY or "readonly" in text or "read-only" in text:
        return StateError(f"cannot write the mobility state file {path} ({text}): give it "
                          "and its directory to the user the router runs as")
    if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT) or "not a database" in text \
            or "malformed" in text:
        return StateError(f"mobility state file {path} is damaged ({text}): {_RESET_HINT}")
    if code == sqlite3.SQLITE_CANTOPEN or "unable to open" in text:
        return StateError(f"cannot open the mobility state file {path} ({text}): check the "
                          "permissions of the state directory")
    if _is_full(exc):
        return StateError(f"cannot write the mobility state file {path}: the disk is full")
    return StateError(f"mobility state file {path}: {text}: {_RESET_HINT}")


# -- checkpoints off the loop -------------------------------------------------------------
class _Checkpointer:
    """Folds the WAL into the database file on a thread of its own, so that
    the fsync a checkpoint needs never holds the event loop. Woken by
    commits; a passive checkpoint never blocks the writer."""

    INTERVAL = 1.0

    def __init__(self, path: Path) -> None:
        self.path = path
        self._wake = threading.Event()
        self._stop = threading.Event()
        #: a full disk: the next checkpoint truncates the WAL, at once
        self._truncate = threading.Event()
        self._urgent = threading.Event()
        #: truncating checkpoints done (for the tests and the curious)
        self.truncations = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mobility-checkpoint",
                                        daemon=True)
        self._thread.start()

    def poke(self, truncate: bool = False) -> None:
        if truncate:
            self._truncate.set()
            self._urgent.set()
        self._wake.set()

    def _run(self) -> None:
        try:
            db = sqlite3.connect(self.path, isolation_level=None)
        except sqlite3.Error:
            return
        try:
            db.execute("PRAGMA busy_timeout = 50")
            while not self._stop.is_set():
                self._wake.wait()
                if self._stop.is_set():
                    break
                self._wake.clear()
                self._urgent.clear()
                truncate = self._truncate.is_set()
                self._truncate.clear()
                try:
                    # TRUNCATE hands the WAL's room back to the file system
                    busy = db.execute("PRAGMA wal_checkpoint("
                                      f"{'TRUNCATE' if truncate else 'PASSIVE'})").fetchone()[0]
                    self.truncations += truncate and not busy
                except sqlite3.Error as exc:
                    log.debug("mobility state checkpoint: %s", exc)
                self._urgent.wait(self.INTERVAL)
        finally:
            db.close()

    def stop(self) -> None:
        self._stop.set()
        self._urgent.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None


def _pack_chunk(datas: Iterable[bytes]) -> bytes:
    pack = _LEN.pack
    return b"".join(pack(len(d)) + d for d in datas)


def _cut_below(append: _EntryRow, handle: int, first: int) -> _EntryRow | None:
    """A queued row of ``handle`` without its entries before seq ``first``
    (None when none is left); another handle's row as it is."""
    row_handle, seq, count, data, _crc = append
    if row_handle != handle or seq >= first:
        return append
    if seq + count <= first:
        return None
    kept = (_unpack_chunk(data, count) or [])[first - seq:]   # our own bytes: valid
    data = _pack_chunk(kept)
    return (handle, first, len(kept), data, _entry_crc(handle, first, len(kept), data))


def _entry_crc(handle: int, seq: int, count: int, data: bytes) -> int:
    """The checksum of a buffered row: its key, its count and its bytes."""
    return zlib.crc32(data, zlib.crc32(struct.pack(">qqq", handle, seq, count)))


def _client_fixed_crc(handle: int, client: str, secret: str, quota: int, expiry: float,
                      moved_out_at: float, expires_at: float, subscriptions: bytes,
                      owner: str = "") -> int:
    """The checksum of a client row's values that never change. A row with
    no owner proof sums as layout 3 did (its rows upgrade unchanged)."""
    c, s = client.encode(), secret.encode() + (b"\0" + owner.encode() if owner else b"")
    head = struct.pack(">qIIqddd", handle, len(c), len(s), quota, float(expiry),
                       float(moved_out_at), float(expires_at))
    return zlib.crc32(subscriptions, zlib.crc32(c + s, zlib.crc32(head)))


def _tombstone_crc(client: str, secret: str, dropped: int, until: float) -> int:
    """The checksum of a tombstone: every value it holds."""
    c, s = client.encode(), secret.encode()
    return zlib.crc32(c + s, zlib.crc32(struct.pack(">IIqd", len(c), len(s), dropped,
                                                    float(until))))


def _client_crc(fixed: int, dropped: int, first_seq: int, next_seq: int) -> int:
    return zlib.crc32(struct.pack(">qqq", dropped, first_seq, next_seq), fixed)


def _unpack_chunk(data: object, count: object) -> list[bytes] | None:
    """The entries of one buffered row (``count`` length-prefixed blobs one
    after the other), or None when the row does not hold exactly that: a
    row damaged inside an otherwise valid file."""
    if not isinstance(data, bytes) or not isinstance(count, int) or count < 0:
        return None
    out = []
    offset, end = 0, len(data)
    for _ in range(count):
        if offset + 4 > end:
            return None
        (length,) = _LEN.unpack_from(data, offset)
        offset += 4
        if offset + length > end:
            return None
        out.append(data[offset:offset + length])
        offset += length
    return out if offset == end else None


def iter_entries(store: MobilityStore, handle: int) -> Iterator[list[tuple[int, bytes]]]:
    """A client's buffer, a slice at a time (damaged rows left out)."""
    after = -1
    while True:
        chunk, last = store.entries(handle, after)
        if last is None:
            return
        if chunk:
            yield chunk
        after = last
