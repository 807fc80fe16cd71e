"""The XDG base directories (freedesktop Base Directory Specification 0.8).

One home for the rule, so that every tool of the suite puts its files where
the desktop expects them: ``$XDG_CONFIG_HOME`` (settings, autostart
entries), ``$XDG_DATA_HOME`` (menu entries, icons, histories) and
``$XDG_STATE_HOME`` (what a program remembers between runs that is not a
setting: window positions). The specification says a relative path in one
of these variables is invalid and must be ignored, so it is.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["config_home", "data_home", "state_home"]


def _home(variable: str, default: str) -> Path:
    value = os.environ.get(variable, "")
    if value and os.path.isabs(value):
        return Path(value)
    return Path.home() / default


def config_home() -> Path:
    """``$XDG_CONFIG_HOME``, else ``~/.config``."""
    return _home("XDG_CONFIG_HOME", ".config")


def data_home() -> Path:
    """``$XDG_DATA_HOME``, else ``~/.local/share``."""
    return _home("XDG_DATA_HOME", ".local/share")


def state_home() -> Path:
    """``$XDG_STATE_HOME``, else ``~/.local/state``."""
    return _home("XDG_STATE_HOME", ".local/state")
