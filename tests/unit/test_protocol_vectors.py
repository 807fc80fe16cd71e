"""Byte vectors written by hand from the encoding rules of spec 8.2.3 (not
produced by the encoder): each is encoded and decoded both ways.

Reading aid: every group of 8 hex digits is one 4-byte XDR word; strings are
a length word then the UTF-8 bytes zero-padded to a word boundary.
"""

from __future__ import annotations

import pytest

from elvin.keys import Keys, KeyScheme
from elvin.protocol import (
    ConfConn,
    ConnRply,
    ConnRqst,
    Disconn,
    DisconnRqst,
    DropWarn,
    Nack,
    NotifyDeliver,
    NotifyEmit,
    QnchAddRqst,
    SecRqst,
    SubAddNotify,
    SubAddRqst,
    SubDelNotify,
    SubRply,
    TestConn,
    UNotify,
    decode_packet,
    encode_ast,
    encode_packet,
    encode_value,
    frame,
)
from elvin.subscription.ast import Kind, Node
from elvin.values import Int64


def h(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


VECTORS = [
    # 8.2.3.1 packet ids of the three empty packets
    ("TestConn", TestConn(), "0000003f"),
    ("DropWarn", DropWarn(), "0000003e"),
    ("ConfConn", ConfConn(), "00000040"),
    ("DisconnRqst", DisconnRqst(9), "00000033 00000009"),
    # NotifyEmit {"a": "b"}, deliver_insecure, no keys
    ("NotifyEmit string", NotifyEmit({"a": "b"}, True),
     "00000038"            # pkt_id NotifyEmit = 56
     "00000001"            # 1 attribute
     "00000001 61000000"   # name "a" + 3 bytes of padding
     "00000004"            # typecode string
     "00000001 62000000"   # "b"
     "00000001"            # deliver_insecure = true
     "00000000"),          # keys: no scheme
    # ConnRqst xid 1, version 4.0, option Packet.Max-Length = 8192
    ("ConnRqst options", ConnRqst(1, 4, 0, {"Packet.Max-Length": 8192}),
     "00000031 00000001"   # ConnRqst = 49, xid 1
     "00000004 00000000"   # uint8 major 4, minor 0 as 4-byte words
     "00000001"            # 1 option
     "00000011"            # name length 17
     "5061636b 65742e4d 61782d4c 656e6774 68000000"   # "Packet.Max-Length" + pad
     "00000001 00002000"   # int32 8192
     "00000000 00000000"), # nfn_keys, sub_keys empty
    ("ConnRply", ConnRply(1, {"x": Int64(-1)}),
     "00000032 00000001 00000001 00000001 78000000"
     "00000002 ffffffff ffffffff"),   # int64 -1
    # Nack xid 7, PARSE_ERROR (2101 = 0x835), "bad %1", args int32 5 and "foo"
    ("Nack with args", Nack(7, 2101, "bad %1", (5, "foo")),
     "00000030 00000007 00000835"
     "00000006 62616420 25310000"     # "bad %1" + 2 pad
     "00000002"                       # 2 args
     "00000001 00000005"              # int32 5
     "00000004 00000003 666f6f00"),   # string "foo"
    # SubAddRqst xid 2 "x == 1" accept_insecure, no keys
    ("SubAddRqst", SubAddRqst(2, "x == 1", True),
     "0000003a 00000002 00000006 78203d3d 20310000 00000001 00000000"),
    # SubRply xid 2, subscription id 0x0102030405060708 as an 8-byte id64
    ("SubRply", SubRply(2, 0x0102030405060708),
     "0000003d 00000002 01020304 05060708"),
    # id64 with the top bit set decodes unsigned
    ("SubRply high id", SubRply(0xFFFFFFFF, 2**64 - 1),
     "0000003d ffffffff ffffffff ffffffff"),
    # Disconn redirect (reason 2) to "elvin://b"
    ("Disconn", Disconn(2, "elvin://b"),
     "00000035 00000002 00000009 656c7669 6e3a2f2f 62000000"),
    # SubAddNotify: secure [1], insecure [], term 5, AST  x == 1
    ("SubAddNotify", SubAddNotify((1,), (), 5, Node(Kind.EQUALS, (
        Node(Kind.NAME, value="x"), Node(Kind.INT32, value=1)))),
     "00000054"
     "00000001 00000000 00000001"     # secure_quench_ids [1]
     "00000000"                       # insecure_quench_ids []
     "00000000 00000005"              # term_id 5
     "00000008 00000002"              # equals_tc, 2 children
     "00000001 00000001 78000000"     # name_tc "x"
     "00000002 00000001"),            # int32_tc 1
    ("SubDelNotify", SubDelNotify((3, 4), 6),
     "00000056 00000002 00000000 00000003 00000000 00000004 00000000 00000006"),
    # NotifyEmit {"n": 1}, deliver_insecure false, SHA-1 producer key b"k"
    ("NotifyEmit producer key",
     NotifyEmit({"n": 1}, False, Keys.of(KeyScheme.SHA1_PRODUCER, [b"k"])),
     "00000038 00000001 00000001 6e000000 00000001 00000001"
     "00000000"                       # deliver_insecure = false
     "00000001"                       # 1 key scheme
     "00000002"                       # scheme id 2 (producer)
     "00000001"                       # 1 key set
     "00000001"                       # 1 key
     "00000001 6b000000"),            # opaque "k"
    # NotifyDeliver {"n": 1.0}, secure [], insecure [3]
    ("NotifyDeliver", NotifyDeliver({"n": 1.0}, (), (3,)),
     "00000039 00000001 00000001 6e000000"
     "00000003 3ff00000 00000000"     # real64 1.0
     "00000000"                       # secure_matches []
     "00000001 00000000 00000003"),   # insecure_matches [3]
    # SecRqst: a dual-scheme producer key travels with an empty consumer set
    ("SecRqst dual", SecRqst(1, add_nfn_keys=Keys.of(KeyScheme.SHA1_DUAL, [b"p"], [b"c"])),
     "00000036 00000001"
     "00000001 00000001 00000002"     # 1 scheme: dual (1), 2 key sets
     "00000001 00000001 70000000"     # set 0: "p"
     "00000001 00000001 63000000"     # set 1: "c"
     "00000000 00000000 00000000"),   # del_nfn, add_sub, del_sub
    # UNotify 4.0 {"a": opaque 01 02}, deliver_insecure, no keys
    ("UNotify", UNotify(4, 0, {"a": b"\x01\x02"}, True),
     "00000020 00000004 00000000 00000001 00000001 61000000"
     "00000005 00000002 01020000 00000001 00000000"),
    ("QnchAddRqst", QnchAddRqst(3, ("a", "bc"), True),
     "00000050 00000003 00000002 00000001 61000000 00000002 62630000"
     "00000001 00000000"),
    # a multi-byte UTF-8 value: "é" is c3 a9
    ("NotifyEmit utf-8", NotifyEmit({"é": "é"}),
     "00000038 00000001 00000002 c3a90000 00000004 00000002 c3a90000"
     "00000001 00000000"),
]


@pytest.mark.parametrize(("label", "packet", "hex_bytes"), VECTORS,
                         ids=[v[0] for v in VECTORS])
def test_encode_matches_hand_computed_bytes(label, packet, hex_bytes):
    assert encode_packet(packet) == h(hex_bytes)


@pytest.mark.parametrize(("label", "packet", "hex_bytes"), VECTORS,
                         ids=[v[0] for v in VECTORS])
def test_decode_hand_computed_bytes(label, packet, hex_bytes):
    assert decode_packet(h(hex_bytes)) == packet


def test_int64_typed_value_example_of_8_2_3_2():
    # "an int64 of value 1024L ... four bytes for the type id of 2 and eight
    # bytes for the value"
    assert encode_value(Int64(1024)) == h("00000002 00000000 00000400")
    assert encode_value(1024) == h("00000001 00000400")       # plain int fits int32
    assert encode_value(2**31) == h("00000002 00000000 80000000")
    assert encode_value(-2.5) == h("00000003 c0040000 00000000")
    assert encode_value("") == h("00000004 00000000")
    assert encode_value(b"abcd") == h("00000005 00000004 61626364")


def test_decoded_int64_stays_int64_even_when_small():
    packet = decode_packet(h("00000038 00000001 00000001 76000000"
                             "00000002 00000000 00000400 00000001 00000000"))
    assert packet.attributes == {"v": 1024}
    assert type(packet.attributes["v"]) is Int64


def test_frame_header_is_the_body_length():
    assert frame(TestConn()) == h("00000004 0000003f")
    assert frame(SubRply(2, 1)) == h("00000010 0000003d 00000002 00000000 00000001")


def test_ast_literals():
    assert encode_ast(Node(Kind.STRING, value="ab")) == h("00000005 00000002 61620000")
    assert encode_ast(Node(Kind.INT64, value=Int64(1))) == h("00000003 00000000 00000001")
    assert encode_ast(Node(Kind.REAL64, value=0.5)) == h("00000004 3fe00000 00000000")
    assert encode_ast(Node(Kind.EMPTY)) == h("00000000 00000000")
    # require(x): func_require_tc 64 with one child
    assert encode_ast(Node(Kind.FUNC_REQUIRE, (Node(Kind.NAME, value="x"),))) == h(
        "00000040 00000001 00000001 00000001 78000000")


def test_nonzero_padding_is_accepted_as_avis_does():
    # name "a" padded with "xyz" instead of zeros
    packet = decode_packet(h("00000038 00000001 00000001 61787a7a 00000001 00000005"
                             "00000001 00000000"))
    assert packet == NotifyEmit({"a": 5}, True)
