"""The shared atomic write and pid check (elvin.fileutil)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from elvin.fileutil import atomic_write, pid_alive


def test_atomic_write_replaces_whole_and_sets_the_mode(tmp_path):
    target = tmp_path / "deeper" / "file.toml"
    atomic_write(target, "first\n")
    assert target.read_text() == "first\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600      # private by default
    atomic_write(target, b"second\n", mode=0o644)
    assert target.read_bytes() == b"second\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.toml"]   # no temporaries


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "file.json"
    atomic_write(target, "old")
    with pytest.raises(TypeError):
        atomic_write(target, 42)  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.json"]


def test_pid_alive():
    assert pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not pid_alive(child.pid)
    for junk in (None, "123", 0, -1, True, 1.5):
        assert not pid_alive(junk)
