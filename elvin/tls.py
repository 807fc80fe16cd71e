"""TLS contexts of a router's listeners.

A router serves one certificate (``tls-cert`` / ``tls-key``) on every TLS
listener, for clients (``elvin:4.0/ssl,...``) and for federated routers
(``ewaf:1.0/ssl,...``) alike, so both build their context here and a bad
file is reported the same way whichever listener needs it first.

A federation listener whose accept entries require authentication also
asks the dialling router for a certificate (``ask_for_client_certificates``):
one that does not chain to the given CA fails the handshake; having none is
left to the accept entry to judge (``elvin.federation.admission``).
"""

from __future__ import annotations

import ssl

from elvin.errors import RouterStartError

__all__ = ["ask_for_client_certificates", "listener_context"]


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


def ask_for_client_certificates(context: ssl.SSLContext, ca: str | None, what: str) -> None:
    """Make ``context`` ask the peer for a certificate (optional: a peer
    without one still connects) that must chain to the PEM file ``ca``, or
    to the system's trust store without it; RouterStartError naming the
    file if it cannot be loaded."""
    try:
        if ca:
            context.load_verify_locations(cafile=ca)
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except (OSError, ssl.SSLError) as exc:
        raise RouterStartError(f"{what}: cannot load the CA certificate(s) {ca!r} that "
                               f"dialling routers' certificates must chain to: {exc}") from None
    context.verify_mode = ssl.CERT_OPTIONAL
