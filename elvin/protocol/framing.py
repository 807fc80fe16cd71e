"""TCP framing of spec 8.2.1: each packet is preceded by a 4-byte big-endian
length. ``frame`` adds the header; ``FrameDecoder`` splits an incoming byte
stream back into packets, incrementally and without quadratic copying.

Frame headers are checked as soon as their 4 bytes arrive, before the body is
waited for: a length of zero, a length that is not a multiple of 4 (XDR
bodies always are) or a length above ``limits.max_packet_length`` raises
``ProtocolError`` at once. Such an error leaves the stream out of sync, so the
decoder is then *broken*: every later ``feed`` raises the same error and the
connection must be reset (the spec says so for oversized packets). The
error's ``packets`` attribute holds the good packets that preceded the bad
header in the same call.

A frame whose body does not decode is different: the frame has been consumed
and the stream is still in sync. ``feed`` raises the body's ``ProtocolError``
(or ``LimitError``) with a ``packets`` attribute holding the packets decoded
before it in the same call; the bytes after the bad frame stay buffered, so
calling ``feed(b"")`` carries on with the packets that follow.

``feed`` decodes each frame where it lies in the received chunk (a
NotifyDeliver through ``xdr.decode_notify_deliver``, with no copy of its
body); a chunk that completes a buffered partial frame is joined once, and a
chunk that completes nothing is only appended, so a large packet arriving in
many small chunks costs linear time.
"""

from __future__ import annotations

import struct

from elvin.errors import ProtocolError
from elvin.protocol.limits import DEFAULT_LIMITS, Limits
from elvin.protocol.packets import Packet
from elvin.protocol.xdr import decode_notify_deliver, decode_packet, frame_packet

__all__ = ["FrameDecoder", "frame", "frame_body"]

_S_U32 = struct.Struct(">I")
_u32 = _S_U32.unpack_from
_p_u32 = _S_U32.pack


def frame(packet: Packet) -> bytes:
    """``packet`` as XDR with its 4-byte length header, ready for the socket."""
    return frame_packet(packet)


def frame_body(body: bytes) -> bytes:
    """An already encoded packet body with its 4-byte length header."""
    return _p_u32(len(body)) + body


class FrameDecoder:
    """Incremental splitter/decoder of a framed Elvin byte stream.

    ``feed(data)`` returns the packets completed by ``data`` (possibly none);
    ``feed_frames(data)`` returns the raw packet bodies instead, for callers
    that decode themselves.
    """

    __slots__ = ("limits", "_buf", "_consumed", "_error")

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._buf = bytearray()
        self._consumed = 0          # stream offset of _buf[0], for error messages
        self._error: ProtocolError | None = None

    # -- state ---------------------------------------------------------------
    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a returned packet."""
        return len(self._buf)

    @property
    def offset(self) -> int:
        """Stream offset of the first buffered byte (where a partial frame starts)."""
        return self._consumed

    @property
    def pending_length(self) -> int | None:
        """The length the buffered partial frame announces (None: its header
        has not arrived whole)."""
        buf = self._buf
        return _u32(buf, 0)[0] if len(buf) >= 4 else None

    @property
    def pending_type(self) -> int | None:
        """The packet type of the buffered partial frame (None: not arrived)."""
        buf = self._buf
        return _u32(buf, 4)[0] if len(buf) >= 8 else None

    @property
    def at_boundary(self) -> bool:
        """True when no partial frame is buffered: the peer may close here
        without a communications error (spec 8.2.1)."""
        return not self._buf

    @property
    def broken(self) -> bool:
        return self._error is not None

    # -- splitting -------------------------------------------------------------
    def _check_header(self, length: int, offset: int) -> None:
        limit = self.limits.max_packet_length
        if length > limit:
            message = (f"frame header announces a {length}-byte packet, more than the "
                       f"{limit} bytes allowed")
        elif length == 0:
            message = "frame header announces an empty packet"
        elif length & 3:
            message = (f"frame header announces a {length}-byte packet, which is not a "
                       "multiple of 4 as XDR requires")
        else:
            return
        self._error = ProtocolError(message, offset)
        raise self._error

    def _out_of_sync(self) -> ProtocolError:
        """What every ``feed`` raises once a bad header has broken the stream
        (the check stays inline: both feeds are on the hot path)."""
        return ProtocolError(f"stream out of sync after an earlier error: {self._error}",
                             None)

    def _next_frames(self, data: bytes | bytearray | memoryview,
                     max_frames: int) -> list[bytes]:
        """Split off up to ``max_frames`` complete bodies (as bytes)."""
        if self._error is not None:
            raise self._out_of_sync()
        buf = self._buf
        src: bytes | bytearray
        if buf:
            buf += data
            src = buf
        else:
            src = data if type(data) is bytes else bytes(data)
        end = len(src)
        pos = 0
        out: list[bytes] = []
        u32 = _u32
        try:
            while end - pos >= 4 and len(out) < max_frames:
                (length,) = u32(src, pos)
                if length > self.limits.max_packet_length or length == 0 or length & 3:
                    try:
                        self._check_header(length, self._consumed + pos)
                    except ProtocolError as exc:
                        exc.frames = out
                        raise
                stop = pos + 4 + length
                if stop > end:
                    break
                out.append(bytes(src[pos + 4:stop]))
                pos = stop
        finally:
            # keep only the unconsumed tail: one copy per feed, never quadratic
            if src is buf:
                if pos == end:
                    buf.clear()
                elif pos:
                    del buf[:pos]
            elif pos < end:
                buf += src[pos:]
            self._consumed += pos
        return out

    def feed_frames(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Buffer ``data``; return the complete packet bodies (no headers)."""
        return self._next_frames(data, 1 << 62)

    def feed(self, data: bytes | bytearray | memoryview = b"") -> list[Packet]:
        """Buffer ``data``; return the packets it completes, in order.

        Frames are decoded where they lie in the received chunk: a
        NotifyDeliver (what a subscriber mostly receives) goes through
        ``decode_notify_deliver`` without a copy of its body, anything else
        (or anything that fast path declines) through ``decode_packet``."""
        if self._error is not None:
            raise self._out_of_sync()
        buf = self._buf
        if buf:
            buf += data
            if len(buf) < 4:
                return []
            (length,) = _u32(buf, 0)
            limit = self.limits.max_packet_length
            if len(buf) < 4 + length and 0 < length <= limit and not length & 3:
                # the first frame is still incomplete: appending is all there
                # is to do (amortised linear however many chunks a frame takes)
                return []
            src = bytes(buf)      # one copy per frame-completing chunk
            buf.clear()
        else:
            src = data if type(data) is bytes else bytes(data)
        end = len(src)
        pos = 0
        packets: list[Packet] = []
        limits = self.limits
        limit = limits.max_packet_length
        u32 = _u32
        fast = decode_notify_deliver
        try:
            while end - pos >= 4:
                (length,) = u32(src, pos)
                if length > limit or length == 0 or length & 3:
                    self._check_header(length, self._consumed + pos)
                start = pos + 4
                stop = start + length
                if stop > end:
                    break
                # consumed even if it does not decode: the stream stays in sync
                pos = stop
                packet = fast(src, start, stop, limits)
                if packet is None:
                    packet = decode_packet(src[start:stop], limits)
                packets.append(packet)
        except ProtocolError as exc:
            # hand over the good packets that came before the bad frame/header
            exc.packets = packets
            raise
        finally:
            # keep the unconsumed tail (after a bad body, feed(b"") resumes there)
            if pos < end:
                buf += src[pos:] if pos else src
            self._consumed += pos
        return packets
