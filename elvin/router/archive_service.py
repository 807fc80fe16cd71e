"""The traffic archive (``elvind --archive DIR``) as a service of the router.

The archive must see every notification the router routes, so it starts
before the listeners are bound and stops after the last session is gone.
Its rows are written by a child process (``elvin.pipeline.archive_process``:
the Parquet writing does not share the router's GIL), which this module
starts, feeds and closes. The pipeline extra (pyarrow) is optional: nothing
of it is imported unless the archive is on.

The delivery hot path must pay nothing while the archive is off, and one
attribute read while it is on: so the service hands the router its
``record`` method when it starts writing and None when it stops
(``on_writing``), and the router tests only that attribute.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from elvin.errors import RouterStartError
from elvin.protocol import encode_attributes
from elvin.router.services import StartPoint, StopPoint

if TYPE_CHECKING:
    from elvin.pipeline.archive_process import ArchiveProcess
    from elvin.router.config import RouterConfig

__all__ = ["ArchiveService", "Recorder"]

log = logging.getLogger("elvin.router")

#: ``ArchiveService.record``'s signature: (attrs, block, insecure, secure,
#: producer, deliver_insecure), the matches as ``Engine.match`` returned them
Recorder = Callable[[dict[str, Any], "bytes | None", dict[Any, Any], dict[Any, Any], Any, bool],
                    None]


class ArchiveService:
    """Writes every routed notification to the archive directory of the
    router's ``config.archive`` (None: off)."""

    name = "archive"
    starts = StartPoint.BEFORE_LISTENING
    stops = StopPoint.AFTER_LAST_SESSION
    reloads: frozenset[str] = frozenset({"archive"})

    def __init__(self, config: RouterConfig,
                 on_writing: Callable[[Recorder | None], None]) -> None:
        self._config = config
        self._on_writing = on_writing
        #: the archive's writer process while writing, else None
        self.writer: ArchiveProcess | None = None
        self._producer_ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._producer_serial = itertools.count(1)

    async def start(self) -> None:
        if self._config.archive is not None:
            self._open(self._config.archive)

    async def stop(self) -> None:
        """Send what is pending to the archive process and wait for it to
        write everything and exit; rows written or lost are logged."""
        writer, self.writer = self.writer, None
        if writer is None:
            return
        self._on_writing(None)
        summary = await writer.close()
        if summary.written is None:     # the child died: its files are all we have
            log.error("archive %s: %s; of %d notifications, those it had not written are "
                      "lost", writer.directory, summary.error, summary.received)
        elif summary.error or summary.lost:
            log.error("archive %s: %d notifications written, %d lost: %s",
                      writer.directory, summary.written, summary.lost, summary.error)
        else:
            log.info("archive %s: %d notifications written", writer.directory,
                     summary.written)
        if summary.dropped:
            log.warning("archive %s: %d notifications not archived (writer was behind)",
                        writer.directory, summary.dropped)

    async def reconfigure(self, config: RouterConfig) -> str | None:
        """Close the archive (writing what is pending) and open
        ``config.archive`` instead (None: archive off). The problem, if the
        new one cannot be opened (the archive is then off), else None."""
        return await self.move_to(config.archive)

    async def move_to(self, directory: str | None) -> str | None:
        """``reconfigure`` for the one setting that counts: the directory."""
        await self.stop()
        self._config.archive = directory
        if directory is None:
            return None
        try:
            self._open(directory)
        except RouterStartError as exc:
            log.error("archive is off: %s", exc)
            return str(exc)
        return None

    def _open(self, directory: str) -> None:
        """Check the directory (errors name it, before listening) and start
        the archive's child process."""
        from elvin.cli_common import os_error_status
        from elvin.pipeline.archive_process import ArchiveProcess, ArchiveProcessError

        try:
            writer = ArchiveProcess(directory)
        except ArchiveProcessError as exc:
            raise RouterStartError(str(exc), os_error_status(exc.errno)) from None
        try:
            writer.start(asyncio.get_running_loop())
        except Exception as exc:  # noqa: BLE001 - re-raised as RouterStartError
            raise RouterStartError(f"cannot start the archive process for {directory}: "
                                   f"{exc}") from None
        self._producer_ids = weakref.WeakKeyDictionary()
        self._producer_serial = itertools.count(1)
        self.writer = writer
        self._on_writing(self.record)
        log.info("archiving notifications in %s (writer process %d)", writer.directory,
                 writer.pid)
        if self._config.archive_private:
            log.warning("archive %s keeps private notifications (archive-private): "
                        "whoever can read it reads what producers sent only to key "
                        "holders", writer.directory)
        else:
            log.info("archive %s: notifications sent for key holders only are archived "
                     "without their attributes (archive-private keeps them)",
                     writer.directory)

    def record(self, attrs: dict[str, Any], block: bytes | None, insecure: dict[Any, Any],
               secure: dict[Any, Any], producer: Any, deliver_insecure: bool = True) -> None:
        """Queue one archive row: a tuple for the archive process (which
        decodes ``block``). Counts come from ``engine.match``'s result before
        delivery consumes it: a client is a session with any matching id. A
        notification for key holders only (``deliver_insecure`` false) goes
        without its attributes and producer -- only their size crosses to
        the archive process -- unless ``archive-private`` is on
        (``elvin.pipeline.archive``). Called only while writing."""
        if secure:
            clients = len(insecure.keys() | secure.keys())
            subscriptions = (sum(map(len, insecure.values()))
                             + sum(map(len, secure.values())))
        else:
            clients = len(insecure)
            subscriptions = sum(map(len, insecure.values()))
        private = not deliver_insecure
        if producer is not None and not isinstance(producer, str):
            producer = self._producer_id(producer)
        row: bytes | dict[str, Any] | int | None = block   # what the row carries
        if type(row) is not bytes:
            try:
                row = encode_attributes(attrs) if block is None else bytes(block)
            except ValueError:
                row = attrs         # not encodable: the child takes the dict itself
        if private and not self._config.archive_private:
            from elvin.pipeline.withheld import withheld_size
            producer = None
            # withheld: the size's class only (elvin.pipeline.withheld)
            row = withheld_size(len(row) if type(row) is bytes else 0)
        writer = self.writer
        assert writer is not None, "record is handed out only while writing"
        writer.append(time=time.time(), producer=producer, subscriptions=subscriptions,
                      clients=clients, secure=bool(secure), private=private, block=row)

    def _producer_id(self, session: Any) -> str:
        """``N/host:port``: N numbers the producing channels of this archive
        run in order of their first notification, so ids stay unique when a
        peer address is reused."""
        ids = self._producer_ids
        pid = ids.get(session)
        if pid is None:
            peer = getattr(session, "peer", None)
            where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 \
                else str(peer)
            pid = ids[session] = f"{next(self._producer_serial)}/{where}"
        return pid
