"""The console's TOML configuration file.

One file per tool in the platform config dir (``~/.config/elvin/console.toml``
on Linux), overridable by flags and ``ELVIN_URL``; with no file the defaults
work. It holds only what is not part of a workspace::

    elvin = "elvin://router.example:2917"   # the default router's URL
    workspace = "~/elvin/console.json"      # opened at startup
    buffer = 10000                           # rows kept by a new consumer pane

Wrong types are rejected with a message naming the file and the key.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from elvin_apps.console.workspace import DEFAULT_BUFFER, MAX_BUFFER, MIN_BUFFER

__all__ = ["Config", "ConfigError", "default_path", "load"]

APP_DIR = "elvin"
CONFIG_NAME = "console.toml"


class ConfigError(ValueError):
    """The configuration file is unreadable or holds a wrong value."""


@dataclass
class Config:
    elvin: str | None = None
    workspace: str | None = None
    buffer: int = DEFAULT_BUFFER
    path: Path | None = None


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"),
                                                             ".config")
    return Path(base) / APP_DIR / CONFIG_NAME


def load(path: str | Path | None = None, must_exist: bool = False) -> Config:
    """The configuration at ``path`` (default: :func:`default_path`); a
    missing default file gives the defaults, a missing named file is an error."""
    target = Path(path).expanduser() if path else default_path()
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        if must_exist:
            raise ConfigError(f"config file {target} does not exist") from None
        return Config()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {target}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{target}: not valid TOML: {exc}") from None
    config = Config(path=target)
    known = {"elvin", "workspace", "buffer"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{target}: unknown setting {unknown[0]!r} "
                          f"(known: {', '.join(sorted(known))})")
    for key in ("elvin", "workspace"):
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
