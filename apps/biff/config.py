"""The coffee biff's TOML configuration (``~/.config/elvin/biff.toml``).

Every key is optional and defaults work with no file; flags and
``ELVIN_URL`` override the file. Wrong types and unknown keys are errors
that name the file and the key, so a typo is not silently ignored::

    elvin = "elvin://router.example.org"
    user = "alice@office"
    heartbeat = 30          # seconds between refreshes
    coffee_minutes = 15     # a coffee ends by itself after this long
    text = "kitchen"        # pre-filled "where/when" text
    notify = true           # tell me when someone starts a coffee
    sound = false           # ... with a sound
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BiffConfig", "ConfigError", "default_path", "load"]

CONFIG_NAME = "biff.toml"


class ConfigError(ValueError):
    """The configuration file is unreadable or has a wrong value."""


@dataclass
class BiffConfig:
    elvin: str | None = None
    user: str | None = None
    heartbeat: float = 30.0
    coffee_minutes: float = 15.0
    text: str = ""
    notify: bool = True     # a desktop notification when someone starts a coffee
    sound: bool = False     # ... with a sound
    path: Path | None = None


_TYPES: dict[str, tuple[type, ...]] = {
    "elvin": (str,),
    "user": (str,),
    "heartbeat": (int, float),
    "coffee_minutes": (int, float),
    "text": (str,),
    "notify": (bool,),
    "sound": (bool,),
}
_LIMITS = {"heartbeat": (0.1, 3600.0), "coffee_minutes": (0.1, 24 * 60.0)}


def default_path() -> Path:
    """``$XDG_CONFIG_HOME/elvin/biff.toml`` (``~/.config`` if unset)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "elvin" / CONFIG_NAME


def load(path: str | os.PathLike | None = None, *, must_exist: bool = False) -> BiffConfig:
    """Read the file (the default path when ``path`` is None). A missing
    default file means defaults; a missing named file is an error."""
    file = Path(path) if path is not None else default_path()
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if must_exist:
            raise ConfigError(f"{file}: no such file") from None
        return BiffConfig()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    config = BiffConfig(path=file)
    for key, value in data.items():
        kinds = _TYPES.get(key)
        if kinds is None:
            raise ConfigError(f"{file}: unknown key {key!r} (known: {', '.join(_TYPES)})")
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
