"""elvind's status file (``elvin.router.status``) as a service of the router.

The status file is what ``elvind status`` and ``elvind reload`` read: one
picture of the router (``snapshot``: ``router_status`` with what only elvind
knows, its version, configuration file, last reload and certificates:
``DaemonReport``), rewritten every few seconds and at once after a reload.
The metrics endpoint answers from the same picture.

Only elvind has one: a router started in a process of its own making
(tests, ``elvin.router.embedded``) is given no ``DaemonReport`` and so
registers neither this service nor the metrics one. The file's path is
known once the listeners are bound (the default one is named by the listen
port), and the picture is complete once the federation and the mobility
proxy run, so it starts once the router serves, the last of all; it stops
once the router has stopped (``StopPoint.STOPPED``), so that the file shows
the router until it is gone, and then goes.

A status file named by ``status-file`` must work: a start that cannot write
it fails. The default one is a convenience: a start that cannot write it,
or finds it in use by another elvind, says so and goes on without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from elvin.cli_common import os_error_status
from elvin.errors import RouterStartError
from elvin.router.services import StartPoint, StopPoint
from elvin.router.status import (
    StatusFile,
    link_states,
    other_router_pid,
    router_status,
    status_file_for,
)

if TYPE_CHECKING:
    from elvin.router.config import RouterConfig
    from elvin.router.server import Router

__all__ = ["DaemonReport", "StatusService"]

log = logging.getLogger("elvin.router")


def _no_reload() -> Mapping[str, Any] | None:
    return None


@dataclass(frozen=True)
class DaemonReport:
    """What the status tells beyond the router itself, known only to the
    program that runs it (elvind's main, ``elvin.router.cli``)."""

    version: str = ""
    #: the ``--config`` file, if any
    config_path: str | None = None
    #: the last reload's verdict (``ReloadRecord.as_dict``), read at each picture
    reload: Callable[[], Mapping[str, Any] | None] = _no_reload
    #: the TLS certificates as the start's check found them (``elvin.certcheck``)
    certificates: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


class StatusService:
    """Keeps the router's status file while the router serves."""

    name = "status file"
    starts = StartPoint.SERVING
    stops = StopPoint.STOPPED
    reloads: frozenset[str] = frozenset()

    def __init__(self, router: Router, daemon: DaemonReport,
                 metrics_url: Callable[[], str | None]) -> None:
        self._router = router
        self._daemon = daemon
        self._metrics_url = metrics_url
        #: the file kept while running, else None
        self.file: StatusFile | None = None

    def snapshot(self) -> dict[str, Any]:
        """The router's picture, as the status file and the metrics show it."""
        daemon = self._daemon
        return router_status(self._router, version=daemon.version,
                             config_path=daemon.config_path,
                             metrics_url=self._metrics_url(), reload=daemon.reload(),
                             certificates=daemon.certificates)

    def changed(self) -> None:
        """Rewrite the file now (a reload's verdict is in); nothing when not running."""
        if self.file is not None:
            self.file.changed()

    async def start(self) -> None:
        router = self._router
        config = router.config
        path = status_file_for(config, router.ports[0] if router.ports else None)
        other = other_router_pid(path)
        if other is not None:       # same port on another address: never share its file
            log.warning("the status file %s is in use by elvind pid %s: this router writes "
                        "none ('elvind status' will not find it; set status-file)", path, other)
            return
        status_file = StatusFile(path, self.snapshot, watch=lambda: link_states(router))
        try:
            status_file.start()
        except OSError as exc:
            if config.status_file:      # named: the admin wants it, so it must work
                raise RouterStartError(f"cannot write the status file {path}: "
                                       f"{exc.strerror or exc}",
                                       os_error_status(exc)) from None
            log.warning("cannot write the status file %s: %s ('elvind status' will not "
                        "find this router; set status-file)", path, exc.strerror or exc)
            return
        self.file = status_file

    async def stop(self) -> None:
        """Stop rewriting it, and remove it if it is still ours."""
        status_file, self.file = self.file, None
        if status_file is not None:
            await status_file.close()

    async def reconfigure(self, config: RouterConfig) -> str | None:
        """Nothing: ``status-file`` needs a restart (it is not reloadable);
        the reload's verdict is written by ``changed``, once it is recorded."""
        return None
