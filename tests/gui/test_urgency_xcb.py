"""The biff's alert sets the ICCCM urgency hint (WM_HINTS' UrgencyHint),
which Qt's alert does not, and clears it when the window is activated; on
a real X server (Xvfb), read back from the server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.gui.test_desktop_xcb import xvfb  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys
from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication, QLabel
from elvin.qt.dock import _x11
from elvin.qt.urgency import URGENCY_HINT, alert, set_urgency

app = QApplication([])
window = QLabel("biff")
window.show()
app.processEvents()
x11 = _x11()
flags = lambda: (x11.cardinals(int(window.winId()), "WM_HINTS") or [0])[0]
before = flags() & URGENCY_HINT
assert set_urgency(window, True)
urgent = flags() & URGENCY_HINT
QApplication.sendEvent(window, QEvent(QEvent.Type.WindowDeactivate))
alert(window)
app.processEvents()
QApplication.sendEvent(window, QEvent(QEvent.Type.WindowActivate))
after = flags() & URGENCY_HINT
print(before, urgent, after, flags() & 1)
"""


def test_the_alert_sets_and_clears_the_icccm_urgency_hint(xvfb):  # noqa: F811
    env = {**os.environ, "DISPLAY": xvfb, "QT_QPA_PLATFORM": "xcb", "PYTHONPATH": str(ROOT)}
    env.pop("WAYLAND_DISPLAY", None)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    before, urgent, after, input_flag = (int(v) for v in out.stdout.split())
    assert before == 0 and urgent == 256 and after == 0
    assert input_flag == 1           # Qt's own hints (InputHint) are kept
