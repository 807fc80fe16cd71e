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
from dataclasses import dataclass, field
from pathlib import Path

from elvin_apps.tickertape.groups import Group, GroupError, GroupList, is_hex_colour

from elvin.config_file import (
    APP_DIR,
    ROUTER_SETTINGS,
    ROUTERS_HELP,
    SCOPE_HELP,
    ConfigError,
    read_toml,
)
from elvin.fileutil import atomic_write
from elvin.settings import SettingsTable, Wording, setting
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


def _hex_colour(value: str) -> str:
    """A ``#rrggbb`` colour, as kept (lower case)."""
    if not is_hex_colour(value.strip()):
        raise ValueError(f"must look like #1d1f21, not {value!r}")
    return value.strip().lower()


@dataclass
class Config:
    """Every setting, with the defaults used when the file does not say;
    each declared once (``elvin.settings``): the checks, what a save writes
    and the configuration reference come from here."""

    elvin: str | list[str] | None = setting(None, by_hand=True, help=ROUTERS_HELP)
    scope: str = setting("", by_hand=True, help=SCOPE_HELP)
    user: str = setting(default_factory=default_user, shown_default="user@host",
                        help="your name on the messages you send")
    speed: float = setting(80.0, low=1, high=2000, help="pixels per second")
    default_timeout: int = setting(600, low=0, high=7 * 86400,
                                   help="seconds, when a message suggests none")
    font_family: str = setting("", help="empty: the desktop's font")
    font_size: float = setting(11.0, low=5, high=72, help="points")
    background: str = setting("#1d1f21", convert=_hex_colour, help="the strip's colour")
    text_colour: str = setting("#e6e6e6", convert=_hex_colour,
                               help="the messages' text (groups have their own colours)")
    dock: str = setting("top", choices=DOCK_CHOICES,
                        help="top, bottom (a docked bar) or window")
    always_on_top: bool = setting(True, help="as a window")
    frameless: bool = setting(False, help="as a window: without the title bar")
    legacy: bool = setting(True, help="also send/subscribe the pre-v3 attribute names")
    extra_subscription: str = setting(
        "", help="an expression whose matches are shown too, beside the groups' messages")
    notify_mentions: bool = setting(True,
                                    help="a desktop notification when a message mentions you")
    history_max: int = setting(50_000, low=0, high=10_000_000,
                               help="how many messages the history keeps (the oldest are "
                                    "forgotten)")
    history_file: str = setting("", help="empty: the platform data dir")
    groups: list[Group] = setting(default_factory=list, by_hand=True,
                                  help="the groups (``[[groups]]``, below)")
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


_GROUP_KEYS = {
    "name": (str,), "subscribe": (bool,), "min_time": (int,), "max_time": (int,),
    "key": (str,), "colour": (str,), "color": (str,),
}


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
    config = SETTINGS.load(Config(), data, lambda key: where,
                           by_hand={**ROUTER_SETTINGS, "groups": _read_groups})
    if "groups" not in data:
        config.groups = default_groups(config.user)   # the file's user, not the default
    return config


def _read_groups(config: Config, groups: object, where: str) -> None:
    """``[[groups]]`` into ``config.groups`` (an explicit empty list stays empty)."""
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
    config.groups = parsed


def load(path: Path | str | None = None, *, must_exist: bool = False) -> Config:
    """Read the config file; defaults when it does not exist (unless
    ``must_exist``, used for an explicit ``--config``)."""
    file = Path(path) if path else default_config_path()
    toml = read_toml(file, must_exist=must_exist)
    config = Config() if toml is None else from_mapping(toml.data, str(toml.path))
    config.path = file       # where the app saves what the user changes
    return config


#: the tickertape's settings, as Config declares them
SETTINGS = SettingsTable(Config, wording=Wording(boolean="true/false"))
#: the top-level settings of the file (the groups are its tables)
_SCALARS = tuple(s.name for s in SETTINGS if not s.by_hand)


def _settings(config: Config) -> dict[str, object]:
    """The file's top-level settings as they are to be saved (None: not
    written); command-line overrides are left out."""
    return {name: _as_written(config.saved_value(name)) for name in _SCALARS}


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
    for name in _SCALARS:
        value = _as_written(config.saved_value(name))
        if value is None:
            continue
        if value == getattr(defaults, name) and name not in ("user", "speed"):
            continue
        lines.append(f"{name} = {toml_value(value)}")
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
