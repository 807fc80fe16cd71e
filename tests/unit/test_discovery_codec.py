"""ERDP packets (discovery draft 6.1.2): exact bytes, round trips, garbage."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elvin.discovery import settings_from_env
from elvin.discovery.codec import (
    MAX_DATAGRAM,
    DiscoveryDecodeError,
    SvrAdvt,
    SvrAdvtClose,
    SvrRqst,
    decode,
    encode,
    is_compatible,
)


def u32(*values: int) -> bytes:
    return b"".join(struct.pack(">I", v) for v in values)


def xdr_string(text: str) -> bytes:
    raw = text.encode()
    return u32(len(raw)) + raw + b"\0" * (-len(raw) % 4)


def test_svr_rqst_bytes_are_the_drafts():
    # pkt_id 16, then three uint8 as 4-byte XDR unsigned ints
    assert encode(SvrRqst(locality=2)) == u32(16, 4, 0, 2)
    assert decode(u32(16, 4, 0, 2)) == SvrRqst(2, major_version=4, minor_version=0)


def test_svr_advt_bytes_are_the_drafts():
    advert = SvrAdvt("router-1", ("elvin://10.0.0.1:2917", "elvin://h:1"), scope="lab",
                     default=True, revision=7)
    expected = (u32(17, 4, 0, 1, 7) + xdr_string("lab") + xdr_string("router-1")
                + u32(2) + xdr_string("elvin://10.0.0.1:2917") + xdr_string("elvin://h:1"))
    assert encode(advert) == expected
    assert decode(expected) == advert


def test_svr_advt_close_bytes_are_the_drafts():
    assert encode(SvrAdvtClose("r")) == u32(18, 4, 0) + xdr_string("r")
    assert decode(u32(18, 4, 0) + xdr_string("r")) == SvrAdvtClose("r")


names = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                max_size=20)


@given(scope=names.filter(lambda s: ":" not in s), server=names,
       uris=st.lists(names, min_size=1, max_size=5), default=st.booleans(),
       revision=st.integers(1, 0xFFFFFFFF), minor=st.integers(0, 255))
def test_svr_advt_round_trip(scope, server, uris, default, revision, minor):
    advert = SvrAdvt(server, tuple(uris), scope, default, revision, major_version=4,
                     minor_version=minor)
    assert decode(encode(advert)) == advert


@given(locality=st.integers(0, 255), major=st.integers(0, 255), minor=st.integers(0, 255))
def test_svr_rqst_round_trip(locality, major, minor):
    packet = SvrRqst(locality, major_version=major, minor_version=minor)
    assert decode(encode(packet)) == packet


def test_compatibility_rule():
    # same major; our minor (0) no greater than the packet's
    assert is_compatible(SvrRqst(0, major_version=4, minor_version=0))
    assert is_compatible(SvrRqst(0, major_version=4, minor_version=3))
    assert not is_compatible(SvrRqst(0, major_version=3, minor_version=0))
    assert not is_compatible(SvrAdvt("r", ("u",), major_version=5))


def test_encoder_rejects_what_the_draft_forbids():
    with pytest.raises(ValueError, match="':'"):
        encode(SvrAdvt("r", ("u",), scope="a:b"))
    with pytest.raises(ValueError, match="at least one URI"):
        encode(SvrAdvt("r", ()))
    with pytest.raises(ValueError, match="reserved"):
        encode(SvrAdvt("r", ("u",), revision=0))
    with pytest.raises(ValueError, match="locality"):
        encode(SvrRqst(256))


def test_oversized_advert_keeps_the_leading_uris():
    uris = tuple(f"elvin://host-{i:04d}.example.org:2917" for i in range(200))
    data = encode(SvrAdvt("r", uris))
    assert len(data) <= MAX_DATAGRAM
    kept = decode(data).uris
    assert 1 <= len(kept) < len(uris) and kept == uris[:len(kept)]


GARBAGE = [
    b"",
    b"\x00\x00",
    u32(16),                                  # truncated SvrRqst
    u32(16, 4, 0),                            # no locality
    u32(16, 4, 0, 1, 0),                      # trailing bytes
    u32(16, 4, 0, 256),                       # uint8 out of range
    u32(99, 4, 0, 0),                         # unknown pkt_id
    u32(50, 4, 0, 0),                         # a client-protocol id (ConnRply)
    u32(17, 4, 0, 2, 1) + xdr_string("") + xdr_string("r") + u32(1) + xdr_string("u"),
    u32(17, 4, 0, 1, 0) + xdr_string("") + xdr_string("r") + u32(1) + xdr_string("u"),
    u32(17, 4, 0, 1, 1) + xdr_string("a:b") + xdr_string("r") + u32(1) + xdr_string("u"),
    u32(17, 4, 0, 1, 1) + xdr_string("") + xdr_string("r") + u32(0),
    u32(17, 4, 0, 1, 1) + xdr_string("") + xdr_string("r") + u32(0x7FFFFFFF),
    u32(17, 4, 0, 1, 1) + xdr_string("") + xdr_string("r") + u32(0xFFFFFFFF),
    u32(17, 4, 0, 1, 1) + u32(1000) + b"abcd",  # string longer than the datagram
    u32(17, 4, 0, 1, 1) + u32(2) + b"\xff\xfe\0\0" + xdr_string("r") + u32(1)
    + xdr_string("u"),                         # bad UTF-8
    u32(18, 4, 0) + u32(3) + b"a\0b\0",        # NUL in a string
    b"GET / HTTP/1.0\r\n\r\n",
]


@pytest.mark.parametrize("data", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_is_a_decode_error(data):
    with pytest.raises(DiscoveryDecodeError):
        decode(data)


@given(st.binary(max_size=200))
def test_random_bytes_never_raise_anything_else(data):
    try:
        decode(data)
    except DiscoveryDecodeError:
        pass


def test_settings_from_env():
    assert settings_from_env({}) == {"scope": ""}
    assert settings_from_env({"ELVIN_DISCOVERY": "off"}) is None
    assert settings_from_env({"ELVIN_DISCOVERY": "127.0.0.1:4000", "ELVIN_SCOPE": "lab"}) \
        == {"scope": "lab", "address": "127.0.0.1:4000"}
    assert settings_from_env({"ELVIN_DISCOVERY": "127.0.0.1:1,127.0.0.2"})["address"] \
        == ["127.0.0.1:1", "127.0.0.2:2917"]
    for bad in ("nonsense", "127.0.0.1:99999", "1.2.3:4"):
        with pytest.raises(ValueError, match="ELVIN_DISCOVERY"):
            settings_from_env({"ELVIN_DISCOVERY": bad})
    with pytest.raises(ValueError, match="':'"):
        settings_from_env({"ELVIN_SCOPE": "a:b"})
