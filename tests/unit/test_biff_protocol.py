"""The biff's pure parts: the presence format and the roster (no router;
kept here because the biff's tests live under tests/integration and
tests/gui)."""

from __future__ import annotations

import math

import pytest
from elvin_apps.biff import protocol
from elvin_apps.biff.protocol import PresenceMessage, decode, encode
from elvin_apps.biff.roster import Roster

from elvin.subscription import compile as compile_subscription
from elvin.text import parse_notifications
from elvin.values import Int64, check_notification

AVIS_EXAMPLE = """\
Client-Id: "8146eae7b84334da7"
Distribution: "world"
Groups: "|elvin|ticker-dev|"
Presence-Info: "update"
Presence-Protocol: 1000
Status: "unavailable"
Status-Duration: 0
Status-Text: "Do not disturb"
User: "matthew@home"
---
"""


def test_encode_is_the_presence_format_and_decodes_back():
    attrs = encode("update", user="alice", client_id="c1", groups=("coffee", "elvin"),
                   status="coffee", text="kitchen", duration=12.7, lifetime=0.9)
    check_notification(attrs)   # valid Elvin values
    assert attrs == {"Presence-Protocol": 1000, "Presence-Info": "update", "User": "alice",
                     "Client-Id": "c1", "Groups": "|coffee|elvin|", "Status": "coffee",
                     "Status-Text": "kitchen", "Status-Duration": 12, "Biff-Lifetime": 900}
    assert decode(attrs) == PresenceMessage("update", "alice", "c1", "coffee", "kitchen", 12,
                                            ("coffee", "elvin"), 0.9)
    request = encode("request", user="bob", client_id="c2", groups=("coffee",))
    assert "Status" not in request
    message = decode(request)
    assert message.asks and message.status == "" and not message.departs
    with pytest.raises(ValueError):
        encode("hello", user="a", client_id="c", groups=("coffee",), status="x")
    with pytest.raises(ValueError):
        encode("update", user="a", client_id="c", groups=("coffee",))


def test_a_real_presence_client_message_decodes():
    [attrs] = parse_notifications(AVIS_EXAMPLE)
    message = decode(attrs)
    assert message.user == "matthew@home" and message.status == "unavailable"
    assert message.groups == ("elvin", "ticker-dev") and message.lifetime is None
    assert message.key == "8146eae7b84334da7"


def test_the_subscription_matches_the_domain_only():
    sub = compile_subscription(protocol.subscription("coffee"))
    base = encode("update", user="a", client_id="c", groups=("coffee",), status="coffee")
    assert sub.matches(base)
    assert sub.matches(base | {"Groups": "|Elvin|COFFEE|"})
    assert not sub.matches(base | {"Groups": "|coffeex|"})
    assert not sub.matches(base | {"Presence-Protocol": 2000})
    assert not sub.matches(base | {"Presence-Protocol": "1000"})
    assert not sub.matches({k: v for k, v in base.items() if k != "Groups"})
    odd = protocol.subscription('we "quote" \\ this')
    assert compile_subscription(odd).matches(base | {"Groups": '|we "quote" \\ this|'})


@pytest.mark.parametrize("attrs", [
    {},
    {"Presence-Protocol": 999, "User": "a", "Status": "x"},
    {"Presence-Protocol": True, "User": "a", "Status": "x"},
    {"Presence-Protocol": 1000.0, "User": "a", "Status": "x"},
    {"Presence-Protocol": 1000, "Status": "x"},
    {"Presence-Protocol": 1000, "User": "", "Status": "x"},
    {"Presence-Protocol": 1000, "User": "\x00\x01\u202e", "Status": "x"},
    {"Presence-Protocol": 1000, "User": "a"},
    {"Presence-Protocol": 1000, "User": "a", "Status": 3},
    {"Presence-Protocol": 1000, "User": ["a"], "Status": "x"},
])
def test_garbage_decodes_to_none(attrs):
    assert decode(attrs) is None


def test_odd_values_are_cleaned_up():
    message = decode({"Presence-Protocol": Int64(1999), "User": " bob\n\tthe\x07 builder ",
                      "Client-Id": b"raw", "Status": "COFFEE", "Presence-Info": "weird",
                      "Status-Text": "x" * 10_000, "Status-Duration": -5,
                      "Biff-Lifetime": 10**12, "Groups": "||a||a|" + "g" * 1000 + "|"})
    assert message.user == "bob the builder" and message.client_id == ""
    assert message.key == "user:bob the builder"
    assert message.status == "coffee" and message.info == "update"
    assert len(message.text) == protocol.MAX_TEXT and message.text.endswith("…")
    assert message.duration == 0
    assert message.lifetime == protocol.MAX_LIFETIME_MS / 1000
    assert message.groups[0] == "a" and len(message.groups) == 2
    assert len(message.groups[1]) == protocol.MAX_GROUP
    assert protocol.clean("\x1b[31mred\x1b[0m \x1b]0;title\x07ok", 20) == "red ok"


def test_roster_lifecycle():
    roster = Roster()
    assert roster.set_local("me", "me", "online", "", 0.0)
    bob = decode(encode("initial", user="bob", client_id="b", groups=("coffee",),
                        status="coffee", duration=30))
    assert roster.apply(bob, now=100.0, lifetime=1.0)
    [member] = [m for m in roster.members() if m.user == "bob"]
    assert member.since == 70.0 and member.expires == 101.0
    # a refresh changes nothing visible, but extends the lifetime
    assert not roster.apply(bob, now=100.5, lifetime=1.0)
    assert roster.get("b").expires == 101.5 and roster.get("b").since == 70.0
    assert roster.next_expiry() == 101.5
    assert roster.expire(101.0) == []
    assert [m.user for m in roster.expire(101.5)] == ["bob"]
    assert roster.next_expiry() is None and len(roster) == 1
    # nobody else may speak for the local entry
    fake = decode(encode("update", user="mallory", client_id="me", groups=("coffee",),
                         status="coffee"))
    assert not roster.apply(fake, 1.0, 1.0) and roster.get("me").user == "me"
    # a departure removes at once
    roster.apply(bob, 200.0, 5.0)
    gone = decode(encode("update", user="bob", client_id="b", groups=("coffee",),
                         status="offline"))
    assert roster.apply(gone, 200.1, 5.0) and "b" not in roster
    assert roster.get("me").expires == math.inf


def test_roster_counts_a_user_once_and_is_bounded():
    roster = Roster(max_members=3)
    roster.set_local("me", "ann", "coffee", "", 0.0)
    for i, key in enumerate(("x", "y", "z")):
        roster.apply(decode(encode("update", user="ann" if key == "x" else key,
                                   client_id=key, groups=("c",), status="coffee")),
                     now=float(i), lifetime=10.0)
    assert len(roster) == 3 and "x" not in roster      # x expired first: evicted
    assert [m.key for m in roster.with_status("coffee")] == ["me", "y", "z"]
    with pytest.raises(ValueError):
        Roster(0)
