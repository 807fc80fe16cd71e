"""The console's TOML configuration file.

One file per tool in the platform config dir (``~/.config/elvin/console.toml``
on Linux), overridable by flags and ``ELVIN_URL``; with no file the defaults
work. It holds only what is not part of a workspace::

    elvin = "elvin://router.example:2917"   # the default router's URL (a list: failover)
    scope = "office"                        # no router named: every router of this scope
    workspace = "~/elvin/console.json"      # opened at startup
    buffer = 10000                           # rows kept by a new consumer pane

Wrong types are rejected with a message naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elvin_apps.console.workspace import DEFAULT_BUFFER, MAX_BUFFER, MIN_BUFFER

from elvin.config_file import (
    ConfigError,
    check_routers,
    check_scope_setting,
    default_config_path,
    read_toml,
)

__all__ = ["Config", "ConfigError", "load"]

CONFIG_NAME = "console.toml"


@dataclass
class Config:
    elvin: str | list[str] | None = None   # a list: routers to fail over among, in order
    scope: str = ""                         # discovery scope (no router named: all found)
    workspace: str | None = None
    buffer: int = DEFAULT_BUFFER
    path: Path | None = None


def load(path: str | Path | None = None, must_exist: bool = False) -> Config:
    """The configuration at ``path`` (default ``$XDG_CONFIG_HOME/elvin/
    console.toml``); a missing default file gives the defaults, a missing
    named file is an error."""
    toml = read_toml(path or default_config_path(CONFIG_NAME), must_exist=must_exist)
    if toml is None:
        return Config()
    target, data = toml.path, toml.data
    config = Config(path=target)
    known = {"elvin", "scope", "workspace", "buffer"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{target}: unknown setting {unknown[0]!r} "
                          f"(known: {', '.join(sorted(known))})")
    if "elvin" in data:
        config.elvin = check_routers(data["elvin"], f"{target}: elvin")
    if "scope" in data:
        config.scope = check_scope_setting(data["scope"], f"{target}: scope")
    for key in ("workspace",):
        if key in data:
            if not isinstance(data[key], str) or not data[key].strip():
                raise ConfigError(f"{target}: {key} must be non-empty text, "
                                  f"not {data[key]!r}")
            setattr(config, key, data[key].strip())
    if config.workspace:
        config.workspace = str(Path(config.workspace).expanduser())
    if "buffer" in data:
        value = data["buffer"]
        if isinstance(value, bool) or not isinstance(value, int) or \
                not MIN_BUFFER <= value <= MAX_BUFFER:
            raise ConfigError(f"{target}: buffer must be a whole number from {MIN_BUFFER} "
                              f"to {MAX_BUFFER}, not {value!r}")
        config.buffer = value
    return config
