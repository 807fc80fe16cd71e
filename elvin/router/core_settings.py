"""The reloadable settings of the router's core, as parts a reload reconfigures.

The services (``elvin.router.services``) apply their own settings on a
reload. What is left belongs to the core, and to the process that runs it:

* ``ConnectionDefaults``: the ``[options]`` limits, from which each new
  connection's options and limits start (a connected client keeps what it
  negotiated);
* ``LiveSettings``: the settings the core reads from its configuration at
  each use (timeouts, limits, the door's sizes...): applying one is
  storing it;
* ``LogSettings``: the log, which is the process's (elvind's), not the
  router's: an embedded router has none, so a reload makes this part from
  the function its caller gives to switch the log.

Each has the ``reconfigure(config) -> str | None`` of a service and says
which settings it ``reloads``, so that ``elvin.router.reload`` treats every
setting alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from elvin.router.options import initial_options

if TYPE_CHECKING:
    from elvin.protocol.limits import Limits
    from elvin.router.config import RouterConfig
    from elvin.router.options import OptionRanges, SessionOptions

__all__ = ["LOG_SETTINGS", "ConnectionDefaults", "LiveSettings", "LogSettings"]

#: the settings of the log (``LogSettings``)
LOG_SETTINGS = frozenset({"log_level", "log_file"})


class _Host(Protocol):
    """What ``ConnectionDefaults`` keeps up to date: the router, whose
    sessions start from its ``initial_options`` and ``initial_limits``
    (``elvin.router.session_core.SessionHost``)."""

    config: RouterConfig
    initial_options: SessionOptions
    initial_limits: Limits


class ConnectionDefaults:
    """The ``[options]`` limits that new connections negotiate within."""

    name = "connection options"
    reloads = frozenset({"options"})

    def __init__(self, host: _Host) -> None:
        self._host = host
        self.apply(host.config.options)

    def apply(self, ranges: OptionRanges) -> None:
        """New limits, for the connections made from now on."""
        host = self._host
        host.config.options = ranges
        host.initial_options = initial_options(ranges)
        host.initial_limits = host.initial_options.limits()

    async def reconfigure(self, config: RouterConfig) -> str | None:
        self.apply(config.options)
        return None


class LiveSettings:
    """Settings that the core reads from ``config`` each time it needs one:
    a reload stores the new value in the running router's configuration,
    and the next connection, request or timer uses it."""

    name = "settings"

    def __init__(self, config: RouterConfig, reloads: Iterable[str]) -> None:
        self._config = config
        self.reloads = frozenset(reloads)

    async def reconfigure(self, config: RouterConfig) -> str | None:
        for name in self.reloads:
            setattr(self._config, name, getattr(config, name))
        return None


class LogSettings:
    """The process's log: ``set_logging(level, file)`` switches it (an
    ``OSError`` when the file cannot be opened: the log is then unchanged)."""

    name = "log"
    reloads = LOG_SETTINGS

    def __init__(self, config: RouterConfig,
                 set_logging: Callable[[str, str | None], None]) -> None:
        self._config = config
        self._set_logging = set_logging

    async def reconfigure(self, config: RouterConfig) -> str | None:
        try:
            self._set_logging(config.log_level, config.log_file)
        except OSError as exc:
            return f"cannot open: {exc.strerror or exc}"
        self._config.log_level, self._config.log_file = config.log_level, config.log_file
        return None
