"""One declaration per setting: a config dataclass's fields say everything.

A tool's settings are the fields of its config dataclass, each declared once
with ``setting()``: its default beside its help, bounds or choices, whether a
reload applies it, its command-line flag and the section it belongs to::

    @dataclass
    class RouterConfig:
        stats_interval: float = setting(
            5.0, above=0, reloadable=True, flag="--stats-interval", metavar="SECONDS",
            help="seconds between Elvin-Router-Stats notifications (default {default})")

``SettingsTable(RouterConfig)`` reads the declarations back, and from them
come the rest: the TOML keys and their type checks (``apply``), the bounds
and choices (``problems``), the argparse flags (``add_arguments``) and what
they set (``apply_args``), the reloadable set, and the configuration
reference (``docs/_ext/configref.py`` renders the table). A setting added
is in all of them at once; none of them can forget it.

Each tool keeps the wording its messages have always had (``Wording``:
scripts and tests match on it), while the checks are one.

What one field cannot say in a line (a list of URIs, a table of connection
options, a file that must be readable) is marked ``by_hand``: declared here
for the reference and the flags, parsed and checked by the tool's module.

Sans-IO: nothing here reads a file; the messages are built from ``where``
strings the caller makes (file and line).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from elvin.config_file import ConfigError, collecting_problems

__all__ = ["APP_WORDING", "ROUTER_WORDING", "Bounds", "Setting", "SettingsTable", "Wording",
           "setting", "shown"]

#: the dataclass field metadata key under which a ``Setting`` is kept
_KEY = "elvin.setting"


@dataclass(frozen=True, slots=True)
class Bounds:
    """The numbers a setting may take, and how a value outside is said.

    ``above``: the value must be more than this (``above=0``: positive);
    ``low``/``high``: inclusive; ``zero``: what 0 means when it is the low
    end (``"no limit"``), said in the message."""

    low: float | None = None
    high: float | None = None
    above: float | None = None
    zero: str | None = None

    def problem(self, value: float, between: bool = False) -> str | None:
        """What is wrong with ``value``, to follow the key (``must be
        positive``), or None; ``between``: a range said ``must be between
        LOW and HIGH, not VALUE`` rather than ``VALUE is out of range (from
        LOW to HIGH)``."""
        if math.isnan(value):
            return "must be a number, not nan"
        if self.above is not None and not value > self.above:
            return "must be positive" if self.above == 0 else f"must be more than {self.above:g}"
        if (self.low is not None and value < self.low) or \
                (self.high is not None and value > self.high):
            if self.high is not None and self.low is not None and between:
                return f"must be between {self.low:g} and {self.high:g}, not {shown(value)}"
            if self.high is not None:
                return f"{shown(value)} is out of range ({self})"
            if self.zero is not None and self.low == 0:
                return f"must be 0 ({self.zero}) or more"
            return f"must be at least {self.low:g}"
        return None

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"from {self.low:g} to {self.high:g}"
        if self.low is not None:
            return (f"0 ({self.zero}) or more" if self.zero is not None and self.low == 0
                    else f"at least {self.low:g}")
        if self.above is not None:
            return "positive" if self.above == 0 else f"more than {self.above:g}"
        return f"at most {self.high:g}" if self.high is not None else ""


@dataclass(frozen=True, slots=True)
class Wording:
    """How a tool's messages say a key and what it expected: the router and
    the apps have said it differently for years, and scripts and tests
    match on it, so each keeps its wording while sharing the checks."""

    #: the key quoted (``'quench' must be true or false``) or bare
    quoted: bool = False
    #: the word for a whole number expected (the router says "a number")
    integer: str = "an integer"
    #: the words for a boolean expected (the tickertape says "true/false")
    boolean: str = "true or false"
    #: how an unknown key is said (``unknown setting 'x'``)
    unknown: str = "unknown setting"
    #: ``(known: a, b)`` after an unknown key
    known: bool = True
    #: ranges said ``KEY must be between LOW and HIGH, not VALUE``
    between: bool = True
    #: file keys dashed (``log-level``, either spelling read) or as the fields
    dashed: bool = False
    #: the key then a colon (``http.timeout: must be a number``), as
    #: ``elvin.config_file.check_number`` says it
    colon: bool = False
    #: what comes before a key in a message: the table it is in (``http.``)
    prefix: str = ""

    def say(self, key: str, rest: str) -> str:
        """``KEY REST`` (or ``PREFIX.KEY: REST``) as this tool says it."""
        return f"{self.prefix}{key}: {rest}" if self.colon else f"{self.prefix}{key} {rest}"


ROUTER_WORDING = Wording(quoted=True, integer="a number", known=False, between=False,
                         dashed=True)
APP_WORDING = Wording()


@dataclass(frozen=True, slots=True)
class Setting:
    """What a field declares about itself (``setting()``'s arguments); the
    ``name``, ``kind``, ``optional`` and ``default`` are filled in by
    ``SettingsTable`` from the field."""

    help: str
    reloadable: bool = False
    flag: str | None = None
    metavar: str | None = None
    section: str = ""
    choices: tuple[str, ...] = ()
    bounds: Bounds | None = None
    by_hand: bool = False
    in_file: bool = True
    #: after the type check: the value as kept (``ValueError(why)`` if it is wrong)
    convert: Callable[[Any], Any] | None = None
    #: the default as the reference says it, where it is computed (``user@host``),
    #: or the function that says it
    shown_default: str | Callable[[], str] | None = None
    name: str = ""
    kind: type = str
    optional: bool = False
    default: Any = None

    key: str = ""

    @property
    def type_name(self) -> str:
        """The type as the reference says it: ``number``, ``string``..."""
        names = {str: "string", int: "integer", float: "number", bool: "boolean"}
        name = names.get(self.kind, getattr(self.kind, "__name__", str(self.kind)))
        return f"{name} or none" if self.optional else name


def setting(default: Any = dataclasses.MISSING, *, help: str,
            default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
            reloadable: bool = False, flag: str | None = None, metavar: str | None = None,
            section: str = "", choices: tuple[str, ...] = (), low: float | None = None,
            high: float | None = None, above: float | None = None, zero: str | None = None,
            by_hand: bool = False, in_file: bool = True,
            convert: Callable[[Any], Any] | None = None,
            shown_default: str | Callable[[], str] | None = None) -> Any:
    """A dataclass field declaring a setting (see the module docstring).

    ``help`` may say ``{default}``: the declared default, as TOML writes it.
    ``flag``: ``--name`` (takes a value; ``store_true`` for a boolean) or
    ``--no-name`` (a boolean that the flag turns off). ``in_file`` False: a
    flag only (``--state-reset``), not a key of the file. ``convert``: a
    check and normalisation beyond the type (``ValueError("must look like
    #1d1f21")``: the message says ``WHERE: KEY must look like #1d1f21``)."""
    bounds = Bounds(low, high, above, zero) if (low, high, above) != (None, None, None) \
        else None
    declared = Setting(help=help, reloadable=reloadable, flag=flag, metavar=metavar,
                       section=section, choices=tuple(choices), bounds=bounds,
                       by_hand=by_hand, in_file=in_file, convert=convert,
                       shown_default=shown_default)
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata={_KEY: declared})


def shown(value: Any) -> str:
    """A value as TOML writes it (``5``, ``"info"``, ``true``, ``none``)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return str(value)


def _kind(hint: Any) -> tuple[type, bool]:
    """(the base type, whether None is allowed) of a field's type hint."""
    optional = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        hint = args[0] if len(args) == 1 else object
    origin = typing.get_origin(hint)
    return (origin if origin is not None else hint), optional


class SettingsTable:
    """The settings a config dataclass declares, in declaration order."""

    def __init__(self, cls: type, sections: dict[str, str] | None = None,
                 wording: Wording = APP_WORDING) -> None:
        self.cls = cls
        self.wording = wording
        #: argparse groups (and reference sections): title -> description
        self.sections = dict(sections or {})
        hints = typing.get_type_hints(cls)
        found: list[Setting] = []
        for f in dataclasses.fields(cls):
            declared = f.metadata.get(_KEY)
            if declared is None:
                continue
            kind, optional = _kind(hints[f.name])
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING \
                else f.default
            key = f.name.replace("_", "-") if wording.dashed else f.name
            found.append(dataclasses.replace(declared, name=f.name, key=key, kind=kind,
                                             optional=optional, default=default))
        self.settings: tuple[Setting, ...] = tuple(found)
        self._by_key = {s.key: s for s in self.settings if s.in_file}

    def __iter__(self) -> Iterator[Setting]:
        return iter(self.settings)

    def __getitem__(self, name: str) -> Setting:
        for s in self.settings:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def reloadable(self) -> frozenset[str]:
        """The fields a reload applies to a running program."""
        return frozenset(s.name for s in self.settings if s.reloadable)

    @property
    def keys(self) -> list[str]:
        """The file's keys, in declaration order."""
        return list(self._by_key)

    def find(self, key: str) -> Setting | None:
        """The setting a file's key names (dashed: ``log-level`` or
        ``log_level``)."""
        return self._by_key.get(key.replace("_", "-") if self.wording.dashed else key)

    def help(self, s: Setting) -> str:
        """The setting's help, its ``{default}`` filled in."""
        return s.help.replace("{default}", self.default_text(s).strip('"'))

    @staticmethod
    def default_text(s: Setting) -> str:
        """The default as TOML writes it (or as declared, where computed)."""
        if callable(s.shown_default):
            return s.shown_default()
        return s.shown_default if s.shown_default is not None else shown(s.default)

    # -- the file -------------------------------------------------------------

    def apply(self, config: Any, raw_key: str, value: Any, where: str) -> bool:
        """Set ``config``'s setting that ``raw_key`` names to ``value``,
        after checking its type (``ConfigError``: ``WHERE: 'KEY' must be a
        number, not 'x'``). False when the table does not parse that key
        (unknown, or parsed by hand): the caller's to handle."""
        s = self.find(raw_key)
        if s is None or s.by_hand:
            return False
        if not (value is None and s.optional):     # (TOML has no None: from a mapping)
            self._check_type(s, raw_key, value, where)
        if s.convert is not None:
            try:
                value = s.convert(value)
            except ValueError as exc:
                raise ConfigError(f"{where}: {self.wording.say(raw_key, str(exc))}") from None
        elif s.kind is float and value is not None:
            value = float(value)
        elif s.choices and isinstance(value, str):
            value = value.lower()                   # any case, as the flag
        setattr(config, s.name, value)
        return True

    def _check_type(self, s: Setting, raw_key: str, value: Any, where: str) -> None:
        words = {str: "a string", int: self.wording.integer, float: "a number",
                 bool: self.wording.boolean}
        kinds: tuple[type, ...] = (int, float) if s.kind is float else (s.kind,)
        if isinstance(value, bool) != (s.kind is bool) or not isinstance(value, kinds):
            key = repr(raw_key) if self.wording.quoted else raw_key
            expected = words.get(s.kind, f"a {getattr(s.kind, '__name__', s.kind)}")
            raise ConfigError(f"{where}: "
                              + self.wording.say(key, f"must be {expected}, not {value!r}"))

    def unknown(self, raw_key: str, where: str, more: tuple[str, ...] = ()) -> str:
        """The message for a key no setting has (``more``: the keys the
        caller reads by hand, for the list of the known ones)."""
        said = (f"{where}: {self.wording.say(raw_key, self.wording.unknown)}"
                if self.wording.colon else f"{where}: {self.wording.unknown} {raw_key!r}")
        if self.wording.known:
            said += f" (known: {', '.join(sorted({*self.keys, *more}))})"
        return said

    def load(self, config: Any, data: dict[str, Any], where: Callable[[str], str],
             problems: list[str] | None = None,
             by_hand: dict[str, Callable[[Any, Any, str], None]] | None = None) -> Any:
        """Every key of ``data`` (a file's table) set on ``config``, then its
        bounds checked: the first problem a ``ConfigError``, or, with a
        ``problems`` list, each appended there. ``by_hand``: per key the
        table does not parse, ``parse(config, value, where)``. A frozen
        dataclass is returned anew (``dataclasses.replace``)."""
        hand = by_hand or {}
        # __dataclass_params__ is the dataclass machinery's own record, not in the stubs
        frozen = self.cls.__dataclass_params__.frozen    # type: ignore[attr-defined]
        target = types.SimpleNamespace() if frozen else config
        for raw_key, value in data.items():
            with collecting_problems(problems):
                if raw_key in hand:
                    hand[raw_key](target, value, where(raw_key))
                elif not self.apply(target, raw_key, value, where(raw_key)):
                    raise ConfigError(self.unknown(raw_key, where(raw_key), tuple(hand)))
        if frozen:
            config = dataclasses.replace(config, **vars(target))
        found = self.problems(config, where)
        if found and problems is None:
            raise ConfigError.of(found)
        if problems is not None:
            problems.extend(found)
        return config

    def problems(self, config: Any, where: Callable[[str], str]) -> list[str]:
        """Every value of ``config`` out of its bounds or choices, each
        ``WHERE(key): KEY must be ...``."""
        found = []
        for s in self.settings:
            value = getattr(config, s.name)
            if value is None or s.by_hand:
                continue
            problem = None
            if s.bounds is not None and isinstance(value, (int, float)):
                problem = s.bounds.problem(value, self.wording.between)
            elif s.choices and str(value).lower() not in s.choices:   # any case, as the flag
                problem = f"must be one of {', '.join(s.choices)}, not {value!r}"
            if problem:
                found.append(f"{where(s.key)}: {self.wording.say(s.key, problem)}")
        return found

    # -- the command line -----------------------------------------------------

    def add_arguments(self, parser: argparse.ArgumentParser, section: str = ""
                      ) -> argparse._ActionsContainer:
        """Add the flags of ``section``'s settings to ``parser`` (in an
        argument group for a named section); the group (or the parser), so
        that a caller can add flags of its own beside them. Every flag's
        default is None: what is not given leaves the file's value."""
        target: argparse._ActionsContainer = parser
        if section:
            target = parser.add_argument_group(section, self.sections.get(section))
        for s in self.settings:
            if s.flag is None or s.section != section:
                continue
            kwargs: dict[str, Any] = {"dest": s.name, "default": None, "help": self.help(s)}
            if s.kind is bool:
                kwargs["action"] = "store_false" if s.flag.startswith("--no-") \
                    else "store_true"
            else:
                kwargs["metavar"] = s.metavar
                if s.kind is list:
                    kwargs["action"] = "append"
                elif s.kind in (int, float):
                    kwargs["type"] = s.kind
                elif s.choices:
                    kwargs.update(choices=s.choices, type=str.lower)
            target.add_argument(s.flag, **kwargs)
        return target

    def given(self, args: argparse.Namespace) -> dict[str, Any]:
        """The settings whose flags ``args`` gives: name -> value."""
        found = {}
        for s in self.settings:
            value = getattr(args, s.name, None) if s.flag else None
            if value is not None:
                found[s.name] = list(value) if s.kind is list else value
        return found

    def apply_args(self, config: Any, args: argparse.Namespace) -> Any:
        """Lay the flags given in ``args`` over ``config``."""
        for name, value in self.given(args).items():
            setattr(config, name, value)
        return config
