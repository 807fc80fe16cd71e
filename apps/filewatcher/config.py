"""Settings: defaults, the TOML file, command-line flags, validation.

The admin decides *where* the daemon may look (``roots``); subscribers only
choose among those paths. So the roots are resolved (symlinks, ``..``) here,
once, and must exist; ``/`` is refused as a root because the point of roots is
that the whole file system is never watched.

A TOML file (``filewatcher --config FILE``) uses the flag names as keys, with
``-`` or ``_``::

    elvin = "elvin://127.0.0.1:2917"   # or a list of routers to fail over among, in order
    scope = "office"              # no router named: every router of this discovery scope
    roots = ["/srv/www", "/home/shared"]
    unbounded = "ignore"          # or "roots": watch every root for such subscriptions
    debounce = 0.1                # seconds of quiet before a burst is reported
    max-delay = 1.0               # report a busy file at least this often (seconds)
    poll-interval = 2.0           # seconds, for watches that fell back to polling
    max-watches = 256             # OS watches (directories) at most
    max-paths-per-subscription = 10000
    reconnect-grace = 10.0        # keep watches this long after a reconnection
    status-file = "/run/elvin-filewatcher/status.json"
    host = "www1"                 # File-Host (default: this machine's host name)
    log-level = "info"
    log-file = "/var/log/elvin-filewatcher.log"

Each setting is declared once, in ``Config`` (``elvin.settings``): the
file's checks, the flags that override it, what SIGHUP applies and the
configuration reference come from there.

Precedence: command-line flag, then (for the router URL) ``ELVIN_URL``, then
the file, then the default (the router URL's rule is the suite's,
``elvin.router_url``).
"""

from __future__ import annotations

import dataclasses
import os
import socket
from dataclasses import dataclass, field
from typing import Any

from elvin.cli_common import LOG_LEVELS
from elvin.config_file import (
    ROUTER_SETTINGS,
    ROUTERS_HELP,
    SCOPE_HELP,
    ConfigError,
    collecting_problems,
    line_of,
    read_toml,
)
from elvin.fileutil import runtime_file
from elvin.router_url import RouterURLError, check_router_url, split_router_urls
from elvin.settings import SettingsTable, Wording, setting

__all__ = ["SETTINGS", "Config", "ConfigError", "LOG_LEVELS", "UNBOUNDED_POLICIES",
           "default_status_file", "load_config"]

UNBOUNDED_POLICIES = ("ignore", "roots")


def default_status_file() -> str:
    """Where the daemon writes its status when not told: the systemd runtime
    directory (``RuntimeDirectory=elvin-filewatcher``, which is also root's
    default, so ``sudo filewatcher status`` finds the service's file), else the
    user's runtime directory, else a per-user /tmp dir (``elvin.fileutil``)."""
    return runtime_file("elvin-filewatcher")


def _reload(default: Any, **declared: Any) -> Any:
    """A setting SIGHUP applies to the running daemon."""
    return setting(default, reloadable=True, **declared)


@dataclass
class Config:
    elvin: str | list[str] | None = setting(None, by_hand=True, help=ROUTERS_HELP)
    scope: str = setting("", by_hand=True, help=SCOPE_HELP)
    roots: list[str] = setting(
        default_factory=list, by_hand=True, reloadable=True, flag="--root", metavar="DIR",
        help="a directory subscribers may watch (repeatable; replaces the config file's "
             "roots)")
    unbounded: str = _reload("ignore", choices=UNBOUNDED_POLICIES, flag="--unbounded",
                             help="what to do with subscriptions whose paths cannot be "
                                  "bounded: ignore them (default, with a warning) or watch "
                                  "the roots")
    debounce: float = _reload(0.1, low=0.0, high=60.0, flag="--debounce", metavar="SECONDS",
                              help="quiet time before a burst of changes is reported "
                                   "(default {default})")
    max_delay: float = _reload(1.0, low=0.0, high=3600.0,
                               help="report a busy file at least this often (seconds)")
    poll_interval: float = _reload(2.0, low=0.05, high=3600.0,
                                   help="seconds, for watches that fell back to polling")
    reconnect_grace: float = _reload(10.0, low=0.0, high=3600.0,
                                     help="keep watches this long after a reconnection "
                                          "(seconds)")
    max_watches: int = _reload(256, low=1, help="OS watches (directories) at most")
    max_paths_per_subscription: int = _reload(
        10_000, low=1, help="a subscription naming more paths than this is treated as "
                            "unbounded (the ``unbounded`` policy applies to it)")
    status_file: str = setting("", flag="--status-file", metavar="FILE",
                               shown_default=default_status_file,
                               help="where to write the status (default {default})")
    host: str = _reload("", help="File-Host (default: this machine's host name)")
    log_level: str = _reload("info", choices=LOG_LEVELS, help="log level")
    log_file: str = _reload("", flag="--log-file", metavar="FILE",
                            help="log here instead of stderr")
    source: str = "defaults"
    #: the config file's text, to point at a key's line (not a setting)
    text: str = field(default="", repr=False, compare=False)
    #: the config file's absolute path ("" without one), for the status: the
    #: commands check that a status is of the daemon their --config names
    path: str = field(default="", repr=False, compare=False)
    #: the settings the command line gave (their errors are not the file's)
    flags: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def where(self, key: str) -> str:
        """Where ``key``'s value came from: ``FILE, line N`` or ``command line``."""
        if key.replace("-", "_") in self.flags:
            return "command line"
        return f"{self.source}{line_of(self.text, key)}"

    def validate(self) -> Config:
        """Check every value; resolve roots. Returns self; a ``ConfigError``
        saying the first problem and holding them all (``problems``), for
        ``filewatcher check``."""
        src = self.source
        found: list[str] = []
        if self.elvin is not None:
            try:
                for url in split_router_urls(self.elvin):
                    check_router_url(url, what="router URL")
            except RouterURLError as exc:
                found.append(f"{self.where('elvin')}: elvin: {exc}")
        if not self.roots:
            found.append(f"{src}: no roots: name the directories subscribers may watch "
                         "with --root DIR (repeatable) or roots = [...] in the config file")
        resolved = []
        where = self.where("roots")
        for root in self.roots:
            with collecting_problems(found):
                real = _root(root, where)
                if real not in resolved:
                    resolved.append(real)
        # a root inside another root adds nothing: keep the outer one
        self.roots = [r for r in resolved
                      if not any(r != o and r.startswith(o + os.sep) for o in resolved)]
        found.extend(SETTINGS.problems(self, self.where))
        if self.max_delay < self.debounce:
            self.max_delay = self.debounce
        if found:
            raise ConfigError.of(found)
        if not self.host:
            self.host = socket.gethostname() or "localhost"
        if not self.status_file:
            self.status_file = default_status_file()
        return self


def _root(root: Any, where: str) -> str:
    """The real path of a root, or the ``ConfigError`` saying why it is none."""
    if not isinstance(root, str) or not root.strip():
        raise ConfigError(f"{where}: roots: {root!r} is not a directory path")
    real = os.path.realpath(os.path.expanduser(root))
    try:
        os.stat(real)
    except OSError as exc:
        raise ConfigError(f"{where}: roots: {root!r}: {exc.strerror or exc}") from None
    if not os.path.isdir(real):
        raise ConfigError(f"{where}: roots: {root!r} is not a directory")
    if real == os.path.sep:
        raise ConfigError(f"{where}: roots: {root!r} is the whole file system; name "
                          "the directories subscribers may watch")
    return real


#: the filewatcher's settings, as Config declares them
SETTINGS = SettingsTable(Config, wording=Wording(dashed=True))


def load_config(path: str | os.PathLike | None,
                problems: list[str] | None = None) -> Config:
    """Read the TOML file (None: defaults only). Not validated yet: flags are
    applied on top first, then ``validate()``. With a ``problems`` list, a
    wrong key is appended there and left out, so that ``check`` goes on to
    say every problem."""
    if path is None:
        return Config()
    file = read_toml(path)
    config = config_from_dict(file.data, source=str(file.path), text=file.text,
                              problems=problems)
    config.path = os.path.abspath(file.path)
    return config


def config_from_dict(data: dict[str, Any], source: str = "configuration",
                     text: str = "", problems: list[str] | None = None) -> Config:
    config = Config(source=source, text=text)
    for raw_key, value in data.items():     # the bounds are validate()'s, after the flags
        where = f"{source}{line_of(text, raw_key)}"
        with collecting_problems(problems):
            if raw_key == "roots":
                _roots(config, value, where)
            elif raw_key in ROUTER_SETTINGS:
                ROUTER_SETTINGS[raw_key](config, value, where)
            elif not SETTINGS.apply(config, raw_key, value, where):
                raise ConfigError(SETTINGS.unknown(raw_key, where))
    return config


def _roots(config: Config, value: Any, where: str) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: roots must be a list of directory paths, not {value!r}")
    config.roots = list(value)


def apply_overrides(config: Config, **flags: Any) -> Config:
    """Put non-None command-line values over the file's (``roots`` from
    ``--root`` replace the file's roots)."""
    changes = {k: v for k, v in flags.items() if v is not None}
    if changes:
        config = dataclasses.replace(config, **changes, flags=frozenset(changes))
        if config.source == "defaults":
            config.source = "command line"
        else:
            config.source = f"{config.source} + command line"
    return config
