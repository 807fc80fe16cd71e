"""The mobility protocol's encodings and checks (sans-IO), and the client's
duplicate suppression and merge order."""

from __future__ import annotations

import pytest

from elvin.errors import ProtocolError
from elvin.keys import Keys
from elvin.mobility import protocol as P
from elvin.mobility.buffer import ClientHandler
from elvin.mobility.client import MobileConnection, MobileSubscription
from elvin.mobility.proxy import ProxyConfig, canonical
from elvin.protocol import SubAddRqst, TestConn, frame_packet
from elvin.router.config import ConfigError, config_from_dict
from elvin.subscription import parse
from elvin.values import Int64


def test_batches_round_trip_every_value_type():
    entries = [({"s": "ü", "i": 1, "l": Int64(2), "f": 0.5, "o": b"\x00\xff"}, [0, 3]),
               ({"x": "y" * 1000}, [7])] * 50
    blobs = P.encode_batches(entries, batch_bytes=4096)
    assert len(blobs) > 1
    decoded = [e for blob in blobs for e in P.decode_batch(blob)]
    assert [(a, list(ids)) for a, ids in decoded] == [(a, list(ids)) for a, ids in entries]
    assert type(decoded[0][0]["l"]) is Int64


def test_empty_buffer_is_one_empty_batch():
    assert P.encode_batches([]) == [b""]
    assert P.decode_batch(b"") == []


@pytest.mark.parametrize("blob", [b"\x00\x00", b"\x00\x00\x00\x05\x00", b"\xff\xff\xff\xff",
                                  P.encode_entry({"a": 1}, [1])[:-3]])
def test_garbled_batches_raise_protocol_error(blob):
    with pytest.raises(ProtocolError):
        P.decode_batch(blob)


def test_subscriptions_with_keys_of_every_scheme_round_trip():
    raw = bytes(range(256))          # every byte value, NUL and 0xff included
    keys = (Keys.for_subscription(producer=[raw, b"p"], consumer=[raw, "c\u00fc"])
            | Keys.of(99, [b"unknown scheme"]))
    specs = [P.SubscriptionSpec(0, "require(a)"),
             P.SubscriptionSpec(5, 'b == "\u00fc"', False, keys),
             P.SubscriptionSpec(2**31 - 1, "require(c)", True, Keys.consumer(b"\x00"))]
    blob = P.encode_subscriptions(specs)
    assert isinstance(blob, bytes)
    decoded = P.decode_subscriptions(blob, 10)
    assert decoded == specs and decoded[1].keys == keys
    assert raw.hex() not in repr(decoded[1]) and "keys" not in repr(decoded[1])
    assert P.decode_subscriptions(b"", 10) == []


@pytest.mark.parametrize("blob, words", [
    (b"\x00\x00\x00", "ends inside"),
    (P.encode_subscriptions([P.SubscriptionSpec(1, "require(a)")])[:-2], "ends inside"),
    (frame_packet(TestConn()), "not a SubAddRqst"),
    (frame_packet(SubAddRqst(2**31, "require(a)")), "0..2"),
    (P.encode_subscriptions([P.SubscriptionSpec(1, "require(a)")] * 2), "repeated"),
    (P.encode_subscriptions([P.SubscriptionSpec(1, " ")]), "expression"),
])
def test_garbled_subscription_packets_are_malformed(blob, words):
    with pytest.raises(P.MalformedRequest, match=words):
        P.decode_subscriptions(blob, 10)


def test_subscription_lists_are_checked():
    specs = [P.SubscriptionSpec(0, "require(a)"), P.SubscriptionSpec(5, "b == 1", False)]
    assert P.decode_subscriptions(P.encode_subscriptions(specs), 10) == specs
    # the first version's JSON (no keys) is still understood
    assert P.decode_subscriptions('[{"id": 0, "expression": "require(a)"}, {"id": 5, '
                                  '"expression": "b == 1", "accept_insecure": false}]',
                                  10) == specs
    with pytest.raises(P.MalformedRequest, match="opaque"):
        P.decode_subscriptions(42, 10)
    for text, words in [("{", "not JSON"), ("{}", "JSON list"), ("[1]", "object"),
                        ('[{"id": -1, "expression": "a"}]', "integer"),
                        ('[{"id": true, "expression": "a"}]', "integer"),
                        ('[{"id": 1, "expression": ""}]', "expression"),
                        ('[{"id": 1, "expression": "a", "accept_insecure": 1}]', "true or"),
                        ('[{"id": 1, "expression": "a"}, {"id": 1, "expression": "b"}]',
                         "repeated")]:
        with pytest.raises(P.MalformedRequest, match=words):
            P.decode_subscriptions(text, 10)
    with pytest.raises(P.MobilityError) as info:
        P.decode_subscriptions(P.encode_subscriptions(specs), 1)
    assert info.value.code == "limit"


def test_request_attribute_checks():
    assert P.get_str({"a": "x"}, "a") == "x"
    assert P.get_str({}, "a", required=False) is None
    for attrs in ({}, {"a": 1}, {"a": ""}, {"a": "x" * 300}):
        with pytest.raises(P.MalformedRequest, match="a"):
            P.get_str(attrs, "a")
    with pytest.raises(P.MalformedRequest):
        P.get_number({"n": "1"}, "n")
    with pytest.raises(P.MalformedRequest):
        P.get_number({"n": float("nan")}, "n")
    with pytest.raises(P.MalformedRequest, match="20-byte"):
        P.get_reply_key({P.REPLY_KEY: b"123"})


def test_quote_makes_valid_string_literals():
    for text in ['plain', 'with "quotes"', "back\\slash", "it's"]:
        node = parse(f"x == {P.quote(text)}")
        assert node.children[1].value == text


def test_proxy_ids_compare_canonically():
    assert canonical("elvin://127.0.0.1:2917") == canonical(
        "elvin:4.0/tcp,none,xdr/127.0.0.1:2917")
    assert canonical("proxy-A") == "proxy-A"


class _N:
    def __init__(self, attrs, secure=False):
        self.attributes = attrs
        self.secure = secure


def test_handler_buffers_once_per_notification_and_honours_the_quota():
    handler = ClientHandler("c", "s", quota=3, expiry=10, specs=[])
    handler.arm()
    for seq in range(5):
        attrs = {"Seq": seq}
        handler.on_notification(0, _N(attrs))
        handler.on_notification(2, _N(attrs))     # same delivery, second subscription
    assert [seq for seq, _ in handler.seal()] == [0, 1, 2, 3, 4]
    assert handler.drop_oldest(handler.over_quota()) == 2
    entries = [P.decode_batch(data)[0] for _, data in handler.entries]
    assert [(a["Seq"], ids) for a, ids in entries] == [(2, [0, 2]), (3, [0, 2]), (4, [0, 2])]
    assert handler.dropped == 2


def test_handler_buffers_nothing_before_it_is_armed_and_cuts_at_a_fence():
    handler = ClientHandler("c", "s", quota=100, expiry=10, specs=[])
    handler.on_notification(0, _N({"Seq": -1}))   # before the move-out reply came back
    handler.arm()
    for seq in range(3):
        handler.on_notification(0, _N({"Seq": seq}))
    handler.seal()
    handler.on_notification(0, _N({"Seq": 3}))
    handler.fence("f")                              # falls after 3, before 4
    handler.on_notification(0, _N({"Seq": 4}))
    handler.seal()
    cut = handler.cut("f")
    assert [P.decode_batch(d)[0][0]["Seq"] for d in cut] == [0, 1, 2, 3]
    assert handler.cut("unknown") is None and handler.buffered == 5


def test_proxy_config_is_validated():
    with pytest.raises(ValueError):
        ProxyConfig(quota=0).validate()
    with pytest.raises(ValueError):
        ProxyConfig(expiry=0).validate()


def test_dedup_by_producer_and_sequence():
    mc = MobileConnection(None, dedup=("Producer", "Seq"))
    msub = MobileSubscription(mc, 0, "require(Seq)", True, 100)
    mc._subs[0] = msub
    seen = []
    mc.add_listener(lambda n: seen.append((n.get("Producer"), n.get("Seq"))))
    for attrs in [{"Producer": "a", "Seq": 1}, {"Producer": "a", "Seq": 1},
                  {"Producer": "b", "Seq": 1}, {"Seq": 2}, {"Seq": 2},
                  {"Producer": "a", "Seq": "1"}, {"Producer": "a", "Seq": 1}]:
        mc._deliver(attrs, [0], False)
    assert seen == [("a", 1), ("b", 1), (None, 2), (None, 2), ("a", "1")]
    assert mc.duplicates == 2 and msub.pending == 5


def test_without_dedup_duplicates_are_delivered():
    mc = MobileConnection(None)
    seen = []
    mc.add_listener(lambda n: seen.append(n["Seq"]))
    mc._deliver({"Producer": "a", "Seq": 1}, [], False)
    mc._deliver({"Producer": "a", "Seq": 1}, [], False)
    assert seen == [1, 1] and mc.duplicates == 0


def test_router_config_mobility_settings():
    config = config_from_dict({"mobility": True, "mobility-quota": 50,
                               "mobility_expiry": 2.5})
    assert config.mobility and config.mobility_quota == 50 and config.mobility_expiry == 2.5
    with pytest.raises(ConfigError, match="mobility"):
        config_from_dict({"mobility": "yes"})
    with pytest.raises(ConfigError, match="mobility"):
        config_from_dict({"mobility-quota": 0})
