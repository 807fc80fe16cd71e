"""Reading a command's TOML config file, with errors that say where.

Every command of the suite takes its settings from one TOML file (``elvind
--config``, ``~/.config/elvin/biff.toml``...) and says what is wrong with it
the same way: ``FILE: no such file``, ``FILE: cannot read: why``, ``FILE,
line 3, column 7: not valid TOML: why``. Reading lives here; what the keys
mean stays with each command.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from elvin.cli_common import ToolError

__all__ = ["ConfigError", "NumberRange", "TomlFile", "check_number", "check_numbers", "check_routers", "check_scope_setting",
           "collecting_problems", "default_config_path", "list_item", "line_of", "load_named", "number",
           "raw_setting", "read_toml"]

APP_DIR = "elvin"

C = TypeVar("C")


class ConfigError(ValueError):
    """A config file that cannot be read or holds a wrong value; the message
    names the file (and the line or key, where known). ``problems``: every
    problem found in one part (a table whose keys are each checked), the
    message being the first; ``collecting_problems`` reports them all."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems) if problems else [message]

    @classmethod
    def of(cls, problems: list[str]) -> ConfigError:
        """One error for ``problems`` (not empty), saying the first."""
        return cls(problems[0], problems)


@contextlib.contextmanager
def collecting_problems(problems: list[str] | None) -> Iterator[None]:
    """Where a ``ConfigError`` raised in the block goes: on up when
    ``problems`` is None (a start stops at the first problem), else appended
    to ``problems`` as its line, the caller going on after the block (a
    ``--check-config`` says every problem at once)."""
    try:
        yield
    except ConfigError as exc:
        if problems is None:
            raise
        problems.extend(getattr(exc, "problems", None) or [str(exc)])


def default_config_path(name: str) -> Path:
    """``$XDG_CONFIG_HOME/elvin/NAME`` (``~/.config/elvin/NAME`` when unset):
    the daemons must not need Qt to find it."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / APP_DIR / name


@dataclass(frozen=True)
class TomlFile:
    """A parsed file, with its text for pointing at the line of a key."""

    path: Path
    text: str
    data: dict[str, Any]

    def line_of(self, key: str) -> str:
        return line_of(self.text, key)


@overload
def read_toml(path: str | os.PathLike, *, must_exist: Literal[True] = ...) -> TomlFile: ...
@overload
def read_toml(path: str | os.PathLike, *, must_exist: bool) -> TomlFile | None: ...


def read_toml(path: str | os.PathLike, *, must_exist: bool = True) -> TomlFile | None:
    """Parse the file at ``path`` (``~`` expanded). A missing file is an
    error when ``must_exist`` (a file named on the command line), else None
    (a default file nobody wrote: the defaults apply)."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if must_exist:
            raise ConfigError(f"{file}: no such file") from None
        return None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text ({exc})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}{_toml_error(str(exc), text)}") from None
    return TomlFile(file, text, data)


def _toml_error(message: str, text: str) -> str:
    """``, line 3, column 7: not valid TOML: why`` from tomllib's message,
    which puts the place at its end in words of its own."""
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    if m:
        return f", line {m.group(1)}, column {m.group(2)}: not valid TOML: " \
               f"{message[:m.start()]}"
    if message.endswith("(at end of document)"):
        return f", line {max(text.count(chr(10)), 1)} (end of file): not valid TOML: " \
               f"{message[:-len('(at end of document)')].rstrip()}"
    return f": not valid TOML: {message}"


def line_of(text: str, key: str) -> str:
    """``, line N`` where ``key`` (or its ``-``/``_`` twin, quoted or not) is
    set at the start of a line of ``text``; empty when it cannot be found."""
    for candidate in dict.fromkeys((key, key.replace("-", "_"), key.replace("_", "-"))):
        pattern = re.compile(r'^[ \t]*["\']?' + re.escape(candidate) + r'["\']?\s*=', re.M)
        m = pattern.search(text)
        if m:
            return f", line {text.count(chr(10), 0, m.start()) + 1}"
    return ""


def raw_setting(path: str | os.PathLike | None, key: str) -> Any:
    """``key`` (or its ``-``/``_`` twin) as written at the top of the TOML
    file at ``path``, whatever else the file gets wrong; None when the file
    or the key is missing or unreadable. For ``DAEMON reload``, which must
    find the daemon's status file even when the file being reloaded is the
    broken one (the daemon then says what is wrong with it)."""
    if not path:
        return None
    try:
        data = read_toml(path).data
    except ConfigError:
        return None
    for candidate in (key, key.replace("-", "_"), key.replace("_", "-")):
        if candidate in data:
            return data[candidate]
    return None


def list_item(name: str, index: int, key: str | None = None) -> str:
    """``NAME #N`` for the entry at ``index`` (from 0) of the array ``NAME``,
    counted from 1 as an admin counts ``[[NAME]]`` tables or list entries
    in the file, then ``, KEY`` for a key inside it: the one way every
    message of the suite names a position (``feeds #2, interval``,
    ``federation.connect #1, url``, ``links #3``, ``listen #2``)."""
    where = f"{name} #{index + 1}"
    return f"{where}, {key}" if key else where


def load_named(load: Callable[..., C], path: str | None) -> C:
    """``load(path)`` for a command's ``--config``: a file named there must
    exist, the default one may not. ``ToolError`` (usage) when it is wrong."""
    try:
        return load(path, must_exist=bool(path))
    except ConfigError as exc:
        raise ToolError(str(exc)) from None


@dataclass(frozen=True)
class NumberRange:
    """The values a numeric setting may take: ``low <= value <= high``,
    ``value > above``; whole numbers only when ``integer``."""

    low: float | None = None
    high: float | None = None
    above: float | None = None
    integer: bool = False

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"from {self.low:g} to {self.high:g}"
        if self.low is not None:
            return f"at least {self.low:g}"
        if self.above is not None:
            return f"more than {self.above:g}"
        return f"at most {self.high:g}" if self.high is not None else "any"

    def contains(self, value: float) -> bool:
        return not ((self.low is not None and value < self.low)
                    or (self.high is not None and value > self.high)
                    or (self.above is not None and value <= self.above))


def number(default: float, low: float | None = None, high: float | None = None, *,
           above: float | None = None, integer: bool = False) -> Any:
    """A dataclass field for a numeric setting: its range stands beside its
    default, and ``check_numbers`` enforces it."""
    return field(default=default, metadata={"range": NumberRange(low, high, above, integer)})


def check_number(value: object, where: str, allowed: NumberRange) -> float:
    """``value`` if it is a (finite) number in ``allowed``, else
    ``ConfigError``: ``WHERE: must be a number, not 'x'`` or ``WHERE: 0 is
    out of range (from 0.1 to 60)``."""
    kinds = (int,) if allowed.integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or (
            isinstance(value, float) and not math.isfinite(value)):
        kind = "an integer" if allowed.integer else "a number"
        raise ConfigError(f"{where}: must be {kind}, not {value!r}")
    if not allowed.contains(value):
        raise ConfigError(f"{where}: {value!r} is out of range ({allowed})")
    return value


def check_numbers(settings: Any, where: str, name: Callable[[str], str] = str) -> None:
    """``check_number`` on every ``number`` field of the dataclass instance
    ``settings``; errors say ``WHERE: name(field)``."""
    found: list[str] = []     # every number out of range, not only the first
    for f in fields(settings):
        allowed = f.metadata.get("range")
        if allowed is not None:
            with collecting_problems(found):
                check_number(getattr(settings, f.name), f"{where}: {name(f.name)}", allowed)
    if found:
        raise ConfigError.of(found)


def check_routers(value: object, where: str) -> str | list[str]:
    """An app's ``elvin`` setting: one router URL, or a list of them (the
    failover list, in order; ``elvin.router_url`` checks each URL), else
    ``ConfigError`` naming ``where`` (``FILE: elvin``)."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip()
                                                 for v in value):
        return [v.strip() for v in value]
    raise ConfigError(f"{where} must be a router URL or a list of them (failover), "
                      f"e.g. [\"elvin://a.example\", \"elvin://b.example\"], not {value!r}")


def check_scope_setting(value: object, where: str) -> str:
    """An app's ``scope`` setting: a discovery scope name (the routers that
    advertise it are the failover list when no URL is named), else
    ``ConfigError`` naming ``where``."""
    from elvin.discovery.codec import check_scope

    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a discovery scope name (text), not {value!r}")
    try:
        return check_scope(value.strip())
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _routers_by_hand(config: Any, value: object, where: str) -> None:
    config.elvin = check_routers(value, f"{where}: elvin")


def _scope_by_hand(config: Any, value: object, where: str) -> None:
    config.scope = check_scope_setting(value, f"{where}: scope")


#: the parsers of every app's ``elvin`` and ``scope`` settings, for
#: ``SettingsTable.load(..., by_hand=...)`` (the apps declare them ``by_hand``)
ROUTER_SETTINGS = {"elvin": _routers_by_hand, "scope": _scope_by_hand}
#: their help, the same in every app's reference
ROUTERS_HELP = ("the router's URL, or a list of them to fail over among, in order "
                "(``--elvin`` and ``ELVIN_URL`` override it)")
SCOPE_HELP = "a discovery scope: with no router named, every router found for it"

