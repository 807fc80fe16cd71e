"""Docks that share a screen edge, on a real X server with a window manager.

Two Elvin bars docked at the same edge stack one under the other and stay
there (each once chased the other down the screen, reserving half of it); a
panel of another program that comes and goes is followed at once, leaving no
dead gap; and the work area, which is what maximised windows get, is the
strip the bars really cover. Each bar and the panel is its own process, as
on a desktop; the checks read the X server (xwininfo, xprop) as the window
manager sees it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from elvin.qt.dock import first_free
from tests.gui.test_desktop_xcb import (  # noqa: F401 - fixtures
    _cardinals,
    _window_geometry,
    _xprop,
    desktop_1024,
    shared_desktop_1024,
)
from tests.integration.process_util import stop
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]

BAR = """
import sys
from PySide6.QtWidgets import QApplication, QLabel
from elvin.qt.dock import EdgeDock
app = QApplication([])
bar = QLabel(sys.argv[1])
bar.setWindowTitle(sys.argv[1])
bar.setFixedHeight(int(sys.argv[3]))
EdgeDock(bar, sys.argv[2]).dock()
bar.show()
app.exec()
"""

#: a panel of another program: a dock window that reserves its own 30 px
#: at the top of the screen and knows nothing of the bars
PANEL = """
import signal
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QLabel
from elvin.qt.dock import _x11
app = QApplication([])
panel = QLabel("panel")
panel.setWindowTitle("panel")
panel.setWindowFlags(Qt.WindowType.FramelessWindowHint)
panel.setGeometry(0, 0, 1024, 30)
x11 = _x11()
wid = int(panel.winId())

def strut(height):
    x11.set(wid, "_NET_WM_STRUT_PARTIAL", x11.CARDINAL,
            [0, 0, height, 0, 0, 0, 0, 0, 0, 1023, 0, 0])
    x11.flush()

x11.set(wid, "_NET_WM_WINDOW_TYPE", x11.ATOM, [x11.atom("_NET_WM_WINDOW_TYPE_DOCK")])
strut(30)
# SIGUSR1: the panel grows to 40 px (a bigger font, a second row)
signal.signal(signal.SIGUSR1, lambda *_: (panel.setGeometry(0, 0, 1024, 40), strut(40)))
ticks = QTimer()
ticks.timeout.connect(lambda: None)     # lets Python run its signal handler
ticks.start(100)
panel.show()
app.exec()
"""


def _env(tmp_path: Path, display: str) -> dict[str, str]:
    env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb", HOME=str(tmp_path),
               XDG_RUNTIME_DIR=str(tmp_path / "run"), PYTHONPATH=str(ROOT))
    env.pop("WAYLAND_DISPLAY", None)
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)
    return env


def _window(display: str, title: str) -> str | None:
    out = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", f"^{title}$"],
                         capture_output=True, text=True, timeout=10,
                         env={**os.environ, "DISPLAY": display}).stdout.split()
    return out[0] if out else None


class Desktop:
    """The processes started on the display, and what the X server says."""

    def __init__(self, display: str, tmp_path: Path) -> None:
        self.display, self.env = display, _env(tmp_path, display)
        self.processes: dict[str, subprocess.Popen] = {}
        self.windows: dict[str, str] = {}

    def start(self, title: str, source: str, *args: str) -> None:
        process = subprocess.Popen([sys.executable, "-c", source, title, *args], env=self.env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.processes[title] = process
        self.windows[title] = wait_until(
            lambda: process.poll() is not None or _window(self.display, title), 60,
            f"the window {title!r} to be mapped", interval=0.2)
        assert process.poll() is None, process.stdout.read().decode(errors="replace")

    def quit(self, title: str) -> None:
        stop(self.processes.pop(title))
        self.windows.pop(title)

    def top(self, title: str) -> int:
        return _window_geometry(self.display, self.windows[title])[1]

    def workarea(self) -> list[int]:
        return _cardinals(_xprop(self.display, "-root"), "_NET_WORKAREA")[:4]

    def settle(self, what: str, tops: dict[str, int], workarea: list[int]) -> None:
        """Wait until the windows are at ``tops`` and the work area is ``workarea``."""
        def there() -> bool:
            return all(self.top(t) == y for t, y in tops.items()) and \
                self.workarea() == workarea
        try:
            wait_until(there, 30, what, interval=0.2)
        except AssertionError as exc:
            now = {t: self.top(t) for t in self.windows}
            raise AssertionError(f"{exc}: windows at {now}, work area {self.workarea()}") \
                from None

    def close(self) -> None:
        for process in self.processes.values():
            stop(process)


@pytest.fixture
def desktop(desktop_1024, tmp_path):  # noqa: F811 - the fixture imported above
    found = Desktop(desktop_1024, tmp_path)
    try:
        yield found
    finally:
        found.close()


def test_two_bars_and_a_panel_that_comes_and_goes_share_the_top_edge(desktop):
    h = 24
    desktop.start("panel", PANEL)
    desktop.settle("the panel's strip", {"panel": 0}, [0, 30, 1024, 768 - 30])
    desktop.start("bar-one", BAR, "top", str(h))
    desktop.settle("the first bar below the panel", {"bar-one": 30},
                   [0, 30 + h, 1024, 768 - 30 - h])
    desktop.start("bar-two", BAR, "top", str(h))
    desktop.settle("the second bar below the first, the first where it was",
                   {"bar-one": 30, "bar-two": 30 + h}, [0, 30 + 2 * h, 1024, 768 - 30 - 2 * h])
    desktop.quit("panel")
    desktop.settle("both bars up to the edge once the panel has gone",
                   {"bar-one": 0, "bar-two": h}, [0, 2 * h, 1024, 768 - 2 * h])
    desktop.quit("bar-one")
    desktop.settle("the second bar at the edge once the first has gone",
                   {"bar-two": 0}, [0, h, 1024, 768 - h])
    desktop.start("panel", PANEL)
    desktop.settle("the bar makes room for a panel that comes back",
                   {"panel": 0, "bar-two": 30}, [0, 30 + h, 1024, 768 - 30 - h])


def test_a_panel_that_grows_under_an_unchanged_work_area_is_followed(desktop):
    """A bar below a panel reserves both strips (its strut reaches the
    edge), so when the panel grows the work area's value stays the same and
    Qt says nothing: the bar hears the window manager write it again (the
    root window's PropertyNotify) and moves down."""
    h = 24
    desktop.start("panel", PANEL)
    desktop.start("bar-one", BAR, "top", str(h))
    desktop.settle("the bar below the panel", {"bar-one": 30}, [0, 30 + h, 1024, 768 - 30 - h])
    desktop.processes["panel"].send_signal(signal.SIGUSR1)
    desktop.settle("the bar below the grown panel", {"bar-one": 40},
                   [0, 40 + h, 1024, 768 - 40 - h])


def test_two_bars_share_the_bottom_edge(desktop):
    h = 20
    desktop.start("low-one", BAR, "bottom", str(h))
    desktop.settle("the first bar at the bottom", {"low-one": 768 - h}, [0, 0, 1024, 768 - h])
    desktop.start("low-two", BAR, "bottom", str(h))
    desktop.settle("the second bar above the first", {"low-one": 768 - h, "low-two": 768 - 2 * h},
                   [0, 0, 1024, 768 - 2 * h])
    desktop.quit("low-one")
    desktop.settle("the second bar at the edge", {"low-two": 768 - h}, [0, 0, 1024, 768 - h])


def test_first_free_goes_by_where_docks_are_not_by_their_struts():
    # a panel 0..30 and a bar 30..54 (whose strut reaches back to the edge)
    bands = [(0, 1023, 0, 30), (0, 1023, 30, 54)]
    assert first_free(bands, (0, 1023), 0, 24) == 54
    assert first_free([(0, 1023, 30, 54)], (0, 1023), 0, 24) == 0   # the gap above is free
    assert first_free([(0, 1023, 30, 54)], (0, 1023), 0, 40) == 54  # too narrow a gap
    assert first_free([(1024, 2047, 0, 30)], (0, 1023), 0, 24) == 0  # another monitor's
    assert first_free([(0, 1023, 0, 30)], (0, 1023), 100, 24) == 100  # a lower screen
