"""Exceptions raised by the client library.

A router's Nack becomes a :class:`NackError` (or, for the subscription
language codes 2101-2112, an ``elvin.SubscriptionError`` carrying the
position the router reported), so that an error found locally and one found
by the router look the same to the application.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from elvin.errors import ElvinError, NackCode, SubscriptionError, nack_category

if TYPE_CHECKING:
    from elvin.client.events import CloseReason

__all__ = [
    "ConnectError",
    "ConnectionClosedError",
    "NackError",
    "OptionsRejectedError",
    "QuenchNotSupported",
    "SubscriptionClosedError",
    "nack_exception",
    "render_nack_message",
]


class NackError(ElvinError):
    """A request the router refused with a Nack.

    ``code`` is the numeric error code, ``name`` the NackCode name
    (``"NO_SUCH_SUB"``) or, for codes the spec does not name, the code's
    category (``"request error"``); ``message`` is the router's template with
    ``%1``.. replaced by the arguments; ``args_`` the raw arguments and
    ``request`` the name of the refused request packet.
    """

    def __init__(self, code: int, template: str, args: tuple = (), request: str = "") -> None:
        self.code = int(code)
        try:
            self.name = NackCode(self.code).name
        except ValueError:
            self.name = nack_category(self.code)
        self.template = template
        self.args_ = tuple(args)
        self.request = request
        self.message = render_nack_message(template, self.args_)
        where = f" (to {request})" if request else ""
        super().__init__(f"{self.name} [{self.code}]{where}: {self.message}")


class QuenchNotSupported(NackError):
    """The router does not implement quench (protocol subset C, which is
    optional): it answered a quench request with Nack NOT_IMPL (2007), as
    the Avis router does ("Quench not supported"), or with PROT_ERROR (1001),
    as Avis releases before 1.1 did with the same message.

    Quench is an optimisation, so an application catches this and falls
    back to producing everything (``Connection.supports_quench`` is then
    False). A ``NackError``, so ``except NackError`` catches it too.
    """


#: the requests whose NOT_IMPL answer means "no quench at this router"
QUENCH_REQUESTS = frozenset({"QnchAddRqst", "QnchModRqst", "QnchDelRqst"})

#: the Nack codes that mean "no quench" in answer to a quench request: the
#: spec's NOT_IMPL, and PROT_ERROR from early Avis releases (the client's quench
#: request is well formed, so a protocol error to it can only mean the router
#: does not know the packet; quench is an optimisation, so falling back to
#: producing everything is the safe reading either way)
QUENCH_REFUSALS = frozenset({NackCode.NOT_IMPL, NackCode.PROT_ERROR})


class ConnectionClosedError(ElvinError):
    """The connection is closed (or was lost); ``reason`` says why."""

    def __init__(self, message: str, reason: CloseReason | None = None) -> None:
        self.reason = reason
        super().__init__(message)


class ConnectError(ElvinError, OSError):
    """The router could not be reached (refused, unreachable, timed out).
    An ``OSError`` too, so ``except OSError`` also catches it."""


class OptionsRejectedError(ElvinError):
    """The application refused the connection options the router offered
    (``options_check`` returned False); ``options`` holds the offer."""

    def __init__(self, options: dict) -> None:
        self.options = dict(options)
        super().__init__(f"connection options rejected: {self.options!r}")


class SubscriptionClosedError(ElvinError):
    """``get()`` on a subscription or quench that is closed and drained."""


_TOKEN = re.compile(r"%(\d+)")


def _format_arg(value: object) -> str:
    if isinstance(value, bytes):
        return "[" + " ".join(f"{b:02x}" for b in value) + "]"
    return str(value)


def render_nack_message(template: str, args: tuple) -> str:
    """Substitute ``%n`` tokens with the Nack arguments.

    The spec says ``n`` is an index into the arguments without fixing the
    base; Avis and libelvin count from 1. A template that uses ``%0`` is
    taken to count from 0. Unknown tokens are left as they are.
    """
    base = 0 if "%0" in template else 1

    def sub(match: re.Match) -> str:
        index = int(match.group(1)) - base
        if 0 <= index < len(args):
            return _format_arg(args[index])
        return match.group(0)

    return _TOKEN.sub(sub, template)


def nack_exception(code: int, template: str, args: tuple, request: str = "",
                   expression: str | None = None) -> ElvinError:
    """The exception for a Nack: SubscriptionError for the subscription
    language codes (with the offset from the first argument),
    QuenchNotSupported for a refusal of a quench request (QUENCH_REFUSALS),
    else NackError."""
    if 2101 <= code <= 2112:
        position = args[0] if args and type(args[0]) is int else None
        if position is not None and position < 0:
            position = None
        message = render_nack_message(template, args) or NackCode(code).name
        return SubscriptionError(NackCode(code), message, position, expression, tuple(args))
    if code in QUENCH_REFUSALS and request in QUENCH_REQUESTS:
        return QuenchNotSupported(code, template, args, request)
    return NackError(code, template, args, request)
