"""``elvin-console`` as a command: flags, exit codes, --screenshot.

Run as subprocesses (``python -m elvin_apps.console``), offscreen, against
the bundled router on a free loopback port.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def console(*args: str, env: dict | None = None, timeout: float = 60):
    environment = {**os.environ, "QT_QPA_PLATFORM": "offscreen",
                   "XDG_CONFIG_HOME": "/nonexistent-console-config"}
    environment.pop("ELVIN_URL", None)
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "elvin_apps.console", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=environment)


@pytest.fixture
def router():
    from elvin.router.embedded import EmbeddedRouter
    r = EmbeddedRouter()
    r.start()
    try:
        yield r
    finally:
        r.stop()


def test_version_and_help():
    result = console("--version")
    assert result.returncode == 0 and result.stdout.startswith("elvin-console ")
    result = console("--help")
    assert result.returncode == 0 and "--screenshot" in result.stdout


@pytest.mark.parametrize(("args", "words"), [
    (["--elvin", "nope://x"], "bad Elvin URL"),
    (["--no-such-flag"], "unrecognized arguments"),
    (["--buffer", "1"], "--buffer must be from"),
    (["--config", "/nonexistent/console.toml"], "console.toml: no such file"),
    (["--workspace", "/nonexistent/ws.json"], "cannot read"),
])
def test_usage_errors_exit_1(args, words):
    result = console(*args)
    assert result.returncode == 1, result.stderr
    assert words in result.stderr


def test_bad_workspace_exits_1_naming_the_field(tmp_path):
    path = tmp_path / "ws.json"
    path.write_text(json.dumps({"panes": [{"kind": "producer", "rate": -1}]}))
    result = console("--workspace", str(path))
    assert result.returncode == 1 and "panes[0].rate" in result.stderr


def test_screenshot_with_a_router(router, tmp_path):
    shot = tmp_path / "shot.png"
    result = console("--elvin", router.url, "--screenshot", str(shot))
    assert result.returncode == 0, result.stderr
    assert shot.stat().st_size > 5000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_screenshot_of_a_workspace_pointed_elsewhere(router, tmp_path):
    workspace = tmp_path / "ws.toml"
    workspace.write_text('version = 1\n[[routers]]\nname = "x"\nurl = "elvin://127.0.0.1:1"\n'
                         '[[panes]]\nkind = "consumer"\nrouter = "x"\n'
                         'subscription = "require(A)"\nsubscribed = true\n')
    shot = tmp_path / "shot.png"
    # --elvin replaces the first router's URL: the subscription is made there
    result = console("--workspace", str(workspace), "--elvin", router.url,
                     "--screenshot", str(shot))
    assert result.returncode == 0, result.stderr
    assert shot.exists()


def test_screenshot_without_a_router_exits_2(tmp_path):
    shot = tmp_path / "shot.png"
    result = console("--elvin", "elvin://127.0.0.1:1", "--screenshot", str(shot))
    assert result.returncode == 2
    assert shot.exists()          # the window is still rendered, showing why
    assert "not connected" in result.stderr and "127.0.0.1:1" in result.stderr
    assert "propagateSizeHints" not in result.stderr
