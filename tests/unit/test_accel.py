"""The optional compiled accelerator (``make accel``) against the pure reader it speeds up.

``xdrprim.read_attrs`` is the accelerator's when ``elvin_xdrfast`` is built and
``ELVIN_PURE`` is not set, else ``read_attrs_pure``. Every test here compares the
two on the same bytes, well-formed (random attribute sets, encoded) and damaged
(random truncations, byte flips and ``end`` offsets): same dict, same value types,
same offset, or the same exception with the same message. The test run's header
says which path ran (tests/conftest.py); without the build the comparisons skip and
the rest of the suite tests the pure path.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elvin.keys import Keys
from elvin.protocol import NotifyEmit, _accel, fastpath, xdrprim
from elvin.protocol.limits import DEFAULT_LIMITS, Limits
from elvin.protocol.xdr import encode_packet
from elvin.values import INT64_MAX, INT64_MIN, Int64

compiled = pytest.mark.skipif(_accel.xdrfast is None, reason=_accel.describe())

# what put_attrs encodes: text without NUL (the wire forbids it)
text = st.characters(blacklist_characters="\0", blacklist_categories=("Cs",))
names = st.text(text, max_size=12)
values = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(INT64_MIN, INT64_MAX).map(Int64),
    st.floats(allow_nan=False),
    st.text(text, max_size=40),
    st.binary(max_size=40),
)
attr_sets = st.dictionaries(names, values, max_size=8)


def _outcome(read, data: bytes, o: int, end: int, limits: Limits):
    """What a reader makes of the bytes: the result with each value's type, or the error."""
    try:
        attrs, offset = read(data, o, end, limits, "attributes")
    except Exception as exc:  # noqa: BLE001 -- the error itself is what is compared
        return ("error", type(exc), str(exc), getattr(exc, "offset", None))
    # repr: a NaN is not equal to itself
    return ("ok", [(k, type(v), repr(v)) for k, v in attrs.items()], offset)


def _same(data: bytes, o: int = 0, end: int | None = None,
          limits: Limits = DEFAULT_LIMITS) -> None:
    end = len(data) if end is None else end
    fast = _outcome(xdrprim._read_attrs_compiled, data, o, end, limits)
    pure = _outcome(xdrprim.read_attrs_pure, data, o, end, limits)
    assert fast == pure


def _encoded(attrs: dict[str, object]) -> bytes:
    b = bytearray()
    xdrprim.put_attrs(b, attrs)
    return bytes(b)


def test_the_path_in_use_is_named_and_ELVIN_PURE_forces_pure() -> None:
    code = ("from elvin.protocol import _accel, xdrprim; "
            "print(_accel.describe()); print(xdrprim.read_attrs is xdrprim.read_attrs_pure)")
    env = dict(os.environ, ELVIN_PURE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out == ["pure Python (ELVIN_PURE is set)", "True"]
    in_use = xdrprim.read_attrs is not xdrprim.read_attrs_pure
    assert in_use == (_accel.xdrfast is not None)
    assert _accel.describe().startswith("compiled" if in_use else "pure")


@compiled
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(attr_sets)
def test_well_formed_arrays_decode_alike(attrs: dict[str, object]) -> None:
    data = _encoded(attrs)
    _same(data)
    _same(b"\0" * 8 + data + b"\0" * 4, 8, 8 + len(data))   # inside a larger packet


@compiled
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(attr_sets, st.data())
def test_damaged_arrays_are_refused_alike(attrs: dict[str, object], draw: st.DataObject) -> None:
    data = bytearray(_encoded(attrs))
    for _ in range(draw.draw(st.integers(0, 3))):
        if data:
            at = draw.draw(st.integers(0, len(data) - 1))
            data[at] = draw.draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 0x7F, 0x80, 0xC3, 0xFF]))
    cut = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(0, len(data) + 8))
    _same(bytes(data[:cut]), 0, min(end, cut))
    _same(bytes(data), 0, end)          # an end past the data: the pure path decides


@compiled
@given(attr_sets, st.integers(0, 3), st.integers(0, 8), st.integers(0, 8), st.integers(0, 8))
def test_limits_are_enforced_alike(attrs: dict[str, object], max_attributes: int,
                                   max_name: int, max_string: int, max_opaque: int) -> None:
    limits = Limits(max_attributes=max_attributes, max_name_length=max_name,
                    max_string_length=max_string, max_opaque_length=max_opaque)
    _same(_encoded(attrs), limits=limits)


@compiled
def test_hand_made_edge_cases_decode_alike() -> None:
    def nv(name: bytes, typecode: int, body: bytes) -> bytes:
        return (len(name).to_bytes(4, "big") + name + b"\0" * (-len(name) % 4)
                + typecode.to_bytes(4, "big", signed=True) + body)

    one = (1).to_bytes(4, "big")
    cases = [
        b"\0\0\0\0",                                       # no attributes
        b"\xff\xff\xff\xff",                               # negative count
        one + nv(b"a\0", 1, b"\0\0\0\1"),                  # NUL in a name
        one + nv(b"\xc3(", 1, b"\0\0\0\1"),                # bad UTF-8 in a name
        one + nv(b"a", 4, b"\0\0\0\2\xc3(\0\0"),           # bad UTF-8 in a string value
        one + nv(b"a", 4, b"\0\0\0\1\0\0\0\0"),            # NUL in a string value
        one + nv(b"a", 9, b"\0\0\0\1"),                    # unknown typecode
        one + nv(b"a", 4, b"\xff\xff\xff\xff"),            # negative string length
        one + nv(b"a", 2, b"\0\0\0\1"),                    # int64 cut short
        one + nv(b"a", 3, b"\x7f\xf0\0\0\0\0\0\0"),        # infinity
        one + nv(b"a", 3, b"\x7f\xf8\0\0\0\0\0\1"),        # a NaN
        (2).to_bytes(4, "big") + nv(b"a", 1, one) + nv(b"a", 1, b"\0\0\0\2"),  # repeated
    ]
    for data in cases:
        _same(data)


@compiled
def test_buffers_other_than_bytes_go_the_pure_way() -> None:
    data = _encoded({"a": b"xyz", "b": 1})
    # (a memoryview's values repr with their address: bytearray is enough to tell)
    buffer = bytearray(data)
    assert (_outcome(xdrprim._read_attrs_compiled, buffer, 0, len(data), DEFAULT_LIMITS)
            == _outcome(xdrprim.read_attrs_pure, buffer, 0, len(data), DEFAULT_LIMITS))


def _emit_outcome(decode, body: bytes, limits: Limits):
    """What a NotifyEmit decoder makes of a body: its fields with each value's type, or the error."""
    try:
        attrs, end, insecure, keys = decode(body, limits)
    except Exception as exc:  # noqa: BLE001 -- the error itself is what is compared
        return ("error", type(exc), str(exc), getattr(exc, "offset", None))
    return ("ok", [(k, type(v), repr(v)) for k, v in attrs.items()], end, insecure, keys)


def _same_emit(body: bytes, limits: Limits = DEFAULT_LIMITS) -> None:
    assert (_emit_outcome(fastpath._decode_notify_emit_compiled, body, limits)
            == _emit_outcome(fastpath.decode_notify_emit_pure, body, limits))


def test_decode_notify_emit_is_the_compiled_one_only_with_the_accelerator() -> None:
    code = ("from elvin.protocol import fastpath; "
            "print(fastpath.decode_notify_emit is fastpath.decode_notify_emit_pure)")
    env = dict(os.environ, ELVIN_PURE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out == ["True"]
    assert (fastpath.decode_notify_emit is fastpath.decode_notify_emit_pure) == \
        (_accel.xdrfast is None)


@compiled
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(attr_sets, st.booleans(), st.data())
def test_notify_emits_decode_alike_well_formed_keyed_or_damaged(
        attrs: dict[str, object], insecure: bool, draw: st.DataObject) -> None:
    """The compiled NotifyEmit reader (attributes and the usual tail in one
    call) against the pure decoder: every body, well-formed, with keys, with
    a damaged tail or array, cut short, gives the same fields or error."""
    keys = draw.draw(st.sampled_from([None, Keys.producer_notification("secret")]))
    body = encode_packet(NotifyEmit(attrs, insecure, keys if keys is not None else Keys()))
    _same_emit(body)
    data = bytearray(body)
    for _ in range(draw.draw(st.integers(0, 3))):
        at = draw.draw(st.integers(4, len(data) - 1))
        data[at] = draw.draw(st.sampled_from([0, 1, 2, 3, 4, 0x7F, 0x80, 0xC3, 0xFF]))
    _same_emit(bytes(data))
    _same_emit(bytes(data[:draw.draw(st.integers(4, len(data)))]))
    _same_emit(bytes(data) + b"\0" * draw.draw(st.integers(1, 8)))   # a longer tail
    _same_emit(body, Limits(max_attributes=draw.draw(st.integers(0, 3)),
                            max_string_length=draw.draw(st.integers(0, 8))))


@compiled
def test_the_usual_tails_take_the_compiled_path() -> None:
    """A NotifyEmit without keys, deliver-insecure or not, is decoded in the
    one compiled call (not handed to the pure decoder)."""
    for insecure in (True, False):
        body = encode_packet(NotifyEmit({"N": 1, "S": "x"}, insecure))
        got = _accel.xdrfast.read_notify_emit(
            body, 64, 64, 64, 64, *xdrprim.ACCEL_READER_ARGS)
        assert got == ({"N": 1, "S": "x"}, len(body) - 8, insecure, None)
    keyed = encode_packet(NotifyEmit({"N": 1}, True, Keys.producer_notification("k")))
    assert _accel.xdrfast.read_notify_emit(
        keyed, 64, 64, 64, 64, *xdrprim.ACCEL_READER_ARGS) is None
