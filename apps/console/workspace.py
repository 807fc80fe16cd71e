"""The workspace file: the routers and panes a developer set up, to reopen.

A workspace is saved as JSON (``*.json``) or TOML (``*.toml``) with the same
structure, so that it can live in a project's repository and be reviewed::

    version = 1

    [[routers]]
    name = "local"
    url = "elvin://127.0.0.1:2917"
    producer_keys = []          # raw keys as typed ("text" or [hex])
    consumer_keys = []
    options = {"Subscription.Max-Count" = 100}

    [[panes]]
    kind = "consumer"           # browse / consumer / producer / quench / router
    title = "Prices"
    router = "local"
    subscription = "require(Price)"
    columns = ["Symbol", "Price"]
    buffer = 10000

    [[panes]]
    kind = "producer"
    router = "local"
    attributes = [{name = "Price", type = "real64", value = "9.5"}]

Reading checks every field and names the one that is wrong
(``panes[2].buffer: expected a whole number >= 10, not "x"``), so a
hand-edited file fails with a message rather than a half-built window.
Attribute values are kept as the text the editor shows, with their type, so
that nothing is lost to JSON/TOML number types.
"""

from __future__ import annotations

import json
import logging
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from elvin_apps.console.keytext import KeySpec, KeyTextError
from elvin_apps.console.typed import TYPES, TypedValueError, check_attribute_name, parse_typed

from elvin import tomlwrite
from elvin.fileutil import atomic_write
from elvin.values import INT32_MAX, INT32_MIN, Int64, Value

log = logging.getLogger("elvin_apps.console")

__all__ = [
    "AttributeSpec", "BrowseSpec", "ConsumerSpec", "PaneBase", "ProducerSpec", "QuenchSpec",
    "RouterSpec",
    "RouterViewSpec", "Workspace", "WorkspaceError", "load", "save", "loads", "dumps",
    "MIN_BUFFER", "MAX_BUFFER", "DEFAULT_BUFFER",
]

VERSION = 1
MIN_BUFFER = 10
MAX_BUFFER = 5_000_000
DEFAULT_BUFFER = 10_000


class WorkspaceError(ValueError):
    """A workspace file that cannot be read; the message names the field."""


@dataclass
class RouterSpec:
    name: str
    url: str
    producer_keys: list[str] = field(default_factory=list)
    consumer_keys: list[str] = field(default_factory=list)
    options: dict[str, Value] = field(default_factory=dict)

    @property
    def keys(self) -> KeySpec:
        return KeySpec(list(self.producer_keys), list(self.consumer_keys))


@dataclass
class AttributeSpec:
    name: str
    type: str
    value: str

    def parsed(self) -> Value:
        return parse_typed(self.type, self.value)


@dataclass
class PaneBase:
    """What every pane's spec has: its title and the router it works with (by
    name, as in ``Workspace.routers``); each kind adds its own settings after
    these. ``kind`` is the kind's name in the file's ``kind = ...``."""

    kind: ClassVar[str]
    title: str = ""
    router: str = ""


@dataclass
class ConsumerSpec(PaneBase):
    kind = "consumer"
    subscription: str = ""
    subscribed: bool = False
    columns: list[str] = field(default_factory=list)
    buffer: int = DEFAULT_BUFFER
    accept_insecure: bool = True
    producer_keys: list[str] = field(default_factory=list)
    consumer_keys: list[str] = field(default_factory=list)
    filter: str = ""
    regex: bool = False
    plots: list[str] = field(default_factory=list)    # numeric attributes plotted
    key: str = ""           # the key attribute: per-key tree, diff and plot series
    detail: bool = True     # the detail (and plot) below the table shown


@dataclass
class ProducerSpec(PaneBase):
    kind = "producer"
    attributes: list[AttributeSpec] = field(default_factory=list)
    deliver_insecure: bool = True
    producer_keys: list[str] = field(default_factory=list)
    consumer_keys: list[str] = field(default_factory=list)
    rate: float = 1.0
    history: list[str] = field(default_factory=list)   # sent notifications, ec text
    expanded: bool = False  # the full editor; else the one-line publish bar


@dataclass
class QuenchSpec(PaneBase):
    kind = "quench"
    names: list[str] = field(default_factory=list)
    active: bool = False


@dataclass
class RouterViewSpec(PaneBase):
    kind = "router"
    window: int = 300      # seconds of history shown


@dataclass
class BrowseSpec(PaneBase):
    kind = "browse"


PaneSpec = BrowseSpec | ConsumerSpec | ProducerSpec | QuenchSpec | RouterViewSpec
PANE_CLASSES: dict[str, type[PaneBase]] = {cls.kind: cls for cls in
                                 (BrowseSpec, ConsumerSpec, ProducerSpec, QuenchSpec,
                                  RouterViewSpec)}


@dataclass
class Workspace:
    routers: list[RouterSpec] = field(default_factory=list)
    panes: list[PaneSpec] = field(default_factory=list)

    def router(self, name: str) -> RouterSpec | None:
        return next((r for r in self.routers if r.name == name), None)


# -- writing ----------------------------------------------------------------------

def _plain(value: Any) -> Any:
    if isinstance(value, Int64):
        return int(value)
    if isinstance(value, bytes):
        return value.hex()
    return value


def to_dict(workspace: Workspace) -> dict[str, Any]:
    routers = []
    for router in workspace.routers:
        data = asdict(router)
        data["options"] = {k: _plain(v) for k, v in router.options.items()}
        routers.append(data)
    panes = []
    for pane in workspace.panes:
        data = {"kind": pane.kind, **asdict(pane)}
        panes.append(data)
    return {"version": VERSION, "routers": routers, "panes": panes}


def dumps(workspace: Workspace, fmt: str = "json") -> str:
    data = to_dict(workspace)
    if fmt == "toml":
        return tomlwrite.dumps(data)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def file_format(path: str | Path) -> str:
    return "toml" if Path(path).suffix.lower() == ".toml" else "json"


def save(workspace: Workspace, path: str | Path) -> None:
    text = dumps(workspace, file_format(path))
    try:
        atomic_write(path, text, mode=0o600)   # never a half-written workspace
    except OSError as exc:
        raise WorkspaceError(f"cannot write {path}: {exc.strerror or exc}") from None


# -- reading ----------------------------------------------------------------------

def _get(table: dict, key: str, kinds: tuple[type, ...], default: Any, where: str) -> Any:
    if key not in table:
        return default
    value = table[key]
    if isinstance(value, bool) and bool not in kinds:
        raise WorkspaceError(f"{where}.{key}: expected {_kind_names(kinds)}, not {value!r}")
    if not isinstance(value, kinds):
        raise WorkspaceError(f"{where}.{key}: expected {_kind_names(kinds)}, not {value!r}")
    return value


def _kind_names(kinds: tuple[type, ...]) -> str:
    names = {str: "text", int: "a whole number", float: "a number", bool: "true or false",
             list: "a list", dict: "a table"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def _strings(table: dict, key: str, where: str) -> list[str]:
    value = _get(table, key, (list,), [], where)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise WorkspaceError(f"{where}.{key}[{i}]: expected text, not {item!r}")
    return list(value)


def _saved_key(line: str, where: str) -> str:
    """A key line as saved. Workspaces written before the console followed
    ``ec``'s rule (bare text is refused) kept bare text as a string key: such a
    line is read with that meaning, quoted, and the file is said to be old."""
    text = line.strip()
    if not text or text.startswith(("[", '"', "//")):
        return line
    log.warning("%s: key %r is bare text (an older console's form): read as the string "
                "key \"%s\"; save the workspace to write it the current way", where,
                text[:40], text[:40])
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _keys(table: dict, where: str) -> tuple[list[str], list[str]]:
    producer = [_saved_key(k, where) for k in _strings(table, "producer_keys", where)]
    consumer = [_saved_key(k, where) for k in _strings(table, "consumer_keys", where)]
    try:
        KeySpec(producer, consumer).raw()
    except KeyTextError as exc:
        raise WorkspaceError(f"{where}: {exc}") from None
    return producer, consumer


def _option_value(value: Any, where: str) -> Value:
    if isinstance(value, bool):
        raise WorkspaceError(f"{where}: Elvin options have no true/false; use 1 or 0")
    if isinstance(value, int):
        return value if INT32_MIN <= value <= INT32_MAX else Int64(value)
    if isinstance(value, (float, str)):
        return value
    raise WorkspaceError(f"{where}: expected a number or text, not {value!r}")


def _router(table: Any, where: str) -> RouterSpec:
    if not isinstance(table, dict):
        raise WorkspaceError(f"{where}: expected a table")
    name = _get(table, "name", (str,), "", where).strip()
    if not name:
        raise WorkspaceError(f"{where}.name: every router needs a name")
    url = _get(table, "url", (str,), "", where).strip()
    if not url:
        raise WorkspaceError(f"{where}.url: router {name!r} needs a URL")
    from elvin.protocol import URIError, parse_uri
    from elvin.router_url import split_router_urls
    try:
        for one in split_router_urls(url):     # several apart by spaces: failover
            parse_uri(one)
    except URIError as exc:
        raise WorkspaceError(f"{where}.url: {exc}") from None
    producer, consumer = _keys(table, where)
    options = _get(table, "options", (dict,), {}, where)
    return RouterSpec(name, url, producer, consumer,
                      {str(k): _option_value(v, f"{where}.options.{k}")
                       for k, v in options.items()})


def _attribute(table: Any, where: str) -> AttributeSpec:
    if not isinstance(table, dict):
        raise WorkspaceError(f"{where}: expected a table with name, type and value")
    name = _get(table, "name", (str,), "", where)
    kind = _get(table, "type", (str,), "string", where)
    if kind not in TYPES:
        raise WorkspaceError(f"{where}.type: {kind!r} is not one of {', '.join(TYPES)}")
    value = table.get("value", "")
    if not isinstance(value, str):     # be kind to hand-written files: value = 42
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise WorkspaceError(f"{where}.value: expected text or a number, not {value!r}")
        value = repr(value) if isinstance(value, float) else str(value)
    try:
        check_attribute_name(name)
        parse_typed(kind, value)
    except TypedValueError as exc:
        raise WorkspaceError(f"{where} ({name or 'unnamed'}): {exc}") from None
    return AttributeSpec(name, kind, value)


def _pane(table: Any, where: str) -> PaneSpec:
    if not isinstance(table, dict):
        raise WorkspaceError(f"{where}: expected a table")
    kind = _get(table, "kind", (str,), "", where)
    if kind not in PANE_CLASSES:
        raise WorkspaceError(f"{where}.kind: expected one of {', '.join(PANE_CLASSES)}, "
                             f"not {kind!r}")
    title = _get(table, "title", (str,), "", where)
    router = _get(table, "router", (str,), "", where)
    if kind == "consumer":
        buffer = _get(table, "buffer", (int,), DEFAULT_BUFFER, where)
        if not MIN_BUFFER <= buffer <= MAX_BUFFER:
            raise WorkspaceError(f"{where}.buffer: expected a whole number from {MIN_BUFFER} "
                                 f"to {MAX_BUFFER}, not {buffer}")
        producer, consumer = _keys(table, where)
        subscription = _get(table, "subscription", (str,), "", where)
        return ConsumerSpec(title, router, subscription,
                            _get(table, "subscribed", (bool,), False, where),
                            _strings(table, "columns", where), buffer,
                            _get(table, "accept_insecure", (bool,), True, where),
                            producer, consumer, _get(table, "filter", (str,), "", where),
                            _get(table, "regex", (bool,), False, where),
                            _strings(table, "plots", where),
                            _get(table, "key", (str,), "", where),
                            _get(table, "detail", (bool,), True, where))
    if kind == "producer":
        attributes = [_attribute(item, f"{where}.attributes[{i}]")
                      for i, item in enumerate(_get(table, "attributes", (list,), [], where))]
        producer, consumer = _keys(table, where)
        rate = float(_get(table, "rate", (int, float), 1.0, where))
        if not 0 < rate <= 100_000:
            raise WorkspaceError(f"{where}.rate: expected a rate above 0 and at most "
                                 f"100000 per second, not {rate}")
        return ProducerSpec(title, router, attributes,
                            _get(table, "deliver_insecure", (bool,), True, where),
                            producer, consumer, rate, _strings(table, "history", where),
                            _get(table, "expanded", (bool,), False, where))
    if kind == "browse":
        return BrowseSpec(title, router)
    if kind == "quench":
        return QuenchSpec(title, router, _strings(table, "names", where),
                          _get(table, "active", (bool,), False, where))
    window = _get(table, "window", (int,), 300, where)
    if not 10 <= window <= 86_400:
        raise WorkspaceError(f"{where}.window: expected seconds from 10 to 86400, "
                             f"not {window}")
    return RouterViewSpec(title, router, window)


def from_dict(data: Any, source: str = "workspace") -> Workspace:
    if not isinstance(data, dict):
        raise WorkspaceError(f"{source}: expected a table at the top level")
    version = data.get("version", VERSION)
    if version != VERSION:
        raise WorkspaceError(f"{source}: version {version!r} is not supported "
                             f"(this console reads version {VERSION})")
    routers = [_router(item, f"{source}: routers[{i}]")
               for i, item in enumerate(_get(data, "routers", (list,), [], source))]
    names = [r.name for r in routers]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise WorkspaceError(f"{source}: two routers are named {duplicate!r}")
    panes = [_pane(item, f"{source}: panes[{i}]")
             for i, item in enumerate(_get(data, "panes", (list,), [], source))]
    return Workspace(routers, panes)


def loads(text: str, fmt: str = "json", source: str = "workspace") -> Workspace:
    try:
        data = tomllib.loads(text) if fmt == "toml" else json.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WorkspaceError(f"{source}: not valid TOML: {exc}") from None
    except json.JSONDecodeError as exc:
        raise WorkspaceError(f"{source}: not valid JSON: line {exc.lineno}, column "
                             f"{exc.colno}: {exc.msg}") from None
    return from_dict(data, source)


def load(path: str | Path) -> Workspace:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkspaceError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise WorkspaceError(f"{path}: not UTF-8 text ({exc})") from None
    return loads(text, file_format(path), str(path))
