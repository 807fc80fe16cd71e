"""The docked bar when monitors come and go.

Qt's offscreen platform can have two screens (a configuration file), but
only when the application starts with it, so the checks run in a child
process: a bar docked on the right-hand monitor moves to the left one when
``screenRemoved`` says the right one went, goes back when asked again while
the right one is there, docks somewhere sensible when the screen it
remembers (by name) is not plugged in, and follows the window when the
window system moves it to another screen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import os, sys
from PySide6.QtWidgets import QApplication, QLabel
from elvin.qt.dock import EdgeDock

app = QApplication([])
left, right = app.screens()
problems = []

def check(what, ok):
    if not ok:
        problems.append(what)

window = QLabel("bar")
dock = EdgeDock(window, "top", right)
bar = dock.dock()                      # before it is shown, as the tickertape does
window.show()
app.processEvents()
check(f"docked on the right-hand screen: {bar}", right.geometry().contains(bar))

app.screenRemoved.emit(right)          # what Qt says when the monitor is unplugged
check(f"moved to the left-hand screen: {window.geometry()}",
      left.geometry().contains(window.geometry()) and dock.docked)
check(f"the bar is as wide as its new screen: {window.geometry()} {dock.bar}", window.width() == left.geometry().width())
# (Qt has taken the screen out of screens() by then; here it is still there,
# which is the monitor plugged in again)
again = dock.dock()
check(f"back on the right-hand screen: {again}", right.geometry().contains(again))

gone = QLabel("bar")
gone_dock = EdgeDock(gone, "bottom", "HDMI-unplugged")
placed = gone_dock.dock()
gone.show()
check(f"a screen that is not there: docked on one that is: {placed}",
      gone_dock.screen is None and left.geometry().contains(placed)
      and placed.bottom() == left.availableGeometry().bottom())

moved = QLabel("bar")
moved_dock = EdgeDock(moved, "top")
moved_dock.dock()
moved.show()
app.processEvents()
check(f"docked on the window's screen: {moved_dock.bar}", left.geometry().contains(moved_dock.bar))
moved.windowHandle().setScreen(right)  # the window system moved the window
app.processEvents()
check(f"followed the window to its new screen: {moved_dock.bar}",
      right.geometry().contains(moved_dock.bar))

print("\\n".join(problems) if problems else "OK")
sys.stdout.flush()
os._exit(0)
"""


def test_the_bar_follows_screens_that_come_and_go(tmp_path):
    screens = [{"name": name, "x": x, "y": 0, "width": width, "height": height,
                "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}
               for name, x, width, height in (("LEFT", 0, 800, 600),
                                              ("RIGHT", 800, 1024, 768))]
    config = tmp_path / "screens.json"
    config.write_text(json.dumps({"screens": screens}))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, QT_QPA_PLATFORM=f"offscreen:configfile={config}")
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "OK", done.stdout + done.stderr
