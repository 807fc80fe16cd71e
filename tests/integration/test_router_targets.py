"""``elvind status`` and ``elvind reload`` act on the router they are
pointed at, or on none (issue 44): two routers never share a default status
file, a ``--config`` that cannot say which router it configures is refused
in one line, and a status file of a router running with another
configuration is not acted upon."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.waiting import wait_until

from .process_util import ELVIND, free_port, stop, wait_listening


@pytest.fixture
def runtime(tmp_path) -> Path:
    """A runtime directory of the test's own, where the routers and tools
    keep and look for default status files (as systemd's
    RuntimeDirectory= does)."""
    path = tmp_path / "run"
    path.mkdir()
    return path


@pytest.fixture
def routers(runtime):
    procs = []

    def start(*args: str) -> subprocess.Popen:
        proc = subprocess.Popen([*ELVIND, *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "RUNTIME_DIRECTORY": str(runtime)})
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            stop(proc)
        proc.communicate()


def tool(runtime: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ELVIND[:3], *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "RUNTIME_DIRECTORY": str(runtime)})


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr and len(lines) == 1, stderr
    return lines[0]


def config_file(path: Path, port: int, extra: str = "") -> Path:
    path.write_text(f'listen = "elvin://127.0.0.1:{port}"\ndiscovery = false\n{extra}')
    return path


def started(routers, runtime: Path, path: Path, port: int) -> subprocess.Popen:
    proc = routers("--config", str(path))
    wait_listening(port, proc)
    wait_until(lambda: (runtime / f"status-{port}.json").exists(), what="the status file")
    return proc


def reloads(runtime: Path, port: int) -> int:
    return json.loads((runtime / f"status-{port}.json").read_text())["reload"]["serial"]


def test_two_routers_keep_apart_default_status_files(routers, runtime, tmp_path):
    a_port, b_port = free_port(), free_port()
    a = config_file(tmp_path / "a.toml", a_port)
    b = config_file(tmp_path / "b.toml", b_port)
    started(routers, runtime, a, a_port)
    started(routers, runtime, b, b_port)
    for path, port in ((a, a_port), (b, b_port)):
        result = tool(runtime, "status", "--config", str(path), "--json")
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["listen"] == [f"elvin://127.0.0.1:{port}"]
        assert data["config"] == str(path)
        result = tool(runtime, "reload", "--config", str(path))
        assert result.returncode == 0, result.stderr
        assert f"pid {data['pid']} reloaded: no changes" in result.stdout
    assert reloads(runtime, a_port) == 1 and reloads(runtime, b_port) == 1


def test_a_file_that_is_not_toml_reaches_no_router(routers, runtime, tmp_path):
    port = free_port()
    path = config_file(tmp_path / "r.toml", port)
    started(routers, runtime, path, port)
    path.write_text(path.read_text() + "[broken\n")
    for command in ("status", "reload"):
        result = tool(runtime, command, "--config", str(path))
        assert result.returncode == 1, result.stdout
        line = one_line(result.stderr)
        assert f"cannot tell which router {path} configures" in line, line
        assert "not valid TOML" in line and "--status-file" in line
    assert reloads(runtime, port) == 0          # no SIGHUP reached it


def test_a_mistake_in_one_key_still_reaches_the_router_to_hear_it_refuse(routers, runtime,
                                                                        tmp_path):
    port = free_port()
    path = config_file(tmp_path / "r.toml", port)
    started(routers, runtime, path, port)
    path.write_text(path.read_text() + "bogus = 1\n")
    result = tool(runtime, "reload", "--config", str(path))
    assert result.returncode == 1
    assert "refused the new configuration" in result.stderr
    assert "unknown setting 'bogus'" in result.stderr
    assert reloads(runtime, port) == 1


def test_the_router_of_another_config_is_not_acted_on(routers, runtime, tmp_path):
    port, other_port = free_port(), free_port()
    status = tmp_path / "shared.json"
    running = config_file(tmp_path / "running.toml", port, f'status-file = "{status}"\n')
    proc = routers("--config", str(running))
    wait_listening(port, proc)
    wait_until(status.exists, what="the status file")
    # another file naming the same status file, and one with no status-file
    # given with that status file: neither is the running router's
    other = config_file(tmp_path / "other.toml", other_port, f'status-file = "{status}"\n')
    for args in (["--config", str(other)],
                 ["--config", str(config_file(tmp_path / "third.toml", other_port)),
                  "--status-file", str(status)]):
        for command in ("status", "reload"):
            result = tool(runtime, command, *args)
            assert result.returncode == 1, (command, args, result.stdout)
            line = one_line(result.stderr)
            assert f"runs with {running}, not " in line, line
    assert json.loads(status.read_text())["reload"]["serial"] == 0
    # the running router's own file reaches it
    result = tool(runtime, "reload", "--config", str(running))
    assert result.returncode == 0, result.stderr


def test_a_router_found_by_its_config_when_its_port_was_edited(routers, runtime, tmp_path):
    port = free_port()
    path = config_file(tmp_path / "r.toml", port)
    started(routers, runtime, path, port)
    config_file(path, free_port())          # a new port: needs a restart, says the router
    result = tool(runtime, "reload", "--config", str(path))
    assert result.returncode == 0, result.stderr
    assert "needs a restart: listen" in result.stdout


def test_a_second_router_does_not_take_over_a_named_status_file(routers, runtime, tmp_path):
    status = tmp_path / "st.json"
    port = free_port()
    first = routers("--listen", f"elvin://127.0.0.1:{port}", "--status-file", str(status))
    wait_listening(port, first)
    wait_until(status.exists, what="the status file")
    second = routers("--listen", f"elvin://127.0.0.1:{free_port()}", "--status-file",
                     str(status))
    _, err = second.communicate(timeout=60)
    assert second.returncode == 1
    assert f"the status file {status} is in use by elvind pid {first.pid}" in one_line(err)
    assert json.loads(status.read_text())["pid"] == first.pid
