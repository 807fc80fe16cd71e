"""The mobility protocol's vocabulary: attribute names, values, and the
encodings of what travels inside its notifications.

Everything here is sans-IO (no sockets, no asyncio): the proxy and the mobile
client both build and check their notifications with these helpers, so the
two sides cannot drift apart. The protocol itself is described in the
``elvin.mobility`` module docstring.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from elvin.errors import ProtocolError
from elvin.keys import EMPTY_KEYS, Keys, KeyScheme, public_key
from elvin.protocol import (
    FrameDecoder,
    SubAddRqst,
    decode_attributes,
    encode_attributes,
    frame_packet,
)

PREFIX = "Mobility."

# -- attribute names ------------------------------------------------------------
REQUEST = "Mobility.Request"          # "hello" | "move-out" | "move-in" | "download"
REPLY = "Mobility.Reply"              # the request kind being answered
PROXY = "Mobility.Proxy"              # the proxy a request is for / a reply is from
CLIENT = "Mobility.Client"            # the mobile client's unique id
REQUEST_ID = "Mobility.Request-Id"    # chosen by the requester, echoed in replies
REPLY_KEY = "Mobility.Reply-Key"      # SHA-1 consumer public key replies are sent with
PROXY_KEY = "Mobility.Proxy-Key"      # hello / move-out reply: the proxy's public key
FROM_KEY = "Mobility.From-Key"        # move-in: the move-out proxy's public key
FROM_KEY_PINNED = "Mobility.From-Key-Pinned"   # move-in: 1 if the client pinned From-Key
SUBSCRIPTIONS = "Mobility.Subscriptions"   # framed SubAddRqst packets (move-out)
QUOTA = "Mobility.Quota"              # requested / granted buffer quota (notifications)
EXPIRY = "Mobility.Expiry"            # requested / granted seconds before an unclaimed buffer goes
SECRET = "Mobility.Secret"            # download secret (move-out reply, move-in, download)
FROM = "Mobility.From"                # move-in: the move-out proxy's id
FROM_URL = "Mobility.From-URL"        # move-in: the move-out proxy's router, for "direct"
VIA = "Mobility.Via"                  # move-in: "direct" | "bus"
REQUESTER = "Mobility.Requester"      # download: the move-in proxy's id (informational)
STATUS = "Mobility.Status"            # "ok" | "error"
ERROR_CODE = "Mobility.Error-Code"    # see ERROR_CODES
ERROR = "Mobility.Error"              # human-readable error text
BATCH = "Mobility.Batch"              # index of this batch of buffered notifications
BATCH_COUNT = "Mobility.Batch-Count"  # how many batches make up the buffer
NOTIFICATIONS = "Mobility.Notifications"   # opaque: encoded buffered notifications
COUNT = "Mobility.Count"              # buffered notifications in the whole transfer
DROPPED = "Mobility.Dropped"          # notifications dropped (quota or expiry)
EXPIRED = "Mobility.Expired"          # 1 when the buffer expired before the move-in
PING = "Mobility.Ping"                # "request" | "response"
PING_ID = "Mobility.Ping-Id"
FENCE = "Mobility.Fence"              # fence / move-in / its reply: a fence's id
PREVIOUS_SECRET = "Mobility.Previous-Secret"   # move-out: the client's previous ticket
#: secrets a move-out may name as previous ones: a buffer left behind by a
#: crash (its release lost) stays replaceable for that many moves
MAX_PREVIOUS_SECRETS = 64
#: move-out: the client's owner proof for this proxy, an HMAC of the proxy's
#: id under a key only the client holds (``owner_proof``). A buffer made with
#: one is replaced by a later move-out that brings the same proof, even when
#: the client no longer knows that buffer's secret; each proxy sees its own
#: proof, so none can use what it saw at another
OWNER = "Mobility.Owner"
MAX_OWNER_LENGTH = 128
#: a shorter proof could be guessed, and would let another take the buffer
MIN_OWNER_LENGTH = 32
RESUME = "Mobility.Resume"            # move-out: 1 when the client's connection here died
#: ... move-in: 1 when the client was attached here until the router restarted
#: (it collects after a resumed move-out failed): only what the proxy recorded
#: since the restart is owed, the rest it had live
#: move-out / move-in reply: the federation peers of the proxy's router that
#: may not know yet what its subscribers want (as right after a restart), so
#: that what is published there may not reach the client; absent when all know
UNANNOUNCED = "Mobility.Unannounced"


def owner_proof(owner_key: bytes, proxy: str) -> str:
    """What a move-out to ``proxy`` (its id, as the request names it) sends
    as ``Mobility.Owner``: the client proves it is the one that made a
    buffer there without telling that proxy anything usable elsewhere."""
    return hmac.new(owner_key, b"elvin-mobility-owner\0" + proxy.encode(),
                    hashlib.sha256).hexdigest()


def unannounced_names(attrs: Any) -> tuple[str, ...]:
    """The peers a reply's ``Mobility.Unannounced`` names (``, ``-separated)."""
    value = attrs.get(UNANNOUNCED) if hasattr(attrs, "get") else None
    return tuple(n for n in value.split(", ") if n) if isinstance(value, str) else ()

HELLO, MOVE_OUT, MOVE_IN, DOWNLOAD = "hello", "move-out", "move-in", "download"
RELEASE, FENCE_KIND = "release", "fence"
REQUEST_KINDS = (HELLO, MOVE_OUT, MOVE_IN, DOWNLOAD, RELEASE, FENCE_KIND)
#: Requests that carry a secret (the download secret, or subscriptions with
#: their raw keys): a proxy acts on them only when they reached it through
#: its private key, i.e. were sent so that nobody else could receive them.
PRIVATE_KINDS = (MOVE_OUT, MOVE_IN, DOWNLOAD, RELEASE, FENCE_KIND)
VIA_DIRECT, VIA_BUS = "direct", "bus"

ERROR_CODES = {
    "malformed": "the request is missing an attribute or has one of the wrong type",
    "unknown-client": "no buffer is held for that client id",
    "bad-secret": "the secret does not match the one handed out at move-out",
    "in-use": "a buffer is already held for that client id",
    "insecure": "a request carrying a secret was not sent with the proxy's key",
    "limit": "the proxy's limit on clients or subscriptions is reached",
    "subscription": "a subscription was refused by the router",
    "unreachable": "the move-out proxy could not be reached or did not answer",
    "storage": "the proxy could not write its state file (disk full, file locked): try again",
    "internal": "the proxy failed unexpectedly",
}

MAX_ID_LENGTH = 256
MAX_SECRET_LENGTH = 256
#: a secret chosen by the client (move-out) must be at least this long
MIN_SECRET_LENGTH = 16
MAX_FENCE_LENGTH = 64
#: Bytes of encoded notifications per batch: well below the default
#: Packet.Max-Length (2 MiB), so that a batch always fits in one packet.
BATCH_BYTES = 256 * 1024


class MobilityError(Exception):
    """A mobility operation failed; ``code`` is one of ``ERROR_CODES`` (or
    ``"timeout"`` / ``"no-proxy"`` on the client side)."""

    def __init__(self, message: str, code: str = "internal") -> None:
        super().__init__(message)
        self.code = code


class MalformedRequest(MobilityError):
    """A request the proxy cannot act on; the message names the attribute."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "malformed")


def quote(text: str) -> str:
    """``text`` as an Elvin subscription string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def private_to(public: bytes) -> Keys:
    """Notification keys that only the holder of the raw consumer key whose
    SHA-1 is ``public`` can receive (SHA-1 consumer scheme). Sent with
    ``deliver_insecure=False`` they reach nobody else, however broad their
    subscriptions: replies go to a requester's reply key this way, and
    requests that carry a secret to the recipient proxy's key."""
    return Keys.of(KeyScheme.SHA1_CONSUMER, [public])


#: The older name of ``private_to`` (replies were the first private messages).
reply_keys = private_to


def reply_subscription_keys(raw: bytes) -> tuple[Keys, bytes]:
    """Subscription keys for a private reply channel, and the public key to
    put in the request's ``Mobility.Reply-Key``."""
    return Keys.consumer_subscription(raw), public_key(raw)


# -- checking requests ----------------------------------------------------------
@overload
def get_str(attrs: Mapping[str, Any], name: str, *, required: Literal[True] = True,
            max_length: int = MAX_ID_LENGTH) -> str: ...
@overload
def get_str(attrs: Mapping[str, Any], name: str, *, required: bool,
            max_length: int = MAX_ID_LENGTH) -> str | None: ...
def get_str(attrs: Mapping[str, Any], name: str, *, required: bool = True,
            max_length: int = MAX_ID_LENGTH) -> str | None:
    """The string attribute ``name``, 1 to ``max_length`` characters, else
    ``MalformedRequest``; ``None`` if it is missing and not ``required`` (so
    a required one is typed ``str``)."""
    value = attrs.get(name)
    if value is None:
        if required:
            raise MalformedRequest(f"missing attribute {name}")
        return None
    if not isinstance(value, str):
        raise MalformedRequest(f"attribute {name} must be a string, not "
                               f"{type(value).__name__}")
    if not value or len(value) > max_length:
        raise MalformedRequest(f"attribute {name} must be 1 to {max_length} characters")
    return value


def get_number(attrs: Mapping[str, Any], name: str) -> float | None:
    value = attrs.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise MalformedRequest(f"attribute {name} must be a number")
    return value


def get_reply_key(attrs: Mapping[str, Any]) -> bytes:
    value = attrs.get(REPLY_KEY)
    if not isinstance(value, bytes) or len(value) != 20:
        raise MalformedRequest(f"attribute {REPLY_KEY} must be a 20-byte opaque "
                               "(the SHA-1 of the requester's consumer key)")
    return value


def get_public_key(attrs: Mapping[str, Any], name: str, *,
                   required: bool = True) -> bytes | None:
    """A proxy's public key (``Proxy-Key``, ``From-Key``): 20 bytes, the SHA-1
    of its raw consumer key."""
    value = attrs.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, bytes) or len(value) != 20:
        raise MalformedRequest(f"attribute {name} must be a 20-byte opaque (the SHA-1 "
                               "of a proxy's consumer key)")
    return value


@dataclass(frozen=True)
class SubscriptionSpec:
    """One subscription handed to a proxy: the client's id for it (so that
    buffered notifications can be routed back to the right subscription),
    the expression, whether insecure notifications are accepted, and its
    security keys exactly as the client subscribes with them (raw keys
    included: the proxy must subscribe with them, so a move-out request is
    only ever sent privately to the proxy). ``keys`` stays out of ``repr``
    so that raw keys do not end up in logs."""

    id: int
    expression: str
    accept_insecure: bool = True
    keys: Keys = field(default=EMPTY_KEYS, repr=False)


def encode_subscriptions(specs: Iterable[SubscriptionSpec]) -> bytes:
    """``Mobility.Subscriptions``: one framed SubAddRqst packet per
    subscription (xid = the client's subscription id), encoded by the client
    protocol codec, so the expression, ``accept_insecure`` and every key
    scheme with its raw key bytes arrive exactly as the client would have
    sent them to a router."""
    return b"".join(frame_packet(SubAddRqst(s.id, s.expression, s.accept_insecure, s.keys))
                    for s in specs)


def decode_subscriptions(value: Any, max_count: int) -> list[SubscriptionSpec]:
    """Parse ``Mobility.Subscriptions``; MalformedRequest says what is wrong.

    An opaque holds framed SubAddRqst packets (``encode_subscriptions``). A
    string is the first version's JSON list of ``{"id", "expression",
    "accept_insecure"}`` (no keys), still accepted from older clients."""
    if isinstance(value, bytes):
        specs = _decode_packets(value, max_count)
    elif isinstance(value, str):
        specs = _decode_json(value, max_count)
    else:
        raise MalformedRequest(f"attribute {SUBSCRIPTIONS} must be an opaque (framed "
                               "SubAddRqst packets) or a JSON string")
    seen: set[int] = set()
    for n, spec in enumerate(specs):
        if spec.id in seen:
            raise MalformedRequest(f"{SUBSCRIPTIONS}[{n}].id {spec.id} is repeated")
        if not spec.expression.strip():
            raise MalformedRequest(f"{SUBSCRIPTIONS}[{n}].expression must be a "
                                   "non-empty string")
        seen.add(spec.id)
    return specs


def _too_many(count: int, max_count: int) -> None:
    if count > max_count:
        raise MobilityError(f"{count} subscriptions: this proxy takes at most "
                            f"{max_count} per client", "limit")


def _decode_packets(blob: bytes, max_count: int) -> list[SubscriptionSpec]:
    decoder = FrameDecoder()
    try:
        packets = decoder.feed(blob)
    except ProtocolError as exc:
        raise MalformedRequest(f"attribute {SUBSCRIPTIONS} is garbled: {exc}") from None
    if not decoder.at_boundary:
        raise MalformedRequest(f"attribute {SUBSCRIPTIONS} ends inside a packet")
    _too_many(len(packets), max_count)
    specs = []
    for n, packet in enumerate(packets):
        if not isinstance(packet, SubAddRqst):
            raise MalformedRequest(f"{SUBSCRIPTIONS}[{n}] is a {type(packet).__name__}, "
                                   "not a SubAddRqst")
        if packet.xid >= 2**31:
            raise MalformedRequest(f"{SUBSCRIPTIONS}[{n}].id must be 0..2^31-1")
        specs.append(SubscriptionSpec(packet.xid, packet.expression, packet.accept_insecure,
                                      packet.keys))
    return specs


def _decode_json(text: str, max_count: int) -> list[SubscriptionSpec]:
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise MalformedRequest(f"attribute {SUBSCRIPTIONS} is not JSON: {exc}") from None
    if not isinstance(items, list):
        raise MalformedRequest(f"attribute {SUBSCRIPTIONS} must be a JSON list")
    _too_many(len(items), max_count)
    specs = []
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise MalformedRequest(f"{SUBSCRIPTIONS}[{n}] must be an object")
        sid, expr = item.get("id"), item.get("expression")
        insecure = item.get("accept_insecure", True)
        if isinstance(sid, bool) or not isinstance(sid, int) or not 0 <= sid < 2**31:
            raise MalformedRequest(f"{SUBSCRIPTIONS}[{n}].id must be an integer "
                                   "0..2^31-1")
        if not isinstance(expr, str) or not expr.strip():
            raise MalformedRequest(f"{SUBSCRIPTIONS}[{n}].expression must be a "
                                   "non-empty string")
        if not isinstance(insecure, bool):
            raise MalformedRequest(f"{SUBSCRIPTIONS}[{n}].accept_insecure must be "
                                   "true or false")
        specs.append(SubscriptionSpec(sid, expr, insecure))
    return specs


# -- buffered notifications -------------------------------------------------------
#: One buffered notification: its attributes and the client's subscription
#: ids it matched (once, however many subscriptions matched it).
Entry = tuple[dict[str, Any], Sequence[int]]

_U32 = struct.Struct(">I")
_ONE_ID = struct.Struct(">II")


def encode_entry(attrs: Mapping[str, Any], sub_ids: Sequence[int]) -> bytes:
    """XDR: the count of ids, the ids (uint32 each), then the NameValue array
    exactly as the Elvin client protocol encodes a notification's attributes
    (so every Elvin value type survives the trip unchanged)."""
    head = _U32.pack(len(sub_ids)) + b"".join(_U32.pack(i) for i in sub_ids)
    return head + encode_attributes(attrs)


def entry_from_block(block: bytes, sub_ids: Sequence[int]) -> bytes:
    """``encode_entry`` for attributes the router already encoded
    (``encode_attributes``): the same bytes, without decoding them."""
    if len(sub_ids) == 1:
        return _ONE_ID.pack(1, sub_ids[0]) + block
    return _U32.pack(len(sub_ids)) + b"".join(_U32.pack(i) for i in sub_ids) + block


def encode_batches(entries: Iterable[Entry], batch_bytes: int = BATCH_BYTES) -> list[bytes]:
    """Split buffered notifications into blobs of about ``batch_bytes``
    (a larger notification gets a blob of its own). Always at least one blob,
    possibly empty, so that an empty buffer still produces a reply."""
    return pack_batches((encode_entry(attrs, ids) for attrs, ids in entries), batch_bytes)


def pack_batches(encoded: Iterable[bytes], batch_bytes: int = BATCH_BYTES) -> list[bytes]:
    """``encode_batches`` for entries already encoded (``encode_entry``), as
    a proxy keeps them."""
    packer = BatchPacker(batch_bytes)
    packer.add(encoded)
    return packer.finish()


class BatchPacker:
    """``pack_batches`` a slice at a time (a proxy packs a big buffer over
    several loop turns): ``add`` slices, then ``finish``."""

    def __init__(self, batch_bytes: int = BATCH_BYTES) -> None:
        self.batch_bytes = batch_bytes
        self.batches: list[bytes] = []
        self.count = 0
        self._current: list[bytes] = []
        self._size = 0

    def add(self, encoded: Iterable[bytes]) -> None:
        current, size, limit = self._current, self._size, self.batch_bytes
        for data in encoded:
            if current and size + len(data) > limit:
                self.batches.append(b"".join(current))
                current, size = [], 0
            current.append(data)
            size += len(data)
            self.count += 1
        self._current, self._size = current, size

    def finish(self) -> list[bytes]:
        self.batches.append(b"".join(self._current))
        self._current, self._size = [], 0
        return self.batches


def decode_batch(blob: bytes) -> list[Entry]:
    """The inverse of one ``encode_batches`` blob; ProtocolError if garbled."""
    out: list[Entry] = []
    offset, end = 0, len(blob)
    try:
        while offset < end:
            (count,) = _U32.unpack_from(blob, offset)
            offset += 4
            if count > 65536 or offset + 4 * count > end:
                raise ProtocolError("bad subscription id count in a mobility batch", offset)
            ids = [_U32.unpack_from(blob, offset + 4 * k)[0] for k in range(count)]
            offset += 4 * count
            attrs, offset = decode_attributes(blob, offset)
            out.append((attrs, ids))
    except struct.error:
        raise ProtocolError("truncated mobility batch", offset) from None
    return out


__all__ = [
    "BATCH", "BATCH_BYTES", "BatchPacker", "BATCH_COUNT", "CLIENT", "COUNT", "DOWNLOAD", "DROPPED",
    "ERROR", "ERROR_CODE", "ERROR_CODES", "EXPIRED", "EXPIRY", "FENCE", "FENCE_KIND", "FROM", "FROM_KEY", "FROM_KEY_PINNED",
    "FROM_URL", "HELLO", "MOVE_IN", "MOVE_OUT", "MalformedRequest", "MobilityError",
    "NOTIFICATIONS", "PING", "PING_ID", "PREVIOUS_SECRET", "PRIVATE_KINDS", "RESUME", "PROXY", "PROXY_KEY", "QUOTA", "RELEASE",
    "REPLY", "REPLY_KEY", "REQUEST", "REQUESTER", "REQUEST_ID", "SECRET", "STATUS",
    "SUBSCRIPTIONS", "SubscriptionSpec", "VIA", "VIA_BUS", "VIA_DIRECT", "decode_batch",
    "decode_subscriptions", "encode_batches", "encode_entry", "entry_from_block", "encode_subscriptions",
    "get_public_key", "pack_batches", "private_to", "quote", "reply_keys", "reply_subscription_keys",
]
