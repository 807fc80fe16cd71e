"""The Elvin 4 router (``elvind``), on asyncio.

* ``server.Router``        listeners, sessions, delivery, lifecycle (async API)
* ``embedded.EmbeddedRouter``  a Router in a background thread (tests, apps)
* ``session``              one client's protocol state machine
* ``engine``               subscription store, index and matching
* ``quench``               quench (subset C): SubAdd/Mod/DelNotify
* ``sendqueue``            bounded per-client send queue and drop policies
* ``options``              connection-option negotiation (spec 7.5)
* ``security``             key checks and pre-hashed key matching
* ``stats``                counters and the Elvin-Router-Stats notification
* ``config`` / ``cli``     TOML configuration and the ``elvind`` command
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ConfigError": "elvin.router.config",
    "RouterConfig": "elvin.router.config",
    "load_config": "elvin.router.config",
    "EmbeddedRouter": "elvin.router.embedded",
    "Router": "elvin.router.server",
    "RouterStartError": "elvin.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    # lazy, so that ``elvin.router.options`` & co. import without the engine
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'elvin.router' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
