"""Helpers for tests that run ``elvind`` (or another server) as a subprocess.

::

    from .process_util import ELVIND, free_port, stop, wait_listening

    port = free_port()
    proc = subprocess.Popen([*ELVIND, "--listen", f"elvin://127.0.0.1:{port}"], ...)
    try:
        wait_listening(port, proc)
        ...
    finally:
        stop(proc)

One copy of each, so that every process test starts, waits for and stops
its processes the same way (the in-process routers are the ``router`` and
``make_router`` fixtures of ``tests/conftest.py``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

__all__ = ["ELVIND", "free_port", "stop", "wait_listening"]

#: ``elvind`` as this interpreter runs it (no console script needed), not
#: answering router discovery: a test's router must not be found by others
ELVIND = [sys.executable, "-m", "elvin.router", "--no-discovery"]


def free_port() -> int:
    """A loopback TCP port nothing listens on (just now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, timeout: float = 15,
                   name: str = "elvind") -> None:
    """Return once ``proc`` accepts connections on ``port``; AssertionError
    (with its output) if it exits first, or if ``timeout`` passes (then it
    is killed, so that no test leaves it behind)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited early: {proc.communicate()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"{name} did not start listening")


def stop(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
