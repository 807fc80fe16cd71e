"""``decode_sub_add_rqst``, the router's fast path for a registration burst:
whatever it returns is what ``decode_packet`` returns, and it hands back
(``None``) every body it does not plainly decode, for ``decode_packet`` to
decode or to refuse with the exact error."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from elvin.errors import ProtocolError
from elvin.keys import EMPTY_KEYS, Keys, KeyScheme
from elvin.protocol import SubAddRqst, SubDelRqst, encode_packet
from elvin.protocol.limits import Limits
from elvin.protocol.xdr import decode_packet, decode_sub_add_rqst


def _packet(text: str, accept: bool = True, keys: Keys = EMPTY_KEYS) -> bytes:
    return encode_packet(SubAddRqst(7, text, accept, keys))


@given(st.text(max_size=40).filter(lambda t: "\0" not in t), st.booleans(),
       st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_the_fast_path_gives_the_generic_decoders_packet(text, accept, xid):
    body = encode_packet(SubAddRqst(xid, text, accept, EMPTY_KEYS))
    fast = decode_sub_add_rqst(body)
    assert fast == decode_packet(body)
    assert repr(fast) == repr(decode_packet(body))


def _refused(body: bytes) -> None:
    """Not decoded by the fast path, and an error of the generic decoder."""
    assert decode_sub_add_rqst(body) is None
    try:
        decode_packet(body)
    except ProtocolError:
        return
    raise AssertionError("decode_packet accepted a body the fast path refused")


def test_malformed_bodies_are_left_to_the_generic_decoder():
    body = _packet('Group == "g1" && require(Message)')
    _refused(body + b"\0\0\0\0")                        # trailing data
    _refused(body[:-4])                                 # truncated
    for cut in range(4, len(body)):
        assert decode_sub_add_rqst(body[:cut]) is None
    _refused(body[:-8] + struct.pack(">ii", 2, 0))      # a boolean that is not 0 or 1
    bad = bytearray(body)
    bad[12] = 0xFF                                      # not UTF-8
    _refused(bytes(bad))
    bad[12] = 0                                         # a NUL in the expression
    _refused(bytes(bad))


def test_what_the_fast_path_does_not_take():
    keyed = _packet("a == 1", keys=Keys.of(KeyScheme.SHA1_CONSUMER, [b"k"]))
    assert decode_sub_add_rqst(keyed) is None
    assert decode_packet(keyed).keys
    assert decode_sub_add_rqst(encode_packet(SubDelRqst(1, 2))) is None
    assert decode_sub_add_rqst(bytearray(_packet("a == 1"))) is None
    body = _packet("a == 1")
    small = Limits(max_packet_length=len(body) - 1)
    assert decode_sub_add_rqst(body, small) is None
    _packet_over_the_limit_is_refused(body, small)


def _packet_over_the_limit_is_refused(body: bytes, limits: Limits) -> None:
    try:
        decode_packet(body, limits)
    except ProtocolError:
        return
    raise AssertionError("a packet over max_packet_length was decoded")
