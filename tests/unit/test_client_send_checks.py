"""The client's checks of a notification against the router's limits, and
what the client packages export (sans-IO: no router needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import elvin
import elvin.client
from elvin.client.send_checks import (
    NO_LIMITS,
    check_packet_length,
    checked_notification,
    send_limits,
)


def test_no_options_means_no_limits():
    assert send_limits({}) is NO_LIMITS
    big = {"name": "x" * 100_000, "data": bytes(100_000)}
    assert checked_notification(big, NO_LIMITS) is big


def test_limits_come_from_standard_and_legacy_option_names():
    limits = send_limits({"Attribute.Max-Count": 2, "router.attribute.string.max-length": 8,
                          "Packet.Max-Length": 64, "Vendor.Other": 1})
    assert limits.max_attributes == 2
    assert limits.max_string_length == 8
    assert limits.max_packet_length == 64
    assert limits.max_opaque_length == NO_LIMITS.max_opaque_length


@pytest.mark.parametrize(("options", "notification", "said"), [
    ({"Attribute.Max-Count": 1}, {"a": 1, "b": 2}, "2 attributes"),
    ({"Attribute.Name.Max-Length": 4}, {"long-name": 1}, "attribute name 'long-name'"),
    ({"Attribute.String.Max-Length": 3}, {"s": "four"}, "attribute 's': string"),
    ({"Attribute.Opaque.Max-Length": 3}, {"o": b"four"}, "attribute 'o': opaque"),
])
def test_a_notification_beyond_a_limit_says_which(options, notification, said):
    with pytest.raises(ValueError, match=said):
        checked_notification(notification, send_limits(options))


def test_multibyte_text_is_measured_in_bytes():
    limits = send_limits({"Attribute.String.Max-Length": 4})
    assert checked_notification({"s": "ab"}, limits) == {"s": "ab"}
    with pytest.raises(ValueError, match="string longer"):
        checked_notification({"s": "ééé"}, limits)


def test_bad_values_still_name_the_attribute():
    with pytest.raises(TypeError, match="bad"):
        checked_notification({"bad": object()}, NO_LIMITS)


def test_packet_length():
    limits = send_limits({"Packet.Max-Length": 10})
    check_packet_length(bytes(14), limits)
    with pytest.raises(ValueError, match="11 bytes"):
        check_packet_length(bytes(15), limits)


def test_every_exported_name_exists():
    for name in elvin.__all__:
        assert getattr(elvin, name) is not None, name
    for name in elvin.client.__all__:
        assert getattr(elvin.client, name) is not None, name
    assert set(elvin._CLIENT_NAMES) <= set(elvin.client.__all__)


def test_importing_elvin_leaves_the_client_unloaded():
    code = "import sys, elvin; print('elvin.client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
