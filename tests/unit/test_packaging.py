"""The systemd units and the logrotate snippet in packaging/ (issue 32):
``systemd-analyze verify`` finds nothing wrong, each unit is ``Type=notify``
and reloads through its daemon's ``reload`` command, and the logrotate
snippet rotates the log files the units write."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGING = Path(__file__).resolve().parents[2] / "packaging"
UNITS = sorted((PACKAGING / "systemd").glob("*.service"))
SYSTEM_UNITS = Path("/usr/lib/systemd/system")


def unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None,
                                       comment_prefixes=("#", ";"))
    parser.optionxform = str
    parser.read_string(path.read_text())
    return parser


def test_there_is_a_unit_per_daemon():
    assert [u.stem for u in UNITS] == ["elvind", "filewatcher", "newswatcher"]


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.stem)
def test_units_notify_reload_and_write_where_systemd_gives_them(path):
    service = unit(path)["Service"]
    assert service["Type"] == "notify" and service["NotifyAccess"] == "main"
    assert f"/usr/bin/{path.stem} reload" in service["ExecReload"]
    assert "LogsDirectory" in service
    assert "${LOGS_DIRECTORY}/" in service["ExecStart"]
    assert service["RestartPreventExitStatus"] == "1"
    assert service["NoNewPrivileges"] == "yes" and service["ProtectSystem"] == "strict"
    log_dir = service["LogsDirectory"]
    assert f"/var/log/{log_dir}/*.log" in (PACKAGING / "logrotate" / "elvin").read_text()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None or not SYSTEM_UNITS.is_dir(),
                    reason="systemd-analyze is not installed")
@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.stem)
def test_systemd_analyze_verify_finds_nothing(path, tmp_path):
    # a root of our own: the commands exist there, the system's units too
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    for name in ("elvind", "filewatcher", "newswatcher"):
        command = tmp_path / "usr" / "bin" / name
        command.write_text("#!/bin/sh\n")
        command.chmod(0o755)
    shutil.copytree(SYSTEM_UNITS, tmp_path / "usr" / "lib" / "systemd" / "system",
                    symlinks=True)
    target = tmp_path / "etc" / "systemd" / "system"
    target.mkdir(parents=True)
    shutil.copy(path, target)
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", f"--root={tmp_path}",
                             str(target / path.name)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr
