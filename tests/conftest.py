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

import functools
import logging
import os
import tempfile

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# apps with no URL configured look for routers by discovery first: in tests they must
# not find a router elsewhere on the host or network (discovery tests opt back in)
os.environ.setdefault("ELVIN_DISCOVERY", "off")
# apps remember windows, rosters and settings in the XDG directories: tests keep
# them out of the user's home (and two test workers out of each other's way)
_XDG = tempfile.mkdtemp(prefix="elvin-tests-xdg-")
for _name in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
    os.environ[_name] = os.path.join(_XDG, _name.lower())


@pytest.fixture(autouse=True)
def _root_logger_restored():
    """The root logger as it was before each test. A test that runs a tool's
    ``main()`` in-process sets it up (``cli_common.setup_logging``: one
    handler on the ``sys.stderr`` pytest captures for that test alone); left
    there, a later test's log line met the closed stream and pytest printed
    "--- Logging error ---" with a traceback in the middle of the run."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def pytest_report_header(config):
    """Which path the codec's hot loops took in this run: the compiled accelerator
    (``make accel``) or pure Python (``ELVIN_PURE=1``, or not built)."""
    from elvin.protocol import _accel

    return f"elvin codec: {_accel.describe()}"


def pytest_collection_modifyitems(config, items):
    """``make test`` runs the suite on several workers (pytest-xdist,
    ``--dist loadgroup``): the tests that share the session's SparkSession run
    on one worker, so that one JVM serves them all."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))


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
    prefix = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    if not _nobody_can_import(tuple(prefix)):
        pytest.skip("nobody cannot read this checkout or its .venv (a private parent "
                    "directory, e.g. one made by mktemp -d): clone it where others may read")
    return prefix


@functools.cache
def _nobody_can_import(prefix: tuple[str, ...]) -> bool:
    import subprocess
    import sys

    result = subprocess.run([*prefix, sys.executable, "-c", "import elvin, elvin_apps"],
                            capture_output=True, cwd="/", timeout=60)
    return result.returncode == 0


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
