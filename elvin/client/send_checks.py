"""Checking a notification against the router's limits before it is sent.

The router announces what it accepts in the connection options (spec 7.5:
``Attribute.Max-Count``, ``Packet.Max-Length``...). A notification beyond
them would make the router drop it or close the connection, far from the
call that sent it; checking here turns that into a ValueError saying which
attribute and which limit. The option names are mapped to limits by
``elvin.protocol.limits`` (``Limits.from_options``), as the router does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elvin.protocol.limits import OPTION_FIELDS, Limits
from elvin.values import INT64_MAX, INT64_MIN, Int64, check_notification

_UNLIMITED = 1 << 62
#: what may be sent before the router has said anything
NO_LIMITS = Limits(**dict.fromkeys(OPTION_FIELDS.values(), _UNLIMITED))


def send_limits(options: Mapping[str, Any]) -> Limits:
    """What the router accepts, from the connection options it applies."""
    return Limits.from_options(options, NO_LIMITS)


def checked_notification(notification: Any, limits: Limits) -> dict:
    """The attributes of ``notification`` if it is valid and within ``limits``;
    else TypeError or ValueError saying what is wrong."""
    attributes = _fast_checked(notification, limits)
    if attributes is None:   # something to report: the slow path says what
        attributes = check_notification(notification)
        _check_limits(attributes, limits)
    return attributes


def _fast_checked(notification: Any, limits: Limits) -> dict | None:
    """The notification if it is a plain dict of plain values within the
    limits (the common case, checked in one pass); None means "take the slow
    path", which gives the precise error (or accepts an unusual but valid
    notification, e.g. a Mapping or a bytearray value)."""
    if type(notification) is not dict or not notification:
        return None
    if len(notification) > limits.max_attributes:
        return None
    max_name = limits.max_name_length
    max_string = limits.max_string_length
    max_opaque = limits.max_opaque_length
    for name, value in notification.items():
        if type(name) is not str or not name or "\x00" in name or len(name) * 4 > max_name:
            return None
        kind = type(value)
        if kind is str:
            if "\x00" in value or len(value) * 4 > max_string:
                return None
        elif kind is int:
            if not INT64_MIN <= value <= INT64_MAX:
                return None
        elif kind is bytes:
            if len(value) > max_opaque:
                return None
        elif kind is not float and kind is not Int64:
            return None
    return notification


def _check_limits(attributes: dict, limits: Limits) -> None:
    if limits is NO_LIMITS:
        return
    count = limits.max_attributes
    if len(attributes) > count:
        raise ValueError(f"the notification has {len(attributes)} attributes; the "
                         f"router accepts at most {count}")
    max_name = limits.max_name_length
    max_string = limits.max_string_length
    max_opaque = limits.max_opaque_length
    for name, value in attributes.items():
        if len(name) * 4 > max_name and len(name.encode()) > max_name:
            raise ValueError(f"attribute name {name[:40]!r}... is longer than the "
                             f"router's limit of {max_name} bytes")
        if type(value) is str:
            if len(value) * 4 > max_string and len(value.encode()) > max_string:
                raise ValueError(f"attribute {name!r}: string longer than the router's "
                                 f"limit of {max_string} bytes")
        elif type(value) is bytes and len(value) > max_opaque:
            raise ValueError(f"attribute {name!r}: opaque longer than the router's "
                             f"limit of {max_opaque} bytes")


def check_packet_length(data: bytes, limits: Limits) -> None:
    """``data`` (a framed NotifyEmit) fits the router's packet length."""
    limit = limits.max_packet_length
    if len(data) - 4 > limit:
        raise ValueError(f"the notification encodes to {len(data) - 4} bytes; the router "
                         f"accepts packets of at most {limit} bytes")
