"""Descriptor headroom (elvin.router.door): ``elvind`` as a process under a
small open-files limit, flooded with sessions from one address."""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
from pathlib import Path

from elvin.protocol import ConnRqst, frame
from tests.waiting import until

from .process_util import ELVIND, free_port, stop, wait_listening


def _limits(soft: int, hard: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _start(tmp_path: Path, soft: int, hard: int, config: str = "") -> tuple:
    port = free_port()
    (tmp_path / "elvind.toml").write_text(config)
    status = tmp_path / "status.json"
    proc = subprocess.Popen(
        [*ELVIND, "--config", str(tmp_path / "elvind.toml"), "--listen",
         f"elvin://127.0.0.1:{port}", "--status-file", str(status), "--log-file",
         str(tmp_path / "elvind.log")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_limits(soft, hard))
    wait_listening(port, proc)
    return proc, port, status


def _open_files_limit(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open-files line")


def test_the_soft_open_files_limit_is_raised_to_the_hard_one(tmp_path):
    proc, _port, _status = _start(tmp_path, 100, 300)
    try:
        assert _open_files_limit(proc.pid) == (300, 300)
    finally:
        stop(proc)


def _refused(status: Path) -> dict:
    try:
        return json.loads(status.read_text())["counters"].get("refused", {})
    except (OSError, ValueError, KeyError):
        return {}


async def _flood(port: int, count: int) -> list:
    loop = asyncio.get_running_loop()
    held = []
    for _ in range(count):
        transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
        transport.write(frame(ConnRqst(1, 4, 0, {})))
        held.append(transport)
    return held


async def test_a_flood_of_sessions_leaves_the_router_its_own_descriptors(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))    # the flood's own sockets
    proc, port, status = _start(
        tmp_path, 128, 128, "max-connections-per-address = 0\nmax-pre-session = 0\n"
        "max-pre-session-per-address = 0\ndescriptor-reserve = 32\n")
    held = []
    try:
        held = await _flood(port, 150)
        # the status file (rewritten every few seconds) is still written, and
        # says the sockets past the reserve were refused
        await until(lambda: _refused(status).get("descriptors", 0) > 0, 30,
                    "the status file counts sockets refused for descriptors")
        assert len(list(Path(f"/proc/{proc.pid}/fd").iterdir())) <= 128 - 32 + 1
    finally:
        for transport in held:
            transport.close()
        stop(proc)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    log = (tmp_path / "elvind.log").read_text()
    assert "Too many open files" not in log
    assert "fewer than descriptor-reserve (32)" in log
