"""Errors shared by every layer, with the protocol's Nack codes.

The codes are the table of section 7.4.2 of the client protocol; the router
sends them in Nack packets, the client raises them back as exceptions, and
the subscription compiler uses them so that a parse error found locally and
one reported by a router look the same to the user.

``RouterStartError`` and ``KeyRefused`` live here rather than in the router
because the federation service raises and catches them too, and it must not
depend on the router's modules (it sees the router only through
``elvin.federation.host.FederationHost``).
"""

from __future__ import annotations

from enum import IntEnum


class NackCode(IntEnum):
    """The Nack error codes of the Elvin client protocol (1xxx: protocol, 2xxx: request
    errors, 21xx: subscription parse errors), as the router sends them and
    :class:`elvin.client.NackError` carries them.
    """
    PROT_INCOMPAT = 1
    AUTHZ_FAIL = 2
    AUTHN_FAIL = 3
    PROT_ERROR = 1001
    NO_SUCH_SUB = 1002
    NO_SUCH_QUENCH = 1003
    BAD_KEY_SCHEME = 1004
    BAD_KEY_INDEX = 1005
    BAD_UTF8 = 1006
    NO_SUCH_KEY = 2001
    KEY_EXISTS = 2002
    BAD_KEY = 2003
    NOTHING_TO_DO = 2004
    QOS_LIMIT = 2005
    IMPL_LIMIT = 2006
    NOT_IMPL = 2007
    PARSE_ERROR = 2101
    INVALID_TOKEN = 2102
    UNTERM_STRING = 2103
    UNKNOWN_FUNC = 2104
    OVERFLOW = 2105
    TYPE_MISMATCH = 2106
    TOO_FEW_ARGS = 2107
    TOO_MANY_ARGS = 2108
    INVALID_REGEXP = 2109
    EXP_IS_TRIVIAL = 2110
    REGEXP_TOO_COMPLEX = 2111
    NESTING_TOO_DEEP = 2112
    EMPTY_QUENCH = 2201
    ATTR_EXISTS = 2202
    NO_SUCH_ATTR = 2203


def nack_category(code: int) -> str:
    """The spec's category for a code, used for codes we do not know."""
    if 1 <= code <= 999:
        return "connection establishment error"
    if 1000 <= code <= 1999:
        return "protocol error"
    if 2000 <= code <= 2999:
        return "request error"
    return "reserved error code"


class ElvinError(Exception):
    """Base class of every error the suite raises on purpose."""


class ProtocolError(ElvinError):
    """Bytes that are not a valid Elvin packet; says what and at which offset.

    The codec fills in what it knew when it gave up, so that a caller can
    answer precisely and lose nothing that arrived intact:

    * ``packet_id`` / ``xid``: the packet being decoded (``None`` if unknown),
      so a router can Nack the right request;
    * ``frames``: from ``FrameDecoder.feed_frames``, the whole packet bodies
      that came before a bad frame header in the same chunk;
    * ``packets``: the same for ``FrameDecoder.feed``, already decoded.

    They are declared here (not set ad hoc) so that a typo in a reader is an
    AttributeError rather than a silent ``getattr`` default.
    """

    packet_id: int | None
    xid: int | None
    frames: list[bytes]
    packets: list

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        self.packet_id = None
        self.xid = None
        self.frames = []
        self.packets = []
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"{message}{where}")


class SubscriptionError(ElvinError):
    """A subscription expression the language rejects.

    ``code`` is the spec's name (``"PARSE_ERROR"``...), ``nack_code`` the
    numeric Nack code, ``position`` the character offset in the expression
    (or ``None`` when the error has no place, e.g. EXP_IS_TRIVIAL), and
    ``args`` the Nack arguments as the spec lists them for that code.
    """

    def __init__(self, code: NackCode | str, message: str, position: int | None = None,
                 expression: str | None = None, args: tuple = ()) -> None:
        self.nack = NackCode[code] if isinstance(code, str) else NackCode(code)
        self.code = self.nack.name
        self.nack_code = int(self.nack)
        self.position = position
        self.expression = expression
        self.args_ = args
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        if self.position is None:
            return f"{self.code}: {self.message}"
        text = f"{self.code} at offset {self.position}: {self.message}"
        if self.expression is not None:
            caret = " " * min(self.position, len(self.expression)) + "^"
            text += f"\n  {self.expression}\n  {caret}"
        return text


class RouterStartError(ElvinError):
    """The router (or its federation) could not start, e.g. an address in
    use or a TLS certificate that does not load; the message says which.
    ``status`` is elvind's exit status for it: 3 (other failure) unless a
    path the configuration names is unusable (1, ``cli_common.os_error_status``)."""

    def __init__(self, message: str, status: int = 3) -> None:
        super().__init__(message)
        self.status = status


class KeyRefused(ElvinError):
    """Keys a router refuses (an unknown scheme, a key set too many): the
    Nack to answer with, as ``code``, ``message`` and ``args_``."""

    def __init__(self, code: NackCode, message: str, args: tuple = ()) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.args_ = args


#: the name it had (it shadowed nothing, but read like a typo of KeyError)
KeyError_ = KeyRefused
