"""Decoder limits: how much a peer may make us allocate or parse.

A ``Limits`` object travels with every decode. The defaults are generous
enough for any ordinary use and small enough that a hostile peer cannot make
the codec allocate more than a few MiB per packet. The router narrows them
per connection to the values negotiated through the connection options of
section 7.5 of the client protocol (see ``Limits.from_options``).

Defaults (chosen for this suite; Avis uses similar figures):

=====================  =========  ======================================
field                  default    connection option
=====================  =========  ======================================
max_packet_length      2 MiB      Packet.Max-Length
max_attributes         1024       Attribute.Max-Count (spec 8.2.3.3's example)
max_name_length        64 KiB     Attribute.Name.Max-Length
max_string_length      1 MiB      Attribute.String.Max-Length
max_opaque_length      1 MiB      Attribute.Opaque.Max-Length
max_array_length       65536      (none: id64 arrays, quench names, Nack args)
max_keys               1024       (none: keys in one Keys structure)
max_ast_depth          256        (none: SubAST nesting)
=====================  =========  ======================================

``max_name_length`` applies to attribute and option names and to quench
attribute names; ``max_string_length`` and ``max_opaque_length`` apply to
attribute (and option) *values*. Other strings (subscription expressions,
Nack messages, Disconn arguments) are bounded only by the packet length, so
that the router can answer an over-long subscription with a Nack instead of
treating it as a protocol violation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from elvin.errors import ProtocolError

MiB = 1024 * 1024


class LimitError(ProtocolError):
    """A well-formed packet that exceeds a ``Limits`` value.

    The frame it came in was complete, so the stream is still in sync: a
    router may answer with a Nack (or ignore a NotifyEmit, as spec 7.3.3
    suggests) instead of closing the connection. ``limit`` names the field of
    ``Limits`` that was exceeded. (Frame headers longer than
    ``max_packet_length`` are *not* ``LimitError``s: the spec requires the
    connection to be reset in that case.)
    """

    def __init__(self, message: str, offset: int | None = None, limit: str = "") -> None:
        super().__init__(message, offset)
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Limits:
    max_packet_length: int = 2 * MiB
    max_attributes: int = 1024
    max_name_length: int = 64 * 1024
    max_string_length: int = MiB
    max_opaque_length: int = MiB
    max_array_length: int = 65536
    max_keys: int = 1024
    max_ast_depth: int = 256

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Limits.{f.name} must be a non-negative int, not {value!r}")
        if self.max_packet_length < 4:
            raise ValueError("Limits.max_packet_length must be at least 4")

    # -- connection options -------------------------------------------------
    @classmethod
    def from_options(cls, options: Mapping[str, object],
                     base: Limits | None = None) -> Limits:
        """``base`` (default: ``DEFAULT_LIMITS``) narrowed or widened by the
        int32 values of the standard (or legacy, spec 7.5.3) option names in
        ``options``; other options, non-integer values and values no packet
        could meet (not positive; a packet length under 4, the size of the
        type field alone) are ignored: these options come from the peer,
        which must not be able to make this raise."""
        base = base if base is not None else DEFAULT_LIMITS
        changes: dict[str, int] = {}
        for name, value in options.items():
            attr = OPTION_FIELDS.get(name) or OPTION_FIELDS.get(LEGACY_OPTION_NAMES.get(name, ""))
            if attr and type(value) is int and value > 0:
                if attr == "max_packet_length" and value < 4:
                    continue
                changes[attr] = value
        return replace(base, **changes) if changes else base

    def options(self) -> dict[str, int]:
        """The standard connection options that correspond to these limits."""
        return {name: getattr(self, attr) for name, attr in OPTION_FIELDS.items()}


#: Standard connection option name -> ``Limits`` field: the one statement of
#: which options are decoder limits (the router negotiates them, the client
#: checks what it sends against them, a QOS_LIMIT Nack names the option).
OPTION_FIELDS: dict[str, str] = {
    "Packet.Max-Length": "max_packet_length",
    "Attribute.Max-Count": "max_attributes",
    "Attribute.Name.Max-Length": "max_name_length",
    "Attribute.String.Max-Length": "max_string_length",
    "Attribute.Opaque.Max-Length": "max_opaque_length",
}

#: ``Limits`` field -> standard connection option name (fields with no option,
#: such as ``max_keys``, are absent).
FIELD_OPTIONS: dict[str, str] = {attr: name for name, attr in OPTION_FIELDS.items()}

#: Legacy option names of spec 7.5.3 -> standard name (limits only).
LEGACY_OPTION_NAMES: dict[str, str] = {
    "router.packet.max-length": "Packet.Max-Length",
    "router.attribute.max-count": "Attribute.Max-Count",
    "router.attribute.name.max-length": "Attribute.Name.Max-Length",
    "router.attribute.string.max-length": "Attribute.String.Max-Length",
    "router.attribute.opaque.max-length": "Attribute.Opaque.Max-Length",
}

DEFAULT_LIMITS = Limits()
