"""The TOML configuration file: what the user chose, kept across runs.

One file per tool in the platform config dir (``~/.config/elvin/tickertape.toml``
on Linux, from QStandardPaths), overridable by flags and ``ELVIN_URL``;
defaults work with no file. Reading rejects wrong types with a message that
names the file and the key. Writing (the app saves the settings and groups
the user changed) edits the file the user has, keeping their comments and
layout (``elvin.tomlwrite.edit``); a first file is written whole.
"""

from __future__ import annotations

import getpass
import math
import os
import socket
from dataclasses import dataclass, field, fields
from pathlib import Path

from elvin_apps.tickertape.groups import Group, GroupError, GroupList, is_hex_colour

from elvin.config_file import (
    APP_DIR,
    ConfigError,
    check_routers,
    check_scope_setting,
    read_toml,
)
from elvin.fileutil import atomic_write
from elvin.tomlwrite import edit, toml_value

CONFIG_NAME = "tickertape.toml"
#: where the strip goes: a full-width bar docked at the top or bottom edge of
#: the screen, or an ordinary window
DOCK_CHOICES = ("top", "bottom", "window")


def default_user() -> str:
    """``user@host``, the identity most Tickertape clients use by default."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (containers): still work
        user = "user"
    host = socket.gethostname() or "localhost"
    return f"{user}@{host}"


def default_groups(user: str) -> list[Group]:
    """A useful start: the common Chat group and a group named after the
    user (the convention for direct messages)."""
    local = user.split("@", 1)[0] or "me"
    return [Group("Chat"), Group(local)]


@dataclass
class Config:
    """Every setting, with the defaults used when the file does not say."""

    #: the router, or a list of routers to fail over among, in order
    elvin: str | list[str] | None = None
    #: a discovery scope: with no router named, every router found for it
    scope: str = ""
    user: str = field(default_factory=default_user)
    speed: float = 80.0            # pixels per second
    default_timeout: int = 600     # seconds, when a message suggests none
    font_family: str = ""          # empty: the desktop's font
    font_size: float = 11.0        # points
    background: str = "#1d1f21"    # the strip's colour
    text_colour: str = "#e6e6e6"   # the messages' text (groups have their own colours)
    dock: str = "top"              # top, bottom (a docked bar) or window
    always_on_top: bool = True     # as a window
    frameless: bool = False        # as a window: without the title bar
    legacy: bool = True            # also send/subscribe the pre-v3 attribute names
    #: an expression whose matches are shown too, beside the groups' messages
    extra_subscription: str = ""
    #: a desktop notification when a message mentions you
    notify_mentions: bool = True
    #: how many messages the history keeps (the oldest are forgotten)
    history_max: int = 50_000
    history_file: str = ""         # empty: the platform data dir
    groups: list[Group] = field(default_factory=list)
    path: Path | None = None       # where it was read from / is saved to
    #: the values the file had for settings the command line overrides
    #: (``--dock``, ``--user``): what a save writes for them, so that an
    #: override lasts one run and never lands in the user's file
    file_values: dict[str, object] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.groups:
            self.groups = default_groups(self.user)

    def override(self, name: str, value: object) -> None:
        """Use ``value`` for this run only (a command-line flag)."""
        self.file_values.setdefault(name, getattr(self, name))
        setattr(self, name, value)

    def choose(self, name: str, value: object) -> None:
        """The user set ``name`` in the app: it is saved, whatever the
        command line said."""
        self.file_values.pop(name, None)
        setattr(self, name, value)

    def saved_value(self, name: str) -> object:
        """What a save writes for ``name``: the file's value while a
        command-line override is in force, else the current one."""
        return self.file_values.get(name, getattr(self, name))

    @property
    def group_list(self) -> GroupList:
        return GroupList(list(self.groups))


_SCALARS = {
    "elvin": (str, list),
    "scope": (str,),
    "user": (str,),
    "speed": (int, float),
    "default_timeout": (int,),
    "font_family": (str,),
    "font_size": (int, float),
    "background": (str,),
    "text_colour": (str,),
    "dock": (str,),
    "always_on_top": (bool,),
    "frameless": (bool,),
    "legacy": (bool,),
    "extra_subscription": (str,),
    "notify_mentions": (bool,),
    "history_max": (int,),
    "history_file": (str,),
}
_GROUP_KEYS = {
    "name": (str,), "subscribe": (bool,), "min_time": (int,), "max_time": (int,),
    "key": (str,), "colour": (str,), "color": (str,),
}
_RANGES = {"speed": (1, 2000), "default_timeout": (0, 7 * 86400), "font_size": (5, 72),
           "history_max": (0, 10_000_000)}


def default_config_path() -> Path:
    """The platform config file (``$XDG_CONFIG_HOME/elvin/tickertape.toml``)."""
    from PySide6.QtCore import QStandardPaths
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericConfigLocation)
    if not base:
        base = os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / APP_DIR / CONFIG_NAME


def default_data_dir() -> Path:
    """Where the history lives (``$XDG_DATA_HOME/elvin/tickertape``)."""
    from PySide6.QtCore import QStandardPaths
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
    if not base:
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / APP_DIR / "tickertape"


def _type_name(types: tuple[type, ...]) -> str:
    if set(types) == {int, float}:
        return "a number"
    names = {bool: "true/false", int: "an integer", float: "a number", str: "a string",
             list: "a list"}
    return " or ".join(names[t] for t in types)


def _check(where: str, key: str, value: object, types: tuple[type, ...]) -> object:
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        raise ConfigError(f"{where}: {key} must be {_type_name(types)}, not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {key} must be a finite number")
    return value


def from_mapping(data: dict, where: str = "config") -> Config:
    """A Config from parsed TOML; raises ConfigError naming the bad key."""
    values: dict[str, object] = {}
    for key, value in data.items():
        if key == "groups":
            continue
        if key not in _SCALARS:
            raise ConfigError(f"{where}: unknown setting {key!r} (known: "
                              f"{', '.join(sorted([*_SCALARS, 'groups']))})")
        values[key] = _check(where, key, value, _SCALARS[key])
        if key in _RANGES:
            low, high = _RANGES[key]
            if not low <= value <= high:  # type: ignore[operator]
                raise ConfigError(f"{where}: {key} must be between {low} and {high}, "
                                  f"not {value}")
    if "elvin" in values:
        values["elvin"] = check_routers(values["elvin"], f"{where}: elvin")
    if "scope" in values:
        values["scope"] = check_scope_setting(values["scope"], f"{where}: scope")
    for key in ("background", "text_colour"):
        if key in values and not is_hex_colour(str(values[key]).strip()):
            raise ConfigError(f"{where}: {key} must look like #1d1f21, not {values[key]!r}")
        if key in values:
            values[key] = str(values[key]).strip().lower()
    if "dock" in values and values["dock"] not in DOCK_CHOICES:
        raise ConfigError(f"{where}: dock must be one of {', '.join(DOCK_CHOICES)}, "
                          f"not {values['dock']!r}")
    if "speed" in values:
        values["speed"] = float(values["speed"])  # type: ignore[arg-type]
    if "font_size" in values:
        values["font_size"] = float(values["font_size"])  # type: ignore[arg-type]
    groups = data.get("groups")
    if groups is not None:
        if not isinstance(groups, list):
            raise ConfigError(f"{where}: groups must be an array of tables ([[groups]])")
        parsed = []
        for i, table in enumerate(groups, 1):
            here = f"{where}: groups #{i}"
            if not isinstance(table, dict):
                raise ConfigError(f"{here}: must be a table with at least name = \"...\"")
            for key, value in table.items():
                if key not in _GROUP_KEYS:
                    raise ConfigError(f"{here}: unknown key {key!r} (known: "
                                      f"{', '.join(k for k in _GROUP_KEYS if k != 'color')})")
                _check(here, key, value, _GROUP_KEYS[key])
            if "name" not in table:
                raise ConfigError(f"{here}: needs a name")
            try:
                parsed.append(Group(
                    name=table["name"], subscribe=table.get("subscribe", True),
                    min_time=table.get("min_time", Group.min_time),
                    max_time=table.get("max_time", Group.max_time),
                    key=table.get("key"), colour=table.get("colour", table.get("color"))))
            except GroupError as exc:
                raise ConfigError(f"{here}: {exc}") from None
        values["groups"] = parsed
        if not parsed:
            values["groups"] = []
    config = Config(**values)  # type: ignore[arg-type]
    if groups is not None and not groups:
        config.groups = []  # an explicit empty list stays empty
    return config


def load(path: Path | str | None = None, *, must_exist: bool = False) -> Config:
    """Read the config file; defaults when it does not exist (unless
    ``must_exist``, used for an explicit ``--config``)."""
    file = Path(path) if path else default_config_path()
    toml = read_toml(file, must_exist=must_exist)
    config = Config() if toml is None else from_mapping(toml.data, str(toml.path))
    config.path = file       # where the app saves what the user changes
    return config


#: Config fields that are not top-level settings of the file
_NOT_SETTINGS = ("groups", "path", "file_values")


def _settings(config: Config) -> dict[str, object]:
    """The file's top-level settings as they are to be saved (None: not
    written); command-line overrides are left out."""
    return {f.name: _as_written(config.saved_value(f.name)) for f in fields(Config)
            if f.name not in _NOT_SETTINGS}


def _as_written(value: object) -> object:
    """A whole number kept as the user writes it: ``speed = 100``, not
    ``100.0`` (the settings are floats inside, for the dialog's spin boxes)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return value


def _group_rows(config: Config) -> list[dict[str, object]]:
    """The ``[[groups]]`` tables, with only what differs from a group's defaults."""
    rows = []
    for group in config.groups:
        row: dict[str, object] = {"name": group.name}
        if not group.subscribe:
            row["subscribe"] = False
        if group.min_time != Group.min_time:
            row["min_time"] = group.min_time
        if group.max_time != Group.max_time:
            row["max_time"] = group.max_time
        if group.key:
            row["key"] = group.key
        if group.colour:
            row["colour"] = group.colour
        rows.append(row)
    return rows


def dumps(config: Config) -> str:
    """The TOML text of a Config (round-trips through :func:`from_mapping`)."""
    lines = ["# Tickertape settings (elvin suite). The app writes what you change in it",
             "# (Settings, Groups) back here and keeps your comments.", ""]
    defaults = Config(user=config.saved_value("user"))
    for f in fields(Config):
        if f.name in _NOT_SETTINGS:
            continue
        value = _as_written(config.saved_value(f.name))
        if value is None:
            continue
        if value == getattr(defaults, f.name) and f.name not in ("user", "speed"):
            continue
        lines.append(f"{f.name} = {toml_value(value)}")
    if not config.groups:
        lines.append("groups = []")
    for row in _group_rows(config):
        lines += ["", "[[groups]]"]
        lines += [f"{key} = {toml_value(value)}" for key, value in row.items()]
    return "\n".join(lines) + "\n"


def updated(text: str, config: Config) -> str:
    """``text`` (the user's file) with ``config`` written into it: changed
    settings in place, comments and layout kept."""
    defaults = _settings(Config(user=config.saved_value("user")))
    return edit(text, _settings(config), defaults=defaults,
                tables={"groups": ("name", _group_rows(config))},
                aliases={"colour": "color"})


def save(config: Config, path: Path | str | None = None) -> Path:
    """Write the config atomically (temp file + rename), readable only by
    the user since private group keys are in it. An existing file is
    edited (its comments stay); one that is not valid TOML is an error,
    never overwritten."""
    file = Path(path) if path else (config.path or default_config_path())
    try:
        old = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read it to update it: {exc}") from None
    if old is None or not old.strip():
        text = dumps(config)
    else:
        try:
            text = updated(old, config)
        except ValueError as exc:
            raise ConfigError(f"{file}: {exc}; not overwritten") from None
    atomic_write(file, text, mode=0o600)
    config.path = file
    return file
