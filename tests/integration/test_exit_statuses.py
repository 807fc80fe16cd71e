"""Exit statuses that retrying cannot change are usage errors (issue 44):
systemd's units do not restart on them (``RestartPreventExitStatus=``), so
a privileged port without the privilege or a listen host that does not
resolve is exit 1, not a restart loop; an address in use stays 3. And the
units all use the one list of ``elvin.cli_common``; the filewatcher's runs as
a user of its own with only the capability to read, and elvind's reaches its
router by its configuration file."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from elvin.cli_common import EXIT_FAILURE, EXIT_UNREACHABLE, EXIT_USAGE

from .process_util import ELVIND

UNITS = Path(__file__).resolve().parents[2] / "packaging" / "systemd"


def elvind(*args: str, prefix=()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, *ELVIND, *args, "--status-file", "/nonexistent/st.json"],
                          capture_output=True, text=True, timeout=60, cwd="/")


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr and len(lines) == 1, stderr
    return lines[0]


def _privileged_port() -> int:
    start = int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    if start <= 1:
        pytest.skip("this system lets anyone bind any port")
    return start - 1 if start <= 1024 else 1023


@pytest.mark.parametrize("what", ["listen", "federation", "metrics"])
def test_a_privileged_port_without_the_privilege_is_exit_1(what, unprivileged, tmp_path):
    port = _privileged_port()
    args = {"listen": ["--listen", f"elvin://127.0.0.1:{port}"],
            "federation": ["--listen", "elvin://127.0.0.1:0", "--federation-domain", "a",
                           "--federation-listen", f"ewaf://127.0.0.1:{port}"],
            "metrics": ["--listen", "elvin://127.0.0.1:0", "--metrics", f"127.0.0.1:{port}"],
            }[what]
    result = elvind(*args, prefix=unprivileged)
    line = one_line(result.stderr)
    assert result.returncode == EXIT_USAGE, line
    assert "Permission denied" in line and "CAP_NET_BIND_SERVICE" in line, line
    assert "error while attempting to bind" not in line


def test_a_listen_host_that_does_not_resolve_is_exit_1():
    result = elvind("--listen", "elvin://no-such-host.invalid:0")
    line = one_line(result.stderr)
    assert result.returncode == EXIT_USAGE, line
    assert "cannot listen on no-such-host.invalid" in line


def test_an_address_in_use_is_still_exit_3():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = elvind("--listen", f"elvin://127.0.0.1:{port}")
    assert result.returncode == EXIT_FAILURE, result.stderr
    assert "Address already in use" in one_line(result.stderr)


def _directives(unit: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


@pytest.mark.parametrize("name", ["elvind.service", "filewatcher.service",
                                  "newswatcher.service"])
def test_every_unit_uses_the_one_list_of_exit_codes(name):
    unit = UNITS / name
    d = _directives(unit)
    assert d["Restart"] == ["on-failure"]
    assert d["RestartPreventExitStatus"] == [str(EXIT_USAGE)]
    text = unit.read_text()
    # the comment says the list as elvin.cli_common has it
    assert (f"Exit codes (elvin.cli_common): {EXIT_USAGE} usage or configuration error"
            in text), name
    assert f"{EXIT_UNREACHABLE} cannot reach" in text and f"{EXIT_FAILURE} other" in text


def test_filewatcher_runs_as_its_own_user_with_only_the_read_capability():
    d = _directives(UNITS / "filewatcher.service")
    assert d["DynamicUser"] == ["yes"] and "User" not in d
    assert d["AmbientCapabilities"] == ["CAP_DAC_READ_SEARCH"]
    assert d["CapabilityBoundingSet"] == ["CAP_DAC_READ_SEARCH"]


def test_elvind_unit_reaches_its_router_by_its_config():
    # no --status-file of its own: elvind's default (status-PORT.json in the
    # RuntimeDirectory), which `sudo elvind status --config FILE` finds too
    d = _directives(UNITS / "elvind.service")
    assert d["ExecReload"] == ["/usr/bin/elvind reload --config /etc/elvin/elvind.toml"]
    assert not any("--status-file" in line for line in d["ExecStart"] + d["ExecStartPre"])
