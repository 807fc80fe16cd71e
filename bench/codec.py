"""Micro-benchmark of the XDR codec on a typical 6-attribute notification.

Prints packets/s for the router's hot paths: NotifyEmit decode, NotifyDeliver
encode (whole packet, and the shared-attributes path the router uses: encode
the attributes once, then frame a NotifyDeliver per subscriber), NotifyDeliver
decode (the client) and FrameDecoder throughput; then the two SubAST readers on a
typical subscription: SubAddNotify decode (what a quencher receives) and FedSubReplace
decode (a federation pull filter). Run: .venv/bin/python bench/codec.py
"""

from __future__ import annotations

import time

from elvin.federation.packets import FedSubReplace, decode_fed_packet, encode_fed_packet
from elvin.protocol import (
    FrameDecoder,
    NotifyDeliver,
    NotifyEmit,
    decode_packet,
    encode_attributes,
    encode_packet,
    frame,
    frame_notify_deliver,
)
from elvin.protocol.packets import SubAddNotify
from elvin.subscription import parse
from elvin.values import Int64

ATTRIBUTES = {
    "Group": "elvin-dev",
    "From": "alice",
    "Message": "Has anyone seen the coffee biff today? The pot is empty again.",
    "Timeout": 10,
    "Message-Id": Int64(8_123_456_789),
    "Load": 0.75,
}

#: a typical subscription: 25 SubAST nodes, names, strings, numbers and nesting
SUBSCRIPTION = ('Group == "elvin-dev" && (From == "alice" || From == "bob") '
                '&& Timeout > 5 && Load < 0.9 && !(Message-Id == 0) '
                '&& regex(Message, "coffee|biff")')


def rate(label: str, fn, arg, seconds: float = 0.2, repeats: int = 5) -> float:
    """Best of ``repeats`` runs of about ``seconds`` each (the machine is shared)."""
    best = 0.0
    batch = 1000
    for _ in range(repeats):
        n = 0
        start = time.perf_counter()
        while True:
            for _ in range(batch):
                fn(arg)
            n += batch
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        best = max(best, n / elapsed)
    print(f"{label:<44} {best:>12,.0f} /s  {1e6 / best:7.2f} us")
    return best


def main() -> None:
    emit = NotifyEmit(ATTRIBUTES)
    deliver = NotifyDeliver(ATTRIBUTES, (12345,), ())
    emit_body = encode_packet(emit)
    deliver_body = encode_packet(deliver)
    block = encode_attributes(ATTRIBUTES)
    print(f"NotifyEmit body {len(emit_body)} bytes, NotifyDeliver body {len(deliver_body)} "
          "bytes")
    warm_up = time.perf_counter() + 0.5
    while time.perf_counter() < warm_up:   # let the CPU clock up before measuring
        decode_packet(emit_body)
    rate("NotifyEmit decode", decode_packet, emit_body)
    rate("NotifyEmit encode", encode_packet, emit)
    rate("NotifyDeliver encode (encode_packet)", encode_packet, deliver)
    rate("NotifyDeliver frame (frame)", frame, deliver)
    rate("encode_attributes (once per notification)", encode_attributes, ATTRIBUTES)
    rate("frame_notify_deliver (per subscriber)",
         lambda b: frame_notify_deliver(b, (12345,), ()), block)
    rate("NotifyDeliver decode", decode_packet, deliver_body)

    stream = frame(emit) * 1000
    chunks = [stream[i:i + 65536] for i in range(0, len(stream), 65536)]

    def feed_all(chunks):
        decoder = FrameDecoder()
        for chunk in chunks:
            decoder.feed(chunk)

    per_sec = rate("FrameDecoder.feed, 1000 framed NotifyEmits", feed_all, chunks,
                   seconds=0.5, repeats=3) * 1000
    print(f"{'  = NotifyEmit packets through FrameDecoder':<44} {per_sec:>12,.0f} /s")

    ast = parse(SUBSCRIPTION)
    rate("SubAddNotify decode (client SubAST)", decode_packet,
         encode_packet(SubAddNotify((), (1,), 7, ast)))
    rate("FedSubReplace decode (federation SubAST)", decode_fed_packet,
         encode_fed_packet(FedSubReplace(1, ast)))


if __name__ == "__main__":
    main()
