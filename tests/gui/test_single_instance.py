"""One instance per user, router and app: a second launch brings the first
forward and exits, ``--new-instance`` starts another anyway, and a socket
left by an instance that crashed does not stop the next one."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from elvin.qt.single import claim, socket_path
from tests.integration.process_util import stop
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]

SECOND = """
import sys
from PySide6.QtCore import QCoreApplication
from elvin.qt.single import claim
app = QCoreApplication([])
instance, raised = claim("elvin-test-app", *sys.argv[1:])
print("raised" if raised else "not answered" if raised is False else "first")
"""


@pytest.fixture
def runtime(monkeypatch):
    """A private runtime directory with a short path (a socket's path is
    at most 107 bytes, and pytest's temporary directories are long)."""
    run = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    yield run
    shutil.rmtree(run, ignore_errors=True)


def _second(*what: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SECOND, *what], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_second_launch_raises_the_first(qapp, qtbot, runtime):
    instance, raised = claim("elvin-test-app", "elvin://a:1", "alice")
    assert instance is not None and raised is None
    assert socket_path("elvin-test-app", "elvin://a:1", "alice").parent == runtime / "elvin"
    try:
        with qtbot.waitSignal(instance.activated, timeout=30_000):
            second = _second("elvin://a:1", "alice")
        # the answer goes out on this side's event loop: keep it running
        qtbot.waitUntil(lambda: second.poll() is not None, timeout=30_000)
        out, _ = second.communicate(timeout=30)
        assert out.strip() == "raised"
        # another router (or person) is another instance
        other = _second("elvin://b:1", "alice")
        out, _ = other.communicate(timeout=30)
        assert out.strip() == "first"
    finally:
        instance.close()


def test_a_crashed_instances_socket_is_replaced(qapp, runtime):
    path = socket_path("elvin-test-app", "elvin://a:1")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))                    # bound, never listening: what a crash leaves
    stale.close()
    assert path.exists()
    instance, raised = claim("elvin-test-app", "elvin://a:1")
    try:
        assert instance is not None and raised is None
        assert instance.server.isListening()
    finally:
        instance.close()


def _ticker(url: str, tmp_path: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HOME": str(tmp_path),
           "XDG_RUNTIME_DIR": os.environ["XDG_RUNTIME_DIR"],
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.Popen([sys.executable, "-m", "elvin_apps.tickertape", "--elvin", url,
                             "--no-history", "--no-embedded-router", "--user", "alice",
                             "--dock", "window", *extra],
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_a_second_tickertape_hands_over_to_the_first(router_url, tmp_path, runtime):
    first = _ticker(router_url, tmp_path)
    path = socket_path("tickertape", router_url, "alice")
    try:
        wait_until(lambda: first.poll() is not None or path.exists(), 60,
                   "the first tickertape to listen")
        assert first.poll() is None, first.stdout.read()
        second = _ticker(router_url, tmp_path)
        out, _ = second.communicate(timeout=60)
        assert second.returncode == 0, out
        assert "tickertape already runs for" in out and "brought forward" in out
        assert first.poll() is None
        deliberate = _ticker(router_url, tmp_path, "--new-instance")
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                deliberate.wait(3)           # it runs (and does not take the socket)
        finally:
            stop(deliberate)
        assert path.exists()
    finally:
        stop(first)
