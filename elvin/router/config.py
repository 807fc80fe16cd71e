"""Router configuration: defaults, the TOML file, and validation.

A TOML file (``elvind --config FILE``) uses the command-line flag names as
keys (``log-level`` or ``log_level``, both spellings work)::

    listen = ["elvin://0.0.0.0:2917", "elvin:4.0/ssl,none,xdr/0.0.0.0:2918"]
    log-level = "info"            # debug, info, warning, error
    log-file = "/var/log/elvind.log"
    tls-cert = "/etc/elvind/cert.pem"
    tls-key = "/etc/elvind/key.pem"
    stats-interval = 5            # seconds between Elvin-Router-Stats notifications
    connect-timeout = 10          # seconds a new channel has to send ConnRqst/UNotify
    max-protocol-errors = 16      # then Disconn (reason 4) and close
    max-subscriptions = 1000000   # router-wide (IMPL_LIMIT beyond)
    mobility = true               # run a mobility proxy in the router (elvin.mobility)
    mobility-quota = 10000        # notifications buffered per moved-out client
    mobility-expiry = 3600        # seconds an unclaimed buffer is kept
    mobility-key-file = "/etc/elvind/mobility.key"  # proxy's raw private key (pinnable)
    state-dir = "/var/lib/elvind"  # what must outlive the router (mobility buffers)
    archive = "/var/lib/elvind/archive"  # traffic archive (Parquet), off by default
    archive-private = false       # also archive the attributes of notifications sent
                                  # for key holders only (deliver_insecure false)
    discovery = true              # answer router discovery (SvrRqst) on UDP
    discovery-scope = ""          # scope name advertised (no ':')
    discovery-default = true      # advertise as a default router (clients with no scope)
    discovery-address = "224.4.0.1"  # ERDP multicast group, or a unicast address
    discovery-port = 2917
    discovery-interface = ""      # local IPv4 address to multicast on ("" = system's)
    max-connections = 0           # 0 = no limit; beyond it, redirect-to or refuse
    redirect-to = "elvin://other:2917"  # where clients beyond max-connections go
    quench = false                # emulate a router without quench (subset C), as Avis
    status-file = "/run/elvind/status-2917.json"  # what `elvind status` reads (default:
                                  # status-PORT.json, PORT the first listen port)
    metrics = "127.0.0.1:9917"    # Prometheus text format at http://HOST:PORT/metrics
    include = ["/etc/elvin/elvind.d/*.toml"]  # more files (glob patterns), read in order
    attribute-names = false       # do not publish the names seen (Elvin-Router-Attributes)

    # what outsiders may hold (elvin.router.door); 0 = no limit where a count
    max-connections-per-address = 1024  # sockets from one IP address, in any state
    max-pre-session = 4096        # sockets that have not sent ConnRqst/UNotify yet, in all
    max-pre-session-per-address = 256   # ... and from one IP address
    pre-session-max-length = 16384  # bytes of a frame before ConnRqst (UNotify: the
                                  # Packet.Max-Length default)
    frame-timeout = 10            # seconds of grace for a frame to arrive whole, plus
    frame-min-rate = 65536        # bytes/s of its announced size: slower is closed
    max-partial-bytes = 67108864  # bytes in unfinished frames, router-wide; past it the
                                  # largest holders are closed first
    descriptor-reserve = 64       # open files kept for the router's own (log, status,
                                  # state, archive, federation): sockets past it refused
    max-keys-per-connection = 256 # connection keys (ConnRqst, SecRqst), notification and
    max-key-bytes-per-connection = 65536  # subscription keys together: count, bytes
    max-keys-per-subscription = 64        # a subscription's (or quench's) own keys
    max-key-bytes-per-subscription = 16384

    [options]                     # connection options (spec 7.5): the default value,
    "Packet.Max-Length" = 1048576 # or a table with min/default/max
    "Subscription.Max-Count" = { min = 16, default = 1024, max = 4096 }
    "Send-Queue.Drop-Policy" = "oldest"

A ``[federation]`` table configures router federation (``elvin-domain apply``
writes it; see ``elvin.federation.config``).

``include`` names more files (glob patterns, relative to the including
file's directory; ``*.toml`` in a ``conf.d`` folder, say), read after the
including file in sorted order, each over what came before: that is how the
fragments ``elvin-domain apply`` writes are installed without merging them
by hand. A pattern that matches nothing is not an error (an empty
``conf.d``); a file named without wildcards must exist.

``RELOADABLE`` lists what SIGHUP applies to a running router
(``elvin.router.reload``); the rest needs a restart, which the reload says.

Command-line flags override the file. Every error is a ``ConfigError`` whose
message names the file (and the line, when it can be found) and the key.
"""

from __future__ import annotations

import copy
import dataclasses
import glob
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elvin.cli_common import LOG_LEVELS
from elvin.config_file import ConfigError, collecting_problems, line_of, list_item, read_toml
from elvin.federation.config import (
    FederationConfig,
    FederationConfigError,
    federation_from_dict,
    federation_line,
    parse_ewaf_uri,
)
from elvin.fileutil import file_problem
from elvin.protocol import ElvinURI, URIError, parse_uri
from elvin.router.options import DROP_POLICIES, INT_OPTIONS, OPTION_BOUNDS, OptionRanges

__all__ = ["DEFAULT_LISTEN", "LOG_LEVELS", "RELOADABLE", "ConfigError", "RouterConfig",
           "config_from_dict", "load_config", "parse_listen_uri"]

DEFAULT_LISTEN = "elvin://127.0.0.1:2917"


def parse_listen_uri(text: str) -> ElvinURI:
    """``parse_uri`` that also accepts port 0 (any free port) for listening."""
    try:
        return parse_uri(text)
    except URIError as exc:
        if exc.part != "port":
            raise
        head, sep, tail = text.rpartition(":0")
        if not sep or (tail and not tail.startswith(";")):
            raise
        return dataclasses.replace(parse_uri(f"{head}:1{tail}"), port=0)


@dataclass
class RouterConfig:
    listen: list[str] = field(default_factory=lambda: [DEFAULT_LISTEN])
    log_level: str = "info"
    log_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    stats_interval: float = 5.0
    connect_timeout: float = 10.0
    #: seconds a closing connection (or the router, at shutdown) waits for a
    #: client that stops reading to take its last packets, before it is cut off
    close_timeout: float = 5.0
    max_protocol_errors: int = 16
    max_subscriptions: int = 1_000_000
    #: the connection options clients may negotiate (``[options]``: a default,
    #: or a table ``{ min, default, max }``)
    options: OptionRanges = field(default_factory=OptionRanges)
    use_uvloop: bool = True
    #: directory of the traffic archive (elvin.pipeline.archive), None = off
    archive: str | None = None
    #: archive the attributes of notifications sent for key holders only too
    #: (by default their rows have none: elvin.pipeline.archive)
    archive_private: bool = False
    #: router discovery (elvin.discovery): answer SvrRqst, advertise listen URLs
    discovery: bool = True
    discovery_scope: str = ""
    discovery_default: bool = True
    discovery_address: str = "224.4.0.1"
    discovery_port: int = 2917
    discovery_interface: str = ""
    #: connections beyond this (0 = unlimited) are redirected to ``redirect_to``
    #: (Disconn reason 2 in answer to ConnRqst) or, without it, refused (Nack)
    max_connections: int = 0
    redirect_to: str | None = None
    #: run a mobility proxy (elvin.mobility) inside the router, as a client
    #: of it over loopback; quota = most notifications buffered per client,
    #: expiry = seconds an unclaimed buffer is kept; key file = the proxy's
    #: raw private key (the file's bytes, as ``elvin-mobility-proxy
    #: --key-file``), so that clients can pin its public key (default: random)
    mobility: bool = False
    mobility_quota: int = 10_000
    mobility_expiry: float = 3600.0
    mobility_key_file: str | None = None
    #: where the router keeps what must outlive it (elvin.statedir): the
    #: mobility proxy's tickets, subscriptions and buffers; None = in memory
    state_dir: str | None = None
    #: move the state found in ``state_dir`` aside at start (never deleted)
    state_reset: bool = False
    #: router federation (elvin.federation.config), None = off
    federation: FederationConfig | None = None
    #: quench (protocol subset C). False emulates routers without it (Avis):
    #: QnchAddRqst/QnchModRqst/QnchDelRqst are answered with Nack NOT_IMPL
    #: (2007) "Quench not supported", so that clients' fallbacks can be tested
    quench: bool = True
    #: where ``elvind status`` finds the router (None: elvin.router.status's default)
    status_file: str | None = None
    #: ``HOST:PORT`` of the Prometheus metrics endpoint (elvin.router.metrics), None = off
    metrics: str | None = None
    #: the files this configuration was read from, in order (main file first)
    sources: list[str] = field(default_factory=list)
    #: publish the attribute names seen recently (elvin.router.census), for
    #: browsers, while someone subscribes to Elvin-Router-Attributes
    attribute_names: bool = True
    #: what outsiders may hold (elvin.router.door, elvin.router.session_core);
    #: a count of 0 is no limit
    max_connections_per_address: int = 1024
    max_pre_session: int = 4096
    #: room for a burst of clients reconnecting at once from behind one NAT
    #: address (200 concurrent connects from one address are ordinary)
    max_pre_session_per_address: int = 256
    pre_session_max_length: int = 16 * 1024
    frame_timeout: float = 10.0
    frame_min_rate: int = 64 * 1024
    max_partial_bytes: int = 64 * 1024 * 1024
    descriptor_reserve: int = 64
    max_keys_per_connection: int = 256
    max_key_bytes_per_connection: int = 64 * 1024
    max_keys_per_subscription: int = 64
    max_key_bytes_per_subscription: int = 16 * 1024

    def validate(self, source: str = "configuration", text: str = "") -> RouterConfig:
        """Check every value; the first problem as a ``ConfigError`` naming
        ``source`` (and the line of the key in ``text``, the file's content,
        when it can be found)."""
        found = self.problems(source, text)
        if found:
            raise ConfigError(found[0])
        return self

    def problems(self, source: str = "configuration", text: str = "") -> list[str]:
        """Every problem, for ``--check-config`` (each of a section's where it
        checks its items one by one: listen URIs, TLS files, [options])."""
        found = []
        for check in (self._check_listen, self._check_logging, self._check_tls_files,
                      self._check_numbers, self._check_discovery, self._check_federation,
                      self._check_mobility, self._check_state, self._check_archive,
                      self._check_metrics):
            if check == self._check_numbers:
                found.extend(_every_number_problem(self, source, text))
                continue
            with collecting_problems(found):
                check(source, text)
        return found

    def _check_listen(self, source: str, text: str) -> None:
        where = f"{source}{line_of(text, 'listen')}"
        if not self.listen:
            raise ConfigError(f"{where}: no listen URI")
        found: list[str] = []     # every bad URI, not only the first
        for i, uri in enumerate(self.listen):
            item = list_item("listen", i) if len(self.listen) > 1 else "listen"
            try:
                parsed = parse_listen_uri(uri)
            except URIError as exc:
                found.append(f"{where}: {item}: bad listen URI: {exc}")
                continue
            if parsed.secure and not (self.tls_cert and self.tls_key):
                found.append(f"{where}: {item} {uri!r} uses TLS (ssl): give --tls-cert "
                             "and --tls-key")
        if found:
            raise ConfigError.of(found)

    def _check_logging(self, source: str, text: str) -> None:
        if self.log_level.lower() not in LOG_LEVELS:
            raise ConfigError(f"{source}{line_of(text, 'log-level')}: log-level "
                              f"{self.log_level!r} is not one of {', '.join(LOG_LEVELS)}")

    def _check_tls_files(self, source: str, text: str) -> None:
        found: list[str] = []     # the key's problem as well as the certificate's
        for name in ("tls_cert", "tls_key"):
            path = getattr(self, name)
            if path is not None:
                with collecting_problems(found):
                    _check_readable_file(path, f"{source}{line_of(text, name)}: "
                                               f"{name.replace('_', '-')} {path!r}")
        if found:
            raise ConfigError.of(found)

    def _check_numbers(self, source: str, text: str) -> None:
        for name in ("stats_interval", "connect_timeout", "close_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{source}{line_of(text, name)}: "
                                  f"{name.replace('_', '-')} must be positive")
        for name in ("max_protocol_errors", "max_subscriptions"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{source}{line_of(text, name)}: "
                                  f"{name.replace('_', '-')} must be at least 1")
        for name in DOOR_LIMITS:
            key = name.replace("_", "-")
            if getattr(self, name) < 0:
                raise ConfigError(f"{source}{line_of(text, key)}: {key} must be 0 (no "
                                  "limit) or more")
        for name in ("frame_timeout", "pre_session_max_length"):
            if getattr(self, name) <= 0:
                key = name.replace("_", "-")
                raise ConfigError(f"{source}{line_of(text, key)}: {key} must be positive")

    def _check_discovery(self, source: str, _text: str) -> None:
        _validate_discovery(self, source)

    def _check_federation(self, source: str, text: str) -> None:
        if self.federation is None:
            return
        found = [f"{source}{federation_line(text, exc.key)}: {exc}"
                 for exc in federation_problems(self.federation)]
        if found:
            raise ConfigError.of(found)
        for i, uri in enumerate(self.federation.listen):
            if parse_ewaf_uri(uri).secure and not (self.tls_cert and self.tls_key):
                raise ConfigError(f"{source}: {list_item('federation.listen', i)} {uri!r} "
                                  "uses TLS (ssl): give the router's --tls-cert and --tls-key")

    def _check_mobility(self, source: str, text: str) -> None:
        if self.mobility_quota < 1 or self.mobility_expiry <= 0:
            raise ConfigError(f"{source}: mobility-quota must be at least 1 and "
                              "mobility-expiry positive")
        if self.mobility_key_file is not None:
            from elvin.mobility.proxy import load_key_file
            try:
                load_key_file(self.mobility_key_file)
            except ValueError as exc:
                raise ConfigError(f"{source}{line_of(text, 'mobility-key-file')}: "
                                  f"mobility-key-file: {exc}") from None

    def _check_archive(self, source: str, text: str) -> None:
        # the cheap checks (exit 1 before listening); Router.start opens the
        # archive and reports what only writing can tell
        if self.archive is None:
            if self.archive_private:
                raise ConfigError(f"{source}{line_of(text, 'archive-private')}: "
                                  "archive-private is set but there is no archive "
                                  "(set archive, or --archive DIR)")
            return
        where = f"{source}{line_of(text, 'archive')}"
        if not self.archive.strip():
            raise ConfigError(f"{where}: archive: empty directory name")
        try:
            is_file = Path(self.archive).exists() and not Path(self.archive).is_dir()
        except OSError:          # inside a directory we may not enter:
            is_file = False      # Router.start says so when it tries to create it
        if is_file:
            raise ConfigError(f"{where}: archive {self.archive!r} is not a directory")

    def _check_metrics(self, source: str, text: str) -> None:
        if self.metrics is not None:
            from elvin.router.metrics import parse_metrics_address
            try:
                parse_metrics_address(self.metrics)
            except ValueError as exc:
                raise ConfigError(f"{source}{line_of(text, 'metrics')}: {exc}") from None

    def _check_state(self, source: str, text: str) -> None:
        if self.state_reset and self.state_dir is None:
            raise ConfigError("--state-reset needs a state-dir (the state to move aside)")
        if self.state_dir is None:
            return
        where = f"{source}{line_of(text, 'state-dir')}"
        if not self.state_dir.strip():
            raise ConfigError(f"{where}: state-dir: empty directory name")
        try:
            state = Path(self.state_dir).expanduser()
            is_file = state.exists() and not state.is_dir()
        except OSError:          # inside a directory we may not enter: said at start
            is_file = False
        if is_file:
            raise ConfigError(f"{where}: state-dir {self.state_dir!r} is not a directory")


_SCALARS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "log-level": (str, "log_level"),
    "log-file": (str, "log_file"),
    "tls-cert": (str, "tls_cert"),
    "tls-key": (str, "tls_key"),
    "stats-interval": ((int, float), "stats_interval"),
    "connect-timeout": ((int, float), "connect_timeout"),
    "close-timeout": ((int, float), "close_timeout"),
    "max-protocol-errors": (int, "max_protocol_errors"),
    "max-subscriptions": (int, "max_subscriptions"),
    "archive": (str, "archive"),
    "discovery-scope": (str, "discovery_scope"),
    "discovery-address": (str, "discovery_address"),
    "discovery-port": (int, "discovery_port"),
    "discovery-interface": (str, "discovery_interface"),
    "max-connections": (int, "max_connections"),
    "redirect-to": (str, "redirect_to"),
    "mobility-quota": (int, "mobility_quota"),
    "mobility-expiry": ((int, float), "mobility_expiry"),
    "mobility-key-file": (str, "mobility_key_file"),
    "status-file": (str, "status_file"),
    "metrics": (str, "metrics"),
    "state-dir": (str, "state_dir"),
    "pre-session-max-length": (int, "pre_session_max_length"),
    "frame-timeout": ((int, float), "frame_timeout"),
}
#: the counts and sizes of elvin.router.door and the key limits (0 = no limit)
DOOR_LIMITS = ("max_connections_per_address", "max_pre_session",
               "max_pre_session_per_address", "frame_min_rate", "max_partial_bytes",
               "descriptor_reserve", "max_keys_per_connection",
               "max_key_bytes_per_connection", "max_keys_per_subscription",
               "max_key_bytes_per_subscription")
for _name in DOOR_LIMITS:
    _SCALARS[_name.replace("_", "-")] = (int, _name)
_FLAGS = {"discovery": "discovery", "discovery-default": "discovery_default",
          "mobility": "mobility", "quench": "quench",
          "archive-private": "archive_private", "attribute-names": "attribute_names"}


def _every_number_problem(config: RouterConfig, source: str, text: str) -> list[str]:
    """Every problem ``_check_numbers`` finds, not only the first: the
    setting each names (``NAME must be ...``) is put back to its default on
    a copy and the copy checked again, until it passes."""
    found: list[str] = []
    trial = dataclasses.replace(config)
    defaults = {f.name.replace("_", "-"): f for f in dataclasses.fields(RouterConfig)}
    for _ in range(MAX_FEDERATION_PROBLEMS):
        try:
            trial._check_numbers(source, text)
            break
        except ConfigError as exc:
            said = str(exc)
            if said in found:
                break
            found.append(said)
            named = [f for key, f in defaults.items() if f": {key} must " in said]
            if not named or named[0].default is dataclasses.MISSING:
                break
            setattr(trial, named[0].name, named[0].default)
    return found


#: how many problems of [federation] are looked for (each costs a validation)
MAX_FEDERATION_PROBLEMS = 50


def federation_problems(federation: FederationConfig) -> list[FederationConfigError]:
    """Every problem ``FederationConfig.validate`` finds, not only the
    first: each found is set aside on a copy (the setting back to its
    default, the list entry dropped) and the copy validated again, until it
    passes or a problem cannot be set aside. ``federation`` is unchanged."""
    found: list[FederationConfigError] = []
    trial = copy.deepcopy(federation)
    for _ in range(MAX_FEDERATION_PROBLEMS):
        try:
            trial.validate()
            break
        except FederationConfigError as exc:
            if any(str(exc) == str(seen) for seen in found):
                break                    # setting it aside did not help: stop here
            found.append(exc)
            if not _set_aside(trial, exc.key):
                break
    return found


def federation_table_problems(table: Any, base: FederationConfig | None
                              ) -> list[FederationConfigError]:
    """Every problem of a ``[federation]`` table (``federation_from_dict``),
    found as ``federation_problems`` finds them: each key at fault is left
    out of a copy of the table (a connect or accept entry dropped) and the
    copy read again."""
    found: list[FederationConfigError] = []
    trial = copy.deepcopy(table)
    #: per array of tables, the original position of each entry still in the trial
    kept: dict[str, list[int]] = {}
    if isinstance(trial, dict):
        kept = {name: list(range(len(v))) for name, v in trial.items() if isinstance(v, list)}
    for _ in range(MAX_FEDERATION_PROBLEMS):
        try:
            federation_from_dict(trial, base)
            break
        except FederationConfigError as exc:
            exc = _in_the_file(exc, kept)
            if any(str(exc) == str(seen) for seen in found):
                break
            found.append(exc)
            if not isinstance(trial, dict) or not _leave_out(trial, exc.key, kept):
                break
    return found


def _in_the_file(exc: FederationConfigError, kept: dict[str, list[int]]
                 ) -> FederationConfigError:
    """``exc`` with the entry number it names as the file numbers it (the
    trial table has lost entries before it)."""
    m = re.match(r"(federation\.([\w-]+)) #(\d+)(.*)$", exc.key)
    if m is None or m.group(2) not in kept:
        return exc
    positions = kept[m.group(2)]
    index = int(m.group(3)) - 1
    if not 0 <= index < len(positions):
        return exc
    return FederationConfigError(f"{m.group(1)} #{positions[index] + 1}{m.group(4)}",
                                 exc.problem)


def _leave_out(table: dict[str, Any], key: str, kept: dict[str, list[int]]) -> bool:
    """Remove what ``key`` (``federation.connect #2, url``, numbered as in
    the file) names from the ``[federation]`` table."""
    m = re.match(r"federation\.([\w-]+)(?: #(\d+))?(?:, (\w+))?$", key)
    if m is None:
        return False
    name, number, sub = m.groups()
    spellings = [name, name.replace("_", "-"), name.replace("-", "_")]
    if sub is not None and number is None:
        spellings = [f"{name}_{sub}", f"{name}-{sub}"] + spellings
    for spelling in spellings:
        if spelling in table:
            if number is not None:
                entries = table[spelling]
                positions = kept.get(spelling, [])
                if not isinstance(entries, list):       # one value for a list: all of it
                    del table[spelling]
                    return True
                if int(number) - 1 not in positions:
                    return False
                index = positions.index(int(number) - 1)
                del entries[index]
                del positions[index]
            else:
                del table[spelling]
            return True
    return False


def _set_aside(federation: FederationConfig, key: str) -> bool:
    """Undo the setting ``key`` names (``federation.reconnect_max``,
    ``federation.connect #2, url``, ``federation.accept_any, outgoing``)."""
    m = re.match(r"federation\.(\w+)(?: #(\d+))?(?:, (\w+))?$", key)
    if m is None:
        return False
    name, number, sub = m.groups()
    if number is not None:
        entries = getattr(federation, name, None)
        index = int(number) - 1
        if not isinstance(entries, list) or not 0 <= index < len(entries):
            return False
        del entries[index]
        return True
    if sub is not None and hasattr(federation, f"{name}_{sub}"):
        name = f"{name}_{sub}"
    defaults = {f.name: f for f in dataclasses.fields(FederationConfig)}
    if name not in defaults:
        return False
    f = defaults[name]
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING \
        else f.default
    setattr(federation, name, default)
    return True


def _check_readable_file(path: str, where: str) -> None:
    """``ConfigError`` (``WHERE: no such file``, ``WHERE: cannot read:
    Permission denied``) unless ``path`` is a file this process can read:
    a TLS key in a directory the router's user may not enter is said at
    start, in one line, not as a traceback from deep inside ssl
    (``fileutil.file_problem``, which the federation's files use too)."""
    problem = file_problem(path)
    if problem:
        raise ConfigError(f"{where}: {problem}")


def _validate_discovery(config: RouterConfig, source: str) -> None:
    """Discovery and redirect settings (kept apart from ``validate`` so that
    the other sections stay easy to merge)."""
    import ipaddress
    import socket

    if ":" in config.discovery_scope:
        raise ConfigError(f"{source}: discovery-scope {config.discovery_scope!r} may not "
                          "contain ':' (discovery draft 5.1.1)")
    try:
        ipaddress.IPv4Address(config.discovery_address)
    except ValueError:
        raise ConfigError(f"{source}: discovery-address {config.discovery_address!r} is "
                          "not an IPv4 address") from None
    if config.discovery_interface:
        try:
            socket.inet_aton(config.discovery_interface)
        except OSError:
            raise ConfigError(f"{source}: discovery-interface "
                              f"{config.discovery_interface!r} is not an IPv4 address") from None
    if not 0 <= config.discovery_port <= 65535:
        raise ConfigError(f"{source}: discovery-port {config.discovery_port} is out of range")
    if config.max_connections < 0:
        raise ConfigError(f"{source}: max-connections must be 0 (no limit) or more")
    if config.redirect_to is not None:
        try:
            parse_uri(config.redirect_to)
        except URIError as exc:
            raise ConfigError(f"{source}: bad redirect-to URI: {exc}") from None


#: the settings SIGHUP applies to a running router (elvin.router.reload)
RELOADABLE = frozenset({
    "log_level", "log_file", "stats_interval", "options", "federation", "archive",
    "connect_timeout", "close_timeout", "max_protocol_errors", "max_subscriptions",
    "max_connections", "redirect_to", "quench", "pre_session_max_length", "frame_timeout",
    *DOOR_LIMITS})

#: how many files one configuration may include, in all (a loop stops here)
MAX_INCLUDED = 256


def load_config(path: str | Path, base: RouterConfig | None = None, *,
                problems: list[str] | None = None) -> RouterConfig:
    """Read a TOML file, and the files it includes, into a ``RouterConfig``
    (over ``base``); ``ConfigError`` naming the file and line at fault. With
    a ``problems`` list, every problem in reading the files is appended there
    instead and the config is returned as far as it could be read, not yet
    validated: ``--check-config`` puts the flags over it, then asks
    ``RouterConfig.problems``."""
    config = base if base is not None else RouterConfig()
    config.sources = []
    with collecting_problems(problems):
        main = _load_into(config, Path(path).expanduser(), [], problems)
    if problems is not None:
        return config
    return config.validate(*main)


def _load_into(config: RouterConfig, path: Path, chain: list[Path],
               problems: list[str] | None) -> tuple[str, str]:
    """Apply ``path`` and what it includes; (source, text) of ``path``."""
    file = read_toml(path)
    real = file.path.resolve()
    if real in chain:
        raise ConfigError(f"{file.path}: includes itself (through "
                          f"{' -> '.join(str(p) for p in chain)})")
    if len(config.sources) >= MAX_INCLUDED:
        raise ConfigError(f"{file.path}: more than {MAX_INCLUDED} configuration files "
                          "included")
    config.sources.append(str(file.path))
    data = dict(file.data)
    include = data.pop("include", None)
    _apply(config, data, str(file.path), file.text, problems)
    for included in _included(include, file):
        with collecting_problems(problems):
            _load_into(config, included, [*chain, real], problems)
    return str(file.path), file.text


def _included(value: Any, file: Any) -> list[Path]:
    """The files an ``include`` key names, in order."""
    if value is None:
        return []
    where = f"{file.path}{line_of(file.text, 'include')}"
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: 'include' must be a file or glob pattern, or a list "
                          "of them")
    found: list[Path] = []
    for pattern in value:
        full = Path(pattern).expanduser()
        if not full.is_absolute():
            full = file.path.parent / full
        if glob.has_magic(str(full)):
            found.extend(Path(p) for p in sorted(glob.glob(str(full))) if Path(p).is_file())
        else:
            found.append(full)       # must exist: read_toml says so if not
    return found


def config_from_dict(data: dict[str, Any], base: RouterConfig | None = None,
                     source: str = "configuration", text: str = "") -> RouterConfig:
    config = base if base is not None else RouterConfig()
    _apply(config, data, source, text)
    return config.validate(source, text)


def _apply(config: RouterConfig, data: dict[str, Any], source: str, text: str,
           problems: list[str] | None = None) -> None:
    """Set what ``data`` (one file's table) says on ``config``: the first
    problem raised, or each appended to ``problems``."""
    for raw_key, value in data.items():
        with collecting_problems(problems):
            _apply_key(config, raw_key, value, source, text)


def _apply_key(config: RouterConfig, raw_key: str, value: Any, source: str,
               text: str) -> None:
    def where(key: str) -> str:
        return f"{source}{line_of(text, key)}"

    key = raw_key.replace("_", "-")
    if key == "include":
        raise ConfigError(f"{where(raw_key)}: 'include' is read by load_config only")
    if key == "listen":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where(raw_key)}: 'listen' must be a URI or a list of "
                              "URIs")
        config.listen = list(value)
    elif key in _SCALARS:
        types, attr = _SCALARS[key]
        if isinstance(value, bool) or not isinstance(value, types):
            expected = "a string" if types is str else "a number"
            raise ConfigError(f"{where(raw_key)}: {raw_key!r} must be {expected}, not "
                              f"{value!r}")
        setattr(config, attr, value)
    elif key == "state-reset":
        # a one-off, not a setting: left in the file, it would move the
        # state aside at every restart, the crashes ``state-dir`` is for included
        raise ConfigError(f"{where(raw_key)}: state-reset is not a setting: to move the "
                          "state aside once, run elvind --state-reset")
    elif key in _FLAGS:
        if not isinstance(value, bool):
            raise ConfigError(f"{where(raw_key)}: {raw_key!r} must be true or false, not "
                              f"{value!r}")
        setattr(config, _FLAGS[key], value)
    elif key == "federation":
        try:
            config.federation = federation_from_dict(value, config.federation)
        except FederationConfigError:
            # every problem of the table, not only the first (--check-config)
            raise ConfigError.of([f"{source}{federation_line(text, exc.key)}: {exc}"
                                  for exc in federation_table_problems(
                                      value, config.federation)]) from None
    elif key == "options":
        if not isinstance(value, dict):
            raise ConfigError(f"{where(raw_key)}: 'options' must be a table")
        config.options = _options(value, config.options, where)
    else:
        raise ConfigError(f"{where(raw_key)}: unknown setting {raw_key!r}")


def _options(table: dict[str, Any], base: OptionRanges,
             where: Callable[[str], str]) -> OptionRanges:
    ints = dict(base.ints)
    send_policy, receive_policy = base.send_drop_policy, base.receive_drop_policy
    found: list[str] = []     # every bad option, not only the first
    for name, value in table.items():
        with collecting_problems(found):
            if name in ("Send-Queue.Drop-Policy", "Receive-Queue.Drop-Policy"):
                if value not in DROP_POLICIES:
                    raise ConfigError(f"{where(name)}: {name} must be one of "
                                      f"{', '.join(DROP_POLICIES[:4])}, not {value!r}")
                if name.startswith("Send"):
                    send_policy = value
                else:
                    receive_policy = value
                continue
            if name not in INT_OPTIONS:
                raise ConfigError(f"{where(name)}: unknown connection option {name!r}")
            low, default, high = ints[name]
            if isinstance(value, dict):
                unknown = set(value) - {"min", "default", "max"}
                if unknown:
                    raise ConfigError(f"{where(name)}: {name}: unknown keys "
                                      f"{', '.join(sorted(unknown))} (use min, default, max)")
                low = value.get("min", low)
                high = value.get("max", high)
                default = value.get("default", min(max(default, low), high))
            else:
                default = value
                if isinstance(default, int) and not isinstance(default, bool):
                    low, high = min(low, default), max(high, default)
            for part in (low, default, high):
                if isinstance(part, bool) or not isinstance(part, int):
                    raise ConfigError(f"{where(name)}: {name} values must be integers")
            floor, ceiling = OPTION_BOUNDS[name]
            for part in (low, default, high):
                if not floor <= part <= ceiling:
                    raise ConfigError(f"{where(name)}: {name}: {part} is out of range (the "
                                      f"router allows {floor} to {ceiling})")
            if not low <= default <= high:
                raise ConfigError(f"{where(name)}: {name}: need min <= default <= max, got "
                                  f"{low} <= {default} <= {high}")
            ints[name] = (low, default, high)
    if found:
        raise ConfigError.of(found)
    return OptionRanges(ints, send_policy, receive_policy)
