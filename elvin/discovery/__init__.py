"""Elvin router discovery (SvrRqst / SvrAdvt over UDP multicast).

Implements draft-arnold-elvin-discovery-prelim-00: clients solicit router
advertisements, routers answer with the URIs of their endpoints, selected by
scope name or the default flag. Layers:

* :mod:`elvin.discovery.codec`: sans-IO packets and their XDR encoding;
* :mod:`elvin.discovery.responder`: the router's side (``DiscoveryResponder``);
* :mod:`elvin.discovery.client`: ``discover()`` / ``discover_sync()`` for
  clients, and ``discover_url()`` for applications with no URL configured.
"""

from elvin.discovery.client import (
    APP_TIMEOUT,
    discover,
    discover_adverts,
    discover_router_urls,
    discover_sync,
    discover_url,
    settings_from_env,
)
from elvin.discovery.codec import (
    DiscoveryDecodeError,
    SvrAdvt,
    SvrAdvtClose,
    SvrRqst,
    decode,
    encode,
    is_compatible,
)
from elvin.discovery.responder import DiscoveryResponder, advertised_urls
from elvin.discovery.transport import DEFAULT_ADDRESS, DEFAULT_PORT

__all__ = [
    "APP_TIMEOUT",
    "DEFAULT_ADDRESS",
    "DEFAULT_PORT",
    "DiscoveryDecodeError",
    "DiscoveryResponder",
    "SvrAdvt",
    "SvrAdvtClose",
    "SvrRqst",
    "advertised_urls",
    "decode",
    "discover",
    "discover_adverts",
    "discover_router_urls",
    "discover_sync",
    "discover_url",
    "encode",
    "is_compatible",
    "settings_from_env",
]
