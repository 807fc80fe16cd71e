"""The Elvin Client Protocol 4.0 on the wire, sans-IO.

* ``elvin.protocol.packets``  one dataclass per packet (spec 7.4)
* ``elvin.protocol.xdr``      XDR codec (spec 8.2.3): encode_packet / decode_packet
* ``elvin.protocol.framing``  TCP framing (spec 8.2.1): frame / FrameDecoder
* ``elvin.protocol.limits``   Limits on what a peer may send
* ``elvin.protocol.uri``      Elvin URIs: parse_uri / ElvinURI
"""

from elvin.protocol import packets, xdr
from elvin.protocol.framing import FrameDecoder, frame, frame_body
from elvin.protocol.limits import DEFAULT_LIMITS, LimitError, Limits
from elvin.protocol.packets import *  # noqa: F403 -- the packet classes, listed once in packets.__all__
from elvin.protocol.uri import DEFAULT_PORT, ElvinURI, URIError, parse_uri
from elvin.protocol.xdr import *  # noqa: F403 -- the codec's functions, listed once in xdr.__all__

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_PORT",
    "ElvinURI",
    "FrameDecoder",
    "LimitError",
    "Limits",
    "URIError",
    "frame",
    "frame_body",
    "parse_uri",
]
__all__ += packets.__all__
__all__ += xdr.__all__
