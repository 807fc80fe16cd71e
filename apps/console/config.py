"""The console's TOML configuration file.

One file per tool in the platform config dir (``~/.config/elvin/console.toml``
on Linux), overridable by flags and ``ELVIN_URL``; with no file the defaults
work. It holds only what is not part of a workspace::

    elvin = "elvin://router.example:2917"   # the default router's URL (a list: failover)
    scope = "office"                        # no router named: every router of this scope
    workspace = "~/elvin/console.json"      # opened at startup
    buffer = 10000                           # rows kept by a new consumer pane

Wrong types are rejected with a message naming the file and the key. Each
setting is declared once, in ``Config`` (``elvin.settings``): the checks and
the configuration reference come from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elvin_apps.console.workspace import DEFAULT_BUFFER, MAX_BUFFER, MIN_BUFFER

from elvin.config_file import (
    ROUTER_SETTINGS,
    ROUTERS_HELP,
    SCOPE_HELP,
    ConfigError,
    default_config_path,
    line_of,
    read_toml,
)
from elvin.settings import SettingsTable, setting

__all__ = ["SETTINGS", "Config", "ConfigError", "load"]

CONFIG_NAME = "console.toml"


@dataclass
class Config:
    elvin: str | list[str] | None = setting(None, by_hand=True, help=ROUTERS_HELP)
    scope: str = setting("", by_hand=True, help=SCOPE_HELP)
    workspace: str | None = setting(None, by_hand=True, help="a workspace opened at startup")
    buffer: int = setting(DEFAULT_BUFFER, low=MIN_BUFFER, high=MAX_BUFFER,
                          help="rows kept by a new consumer pane")
    path: Path | None = None


#: the console's settings, as Config declares them
SETTINGS = SettingsTable(Config)


def _text(name: str) -> Any:
    """The parser of a setting that must be non-empty text."""
    def parse(config: Config, value: Any, where: str) -> None:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: {name} must be non-empty text, not {value!r}")
        setattr(config, name, value.strip())
    return parse


def load(path: str | Path | None = None, must_exist: bool = False) -> Config:
    """The configuration at ``path`` (default ``$XDG_CONFIG_HOME/elvin/
    console.toml``); a missing default file gives the defaults, a missing
    named file is an error."""
    toml = read_toml(path or default_config_path(CONFIG_NAME), must_exist=must_exist)
    if toml is None:
        return Config()
    config = SETTINGS.load(Config(path=toml.path), toml.data,
                           lambda key: f"{toml.path}{line_of(toml.text, key)}",
                           by_hand={**ROUTER_SETTINGS, "workspace": _text("workspace")})
    if config.workspace:
        config.workspace = str(Path(config.workspace).expanduser())
    return config
