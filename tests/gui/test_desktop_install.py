"""``elvin-desktop-install``: menu entries, icons and the autostart entry the
freedesktop specifications ask for (checked by desktop-file-validate), in
private XDG directories; and each app's menu starting the others
(``elvin_apps.suite``), with a clear line when one cannot start."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from elvin_apps.desktop.install import desktop_entry, exec_argument
from elvin_apps.suite import APPS, AppLauncher
from PySide6.QtGui import QImage

from elvin.fileutil import pid_alive

ENTRIES = ("elvin-tickertape", "elvin-biff", "elvin-console")


def xdg_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_STATE_HOME=str(tmp_path / "state"))
    return env


def installer(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "elvin_apps.desktop.install", *args],
                          env=xdg_env(tmp_path), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def validate(path: Path) -> None:
    tool = shutil.which("desktop-file-validate")
    assert tool, "desktop-file-validate (desktop-file-utils) is installed by make test"
    done = subprocess.run([tool, str(path)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def read_entry(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if "=" in line)


def test_install_writes_valid_entries_and_icons_and_uninstall_removes_them(tmp_path):
    done = installer(tmp_path, "--autostart")
    assert done.returncode == 0, done.stderr
    applications = tmp_path / "data" / "applications"
    for name in ENTRIES:
        entry = applications / f"{name}.desktop"
        validate(entry)
        fields = read_entry(entry)
        assert fields["Icon"] == name and fields["Terminal"] == "false"
        command = shlex.split(fields["Exec"])
        assert Path(command[0]).is_file() and os.access(command[0], os.X_OK)
        svg = tmp_path / "data" / "icons" / "hicolor" / "scalable" / "apps" / f"{name}.svg"
        assert svg.read_text().lstrip().startswith("<?xml")
        png = QImage(str(tmp_path / "data" / "icons" / "hicolor" / "48x48" / "apps" /
                         f"{name}.png"))
        assert png.width() == png.height() == 48 and png.pixelColor(24, 30).alpha() > 0
    autostart = tmp_path / "config" / "autostart" / "elvin-tickertape.desktop"
    validate(autostart)
    assert read_entry(autostart)["Exec"] == read_entry(
        applications / "elvin-tickertape.desktop")["Exec"]
    # one line, not a line per file (there were 27)
    assert done.stdout.count("\n") == 1 and "wrote 3 menu entries in" in done.stdout, done.stdout
    assert "icons in" in done.stdout and "autostart entry" in done.stdout

    again = installer(tmp_path)                      # nothing changed; autostart kept
    assert again.returncode == 0 and "already installed" in again.stdout
    assert autostart.exists()
    off = installer(tmp_path, "--no-autostart")
    assert off.returncode == 0 and not autostart.exists()

    gone = installer(tmp_path, "--uninstall")
    assert gone.returncode == 0
    assert not any(p.suffix in (".desktop", ".svg", ".png")
                   for p in (tmp_path / "data").rglob("*elvin-*"))


def test_install_says_what_it_cannot_write(tmp_path):
    (tmp_path / "data").write_text("not a directory")
    done = installer(tmp_path)
    assert done.returncode == 3
    assert done.stderr.startswith("elvin-desktop-install: cannot write ")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    usage = installer(tmp_path, "--uninstall", "--autostart")
    assert usage.returncode == 1 and "--uninstall removes everything" in usage.stderr


@pytest.mark.parametrize(("argument", "quoted"), [
    ("/usr/bin/tickertape", "/usr/bin/tickertape"),
    ("/home/a b/venv/bin/biff", '"/home/a b/venv/bin/biff"'),
    ('/x/"q"$y', '"/x/\\"q\\"\\$y"'),
    ("/x/100%", "/x/100%%"),
])
def test_exec_arguments_are_quoted_as_the_spec_says(argument, quoted):
    assert exec_argument(argument) == quoted


def test_every_entry_names_its_app_once():
    for app in APPS.values():
        text = desktop_entry(app)
        assert text.count("\nName=") == 1 and f"Icon={app.icon}" in text
        assert "X-GNOME-Autostart" not in text


def test_the_launcher_says_why_an_app_did_not_start(qtbot, tmp_path, monkeypatch):
    """The coffee biff given a URL it cannot use exits with an error and says
    why on stderr: the launcher reports that line."""
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    launcher = AppLauncher(log_dir=tmp_path)
    failures: list[str] = []
    launcher.failed.connect(failures.append)
    pid = launcher.launch("biff", "elvin://127.0.0.1:notaport")
    assert pid
    try:
        qtbot.waitUntil(lambda: bool(failures), timeout=30_000)
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGTERM)
    assert failures[0].startswith("Coffee biff stopped: biff: bad Elvin URL "
                                  "'elvin://127.0.0.1:notaport'")
    assert launcher.watching() == []


def test_the_launcher_starts_an_app_that_keeps_running(qtbot, tmp_path, monkeypatch,
                                                       router_url):
    """The biff started is really up (its presence reaches the router), the
    launcher stops watching it without a word, and it keeps running; when it
    quits later it is reaped (no zombie left). The watch is short here; the biff's presence, not the watch, says it started."""
    import elvin.sync

    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    launcher = AppLauncher(log_dir=tmp_path, watch_seconds=1.0)
    failures: list[str] = []
    launcher.failed.connect(failures.append)
    watcher = elvin.sync.connect(router_url)
    presence = watcher.subscribe("require(Presence-Protocol)")
    pid = launcher.launch("biff", router_url)
    try:
        assert presence.get(timeout=60)["Presence-Protocol"] >= 1000
        qtbot.waitUntil(lambda: not launcher.watching() or bool(failures), timeout=60_000)
        assert failures == [] and pid_alive(pid)
        assert launcher.running() == [pid]
        os.kill(pid, signal.SIGTERM)                  # it quits long after the watch:
        qtbot.waitUntil(lambda: not Path(f"/proc/{pid}").exists(), timeout=60_000)
        assert launcher.running() == []               # reaped, no zombie left
    finally:
        watcher.close()
        if pid_alive(pid):
            os.kill(pid, signal.SIGTERM)
