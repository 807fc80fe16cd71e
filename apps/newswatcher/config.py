"""The TOML configuration: which feeds, how often, how politely.

One file per tool (docs/architecture.md): ``$XDG_CONFIG_HOME/elvin/newswatcher.toml`` by
default, ``--config FILE`` otherwise; flags (``--elvin``, ``--feed``,
``--scoop``, ``--data-dir``) and ``ELVIN_URL`` override it, and no file at all
is fine (then only ``--feed`` gives feeds). Everything is validated when the
file is read, and every error names the file and the key (``feeds #2, interval``)
so that a typo is found without reading code. The daemon re-reads the file on
SIGHUP; a bad file then keeps the old configuration running.

The daemon itself must not need Qt, so platform directories come from the XDG
variables rather than ``QStandardPaths``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from elvin_apps.newswatcher import USER_AGENT

from elvin.config_file import (
    APP_DIR,
    ROUTERS_HELP,
    SCOPE_HELP,
    ConfigError,
    NumberRange,
    check_number,
    check_routers,
    check_scope_setting,
    collecting_problems,
    default_config_path,
    list_item,
    read_toml,
)
from elvin.settings import SettingsTable, Wording, setting

CONFIG_NAME = "newswatcher.toml"
DEFAULT_GROUP = "news"
MAX_NAME = 64
MIN_INTERVAL = 0.1          # seconds; politeness per host still applies
MAX_TIMEOUT_ATTR = 7 * 86400


@dataclass(frozen=True)
class FeedConfig:
    """One feed. ``name`` is what subscribers see in ``News-Feed`` and must
    be unique; ``sender`` is the tickertape ``From`` (fixed per feed, so the
    quench can rule feeds in or out before fetching them)."""

    name: str
    url: str
    interval: float = 900.0
    groups: tuple[str, ...] = (DEFAULT_GROUP,)
    sender: str = ""                 # the tickertape From (``from`` in the file); "": the name
    timeout: int = 600               # the tickertape Timeout attribute (seconds)
    initial_items: int | None = None  # publish at most this many on a first poll

    @property
    def from_(self) -> str:
        return self.sender or self.name


@dataclass(frozen=True)
class HttpSettings:
    """Fetching limits. The politeness pair (``min_host_interval`` between
    request starts to one host, ``max_per_host`` in flight to it) protects
    sites that host many feeds; ``max_concurrent`` bounds the whole daemon.
    Each declared once (``elvin.settings``): ``[http]``'s checks and its
    reference come from here."""

    timeout: float = setting(20.0, low=0.05, high=600,
                             help="seconds for a whole request, connect to last byte")
    max_bytes: int = setting(5 * 1024 * 1024, low=1024, high=1 << 30,
                             help="response size cap (also after gzip inflation)")
    user_agent: str = setting(USER_AGENT, help="the User-Agent header of every request")
    min_host_interval: float = setting(1.0, low=0, high=3600,
                                       help="seconds between request starts to one host")
    max_per_host: int = setting(2, low=1, high=100, help="requests in flight to one host")
    max_concurrent: int = setting(10, low=1, high=1000, help="requests in flight in all")
    backoff_initial: float = setting(60.0, low=0.05, high=86400,
                                     help="after an error: max(interval, this) x "
                                          "2^(errors-1) seconds ...")
    backoff_max: float = setting(3600.0, low=0.05, high=7 * 86400,
                                 help="... capped here (or at the interval if longer), "
                                      "+-10 % jitter")
    max_redirects: int = setting(5, low=0, high=20, help="HTTP redirects followed per request")


#: how the newswatcher says a wrong key: ``http.timeout: 0 is out of range (...)``
_WORDING = Wording(colon=True, unknown="unknown key", between=False)
#: the ``[http]`` table's settings, as HttpSettings declares them
HTTP = SettingsTable(HttpSettings, wording=dataclasses.replace(_WORDING, prefix="http."))


@dataclass
class Config:
    elvin: str | list[str] | None = setting(None, by_hand=True, help=ROUTERS_HELP)
    scope: str = setting("", by_hand=True, help=SCOPE_HELP)
    data_dir: Path | None = setting(None, by_hand=True,
                                    shown_default="$XDG_STATE_HOME/elvin/newswatcher",
                                    help="where state.json and status.json live (relative: "
                                         "to the config file's directory)")
    scoop: bool = setting(False, help="poll and publish every feed whatever the subscriptions "
                                        "(volume testing)")
    #: the feeds to watch (``[[feeds]]`` entries)
    feeds: list[FeedConfig] = setting(default_factory=list, by_hand=True,
                                      help="the feeds to watch (``[[feeds]]``, below)")
    #: fetching limits (the ``[http]`` table)
    http: HttpSettings = setting(default_factory=HttpSettings, by_hand=True,
                                 help="fetching limits (``[http]``, below)")
    #: what a feed that does not say takes (the ``[defaults]`` table)
    defaults: FeedConfig = setting(default_factory=lambda: FeedConfig("", ""), by_hand=True,
                                   help="what a feed that does not say takes "
                                        "(``[defaults]``: the keys of ``[[feeds]]`` but "
                                        "name and url)")
    path: Path | None = None

    def feed(self, name: str) -> FeedConfig | None:
        return next((f for f in self.feeds if f.name == name), None)


# ---------------------------------------------------------------------------
# platform paths

def _xdg(var: str, fallback: str) -> Path:
    base = os.environ.get(var)
    return Path(base) if base else Path.home() / fallback


def default_data_dir() -> Path:
    """``$XDG_STATE_HOME/elvin/newswatcher``: the dedup state and the status
    file are state in the XDG sense (kept across restarts, not user data)."""
    return _xdg("XDG_STATE_HOME", ".local/state") / APP_DIR / "newswatcher"


# ---------------------------------------------------------------------------
# reading

def load(path: str | os.PathLike | None = None, *, must_exist: bool = False) -> Config:
    """Read the config file (the default one when ``path`` is None).

    A missing default file gives the defaults; a missing file named on the
    command line (``must_exist``) is an error.
    """
    toml = read_toml(path if path is not None else default_config_path(CONFIG_NAME),
                     must_exist=must_exist)
    if toml is None:
        return Config()
    config = from_mapping(toml.data, where=str(toml.path), base_dir=toml.path.parent)
    config.path = toml.path
    return config


#: the newswatcher's top-level settings, as Config declares them
SETTINGS = SettingsTable(Config, wording=_WORDING)
_TOP = set(SETTINGS.keys)
_FEED_KEYS = {"name", "url", "interval", "groups", "from", "timeout", "initial_items"}
_DEFAULT_KEYS = {"interval", "groups", "from", "timeout", "initial_items"}


def from_mapping(data: Mapping[str, Any], *, where: str = "config",
                 base_dir: Path | None = None) -> Config:
    """Validate parsed TOML. ``base_dir`` anchors relative file paths (the
    config file's directory), so a config works from any working directory.
    Every problem is found (a ``ConfigError`` saying the first, holding them
    all in ``problems``: ``newswatcher check`` says each)."""
    found: list[str] = []
    with collecting_problems(found):
        _unknown(data, _TOP, where, "")
    config = Config()
    if "elvin" in data:
        with collecting_problems(found):
            config.elvin = check_routers(data["elvin"], f"{where}: elvin")
            from elvin.router_url import RouterURLError, check_router_url, split_router_urls
            try:
                for url in split_router_urls(config.elvin):
                    check_router_url(url)
            except RouterURLError as exc:
                raise ConfigError(f"{where}: elvin: {exc}") from None
    if "scope" in data:
        with collecting_problems(found):
            config.scope = check_scope_setting(data["scope"], f"{where}: scope")
    if "data_dir" in data:
        with collecting_problems(found):
            raw = _string(data, "data_dir", where, "")
            path = Path(raw).expanduser()
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path
            config.data_dir = path
    if "scoop" in data:
        with collecting_problems(found):
            SETTINGS.apply(config, "scoop", data["scoop"], where)
    with collecting_problems(found):
        config.http = _http(_table(data, "http", where), where)
    with collecting_problems(found):
        defaults = _table(data, "defaults", where)
        _unknown(defaults, _DEFAULT_KEYS, where, "defaults.")
        config.defaults = _feed_fields(FeedConfig("", ""), defaults, where, "defaults.")
    raw_feeds = data.get("feeds", [])
    if not isinstance(raw_feeds, list) or not all(isinstance(f, dict) for f in raw_feeds):
        found.append(f"{where}: feeds: must be [[feeds]] tables")
        raw_feeds = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_feeds):
        with collecting_problems(found):
            feed = parse_feed(raw, config.defaults, where=where,
                              prefix=f"{list_item('feeds', index)}, ", base_dir=base_dir)
            if feed.name in seen:
                raise ConfigError(f"{where}: {list_item('feeds', index, 'name')}: "
                                  f"{feed.name!r} is used by another feed (names must be "
                                  "unique)")
            seen.add(feed.name)
            config.feeds.append(feed)
    if found:
        raise ConfigError.of(found)
    return config


def parse_feed(raw: Mapping[str, Any], defaults: FeedConfig, *, where: str = "config",
               prefix: str = "feeds #1, ", base_dir: Path | None = None) -> FeedConfig:
    """One ``[[feeds]]`` table, with ``defaults`` for what it leaves out."""
    _unknown(raw, _FEED_KEYS, where, prefix)
    for key in ("name", "url"):
        if key not in raw:
            raise ConfigError(f"{where}: {prefix}{key}: missing (every feed needs a "
                              f"name and a url)")
    name = check_name(_string(raw, "name", where, prefix), f"{where}: {prefix}name")
    url = normalise_url(_string(raw, "url", where, prefix), f"{where}: {prefix}url", base_dir)
    feed = _feed_fields(replace(defaults, name=name, url=url), raw, where, prefix)
    return feed


def _feed_fields(feed: FeedConfig, raw: Mapping[str, Any], where: str,
                 prefix: str) -> FeedConfig:
    changes: dict[str, Any] = {}
    if "interval" in raw:
        changes["interval"] = _number(raw, "interval", where, prefix, MIN_INTERVAL, 30 * 86400)
    if "groups" in raw:
        groups = raw["groups"]
        if isinstance(groups, str):
            groups = [groups]
        if (not isinstance(groups, list) or not groups
                or not all(isinstance(g, str) and g.strip() for g in groups)):
            raise ConfigError(f"{where}: {prefix}groups: must be a non-empty list of "
                              f"group names, e.g. [\"news\"]")
        changes["groups"] = tuple(dict.fromkeys(g.strip() for g in groups))
    if "from" in raw:
        changes["sender"] = _string(raw, "from", where, prefix)
    if "timeout" in raw:
        changes["timeout"] = int(_number(raw, "timeout", where, prefix, -1, MAX_TIMEOUT_ATTR,
                                         integer=True))
    if "initial_items" in raw:
        changes["initial_items"] = int(_number(raw, "initial_items", where, prefix, 0,
                                               1_000_000, integer=True))
    return replace(feed, **changes) if changes else feed


def _http(raw: Mapping[str, Any], where: str) -> HttpSettings:
    settings: HttpSettings = HTTP.load(HttpSettings(), dict(raw), lambda key: where)
    if settings.backoff_max < settings.backoff_initial:
        raise ConfigError(f"{where}: http.backoff_max ({settings.backoff_max}) is less than "
                          f"http.backoff_initial ({settings.backoff_initial})")
    return settings


# ---------------------------------------------------------------------------
# feeds from the command line

def feed_from_url(url: str, defaults: FeedConfig, taken: Iterable[str] = ()) -> FeedConfig:
    """A feed for ``--feed URL``: named after the host (or file name), made
    unique against ``taken`` with a numeric suffix."""
    url = normalise_url(url, f"--feed {url}", Path.cwd())
    parts = urlsplit(url)
    if parts.scheme == "file":
        base = Path(unquote(parts.path)).stem or "feed"
    else:
        base = (parts.hostname or "feed").removeprefix("www.")
    base = re.sub(r"[^\w.\-]+", "-", base)[:MAX_NAME - 4] or "feed"
    taken = set(taken)
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return replace(defaults, name=name, url=url)


# ---------------------------------------------------------------------------
# value checks

def check_name(name: str, where: str) -> str:
    """Feed names end up in subscriptions (``News-Feed == "lwn"``): keep them
    short and printable."""
    name = name.strip()
    if not name:
        raise ConfigError(f"{where}: empty")
    if len(name) > MAX_NAME:
        raise ConfigError(f"{where}: longer than {MAX_NAME} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ConfigError(f"{where}: contains control characters")
    return name


def normalise_url(text: str, where: str, base_dir: Path | None = None) -> str:
    """An http(s) URL as given, or a local path / file:// URL as an absolute
    file:// URL (relative paths are taken from ``base_dir``)."""
    text = text.strip()
    if not text:
        raise ConfigError(f"{where}: empty")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        if not parts.hostname:
            raise ConfigError(f"{where}: {text!r} has no host")
        try:
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            raise ConfigError(f"{where}: {text!r} has a bad port") from None
        return text
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(f"{where}: {text!r}: only local file:// URLs are supported")
        path = Path(unquote(parts.path))
    elif scheme and len(scheme) > 1:
        raise ConfigError(f"{where}: {text!r}: unsupported scheme {scheme!r} "
                          f"(use http, https, file or a local path)")
    else:
        path = Path(text).expanduser()
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
    return path.resolve().as_uri()


def _where(where: str, prefix: str, key: str) -> str:
    return f"{where}: {prefix}{key}"


def _unknown(raw: Mapping[str, Any], allowed: set[str], where: str, prefix: str) -> None:
    extra = sorted(set(raw) - allowed)
    if extra:
        raise ConfigError(f"{where}: {prefix}{extra[0]}: unknown key (known: "
                          f"{', '.join(sorted(allowed))})")


def _table(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key}: must be a table ([{key}])")
    return value


def _string(raw: Mapping[str, Any], key: str, where: str, prefix: str) -> str:
    value = raw[key]
    if not isinstance(value, str):
        raise ConfigError(f"{_where(where, prefix, key)}: must be a string, not "
                          f"{type(value).__name__} {value!r}")
    return value


def _number(raw: Mapping[str, Any], key: str, where: str, prefix: str, low: float,
            high: float, *, integer: bool = False) -> float:
    return check_number(raw[key], _where(where, prefix, key),
                        NumberRange(low, high, integer=integer))
