"""The coffee biff's TOML configuration (``~/.config/elvin/biff.toml``).

Every key is optional and defaults work with no file; flags and
``ELVIN_URL`` override the file. Each setting is declared once, in
``BiffConfig`` (``elvin.settings``): the checks and the configuration
reference come from there. Wrong types and unknown keys are errors
that name the file and the key, so a typo is not silently ignored::

    elvin = "elvin://router.example.org"   # or a list of routers: failover
    scope = "office"        # with no router named: every router of this discovery scope
    user = "alice@office"
    heartbeat = 30          # seconds between refreshes
    coffee_minutes = 15     # a coffee ends by itself after this long
    text = "kitchen"        # pre-filled "where/when" text
    notify = true           # tell me when someone starts a coffee
    sound = false           # ... with a sound
    colleagues = ["alice@office", "bob@office"]   # always in the list, here or not
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elvin.config_file import (
    ROUTER_SETTINGS,
    ROUTERS_HELP,
    SCOPE_HELP,
    ConfigError,
    default_config_path,
    line_of,
    read_toml,
)
from elvin.settings import SettingsTable, Wording, setting

__all__ = ["SETTINGS", "BiffConfig", "ConfigError", "load"]

CONFIG_NAME = "biff.toml"


@dataclass
class BiffConfig:
    elvin: str | list[str] | None = setting(None, by_hand=True, help=ROUTERS_HELP)
    scope: str = setting("", by_hand=True, help=SCOPE_HELP)
    user: str | None = setting(None, help="your name (default user@host; ``--user`` "
                                          "overrides it)")
    heartbeat: float = setting(30.0, low=0.1, high=3600.0,
                               help="seconds between refreshes")
    coffee_minutes: float = setting(15.0, low=0.1, high=24 * 60.0,
                                    help="a coffee ends by itself after this long")
    text: str = setting("", help='pre-filled "where/when" text')
    notify: bool = setting(True, help="a desktop notification when someone starts a coffee")
    sound: bool = setting(False, help="... with a sound")
    colleagues: list[str] = setting(
        default_factory=list, by_hand=True,
        help='user names always in the list, here or not (``["alice@office"]``)')
    path: Path | None = None


#: the biff's settings, as BiffConfig declares them
SETTINGS = SettingsTable(BiffConfig, wording=Wording(unknown="unknown key"))


def _colleagues(config: BiffConfig, value: Any, where: str) -> None:
    if not isinstance(value, list) or not all(
            isinstance(v, str) and v.strip() and v.isprintable() for v in value):
        raise ConfigError(f"{where}: colleagues must be a list of user names, e.g. "
                          f'["alice@office"], not {value!r}')
    config.colleagues = [v.strip() for v in value]


def load(path: str | os.PathLike | None = None, *, must_exist: bool = False) -> BiffConfig:
    """Read the file (``$XDG_CONFIG_HOME/elvin/biff.toml`` when ``path`` is
    None). A missing default file means defaults; a missing named file is an
    error."""
    toml = read_toml(path if path is not None else default_config_path(CONFIG_NAME),
                     must_exist=must_exist)
    if toml is None:
        return BiffConfig()
    return SETTINGS.load(BiffConfig(path=toml.path), toml.data,
                         lambda key: f"{toml.path}{line_of(toml.text, key)}",
                         by_hand={**ROUTER_SETTINGS, "colleagues": _colleagues})
