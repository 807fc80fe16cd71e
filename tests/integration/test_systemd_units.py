"""The systemd units in packaging/systemd: ``systemd-analyze verify`` passes
(with ExecStart pointed at this checkout's commands, which the units name as
/usr/bin/...), and elvind's unit runs it the way the issue asks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from elvin.router.cli import build_parser, make_config

UNITS = Path(__file__).resolve().parents[2] / "packaging" / "systemd"
BIN = Path(sys.executable).parent


def verify(unit: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing (scripts/ensure-system-packages.sh installs it)"
    text = unit.read_text()
    for command in ("elvind", "filewatcher", "newswatcher"):
        text = text.replace(f"/usr/bin/{command}", str(BIN / command))
    copy = tmp_path / unit.name
    copy.write_text(text)
    return subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("name", ["elvind.service", "filewatcher.service",
                                  "newswatcher.service"])
def test_units_pass_systemd_analyze_verify(name, tmp_path):
    result = verify(UNITS / name, tmp_path)
    assert result.returncode == 0, result.stderr
    assert name not in result.stderr, result.stderr


def _directives(unit: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_elvind_unit_keeps_its_state_in_the_state_directory(tmp_path):
    d = _directives(UNITS / "elvind.service")
    assert d["StateDirectory"] == ["elvind"]
    assert d["ExecReload"][0].startswith("/usr/bin/elvind reload")   # the router's verdict
    assert d["Type"] == ["notify"]
    assert "1" in d["RestartPreventExitStatus"][0].split()
    exec_start = d["ExecStart"][0].split()
    assert exec_start[0] == "/usr/bin/elvind"
    # the command line is one elvind accepts, the state directory from systemd
    dirs = {"${STATE_DIRECTORY}": tmp_path / "state", "${RUNTIME_DIRECTORY}": tmp_path / "run",
            "${LOGS_DIRECTORY}": tmp_path / "log"}
    args = exec_start[1:]
    for name, path in dirs.items():
        args = [a.replace(name, str(path)) for a in args]
    config = tmp_path / "elvind.toml"
    config.write_text("mobility = true\n")
    args[args.index("/etc/elvin/elvind.toml")] = str(config)
    settings = make_config(build_parser().parse_args(args))
    assert settings.state_dir == str(tmp_path / "state") and settings.mobility
    for hardening in ("NoNewPrivileges", "ProtectSystem", "PrivateTmp", "ProtectHome"):
        assert hardening in d
