"""The apps on a real X server (Xvfb) with Qt's xcb platform, not offscreen.

What a newcomer on a desktop meets with ``make run``: the tickertape's window is
mapped on the display, and when Qt cannot use the display ``make run`` says why
in one line instead of letting Qt abort. With a window manager (openbox) on a
1024x768 screen: the tickertape is a docked bar that reserves its strip
(``_NET_WM_STRUT_PARTIAL``: the work area shrinks), at the top or the bottom;
the console fits the screen; ``make run`` puts the apps in the menu.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from elvin.daemon.display_check import (
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


def _start_xvfb(size: str):
    """A private Xvfb of ``size`` (e.g. ``1024x768``): (process, DISPLAY).
    Skipped only where no X server can be started (no Xvfb: make test's
    scripts/ensure-system-packages.sh installs it)."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed, so no X server can be started")
    # -displayfd: the server picks a free display itself and writes its number
    # when it is ready (other people's tests start X servers on this machine too);
    # -noreset: it does not restart when its last client leaves, which would
    # refuse the next one (a window manager, an app) for a moment
    read_end, write_end = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-noreset", "-screen",
                               "0", f"{size}x24", "-nolisten", "tcp"], pass_fds=(write_end,),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(write_end)
    with os.fdopen(read_end) as numbers:
        number = numbers.readline().strip()
    if not number.isdigit() or server.poll() is not None:
        stop(server)
        pytest.skip(f"no X server could be started: "
                    f"{server.stderr.read().decode(errors='replace').strip()[-200:]}")
    display = f":{number}"
    wait_until(lambda: x_server_answers(display) or server.poll() is not None, 20,
               f"Xvfb on {display}")
    return server, display


@pytest.fixture
def xvfb():
    """A private Xvfb; yields its DISPLAY."""
    server, display = _start_xvfb("1280x800")
    try:
        yield display
    finally:
        stop(server)


def _xprop(display: str, *args: str) -> str:
    return subprocess.run(["xprop", *args], capture_output=True, text=True, timeout=10,
                          env={**os.environ, "DISPLAY": display}).stdout


def _cardinals(text: str, name: str) -> list[int]:
    found = re.search(rf"^{name}\(CARDINAL\) = ([\d, ]+)$", text, re.MULTILINE)
    return [int(v) for v in found.group(1).split(",")] if found else []


@pytest.fixture(scope="module")
def shared_desktop_1024():
    """A 1024x768 Xvfb with openbox managing it (a real window manager that
    honours struts); yields its DISPLAY once openbox has taken the screen.
    One for the module (starting them is most of a test's time): see
    ``desktop_1024``."""
    server, display = _start_xvfb("1024x768")
    manager = None
    try:
        assert shutil.which("openbox") and shutil.which("xprop"), \
            "openbox and xprop are installed by make test (ensure-system-packages.sh)"
        manager = subprocess.Popen(["openbox", "--sm-disable"],
                                   env={**os.environ, "DISPLAY": display},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(lambda: manager.poll() is not None or
                   "_NET_SUPPORTING_WM_CHECK(WINDOW)" in _xprop(display, "-root"), 20,
                   "openbox to manage the screen")
        assert manager.poll() is None, \
            f"openbox exited: {manager.stderr.read().decode(errors='replace')}"
        yield display
    finally:
        if manager is not None:
            stop(manager)
        stop(server)


@pytest.fixture
def desktop_1024(shared_desktop_1024):
    """The module's desktop, once the apps an earlier test started are gone:
    no bar reserves a strip any more (the work area is the whole screen)."""
    wait_until(lambda: _cardinals(_xprop(shared_desktop_1024, "-root"),
                                  "_NET_WORKAREA")[:4] in ([0, 0, 1024, 768], []), 30,
               "the whole 1024x768 screen to be free")
    return shared_desktop_1024


def _window_geometry(display: str, window: str) -> tuple[int, int, int, int]:
    out = subprocess.run(["xwininfo", "-id", window], capture_output=True, text=True,
                         timeout=10, env={**os.environ, "DISPLAY": display}).stdout
    def value(label: str) -> int:
        return int(re.search(rf"{label}:\s+(-?\d+)", out).group(1))
    return (value("Absolute upper-left X"), value("Absolute upper-left Y"), value("Width"),
            value("Height"))


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
    from elvin.daemon.display_check import _qt_dir

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
    out = subprocess.run([sys.executable, "-m", "elvin.daemon.run"], env=env, capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert f"DISPLAY=:{number} is set but no X server answers there" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr


def _start_app(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _mapped(display: str, app: subprocess.Popen, title: str) -> str:
    windows = wait_until(lambda: app.poll() is not None or _visible_windows(display, title),
                         60, f"the window {title!r} to be mapped", interval=0.2)
    assert app.poll() is None, app.stdout.read().decode(errors="replace")
    return windows[0]


@pytest.mark.parametrize("edge", ["top", "bottom"])
def test_the_tickertape_docks_and_reserves_its_strip(desktop_1024, router_url, tmp_path,
                                                      edge):
    display = desktop_1024
    env = _app_env(tmp_path, display)
    app = _start_app(["elvin_apps.tickertape", "--elvin", router_url, "--no-history",
                      "--dock", edge], env)
    try:
        window = _mapped(display, app, "^Tickertape$")
        def strut_set() -> str | None:
            props = _xprop(display, "-id", window)
            return props if "_NET_WM_STRUT_PARTIAL" in props else None

        props = wait_until(strut_set, 30, "the strut")
        assert "_NET_WM_WINDOW_TYPE_DOCK" in props
        strut = _cardinals(props, "_NET_WM_STRUT_PARTIAL")
        assert len(strut) == 12
        x, y, width, height = wait_until(
            lambda: (g := _window_geometry(display, window))[2] == 1024 and g, 30,
            "the bar to span the screen")
        assert (x, width) == (0, 1024) and 20 <= height <= 80
        if edge == "top":
            assert y == 0 and strut[:4] == [0, 0, height, 0] and strut[8:10] == [0, 1023]
            expected = [0, height, 1024, 768 - height]
        else:
            assert y == 768 - height and strut[:4] == [0, 0, 0, height]
            assert strut[10:12] == [0, 1023]
            expected = [0, 0, 1024, 768 - height]
        # the window manager took it: maximised windows stop short of the bar
        workarea = wait_until(lambda: (w := _cardinals(_xprop(display, "-root"),
                                                       "_NET_WORKAREA"))[:4] == expected
                              and w, 30, "the work area to leave the bar out")
        assert workarea[:4] == expected
    finally:
        stop(app)


def test_the_console_fits_a_1024x768_screen(desktop_1024, router_url, tmp_path):
    display = desktop_1024
    env = _app_env(tmp_path, display)
    app = _start_app(["elvin_apps.console", "--elvin", router_url], env)
    try:
        window = _mapped(display, app, "Elvin console$")
        def inside() -> tuple | None:
            x, y, width, height = _window_geometry(display, window)
            extents = _cardinals(_xprop(display, "-id", window), "_NET_FRAME_EXTENTS")
            if len(extents) != 4:
                return None
            left, right, top, bottom = extents
            frame = (x - left, y - top, x + width + right, y + height + bottom)
            return frame if frame[0] >= 0 and frame[1] >= 0 and frame[2] <= 1024 \
                and frame[3] <= 768 else None
        frame = wait_until(inside, 30, "the console's frame within the 1024x768 screen")
        assert frame[2] - frame[0] <= 1024 and frame[3] - frame[1] <= 768
    finally:
        stop(app)


def test_make_run_puts_the_apps_in_the_menu(desktop_1024, router_url, tmp_path):
    display = desktop_1024
    env = _app_env(tmp_path, display)
    env["ELVIN_URL"] = router_url
    run = subprocess.Popen([sys.executable, "-m", "elvin.daemon.run"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _mapped(display, run, "^Tickertape$")
        applications = tmp_path / "data" / "applications"
        for name in ("elvin-tickertape", "elvin-biff", "elvin-console"):
            assert (applications / f"{name}.desktop").is_file(), name
        assert (tmp_path / "data" / "icons" / "hicolor" / "scalable" / "apps" /
                "elvin-biff.svg").is_file()
    finally:
        os.killpg(run.pid, signal.SIGTERM)       # make run and the tickertape it started
        try:
            run.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
