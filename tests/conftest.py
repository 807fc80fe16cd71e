"""Test-wide settings and fixtures. Qt must be told to render offscreen before it loads.

Fixtures for tests against a real router on a free loopback port (here, so
that the integration, GUI and other tests share one copy):

* ``router``      a fresh ``EmbeddedRouter`` per test (started; stopped after)
* ``router_url``  its URL, e.g. ``"elvin://127.0.0.1:40123"``
* ``make_router`` a factory for routers with other settings:
                  ``make_router(stats_interval=0.2)`` (stopped after the test)

These fixtures are shared with the client library's tests: keep them stable.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# apps with no URL configured look for routers by discovery first: in tests they must
# not find a router elsewhere on the host or network (discovery tests opt back in)
os.environ.setdefault("ELVIN_DISCOVERY", "off")


@pytest.fixture
def make_router():
    from elvin.router.embedded import EmbeddedRouter

    routers: list[EmbeddedRouter] = []

    def factory(**settings) -> EmbeddedRouter:
        router = EmbeddedRouter(**settings).start()
        routers.append(router)
        return router

    yield factory
    for router in routers:
        router.stop()


@pytest.fixture
def router(make_router):
    return make_router()


@pytest.fixture
def router_url(router) -> str:
    return router.url


@pytest.fixture
def unprivileged():
    """The command prefix that runs a program as ``nobody`` (what ``User=`` in
    a systemd unit does), for tests of what an unprivileged daemon meets:
    directories it may not enter, files it may not read. Needs root to
    switch user, so the test is skipped only where the tests do not run as
    root."""
    import shutil

    if os.geteuid() != 0:
        pytest.skip("switching to an unprivileged user needs root")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


@pytest.fixture
def shared_tmp():
    """A scratch directory every user may enter (mode 755; pytest's own
    ``tmp_path`` is private to root), removed after the test."""
    import shutil
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp(prefix="elvin-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def private_dir(shared_tmp):
    """A directory (mode 700, root's) that ``nobody`` may not enter, inside
    one it may: where Debian keeps TLS keys (/etc/ssl/private)."""
    private = shared_tmp / "private"
    private.mkdir(mode=0o700)
    return private
