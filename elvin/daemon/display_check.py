"""Can Qt show a window on this desktop? Ask before starting a GUI app.

Why this exists: when Qt's xcb platform plugin cannot load (a shared library it
links against is missing) or the X server named by ``DISPLAY`` does not answer,
Qt prints a long plugin-search message and aborts the process with SIGABRT. A
user who typed ``make run`` learns nothing from that. This module finds the
cause first, without importing Qt (so it cannot abort itself), and says it in
one sentence naming the missing libraries and the Debian packages that hold
them.

Only the xcb (X11) platform is checked: it is the one whose system libraries
the PySide6 wheels do not ship. Wayland and explicit ``QT_QPA_PLATFORM``
choices other than xcb are left to Qt.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["debian_package", "describe_missing", "display_problem", "missing_libraries",
           "parse_ldd_missing", "uses_xcb", "x_server_answers"]

_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.MULTILINE)
# libraries the PySide6 wheel ships itself: no Debian package provides them
_WHEEL_LIBRARIES = ("libQt6", "libpyside6", "libshiboken6")
_SONAME = re.compile(r"^lib(?P<name>.+?)\.so\.(?P<major>\d+)")


def uses_xcb(env: Mapping[str, str] | None = None) -> bool:
    """Whether Qt would pick its xcb platform in this environment."""
    env = os.environ if env is None else env
    chosen = env.get("QT_QPA_PLATFORM", "")
    if chosen:
        return chosen.split(":", 1)[0].split(";", 1)[0] == "xcb"
    # Qt picks xcb by default only on X11 systems (macOS has DISPLAY under XQuartz,
    # but Qt uses its cocoa platform there)
    if not sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return False
    return bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY")


def parse_ldd_missing(ldd_output: str) -> list[str]:
    """The sonames ``ldd`` reported as ``not found``, in order, once each."""
    seen: dict[str, None] = {}
    for match in _NOT_FOUND.finditer(ldd_output):
        seen.setdefault(match.group(1))
    return list(seen)


def debian_package(soname: str) -> str:
    """The Debian package that ships ``soname``, by Debian's library naming
    policy: ``libxcb-icccm.so.4`` is in ``libxcb-icccm4``; a name that ends in
    a digit takes a hyphen (``libxkbcommon-x11.so.0`` -> ``libxkbcommon-x11-0``)."""
    match = _SONAME.match(soname)
    if match is None:
        return soname
    name, major = match.group("name").lower(), match.group("major")
    sep = "-" if name[-1].isdigit() else ""
    return f"lib{name}{sep}{major}"


def _qt_dir() -> Path | None:
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    qt = Path(next(iter(spec.submodule_search_locations))) / "Qt"
    return qt if qt.is_dir() else None


def missing_libraries(qt_dir: Path | None = None) -> list[str]:
    """Sonames the xcb platform plugin needs and the system lacks (empty when
    all are there, or when it cannot be told: no PySide6, no ``ldd``)."""
    qt_dir = qt_dir or _qt_dir()
    ldd = shutil.which("ldd")
    if qt_dir is None or ldd is None:
        return []
    candidates = [qt_dir / "plugins" / "platforms" / "libqxcb.so",
                  *sorted((qt_dir / "lib").glob("libQt6XcbQpa.so*"))[:1]]
    env = dict(os.environ)
    # Qt's own libraries are found through the plugin's rpath when Qt loads it;
    # ldd needs to be told, or it would report them missing too
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(qt_dir / "lib"), env.get("LD_LIBRARY_PATH", "")) if p)
    missing: dict[str, None] = {}
    for library in candidates:
        if not library.exists():
            continue
        try:
            out = subprocess.run([ldd, str(library)], capture_output=True, text=True,
                                 env=env, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        for soname in parse_ldd_missing(out):
            missing.setdefault(soname)
    return list(missing)


def x_server_answers(display: str, timeout: float = 2.0) -> bool:
    """Whether an X server accepts connections at ``display`` (``:0``,
    ``host:0``, ``unix:0``); a malformed name counts as not answering."""
    match = re.fullmatch(r"(?P<host>[^:]*):(?P<number>\d+)(\.\d+)?", display.strip())
    if match is None:
        return False
    host, number = match.group("host"), int(match.group("number"))
    try:
        if host in ("", "unix"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                sock.connect(f"/tmp/.X11-unix/X{number}")
            return True
        with socket.create_connection((host, 6000 + number), timeout=timeout):
            return True
    except OSError:
        return False


def describe_missing(missing: list[str], display: str) -> str:
    """The sentence for libraries the xcb plugin lacks, with the fix for each kind."""
    ours = [s for s in missing if s.startswith(_WHEEL_LIBRARIES)]
    system = [s for s in missing if s not in ours]
    fixes = []
    if system:
        packages = " ".join(dict.fromkeys(debian_package(s) for s in system))
        fixes.append(f"install them with: sudo apt-get install {packages}")
    if ours:
        fixes.append("reinstall PySide6-Essentials (its own Qt libraries are incomplete)")
    return (f"a display is set (DISPLAY={display}) but Qt's xcb platform cannot load: "
            f"missing {', '.join(missing)}; {'; '.join(fixes)}")


def display_problem(env: Mapping[str, str] | None = None,
                    qt_dir: Path | None = None) -> str | None:
    """One sentence saying why Qt cannot show a window here, or None when it
    should work (or when the platform is not xcb, which is not checked)."""
    env = os.environ if env is None else env
    if not uses_xcb(env):
        return None
    missing = missing_libraries(qt_dir)
    if missing:
        return describe_missing(missing, env.get("DISPLAY", ""))
    display = env.get("DISPLAY", "")
    if not display:
        return "Qt's xcb platform was chosen but DISPLAY is not set"
    if not x_server_answers(display):
        return f"DISPLAY={display} is set but no X server answers there"
    return None
