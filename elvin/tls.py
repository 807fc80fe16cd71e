"""TLS contexts of a router's listeners.

A router serves one certificate (``tls-cert`` / ``tls-key``) on every TLS
listener, for clients (``elvin:4.0/ssl,...``) and for federated routers
(``ewaf:1.0/ssl,...``) alike, so both build their context here and a bad
file is reported the same way whichever listener needs it first.
"""

from __future__ import annotations

import ssl

from elvin.errors import RouterStartError

__all__ = ["listener_context"]


def listener_context(cert: str | None, key: str | None, what: str) -> ssl.SSLContext:
    """The server-side context for ``what`` (a phrase naming the listener, for
    the error message); RouterStartError naming the files if they are not
    given or do not load."""
    if not cert or not key:
        raise RouterStartError(f"{what} uses TLS (ssl): give the router's --tls-cert and "
                               "--tls-key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise RouterStartError(f"{what}: cannot load TLS certificate {cert!r} / key {key!r}: "
                               f"{exc}") from None
    return context
