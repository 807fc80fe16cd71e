"""The message log on disk: every message received, across restarts.

sqlite3 (standard library, one file, safe against a crash mid-write) in the
platform data dir. Messages that ask not to be archived (``No-Archive``
non-zero, protocol "Archiving") are never written; they are still shown.

Writes are batched: ``add`` only queues, ``flush`` writes the queue in one
transaction. The app flushes on a timer, so a flood of a thousand messages a
second costs one short transaction per flush instead of one disk sync per
message, and the event loop never waits on the disk for long.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from elvin_apps.tickertape.message import Message

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    received REAL NOT NULL,
    message_id TEXT NOT NULL,
    group_name TEXT NOT NULL,
    sender TEXT NOT NULL,
    text TEXT NOT NULL,
    in_reply_to TEXT,
    thread_id TEXT,
    urls TEXT NOT NULL DEFAULT '[]',
    user_agent TEXT,
    secure INTEGER NOT NULL DEFAULT 0,
    timeout REAL,
    replacement_id TEXT
);
CREATE INDEX IF NOT EXISTS messages_received ON messages(received);
CREATE INDEX IF NOT EXISTS messages_message_id ON messages(message_id);
CREATE INDEX IF NOT EXISTS messages_thread ON messages(thread_id);
"""

_COLUMNS = ("received, message_id, group_name, sender, text, in_reply_to, thread_id, urls, "
            "user_agent, secure, timeout, replacement_id")


@dataclass(frozen=True)
class Record:
    """A stored message (``Message`` plus its row id)."""

    row: int
    message: Message


class History:
    """The log: ``add`` (queued), ``flush``, ``recent``, ``search``, ``thread``."""

    def __init__(self, path: Path | str, *, max_messages: int = 50_000) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_messages = max_messages
        self._db = sqlite3.connect(str(path))
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self._queue: list[tuple] = []
        self.skipped_no_archive = 0
        self._flushes = 0

    # -- writing ---------------------------------------------------------------
    def add(self, message: Message) -> bool:
        """Queue a message; False when it asked not to be archived."""
        if message.no_archive:
            self.skipped_no_archive += 1
            return False
        self._queue.append((
            message.received, message.message_id, message.group, message.sender,
            message.text, message.in_reply_to, message.thread_id, json.dumps(list(message.urls)),
            message.user_agent, int(message.secure), message.timeout, message.replacement_id))
        return True

    @property
    def pending(self) -> int:
        return len(self._queue)

    def flush(self) -> int:
        """Write queued messages in one transaction; returns how many."""
        if not self._queue:
            return 0
        queue, self._queue = self._queue, []
        with self._db:
            self._db.executemany(
                f"INSERT INTO messages ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", queue)
        self._flushes += 1
        if self.max_messages and self._flushes % 20 == 1:
            self.prune()
        return len(queue)

    def prune(self) -> None:
        """Keep only the newest ``max_messages`` rows."""
        with self._db:
            self._db.execute(
                "DELETE FROM messages WHERE id <= "
                "(SELECT id FROM messages ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (self.max_messages,))

    def clear(self) -> None:
        self._queue.clear()
        with self._db:
            self._db.execute("DELETE FROM messages")

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._db.close()

    # -- reading -----------------------------------------------------------------
    def _rows(self, sql: str, args: tuple = ()) -> list[Record]:
        self.flush()
        return [_record(row) for row in self._db.execute(sql, args)]

    def count(self) -> int:
        self.flush()
        return self._db.execute("SELECT COUNT(*) FROM messages").fetchone()[0]

    def recent(self, limit: int = 1000) -> list[Record]:
        """The newest ``limit`` messages, oldest first."""
        rows = self._rows(f"SELECT id, {_COLUMNS} FROM messages ORDER BY id DESC LIMIT ?",
                          (limit,))
        rows.reverse()
        return rows

    def search(self, text: str, limit: int = 1000) -> list[Record]:
        """Messages whose text, sender or group contains ``text`` (any case),
        oldest first."""
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._rows(
            f"SELECT id, {_COLUMNS} FROM messages WHERE text LIKE ?1 ESCAPE '\\' "
            "OR sender LIKE ?1 ESCAPE '\\' OR group_name LIKE ?1 ESCAPE '\\' "
            "ORDER BY id DESC LIMIT ?2", (pattern, limit))
        rows.reverse()
        return rows

    def by_message_id(self, message_id: str) -> Message | None:
        rows = self._rows(f"SELECT id, {_COLUMNS} FROM messages WHERE message_id = ? "
                          "ORDER BY id DESC LIMIT 1", (message_id,))
        return rows[0].message if rows else None

    def thread(self, message: Message, limit: int = 500) -> list[Message]:
        """The conversation ``message`` is part of, oldest first: its
        ancestors by In-Reply-To, the replies below them, and everything with
        the same Thread-Id."""
        root = message
        seen = {root.message_id}
        while root.in_reply_to and root.in_reply_to not in seen:
            parent = self.by_message_id(root.in_reply_to)
            if parent is None:
                break
            seen.add(parent.message_id)
            root = parent
        found: dict[str, Message] = {root.message_id: root}
        frontier = [root.message_id]
        while frontier and len(found) < limit:
            marks = ",".join("?" * len(frontier))
            rows = self._rows(f"SELECT id, {_COLUMNS} FROM messages WHERE in_reply_to IN "
                              f"({marks}) LIMIT ?", (*frontier, limit))
            frontier = []
            for rec in rows:
                if rec.message.message_id not in found:
                    found[rec.message.message_id] = rec.message
                    frontier.append(rec.message.message_id)
        thread_ids = {m.thread_id for m in found.values() if m.thread_id}
        for tid in thread_ids:
            for rec in self._rows(f"SELECT id, {_COLUMNS} FROM messages WHERE thread_id = ? "
                                  "LIMIT ?", (tid, limit)):
                found.setdefault(rec.message.message_id, rec.message)
        found.setdefault(message.message_id, message)
        return sorted(found.values(), key=lambda m: m.received)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.recent(self.max_messages or 1_000_000))


def _record(row: tuple) -> Record:
    (rowid, received, message_id, group, sender, text, in_reply_to, thread_id, urls,
     user_agent, secure, timeout, replacement_id) = row
    try:
        url_list = tuple(str(u) for u in json.loads(urls))
    except (ValueError, TypeError):
        url_list = ()
    return Record(rowid, Message(
        group=group, sender=sender, text=text, message_id=message_id, received=received,
        in_reply_to=in_reply_to, thread_id=thread_id, urls=url_list, user_agent=user_agent,
        secure=bool(secure), timeout=timeout, replacement_id=replacement_id))
