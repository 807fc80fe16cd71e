"""Fixtures for tests against a real router on a free loopback port.

* ``router``      a fresh ``EmbeddedRouter`` per test (started; stopped after)
* ``router_url``  its URL, e.g. ``"elvin://127.0.0.1:40123"``
* ``make_router`` a factory for routers with other settings:
                  ``make_router(stats_interval=0.2)`` (stopped after the test)

These fixtures are shared with the client library's tests: keep them stable.
"""

from __future__ import annotations

import pytest

from elvin.router.embedded import EmbeddedRouter


@pytest.fixture
def make_router():
    routers: list[EmbeddedRouter] = []

    def factory(**settings) -> EmbeddedRouter:
        router = EmbeddedRouter(**settings).start()
        routers.append(router)
        return router

    yield factory
    for router in routers:
        router.stop()


@pytest.fixture
def router(make_router) -> EmbeddedRouter:
    return make_router()


@pytest.fixture
def router_url(router) -> str:
    return router.url
