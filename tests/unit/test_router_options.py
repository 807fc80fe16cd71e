"""Connection-option negotiation (spec 7.5)."""

from elvin.router.options import (
    SUPPORTED_KEY_SCHEMES,
    VENDOR_IDENTIFICATION,
    OptionRanges,
    initial_options,
    negotiate,
)
from elvin.values import Int64


def test_accepted_value_is_echoed_and_applied():
    options, reply = negotiate({"Packet.Max-Length": 4096}, initial_options())
    assert reply["Packet.Max-Length"] == 4096
    assert options.max_packet_length == 4096
    assert options.limits().max_packet_length == 4096


def test_out_of_range_values_are_clamped_to_what_the_router_uses():
    options, reply = negotiate({"Packet.Max-Length": 10, "Subscription.Max-Count": 10**9},
                               initial_options())
    assert reply["Packet.Max-Length"] == 1024            # the minimum
    assert reply["Subscription.Max-Count"] == 65536      # the maximum
    assert options.max_subscriptions == 65536


def test_wrong_type_keeps_current_value():
    current = initial_options()
    _, reply = negotiate({"Packet.Max-Length": "big", "Attribute.Max-Count": Int64(64),
                          "Send-Queue.Drop-Policy": "random"}, current)
    assert reply["Packet.Max-Length"] == current["Packet.Max-Length"]
    assert reply["Attribute.Max-Count"] == current["Attribute.Max-Count"]
    assert reply["Send-Queue.Drop-Policy"] == "oldest"


def test_unknown_options_are_not_echoed_and_informational_ones_always_are():
    _, reply = negotiate({"No.Such-Option": 1}, initial_options())
    assert "No.Such-Option" not in reply
    assert reply["Vendor-Identification"] == VENDOR_IDENTIFICATION
    assert reply["Supported-Key-Schemes"] == SUPPORTED_KEY_SCHEMES == "SHA-1"


def test_legacy_names_are_answered_in_the_clients_spelling():
    options, reply = negotiate({"router.packet.max-length": 8192,
                                "router.send-queue.drop-policy": "newest",
                                "router.supported-keyschemes": "x"}, initial_options())
    assert reply["router.packet.max-length"] == 8192
    assert "Packet.Max-Length" not in reply
    assert reply["router.send-queue.drop-policy"] == "newest"
    assert reply["router.supported-keyschemes"] == "SHA-1"
    assert options.max_packet_length == 8192
    assert options.send_drop_policy == "newest"


def test_every_mandatory_option_is_understood():
    mandatory = {
        "Attribute.Max-Count": 100, "Attribute.Name.Max-Length": 100,
        "Attribute.Opaque.Max-Length": 2048, "Attribute.String.Max-Length": 2048,
        "Packet.Max-Length": 2048, "Receive-Queue.Drop-Policy": "largest",
        "Receive-Queue.Max-Length": 5000, "Send-Queue.Drop-Policy": "none",
        "Send-Queue.Max-Length": 5000, "Subscription.Max-Count": 20,
        "Subscription.Max-Length": 2000, "TCP.Send-Immediately": 0,
    }
    options, reply = negotiate(mandatory, initial_options())
    for name, value in mandatory.items():
        assert reply[name] == value, name
    limits = options.limits()
    assert (limits.max_attributes, limits.max_name_length, limits.max_opaque_length,
            limits.max_string_length) == (100, 100, 2048, 2048)
    assert options.send_drop_policy == "none"
    assert options.send_queue_max == 5000


def test_limit_options_in_legacy_spelling_reach_the_decoder_limits():
    options, reply = negotiate({"router.attribute.string.max-length": 4096}, initial_options())
    assert reply["router.attribute.string.max-length"] == 4096
    assert options.limits().max_string_length == 4096


def test_a_negotiated_zero_is_a_limit_not_a_default():
    # an operator who allows no opaque values at all: 0 is what the router enforces
    ranges = OptionRanges(ints={**OptionRanges().ints,
                                "Attribute.Opaque.Max-Length": (0, 0, 0)})
    assert initial_options(ranges).limits().max_opaque_length == 0


def test_qos_renegotiation_starts_from_current_values():
    first, _ = negotiate({"Subscription.Max-Count": 20}, initial_options())
    second, reply = negotiate({"Packet.Max-Length": 4096}, first)
    assert second.max_subscriptions == 20
    assert reply["Subscription.Max-Count"] == 20


def test_configured_ranges():
    ranges = OptionRanges(ints={**OptionRanges().ints, "Subscription.Max-Count": (1, 5, 10)})
    options, reply = negotiate({"Subscription.Max-Count": 50}, initial_options(ranges), ranges)
    assert reply["Subscription.Max-Count"] == 10
    assert initial_options(ranges).max_subscriptions == 5
