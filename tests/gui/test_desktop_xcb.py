"""The apps on a real X server (Xvfb) with Qt's xcb platform, not offscreen.

What a newcomer on a desktop meets with ``make run``: the tickertape's window is
mapped on the display, and when Qt cannot use the display ``make run`` says why
in one line instead of letting Qt abort.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from elvin.display_check import (
    debian_package,
    describe_missing,
    display_problem,
    missing_libraries,
    x_server_answers,
)
from tests.integration.process_util import stop
from tests.waiting import wait_until


def _free_display() -> int:
    for number in range(90, 200):
        if not Path(f"/tmp/.X11-unix/X{number}").exists() and not Path(
                f"/tmp/.X{number}-lock").exists():
            return number
    raise RuntimeError("no free X display number in :90-:199")


@pytest.fixture
def xvfb():
    """A private Xvfb; yields its DISPLAY. Skipped only where Xvfb is not
    installed (``scripts/ensure-system-packages.sh`` installs it)."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed")
    number = _free_display()
    server = subprocess.Popen(["Xvfb", f":{number}", "-screen", "0", "1280x800x24",
                               "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    display = f":{number}"
    try:
        wait_until(lambda: x_server_answers(display) or server.poll() is not None, 20,
                   f"Xvfb on {display}")
        if server.poll() is not None:
            pytest.fail(f"Xvfb exited: {server.stderr.read().decode(errors='replace')}")
        yield display
    finally:
        stop(server)


def _app_env(tmp_path: Path, display: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(DISPLAY=display, QT_QPA_PLATFORM="xcb", HOME=str(tmp_path),
               XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("WAYLAND_DISPLAY", None)
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)
    return env


def _visible_windows(display: str, name: str) -> list[str]:
    out = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", name],
                         capture_output=True, text=True, timeout=10,
                         env={**os.environ, "DISPLAY": display})
    return out.stdout.split()


def test_the_tickertape_maps_its_window_on_a_real_x_server(xvfb, router_url, tmp_path):
    if shutil.which("xdotool") is None:
        pytest.skip("xdotool is not installed")
    env = _app_env(tmp_path, xvfb)
    assert display_problem(env) is None        # every xcb library is installed
    app = subprocess.Popen([sys.executable, "-m", "elvin_apps.tickertape",
                            "--elvin", router_url, "--no-history"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        windows = wait_until(
            lambda: app.poll() is not None or _visible_windows(xvfb, "^Tickertape$"),
            30, "the tickertape window to be mapped", interval=0.2)
        assert app.poll() is None, app.stdout.read().decode(errors="replace")
        assert windows
    finally:
        stop(app)


def test_missing_xcb_libraries_are_named_with_their_packages(tmp_path):
    """A copy of the xcb plugin away from Qt's own libraries: ``ldd`` really
    reports libraries missing, and the message names them."""
    from elvin.display_check import _qt_dir

    qt = _qt_dir()
    if qt is None or shutil.which("ldd") is None:
        pytest.skip("PySide6 or ldd not available")
    fake = tmp_path / "Qt"
    (fake / "plugins" / "platforms").mkdir(parents=True)
    (fake / "lib").mkdir()
    shutil.copy(qt / "plugins" / "platforms" / "libqxcb.so",
                fake / "plugins" / "platforms" / "libqxcb.so")
    missing = missing_libraries(fake)
    assert "libQt6XcbQpa.so.6" in missing
    problem = display_problem({"DISPLAY": ":0"}, qt_dir=fake)
    assert problem is not None
    assert "libQt6XcbQpa.so.6" in problem and "reinstall PySide6-Essentials" in problem
    assert "apt-get" not in problem             # no Debian package ships Qt's own libraries
    assert missing_libraries(qt) == []          # the real install lacks nothing


def test_missing_system_libraries_name_their_debian_packages():
    text = describe_missing(["libxcb-icccm.so.4", "libxcb-keysyms.so.1"], ":0")
    assert text.startswith("a display is set (DISPLAY=:0) but Qt's xcb platform cannot load")
    assert "sudo apt-get install libxcb-icccm4 libxcb-keysyms1" in text


@pytest.mark.parametrize(("soname", "package"), [
    ("libxcb-icccm.so.4", "libxcb-icccm4"),
    ("libxcb-keysyms.so.1", "libxcb-keysyms1"),
    ("libxcb-cursor.so.0", "libxcb-cursor0"),
    ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
    ("libX11-xcb.so.1", "libx11-xcb1"),
])
def test_debian_package_names_follow_the_library_naming_policy(soname, package):
    assert debian_package(soname) == package


def test_make_run_says_why_when_no_x_server_answers(router_url, tmp_path):
    number = _free_display()
    env = _app_env(tmp_path, f":{number}")
    env["ELVIN_URL"] = router_url
    out = subprocess.run([sys.executable, "-m", "elvin.run"], env=env, capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert f"DISPLAY=:{number} is set but no X server answers there" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr
