"""A short seeded run of the mobility fault harness (``bench/mobility_chaos.py``):
two federated routers killed and started again at random during moves, a
stored notification changed or the WAL torn while one is down; its checker
per client must find nothing twice and no loss it was not told about (half the
restarts armed to kill themselves at a random named point of a move). Long
runs and a full disk (``--full-disk``) are the bench's, by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "mobility_chaos.py"


@pytest.mark.timeout(180)
def test_a_short_seeded_chaos_run_finds_nothing_twice_and_no_silent_loss(tmp_path):
    result = subprocess.run(
        [sys.executable, str(BENCH), "--seed", "4", "--duration", "6", "--clients", "2",
         "--fault-every", "2", "--damage", "0.3", "--crash-points", "0.5", "--keep", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=170)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "total:" in result.stdout and ": OK" in result.stdout, result.stdout
    assert "kills A" in result.stdout
