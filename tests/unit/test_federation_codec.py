"""Federation packets, the federation SubAST form, pull filters and config."""

from __future__ import annotations

import random
import struct

import pytest

from elvin.errors import ProtocolError, SubscriptionError
from elvin.federation.config import (
    AcceptSpec,
    ConnectSpec,
    FederationConfig,
    FederationConfigError,
    Filter,
    federation_from_dict,
)
from elvin.federation.packets import (
    Ack,
    FedConnRply,
    FedConnRqst,
    FedNotify,
    FedSubReplace,
    decode_fed_packet,
    encode_fed_packet,
    fed_notify_frame,
    keys_block,
    routing_block,
)
from elvin.federation.pullfilter import compile_pull_filter, compute_pull_filter
from elvin.federation.subast import TRUE_FILTER_AST, decode_subast, encode_subast
from elvin.keys import Keys
from elvin.protocol import (
    ConfConn,
    Disconn,
    DropWarn,
    Nack,
    TestConn,
    encode_attributes,
    encode_packet,
)
from elvin.protocol.limits import LimitError, Limits
from elvin.subscription import parse
from elvin.subscription.ast import Kind, Node, const, name, op
from elvin.values import Int64


def words(*values: int) -> bytes:
    return b"".join(struct.pack(">i", v) for v in values)


def xdr_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">I", len(raw)) + raw + b"\0" * (-len(raw) & 3)


PACKETS = [
    FedConnRqst(1, 1, 0, "router.example.com"),
    FedConnRply(1, "other.example.com"),
    FedSubReplace(2, parse('Group == "chat" && size(Message) > 3 || require(Urgent)')),
    FedSubReplace(3, parse('x < 2L || y >= 1.5 || regex(s, "a+") || !(z != "q")')),
    FedSubReplace(4, True),
    FedSubReplace(5, False),
    FedNotify({"Group": "chat", "n": 1, "big": Int64(1 << 40), "r": 0.5, "o": b"\1\2"},
              True, Keys.producer_notification(b"secret"), ("a", "b")),
    FedNotify({"x": 1}, False, Keys(), ()),
    Ack(7),
    Nack(3, 2101, "bad", ("arg", 1)),
    Disconn(4, "protocol violation"),
    TestConn(),
    ConfConn(),
    DropWarn(),
]


@pytest.mark.parametrize("packet", PACKETS, ids=lambda p: type(p).__name__)
def test_round_trip(packet):
    assert decode_fed_packet(encode_fed_packet(packet)) == packet


# -- vectors derived by hand from the draft (6.2) and Avis's XdrAstCoding -------------

def test_fed_conn_rqst_vector():
    assert encode_fed_packet(FedConnRqst(1, 1, 0, "ab")) == (
        words(192, 1, 1, 0) + xdr_string("ab"))


def test_fed_conn_rply_vector():
    assert encode_fed_packet(FedConnRply(9, "abcde")) == words(193, 9) + xdr_string("abcde")


def test_ack_vector():
    assert encode_fed_packet(Ack(0x01020304)) == words(65, 0x01020304)


def test_fed_sub_replace_vector_uses_value_typecodes():
    # a == 1: EQUALS(8) base 0, 2 children; NAME(1) base string(4); INT32(2) base int32(1)
    body = encode_fed_packet(FedSubReplace(5, parse("a == 1")))
    assert body == (words(194, 5) + words(8, 0, 2) + words(1, 4) + xdr_string("a")
                    + words(2, 1, 1))


def test_subast_leaf_vectors():
    assert encode_subast(const(Kind.INT64, Int64(-2))) == words(3, 2) + struct.pack(">q", -2)
    assert encode_subast(const(Kind.REAL64, 1.5)) == words(4, 3) + struct.pack(">d", 1.5)
    assert encode_subast(const(Kind.STRING, "xyz")) == words(5, 4) + xdr_string("xyz")


def test_false_is_a_lone_empty_typecode():
    assert encode_subast(False) == words(0)
    assert decode_subast(words(0)) == (False, 4)


def test_true_travels_as_a_tautology_and_comes_back_true():
    data = encode_subast(True)
    assert data == encode_subast(TRUE_FILTER_AST)
    assert decode_subast(data) == (True, len(data))
    assert data == words(8, 0, 2) + words(2, 1, 1) * 2
    assert compile_pull_filter(TRUE_FILTER_AST) is True


def test_fed_notify_vector():
    attrs = {"a": 1}
    body = encode_fed_packet(FedNotify(attrs, True, Keys(), ("r1", "r0")))
    assert body == (words(195, 1) + xdr_string("a") + words(1, 1) + words(1) + words(0)
                    + words(2) + xdr_string("r1") + xdr_string("r0"))
    framed = fed_notify_frame(encode_attributes(attrs), True, keys_block(Keys()),
                              routing_block(("r1", "r0")))
    assert framed == struct.pack(">I", len(body)) + body


def test_avis_func_equals_of_two_operands_reads_as_equals():
    # Avis encodes ``a == b`` as func_equals (65) with two children
    data = words(65, 0, 2) + words(2, 1, 3) + words(1, 4) + xdr_string("x")
    node, _ = decode_subast(data)
    assert node == op(Kind.EQUALS, const(Kind.INT32, 3), name("x"))


def test_empty_in_an_or_is_dropped_and_elsewhere_refused():
    data = words(16, 0, 2) + words(0) + words(19, 0, 1) + words(64, 0, 1) + words(1, 4) \
        + xdr_string("x")
    node, _ = decode_subast(data)
    assert node == op(Kind.NOT, op(Kind.FUNC_REQUIRE, name("x")))
    with pytest.raises(ProtocolError, match="empty_tc"):
        decode_subast(words(18, 0, 2) + words(0) + words(0))


# -- garbage -----------------------------------------------------------------------------

@pytest.mark.parametrize("data, message", [
    (words(194, 1) + words(99, 0, 0), "unknown SubAST typecode 99"),
    (words(194, 1) + words(1, 1, 5), "value typecode 1"),
    (words(194, 1) + words(18, 3, 0), "value typecode 3"),
    (words(194, 1) + words(18, 0, -1), "negative array count"),
    (words(194, 1) + words(18, 0, 1000000), "cannot fit"),
    (words(194, 1) + words(1, 4, 100) + b"ab", "exceeds"),
    (words(195, 0, 2), "boolean"),
    (words(192, 1, 1), "truncated"),
    (words(65, 1, 2), "trailing"),
    (words(999), "unknown or unexpected packet type 999"),
    (b"\0\0", "too short"),
])
def test_garbage_is_a_protocol_error(data, message):
    with pytest.raises(ProtocolError, match=message):
        decode_fed_packet(data)


def test_deep_nesting_is_limited():
    data = words(194, 1) + words(19, 0, 1) * 300 + words(1, 4) + xdr_string("x")
    with pytest.raises(LimitError, match="nesting"):
        decode_fed_packet(data)


def test_wide_pull_filter_is_limited():
    """A node's child count is checked against max_array_length, as the
    client protocol's SubASTs are (they share xdrprim.read_count)."""
    limits = Limits(max_array_length=16)
    data = words(194, 1) + words(18, 0, 17) + words(0) * 17
    with pytest.raises(LimitError, match="17 items exceed the limit of 16"):
        decode_fed_packet(data, limits)


def test_huge_routing_list_is_limited():
    limits = Limits(max_array_length=16)
    packet = FedNotify({"x": 1}, True, Keys(), tuple(f"d{i}" for i in range(17)))
    with pytest.raises(LimitError):
        decode_fed_packet(encode_fed_packet(packet), limits)


def test_error_carries_packet_id_and_xid():
    with pytest.raises(ProtocolError) as info:
        decode_fed_packet(words(194, 42) + words(99))
    assert info.value.packet_id == 194 and info.value.xid == 42


def test_limit_error_carries_packet_id_and_xid():
    """Federation packets go through the client protocol's decode_packet (with
    federation's packet table), so a packet over the length limit is
    reported with its id and xid too."""
    data = encode_fed_packet(FedConnRply(7, "x" * 64))
    with pytest.raises(LimitError) as info:
        decode_fed_packet(data, Limits(max_packet_length=len(data) - 1))
    assert info.value.packet_id == 193 and info.value.xid == 7


def test_shared_packets_carry_their_xid():
    with pytest.raises(ProtocolError) as info:
        decode_fed_packet(encode_packet(Nack(9, 1, "m", ())) + b"\0\0\0\0")
    assert info.value.packet_id == int(Nack.ID) and info.value.xid == 9
    assert "trailing data after a complete Nack packet" in str(info.value)


def test_random_garbage_never_raises_anything_else():
    rng = random.Random(1234)
    valid = [encode_fed_packet(p) for p in PACKETS]
    for _ in range(3000):
        base = bytearray(rng.choice(valid))
        for _k in range(rng.randint(1, 4)):
            i = rng.randrange(len(base))
            base[i] = rng.randrange(256)
        cut = rng.randint(0, len(base))
        for data in (bytes(base), bytes(base[:cut]), rng.randbytes(rng.randint(0, 64))):
            try:
                decode_fed_packet(data)
            except ProtocolError:
                pass


# -- pull filters ------------------------------------------------------------------------

A, B, C = parse("a == 1"), parse("b == 2"), parse("c == 3")


def test_pull_filter_is_the_or_of_local_and_other_links():
    out = parse("require(x)")
    pull = compute_pull_filter(True, [A, B], [(True, C), (out, A), (False, B), (True, False)])
    assert pull.kind is Kind.OR
    terms = set(pull.children)
    assert {A, B, C} <= terms
    assert Node(Kind.AND, tuple(sorted((out, A), key=encode_subast))) in terms
    assert len(terms) == 4


def test_pull_filter_constants():
    assert compute_pull_filter(False, [A], [(True, True)]) is False
    assert compute_pull_filter(True, [], []) is False
    assert compute_pull_filter(True, [A], [(True, True)]) is True
    incoming = parse("require(ok)")
    assert compute_pull_filter(incoming, [A], [(True, True)]) == incoming
    assert set(compute_pull_filter(incoming, [A], []).children) == {incoming, A}
    assert compute_pull_filter(True, [A, B, C], [], max_disjuncts=2) is True


def test_pull_filters_reach_a_fixed_point_around_a_cycle():
    f, g = parse("require(f)"), parse("require(g)")
    # three routers in a triangle, each with one subscription; every link
    # filtered differently. Iterate the exchange until nothing changes.
    local = {0: [A], 1: [B], 2: [C]}
    outgoing = {(0, 1): f, (1, 2): g, (2, 0): True, (1, 0): True, (2, 1): f, (0, 2): g}
    pulls = {(i, j): False for i in range(3) for j in range(3) if i != j}  # i asked j
    for _round in range(50):
        changed = False
        for (i, j) in list(pulls):
            others = [(outgoing[(i, k)], pulls[(k, i)]) for k in range(3)
                      if k not in (i, j)]
            new = compute_pull_filter(True, local[i], others)
            if new != pulls[(i, j)]:
                pulls[(i, j)] = new
                changed = True
        if not changed:
            break
    else:
        pytest.fail("pull filters never stopped changing")


def test_compile_pull_filter_accepts_constant_trees():
    trivial = op(Kind.EQUALS, const(Kind.INT32, 1), const(Kind.INT32, 1))
    assert compile_pull_filter(trivial) is True
    assert compile_pull_filter(False) is False


# -- configuration -----------------------------------------------------------------------

def test_federation_from_dict_like_elvin_domain_apply():
    config = federation_from_dict({
        "router_domain": "hub", "listen": "ewaf://127.0.0.1:2916",
        "connect": [{"router": "edge", "url": "ewaf://edge:2916",
                     "outgoing": "require(News)", "incoming": False}],
        "accept": [{"router": "other", "outgoing": False, "incoming": True}],
    })
    assert config.listen == ["ewaf://127.0.0.1:2916"]
    assert config.connect == [ConnectSpec("ewaf://edge:2916", "edge", "require(News)", False)]
    assert config.accept == [AcceptSpec("other", False, True)]


@pytest.mark.parametrize("table, key", [
    ({"listen": "elvin://x:1"}, "federation.listen #1"),
    ({"connect": [{"url": "ewaf://x:99999"}]}, "federation.connect #1, url"),
    ({"connect": [{"url": "ewaf://x", "outgoing": "a =="}]}, "federation.connect #1, outgoing"),
    ({"connect": [{"router": "x"}]}, "federation.connect #1, url"),
    ({"accept": [{"router": "x", "incoming": 3}]}, "federation.accept #1, incoming"),
    ({"accept": [{"router": "x"}, {"router": "x"}]}, "federation.accept #2, router"),
    ({"bogus": 1}, "federation.bogus"),
    ({"debounce": -1}, "federation.debounce"),
])
def test_bad_federation_settings_name_the_key(table, key):
    with pytest.raises(FederationConfigError) as info:
        federation_from_dict(table)
    assert info.value.key == key


def test_filter_spellings():
    assert Filter(True).matches({}) and not Filter(False).matches({})
    assert Filter("TRUE").ast is True and Filter(" false ").ast is False
    assert Filter("a > 1").matches({"a": 2}) and not Filter("a > 1").matches({"a": 0})


def test_config_validate_is_idempotent():
    config = FederationConfig(router_domain="x", listen=["ewaf://127.0.0.1:0"])
    assert config.validate() is config and config.enabled


def test_pull_matcher_indexes_terms_and_updates_incrementally():
    from elvin.federation.pullfilter import PullMatcher

    terms = [parse(f'Group == "g{i}" && require(M)') for i in range(200)]
    matcher = PullMatcher()
    assert matcher({"Group": "g1", "M": 1}) is False           # starts as FALSE
    matcher.update(Node(Kind.OR, tuple(terms)))
    assert len(matcher) == 200
    assert matcher({"Group": "g7", "M": 1}) and not matcher({"Group": "g7"})
    assert not matcher({"Group": "g700", "M": 1})
    assert len(matcher.index.candidates({"Group": "g7", "M": 1})) == 1   # indexed
    assert matcher.missing(Node(Kind.OR, (*terms[1:], A))) == [A]
    matcher.update(Node(Kind.OR, (*terms[1:], A)))
    assert not matcher({"Group": "g0", "M": 1}) and matcher({"a": 1})
    matcher.update(True)
    assert matcher({}) and len(matcher) == 0
    matcher.update(Node(Kind.OR, tuple(terms)), max_terms=100)   # too big: TRUE
    assert matcher.constant is True
    with pytest.raises(SubscriptionError):
        matcher.update(Node(Kind.FUNC_SIZE, (const(Kind.INT32, 1),)))
    assert matcher.constant is True                            # unchanged


def test_a_peers_slow_patterns_are_suspended_not_run_per_notification():
    """A peer chooses its pull filter's patterns: 100 terms whose regex
    backtracks until its time limit would hold this router's loop for 100 x
    20 ms on every notification forwarded. Each term that overruns its own
    limit is suspended (``suspension.charge_overrun``): the next notification
    runs none of them, and a cheap term of the same filter is never cut
    short by them."""
    from elvin.federation.pullfilter import PullMatcher
    from elvin.subscription.suspension import Suspended

    matcher = PullMatcher()
    slow = [parse(f'regex(Message, "^(a|aa|a{{{k}}})+$")') for k in range(1, 4)]
    matcher.update(Node(Kind.OR, (*slow, parse('regex(Message, "b$") && Late == 1'))))
    assert matcher({"Message": "a" * 40 + "b", "Late": 1}) is True
    assert matcher.overruns == 3
    assert all(type(matcher.subs[t].evaluate) is Suspended for t in slow)
    assert matcher({"Message": "a" * 40 + "b", "Late": 2}) is False
    assert matcher.overruns == 3                    # suspended: not run again


def test_subast_keeps_precedence_grouping_and_the_sign_of_zero():
    """Issue 18: a tree parsed with the language's precedence travels as the
    same tree, and a -0.0 literal stays -0.0 (a different subscription from
    0.0 at both ends)."""
    tree = parse("A | 2 + 1 == B && C == -0.0 && D % 2.5 == 2.0")
    data = encode_subast(tree)
    assert struct.pack(">iid", int(Kind.REAL64), 3, -0.0) in data
    decoded, end = decode_subast(data)
    assert end == len(data)
    assert decoded == tree and decoded != parse("A | 2 + 1 == B && C == 0.0 && D % 2.5 == 2.0")
    left = decoded.children[0].children[0]
    assert left.kind is Kind.ADD and left.children[0].kind is Kind.BIT_OR
    from elvin.subscription import compile as compile_subscription
    sub = compile_subscription(decoded)
    assert sub.evaluate({"A": 4, "B": 7, "C": -0.0, "D": 7.0}) is True
    assert sub.evaluate({"A": 4, "B": 7, "C": 0.0, "D": 7.0}) is False
