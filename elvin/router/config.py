"""Router configuration: the settings, the TOML file, and validation.

Every setting is declared once, as a field of ``RouterConfig`` (with
``elvin.settings.setting``: default, help, bounds, flag, whether SIGHUP
applies it); ``SETTINGS`` reads the declarations back, and the file's keys
and their checks, ``elvind``'s flags (``elvin.router.arguments``), the
reloadable set and the configuration reference (docs/reference/config.rst)
all come from it.

A TOML file (``elvind --config FILE``) uses the command-line flag names as
keys (``log-level`` or ``log_level``, both spellings work); every key, its
default and bounds are in the configuration reference::

    listen = ["elvin://0.0.0.0:2917", "elvin:4.0/ssl,none,xdr/0.0.0.0:2918"]
    log-level = "info"
    tls-cert = "/etc/elvind/cert.pem"
    tls-key = "/etc/elvind/key.pem"
    include = ["/etc/elvin/elvind.d/*.toml"]  # more files (glob patterns), read in order
    max-connections-per-address = 1024       # what outsiders may hold (0 = no limit)

    # the publish limit, per client address (elvin.router.clientstats); 0 = none
    publish-rate = 0              # notifications/s one address may publish (beyond:
    publish-burst = 0             # dropped, counted, DropWarn); burst 0 = one second's

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
from elvin.router.options import (
    DROP_POLICIES,
    INT_OPTIONS,
    OPTION_BOUNDS,
    POLICY_OPTIONS,
    OptionRanges,
)
from elvin.settings import ROUTER_WORDING, SettingsTable, setting

__all__ = ["DEFAULT_LISTEN", "LOG_LEVELS", "RELOADABLE", "SETTINGS", "ConfigError",
           "RouterConfig", "config_from_dict", "load_config", "parse_listen_uri"]

DEFAULT_LISTEN = "elvin://127.0.0.1:2917"

#: the argparse groups (and the reference's sections) of the settings
DISCOVERY = "discovery and redirection"
MOBILITY = "mobility"
STATE = "state"
FEDERATION = "federation"
DOOR = "what outsiders may hold"
SECTIONS = {
    DISCOVERY: "Router discovery (SvrRqst/SvrAdvt over UDP, on by default) advertises the "
               "listen URIs; clients beyond --max-connections are redirected (Disconn "
               "reason 2).",
    MOBILITY: "A mobility proxy (elvin.mobility) buffers for clients that move out and "
              "hands the buffer over when they move in, here or at another router.",
    STATE: "What must outlive the router (a restart, a crash): the mobility proxy's "
           "tickets, subscriptions and buffers, in SQLite.",
    FEDERATION: "Links to other routers (Elvin Federation Protocol, ewaf://host:port, "
                "default port 2916); the [federation] table of --config (as written by "
                "elvin-domain apply) sets filters per link. SIGHUP applies a changed table.",
    DOOR: "Counts, sizes and times that bound what a client, or one address, can make "
          "the router hold (elvin.router.door, elvin.router.session_core); 0 = no limit "
          "where a count.",
}


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


def _limit(default: int, help: str) -> Any:
    """A count or size of the door: 0 or more (0 = no limit), reloadable."""
    return setting(default, low=0, zero="no limit", reloadable=True, section=DOOR, help=help)


@dataclass
class RouterConfig:
    listen: list[str] = setting(
        default_factory=lambda: [DEFAULT_LISTEN], by_hand=True, flag="--listen",
        metavar="URI",
        help="listen on this Elvin URI (repeatable; default elvin://127.0.0.1:2917), e.g. "
             "elvin://0.0.0.0:2917 or elvin:4.0/ssl,none,xdr/0.0.0.0:2918")
    log_level: str = setting("info", choices=LOG_LEVELS, reloadable=True, flag="--log-level",
                             help="log level (default {default})")
    log_file: str | None = setting(None, reloadable=True, flag="--log-file", metavar="FILE",
                                   help="log here instead of stderr")
    tls_cert: str | None = setting(None, flag="--tls-cert", metavar="FILE",
                                   help="PEM certificate (chain) for ssl listen URIs")
    tls_key: str | None = setting(None, flag="--tls-key", metavar="FILE",
                                  help="PEM private key for ssl URIs")
    stats_interval: float = setting(
        5.0, above=0, reloadable=True, flag="--stats-interval", metavar="SECONDS",
        help="seconds between Elvin-Router-Stats notifications (default {default})")
    connect_timeout: float = setting(10.0, above=0, reloadable=True, help="seconds a new "
                                     "channel has to send ConnRqst/UNotify")
    close_timeout: float = setting(5.0, above=0, reloadable=True, help=(
        "seconds a closing connection (or the router, at shutdown) waits for a client "
        "that stops reading to take its last packets, before it is cut off"))
    max_protocol_errors: int = setting(16, low=1, reloadable=True, help="protocol errors "
                                       "a client may make; then Disconn (reason 4) and close")
    max_subscriptions: int = setting(
        1_000_000, low=1, reloadable=True,
        help="subscriptions router-wide (IMPL_LIMIT beyond); a session's own limit is the "
             "Subscription.Max-Count connection option")
    options: OptionRanges = setting(
        default_factory=OptionRanges, by_hand=True, reloadable=True,
        help="the connection options clients may negotiate (spec 7.5): per option a "
             "default, or a table ``{ min, default, max }`` (see below)")
    #: run with uvloop when it is installed (not a setting: embedding tests turn it off)
    use_uvloop: bool = True
    archive: str | None = setting(
        None, reloadable=True, flag="--archive", metavar="DIR",
        help="write every routed notification to a traffic archive (Parquet, partitioned "
             "by hour) in DIR, for elvin-pipeline; notifications sent for key holders only "
             "are archived without their attributes")
    archive_private: bool = setting(
        False, flag="--archive-private",
        help="archive the attributes of notifications sent for key holders only too "
             "(deliver_insecure false): whoever can read DIR reads them")
    discovery: bool = setting(True, flag="--no-discovery", section=DISCOVERY,
                              help="do not answer router discovery")
    discovery_scope: str = setting("", flag="--discovery-scope", metavar="NAME",
                                   section=DISCOVERY,
                                   help="scope name to advertise (default: none)")
    discovery_default: bool = setting(
        True, flag="--no-discovery-default", section=DISCOVERY,
        help="do not advertise as a default router (only clients asking for "
             "--discovery-scope find it)")
    discovery_address: str = setting(
        "224.4.0.1", flag="--discovery-address", metavar="ADDRESS", section=DISCOVERY,
        help="multicast group, or a unicast address to answer on (default {default})")
    discovery_port: int = setting(2917, low=0, high=65535, flag="--discovery-port",
                                  metavar="PORT", section=DISCOVERY,
                                  help="UDP port (default {default})")
    discovery_interface: str = setting(
        "", flag="--discovery-interface", metavar="ADDRESS", section=DISCOVERY,
        help="local IPv4 address to multicast on (default: the system's)")
    max_connections: int = setting(
        0, low=0, zero="no limit", reloadable=True, flag="--max-connections", metavar="N",
        section=DISCOVERY,
        help="connected clients beyond N are redirected to --redirect-to, or refused "
             "without it (default 0: no limit)")
    redirect_to: str | None = setting(None, reloadable=True, flag="--redirect-to",
                                      metavar="URI", section=DISCOVERY,
                                      help="where clients beyond --max-connections are sent")
    mobility: bool = setting(False, flag="--mobility", section=MOBILITY,
                             help="run a mobility proxy inside the router")
    mobility_quota: int = setting(10_000, low=1, flag="--mobility-quota", metavar="N",
                                  section=MOBILITY,
                                  help="most notifications buffered per client (default "
                                       "{default})")
    mobility_expiry: float = setting(3600.0, above=0, flag="--mobility-expiry",
                                     metavar="SECONDS", section=MOBILITY,
                                     help="seconds an unclaimed buffer is kept (default "
                                          "{default})")
    mobility_announce_wait: float = setting(
        3.0, above=0, flag="--mobility-announce-wait", metavar="SECONDS", section=MOBILITY,
        help="most seconds a move-out or move-in reply waits for the federation's peers to "
             "know what this router's subscribers want, as right after a restart (a reply "
             "sent before names the peers that may not know yet) (default {default})")
    mobility_key_file: str | None = setting(
        None, flag="--mobility-key-file", metavar="FILE", section=MOBILITY,
        help="the proxy's raw private key (the file's bytes, as elvin-mobility-proxy "
             "--key-file): a stable public key that clients can pin (default: a new random "
             "key at each start)")
    state_dir: str | None = setting(
        None, flag="--state-dir", metavar="DIR", section=STATE,
        help="keep the router's state in DIR (created, mode 0700; one router per DIR); "
             "without it mobility buffers are in memory only")
    state_reset: bool = setting(
        False, flag="--state-reset", section=STATE, in_file=False,
        help="move the state found in --state-dir aside (renamed, never deleted) and start "
             "with none: for a state file that cannot be read")
    federation: FederationConfig | None = setting(
        None, by_hand=True, reloadable=True, section=FEDERATION,
        help="router federation (``[federation]``, see below); none = off")
    quench: bool = setting(
        True, reloadable=True, flag="--no-quench",
        help="emulate a router without quench (protocol subset C), as Avis is: quench "
             "requests get Nack NOT_IMPL (2007) \"Quench not supported\"; for testing "
             "clients' fallbacks")
    status_file: str | None = setting(
        None, flag="--status-file", metavar="FILE",
        help="where to keep the status 'elvind status' reads (default "
             "/run/elvind/status-PORT.json for root and the systemd unit, else "
             "$XDG_RUNTIME_DIR/elvind/status-PORT.json; PORT is the first listen port, so "
             "two routers never share it)")
    metrics: str | None = setting(
        None, flag="--metrics", metavar="HOST:PORT",
        help="serve the router's figures at http://HOST:PORT/metrics in the Prometheus "
             "text format, e.g. 127.0.0.1:9917")
    #: the files this configuration was read from, in order (main file first)
    sources: list[str] = field(default_factory=list)
    attribute_names: bool = setting(
        True, help="publish the attribute names seen recently (elvin.router.census), for "
                   "browsers, while someone subscribes to Elvin-Router-Attributes")
    max_connections_per_address: int = _limit(1024, "sockets from one IP address, in any "
                                                    "state")
    max_pre_session: int = _limit(4096, "sockets that have not sent ConnRqst/UNotify yet, "
                                        "in all")
    max_pre_session_per_address: int = _limit(
        256, "sockets that have not sent ConnRqst/UNotify yet, from one IP address: room "
             "for a burst of clients reconnecting at once from behind one NAT address (200 "
             "concurrent connects from one address are ordinary)")
    pre_session_max_length: int = setting(
        16 * 1024, above=0, reloadable=True, section=DOOR,
        help="bytes of a frame before ConnRqst (UNotify: the Packet.Max-Length default)")
    frame_timeout: float = setting(
        10.0, above=0, reloadable=True, section=DOOR,
        help="seconds of grace for a frame to arrive whole, plus its announced size at "
             "frame-min-rate: slower is closed")
    frame_min_rate: int = _limit(64 * 1024, "bytes/s a frame must arrive at, past "
                                            "frame-timeout")
    max_partial_bytes: int = _limit(64 * 1024 * 1024, "bytes in unfinished frames, "
                                    "router-wide; past it the largest holders are closed "
                                    "first")
    descriptor_reserve: int = _limit(64, "open files kept for the router's own (log, "
                                         "status, state, archive, federation): sockets "
                                         "past it refused")
    max_keys_per_connection: int = _limit(256, "connection keys (ConnRqst, SecRqst), "
                                               "notification and subscription keys "
                                               "together: count")
    max_key_bytes_per_connection: int = _limit(64 * 1024, "... and their bytes")
    max_keys_per_subscription: int = _limit(64, "a subscription's (or quench's) own keys")
    max_key_bytes_per_subscription: int = _limit(16 * 1024, "... and their bytes")
    publish_rate: float = setting(
        0.0, reloadable=True, section=DOOR,
        help="notifications/s one client address may publish, a token bucket "
             "(elvin.router.clientstats); 0: no limit")
    publish_burst: float = setting(
        0.0, reloadable=True, section=DOOR,
        help="notifications one client address may publish at once above publish-rate "
             "(0: one second's worth)")

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
        found: list[str] = []
        with collecting_problems(found):
            self._check_listen(source, text)
        found.extend(SETTINGS.problems(self, lambda key: f"{source}{line_of(text, key)}"))
        for check in (self._check_tls_files, self._check_discovery, self._check_federation,
                      self._check_mobility, self._check_state, self._check_archive,
                      self._check_metrics, self._check_publish_limit):
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

    def _check_publish_limit(self, source: str, text: str) -> None:
        found = []            # each setting's problem, not only the first
        for key, value in (("publish-rate", self.publish_rate),
                           ("publish-burst", self.publish_burst)):
            if not 0 <= value < float("inf"):     # NaN and infinity too
                found.append(f"{source}{line_of(text, key)}: {key} must be 0 (no limit) or "
                             f"a positive number of notifications, not {value!r}")
        if self.publish_burst and not self.publish_rate:
            found.append(f"{source}{line_of(text, 'publish-burst')}: publish-burst needs "
                         "publish-rate (a burst of what rate?)")
        elif 0 < self.publish_burst < 1:
            found.append(f"{source}{line_of(text, 'publish-burst')}: publish-burst must be "
                         f"at least 1 (a notification), not {self.publish_burst!r}")
        if found:
            raise ConfigError.of(found)

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


#: the router's settings, as RouterConfig declares them
SETTINGS = SettingsTable(RouterConfig, SECTIONS, ROUTER_WORDING)
#: the settings SIGHUP applies to a running router (elvin.router.reload)
RELOADABLE = SETTINGS.reloadable
#: the counts and sizes of elvin.router.door and the key limits (0 = no limit)
DOOR_LIMITS = tuple(s.name for s in SETTINGS if s.section == DOOR and s.bounds
                    and s.bounds.zero)


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
    """What the discovery and redirect settings' declarations cannot say:
    addresses and a URI that must parse."""
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
    if config.redirect_to is not None:
        try:
            parse_uri(config.redirect_to)
        except URIError as exc:
            raise ConfigError(f"{source}: bad redirect-to URI: {exc}") from None



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
    elif key == "state-reset":
        # a one-off, not a setting: left in the file, it would move the
        # state aside at every restart, the crashes ``state-dir`` is for included
        raise ConfigError(f"{where(raw_key)}: state-reset is not a setting: to move the "
                          "state aside once, run elvind --state-reset")
    elif SETTINGS.apply(config, raw_key, value, where(raw_key)):
        pass
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
            if name in POLICY_OPTIONS:
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
