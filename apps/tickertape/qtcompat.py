"""A guard against reference-count bugs in PySide6 6.12.0.

With PySide6 6.12.0 on CPython 3.11 (measured here; 6.11.3 is fine):

* every ``SignalInstance.emit()`` called from Python returns ``True`` without
  taking a reference to it, so each emit drops one reference of ``True``;
* Python overrides of virtual methods called from C++ (``paintEvent``,
  ``resizeEvent``, ...) drop about one reference of ``None`` per call.

After a few hundred emits, or a minute of 60 fps painting, the refcount
reaches zero and the interpreter aborts ("Fatal Python error:
bool_dealloc" / "none_dealloc"). A ticker paints and emits all the time, so
it would crash within a minute.

Two guards, applied only when the bug is present (measured at import, plus
the known-bad version): :func:`emit` gives back the reference each emit loses,
and :func:`protect_singletons` raises the refcounts of ``None``, ``True`` and
``False`` by 2**40 so that the leaks elsewhere cannot bring them to zero
(CPython 3.12+ makes these objects immortal anyway, and is left alone). The
real fix is a PySide6 without the bug: the suite should pin
``PySide6-Essentials!=6.12.0``.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import PySide6
from PySide6.QtCore import QObject, Signal

_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]
_incref.restype = None


class _Probe(QObject):
    ping = Signal()


def _measure() -> int:
    probe = _Probe()
    rounds = 16
    before = sys.getrefcount(True)
    for _ in range(rounds):
        probe.ping.emit()
    lost = before - sys.getrefcount(True)
    _give_back(lost)
    return max(0, round(lost / rounds))


def _give_back(count: int, value: object = True) -> None:
    for _ in range(count):
        _incref(value)


LOST_PER_EMIT = _measure()
AFFECTED = LOST_PER_EMIT > 0 or PySide6.__version__ == "6.12.0"
_protected = False


def protect_singletons() -> bool:
    """Make ``None``/``True``/``False`` safe from the leaks (see the module
    docstring); returns True when it did something."""
    global _protected
    if _protected or not AFFECTED or sys.version_info >= (3, 12) \
            or sys.implementation.name != "cpython":
        return False
    for obj in (None, True, False):
        ctypes.c_ssize_t.from_address(id(obj)).value += 1 << 40
    _protected = True
    return True


protect_singletons()


def emit(signal: Any, *args: Any) -> None:
    """``signal.emit(*args)``, compensating the PySide6 refcount bug."""
    result = signal.emit(*args)
    if LOST_PER_EMIT and isinstance(result, bool):
        _give_back(LOST_PER_EMIT, result)


