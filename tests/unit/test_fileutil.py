"""The shared atomic write, read errors and pid check (elvin.fileutil)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from elvin.fileutil import atomic_write, pid_alive, reading


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


class ToolError(Exception):
    pass


def test_reading_says_what_where_and_why(tmp_path):
    with pytest.raises(ToolError, match=f"^cannot read key file {tmp_path}: Is a directory$"):
        with reading("key file", tmp_path, ToolError):
            open(tmp_path, "rb")
    missing = tmp_path / "nowhere"
    with pytest.raises(ToolError, match="^cannot read key file .*: No such file or directory$"):
        with reading("key file", missing, ToolError):
            missing.read_bytes()
    with pytest.raises(ToolError, match=f"^key file {missing} does not exist$"):
        with reading("key file", missing, ToolError, missing=True):
            missing.read_bytes()


def test_reading_passes_other_errors_and_results_through(tmp_path):
    with pytest.raises(KeyError):
        with reading("key file", tmp_path, ToolError):
            raise KeyError("x")
    target = tmp_path / "k"
    target.write_bytes(b"raw")
    with reading("key file", target, ToolError):
        data = target.read_bytes()
    assert data == b"raw"
