"""``biff`` on the command line: exit codes, config file, screenshot."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from elvin_apps.biff import CoffeeBiff
from elvin_apps.biff.cli import main
from elvin_apps.biff.config import ConfigError, load
from PySide6.QtGui import QImage

import elvin
from elvin._version import __version__
from elvin.router_url import choose_router_url

ROOT = Path(__file__).resolve().parents[2]


def run_biff(*args: str, timeout: float = 60, env: dict | None = None):
    full_env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", **(env or {})}
    full_env.pop("ELVIN_URL", None)
    return subprocess.run([sys.executable, "-m", "elvin_apps.biff", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=full_env)


def test_version_and_usage_errors(capsys):
    assert main(["--version"]) == 0
    assert f"biff {__version__}" in capsys.readouterr().out
    assert main(["--no-such-flag"]) == 1
    assert main(["--log-level", "LOUD"]) == 1
    assert main(["--elvin", "http://example.org"]) == 1
    assert "bad Elvin URL 'http://example.org'" in capsys.readouterr().err
    assert main(["--user", "a|b"]) == 1
    assert "user" in capsys.readouterr().err


def test_config_file(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ELVIN_URL", raising=False)
    good = tmp_path / "biff.toml"
    good.write_text('elvin = "elvin://example.org:2917"\nuser = "ann"\nheartbeat = 10\n'
                    'coffee_minutes = 5\ntext = "kitchen"\n')
    config = load(good)
    assert (config.elvin, config.user, config.heartbeat, config.coffee_minutes,
            config.text) == ("elvin://example.org:2917", "ann", 10.0, 5.0, "kitchen")
    assert choose_router_url(None, config.elvin).url == "elvin://example.org:2917"
    monkeypatch.setenv("ELVIN_URL", "elvin://env:1")
    assert choose_router_url(None, config.elvin).url == "elvin://env:1"
    assert choose_router_url("elvin://flag:2", config.elvin).url == "elvin://flag:2"
    monkeypatch.delenv("ELVIN_URL")
    assert choose_router_url(None, None).url == "elvin://127.0.0.1:2917"

    for text, message in [("heartbeat = 'fast'", "heartbeat must be a number"),
                          ("heartbeat = 0", "between"),
                          ("coffee_minutes = true", "coffee_minutes must be a number"),
                          ("colour = 'red'", "unknown key 'colour'"),
                          ("user = [1]", "user must be a string"),
                          ("= broken", "not valid TOML")]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text + "\n")
        with pytest.raises(ConfigError, match=message) as info:
            load(bad)
        assert str(bad) in str(info.value)
        assert main(["--config", str(bad)]) == 1
        assert message.split()[0] in capsys.readouterr().err
    assert main(["--config", str(tmp_path / "missing.toml")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert load(tmp_path / "missing.toml").heartbeat == 30.0      # default path: defaults


def test_unreachable_router_exits_2():
    result = run_biff("--elvin", "elvin://127.0.0.1:1", "--screenshot", "/dev/null")
    assert result.returncode == 2, result.stderr
    assert "cannot reach the Elvin router at elvin://127.0.0.1:1" in result.stderr


class Drinkers:
    """A router with coffee drinkers, on an event loop in a thread (the
    app under test is another process)."""

    def __init__(self, router) -> None:
        self.router = router
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.biffs: list[CoffeeBiff] = []
        self.conns: list = []

    def add(self, user: str, text: str = "") -> None:
        async def go():
            conn = await elvin.connect(self.router.url)
            biff = CoffeeBiff(user, heartbeat=60, reply_delay=0.05)
            await biff.start(conn)
            await biff.activate(text)
            self.biffs.append(biff)
            self.conns.append(conn)
        asyncio.run_coroutine_threadsafe(go(), self.loop).result(10)

    def close(self) -> None:
        async def go():
            for biff, conn in zip(self.biffs, self.conns, strict=True):
                await biff.stop()
                await conn.close()
        asyncio.run_coroutine_threadsafe(go(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def router():
    from elvin.router.embedded import EmbeddedRouter
    r = EmbeddedRouter().start()
    yield r
    r.stop()


def test_screenshot_shows_the_drinkers(router, tmp_path):
    drinkers = Drinkers(router)
    try:
        drinkers.add("ann", "kitchen")
        drinkers.add("ben")
        shot = tmp_path / "biff.png"
        sent_before = [b.sent for b in drinkers.biffs]
        result = run_biff("--elvin", router.url, "--user", "me", "--screenshot", str(shot))
        assert result.returncode == 0, result.stderr
        image = QImage(str(shot))
        assert not image.isNull() and image.width() >= 300 and image.height() >= 150
        # the app left cleanly: the drinkers saw "me" come and go (the departure,
        # not expiry: that would take 90 s)
        assert f"screenshot saved to {shot}: 2 having a coffee: ann — kitchen, ben" \
            in result.stdout
        for _ in range(100):
            if all("me" not in {m.user for m in b.members} for b in drinkers.biffs):
                break
            time.sleep(0.02)
        assert all("me" not in {m.user for m in b.members} for b in drinkers.biffs)
        # they answered "me" (no heartbeat within 60 s could explain it)
        assert all(b.sent > n for b, n in zip(drinkers.biffs, sent_before, strict=True))
    finally:
        drinkers.close()


def test_screenshot_of_an_empty_room(router, tmp_path):
    shot = tmp_path / "empty.png"
    result = run_biff("--elvin", router.url, "--screenshot", str(shot))
    assert result.returncode == 0, result.stderr
    assert "Nobody is having a coffee right now" in result.stdout
    assert not QImage(str(shot)).isNull()
