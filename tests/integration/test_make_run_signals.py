"""``make run``'s launcher (``python -m elvin.daemon.run``) stops everything it
started -- the bundled router and the tickertape -- on SIGTERM, SIGINT and
SIGHUP, leaving no orphan and the router's port free.

Real processes: the launcher starts a real ``elvind`` on a free port and a
real tickertape (Qt offscreen); the test sends the signal to the launcher
only, as a service manager, ``kill`` or a closing terminal would."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import wait_until

from .process_util import free_port


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_the_launcher_stops_the_router_and_the_tickertape(sig, tmp_path):
    port = free_port()
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", ELVIN_DISCOVERY="off",
               HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_DATA_HOME=str(tmp_path / "data"))
    env.pop("ELVIN_URL", None)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "elvin.daemon.run", "--router-url", f"elvin://127.0.0.1:{port}"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        wait_until(lambda: answers(port), timeout=60, what="the bundled router")
        kids = wait_until(lambda: len(children_of(launcher.pid)) == 2
                          and children_of(launcher.pid), timeout=60,
                          what="the router and the tickertape")
        launcher.send_signal(sig)
        out, _ = launcher.communicate(timeout=60)
        assert launcher.returncode == 0, out
        assert "Traceback" not in out, out
        wait_until(lambda: not any(alive(pid) for pid in kids), timeout=30,
                   what="both children to end")
        wait_until(lambda: not answers(port), timeout=30, what="the port to be free")
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        for pid in children_of(launcher.pid):
            os.kill(pid, signal.SIGKILL)
