"""The router's state directory (``state-dir``) as a service of the router.

The directory holds what a router must not forget across a crash (the
mobility proxy's tickets, subscriptions and buffers), and its lock makes
sure one router at most uses it. So it is taken first, before anything
else starts (a second router stops there, having started nothing), and
given back only once the last part that writes in it (the mobility proxy,
registered after it, so stopped before it) has written.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from elvin.daemon.statedir import StateDir
from elvin.router.services import StartPoint, StopPoint

if TYPE_CHECKING:
    from elvin.router.config import RouterConfig

__all__ = ["StateDirService"]

log = logging.getLogger("elvin.router")


class StateDirService:
    """Holds the lock of ``config.state_dir`` while the router runs: what
    its parts keep there (``StateDir``: the mobility proxy's store) is then
    theirs alone."""

    name = "state directory"
    starts = StartPoint.BEFORE_LISTENING
    stops = StopPoint.AFTER_LAST_SESSION
    reloads: frozenset[str] = frozenset()

    def __init__(self, config: RouterConfig) -> None:
        self._config = config
        #: the locked directory while running with ``state_dir``, else None
        self.directory: StateDir | None = None

    async def start(self) -> None:
        """Lock the directory (``StateError``, a ``RouterStartError``, says
        what is wrong)."""
        if self._config.state_dir is None:
            return
        self.directory = StateDir.open(self._config.state_dir)
        log.info("state directory %s", self.directory.path)

    async def stop(self) -> None:
        state, self.directory = self.directory, None
        if state is not None:
            state.close()

    async def reconfigure(self, config: RouterConfig) -> str | None:
        """Nothing: ``state-dir`` needs a restart (it is not reloadable), so a
        reload names it instead."""
        return None
