"""``elvin-desktop-install``: the apps in the desktop's menu, with icons.

Writes, for the current user, what the freedesktop specifications ask for:

* a menu entry per app (Desktop Entry Specification 1.4 and later):
  ``$XDG_DATA_HOME/applications/elvin-tickertape.desktop``, ``elvin-biff``,
  ``elvin-console``, whose ``Exec`` is the installed command (absolute, so
  the entry works from a virtualenv that is not on the menu's PATH);
* their icons (Icon Theme Specification): SVG in
  ``$XDG_DATA_HOME/icons/hicolor/scalable/apps`` and PNG renderings at the
  usual sizes beside it, where Qt's SVG module is installed;
* with ``--autostart``, the tickertape's entry in ``$XDG_CONFIG_HOME/autostart``
  (Desktop Application Autostart Specification), so it starts with the
  session.

Then the desktop's caches are refreshed where their tools exist
(``update-desktop-database``, ``gtk-update-icon-cache``). ``--uninstall``
removes exactly these files. Run again, it rewrites only what changed.
``make run`` calls ``install(quiet=True)``.

Exit status: 0 done, 1 usage error, 3 a file could not be written.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from elvin_apps.suite import APPS, SuiteApp

from elvin.cli_common import EXIT_FAILURE, EXIT_OK
from elvin.daemon.xdg import config_home, data_home
from elvin.fileutil import atomic_write

__all__ = ["Installation", "desktop_entry", "install", "main", "uninstall"]

PROG = "elvin-desktop-install"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256)
#: what each app is, in the menu's categories (Desktop Menu Specification)
CATEGORIES = {
    "tickertape": "Network;Chat;InstantMessaging;Qt;",
    "biff": "Network;Chat;Qt;",
    "console": "Development;Qt;",
}
KEYWORDS = {
    "tickertape": "elvin;chat;ticker;news;notification;",
    "biff": "elvin;coffee;presence;biff;",
    "console": "elvin;publish;subscribe;router;debug;mqtt;",
}
GENERIC_NAMES = {"tickertape": "Chat ticker", "biff": "Presence biff",
                 "console": "Publish/subscribe console"}


@dataclass
class Installation:
    """Where things go (the user's XDG directories by default)."""

    data: Path = field(default_factory=data_home)
    config: Path = field(default_factory=config_home)

    @property
    def applications(self) -> Path:
        return self.data / "applications"

    @property
    def icons(self) -> Path:
        return self.data / "icons" / "hicolor"

    @property
    def autostart(self) -> Path:
        return self.config / "autostart"

    def entry(self, app: SuiteApp) -> Path:
        return self.applications / f"{app.icon}.desktop"

    def autostart_entry(self, app: SuiteApp) -> Path:
        return self.autostart / f"{app.icon}.desktop"

    def svg(self, app: SuiteApp) -> Path:
        return self.icons / "scalable" / "apps" / f"{app.icon}.svg"

    def png(self, app: SuiteApp, size: int) -> Path:
        return self.icons / f"{size}x{size}" / "apps" / f"{app.icon}.png"

    def files(self, app: SuiteApp) -> list[Path]:
        """Every file an install may write for ``app``."""
        return [self.entry(app), self.autostart_entry(app), self.svg(app),
                *(self.png(app, size) for size in PNG_SIZES)]


def exec_argument(text: str) -> str:
    """One argument of an ``Exec`` key, quoted as the Desktop Entry
    Specification says (double quotes, with ``"`` `` ` `` ``$`` ``\\`` escaped,
    when it holds a reserved character; ``%`` doubled)."""
    text = text.replace("%", "%%")
    reserved = set(" \t\n\"'\\><~|&;$*?#()`")
    if not any(ch in reserved for ch in text):
        return text
    escaped = "".join("\\" + ch if ch in '"`$\\' else ch for ch in text)
    return f'"{escaped}"'


def command_line(app: SuiteApp) -> list[str]:
    """How to start ``app``: its console script beside this Python (a
    virtualenv's bin), else this Python with ``-m``."""
    script = Path(sys.executable).parent / app.command
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", app.module]


def _escape_value(text: str) -> str:
    """A string value of a desktop entry (``\\n``, ``\\t``, ``\\\\`` escaped)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def desktop_entry(app: SuiteApp, *, autostart: bool = False) -> str:
    """The text of ``app``'s desktop entry (the autostart copy says so)."""
    lines = [
        "[Desktop Entry]",
        "Type=Application",
        "Version=1.4",         # what desktop-file-validate knows; nothing newer is used
        f"Name={_escape_value(app.title)}",
        f"GenericName={_escape_value(GENERIC_NAMES[app.name])}",
        f"Comment={_escape_value(app.comment)}",
        f"Exec={' '.join(exec_argument(a) for a in command_line(app))}",
        f"TryExec={_escape_value(command_line(app)[0])}",
        f"Icon={app.icon}",
        "Terminal=false",
        f"Categories={CATEGORIES[app.name]}",
        f"Keywords={KEYWORDS[app.name]}",
        "StartupNotify=true",
        f"StartupWMClass={app.command}",
    ]
    if autostart:
        lines.append("X-GNOME-Autostart-enabled=true")
    return "\n".join(lines) + "\n"


def _write(path: Path, data: bytes | str, changed: list[Path], mode: int = 0o644) -> None:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        if path.read_bytes() == raw:
            return
    except OSError:
        pass
    atomic_write(path, raw, mode=mode)
    changed.append(path)


def _icon_svg(app: SuiteApp) -> bytes:
    return resources.files("elvin_apps.desktop").joinpath("icons", f"{app.icon}.svg") \
        .read_bytes()


def _png_renderer():
    """A function SVG bytes, size -> PNG bytes, where Qt's SVG module is
    installed (the ``gui`` extra); else None (the SVG alone is enough for
    most desktops)."""
    try:
        from PySide6.QtCore import QBuffer, QByteArray, QIODevice
        from PySide6.QtGui import QGuiApplication, QImage, QPainter
        from PySide6.QtSvg import QSvgRenderer
    except ImportError:
        return None
    if QGuiApplication.instance() is None:
        return None                  # painting needs one; make run's caller has none

    def render(svg: bytes, size: int) -> bytes:
        renderer = QSvgRenderer(QByteArray(svg))
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(0)
        painter = QPainter(image)
        renderer.render(painter)
        painter.end()
        buffer = QBuffer()
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        image.save(buffer, "PNG")
        return bytes(buffer.data())

    return render


def install(where: Installation | None = None, *, autostart: bool | None = None,
            quiet: bool = False) -> list[Path]:
    """Write the entries and icons; returns the files that changed.
    ``OSError`` when one cannot be written. ``autostart`` True writes the
    tickertape's autostart entry, False removes it, None leaves it as the
    user had it (``make run`` does not change that choice)."""
    where = where or Installation()
    render = _png_renderer()
    changed: list[Path] = []
    for app in APPS.values():
        svg = _icon_svg(app)
        _write(where.svg(app), svg, changed)
        if render is not None:
            for size in PNG_SIZES:
                _write(where.png(app, size), render(svg, size), changed)
        _write(where.entry(app), desktop_entry(app), changed)
    tickertape = APPS["tickertape"]
    if autostart:
        _write(where.autostart_entry(tickertape), desktop_entry(tickertape, autostart=True),
               changed)
    elif autostart is False and where.autostart_entry(tickertape).exists():
        where.autostart_entry(tickertape).unlink()
        changed.append(where.autostart_entry(tickertape))
    elif autostart is None and where.autostart_entry(tickertape).exists():
        # keep the user's choice, with the command of this install
        _write(where.autostart_entry(tickertape), desktop_entry(tickertape, autostart=True),
               changed)
    if changed:
        _refresh_caches(where)
    if not quiet:
        if changed:
            print(summary(changed, where))
        else:
            print(f"{PROG}: already installed in {where.applications}")
    return changed


def summary(changed: list[Path], where: Installation) -> str:
    """One line for what an install changed (it writes a file per icon
    size: 27 "wrote" lines said less than this one)."""
    written = [p for p in changed if p.exists()]
    entries = [p for p in written if p.suffix == ".desktop" and p.parent == where.applications]
    icons = [p for p in written if p.is_relative_to(where.icons)]
    parts = []
    if entries:
        parts.append(f"{len(entries)} menu entr{'y' if len(entries) == 1 else 'ies'} in "
                     f"{where.applications}")
    if icons:
        parts.append(f"{len(icons)} icon{'s' if len(icons) != 1 else ''} in {where.icons}")
    if any(p.parent == where.autostart for p in written):
        parts.append(f"the tickertape's autostart entry in {where.autostart}")
    if any(not p.exists() for p in changed):
        parts.append("removed the autostart entry")
    return f"{PROG}: wrote " + "; ".join(parts) if written else f"{PROG}: " + "; ".join(parts)


def uninstall(where: Installation | None = None, *, quiet: bool = False) -> list[Path]:
    """Remove every file ``install`` may have written; returns them."""
    where = where or Installation()
    removed = []
    for app in APPS.values():
        for path in where.files(app):
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            removed.append(path)
    if removed:
        _refresh_caches(where)
    if not quiet:
        if removed:
            print(f"{PROG}: removed {len(removed)} files (menu entries, icons, autostart) "
                  f"from {where.applications.parent} and {where.autostart}")
        if not removed:
            print(f"{PROG}: nothing installed in {where.applications}")
    return removed


def _refresh_caches(where: Installation) -> None:
    """The menu's and the icon theme's caches, where their tools exist (a
    desktop without them reads the directories directly)."""
    for tool, argument in (("update-desktop-database", where.applications),
                           ("gtk-update-icon-cache", where.icons)):
        path = shutil.which(tool)
        if path is None or not argument.is_dir():
            continue
        extra = ["--quiet", "--ignore-theme-index"] if tool == "gtk-update-icon-cache" else \
            ["--quiet"]
        try:
            subprocess.run([path, *extra, str(argument)], capture_output=True, timeout=30,
                           check=False)
        except (OSError, subprocess.SubprocessError):
            pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Put the Elvin suite's desktop apps (tickertape, coffee biff, "
                               "console) in your desktop's applications menu, with icons.",
        epilog="Files go to $XDG_DATA_HOME (~/.local/share) and, with --autostart, "
               "$XDG_CONFIG_HOME/autostart (~/.config/autostart).")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--autostart", action="store_true", default=None,
                       help="also start the tickertape when you log in")
    start.add_argument("--no-autostart", dest="autostart", action="store_false",
                       help="no longer start the tickertape when you log in")
    parser.add_argument("--uninstall", action="store_true",
                        help="remove the menu entries, icons and autostart entry")
    parser.add_argument("--quiet", "-q", action="store_true", help="say nothing when it works")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.uninstall and args.autostart is not None:
        print(f"{PROG}: --uninstall removes everything; leave out --autostart / "
              "--no-autostart", file=sys.stderr)
        return 1
    app = None
    if not args.uninstall:
        try:   # PNG icons need a QGuiApplication (offscreen: no display needed)
            from PySide6.QtGui import QGuiApplication
            app = QGuiApplication.instance() or QGuiApplication([PROG, "-platform",
                                                                 "offscreen"])
        except ImportError:
            app = None
    try:
        if args.uninstall:
            uninstall(quiet=args.quiet)
        else:
            install(autostart=args.autostart, quiet=args.quiet)
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        print(f"{PROG}: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILURE
    del app
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
