"""The coffee biff's TOML configuration (``~/.config/elvin/biff.toml``).

Every key is optional and defaults work with no file; flags and
``ELVIN_URL`` override the file. Wrong types and unknown keys are errors
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

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from elvin.config_file import (
    ConfigError,
    check_routers,
    check_scope_setting,
    default_config_path,
    read_toml,
)

__all__ = ["BiffConfig", "ConfigError", "load"]

CONFIG_NAME = "biff.toml"


@dataclass
class BiffConfig:
    elvin: str | list[str] | None = None   # a list: routers to fail over among, in order
    scope: str = ""                         # discovery scope (no router named: all found)
    user: str | None = None
    heartbeat: float = 30.0
    coffee_minutes: float = 15.0
    text: str = ""
    notify: bool = True     # a desktop notification when someone starts a coffee
    sound: bool = False     # ... with a sound
    colleagues: list[str] = field(default_factory=list)   # listed even when away
    path: Path | None = None


_TYPES: dict[str, tuple[type, ...]] = {
    "elvin": (str, list),
    "scope": (str,),
    "user": (str,),
    "heartbeat": (int, float),
    "coffee_minutes": (int, float),
    "text": (str,),
    "notify": (bool,),
    "sound": (bool,),
    "colleagues": (list,),
}
_LIMITS = {"heartbeat": (0.1, 3600.0), "coffee_minutes": (0.1, 24 * 60.0)}


def load(path: str | os.PathLike | None = None, *, must_exist: bool = False) -> BiffConfig:
    """Read the file (``$XDG_CONFIG_HOME/elvin/biff.toml`` when ``path`` is
    None). A missing default file means defaults; a missing named file is an
    error."""
    toml = read_toml(path if path is not None else default_config_path(CONFIG_NAME),
                     must_exist=must_exist)
    if toml is None:
        return BiffConfig()
    file = toml.path
    config = BiffConfig(path=file)
    for key, value in toml.data.items():
        kinds = _TYPES.get(key)
        if kinds is None:
            raise ConfigError(f"{file}: unknown key {key!r} (known: {', '.join(_TYPES)})")
        if key == "colleagues":
            if not isinstance(value, list) or not all(
                    isinstance(v, str) and v.strip() and v.isprintable() for v in value):
                raise ConfigError(f"{file}: colleagues must be a list of user names, e.g. "
                                  f'["alice@office"], not {value!r}')
            config.colleagues = [v.strip() for v in value]
            continue
        if key == "elvin":
            config.elvin = check_routers(value, f"{file}: elvin")
            continue
        if key == "scope":
            config.scope = check_scope_setting(value, f"{file}: scope")
            continue
        if isinstance(value, bool) != (bool in kinds) or not isinstance(value, kinds):
            wanted = " or ".join("number" if k in (int, float) else
                                 "true or false" if k is bool else "string" for k in kinds)
            raise ConfigError(f"{file}: {key} must be a {wanted.split(' or ')[0]}, "
                              f"not {type(value).__name__} {value!r}")
        if key in _LIMITS:
            low, high = _LIMITS[key]
            if not (math.isfinite(value) and low <= value <= high):
                raise ConfigError(f"{file}: {key} must be between {low:g} and {high:g}, "
                                  f"not {value!r}")
            value = float(value)
        setattr(config, key, value)
    return config
