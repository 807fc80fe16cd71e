"""Connection-option negotiation (client protocol section 7.5).

``negotiate(requested, current, ranges)`` applies the rules of 7.5 to the
options of a ConnRqst or QosRqst:

a) a legal, understood value inside the router's range is accepted and echoed;
b) an understood option whose value the router will not provide is answered
   with the value the router *will* use: an int32 outside the range is clamped
   to the nearest bound, a value of the wrong type or an unknown drop policy
   keeps the current value;
c) unknown options are not echoed.

Options are answered in the spelling the client used (the legacy names of
7.5.3 included). The reply also carries every other option's active value in
its standard spelling (7.4.4: an option with a non-default value MUST be sent,
and the spec defines no defaults), ``Vendor-Identification`` and
``Supported-Key-Schemes`` ("SHA-1", as Avis answers).

The options are declared once, in ``OPTIONS`` (type, the router's min /
default / max, who enforces it): the names the negotiation understands, the
ranges ``OptionRanges`` starts from, the bounds the configuration may set and
the configuration reference (docs/reference/config.rst) all come from it.

A client asking for more than the maximum is granted the maximum (rule b).
The maxima bound what one client can make the router do: the longest
expression (compiled on a worker thread, never on the loop), the most
subscriptions, the largest packet.

The router has no receive queue: it processes each packet as it is read and
stops reading from a client whose replies it cannot deliver. Spec 7.5.1 says
such a router MUST accept any legal value for the Receive-Queue options, so
they are accepted (and echoed) as long as they are legal. ``fail`` (Avis's
spelling of ``none``) is accepted as a drop policy too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from elvin._version import __version__
from elvin.protocol.limits import DEFAULT_LIMITS, LEGACY_OPTION_NAMES, OPTION_FIELDS, Limits

KiB = 1024
MiB = 1024 * 1024

VENDOR_IDENTIFICATION = f"elvin-suite elvind {__version__}"
SUPPORTED_KEY_SCHEMES = "SHA-1"

DROP_POLICIES = ("oldest", "newest", "largest", "none", "fail")

# standard name -> legacy name (spec 7.5.3); the limits' own are in protocol.limits
LEGACY_NAMES: dict[str, str] = {
    **{std: legacy for legacy, std in LEGACY_OPTION_NAMES.items()},
    "Receive-Queue.Drop-Policy": "router.recv-queue.drop-policy",
    "Receive-Queue.Max-Length": "router.recv-queue.max-length",
    "Send-Queue.Drop-Policy": "router.send-queue.drop-policy",
    "Send-Queue.Max-Length": "router.send-queue.max-length",
    "Subscription.Max-Count": "router.subscription.max-count",
    "Subscription.Max-Length": "router.subscription.max-length",
    "Supported-Key-Schemes": "router.supported-keyschemes",
    "Vendor-Identification": "router.vendor-identification",
}
STANDARD_NAMES: dict[str, str] = {legacy: std for std, legacy in LEGACY_NAMES.items()}

@dataclass(frozen=True, slots=True)
class ConnectionOption:
    """One connection option the router understands: an int32 with the
    router's (min, default, max), a drop policy, or a read-only string it
    announces; and what enforces it."""

    name: str
    type: str                 # "int32", "string" (a drop policy), "read-only"
    enforced_by: str
    low: int = 0
    default: int = 0
    high: int = 0


def _int32(name: str, low: int, default: int, high: int, enforced_by: str) -> ConnectionOption:
    return ConnectionOption(name, "int32", enforced_by, low, default, high)


#: every option the router understands, in the reply's order
OPTIONS: tuple[ConnectionOption, ...] = (
    _int32("Attribute.Max-Count", 16, 1024, 65536, "codec Limits"),
    _int32("Attribute.Name.Max-Length", 64, 64 * KiB, MiB, "codec Limits"),
    _int32("Attribute.Opaque.Max-Length", KiB, MiB, 10 * MiB, "codec Limits"),
    _int32("Attribute.String.Max-Length", KiB, MiB, 10 * MiB, "codec Limits"),
    _int32("Packet.Max-Length", KiB, 2 * MiB, 10 * MiB, "frame decoder"),
    _int32("Receive-Queue.Max-Length", 1, MiB, 2**31 - 1,
           "accepted (the router has no receive queue: spec 7.5.1)"),
    _int32("Send-Queue.Max-Length", KiB, 2 * MiB, 64 * MiB, "send queue (bytes)"),
    _int32("Subscription.Max-Count", 16, 2048, 65536, "session"),
    # 256 KiB: an OR of ~10,000 terms; it compiles off the loop in well
    # under a second (the longest compile a client can make the router do)
    _int32("Subscription.Max-Length", KiB, 8 * KiB, 256 * KiB, "session (UTF-8 bytes)"),
    _int32("TCP.Send-Immediately", 0, 1, 1, "TCP_NODELAY"),
    ConnectionOption("Receive-Queue.Drop-Policy", "string",
                     "accepted (the router has no receive queue: spec 7.5.1)"),
    ConnectionOption("Send-Queue.Drop-Policy", "string", "send queue"),
    ConnectionOption("Vendor-Identification", "read-only", "announced"),
    ConnectionOption("Supported-Key-Schemes", "read-only", "announced"),
)

INT_OPTIONS = tuple(o.name for o in OPTIONS if o.type == "int32")
POLICY_OPTIONS = tuple(o.name for o in OPTIONS if o.type == "string")
READ_ONLY = tuple(o.name for o in OPTIONS if o.type == "read-only")
ALL_OPTIONS = INT_OPTIONS + POLICY_OPTIONS + READ_ONLY


def _default_ranges() -> dict[str, tuple[int, int, int]]:
    return {o.name: (o.low, o.default, o.high) for o in OPTIONS if o.type == "int32"}


#: what the configuration may set each int32 option to: from the router's
#: default minimum (the smallest value a client can work with: a 1 KiB
#: packet, 16 subscriptions...) up to what an int32 holds
OPTION_BOUNDS: dict[str, tuple[int, int]] = {
    name: (low, 1 if name == "TCP.Send-Immediately" else 2**31 - 1)
    for name, (low, _default, _high) in _default_ranges().items()}


@dataclass
class OptionRanges:
    """The router's (min, default, max) per int32 option and default policies."""

    ints: dict[str, tuple[int, int, int]] = field(default_factory=_default_ranges)
    send_drop_policy: str = "oldest"
    receive_drop_policy: str = "oldest"

    def __post_init__(self) -> None:
        for name, (low, default, high) in self.ints.items():
            if name not in INT_OPTIONS:
                raise ValueError(f"unknown connection option {name!r}")
            if not low <= default <= high:
                raise ValueError(f"connection option {name}: need min <= default <= max, "
                                 f"not {low}, {default}, {high}")
        for policy in (self.send_drop_policy, self.receive_drop_policy):
            if policy not in DROP_POLICIES:
                raise ValueError(f"unknown drop policy {policy!r} "
                                 f"(expected one of {', '.join(DROP_POLICIES[:4])})")

    def defaults(self) -> dict[str, object]:
        values: dict[str, object] = {name: rng[1] for name, rng in self.ints.items()}
        values["Send-Queue.Drop-Policy"] = self.send_drop_policy
        values["Receive-Queue.Drop-Policy"] = self.receive_drop_policy
        return values


DEFAULT_RANGES = OptionRanges()


@dataclass
class SessionOptions:
    """The active option values of one session (standard names)."""

    values: dict[str, object]

    def __getitem__(self, name: str) -> object:
        return self.values[name]

    @property
    def max_packet_length(self) -> int:
        return self.values["Packet.Max-Length"]  # type: ignore[return-value]  # values holds ints under the int options

    @property
    def send_queue_max(self) -> int:
        return self.values["Send-Queue.Max-Length"]  # type: ignore[return-value]  # as above

    @property
    def send_drop_policy(self) -> str:
        policy = self.values["Send-Queue.Drop-Policy"]
        return "none" if policy == "fail" else policy  # type: ignore[return-value]  # the policy options hold strs

    @property
    def max_subscriptions(self) -> int:
        return self.values["Subscription.Max-Count"]  # type: ignore[return-value]  # values holds ints under the int options

    @property
    def max_subscription_length(self) -> int:
        return self.values["Subscription.Max-Length"]  # type: ignore[return-value]  # as above

    @property
    def send_immediately(self) -> bool:
        return bool(self.values["TCP.Send-Immediately"])

    def limits(self, base: Limits | None = None) -> Limits:
        """Decoder limits for what this client may send: the negotiated
        option values (every one, as negotiated: unlike
        ``Limits.from_options`` no value is passed over), the rest from
        ``base``."""
        negotiated = {attr: self.values[name] for name, attr in OPTION_FIELDS.items()}
        return replace(base or DEFAULT_LIMITS, **negotiated)  # type: ignore[arg-type]  # the negotiated values are the Limits fields' ints


def initial_options(ranges: OptionRanges = DEFAULT_RANGES) -> SessionOptions:
    return SessionOptions(ranges.defaults())


def standard_name(name: str) -> str | None:
    """The standard spelling of an option name, or None if not understood."""
    if name in ALL_OPTIONS:
        return name
    return STANDARD_NAMES.get(name)


def _decide(std: str, value: object, current: Mapping[str, object],
            ranges: OptionRanges) -> object:
    """The value the router will use for one requested option."""
    if std == "Vendor-Identification":
        return VENDOR_IDENTIFICATION
    if std == "Supported-Key-Schemes":
        return SUPPORTED_KEY_SCHEMES
    if std in POLICY_OPTIONS:
        if type(value) is str and value in DROP_POLICIES:
            return value
        return current[std]
    low, _default, high = ranges.ints[std]
    if type(value) is not int:          # int64 (Int64), real64, string, opaque
        return current[std]
    return min(max(value, low), high)


def negotiate(requested: Mapping[str, object], current: SessionOptions,
              ranges: OptionRanges = DEFAULT_RANGES) -> tuple[SessionOptions, dict[str, object]]:
    """Apply a ConnRqst/QosRqst options table to ``current``.

    Returns the new session options and the reply options table: every
    requested, understood option in the client's spelling with the value the
    router will use, plus every active option (standard spelling) and the two
    read-only informational options.
    """
    values = dict(current.values)
    answered: dict[str, str] = {}          # client spelling -> standard name
    for name, value in requested.items():
        std = standard_name(name)
        if std is None:
            continue                         # rule c: not echoed
        decided = _decide(std, value, values, ranges)
        if std not in READ_ONLY:
            values[std] = decided
        answered[name] = std
    reply: dict[str, object] = {}
    requested_std = set(answered.values())
    for std in INT_OPTIONS + POLICY_OPTIONS:
        if std not in requested_std:
            reply[std] = values[std]
    for name, std in answered.items():
        reply[name] = _read_only_value(std) if std in READ_ONLY else values[std]
    for std in READ_ONLY:
        if std not in requested_std:
            reply[std] = _read_only_value(std)
    return SessionOptions(values), reply


def _read_only_value(std: str) -> str:
    return VENDOR_IDENTIFICATION if std == "Vendor-Identification" else SUPPORTED_KEY_SCHEMES


def active_options(current: SessionOptions) -> dict[str, object]:
    """Every active option in standard spelling (for a QosRply)."""
    reply = {std: current.values[std] for std in INT_OPTIONS + POLICY_OPTIONS}
    reply["Vendor-Identification"] = VENDOR_IDENTIFICATION
    reply["Supported-Key-Schemes"] = SUPPORTED_KEY_SCHEMES
    return reply
