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
    ConfigError,
    check_numbers,
    check_routers,
    check_scope_setting,
    collecting_problems,
    line_of,
    number,
    read_toml,
)
from elvin.fileutil import runtime_file
from elvin.router_url import RouterURLError, check_router_url, split_router_urls

__all__ = ["Config", "ConfigError", "LOG_LEVELS", "UNBOUNDED_POLICIES", "default_status_file",
           "load_config"]

UNBOUNDED_POLICIES = ("ignore", "roots")


def default_status_file() -> str:
    """Where the daemon writes its status when not told: the systemd runtime
    directory (``RuntimeDirectory=elvin-filewatcher``, which is also root's
    default, so ``sudo filewatcher status`` finds the service's file), else the
    user's runtime directory, else a per-user /tmp dir (``elvin.fileutil``)."""
    return runtime_file("elvin-filewatcher")


@dataclass
class Config:
    elvin: str | list[str] | None = None   # a list: routers to fail over among, in order
    scope: str = ""                         # discovery scope (no router named: all found)
    roots: list[str] = field(default_factory=list)
    unbounded: str = "ignore"
    # seconds
    debounce: float = number(0.1, 0.0, 60.0)
    max_delay: float = number(1.0, 0.0, 3600.0)
    poll_interval: float = number(2.0, 0.05, 3600.0)
    reconnect_grace: float = number(10.0, 0.0, 3600.0)
    # counts
    max_watches: int = number(256, 1, integer=True)
    #: a subscription naming more paths than this is treated as unbounded
    #: (the ``unbounded`` policy applies to it)
    max_paths_per_subscription: int = number(10_000, 1, integer=True)
    status_file: str = ""
    host: str = ""
    log_level: str = "info"
    log_file: str = ""
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
        if self.unbounded not in UNBOUNDED_POLICIES:
            found.append(f"{self.where('unbounded')}: unbounded: must be one of "
                         f"{', '.join(UNBOUNDED_POLICIES)}, not {self.unbounded!r}")
        with collecting_problems(found):
            check_numbers(self, src, lambda name: name.replace("_", "-"))
        if self.max_delay < self.debounce:
            self.max_delay = self.debounce
        if self.log_level not in LOG_LEVELS:
            found.append(f"{self.where('log-level')}: log-level: must be one of "
                         f"{', '.join(LOG_LEVELS)}, not {self.log_level!r}")
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


_TYPES: dict[str, tuple[type, ...]] = {
    "elvin": (str, list),
    "scope": (str,),
    "roots": (list,),
    "unbounded": (str,),
    "debounce": (int, float),
    "max_delay": (int, float),
    "poll_interval": (int, float),
    "max_watches": (int,),
    "max_paths_per_subscription": (int,),
    "reconnect_grace": (int, float),
    "status_file": (str,),
    "host": (str,),
    "log_level": (str,),
    "log_file": (str,),
}


_KIND = {(str,): "a string", (str, list): "a router URL or a list of them", (list,): "a list of directory paths", (int,): "an integer",
         (int, float): "a number"}


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
    for raw_key, value in data.items():
        with collecting_problems(problems):
            _set(config, raw_key, value, f"{source}{line_of(text, raw_key)}")
    return config


def _set(config: Config, raw_key: str, value: Any, where: str) -> None:
    key = raw_key.replace("-", "_")
    if key not in _TYPES:
        known = ", ".join(k.replace("_", "-") for k in _TYPES)
        raise ConfigError(f"{where}: unknown setting {raw_key!r} (known: {known})")
    types = _TYPES[key]
    if isinstance(value, bool) or not isinstance(value, types):
        raise ConfigError(f"{where}: {raw_key} must be {_KIND[types]}, not {value!r}")
    if key == "roots" and not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: roots must be a list of directory paths")
    if key == "elvin":
        value = check_routers(value, f"{where}: elvin")
    if key == "scope":
        value = check_scope_setting(value, f"{where}: scope")
    if key == "log_level":
        value = value.lower()
    setattr(config, key, list(value) if key == "roots" else value)


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
